#include "util/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "util/error.h"

namespace lift::bench {

BaseUrl parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    throw Error("base URL '" + url + "': https is not supported, use http://");
  }
  if (url.rfind(scheme, 0) != 0) {
    throw Error("base URL '" + url + "' must start with http://");
  }
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    throw Error("base URL '" + url + "': user info is not supported");
  }

  BaseUrl b;
  std::string port;
  if (!authority.empty() && authority[0] == '[') {  // [v6 address]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw Error("base URL '" + url + "': unclosed '['");
    b.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') throw Error("base URL '" + url + "': junk after ']'");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    b.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (b.host.empty()) throw Error("base URL '" + url + "' has no host");
  if (!port.empty()) {
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw Error("base URL '" + url + "': bad port '" + port + "'");
    }
    b.port = std::stoi(port);
    if (b.port < 1 || b.port > 65535) throw Error("base URL '" + url + "': port out of range");
  }
  if (path.find_first_of("?#") != std::string::npos) {
    throw Error("base URL '" + url + "' must not have a query or fragment");
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    path.resize(path.size() - 3);
  while (!path.empty() && path.back() == '/') path.pop_back();
  b.prefix = path;
  return b;
}

std::vector<std::string> SseSplitter::feed(const char* data, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (data[i] != '\r') buf_.push_back(data[i]);
  }
  std::vector<std::string> out;
  size_t pos;
  while ((pos = buf_.find("\n\n")) != std::string::npos) {
    const std::string event = buf_.substr(0, pos);
    buf_.erase(0, pos + 2);
    std::string payload;
    bool has_data = false;
    size_t start = 0;
    while (start <= event.size()) {
      size_t end = event.find('\n', start);
      if (end == std::string::npos) end = event.size();
      const std::string line = event.substr(start, end - start);
      start = end + 1;
      if (line.rfind("data:", 0) != 0) continue;  // comments and other fields
      std::string value = line.substr(5);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (has_data) payload.push_back('\n');
      payload += value;
      has_data = true;
    }
    if (has_data) out.push_back(std::move(payload));
  }
  return out;
}

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed) {
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] + gap(rng);
  return t;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Summary summarize(const std::vector<double>& v) {
  Summary s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(var / static_cast<double>(v.size()));
  s.median = percentile(v, 50);
  s.p99 = percentile(v, 99);
  return s;
}

LevelMetrics compute_metrics(const std::vector<RequestResult>& results, double duration) {
  LevelMetrics m;
  m.duration = duration;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++m.failed;
      ++m.failures[r.error.empty() ? "unknown error" : r.error];
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_tokens;
    m.total_output += r.output_tokens;
    ttft.push_back(r.ttft);
    e2el.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  if (duration > 0) {
    m.request_throughput = m.completed / duration;
    m.output_throughput = static_cast<double>(m.total_output) / duration;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration;
  }
  m.ttft = summarize(ttft);
  m.tpot = summarize(tpot);
  m.itl = summarize(itl);
  m.e2el = summarize(e2el);
  return m;
}

nlohmann::json metrics_json(const LevelMetrics& m) {
  nlohmann::json j = {{"completed", m.completed},
                      {"failed", m.failed},
                      {"duration", m.duration},
                      {"total_input_tokens", m.total_input},
                      {"total_output_tokens", m.total_output},
                      {"request_throughput", m.request_throughput},
                      {"output_throughput", m.output_throughput},
                      {"total_token_throughput", m.total_token_throughput}};
  const auto put = [&j](const std::string& name, const Summary& s) {
    j["mean_" + name + "_ms"] = s.mean * 1e3;
    j["median_" + name + "_ms"] = s.median * 1e3;
    j["p99_" + name + "_ms"] = s.p99 * 1e3;
    j["std_" + name + "_ms"] = s.std * 1e3;
  };
  put("ttft", m.ttft);
  put("tpot", m.tpot);
  put("itl", m.itl);
  put("e2el", m.e2el);
  j["failures"] = m.failures;
  return j;
}

namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        o.push_back(c);
    }
  }
  return o;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string num(double v) { return fmt("%.1f", v); }

// A round tick step (1, 2 or 5 times a power of ten) giving about five ticks up to max.
double tick_step(double max) {
  const double raw = max / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

struct Axis {
  double top = 1, step = 0.2;
};

Axis make_axis(double max) {
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  Axis a;
  a.step = tick_step(max * 1.08);
  a.top = std::ceil(max * 1.08 / a.step) * a.step;
  return a;
}

struct Series {
  std::string name, color;
  bool dashed = false;
  std::vector<double> y;
};

// One plot: its frame at (x0, y0) of size w x h, ticks, axis titles, the series and labels.
void panel(std::string& s, double x0, double y0, double w, double h, const std::string& title,
           const std::string& ylabel, const std::vector<ChartPoint>& pts,
           const std::vector<Series>& series) {
  double xmax = 0, ymax = 0;
  for (const ChartPoint& p : pts) xmax = std::max(xmax, p.output_throughput);
  for (const Series& se : series) {
    for (double v : se.y) ymax = std::max(ymax, v);
  }
  const Axis ax = make_axis(xmax), ay = make_axis(ymax);
  const auto px = [&](double v) { return x0 + v / ax.top * w; };
  const auto py = [&](double v) { return y0 + h - v / ay.top * h; };

  s += "<text x=\"" + num(x0 + w / 2) + "\" y=\"" + num(y0 - 12) +
       "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) +
       "</text>\n";
  // Grid and ticks.
  for (int i = 0; i * ax.step <= ax.top * (1 + 1e-9); ++i) {
    const double v = i * ax.step, x = px(v);
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(y0 + h) + "\" stroke=\"#e4e4e4\"/>\n";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(y0 + h + 16) +
         "\" text-anchor=\"middle\" font-size=\"11\">" + fmt(ax.step < 1 ? "%.2g" : "%.0f", v) +
         "</text>\n";
  }
  for (int i = 0; i * ay.step <= ay.top * (1 + 1e-9); ++i) {
    const double v = i * ay.step, y = py(v);
    s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x0 + w) + "\" y2=\"" +
         num(y) + "\" stroke=\"#e4e4e4\"/>\n";
    s += "<text x=\"" + num(x0 - 6) + "\" y=\"" + num(y + 4) +
         "\" text-anchor=\"end\" font-size=\"11\">" + fmt(ay.step < 1 ? "%.2g" : "%.0f", v) +
         "</text>\n";
  }
  s += "<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(w) + "\" height=\"" +
       num(h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  // Axis titles.
  s += "<text x=\"" + num(x0 + w / 2) + "\" y=\"" + num(y0 + h + 38) +
       "\" text-anchor=\"middle\" font-size=\"12\">Output throughput (tok/s)</text>\n";
  const double ly = y0 + h / 2, lx = x0 - 48;
  s += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\" font-size=\"12\"" +
       " transform=\"rotate(-90 " + num(lx) + " " + num(ly) + ")\">" + xml_escape(ylabel) +
       "</text>\n";
  // Series: a polyline through the points in run order, a marker and a label at each.
  for (const Series& se : series) {
    std::string path;
    for (size_t i = 0; i < pts.size() && i < se.y.size(); ++i) {
      path += num(px(pts[i].output_throughput)) + "," + num(py(se.y[i])) + " ";
    }
    s += "<polyline fill=\"none\" stroke=\"" + se.color + "\" stroke-width=\"2\"" +
         (se.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + path + "\"/>\n";
    for (size_t i = 0; i < pts.size() && i < se.y.size(); ++i) {
      const double x = px(pts[i].output_throughput), y = py(se.y[i]);
      s += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"4\" fill=\"" + se.color +
           "\"><title>" +
           xml_escape(pts[i].label + " " + se.name + ": " + fmt("%.2f", se.y[i]) + " ms at " +
                      fmt("%.1f", pts[i].output_throughput) + " tok/s") +
           "</title></circle>\n";
      s += "<text x=\"" + num(x + 6) + "\" y=\"" + num(y - 6) + "\" font-size=\"10\" fill=\"" +
           se.color + "\">" + xml_escape(pts[i].label) + "</text>\n";
    }
  }
  // Legend, top left inside the frame.
  double ly2 = y0 + 16;
  for (const Series& se : series) {
    s += "<line x1=\"" + num(x0 + 10) + "\" y1=\"" + num(ly2 - 4) + "\" x2=\"" + num(x0 + 34) +
         "\" y2=\"" + num(ly2 - 4) + "\" stroke=\"" + se.color + "\" stroke-width=\"2\"" +
         (se.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    s += "<text x=\"" + num(x0 + 40) + "\" y=\"" + num(ly2) + "\" font-size=\"11\">" +
         xml_escape(se.name) + "</text>\n";
    ly2 += 16;
  }
}

}  // namespace

std::string latency_chart_svg(const std::vector<ChartPoint>& points, const std::string& title) {
  const double W = 1000, H = 470, pw = 380, ph = 320, top = 80;
  std::string s =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
      num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
      "\" font-family=\"sans-serif\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"30\" text-anchor=\"middle\" font-size=\"18\">" +
       xml_escape(title) + "</text>\n";
  std::vector<Series> ttft{{"median TTFT", "#1f77b4", false, {}},
                           {"p99 TTFT", "#d62728", true, {}}};
  std::vector<Series> tpot{{"median TPOT", "#1f77b4", false, {}},
                           {"p99 TPOT", "#d62728", true, {}}};
  for (const ChartPoint& p : points) {
    ttft[0].y.push_back(p.ttft_median_ms);
    ttft[1].y.push_back(p.ttft_p99_ms);
    tpot[0].y.push_back(p.tpot_median_ms);
    tpot[1].y.push_back(p.tpot_p99_ms);
  }
  panel(s, 90, top, pw, ph, "Time to first token", "TTFT (ms)", points, ttft);
  panel(s, 90 + pw + 120, top, pw, ph, "Time per output token", "TPOT (ms)", points, tpot);
  s += "</svg>\n";
  return s;
}

}  // namespace lift::bench
