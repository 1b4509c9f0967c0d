// GPT-2's byte-level alphabet: byte-level BPE vocabularies (tokenizer.ggml.model == "gpt2")
// spell every byte as one printable code point, so token texts are valid UTF-8 and hold no
// spaces or control characters. Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes take U+0100, U+0101, ... in byte
// order (so ' ' is "Ġ" U+0120 and '\n' is "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lift {

// Appends the alphabet's spelling of each byte of `bytes` (1 or 2 UTF-8 bytes per input byte).
void append_byte_level(std::string& out, std::string_view bytes);

// The byte a code point of the alphabet stands for, or -1 when it stands for none.
int byte_level_value(uint32_t code_point);

// Maps the text of a byte-level token back to raw bytes. Characters outside the alphabet
// (texts of hand-added tokens) are kept as they are.
std::string byte_level_decode(std::string_view text);

}  // namespace lift
