// The OpenAI-compatible HTTP front end. HTTP threads parse, validate, submit to the engine
// and relay its outputs; they never run the model, and the engine thread never touches a
// socket. Concurrency is bounded by the engine's admission and a bounded waiting queue
// (503 when full), not by HTTP worker threads.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/chat_template.h"

namespace lift {

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  size_t max_waiting = 256;                 // requests queued beyond max_seqs before 503
  size_t max_body_bytes = size_t{8} << 20;  // larger bodies get 413
  std::optional<ChatFormat> chat_template;
  int shutdown_grace_seconds = 5;
  EngineConfig engine;
};

// Runs the server until SIGINT/SIGTERM; returns the exit code.
int run_server(const ServerOptions& opts);

}  // namespace lift
