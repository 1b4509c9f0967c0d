#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace lift {
namespace {

constexpr bool stands_for_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr uint32_t kEnd = 0x100 + 68;  // one past the last code point of the alphabet

struct Alphabet {
  std::array<std::string, 256> spelling;
  std::array<int16_t, kEnd> value{};  // byte per code point, -1 for none
  Alphabet() {
    value.fill(-1);
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t cp = stands_for_itself(b) ? b : next++;
      append_utf8(spelling[b], cp);
      value[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  const Alphabet& a = alphabet();
  for (const char c : bytes) out.append(a.spelling[static_cast<uint8_t>(c)]);
}

int byte_level_value(uint32_t code_point) {
  return code_point < kEnd ? alphabet().value[code_point] : -1;
}

std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Sequence seq = next_utf8(text, pos);
    const int b = seq.status == Utf8Status::kValid ? byte_level_value(seq.code_point) : -1;
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(pos, seq.length));
    }
    pos += seq.length;
  }
  return out;
}

}  // namespace lift
