// libFuzzer target for StreamDecoder: any id sequence, pushed one id at a time, must give
// valid UTF-8 in every piece, hold back at most 3 bytes, and add up to exactly what a
// straightforward model of the rules gives: every token's piece (with the leading-space rule)
// concatenated, then sanitize_utf8 of the whole. At at_start it must also equal
// Tokenizer::decode. An id out of range is a lift::Error, and the stream goes on.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

// The bytes the pieces make, before UTF-8 repair, by the rules in tokenizer.h: the first piece
// with text at the start (when at_start) or after BOS loses one leading ' ' when the
// vocabulary adds a space prefix; byte tokens are never stripped.
std::string model_bytes(const lift::Tokenizer& tok, const std::vector<int32_t>& ids, bool special,
                        bool at_start) {
  const lift::Vocab& v = tok.vocab();
  bool strip = at_start && v.add_space_prefix();
  std::string out;
  for (const int32_t id : ids) {
    std::string_view piece = tok.token_to_piece(id, special);
    if (id == v.bos_id()) {
      strip = v.add_space_prefix();
    } else if (!piece.empty() && strip) {
      strip = false;
      if (!v.is_byte(id) && piece.front() == ' ') piece.remove_prefix(1);
    }
    out.append(piece);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  if (size == 0) return 0;
  const fuzz::DecoderInput in = fuzz::read_decoder_input(data, size);
  const Tokenizer& tok = fuzz::tokenizer(in.vocab);
  const auto n = static_cast<uint32_t>(tok.vocab().size());
  std::vector<int32_t> ids;
  for (const uint32_t r : in.raw_ids) ids.push_back(static_cast<int32_t>(r % n));

  StreamDecoder d(tok, in.at_start, in.special);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = d.push(ids[i]);
    fuzz::check(is_valid_utf8(piece), "every piece is valid UTF-8", piece);
    fuzz::check(d.pending_bytes() <= 3, "at most 3 bytes are held back");
    streamed += piece;
    if (in.out_of_range && i == ids.size() / 2) {
      bool threw = false;
      try {
        (void)d.push(static_cast<int32_t>(n));
      } catch (const Error&) {
        threw = true;
      }
      fuzz::check(threw, "an id out of range throws lift::Error");
    }
  }
  const std::string tail = d.flush();
  fuzz::check(is_valid_utf8(tail), "the flushed tail is valid UTF-8", tail);
  fuzz::check(d.pending_bytes() == 0, "nothing is held after flush");
  streamed += tail;

  const std::string want = sanitize_utf8(model_bytes(tok, ids, in.special, in.at_start));
  if (streamed != want) fuzz::fail("streamed text == sanitize(concatenated pieces)", streamed);
  if (in.at_start) {
    fuzz::check(tok.decode(ids, in.special) == streamed, "streaming equals decode()", streamed);
  }
  // After reset the decoder starts over: the same ids give the same text again.
  d.reset(in.at_start);
  std::string again;
  for (const int32_t id : ids) d.push(id, again);
  d.flush(again);
  fuzz::check(again == streamed, "reset() starts a fresh stream", again);
  return 0;
}
