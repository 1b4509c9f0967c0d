// libFuzzer target for Tokenizer::encode, differential: on real vocabularies (SentencePiece
// Llama, Phi-3, stories260K, Baichuan, Gemma 3; byte-level BPE Qwen2 and Llama 3) the fast
// encoder must give exactly the ids of the simple quadratic reference
// (tests/tokenizer/reference_encoder.h) for any bytes, with any flags; it never fails; ids
// are in range; text without special tokens decodes back to itself, and on the byte-level
// vocabularies the raw pieces give back every byte, ill-formed UTF-8 included.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/reference_encoder.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

// The reference is quadratic: only inputs this short are compared with it.
constexpr size_t kMaxReferenceBytes = 512;

const lift::test::ReferenceEncoder& reference(size_t vocab) {
  static std::vector<std::unique_ptr<lift::test::ReferenceEncoder>> cache(
      lift::fuzz::vocab_files().size());
  auto& slot = cache.at(vocab);
  if (!slot) slot = std::make_unique<lift::test::ReferenceEncoder>(lift::fuzz::tokenizer(vocab));
  return *slot;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  if (size == 0) return 0;
  const fuzz::TokenizerInput in = fuzz::read_tokenizer_input(data, size);
  const Tokenizer& tok = fuzz::tokenizer(in.vocab);
  const Vocab& v = tok.vocab();
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(in.text, in.add_bos, in.parse_special, in.add_eos);
  } catch (const Error& e) {
    fuzz::fail("encode never fails on these vocabularies", e.what());
  }
  bool special = false;
  for (const int32_t id : ids) {
    fuzz::check(v.valid_id(id), "ids are in range");
    const TokenType t = v.type(id);
    special = special || t == TokenType::kControl || t == TokenType::kUnknown ||
              t == TokenType::kUserDefined;
  }
  if (in.text.size() <= kMaxReferenceBytes) {
    const std::vector<int32_t> want =
        reference(in.vocab).encode(in.text, in.add_bos, in.parse_special, in.add_eos);
    if (ids != want) {
      fuzz::fail("encode matches the reference encoder",
                 "got " + ids_text(ids) + "\n  want " + ids_text(want));
    }
  }
  // Round trip: one plain fragment (no special token; for SentencePiece no literal U+2581,
  // which encodes like a space) of valid UTF-8 decodes to itself. BOS/EOS decode to nothing.
  const bool byte_level = v.model() == "gpt2";
  if (!special && is_valid_utf8(in.text) &&
      (byte_level || in.text.find("\xE2\x96\x81") == std::string::npos)) {
    const std::string back = tok.decode(ids);
    if (back != in.text) fuzz::fail("decode(encode(text)) == text", back);
  }
  // Byte-level BPE loses nothing: the pieces (special ones by their text) are the input bytes.
  if (byte_level) {
    std::string raw;
    for (const int32_t id : ids) raw += tok.token_to_piece(id, /*special=*/true);
    std::string want;
    if (in.add_bos && v.bos_id() >= 0) want += tok.token_to_piece(v.bos_id(), true);
    want += in.text;
    if (in.add_eos && v.eos_id() >= 0) want += tok.token_to_piece(v.eos_id(), true);
    if (raw != want) fuzz::fail("byte-level pieces concatenate to the input", raw);
  }
  return 0;
}
