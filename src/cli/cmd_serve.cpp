// lift serve: the OpenAI-compatible HTTP server on one model.
#include <cstdlib>
#include <memory>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "server/access_policy.h"
#include "server/api_server.h"

namespace lift::cli {

namespace {
struct ServeOptions {
  ServerOptions server;
  EngineOptions engine;
  std::string chat_template;
  std::string tool_call_parser;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string log_format = "text";
  bool no_access_log = false;
  double idle_timeout = 5, read_timeout = 15, write_timeout = 15;
};

http::Millis millis(double seconds) { return http::Millis(static_cast<int64_t>(seconds * 1000)); }
}  // namespace

Runner add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  o->server.model_path = "../shared/models/stories260K/stories260K.gguf";
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  c->add_option("-m,--model", o->server.model_path, "GGUF model file");
  c->add_option("--host", o->server.host, "Address to listen on");
  c->add_option("--port", o->server.port, "Port")->check(CLI::Range(0, 65535));
  c->add_option("--api-key", o->api_keys,
                "Require 'Authorization: Bearer KEY' (repeatable; prefer --api-key-file or "
                "LIFT_API_KEY, which 'ps' does not show)");
  c->add_option("--api-key-file", o->api_key_file, "File with one API key per line");
  c->add_option("--allowed-origins", o->server.allowed_origins,
                "Browser origins allowed to call the API (CORS), e.g. http://localhost:3000, "
                "or '*'; requests from any other Origin get 403")
      ->delimiter(',');
  c->add_option("--served-model-name", o->server.served_model_names,
                "Names the 'model' field may use (default: the model file's name); others get "
                "404 model_not_found")
      ->delimiter(',');
  c->add_option("--max-waiting", o->server.max_waiting,
                "Requests that may wait beyond --max-seqs before new ones get 503");
  c->add_option("--max-body-bytes", o->server.http.parse.max_body_bytes,
                "Largest request body accepted (413 beyond)");
  c->add_option("--max-connections", o->server.http.max_connections,
                "Open connections served at once; beyond, idle ones are closed or newcomers get "
                "503")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  c->add_option("--idle-timeout", o->idle_timeout,
                "Seconds a connection may wait before sending (the next) request")
      ->check(CLI::PositiveNumber);
  c->add_option("--read-timeout", o->read_timeout,
                "Seconds a request may take to arrive whole, once its first byte came (408)")
      ->check(CLI::PositiveNumber);
  c->add_option("--write-timeout", o->write_timeout,
                "Seconds a client may take no output before it is dropped (its request aborted)")
      ->check(CLI::PositiveNumber);
  c->add_option("--http-threads", o->server.http.handler_threads,
                "Threads that parse and tokenize requests")
      ->check(CLI::Range(1, 256));
  c->add_option("--chat-template", o->chat_template,
                "Builtin name (chatml, llama2, llama3, mistral, gemma, zephyr, phi3), a Jinja "
                "file, or an inline template (default: the model's tokenizer.chat_template)");
  c->add_option("--tool-call-parser", o->tool_call_parser,
                "The syntax the model writes tool calls in: llama3_json, hermes, mistral or none "
                "(default: detected from the chat template)")
      ->check([](const std::string& v) {
        try {
          (void)parse_tool_call_format(v);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  c->add_option("--shutdown-grace", o->server.shutdown_grace_seconds,
                "Seconds in-flight requests get to finish after SIGINT/SIGTERM");
  c->add_option("--log-format", o->log_format, "Access log lines: text or json");
  c->add_flag("--no-access-log", o->no_access_log, "No line per request on stderr");
  add_engine_options(c, o->engine);
  return [o] {
    o->server.chat_template = o->chat_template;
    if (!o->tool_call_parser.empty()) {
      o->server.tool_format = parse_tool_call_format(o->tool_call_parser);
    }
    o->server.api_keys = gather_api_keys(o->api_keys, o->api_key_file, std::getenv("LIFT_API_KEY"));
    o->server.log_format = parse_log_format(o->log_format);
    o->server.access_log = !o->no_access_log;
    o->server.http.idle_timeout = millis(o->idle_timeout);
    o->server.http.read_timeout = millis(o->read_timeout);
    o->server.http.write_timeout = millis(o->write_timeout);
    // Before the target, so a bad draft file fails fast; it outlives the server's engine.
    if (const int rc = run_tp_follower(o->engine, o->server.model_path); rc >= 0) return rc;
    const std::unique_ptr<LlamaModel> draft = o->engine.load_draft_model();
    o->server.engine = o->engine.to_config(draft.get());
    return run_server(o->server);
  };
}

}  // namespace lift::cli
