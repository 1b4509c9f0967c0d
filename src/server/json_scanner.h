// Checks JSON text byte by byte as it arrives and says where one value ends, so a stream
// parser can pass a value's bytes on as they come (tool-call arguments) and still know that
// what it passed on is a well-formed prefix of one JSON value (RFC 8259; the bytes are
// assumed valid UTF-8, as model output is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lift {

class JsonScanner {
 public:
  enum class Step : uint8_t {
    more,          // the byte belongs to the value, which goes on
    done,          // the byte was the value's last
    ended_before,  // the value (a number) ended before this byte, which is not part of it
    error,         // the byte cannot continue a JSON value; the scanner stays failed
  };
  // Leading whitespace is part of nothing: push only from the value's first byte.
  Step push(char c);
  // The bytes so far are one complete value (true for a top-level number awaiting its end).
  bool complete() const;

  // Nesting past this fails the value instead of growing without bound.
  static constexpr size_t kMaxDepth = 512;

 private:
  enum class St : uint8_t {
    value,      // a value starts here
    obj_first,  // after '{': a key or '}'
    obj_key,    // after ',' in an object: a key
    colon,      // after a key
    arr_first,  // after '[': a value or ']'
    after,      // after a member or element: ',' or the closer
    str,
    esc,
    hex,
    lit,  // the rest of true / false / null
    num,
    finished,
    failed,
  };
  // Where a number is, as the RFC 8259 number grammar's states.
  enum class Num : uint8_t { minus, zero, digits, dot, frac, e, esign, exp, bad };

  Step start_value(char c);
  Step end_value();
  Step fail();
  static Num next(Num n, char c);
  static bool accepting(Num n);

  St st_ = St::value;
  std::vector<char> stack_;  // '{' or '[' per open container
  bool key_ = false;         // the string being read is an object key
  int hex_left_ = 0;
  const char* lit_ = nullptr;  // what the literal still needs
  Num num_ = Num::bad;
};

}  // namespace lift
