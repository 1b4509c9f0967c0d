// UTF-8 validation and repair, following Unicode Table 3-7 (well-formed byte sequences): no
// overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
//
// Repair uses "U+FFFD substitution of maximal subparts" (Unicode chapter 3, also the W3C /
// WHATWG decoder): each maximal subpart of an ill-formed sequence (the longest prefix of a
// well-formed sequence found at that position, or a single byte when none) becomes exactly one
// U+FFFD. Examples: C0 80 -> 2 x U+FFFD, E0 80 80 -> 3, ED A0 80 -> 3, F4 90 80 80 -> 4,
// F0 9F 98 followed by 'A' -> U+FFFD 'A'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lift {

inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Utf8Status : uint8_t {
  kValid,       // `length` bytes (1-4) form the well-formed character `code_point`
  kInvalid,     // `length` bytes (1-3) are one maximal subpart of an ill-formed sequence
  kIncomplete,  // the input ends after `length` bytes (1-3) that begin a well-formed sequence
};

struct Utf8Sequence {
  Utf8Status status = Utf8Status::kInvalid;
  uint32_t length = 1;
  uint32_t code_point = 0;  // only for kValid
};

// Examines the sequence that starts at s[pos]; requires pos < s.size().
Utf8Sequence next_utf8(std::string_view s, size_t pos);

bool is_valid_utf8(std::string_view s);

// Returns s with every maximal subpart of an ill-formed sequence replaced by one U+FFFD
// (an incomplete sequence at the end counts as one). The result is always valid UTF-8.
std::string sanitize_utf8(std::string_view s);

// Streaming form of sanitize_utf8: appends s to out with the same substitution. When `final`
// is false, a trailing incomplete sequence (1-3 bytes that more input could complete) is not
// appended and its length is returned, so the caller can prepend those bytes to the next
// chunk; when `final` is true it becomes one U+FFFD and 0 is returned.
size_t append_sanitized_utf8(std::string& out, std::string_view s, bool final);

// Appends the UTF-8 encoding of a code point; surrogates and values above U+10FFFF append
// U+FFFD.
void append_utf8(std::string& out, uint32_t code_point);

}  // namespace lift
