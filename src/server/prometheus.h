// The engine's metrics in Prometheus text format (vLLM's meanings, "lift:" prefix), and the
// speculative-decoding counters read back from such a text (lift's or vLLM's) for benchmarks.
#pragma once

#include <string>
#include <string_view>

#include "engine/metrics.h"

namespace lift {

struct ServerCounters {
  // (Successes are the engine's: lift:request_success_total by finish reason.)
  uint64_t requests_rejected = 0;  // 4xx/5xx answers, 503s included
  uint64_t requests_aborted = 0;   // client went away
};

// The spec_decode series appear only when speculation is on (m.spec.proposer set).
std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s);

// The *:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total and
// *:spec_decode_num_accepted_tokens_per_pos counters of a /metrics text, whatever the prefix
// (lift:, vllm:), summed over label sets; proposer is the first proposer label seen ("server"
// when the series have none) and stays empty when the text has no spec_decode series. The
// histogram is not read. Lines that are not samples are skipped.
SpecDecodeMetrics parse_spec_decode(std::string_view text);

}  // namespace lift
