#include "cli/spec_report.h"

#include <algorithm>
#include <cstdio>

namespace lift::cli {

std::string spec_summary(const SpecDecodeMetrics& m) {
  if (m.proposer.empty()) return "speculative decoding off";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "speculative decoding %s: %llu drafts, %llu draft tokens, %llu accepted (%.1f%%), "
                "mean accepted length %.2f tokens per verify step",
                m.proposer.c_str(), static_cast<unsigned long long>(m.drafts),
                static_cast<unsigned long long>(m.draft_tokens),
                static_cast<unsigned long long>(m.accepted_tokens), 100.0 * m.acceptance_rate(),
                m.mean_accepted_length());
  std::string s = buf;
  // Trailing positions nobody reached say nothing; keep up to the last non-zero one.
  size_t used = m.accepted_per_pos.size();
  while (used > 0 && m.accepted_per_pos[used - 1] == 0) --used;
  if (used > 0) {
    s += ", accepted at position 1.." + std::to_string(used) + ":";
    for (size_t i = 0; i < used; ++i) s += " " + std::to_string(m.accepted_per_pos[i]);
  }
  return s;
}

nlohmann::json spec_json(const SpecDecodeMetrics& m) {
  if (m.proposer.empty()) return nullptr;
  return {{"proposer", m.proposer},
          {"drafts", m.drafts},
          {"draft_tokens", m.draft_tokens},
          {"accepted_tokens", m.accepted_tokens},
          {"acceptance_rate", m.acceptance_rate()},
          {"mean_accepted_length", m.mean_accepted_length()},
          {"accepted_per_pos", m.accepted_per_pos}};
}

SpecDecodeMetrics spec_delta(const SpecDecodeMetrics& after, const SpecDecodeMetrics& before) {
  // Counters only grow; a server restarted in between would make them smaller: count from 0.
  const auto minus = [](uint64_t a, uint64_t b) { return a >= b ? a - b : a; };
  SpecDecodeMetrics d;
  d.proposer = after.proposer;
  d.drafts = minus(after.drafts, before.drafts);
  d.draft_tokens = minus(after.draft_tokens, before.draft_tokens);
  d.accepted_tokens = minus(after.accepted_tokens, before.accepted_tokens);
  d.accepted_per_pos = after.accepted_per_pos;
  for (size_t i = 0; i < std::min(d.accepted_per_pos.size(), before.accepted_per_pos.size()); ++i) {
    d.accepted_per_pos[i] = minus(after.accepted_per_pos[i], before.accepted_per_pos[i]);
  }
  return d;
}

}  // namespace lift::cli
