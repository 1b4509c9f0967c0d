#include "tokenizer/utf8.h"

namespace lift {

Utf8Sequence next_utf8(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {Utf8Status::kValid, 1, b0};

  // Table 3-7: the lead byte fixes the length and the allowed range of the second byte; every
  // later byte is 80..BF.
  uint32_t n_cont = 0;
  uint32_t cp = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n_cont = 1;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n_cont = 2;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n_cont = 3;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Status::kInvalid, 1, 0};  // 80..C1 (continuation, overlong lead), F5..FF
  }
  for (uint32_t i = 1; i <= n_cont; ++i) {
    if (pos + i >= s.size()) return {Utf8Status::kIncomplete, i, 0};
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (b < lo || b > hi) return {Utf8Status::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3Fu);
    lo = 0x80;
    hi = 0xBF;
  }
  return {Utf8Status::kValid, n_cont + 1, cp};
}

bool is_valid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Sequence seq = next_utf8(s, pos);
    if (seq.status != Utf8Status::kValid) return false;
    pos += seq.length;
  }
  return true;
}

size_t append_sanitized_utf8(std::string& out, std::string_view s, bool final) {
  size_t pos = 0;
  while (pos < s.size()) {
    // Copy runs of well-formed text in one append.
    size_t end = pos;
    Utf8Sequence seq;
    while (end < s.size()) {
      if (static_cast<uint8_t>(s[end]) < 0x80) {
        ++end;
        continue;
      }
      seq = next_utf8(s, end);
      if (seq.status != Utf8Status::kValid) break;
      end += seq.length;
    }
    out.append(s.data() + pos, end - pos);
    if (end == s.size()) return 0;
    if (seq.status == Utf8Status::kIncomplete && !final) return seq.length;
    out.append(kUtf8Replacement);
    pos = end + seq.length;
  }
  return 0;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_sanitized_utf8(out, s, /*final=*/true);
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp >= 0xD800 && cp <= 0xDFFF) {
    out.append(kUtf8Replacement);
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.append(kUtf8Replacement);
  }
}

}  // namespace lift
