#include "gguf/ggml_type.h"

#include <array>

namespace lift {
namespace {

constexpr uint32_t kMaxTypeId = 40;

constexpr std::array<GgmlTypeInfo, kMaxTypeId> make_table() {
  std::array<GgmlTypeInfo, kMaxTypeId> t{};
  auto set = [&](GgmlType id, std::string_view name, uint32_t elems, uint32_t bytes) {
    t[static_cast<uint32_t>(id)] = GgmlTypeInfo{name, elems, bytes, false};
  };
  set(GgmlType::F32, "F32", 1, 4);
  set(GgmlType::F16, "F16", 1, 2);
  set(GgmlType::Q4_0, "Q4_0", 32, 18);
  set(GgmlType::Q4_1, "Q4_1", 32, 20);
  set(GgmlType::Q5_0, "Q5_0", 32, 22);
  set(GgmlType::Q5_1, "Q5_1", 32, 24);
  set(GgmlType::Q8_0, "Q8_0", 32, 34);
  set(GgmlType::Q8_1, "Q8_1", 32, 36);
  set(GgmlType::Q2_K, "Q2_K", 256, 84);
  set(GgmlType::Q3_K, "Q3_K", 256, 110);
  set(GgmlType::Q4_K, "Q4_K", 256, 144);
  set(GgmlType::Q5_K, "Q5_K", 256, 176);
  set(GgmlType::Q6_K, "Q6_K", 256, 210);
  set(GgmlType::Q8_K, "Q8_K", 256, 292);
  set(GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66);
  set(GgmlType::IQ2_XS, "IQ2_XS", 256, 74);
  set(GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98);
  set(GgmlType::IQ1_S, "IQ1_S", 256, 50);
  set(GgmlType::IQ4_NL, "IQ4_NL", 32, 18);
  set(GgmlType::IQ3_S, "IQ3_S", 256, 110);
  set(GgmlType::IQ2_S, "IQ2_S", 256, 82);
  set(GgmlType::IQ4_XS, "IQ4_XS", 256, 136);
  set(GgmlType::I8, "I8", 1, 1);
  set(GgmlType::I16, "I16", 1, 2);
  set(GgmlType::I32, "I32", 1, 4);
  set(GgmlType::I64, "I64", 1, 8);
  set(GgmlType::F64, "F64", 1, 8);
  set(GgmlType::IQ1_M, "IQ1_M", 256, 56);
  set(GgmlType::BF16, "BF16", 1, 2);
  set(GgmlType::TQ1_0, "TQ1_0", 256, 54);
  set(GgmlType::TQ2_0, "TQ2_0", 256, 66);
  set(GgmlType::MXFP4, "MXFP4", 32, 17);
  // Ids that older ggml versions used and later removed; files carrying them are stale.
  t[4] = GgmlTypeInfo{"Q4_2 (removed)", 0, 0, true};
  t[5] = GgmlTypeInfo{"Q4_3 (removed)", 0, 0, true};
  t[31] = GgmlTypeInfo{"Q4_0_4_4 (removed)", 0, 0, true};
  t[32] = GgmlTypeInfo{"Q4_0_4_8 (removed)", 0, 0, true};
  t[33] = GgmlTypeInfo{"Q4_0_8_8 (removed)", 0, 0, true};
  t[36] = GgmlTypeInfo{"IQ4_NL_4_4 (removed)", 0, 0, true};
  t[37] = GgmlTypeInfo{"IQ4_NL_4_8 (removed)", 0, 0, true};
  t[38] = GgmlTypeInfo{"IQ4_NL_8_8 (removed)", 0, 0, true};
  return t;
}

constexpr auto kTable = make_table();
constexpr GgmlTypeInfo kInvalid{"", 0, 0, false};

}  // namespace

const GgmlTypeInfo& ggml_type_info(uint32_t id) { return id < kMaxTypeId ? kTable[id] : kInvalid; }

std::string_view ggml_type_name(GgmlType t) {
  const auto& info = ggml_type_info(t);
  return info.name.empty() ? std::string_view("unknown") : info.name;
}

bool ggml_type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

}  // namespace lift
