#include "server/api_error.h"

#include "tokenizer/utf8.h"

namespace lift {

std::string excerpt(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const Utf8Sequence seq = next_utf8(s, pos);
    const bool valid = seq.status == Utf8Status::kValid;
    const size_t out_len = valid ? seq.length : kUtf8Replacement.size();
    if (out.size() + out_len > max_bytes) break;
    if (!valid) {
      out.append(kUtf8Replacement);
    } else if (seq.code_point < 0x20 || seq.code_point == 0x7F) {
      out.push_back(' ');
    } else {
      out.append(s.substr(pos, seq.length));
    }
    pos += seq.length;
  }
  if (pos < s.size()) out += "...";
  return out;
}

}  // namespace lift
