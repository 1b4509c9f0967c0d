// The engine's metrics in Prometheus text format (vLLM's meanings, "lift:" prefix).
#pragma once

#include <string>

#include "engine/metrics.h"

namespace lift {

struct ServerCounters {
  // (Successes are the engine's: lift:request_success_total by finish reason.)
  uint64_t requests_rejected = 0;  // 4xx/5xx answers, 503s included
  uint64_t requests_aborted = 0;   // client went away
};

std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s);

}  // namespace lift
