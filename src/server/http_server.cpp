#include "server/http_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "model/llama_model.h"
#include "server/api_error.h"
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

// While waiting for the engine, a response writes something at least this often: a write is
// the only way cpp-httplib 0.11 notices that the client has gone.
constexpr auto kKeepAlive = 250ms;
constexpr auto kPoll = 50ms;

struct Server {
  ServerOptions opts;
  httplib::Server http;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Engine> engine;
  ChatTemplate chat;
  std::string model_id;
  std::atomic<size_t> in_flight{0};
  size_t capacity = 0;
  std::mutex counters_mu;
  ServerCounters counters;

  void count(uint64_t ServerCounters::*field) {
    std::lock_guard<std::mutex> lock(counters_mu);
    ++(counters.*field);
  }
};

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type = "invalid_request_error", const std::string& param = {},
                const std::string& code = {}) {
  res.status = status;
  res.set_content(dump(error_json(message, type, param, code)), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_error(res, e.status(), e.what(), e.type(), e.param(), e.code());
}

// Answers 503 while the model loads; true when it did.
bool still_loading(const Server& s, httplib::Response& res) {
  if (s.ready) return false;
  send_error(res, 503, "the model is still loading", "server_error");
  return true;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// Relays one request's outputs to the client as they come; aborts the request if the
// client goes away. Shared by the streamed and the plain response.
struct Relay {
  std::shared_ptr<ApiRequest> req;
  std::shared_ptr<ResponseBuilder> builder;
  Submitted sub;
  bool finished = false;

  bool write(httplib::DataSink& sink, const std::string& s, Clock::time_point& last) {
    last = Clock::now();
    return sink.write(s.data(), s.size());
  }

  // Streams SSE chunks; false if the client disconnected.
  bool stream(httplib::DataSink& sink) {
    auto last = Clock::now();
    if (req->chat) {
      for (int i = 0; i < req->params.n; ++i) {
        if (!write(sink, sse(builder->role_chunk(i)), last)) return false;
      }
    }
    int prompt_tokens = static_cast<int>(req->prompt.size()), completion = 0;
    bool server_abort = false;
    std::string error;
    while (!sub.stream->done()) {
      auto out = sub.stream->pop(kPoll);
      if (!out) {
        if (Clock::now() - last > kKeepAlive && !write(sink, ": keep-alive\n\n", last))
          return false;
        continue;
      }
      if (out->finish == FinishReason::abort) server_abort = true;
      if (out->finish == FinishReason::error) error = out->error;
      if (out->finish != FinishReason::none) completion += out->completion_tokens;
      if (out->finish == FinishReason::abort || out->finish == FinishReason::error) continue;
      if (out->text.empty() && out->finish == FinishReason::none && out->logprobs.empty()) continue;
      if (out->finish != FinishReason::none && (!out->text.empty() || !out->logprobs.empty())) {
        // As OpenAI does: the last content, then a chunk with an empty delta and the reason.
        RequestOutput content = *out;
        content.finish = FinishReason::none;
        if (!write(sink, sse(builder->chunk(content)), last)) return false;
        out->text.clear();
        out->logprobs.clear();
      }
      if (!write(sink, sse(builder->chunk(*out)), last)) return false;
    }
    if (server_abort || !error.empty()) {
      const std::string msg = error.empty() ? "the server is shutting down" : error;
      write(sink, sse(error_json(msg, "server_error", "", "")), last);
    } else if (req->include_usage) {
      write(sink, sse(builder->usage_chunk(prompt_tokens, completion)), last);
    }
    write(sink, "data: [DONE]\n\n", last);
    return true;
  }

  // Collects everything, then writes one JSON body (after whitespace keep-alives, which
  // JSON allows); false if the client disconnected.
  bool whole(httplib::DataSink& sink) {
    auto last = Clock::now();
    std::vector<SampleAccum> acc(static_cast<size_t>(req->params.n));
    std::string error;
    while (!sub.stream->done()) {
      auto out = sub.stream->pop(kPoll);
      // Checked on every pass, not only when idle: tokens may flow for a long time without
      // anything being written to the client.
      if (Clock::now() - last > kKeepAlive && !write(sink, " ", last)) return false;
      if (!out) continue;
      SampleAccum& a = acc.at(static_cast<size_t>(out->index));
      a.text += out->text;
      a.logprobs.insert(a.logprobs.end(), out->logprobs.begin(), out->logprobs.end());
      if (out->finish != FinishReason::none) {
        a.finish = out->finish;
        a.completion_tokens = out->completion_tokens;
      }
      if (out->finish == FinishReason::abort) error = "the server is shutting down";
      if (out->finish == FinishReason::error) error = out->error;
    }
    if (!error.empty()) {
      write(sink, dump(error_json(error, "server_error", "", "")), last);
    } else {
      write(sink, dump(builder->full(acc, static_cast<int>(req->prompt.size()))), last);
    }
    return true;
  }
};

void handle_generate(Server& s, const httplib::Request& hreq, httplib::Response& res, bool chat) {
  if (still_loading(s, res)) return;
  if (s.draining) return send_error(res, 503, "the server is shutting down", "server_error");
  auto req = std::make_shared<ApiRequest>();
  try {
    const ApiContext ctx{*s.tok, s.chat.format, s.model->config().context_length,
                         s.model->config().n_vocab};
    *req = chat ? parse_chat_request(hreq.body, ctx) : parse_completion_request(hreq.body, ctx);
  } catch (const ApiError& e) {
    s.count(&ServerCounters::requests_rejected);
    return send_error(res, e);
  }
  if (s.in_flight.fetch_add(1) >= s.capacity) {
    s.in_flight.fetch_sub(1);
    s.count(&ServerCounters::requests_rejected);
    return send_error(res, 503,
                      "the server is at capacity (" + std::to_string(s.capacity) +
                          " requests running or queued); retry later",
                      "server_error", "", "overloaded");
  }
  auto relay = std::make_shared<Relay>();
  relay->req = req;
  try {
    relay->sub = s.engine->add_request(req->prompt, req->params);
  } catch (const Error& e) {
    s.in_flight.fetch_sub(1);
    s.count(&ServerCounters::requests_rejected);
    return send_error(res, 400, e.what());
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(relay->sub.id);
  relay->builder = std::make_shared<ResponseBuilder>(*req, *s.tok, id, s.model_id);
  auto provider = [relay](size_t, httplib::DataSink& sink) {
    const bool ok = relay->req->stream ? relay->stream(sink) : relay->whole(sink);
    if (!ok) return false;
    relay->finished = true;
    sink.done();
    return true;
  };
  // Runs when the response ends, also when the client vanished mid-way.
  auto releaser = [relay, &s](bool) {
    if (!relay->finished) {
      s.engine->abort(relay->sub.id);
      s.count(&ServerCounters::requests_aborted);
    } else {
      s.count(&ServerCounters::requests_ok);
    }
    s.in_flight.fetch_sub(1);
  };
  if (req->stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(req->stream ? "text/event-stream" : "application/json", provider,
                                   releaser);
}

void handle_tokenize(Server& s, const httplib::Request& hreq, httplib::Response& res) {
  if (still_loading(s, res)) return;
  try {
    const json b = parse_json_object(hreq.body);
    const json* text = b.contains("prompt")    ? &b["prompt"]
                       : b.contains("content") ? &b["content"]
                                               : nullptr;
    if (!text || !text->is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
    bool special = true;
    for (const char* k : {"add_special_tokens", "add_special"}) {
      if (b.contains(k)) {
        if (!b[k].is_boolean())
          throw ApiError(400, std::string("'") + k + "' must be a boolean", k);
        special = b[k].get<bool>();
      }
    }
    const auto ids =
        s.tok->encode(text->get<std::string>(), special && s.tok->vocab().add_bos(), special);
    res.set_content(dump({{"tokens", ids},
                          {"count", ids.size()},
                          {"max_model_len", s.model->config().context_length}}),
                    "application/json");
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void handle_detokenize(Server& s, const httplib::Request& hreq, httplib::Response& res) {
  if (still_loading(s, res)) return;
  try {
    const json b = parse_json_object(hreq.body);
    if (!b.contains("tokens") || !b["tokens"].is_array()) {
      throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    }
    std::vector<int32_t> ids;
    for (const json& t : b["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= s.model->config().n_vocab) {
        throw ApiError(400,
                       "'tokens' holds " + t.dump() + ", which is not a token id in [0, " +
                           std::to_string(s.model->config().n_vocab - 1) + "]",
                       "tokens");
      }
      ids.push_back(t.get<int32_t>());
    }
    const std::string text = s.tok->decode(ids);
    res.set_content(dump({{"prompt", text}, {"content", text}}), "application/json");
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

// The API key is checked inside each handler, after cpp-httplib has read the body: answering
// from a pre-routing handler would leave an unread body on a keep-alive connection.
bool authorized(const Server& s, const httplib::Request& req, httplib::Response& res) {
  if (s.opts.api_key.empty() ||
      req.get_header_value("Authorization") == "Bearer " + s.opts.api_key) {
    return true;
  }
  send_error(res, 401, "a valid API key is required: send 'Authorization: Bearer <key>'",
             "authentication_error", "", "invalid_api_key");
  return false;
}

void install_routes(Server& s) {
  httplib::Server& h = s.http;
  h.set_payload_max_length(s.opts.max_body_bytes);
  h.Post("/v1/completions", [&s](const httplib::Request& q, httplib::Response& r) {
    if (authorized(s, q, r)) handle_generate(s, q, r, false);
  });
  h.Post("/v1/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) {
    if (authorized(s, q, r)) handle_generate(s, q, r, true);
  });
  h.Post("/tokenize", [&s](const httplib::Request& q, httplib::Response& r) {
    if (authorized(s, q, r)) handle_tokenize(s, q, r);
  });
  h.Post("/detokenize", [&s](const httplib::Request& q, httplib::Response& r) {
    if (authorized(s, q, r)) handle_detokenize(s, q, r);
  });
  h.Get("/health", [&s](const httplib::Request&, httplib::Response& r) {
    if (still_loading(s, r)) return;
    r.set_content(R"({"status":"ok"})", "application/json");
  });
  h.Get("/v1/models", [&s](const httplib::Request& q, httplib::Response& r) {
    if (!authorized(s, q, r)) return;
    if (still_loading(s, r)) return;
    r.set_content(
        dump({{"object", "list"},
              {"data", json::array({{{"id", s.model_id},
                                     {"object", "model"},
                                     {"created", 0},
                                     {"owned_by", "lift"},
                                     {"max_model_len", s.model->config().context_length}}})}}),
        "application/json");
  });
  h.Get("/metrics", [&s](const httplib::Request&, httplib::Response& r) {
    if (still_loading(s, r)) return;
    ServerCounters c;
    {
      std::lock_guard<std::mutex> lock(s.counters_mu);
      c = s.counters;
    }
    r.set_content(render_prometheus(s.engine->metrics(), c), "text/plain; version=0.0.4");
  });
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, 404, "no route " + req.method + " " + sanitize_utf8(req.path),
                 "not_found_error");
    } else if (res.status == 413) {
      send_error(res, 413, "the request body is too large (raise --max-body-bytes)");
    } else {
      send_error(res, res.status,
                 "the request could not be handled (HTTP " + std::to_string(res.status) + ")");
    }
  });
  h.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, 500, what, "server_error");
      });
}

}  // namespace

int run_server(const ServerOptions& opts) {
  // Signals go to one thread that waits for them; every other thread (HTTP workers, the
  // engine, the thread pool) inherits the blocked mask. SIGPIPE from a vanished client is
  // ignored: the failed write reports it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto s = std::make_unique<Server>();
  s->opts = opts;
  const EngineConfig& ecfg = opts.engine;
  s->capacity = ecfg.scheduler.max_seqs + opts.max_waiting;
  const size_t http_threads = std::max<size_t>(32, s->capacity + 16);
  s->http.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  install_routes(*s);
  s->http.set_tcp_nodelay(true);
  // Debian's compiled cpp-httplib listens with a backlog of 5, which drops connections when
  // many clients arrive at once; remember the socket and listen again with the system's
  // maximum. (Replacing the socket options means setting SO_REUSEADDR ourselves.)
  int listen_fd = -1;
  s->http.set_socket_options([&listen_fd](socket_t fd) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    listen_fd = fd;
  });
  if (!s->http.bind_to_port(opts.host, opts.port)) {
    throw Error("cannot listen on " + opts.host + ":" + std::to_string(opts.port) +
                " (address in use or not allowed)");
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  std::thread listener([&] { s->http.listen_after_bind(); });
  std::fprintf(stderr, "lift: listening on http://%s:%d (loading %s)\n", opts.host.c_str(),
               opts.port, opts.model_path.c_str());

  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "lift: %s received, shutting down\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    s->draining = true;
    const auto deadline = Clock::now() + std::chrono::seconds(opts.shutdown_grace_seconds);
    while (s->in_flight.load() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    if (s->engine) s->engine->stop();  // aborts whatever is left
    while (s->in_flight.load() > 0 && Clock::now() < deadline + 2s)
      std::this_thread::sleep_for(20ms);
    // stop() is lost if the listener has not started yet (e.g. the model failed to load at
    // once), so wait for it first.
    for (int i = 0; i < 200 && !s->http.is_running(); ++i) std::this_thread::sleep_for(10ms);
    s->http.stop();
  });

  int rc = 0;
  try {
    s->model = LlamaModel::load(opts.model_path);
    s->tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(s->model->file()));
    s->chat = choose_chat_template(s->model->file(), opts.chat_template);
    s->model_id = std::filesystem::path(opts.model_path).stem().string();
    s->engine = std::make_unique<Engine>(*s->model, *s->tok, ecfg);
    std::fprintf(stderr, "%s", s->engine->memory_plan().c_str());
    std::fprintf(stderr, "lift: %s\n", s->chat.note.c_str());
    s->engine->start();
    s->ready = true;
    std::fprintf(stderr, "lift: ready; %zu requests may run or wait at once\n", s->capacity);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lift: error: %s\n", e.what());
    rc = 1;
    kill(getpid(), SIGTERM);
  }
  listener.join();
  signals.join();
  if (s->engine) s->engine->stop();
  std::fprintf(stderr, "lift: stopped\n");
  return rc;
}

}  // namespace lift
