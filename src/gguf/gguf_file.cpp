#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace lift::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;
// Counts read from the file are checked against the bytes left, but a reserve() sized by
// them could still be several times the file size (a Value is far larger than its minimal
// encoding); reserve at most this many up front and let longer lists grow as they are read.
constexpr uint64_t kMaxReserve = 1 << 16;

bool is_valid_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Bounds-checked cursor over the file; every read names what it was reading on failure.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& label) : b_(bytes), label_(label) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(label_ + ": invalid GGUF file: " + what);
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return b_.size() - pos_; }
  const uint8_t* here() const { return b_.data() + pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("truncated while reading ") + what + " at byte " + std::to_string(pos_) +
           " (needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)");
    }
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v = load<T>(here());
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(std::string("string length ") + std::to_string(len) + " of " + what +
           " runs past the end of the file");
    }
    std::string_view s(reinterpret_cast<const char*>(here()), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += static_cast<size_t>(n);
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& label_;
  size_t pos_ = 0;
};

void read_scalar(Cursor& c, ValueType t, Value& v) {
  switch (t) {
    case ValueType::UINT8:
      v.u = c.read<uint8_t>("u8 value");
      break;
    case ValueType::INT8:
      v.i = c.read<int8_t>("i8 value");
      break;
    case ValueType::UINT16:
      v.u = c.read<uint16_t>("u16 value");
      break;
    case ValueType::INT16:
      v.i = c.read<int16_t>("i16 value");
      break;
    case ValueType::UINT32:
      v.u = c.read<uint32_t>("u32 value");
      break;
    case ValueType::INT32:
      v.i = c.read<int32_t>("i32 value");
      break;
    case ValueType::UINT64:
      v.u = c.read<uint64_t>("u64 value");
      break;
    case ValueType::INT64:
      v.i = c.read<int64_t>("i64 value");
      break;
    case ValueType::FLOAT32:
      v.f = c.read<float>("f32 value");
      break;
    case ValueType::FLOAT64:
      v.f = c.read<double>("f64 value");
      break;
    case ValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) c.fail("bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.u = b;
      break;
    }
    default:
      c.fail("internal: not a scalar type");
  }
}

void read_value(Cursor& c, ValueType t, Value& v, int depth, std::string_view key);

void read_array(Cursor& c, Value& v, int depth, std::string_view key) {
  if (depth >= kMaxArrayDepth) c.fail("arrays nested too deeply in key '" + std::string(key) + "'");
  const uint32_t et = c.read<uint32_t>("array element type");
  if (!is_valid_type(et)) {
    c.fail("unknown array element type " + std::to_string(et) + " in key '" + std::string(key) +
           "'");
  }
  v.elem_type = static_cast<ValueType>(et);
  v.count = c.read<uint64_t>("array length");
  // Every element takes at least one byte (strings and arrays at least 8), so a count larger
  // than the bytes left is a lie; checking first keeps allocations bounded by the file size.
  const uint64_t min_elem = v.elem_type == ValueType::STRING || v.elem_type == ValueType::ARRAY
                                ? 8
                                : value_type_size(v.elem_type);
  if (v.count > c.remaining() / min_elem) {
    c.fail("array length " + std::to_string(v.count) + " of key '" + std::string(key) +
           "' runs past the end of the file");
  }
  v.raw = c.here();
  if (v.elem_type == ValueType::STRING) {
    v.strings.reserve(static_cast<size_t>(std::min<uint64_t>(v.count, kMaxReserve)));
    for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(c.read_string("array string"));
  } else if (v.elem_type == ValueType::ARRAY) {
    for (uint64_t k = 0; k < v.count; ++k) {
      Value inner;
      read_value(c, ValueType::ARRAY, inner, depth + 1, key);
    }
  } else if (v.elem_type == ValueType::BOOL) {
    for (uint64_t k = 0; k < v.count; ++k) {
      const uint8_t b = c.read<uint8_t>("bool array element");
      if (b > 1) {
        c.fail("bool value " + std::to_string(b) + " at index " + std::to_string(k) + " of key '" +
               std::string(key) + "' is neither 0 nor 1");
      }
    }
  } else {
    c.skip(v.count * min_elem, "array data");
  }
}

void read_value(Cursor& c, ValueType t, Value& v, int depth, std::string_view key) {
  v.type = t;
  if (t == ValueType::STRING) {
    v.str = c.read_string("string value");
  } else if (t == ValueType::ARRAY) {
    read_array(c, v, depth, key);
  } else {
    read_scalar(c, t, v);
  }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

template <typename Out>
Out array_element_as(const Value& v, uint64_t k) {
  const uint8_t* p = v.raw + k * value_type_size(v.elem_type);
  switch (v.elem_type) {
    case ValueType::UINT8:
      return static_cast<Out>(load<uint8_t>(p));
    case ValueType::INT8:
      return static_cast<Out>(load<int8_t>(p));
    case ValueType::UINT16:
      return static_cast<Out>(load<uint16_t>(p));
    case ValueType::INT16:
      return static_cast<Out>(load<int16_t>(p));
    case ValueType::UINT32:
      return static_cast<Out>(load<uint32_t>(p));
    case ValueType::INT32:
      return static_cast<Out>(load<int32_t>(p));
    case ValueType::UINT64:
      return static_cast<Out>(load<uint64_t>(p));
    case ValueType::INT64:
      return static_cast<Out>(load<int64_t>(p));
    case ValueType::FLOAT32:
      return static_cast<Out>(load<float>(p));
    case ValueType::FLOAT64:
      return static_cast<Out>(load<double>(p));
    case ValueType::BOOL:
      return static_cast<Out>(load<uint8_t>(p));
    default:
      return Out{};
  }
}

bool is_int(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}
bool is_float(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

}  // namespace

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view names[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                               "i32", "f32", "bool", "string", "array",
                                               "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : std::string_view("unknown");
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

struct File::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open model file: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw Error(path + ": invalid GGUF file: the file is empty");
  }
  auto m = std::make_unique<Mapping>();
  m->size = static_cast<size_t>(st.st_size);
  void* addr = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) throw Error(path + ": cannot map model file: " + std::strerror(errno));
  m->addr = addr;
  File f;
  f.bytes_ = {static_cast<const uint8_t*>(addr), m->size};
  f.mapping_ = std::move(m);
  f.label_ = path;
  f.parse_all();
  return f;
}

void File::release(const void* p, size_t n) const {
  if (!mapping_ || n == 0) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + n) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

File File::parse(std::span<const uint8_t> bytes, std::string label) {
  File f;
  f.bytes_ = bytes;
  f.label_ = std::move(label);
  f.parse_all();
  return f;
}

void File::parse_all() {
  Cursor c(bytes_, label_);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) c.fail("bad magic: the file does not start with \"GGUF\"");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) c.fail("GGUF version 1 is obsolete; reconvert the model (v2 or v3 needed)");
  if (version_ != 2 && version_ != 3) {
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (lift reads 2 and 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at
  // least 8 + 4 + 8 + 4 + 8. Counts beyond that are corrupt, and we must not reserve for them.
  if (n_kv > c.remaining() / 13) {
    c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file could hold");
  }
  if (n_tensors > c.remaining() / 32) {
    c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file could hold");
  }

  kv_.reserve(static_cast<size_t>(std::min(n_kv, kMaxReserve)));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string_view key = c.read_string("metadata key");
    if (key.empty()) c.fail("metadata key #" + std::to_string(k) + " is empty");
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!is_valid_type(t)) {
      c.fail("unknown value type " + std::to_string(t) + " for key '" + std::string(key) + "'");
    }
    Value v;
    read_value(c, static_cast<ValueType>(t), v, 0, key);
    if (!kv_index_.emplace(key, kv_.size()).second) {
      c.fail("duplicate metadata key '" + std::string(key) + "'");
    }
    kv_.emplace_back(key, std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::UINT32) c.fail("general.alignment must be a u32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      c.fail("general.alignment " + std::to_string(a->u) + " is not a power of two");
    }
    alignment_ = a->u;
  }

  tensors_.reserve(static_cast<size_t>(std::min(n_tensors, kMaxReserve)));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    ti.name = c.read_string("tensor name");
    const std::string tname = "tensor '" + std::string(ti.name) + "'";
    ti.n_dims = c.read<uint32_t>("tensor dimension count");
    if (ti.n_dims == 0 || ti.n_dims > kMaxDims) {
      c.fail(tname + " has " + std::to_string(ti.n_dims) + " dimensions (1 to 4 allowed)");
    }
    ti.n_elems = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      ti.ne[d] = c.read<uint64_t>("tensor shape");
      if (ti.ne[d] == 0 || ti.ne[d] > (uint64_t{1} << 40)) {
        c.fail(tname + " has an invalid size " + std::to_string(ti.ne[d]) + " in dimension " +
               std::to_string(d));
      }
      if (mul_overflows(ti.n_elems, ti.ne[d], ti.n_elems) || ti.n_elems > (uint64_t{1} << 48)) {
        c.fail(tname + " has an absurd element count");
      }
    }
    const uint32_t type_id = c.read<uint32_t>("tensor type");
    const GgmlTypeInfo& info = ggml_type_info(type_id);
    if (info.block_bytes == 0) {
      c.fail(tname + " has " +
             (info.removed ? "the removed type " + std::string(info.name)
                           : "unknown type id " + std::to_string(type_id)));
    }
    ti.type = static_cast<GgmlType>(type_id);
    if (ti.ne[0] % info.block_elems != 0) {
      c.fail(tname + " of type " + std::string(info.name) + " has a row of " +
             std::to_string(ti.ne[0]) + " elements, not a multiple of its block size " +
             std::to_string(info.block_elems));
    }
    ti.n_bytes = ti.n_elems / info.block_elems * info.block_bytes;
    ti.offset = c.read<uint64_t>("tensor data offset");
    if (ti.offset % alignment_ != 0) {
      c.fail(tname + " data offset " + std::to_string(ti.offset) + " is not aligned to " +
             std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second) {
      c.fail("duplicate tensor name '" + std::string(ti.name) + "'");
    }
    tensors_.push_back(ti);
  }

  const uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = bytes_.size();
  if (data_offset_ > size) {
    if (n_tensors > 0) c.fail("the tensor data section is missing");
    // A file without tensors (e.g. a vocab-only GGUF) need not be padded to the alignment;
    // keep data_offset() inside the file so that file_size() - data_offset() stays valid.
    data_offset_ = size;
  }

  for (TensorInfo& ti : tensors_) {
    const uint64_t avail = data_offset_ <= size ? size - data_offset_ : 0;
    if (ti.offset > avail || ti.n_bytes > avail - ti.offset) {
      c.fail("tensor '" + std::string(ti.name) + "' (" + std::to_string(ti.n_bytes) +
             " bytes at data offset " + std::to_string(ti.offset) +
             ") lies outside the file; it may be truncated");
    }
    ti.data = bytes_.data() + data_offset_ + ti.offset;
  }

  // Overlapping tensors can only come from a corrupt file.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& ti : tensors_) by_offset.push_back(&ti);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo* prev = by_offset[k - 1];
    if (prev->offset + prev->n_bytes > by_offset[k]->offset) {
      c.fail("tensors '" + std::string(prev->name) + "' and '" + std::string(by_offset[k]->name) +
             "' overlap");
    }
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& label, std::string_view key, const Value& v,
                             const char* wanted) {
  throw Error(label + ": metadata key '" + std::string(key) + "' is a " +
              std::string(value_type_name(v.type)) + ", expected " + wanted);
}
}  // namespace

std::optional<std::string_view> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(label_, key, *v, "a string");
  return v->str;
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!is_int(v->type)) wrong_type(label_, key, *v, "an integer");
  if (is_signed(v->type)) return v->i;
  if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(label_ + ": metadata key '" + std::string(key) + "' is out of range");
  }
  return static_cast<int64_t>(v->u);
}

std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!is_int(v->type)) wrong_type(label_, key, *v, "an integer");
  if (is_signed(v->type)) {
    if (v->i < 0) throw Error(label_ + ": metadata key '" + std::string(key) + "' is negative");
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (is_float(v->type)) return v->f;
  if (is_int(v->type)) {
    return is_signed(v->type) ? static_cast<double>(v->i) : static_cast<double>(v->u);
  }
  wrong_type(label_, key, *v, "a number");
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(label_, key, *v, "a bool");
  return v->u != 0;
}

std::optional<std::vector<std::string_view>> File::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING) {
    wrong_type(label_, key, *v, "an array of strings");
  }
  return v->strings;
}

std::optional<std::vector<float>> File::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || !(is_float(v->elem_type) || is_int(v->elem_type))) {
    wrong_type(label_, key, *v, "an array of numbers");
  }
  std::vector<float> out(static_cast<size_t>(v->count));
  for (uint64_t k = 0; k < v->count; ++k) out[k] = array_element_as<float>(*v, k);
  return out;
}

std::optional<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || !is_int(v->elem_type)) {
    wrong_type(label_, key, *v, "an array of integers");
  }
  std::vector<int64_t> out(static_cast<size_t>(v->count));
  for (uint64_t k = 0; k < v->count; ++k) out[k] = array_element_as<int64_t>(*v, k);
  return out;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw Error(label_ + ": model is missing tensor '" + std::string(name) + "'");
  return *t;
}

}  // namespace lift::gguf
