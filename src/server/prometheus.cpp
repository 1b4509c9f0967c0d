#include "server/prometheus.h"

#include <cstdio>
#include <initializer_list>
#include <utility>

namespace lift {

namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void value(std::string& out, const char* name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += name;
  out += ' ';
  out += buf;
  out += '\n';
}

// A counter with one sample per value of one label.
void labelled(std::string& out, const char* name, const char* help, const char* label,
              std::initializer_list<std::pair<const char*, uint64_t>> samples) {
  header(out, name, "counter", help);
  char buf[192];
  for (const auto& [value, count] : samples) {
    std::snprintf(buf, sizeof buf, "%s{%s=\"%s\"} %llu\n", name, label, value,
                  static_cast<unsigned long long>(count));
    out += buf;
  }
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  char buf[128];
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    if (i < h.bounds().size()) {
      std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name, h.bounds()[i],
                    static_cast<unsigned long long>(cumulative));
    } else {
      std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                    static_cast<unsigned long long>(cumulative));
    }
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%s_sum %.17g\n%s_count %llu\n", name, h.sum(), name,
                static_cast<unsigned long long>(h.count()));
  out += buf;
}

}  // namespace

std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s) {
  std::string o;
  o.reserve(8192);
  value(o, "lift:num_requests_running", "gauge",
        "Requests with a sample running on the engine (a request of n samples counts once).",
        static_cast<double>(m.running));
  value(o, "lift:num_requests_waiting", "gauge",
        "Requests waiting to be scheduled, none of their samples running.",
        static_cast<double>(m.waiting));
  value(o, "lift:num_sequences_running", "gauge", "Sequences (samples) running on the engine.",
        static_cast<double>(m.running_seqs));
  value(o, "lift:num_sequences_waiting", "gauge",
        "Sequences (samples) waiting to be scheduled, preempted ones included.",
        static_cast<double>(m.waiting_seqs));
  value(o, "lift:kv_cache_usage_perc", "gauge",
        "Fraction of KV blocks in use (1 = full); reusable prefix-cache blocks do not count.",
        m.kv_usage);
  value(o, "lift:kv_cache_used_blocks", "gauge", "KV blocks in use.",
        static_cast<double>(m.kv_used_blocks));
  value(o, "lift:kv_cache_total_blocks", "gauge", "KV blocks in the pool.",
        static_cast<double>(m.kv_total_blocks));
  value(o, "lift:prefix_cache_queries_total", "counter",
        "Prompt tokens looked up in the prefix cache (every token of a request, at each "
        "admission).",
        static_cast<double>(m.prefix_queries));
  value(o, "lift:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
        static_cast<double>(m.prefix_hits));
  value(o, "lift:num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
        static_cast<double>(m.preemptions));
  value(o, "lift:recomputed_tokens_total", "counter", "Tokens recomputed after preemption.",
        static_cast<double>(m.recomputed_tokens));
  value(o, "lift:prompt_tokens_total", "counter", "Prompt tokens processed.",
        static_cast<double>(m.prompt_tokens));
  value(o, "lift:generation_tokens_total", "counter", "Tokens generated.",
        static_cast<double>(m.generation_tokens));
  labelled(o, "lift:request_success_total",
           "Requests the engine finished, by finish reason (aborted and failed ones are not "
           "counted).",
           "finished_reason", {{"stop", m.requests_stop}, {"length", m.requests_length}});
  value(o, "lift:request_rejected_total", "counter", "Requests answered with an error status.",
        static_cast<double>(s.requests_rejected));
  value(o, "lift:request_aborted_total", "counter", "Requests whose client went away.",
        static_cast<double>(s.requests_aborted));
  histogram(o, "lift:time_to_first_token_seconds",
            "Time from arrival to a request's first token (of any sample).", m.ttft);
  histogram(o, "lift:inter_token_latency_seconds", "Time between tokens of a sample.",
            m.inter_token);
  histogram(o, "lift:e2e_request_latency_seconds",
            "Time from arrival to the end of a finished request's last sample.", m.e2e);
  histogram(o, "lift:request_queue_time_seconds", "Time from arrival to first scheduling.",
            m.queue_time);
  return o;
}

}  // namespace lift
