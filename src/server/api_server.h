// The OpenAI-compatible API on one model: routes, access rules and the engine, over lift's
// HTTP server (server/http). Handlers parse, validate, submit to the engine and hand the
// event loop a body to pump; they never run the model, and the engine thread never touches
// a socket. Concurrency is bounded by the engine's admission and a bounded waiting queue
// (503 when full), not by connections or threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/access_log.h"
#include "server/chat_template.h"
#include "server/http/http_server.h"
#include "server/tool_calls.h"

namespace lift {

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;            // from --api-key, --api-key-file and LIFT_API_KEY
  std::vector<std::string> allowed_origins;     // browser origins allowed (CORS); "*" for any
  std::vector<std::string> served_model_names;  // empty: the model file's stem
  size_t max_waiting = 256;                     // requests queued beyond max_seqs before 503
  std::string chat_template;  // --chat-template: builtin name, file or inline (empty: the model's)
  std::optional<ToolCallFormat> tool_format;  // --tool-call-parser (unset: from the template)
  int shutdown_grace_seconds = 5;
  LogFormat log_format = LogFormat::text;
  bool access_log = true;
  http::ServerLimits http;  // max_body_bytes is http.parse.max_body_bytes
  EngineConfig engine;
};

// Runs the server until SIGINT/SIGTERM (a second one exits at once); returns the exit code.
int run_server(const ServerOptions& opts);

}  // namespace lift
