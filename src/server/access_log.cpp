#include "server/access_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "server/openai_response.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {

LogFormat parse_log_format(const std::string& s) {
  if (s == "text") return LogFormat::text;
  if (s == "json") return LogFormat::json;
  throw Error("unknown log format '" + s + "' (use text or json)");
}

namespace {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

// A client's path in a text log line: bounded, no spaces, quotes or control bytes.
std::string printable(const std::string& s, size_t max = 200) {
  std::string r;
  for (unsigned char c : s.substr(0, max)) {
    r += (c <= 0x20 || c == '"' || c == 0x7f || c >= 0x80) ? '?' : static_cast<char>(c);
  }
  if (s.size() > max) r += "...";
  return r;
}

}  // namespace

std::string access_log_line(LogFormat f, const http::Request& req, int status,
                            const http::Usage& usage, double seconds) {
  if (f == LogFormat::json) {
    nlohmann::json j = {{"time", utc_now()},
                        {"remote", req.remote},
                        {"method", sanitize_utf8(req.method.substr(0, 32))},
                        {"path", sanitize_utf8(req.path.substr(0, 200))},
                        {"status", status},
                        {"latency_s", seconds},
                        {"request_id", req.id}};
    if (usage.prompt_tokens >= 0) j["prompt_tokens"] = usage.prompt_tokens;
    if (usage.completion_tokens >= 0) j["completion_tokens"] = usage.completion_tokens;
    return dump(j);
  }
  auto tokens = [](int n) { return n < 0 ? std::string("-") : std::to_string(n); };
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3fs id=", seconds);
  std::string counts = " ";
  counts += std::to_string(status);
  counts += " prompt=";
  counts += tokens(usage.prompt_tokens);
  counts += " output=";
  counts += tokens(usage.completion_tokens);
  counts += ' ';
  return utc_now() + " " + req.remote + " \"" + printable(req.method, 32) + " " +
         printable(req.path) + "\"" + counts + buf + printable(req.id, 80);
}

}  // namespace lift
