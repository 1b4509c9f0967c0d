#include "engine/output_processor.h"

#include <algorithm>

namespace lift {

namespace {

// Length of the longest suffix of text that is a proper prefix of some stop string: that
// much must wait for the next token before it can be shown.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& s : stops) {
    const size_t max_len = std::min(text.size(), s.size() - 1);
    for (size_t len = max_len; len > keep; --len) {
      if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  // Never split a UTF-8 character: back up to a character boundary.
  while (keep < text.size() && keep > 0 &&
         (static_cast<unsigned char>(text[text.size() - keep]) & 0xC0) == 0x80) {
    ++keep;
  }
  return keep;
}

}  // namespace

void OutputProcessor::process(Sequence& seq, int32_t token, RequestOutput& out) {
  const RequestParams& p = seq.req->params;
  seq.tokens.push_back(token);
  const size_t n_out = seq.n_output();
  const bool is_eos = !p.ignore_eos && token == tok_.vocab().eos_id();
  const bool is_stop_id =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  if (is_eos || is_stop_id) {
    // The stop token itself is counted in usage but neither listed nor shown.
    out.finish = FinishReason::stop;
    flush(seq, out);
    return;
  }
  out.token_ids.push_back(token);
  const size_t old_size = seq.pending.size();
  seq.decoder->push(token, seq.pending);

  // Stop strings count from the min_tokens-th output token on (vLLM): a match must end in
  // the text this token added (earlier text was searched before, or came before min_tokens).
  // Until then held-back text is still held back, since a stop string may begin in it.
  if (!p.stop.empty() && n_out >= static_cast<size_t>(p.min_tokens)) {
    size_t cut = std::string::npos;
    for (const std::string& s : p.stop) {
      const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
      cut = std::min(cut, seq.pending.find(s, from));
    }
    if (cut != std::string::npos) {
      out.text += seq.pending.substr(0, cut);
      seq.pending.clear();
      out.finish = FinishReason::stop;
      return;
    }
  }
  if (n_out >= static_cast<size_t>(p.max_tokens) ||
      seq.tokens.size() >= static_cast<size_t>(context_length_)) {
    out.finish = FinishReason::length;
    flush(seq, out);
    return;
  }
  const size_t keep = p.stop.empty() ? 0 : held_back(seq.pending, p.stop);
  out.text += seq.pending.substr(0, seq.pending.size() - keep);
  seq.pending.erase(0, seq.pending.size() - keep);
}

void OutputProcessor::flush(Sequence& seq, RequestOutput& out) {
  seq.decoder->flush(seq.pending);
  out.text += seq.pending;
  seq.pending.clear();
}

}  // namespace lift
