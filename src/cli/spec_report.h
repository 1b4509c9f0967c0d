// Speculative decoding's counters (EngineMetrics::spec) as the CLI's commands print them: one
// line of text and a JSON object, the same in generate --stats, bench throughput and bench serve.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/metrics.h"

namespace lift::cli {

// "speculative decoding ngram: 40 drafts, 120 draft tokens, 90 accepted (75.0%), mean accepted
// length 3.25 tokens per verify step, accepted at position 1..K: 38 30 22"; "speculative
// decoding off" when no proposer ran.
std::string spec_summary(const SpecDecodeMetrics& m);
// {"proposer", "drafts", "draft_tokens", "accepted_tokens", "acceptance_rate",
//  "mean_accepted_length", "accepted_per_pos"}; null when no proposer ran.
nlohmann::json spec_json(const SpecDecodeMetrics& m);
// The counters of `after` minus those of `before` (one benchmark level out of a server's
// cumulative counters); the histogram is left empty.
SpecDecodeMetrics spec_delta(const SpecDecodeMetrics& after, const SpecDecodeMetrics& before);

}  // namespace lift::cli
