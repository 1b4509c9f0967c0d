// Hostile-file tests for the GGUF reader: a valid file round-trips every value type, and every
// kind of corruption is rejected with a lift::Error that names the problem (never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "util/error.h"

namespace lift::gguf {
namespace {

// ---- helpers -------------------------------------------------------------------------------

// Parses `bytes` and returns the error message, or "<parsed>" when parsing succeeded.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    (void)File::parse(bytes, "test.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "<parsed>";
}

#define EXPECT_REJECTED(bytes, substr)                                                    \
  do {                                                                                    \
    const std::string msg_ = parse_error(bytes);                                          \
    EXPECT_NE(msg_, "<parsed>") << "expected rejection mentioning: " << (substr);         \
    EXPECT_NE(msg_.find(substr), std::string::npos) << "message: " << msg_;               \
    EXPECT_NE(msg_.find("test.gguf"), std::string::npos) << "no file label in: " << msg_; \
  } while (0)

// Byte-level GGUF builder, for files gguf::Writer refuses (or is unable) to produce.
class Raw {
 public:
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors_override;
  std::optional<uint64_t> n_kv_override;
  uint64_t alignment = 32;  // only used to pad the header; set general.alignment yourself
  uint64_t data_bytes = 0;  // size of the data section appended after the header

  // Key header; the caller appends the payload with the put_* functions.
  Raw& key(std::string_view k, ValueType t) {
    ++n_kv_;
    str(kv_, k);
    put<uint32_t>(kv_, static_cast<uint32_t>(t));
    return *this;
  }
  template <typename T>
  Raw& val(T v) {
    put<T>(kv_, v);
    return *this;
  }
  Raw& sval(std::string_view s) {
    str(kv_, s);
    return *this;
  }
  Raw& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    return tensor_ndims(name, static_cast<uint32_t>(ne.size()), ne, type, offset);
  }
  Raw& tensor_ndims(std::string_view name, uint32_t n_dims, std::vector<uint64_t> ne, uint32_t type,
                    uint64_t offset) {
    ++n_ti_;
    str(ti_, name);
    put<uint32_t>(ti_, n_dims);
    for (uint64_t d : ne) put<uint64_t>(ti_, d);
    put<uint32_t>(ti_, type);
    put<uint64_t>(ti_, offset);
    return *this;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> out;
    put<uint32_t>(out, magic);
    put<uint32_t>(out, version);
    put<uint64_t>(out, n_tensors_override.value_or(n_ti_));
    put<uint64_t>(out, n_kv_override.value_or(n_kv_));
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), ti_.begin(), ti_.end());
    if (n_ti_ > 0) out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    out.resize(out.size() + data_bytes, 0x5a);
    return out;
  }

  template <typename T>
  static void put(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
  }
  static void str(std::vector<uint8_t>& out, std::string_view s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }

 private:
  uint64_t n_kv_ = 0;
  uint64_t n_ti_ = 0;
  std::vector<uint8_t> kv_;
  std::vector<uint8_t> ti_;
};

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

// A minimal valid file: one key, one F32 tensor of 8 elements.
Raw minimal() {
  Raw r;
  r.key("general.architecture", ValueType::STRING).sval("llama");
  r.tensor("t", {8}, kF32, 0);
  r.data_bytes = 32;
  return r;
}

// The rich sample file: every value type, arrays (strings among them), a few tensors.
struct Sample {
  std::vector<uint8_t> bytes;
};

Value scalar(ValueType t, uint64_t u, int64_t i, double f) {
  Value v;
  v.type = t;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

Value packed_array(ValueType elem, const void* data, uint64_t count) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  v.count = count;
  v.raw = static_cast<const uint8_t*>(data);
  return v;
}

std::vector<uint8_t> tensor_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> d(n);
  for (size_t k = 0; k < n; ++k) d[k] = static_cast<uint8_t>(seed + k * 7);
  return d;
}

std::vector<uint8_t> sample_file() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "corrupt-test \xe2\x9c\x93");
  w.set_string("empty.string", "");
  w.copy_value("v.u8", scalar(ValueType::UINT8, 200, 0, 0));
  w.copy_value("v.i8", scalar(ValueType::INT8, 0, -100, 0));
  w.copy_value("v.u16", scalar(ValueType::UINT16, 60000, 0, 0));
  w.copy_value("v.i16", scalar(ValueType::INT16, 0, -30000, 0));
  w.set_u32("v.u32", 4000000000u);
  w.set_i32("v.i32", -2000000000);
  w.set_u64("v.u64", 0xFFFFFFFFFFFFFFFFull);
  w.copy_value("v.i64", scalar(ValueType::INT64, 0, -9000000000000000000ll, 0));
  w.set_f32("v.f32", 1.5f);
  w.copy_value("v.f64", scalar(ValueType::FLOAT64, 0, 0, -2.25e100));
  w.set_bool("v.bool.true", true);
  w.set_bool("v.bool.false", false);
  w.set_string_array("a.str", {"<unk>", "", "hello world", "\xe2\x96\x81the"});
  w.set_f32_array("a.f32", {0.5f, -1.0f, 3.25f});
  w.set_i32_array("a.i32", {-1, 0, 2147483647});
  static const uint8_t u8s[] = {0, 1, 255};
  w.copy_value("a.u8", packed_array(ValueType::UINT8, u8s, 3));
  static const int64_t i64s[] = {-5, 1ll << 40};
  w.copy_value("a.i64", packed_array(ValueType::INT64, i64s, 2));
  static const double f64s[] = {0.125, -8.0};
  w.copy_value("a.f64", packed_array(ValueType::FLOAT64, f64s, 2));
  static const uint8_t bools[] = {1, 0, 1};
  w.copy_value("a.bool", packed_array(ValueType::BOOL, bools, 3));
  w.set_string_array("a.empty", {});

  w.add_tensor("tok", GgmlType::F32, {4, 3}, tensor_bytes(48, 1));
  w.add_tensor("q8", GgmlType::Q8_0, {64, 2}, tensor_bytes(4 * 34, 2));
  w.add_tensor("k4", GgmlType::Q4_K, {256}, tensor_bytes(144, 3));
  w.add_tensor("f16.3d", GgmlType::F16, {2, 3, 5}, tensor_bytes(60, 4));
  return w.to_bytes();
}

void check_sample(const File& f) {
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "corrupt-test \xe2\x9c\x93");
  EXPECT_EQ(f.get_string("empty.string"), "");
  EXPECT_EQ(f.get_uint("v.u8"), 200u);
  EXPECT_EQ(f.get_int("v.i8"), -100);
  EXPECT_EQ(f.get_uint("v.u16"), 60000u);
  EXPECT_EQ(f.get_int("v.i16"), -30000);
  EXPECT_EQ(f.get_uint("v.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("v.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("v.i32"), -2000000000);
  EXPECT_EQ(f.get_uint("v.u64"), 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(f.get_int("v.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("v.f32"), 1.5);
  EXPECT_EQ(f.get_float("v.f64"), -2.25e100);
  EXPECT_EQ(f.get_float("v.i32"), -2000000000.0);
  EXPECT_EQ(f.get_bool("v.bool.true"), true);
  EXPECT_EQ(f.get_bool("v.bool.false"), false);
  EXPECT_EQ(f.find("v.u8")->type, ValueType::UINT8);
  EXPECT_EQ(f.find("v.f64")->type, ValueType::FLOAT64);

  const auto strs = f.get_string_array("a.str");
  ASSERT_TRUE(strs);
  ASSERT_EQ(strs->size(), 4u);
  EXPECT_EQ((*strs)[0], "<unk>");
  EXPECT_EQ((*strs)[1], "");
  EXPECT_EQ((*strs)[2], "hello world");
  EXPECT_EQ((*strs)[3], "\xe2\x96\x81the");
  EXPECT_EQ(f.get_float_array("a.f32"), (std::vector<float>{0.5f, -1.0f, 3.25f}));
  EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 2147483647}));
  EXPECT_EQ(f.get_int_array("a.u8"), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(f.get_int_array("a.i64"), (std::vector<int64_t>{-5, 1ll << 40}));
  EXPECT_EQ(f.get_float_array("a.f64"), (std::vector<float>{0.125f, -8.0f}));
  EXPECT_EQ(f.get_float_array("a.i32"), (std::vector<float>{-1.0f, 0.0f, 2147483648.0f}));
  EXPECT_EQ(f.find("a.bool")->elem_type, ValueType::BOOL);
  EXPECT_EQ(f.find("a.bool")->count, 3u);
  EXPECT_EQ(f.get_string_array("a.empty")->size(), 0u);

  // Absent keys are nullopt; present keys of the wrong type are errors naming the key.
  EXPECT_FALSE(f.get_string("no.such.key"));
  EXPECT_FALSE(f.get_int("no.such.key"));
  EXPECT_FALSE(f.get_string_array("no.such.key"));
  for (auto bad : std::vector<std::function<void()>>{
           [&] { (void)f.get_string("v.u32"); }, [&] { (void)f.get_int("v.f32"); },
           [&] { (void)f.get_uint("v.i8"); }, [&] { (void)f.get_bool("v.u8"); },
           [&] { (void)f.get_float("general.name"); }, [&] { (void)f.get_string_array("a.i32"); },
           [&] { (void)f.get_int_array("a.f32"); }, [&] { (void)f.get_float_array("a.str"); },
           [&] { (void)f.get_int("v.u64"); }}) {
    try {
      bad();
      ADD_FAILURE() << "wrong-type access did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("metadata key '"), std::string::npos) << e.what();
    }
  }

  ASSERT_EQ(f.tensors().size(), 4u);
  const TensorInfo& tok = f.tensor("tok");
  EXPECT_EQ(tok.type, GgmlType::F32);
  EXPECT_EQ(tok.n_dims, 2u);
  EXPECT_EQ(tok.ne[0], 4u);
  EXPECT_EQ(tok.ne[1], 3u);
  EXPECT_EQ(tok.n_bytes, 48u);
  EXPECT_EQ(tok.data[0], 1);
  EXPECT_EQ(tok.data[47], static_cast<uint8_t>(1 + 47 * 7));
  const TensorInfo& q8 = f.tensor("q8");
  EXPECT_EQ(q8.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.n_elems, 128u);
  EXPECT_EQ(q8.n_bytes, 136u);
  EXPECT_EQ(q8.data[135], static_cast<uint8_t>(2 + 135 * 7));
  const TensorInfo& k4 = f.tensor("k4");
  EXPECT_EQ(k4.type, GgmlType::Q4_K);
  EXPECT_EQ(k4.n_bytes, 144u);
  const TensorInfo& f16 = f.tensor("f16.3d");
  EXPECT_EQ(f16.n_dims, 3u);
  EXPECT_EQ(f16.ne[2], 5u);
  EXPECT_EQ(f16.ne[3], 1u);
  EXPECT_EQ(f16.n_elems, 30u);
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(t.data, f.tensors()[0].data - f.tensors()[0].offset + t.offset);
  }
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  EXPECT_THROW((void)f.tensor("missing"), Error);
}

// ---- valid files ---------------------------------------------------------------------------

TEST(GgufCorrupt, SampleRoundTripsEveryValueTypeV3) {
  const std::vector<uint8_t> bytes = sample_file();
  const File f = File::parse(bytes, "sample");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  check_sample(f);
}

TEST(GgufCorrupt, SampleRoundTripsEveryValueTypeV2) {
  std::vector<uint8_t> bytes = sample_file();
  bytes[4] = 2;  // v2 differs from v3 only in the version field (both use 64-bit counts)
  const File f = File::parse(bytes, "sample");
  EXPECT_EQ(f.version(), 2u);
  check_sample(f);
}

TEST(GgufCorrupt, CustomAlignmentRoundTrips) {
  Writer w(64);
  w.set_string("general.architecture", "llama");
  w.add_tensor("a", GgmlType::F32, {3}, tensor_bytes(12, 1));
  w.add_tensor("b", GgmlType::F32, {5}, tensor_bytes(20, 9));
  const std::vector<uint8_t> bytes = w.to_bytes();
  const File f = File::parse(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 64u);
  EXPECT_EQ(f.tensor("b").data[0], 9);
}

TEST(GgufCorrupt, CopyValueRoundTripsThroughWriter) {
  const std::vector<uint8_t> bytes = sample_file();
  const File f = File::parse(bytes);
  Writer w;
  for (const auto& [k, v] : f.metadata()) w.copy_value(k, v);
  const std::vector<uint8_t> again = w.to_bytes();
  const File g = File::parse(again);
  ASSERT_EQ(g.metadata().size(), f.metadata().size());
  EXPECT_EQ(g.get_string_array("a.str"), f.get_string_array("a.str"));
  EXPECT_EQ(g.get_int("v.i64"), f.get_int("v.i64"));
  EXPECT_EQ(g.get_float("v.f64"), f.get_float("v.f64"));
}

TEST(GgufCorrupt, NestedArrayWithinDepthParses) {
  Raw r = minimal();
  r.key("nested", ValueType::ARRAY).val<uint32_t>(9).val<uint64_t>(2);
  r.val<uint32_t>(4).val<uint64_t>(1).val<uint32_t>(7);  // [u32: 7]
  r.val<uint32_t>(8).val<uint64_t>(1).sval("x");         // ["x"]
  const std::vector<uint8_t> bytes = r.build();
  const File f = File::parse(bytes);
  EXPECT_EQ(f.find("nested")->elem_type, ValueType::ARRAY);
  EXPECT_EQ(f.find("nested")->count, 2u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_THROW((void)f.get_int_array("nested"), Error);
}

TEST(GgufCorrupt, KQuantTypesAreAccepted) {
  // The reader sizes every type in the table, even those lift cannot compute with.
  struct K {
    uint32_t id;
    uint64_t bytes;
  };
  for (K k :
       {K{10, 84}, K{11, 110}, K{12, 144}, K{13, 176}, K{14, 210}, K{20, 18 * 8}, K{23, 136}}) {
    Raw r;
    r.tensor("w", {256, 2}, k.id, 0);
    r.data_bytes = 2 * k.bytes;
    const std::vector<uint8_t> bytes = r.build();
    const File f = File::parse(bytes);
    EXPECT_EQ(static_cast<uint32_t>(f.tensor("w").type), k.id);
    EXPECT_EQ(f.tensor("w").n_bytes, 2 * k.bytes) << "type " << k.id;
  }
}

TEST(GgufCorrupt, EmptyFileWithoutTensorsParses) {
  Raw r;
  const std::vector<uint8_t> bytes = r.build();
  const File f = File::parse(bytes);
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
}

// ---- header corruption ---------------------------------------------------------------------

TEST(GgufCorrupt, BadMagic) {
  std::vector<uint8_t> bytes = sample_file();
  bytes[0] = 'g';
  EXPECT_REJECTED(bytes, "bad magic");
  EXPECT_REJECTED(std::vector<uint8_t>{}, "truncated while reading magic");
}

TEST(GgufCorrupt, UnsupportedVersion) {
  std::vector<uint8_t> bytes = sample_file();
  bytes[4] = 1;
  EXPECT_REJECTED(bytes, "version 1");
  bytes[4] = 4;
  EXPECT_REJECTED(bytes, "unsupported GGUF version 4");
  bytes[4] = 0;
  EXPECT_REJECTED(bytes, "unsupported GGUF version 0");
  bytes[4] = 3;
  bytes[7] = 0x80;
  EXPECT_REJECTED(bytes, "unsupported GGUF version 2147483651");
}

TEST(GgufCorrupt, EveryTruncationThrows) {
  const std::vector<uint8_t> bytes = sample_file();
  const File full = File::parse(bytes);
  uint64_t data_end = 0;
  for (const TensorInfo& t : full.tensors()) data_end = std::max(data_end, t.offset + t.n_bytes);
  const size_t needed = static_cast<size_t>(full.data_offset() + data_end);
  ASSERT_LE(needed, bytes.size());
  for (size_t len = 0; len < needed; ++len) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(len));
    const std::string msg = parse_error(cut);
    ASSERT_NE(msg, "<parsed>") << "a prefix of " << len << " bytes parsed";
    if (len < full.data_offset()) {
      const bool named = msg.find("truncated") != std::string::npos ||
                         msg.find("past the end") != std::string::npos ||
                         msg.find("could hold") != std::string::npos ||
                         msg.find("data section is missing") != std::string::npos;
      EXPECT_TRUE(named) << "prefix " << len << ": " << msg;
    } else {
      EXPECT_NE(msg.find("lies outside the file"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + needed)), "<parsed>");
}

TEST(GgufCorrupt, AbsurdTensorCount) {
  Raw r = minimal();
  r.n_tensors_override = uint64_t{1} << 60;
  EXPECT_REJECTED(r.build(), "tensor count 1152921504606846976");
  r.n_tensors_override = 1000;  // plausible number, but the file is far too small
  EXPECT_REJECTED(r.build(), "tensor count 1000");
  r.n_tensors_override = ~uint64_t{0};
  EXPECT_REJECTED(r.build(), "tensor count");
}

TEST(GgufCorrupt, AbsurdMetadataCount) {
  Raw r = minimal();
  r.n_kv_override = uint64_t{1} << 62;
  EXPECT_REJECTED(r.build(), "metadata count 4611686018427387904");
  r.n_kv_override = ~uint64_t{0};
  EXPECT_REJECTED(r.build(), "metadata count");
  r.n_kv_override = 3;  // fits the size test, but the extra pairs are not there
  const std::string msg = parse_error(r.build());
  EXPECT_NE(msg, "<parsed>");
}

// ---- metadata corruption -------------------------------------------------------------------

TEST(GgufCorrupt, KeyLengthPastEnd) {
  Raw r;  // key length replaced below; the 16-byte payload keeps the count plausible
  r.key("", ValueType::UINT64).val<uint64_t>(1).val<uint64_t>(2);
  std::vector<uint8_t> bytes = r.build();
  const uint64_t huge = uint64_t{1} << 50;
  std::memcpy(bytes.data() + 24, &huge, 8);
  EXPECT_REJECTED(bytes, "string length 1125899906842624 of metadata key runs past the end");
}

TEST(GgufCorrupt, EmptyKey) {
  Raw r;
  r.key("", ValueType::UINT8).val<uint8_t>(1);
  EXPECT_REJECTED(r.build(), "metadata key #0 is empty");
}

TEST(GgufCorrupt, StringValueLengthPastEnd) {
  Raw r = minimal();
  r.key("s", ValueType::STRING).val<uint64_t>(1000).val<uint32_t>(0);
  EXPECT_REJECTED(r.build(), "string length 1000 of string value runs past the end");
}

TEST(GgufCorrupt, ArrayStringLengthPastEnd) {
  Raw r;
  r.key("tokenizer.ggml.tokens", ValueType::ARRAY).val<uint32_t>(8).val<uint64_t>(2);
  r.sval("a").val<uint64_t>(~uint64_t{0});
  EXPECT_REJECTED(r.build(), "string length 18446744073709551615 of array string");
}

TEST(GgufCorrupt, ArrayCountPastEnd) {
  Raw r = minimal();
  r.key("a", ValueType::ARRAY).val<uint32_t>(5).val<uint64_t>(uint64_t{1} << 61);
  EXPECT_REJECTED(r.build(), "array length 2305843009213693952 of key 'a' runs past the end");
  Raw s;
  s.key("toks", ValueType::ARRAY).val<uint32_t>(8).val<uint64_t>(~uint64_t{0} / 2);
  EXPECT_REJECTED(s.build(), "array length 9223372036854775807 of key 'toks'");
  Raw t;  // count just one too large for the bytes present
  t.key("f", ValueType::ARRAY).val<uint32_t>(6).val<uint64_t>(3).val(1.0f).val(2.0f);
  EXPECT_REJECTED(t.build(), "array length 3 of key 'f' runs past the end");
}

TEST(GgufCorrupt, UnknownValueType) {
  Raw r = minimal();
  r.key("weird", static_cast<ValueType>(13)).val<uint32_t>(0);
  EXPECT_REJECTED(r.build(), "unknown value type 13 for key 'weird'");
  Raw s = minimal();
  s.key("weird", static_cast<ValueType>(0xFFFFFFFF)).val<uint32_t>(0);
  EXPECT_REJECTED(s.build(), "unknown value type 4294967295");
  Raw t = minimal();
  t.key("arr", ValueType::ARRAY).val<uint32_t>(77).val<uint64_t>(0);
  EXPECT_REJECTED(t.build(), "unknown array element type 77 in key 'arr'");
}

TEST(GgufCorrupt, DuplicateKey) {
  Raw r = minimal();
  r.key("general.architecture", ValueType::STRING).sval("gpt2");
  EXPECT_REJECTED(r.build(), "duplicate metadata key 'general.architecture'");
}

TEST(GgufCorrupt, BoolValueTwo) {
  Raw r = minimal();
  r.key("flag", ValueType::BOOL).val<uint8_t>(2);
  EXPECT_REJECTED(r.build(), "bool value 2");
  Raw s = minimal();
  s.key("flags", ValueType::ARRAY).val<uint32_t>(7).val<uint64_t>(3);
  s.val<uint8_t>(1).val<uint8_t>(0).val<uint8_t>(2);
  EXPECT_REJECTED(s.build(), "bool value 2");
}

TEST(GgufCorrupt, NestedArrayTooDeep) {
  Raw r = minimal();
  r.key("deep", ValueType::ARRAY);
  for (int d = 0; d < 64; ++d) r.val<uint32_t>(9).val<uint64_t>(1);
  r.val<uint32_t>(4).val<uint64_t>(0);
  EXPECT_REJECTED(r.build(), "nested too deeply in key 'deep'");
}

TEST(GgufCorrupt, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    Raw r = minimal();
    r.key("general.alignment", ValueType::UINT32).val<uint32_t>(a);
    EXPECT_REJECTED(r.build(), "general.alignment " + std::to_string(a) + " is not a power of two");
  }
  Raw s = minimal();
  s.key("general.alignment", ValueType::UINT64).val<uint64_t>(32);
  EXPECT_REJECTED(s.build(), "general.alignment must be a u32");
}

// ---- tensor-info corruption ----------------------------------------------------------------

TEST(GgufCorrupt, TensorNameLengthPastEnd) {
  Raw r;
  r.tensor("t", {8}, kF32, 0);
  std::vector<uint8_t> bytes = r.build();
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bytes.data() + 24, &huge, 8);
  EXPECT_REJECTED(bytes, "of tensor name runs past the end");
}

TEST(GgufCorrupt, UnknownTensorType) {
  for (uint32_t id : {40u, 1000u, 0xFFFFFFFFu}) {
    Raw r;
    r.tensor("w", {32}, id, 0);
    r.data_bytes = 4096;
    EXPECT_REJECTED(r.build(), "tensor 'w' has unknown type id " + std::to_string(id));
  }
}

TEST(GgufCorrupt, RemovedTensorTypeIsNamed) {
  struct R {
    uint32_t id;
    const char* name;
  };
  for (R rt :
       {R{4, "Q4_2"}, R{5, "Q4_3"}, R{31, "Q4_0_4_4"}, R{33, "Q4_0_8_8"}, R{36, "IQ4_NL_4_4"}}) {
    Raw r;
    r.tensor("w", {32}, rt.id, 0);
    r.data_bytes = 4096;
    EXPECT_REJECTED(r.build(), std::string("removed type ") + rt.name);
  }
}

TEST(GgufCorrupt, TensorDataPastEnd) {
  Raw r;
  r.tensor("w", {64}, kF32, 0);
  r.data_bytes = 255;  // one byte short
  EXPECT_REJECTED(r.build(), "tensor 'w' (256 bytes at data offset 0) lies outside the file");
  Raw s;
  s.tensor("w", {8}, kF32, uint64_t{1} << 62);
  s.data_bytes = 64;
  EXPECT_REJECTED(s.build(), "lies outside the file");
  Raw t;  // offset + size would wrap around 2^64
  t.tensor("w", {8}, kF32, ~uint64_t{31});
  t.data_bytes = 64;
  EXPECT_REJECTED(t.build(), "lies outside the file");
  Raw u;  // header fine, data section absent entirely
  u.tensor("w", {8}, kF32, 0);
  std::vector<uint8_t> bytes = u.build();
  bytes.resize(bytes.size() - 1);  // cut inside the header padding
  EXPECT_REJECTED(bytes, "the tensor data section is missing");
}

TEST(GgufCorrupt, MisalignedTensorOffset) {
  Raw r;
  r.tensor("w", {8}, kF32, 4);
  r.data_bytes = 64;
  EXPECT_REJECTED(r.build(), "tensor 'w' data offset 4 is not aligned to 32");
  Raw s;
  s.key("general.alignment", ValueType::UINT32).val<uint32_t>(64);
  s.alignment = 64;
  s.tensor("w", {8}, kF32, 32);
  s.data_bytes = 128;
  EXPECT_REJECTED(s.build(), "data offset 32 is not aligned to 64");
}

TEST(GgufCorrupt, ZeroOrAbsurdDimension) {
  Raw r;
  r.tensor("w", {8, 0}, kF32, 0);
  r.data_bytes = 64;
  EXPECT_REJECTED(r.build(), "tensor 'w' has an invalid size 0 in dimension 1");
  Raw s;
  s.tensor("w", {uint64_t{1} << 41}, kF32, 0);
  s.data_bytes = 64;
  EXPECT_REJECTED(s.build(), "invalid size 2199023255552 in dimension 0");
  Raw t;
  t.tensor("w", {~uint64_t{0}}, kF32, 0);
  t.data_bytes = 64;
  EXPECT_REJECTED(t.build(), "invalid size 18446744073709551615");
}

TEST(GgufCorrupt, BadDimensionCount) {
  for (uint32_t nd : {0u, 5u, 0xFFFFFFFFu}) {
    Raw r;
    // Enough shape words follow that a reader trusting n_dims would run on.
    r.tensor_ndims("w", nd, {8, 1, 1, 1, 1}, kF32, 0);
    r.data_bytes = 64;
    EXPECT_REJECTED(r.build(), "tensor 'w' has " + std::to_string(nd) + " dimensions");
  }
}

TEST(GgufCorrupt, ElementCountOverflow) {
  Raw r;  // each dimension plausible, the product is not (2^80 elements)
  r.tensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, kF32, 0);
  r.data_bytes = 64;
  EXPECT_REJECTED(r.build(), "tensor 'w' has an absurd element count");
  Raw s;  // wraps a 64-bit product to a small number: 2^32 * 2^32 = 2^64 -> 0
  s.tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32, 1, 1}, kF32, 0);
  s.data_bytes = 64;
  EXPECT_REJECTED(s.build(), "absurd element count");
  Raw t;  // 2^16 per dimension, 2^64 in total
  t.tensor("w", {65536, 65536, 65536, 65536}, kF32, 0);
  t.data_bytes = 64;
  EXPECT_REJECTED(t.build(), "absurd element count");
}

TEST(GgufCorrupt, RowNotMultipleOfBlock) {
  Raw r;
  r.tensor("blk.0.attn_q.weight", {48, 2}, kQ8_0, 0);
  r.data_bytes = 4096;
  EXPECT_REJECTED(r.build(),
                  "tensor 'blk.0.attn_q.weight' of type Q8_0 has a row of 48 elements, not a "
                  "multiple of its block size 32");
  Raw s;
  s.tensor("k", {128}, 12, 0);  // Q4_K needs 256-element rows
  s.data_bytes = 4096;
  EXPECT_REJECTED(s.build(), "of type Q4_K has a row of 128 elements");
}

TEST(GgufCorrupt, DuplicateTensor) {
  Raw r;
  r.tensor("w", {8}, kF32, 0).tensor("w", {8}, kF32, 32);
  r.data_bytes = 64;
  EXPECT_REJECTED(r.build(), "duplicate tensor name 'w'");
}

TEST(GgufCorrupt, OverlappingTensors) {
  Raw r;
  r.tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32);  // a is 64 bytes: [0, 64)
  r.data_bytes = 128;
  EXPECT_REJECTED(r.build(), "tensors 'a' and 'b' overlap");
  Raw s;  // same offset
  s.tensor("a", {8}, kF32, 32).tensor("b", {8}, kF32, 32);
  s.data_bytes = 128;
  EXPECT_REJECTED(s.build(), "overlap");
  Raw t;  // adjacent tensors are fine
  t.tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 32);
  t.data_bytes = 64;
  EXPECT_EQ(parse_error(t.build()), "<parsed>");
}

TEST(GgufCorrupt, EveryByteFlipNeverCrashes) {
  // Not a substitute for the fuzzer, but cheap: flip each header byte to a few values and make
  // sure the reader either parses or throws lift::Error (anything else fails the test).
  const std::vector<uint8_t> bytes = sample_file();
  const File full = File::parse(bytes);
  std::vector<uint8_t> work = bytes;
  size_t rejected = 0;
  for (size_t pos = 0; pos < full.data_offset(); ++pos) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x07}}) {
      if (bytes[pos] == v) continue;
      work[pos] = v;
      try {
        const File f = File::parse(work);
        for (const TensorInfo& t : f.tensors()) {
          ASSERT_GE(t.data, work.data());
          ASSERT_LE(t.data + t.n_bytes, work.data() + work.size());
        }
      } catch (const Error&) {
        ++rejected;
      }
      work[pos] = bytes[pos];
    }
  }
  EXPECT_GT(rejected, 0u);
}

// ---- every shared model parses ---------------------------------------------------------------

TEST(GgufCorrupt, EverySharedGgufParses) {
  namespace fs = std::filesystem;
  const fs::path root = test::model_path("");
  if (!fs::exists(root)) GTEST_SKIP() << "no shared models at " << root;
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    ++n;
    try {
      const File f = File::open(e.path().string());
      EXPECT_TRUE(f.version() == 2 || f.version() == 3);
      EXPECT_TRUE(f.get_string("general.architecture").has_value());
      EXPECT_LE(f.data_offset(), f.file_size());
      for (const TensorInfo& t : f.tensors()) {
        EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size()) << t.name;
      }
    } catch (const Error& err) {
      ADD_FAILURE() << err.what();
    }
  }
  EXPECT_GE(n, 10u);
}

}  // namespace
}  // namespace lift::gguf
