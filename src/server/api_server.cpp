#include "server/api_server.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "model/llama_model.h"
#include "parallel/comm.h"
#include "server/access_policy.h"
#include "server/api_error.h"
#include "server/generation_body.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prometheus.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Api {
  ServerOptions opts;
  ApiKeys keys;
  OriginPolicy origins;
  bool check_host = false;  // loopback bind without keys: refuse foreign Host headers
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<structured::ConstraintCompiler> constraints;  // set before ready
  std::unique_ptr<Engine> engine;  // set (and started) under engine_mu, read after ready
  std::mutex engine_mu;
  std::optional<ChosenTemplate> chat;
  std::vector<std::string> model_names;  // the first one is the id responses carry
  std::atomic<size_t> in_flight{0};
  size_t capacity = 0;
  std::mutex counters_mu;
  ServerCounters counters;
  std::mutex log_mu;

  void count(uint64_t ServerCounters::*field) {
    std::lock_guard<std::mutex> lock(counters_mu);
    ++(counters.*field);
  }
};

http::Response json_response(int status, const json& body) {
  http::Response r;
  r.status = status;
  r.body = dump(body);
  return r;
}

http::Response error_response(int status, const std::string& message,
                              const std::string& type = "invalid_request_error",
                              const std::string& param = {}, const std::string& code = {}) {
  return json_response(status, error_json(message, type, param, code));
}

http::Response error_response(const ApiError& e) {
  http::Response r = error_response(e.status(), e.what(), e.type(), e.param(), e.code());
  if (e.status() == 503) r.headers.emplace_back("Retry-After", "1");  // OpenAI's SDKs retry
  return r;
}

http::Reply reply(http::Response r) {
  http::Reply out;
  out.response = std::move(r);
  return out;
}

std::optional<http::Response> loading(const Api& a) {
  if (!a.ready) return error_response(503, "the model is still loading", "server_error");
  return std::nullopt;
}

// The model is loading (503), or the server is draining (503); nullopt when it may serve.
std::optional<http::Response> unavailable(const Api& a) {
  if (a.draining) return error_response(503, "the server is shutting down", "server_error");
  return loading(a);
}

ApiContext api_context(const Api& a) {
  ApiContext ctx{*a.tok, a.chat->tmpl, static_cast<int>(a.engine->max_model_len()),
                 a.model->config().n_vocab};
  ctx.served_model_names = a.model_names;
  ctx.allow_priority = a.opts.engine.scheduler.priority_scheduling();
  ctx.constraints = a.constraints.get();
  ctx.tool_format = a.opts.tool_format;
  return ctx;
}

http::Reply handle_generate(Api& a, const http::Request& hreq, bool chat) {
  if (auto r = unavailable(a)) return reply(std::move(*r));
  auto req = std::make_shared<ApiRequest>();
  try {
    const ApiContext ctx = api_context(a);
    *req = chat ? parse_chat_request(hreq.body, ctx) : parse_completion_request(hreq.body, ctx);
  } catch (const ApiError& e) {
    a.count(&ServerCounters::requests_rejected);
    return reply(error_response(e));
  }
  if (a.in_flight.fetch_add(1) >= a.capacity) {
    a.in_flight.fetch_sub(1);
    a.count(&ServerCounters::requests_rejected);
    http::Response r = error_response(503,
                                      "the server is at capacity (" + std::to_string(a.capacity) +
                                          " requests running or queued); retry later",
                                      "server_error", "", "overloaded");
    r.headers.emplace_back("Retry-After", "1");
    return reply(std::move(r));
  }
  Submitted sub;
  try {
    sub = a.engine->add_request(req->prompt, req->params);
  } catch (const Error& e) {
    a.in_flight.fetch_sub(1);
    a.count(&ServerCounters::requests_rejected);
    return reply(error_response(400, e.what()));
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(sub.id);
  auto builder = std::make_unique<ResponseBuilder>(*req, *a.tok, id, a.model_names.front());
  http::Reply r;
  r.usage.prompt_tokens = static_cast<int>(req->prompt.size());
  r.async =
      std::make_shared<GenerationBody>(*a.engine, req, sub, std::move(builder), [&a](Outcome o) {
        // Client gone or server stopping; engine failures are the engine's own counter.
        if (o == Outcome::aborted) a.count(&ServerCounters::requests_aborted);
        a.in_flight.fetch_sub(1);
      });
  return r;
}

http::Reply handle_tokenize(Api& a, const http::Request& hreq) {
  if (auto r = unavailable(a)) return reply(std::move(*r));
  try {
    const TokenizeRequest t = parse_tokenize_request(hreq.body);
    const auto ids = tokenize(api_context(a), t);
    return reply(json_response(
        200,
        {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", a.engine->max_model_len()}}));
  } catch (const ApiError& e) {
    return reply(error_response(e));
  }
}

// llama.cpp's POST /apply-template: the prompt a chat request would generate from, as text.
http::Reply handle_apply_template(Api& a, const http::Request& hreq) {
  if (auto r = unavailable(a)) return reply(std::move(*r));
  try {
    const ChatInput in = parse_chat_input(hreq.body);
    return reply(json_response(200, {{"prompt", render_chat_text(api_context(a), in)}}));
  } catch (const ApiError& e) {
    return reply(error_response(e));
  }
}

http::Reply handle_detokenize(Api& a, const http::Request& hreq) {
  if (auto r = unavailable(a)) return reply(std::move(*r));
  try {
    const DetokenizeRequest d = parse_detokenize_request(hreq.body, a.model->config().n_vocab);
    const std::string text = a.tok->decode(d.tokens);
    return reply(json_response(200, {{"prompt", text}, {"content", text}}));
  } catch (const ApiError& e) {
    return reply(error_response(e));
  }
}

// Routes open to anyone who can reach the port: liveness and metrics (Prometheus scrapes
// without credentials, as with vLLM).
bool needs_key(const std::string& path) { return path != "/health" && path != "/metrics"; }

std::optional<http::Response> on_head(const Api& a, const http::Request& req) {
  const std::string* origin = req.header("Origin");
  if (origin && !a.origins.allows(*origin)) {
    return error_response(403,
                          "requests from the web origin '" + sanitize_utf8(origin->substr(0, 100)) +
                              "' are not allowed; start lift with --allowed-origins to allow it",
                          "permission_error", "", "origin_not_allowed");
  }
  if (a.check_host) {
    const std::string* host = req.header("Host");
    if (host && !host_header_is_loopback(*host)) {
      return error_response(
          403,
          "this server listens on a loopback address and only answers requests for a loopback "
          "host name, not '" +
              sanitize_utf8(host->substr(0, 100)) +
              "' (to serve other names, set an API key or listen on another address)",
          "permission_error", "", "host_not_allowed");
    }
  }
  if (req.method == "OPTIONS") {
    // CORS preflight (the origin was allowed above), or a plain OPTIONS.
    http::Response r;
    r.status = 204;
    r.headers.emplace_back("Allow", "GET, HEAD, POST, OPTIONS");
    if (origin) {
      r.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
      r.headers.emplace_back("Access-Control-Allow-Headers",
                             "Authorization, Content-Type, X-Request-Id, OpenAI-Organization, "
                             "OpenAI-Project, X-Stainless-Arch, X-Stainless-Lang, "
                             "X-Stainless-OS, X-Stainless-Package-Version, X-Stainless-Runtime, "
                             "X-Stainless-Runtime-Version, X-Stainless-Retry-Count, "
                             "X-Stainless-Timeout");
      r.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return r;
  }
  if (needs_key(req.path) && !a.keys.accepts(req.header("Authorization"))) {
    return error_response(401, "a valid API key is required: send 'Authorization: Bearer <key>'",
                          "authentication_error", "", "invalid_api_key");
  }
  return std::nullopt;
}

void decorate(const Api& a, const http::Request& req, http::Headers& h) {
  h.emplace_back("X-Request-Id", req.id);
  if (const std::string* origin = req.header("Origin"); origin && a.origins.allows(*origin)) {
    h.emplace_back("Access-Control-Allow-Origin", *origin);
    h.emplace_back("Vary", "Origin");
    h.emplace_back("Access-Control-Expose-Headers", "X-Request-Id");
  }
}

void install_routes(Api& a, http::Server& s) {
  s.route("POST", "/v1/completions",
          [&a](const http::Request& q) { return handle_generate(a, q, false); });
  s.route("POST", "/v1/chat/completions",
          [&a](const http::Request& q) { return handle_generate(a, q, true); });
  s.route("POST", "/tokenize", [&a](const http::Request& q) { return handle_tokenize(a, q); });
  s.route("POST", "/detokenize", [&a](const http::Request& q) { return handle_detokenize(a, q); });
  s.route("POST", "/apply-template",
          [&a](const http::Request& q) { return handle_apply_template(a, q); });
  // The cheap routes run on the event loop itself: they answer while every worker is busy.
  s.route(
      "GET", "/health",
      [&a](const http::Request&) {
        if (auto r = unavailable(a)) return reply(std::move(*r));
        return reply(json_response(200, {{"status", "ok"}}));
      },
      true);
  s.route(
      "GET", "/v1/models",
      [&a](const http::Request&) {
        if (auto r = loading(a)) return reply(std::move(*r));
        json data = json::array();
        for (const auto& name : a.model_names) {
          data.push_back({{"id", name},
                          {"object", "model"},
                          {"created", 0},
                          {"owned_by", "lift"},
                          {"root", a.model_names.front()},
                          {"max_model_len", a.engine->max_model_len()}});
        }
        return reply(json_response(200, {{"object", "list"}, {"data", data}}));
      },
      true);
  s.route(
      "GET", "/metrics",
      [&a](const http::Request&) {
        if (auto r = loading(a)) return reply(std::move(*r));  // metrics go on while draining
        ServerCounters c;
        {
          std::lock_guard<std::mutex> lock(a.counters_mu);
          c = a.counters;
        }
        http::Response r;
        r.content_type = "text/plain; version=0.0.4";
        r.body = render_prometheus(a.engine->metrics(), c);
        return reply(std::move(r));
      },
      true);
}

http::Hooks hooks(Api& a) {
  http::Hooks h;
  h.on_head = [&a](const http::Request& r) { return on_head(a, r); };
  h.decorate = [&a](const http::Request& r, http::Headers& hd) { decorate(a, r, hd); };
  h.error_body = [&a](int status, const std::string& msg) {
    if (status >= 400 && status != 404 && status != 405)
      a.count(&ServerCounters::requests_rejected);
    const char* type = status == 404   ? "not_found_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    return error_response(status, msg, type);
  };
  h.on_done = [&a](const http::Request& r, int status, const http::Usage& u, double secs) {
    if (!a.opts.access_log) return;
    const std::string line = access_log_line(a.opts.log_format, r, status, u, secs);
    std::lock_guard<std::mutex> lock(a.log_mu);
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  return h;
}

}  // namespace

int run_server(const ServerOptions& opts) {
  // Signals go to one thread that waits for them; every other thread (the event loop,
  // workers, the engine, the thread pool) inherits the blocked mask. SIGPIPE cannot happen:
  // every send passes MSG_NOSIGNAL.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto a = std::make_unique<Api>();
  a->opts = opts;
  a->keys = ApiKeys(opts.api_keys);
  a->origins = OriginPolicy(opts.allowed_origins);
  a->check_host = a->keys.empty() && is_loopback_address(opts.host);
  a->capacity = opts.engine.scheduler.max_seqs + opts.max_waiting;
  a->model_names = opts.served_model_names;
  if (a->model_names.empty()) {
    a->model_names.push_back(std::filesystem::path(opts.model_path).stem().string());
  }

  http::Server srv(opts.http, hooks(*a));
  install_routes(*a, srv);
  srv.listen(opts.host, opts.port);
  std::fprintf(stderr, "lift: listening on http://%s:%d (loading %s)\n", opts.host.c_str(),
               srv.port(), opts.model_path.c_str());
  if (!a->keys.empty()) std::fprintf(stderr, "lift: %zu API key(s) required\n", a->keys.size());

  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "lift: %s received, shutting down (send it again to exit at once)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    a->draining = true;
    // A second signal: no more waiting.
    std::thread([set] {
      int again = 0;
      sigwait(&set, &again);
      std::fprintf(stderr, "lift: second signal, exiting now\n");
      _exit(128 + again);
    }).detach();
    const auto deadline = Clock::now() + std::chrono::seconds(opts.shutdown_grace_seconds);
    while (a->in_flight.load() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    {
      std::lock_guard<std::mutex> lock(a->engine_mu);
      if (a->engine) a->engine->stop();  // aborts whatever is left; their responses end
    }
    srv.stop(2000ms);
  });

  int rc = 0;
  std::thread loader([&] {
    try {
      a->model = LlamaModel::load(opts.model_path, Comm::shard_of(opts.engine.tp));
      a->tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(a->model->file()));
      a->chat = choose_chat_template(a->model->file(), opts.chat_template);
      // End tokens beyond EOS (a template's end of turn) are each request's stop ids, which
      // the engine's logits processor treats as the constraint's end tokens.
      a->constraints = std::make_unique<structured::ConstraintCompiler>(
          structured::TokenVocab::from_tokenizer(*a->tok));
      auto engine = std::make_unique<Engine>(*a->model, *a->tok, opts.engine);
      std::fprintf(stderr, "%s", engine->memory_plan().c_str());
      std::fprintf(stderr, "lift: %s\n", a->chat->note.c_str());
      std::fprintf(stderr, "lift: tool calls: %s (%s)\n",
                   std::string(tool_call_format_name(opts.tool_format.value_or(
                                   detect_tool_call_format(a->chat->tmpl.source()))))
                       .c_str(),
                   opts.tool_format ? "--tool-call-parser" : "the chat template's syntax");
      {
        // A shutdown that began while the model loaded has already stopped everything else.
        std::lock_guard<std::mutex> lock(a->engine_mu);
        if (a->draining) return;
        a->engine = std::move(engine);
        a->engine->start();
        a->ready = true;
      }
      std::fprintf(stderr,
                   "lift: ready; %zu requests may run or wait at once, model names: ", a->capacity);
      for (size_t i = 0; i < a->model_names.size(); ++i) {
        std::fprintf(stderr, "%s%s", i ? ", " : "", a->model_names[i].c_str());
      }
      std::fprintf(stderr, "\n");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lift: error: %s\n", e.what());
      rc = 1;
      kill(getpid(), SIGTERM);
    }
  });
  srv.run();
  loader.join();
  signals.join();
  if (a->engine) a->engine->stop();
  std::fprintf(stderr, "lift: stopped\n");
  return rc;
}

}  // namespace lift
