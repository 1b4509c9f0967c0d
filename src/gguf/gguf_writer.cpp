#include "gguf/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace lift::gguf {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  // resize + memcpy rather than insert: g++ 12 warns falsely (stringop-overflow) on insert.
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_str(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  const size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

}  // namespace

void Writer::put_key(std::string_view key, ValueType t) {
  ++n_kv_;
  put_str(kv_bytes_, key);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(t));
}

void Writer::set_u32(std::string_view key, uint32_t v) {
  put_key(key, ValueType::UINT32);
  put(kv_bytes_, v);
}
void Writer::set_i32(std::string_view key, int32_t v) {
  put_key(key, ValueType::INT32);
  put(kv_bytes_, v);
}
void Writer::set_u64(std::string_view key, uint64_t v) {
  put_key(key, ValueType::UINT64);
  put(kv_bytes_, v);
}
void Writer::set_f32(std::string_view key, float v) {
  put_key(key, ValueType::FLOAT32);
  put(kv_bytes_, v);
}
void Writer::set_bool(std::string_view key, bool v) {
  put_key(key, ValueType::BOOL);
  put<uint8_t>(kv_bytes_, v ? 1 : 0);
}
void Writer::set_string(std::string_view key, std::string_view v) {
  put_key(key, ValueType::STRING);
  put_str(kv_bytes_, v);
}
void Writer::set_string_array(std::string_view key, const std::vector<std::string_view>& v) {
  put_key(key, ValueType::ARRAY);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(kv_bytes_, v.size());
  for (auto s : v) put_str(kv_bytes_, s);
}
void Writer::set_f32_array(std::string_view key, const std::vector<float>& v) {
  put_key(key, ValueType::ARRAY);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::FLOAT32));
  put<uint64_t>(kv_bytes_, v.size());
  for (float x : v) put(kv_bytes_, x);
}
void Writer::set_i32_array(std::string_view key, const std::vector<int32_t>& v) {
  put_key(key, ValueType::ARRAY);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::INT32));
  put<uint64_t>(kv_bytes_, v.size());
  for (int32_t x : v) put(kv_bytes_, x);
}

void Writer::copy_value(std::string_view key, const Value& v) {
  put_key(key, v.type);
  switch (v.type) {
    case ValueType::STRING:
      put_str(kv_bytes_, v.str);
      break;
    case ValueType::ARRAY:
      if (v.elem_type == ValueType::ARRAY) throw Error("copy_value: nested arrays not supported");
      put<uint32_t>(kv_bytes_, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(kv_bytes_, v.count);
      if (v.elem_type == ValueType::STRING) {
        for (auto s : v.strings) put_str(kv_bytes_, s);
      } else {
        kv_bytes_.insert(kv_bytes_.end(), v.raw, v.raw + v.count * value_type_size(v.elem_type));
      }
      break;
    case ValueType::UINT8:
      put<uint8_t>(kv_bytes_, static_cast<uint8_t>(v.u));
      break;
    case ValueType::INT8:
      put<int8_t>(kv_bytes_, static_cast<int8_t>(v.i));
      break;
    case ValueType::UINT16:
      put<uint16_t>(kv_bytes_, static_cast<uint16_t>(v.u));
      break;
    case ValueType::INT16:
      put<int16_t>(kv_bytes_, static_cast<int16_t>(v.i));
      break;
    case ValueType::UINT32:
      put<uint32_t>(kv_bytes_, static_cast<uint32_t>(v.u));
      break;
    case ValueType::INT32:
      put<int32_t>(kv_bytes_, static_cast<int32_t>(v.i));
      break;
    case ValueType::UINT64:
      put<uint64_t>(kv_bytes_, v.u);
      break;
    case ValueType::INT64:
      put<int64_t>(kv_bytes_, v.i);
      break;
    case ValueType::FLOAT32:
      put<float>(kv_bytes_, static_cast<float>(v.f));
      break;
    case ValueType::FLOAT64:
      put<double>(kv_bytes_, v.f);
      break;
    case ValueType::BOOL:
      put<uint8_t>(kv_bytes_, static_cast<uint8_t>(v.u));
      break;
  }
}

void Writer::add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne, Fill fill) {
  const auto& info = ggml_type_info(type);
  if (info.block_bytes == 0) throw Error("gguf writer: invalid tensor type");
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  if (ne.empty() || ne[0] % info.block_elems != 0) {
    throw Error("gguf writer: tensor '" + std::string(name) + "' row is not a whole number of " +
                std::string(info.name) + " blocks");
  }
  tensors_.push_back({std::string(name), type, std::move(ne),
                      n / info.block_elems * info.block_bytes, std::move(fill)});
}

void Writer::add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne,
                        std::vector<uint8_t> data) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(data));
  add_tensor(name, type, std::move(ne), [shared](uint8_t* dst, size_t n) {
    std::memcpy(dst, shared->data(), std::min(n, shared->size()));
  });
}

void Writer::emit(const std::function<void(const uint8_t*, size_t)>& sink) const {
  std::vector<uint8_t> head;
  put<uint32_t>(head, 0x46554747);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, n_kv_ + (alignment_ != 32 ? 1 : 0));
  head.insert(head.end(), kv_bytes_.begin(), kv_bytes_.end());
  if (alignment_ != 32) {
    put_str(head, "general.alignment");
    put<uint32_t>(head, static_cast<uint32_t>(ValueType::UINT32));
    put<uint32_t>(head, alignment_);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_str(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(head, d);
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  head.resize((head.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  sink(head.data(), head.size());
  std::vector<uint8_t> buf;
  for (const Tensor& t : tensors_) {
    const size_t padded = (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
    buf.assign(padded, 0);
    t.fill(buf.data(), t.n_bytes);
    sink(buf.data(), buf.size());
  }
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  emit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void Writer::write(const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw Error(path + ": cannot create file");
  bool ok = true;
  emit([&](const uint8_t* p, size_t n) { ok = ok && std::fwrite(p, 1, n, f.get()) == n; });
  if (!ok || std::fflush(f.get()) != 0) throw Error(path + ": write failed (disk full?)");
}

}  // namespace lift::gguf
