// One line per HTTP request: method, path, status, prompt/output tokens, latency and request
// id, as text or as one JSON object per line (--log-format json) for log pipelines.
#pragma once

#include <string>

#include "server/http/http_server.h"

namespace lift {

enum class LogFormat { text, json };
LogFormat parse_log_format(const std::string& s);  // throws lift::Error

std::string access_log_line(LogFormat f, const http::Request& req, int status,
                            const http::Usage& usage, double seconds);

}  // namespace lift
