#include "engine/logits_processor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "util/error.h"

namespace lift {

namespace {

// Calls f for each token that ends a sample of p (a stop id equal to EOS comes twice; f must
// not mind).
template <typename F>
void for_each_end(const RequestParams& p, int32_t eos_id, F&& f) {
  if (!p.ignore_eos && eos_id >= 0) f(eos_id);
  for (int32_t t : p.stop_token_ids) f(t);
}

}  // namespace

void apply_min_tokens_mask(std::span<float> logits, const RequestParams& p, int32_t eos_id,
                           size_t n_output) {
  if (n_output >= static_cast<size_t>(std::max(p.min_tokens, 0))) return;
  for_each_end(p, eos_id, [&](int32_t t) {
    if (t >= 0 && static_cast<size_t>(t) < logits.size())
      logits[static_cast<size_t>(t)] = -INFINITY;
  });
}

bool is_end_token(const RequestParams& p, int32_t eos_id, int32_t token) {
  return (!p.ignore_eos && eos_id >= 0 && token == eos_id) ||
         std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
             p.stop_token_ids.end();
}

LogitsProcessor::LogitsProcessor(int vocab_size, int32_t eos_id)
    : vocab_size_(vocab_size),
      eos_id_(eos_id),
      mask_((static_cast<size_t>(std::max(vocab_size, 0)) + 63) / 64) {}

void LogitsProcessor::set(int32_t t, bool on) {
  if (t < 0 || t >= vocab_size_) return;
  const uint64_t bit = uint64_t{1} << (t & 63);
  uint64_t& w = mask_[static_cast<size_t>(t) >> 6];
  w = on ? w | bit : w & ~bit;
}

void LogitsProcessor::apply(std::span<float> logits, const RequestParams& p, size_t n_output,
                            structured::Matcher* matcher) {
  if (matcher == nullptr) {
    apply_min_tokens_mask(logits, p, eos_id_, n_output);
    return;
  }
  const structured::TokenVocab& vocab = matcher->compiled().vocab();
  if (logits.size() != static_cast<size_t>(vocab_size_) || vocab.size() != vocab_size_) {
    throw Error("internal: a constraint over " + std::to_string(vocab.size()) +
                " tokens applied to logits of " + std::to_string(logits.size()) +
                " (the engine's vocabulary has " + std::to_string(vocab_size_) + ")");
  }
  matcher->fill_mask(mask_);
  for (int32_t t : vocab.end_tokens()) {
    if (!is_end_token(p, eos_id_, t)) set(t, false);
  }
  const bool can_end = matcher->can_end();
  for_each_end(p, eos_id_, [&](int32_t t) { set(t, can_end); });

  const size_t words = mask_.size();
  const unsigned tail = static_cast<unsigned>(vocab_size_) & 63;
  const uint64_t last_valid = tail == 0 ? ~uint64_t{0} : (uint64_t{1} << tail) - 1;
  auto count = [&] {
    size_t n = 0;
    for (size_t w = 0; w < words; ++w)
      n += static_cast<size_t>(std::popcount(w + 1 == words ? mask_[w] & last_valid : mask_[w]));
    return n;
  };
  size_t allowed = count();
  if (can_end && n_output < static_cast<size_t>(std::max(p.min_tokens, 0))) {
    // min_tokens holds the end back only while the constraint allows something else.
    size_t ends = 0;
    for_each_end(p, eos_id_, [&](int32_t t) {
      if (t >= 0 && t < vocab_size_ && test(t)) {
        ++ends;
        set(t, false);
      }
    });
    if (ends == allowed) {
      for_each_end(p, eos_id_, [&](int32_t t) { set(t, true); });
    } else {
      allowed -= ends;
    }
  }
  if (allowed == 0) {
    throw structured::GrammarError("the constraint allows no token after " +
                                   std::to_string(n_output) +
                                   " output tokens: no token of the vocabulary continues the text");
  }
  for (size_t w = 0; w < words; ++w) {
    uint64_t off = ~mask_[w];
    if (w + 1 == words) off &= last_valid;
    while (off != 0) {
      logits[w * 64 + static_cast<size_t>(std::countr_zero(off))] = -INFINITY;
      off &= off - 1;
    }
  }
}

bool LogitsProcessor::advance(const RequestParams& p, int32_t token,
                              structured::Matcher* matcher) const {
  if (matcher == nullptr) return false;
  const bool end = is_end_token(p, eos_id_, token);
  if (end ? !matcher->can_end() : !matcher->accept(token)) {
    throw structured::GrammarError(
        "the sampler chose token " + std::to_string(token) +
        ", which the constraint does not allow here (logit_bias or non-finite logits left no "
        "allowed token to choose)");
  }
  return !end && matcher->is_done();
}

}  // namespace lift
