#include "server/prometheus.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
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

// labels: more labels for every sample ("a=\"x\""), or empty.
void histogram(std::string& out, const char* name, const char* help, const Histogram& h,
               const std::string& labels = {}) {
  header(out, name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket{" + (labels.empty() ? "" : labels + ",");
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  char buf[64];
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    if (i < h.bounds().size()) {
      std::snprintf(buf, sizeof buf, "%g", h.bounds()[i]);
    } else {
      std::snprintf(buf, sizeof buf, "+Inf");
    }
    out += bucket + "le=\"" + buf + "\"} " + std::to_string(cumulative) + "\n";
  }
  std::snprintf(buf, sizeof buf, "%.17g", h.sum());
  out += std::string(name) + "_sum" + own + " " + buf + "\n";
  out += std::string(name) + "_count" + own + " " + std::to_string(h.count()) + "\n";
}

// A label value as the text format quotes it.
std::string escaped(const std::string& v) {
  std::string e;
  for (char c : v) {
    if (c == '\\' || c == '"') e += '\\';
    if (c == '\n') {
      e += "\\n";
      continue;
    }
    e += c;
  }
  return e;
}

// Speculative decoding's counters, vLLM's spec_decode names, each sample labelled with the
// proposer so runs with different proposers stay apart in one time series database.
void spec_decode(std::string& out, const SpecDecodeMetrics& m) {
  const std::string label = "proposer=\"" + escaped(m.proposer) + "\"";
  const auto counter = [&](const char* name, const char* help, uint64_t v) {
    header(out, name, "counter", help);
    out += std::string(name) + "{" + label + "} " + std::to_string(v) + "\n";
  };
  counter("lift:spec_decode_num_drafts_total",
          "Drafts verified: one sequence's proposals checked in one step.", m.drafts);
  counter("lift:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", m.draft_tokens);
  counter("lift:spec_decode_num_accepted_tokens_total", "Draft tokens the target model accepted.",
          m.accepted_tokens);
  const char* per_pos = "lift:spec_decode_num_accepted_tokens_per_pos";
  header(out, per_pos, "counter", "Drafts whose token at this position (from 0) was accepted.");
  for (size_t i = 0; i < m.accepted_per_pos.size(); ++i) {
    out += std::string(per_pos) + "{" + label + ",position=\"" + std::to_string(i) + "\"} " +
           std::to_string(m.accepted_per_pos[i]) + "\n";
  }
  histogram(out, "lift:spec_decode_accepted_length", "Draft tokens accepted per draft.",
            m.accepted_length, label);
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
  if (!m.spec.proposer.empty()) spec_decode(o, m.spec);
  return o;
}

namespace {

// The value of label `key` in a sample's label text (between the braces), if present.
std::optional<std::string> label_value(std::string_view labels, std::string_view key) {
  size_t pos = 0;
  while (pos < labels.size()) {
    const size_t eq = labels.find('=', pos);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"') break;
    std::string_view name = labels.substr(pos, eq - pos);
    while (!name.empty() && (name.front() == ' ' || name.front() == ',')) name.remove_prefix(1);
    std::string v;
    size_t i = eq + 2;
    for (; i < labels.size() && labels[i] != '"'; ++i) {
      if (labels[i] == '\\' && i + 1 < labels.size()) {
        ++i;
        v += labels[i] == 'n' ? '\n' : labels[i];
      } else {
        v += labels[i];
      }
    }
    if (name == key) return v;
    pos = i + 1;
  }
  return std::nullopt;
}

}  // namespace

SpecDecodeMetrics parse_spec_decode(std::string_view text) {
  SpecDecodeMetrics m;
  bool seen = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, name_end);
    const size_t colon = name.rfind(':');
    const std::string_view metric = colon == std::string_view::npos ? name : name.substr(colon + 1);
    std::string_view labels;
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string_view::npos) continue;
      labels = line.substr(name_end + 1, close - name_end - 1);
      value_at = close + 1;
    }
    // The value, then perhaps a timestamp.
    const std::string value_text(line.substr(value_at));
    char* stop = nullptr;
    const double v = std::strtod(value_text.c_str(), &stop);
    if (stop == value_text.c_str() || !(v >= 0) || !std::isfinite(v)) continue;
    const auto count = static_cast<uint64_t>(v);
    uint64_t* into = nullptr;
    if (metric == "spec_decode_num_drafts_total") {
      into = &m.drafts;
    } else if (metric == "spec_decode_num_draft_tokens_total") {
      into = &m.draft_tokens;
    } else if (metric == "spec_decode_num_accepted_tokens_total") {
      into = &m.accepted_tokens;
    } else if (metric == "spec_decode_num_accepted_tokens_per_pos") {
      const std::optional<std::string> p = label_value(labels, "position");
      if (!p || p->empty() || p->size() > 3 ||
          p->find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      const auto i = static_cast<size_t>(std::stoul(*p));
      if (m.accepted_per_pos.size() <= i) m.accepted_per_pos.resize(i + 1, 0);
      into = &m.accepted_per_pos[i];
    } else {
      continue;
    }
    *into += count;
    if (!seen) {
      seen = true;
      m.proposer = label_value(labels, "proposer").value_or("server");
    }
  }
  return m;
}

}  // namespace lift
