// lift serve: the OpenAI-compatible HTTP server on one model.
#include <memory>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "server/http_server.h"

namespace lift::cli {

namespace {
struct ServeOptions {
  ServerOptions server;
  EngineOptions engine;
  std::string chat_template;
};
}  // namespace

Runner add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  o->server.model_path = "../shared/models/stories260K/stories260K.gguf";
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  c->add_option("-m,--model", o->server.model_path, "GGUF model file");
  c->add_option("--host", o->server.host, "Address to listen on");
  c->add_option("--port", o->server.port, "Port")->check(CLI::Range(0, 65535));
  c->add_option("--api-key", o->server.api_key, "Require 'Authorization: Bearer KEY'");
  c->add_option("--max-waiting", o->server.max_waiting,
                "Requests that may wait beyond --max-seqs before new ones get 503");
  c->add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body accepted");
  c->add_option("--chat-template", o->chat_template,
                "chatml, llama2, llama3, mistral, gemma, zephyr or phi3 (default: from the model)");
  c->add_option("--shutdown-grace", o->server.shutdown_grace_seconds,
                "Seconds in-flight requests get to finish after SIGINT/SIGTERM");
  add_engine_options(c, o->engine);
  return [o] {
    if (!o->chat_template.empty()) o->server.chat_template = parse_chat_format(o->chat_template);
    o->server.engine = o->engine.to_config();
    return run_server(o->server);
  };
}

}  // namespace lift::cli
