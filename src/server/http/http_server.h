// lift's HTTP/1.1 server: one event-loop thread (epoll) owns every socket; handlers run on a
// small worker pool; long responses (generation) are sources the loop pumps when they have
// news. Why not a thread per connection: a connection that idles, trickles its headers or
// never reads its stream then costs a thread, and the pool's size becomes the number of
// clients that can starve everyone else. Here such a connection costs a few KiB and a timer:
//   - every request must arrive whole within read_timeout of its first byte, and the next one
//     start within idle_timeout (slow-loris clients are cut off, whatever their rate);
//   - heads are bounded (ParseLimits) and checked (hooks.on_head: keys, origins, routes)
//     before any body byte is read, so an unauthenticated client is refused after at most
//     max_head_bytes;
//   - at most max_connections are served; beyond that the longest-idle keep-alive connection
//     is closed to make room, or the newcomer gets an immediate 503;
//   - output waiting for a client that does not read is capped per connection, and a client
//     that makes no progress for write_timeout is dropped (its request aborted).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/http/http_message.h"
#include "server/http/request_parser.h"

namespace lift::http {

using Millis = std::chrono::milliseconds;

struct ServerLimits {
  ParseLimits parse;
  size_t max_connections = 1024;
  Millis idle_timeout{5000};    // for the first byte of a request (keep-alive included)
  Millis read_timeout{15000};   // for a whole request once its first byte arrived
  Millis write_timeout{15000};  // without any byte taken by the client while output waits
  size_t max_pending_output = size_t{1} << 20;  // response bytes buffered per connection
  int handler_threads = 4;
};

// What an access log line reports of a request beyond its status.
struct Usage {
  int prompt_tokens = -1;  // -1: not applicable
  int completion_tokens = -1;
};

// Output of a response whose body comes later. Runs on the event-loop thread only.
class Writer {
 public:
  virtual ~Writer() = default;
  // Starts the response. A streamed one goes out at once with chunked encoding; otherwise the
  // head waits for end(), so its status can still be anything until the body is complete.
  virtual void start(int status, std::string content_type, Headers headers, bool streamed) = 0;
  virtual void write(std::string_view bytes) = 0;
  virtual void end() = 0;
  // Bytes that may still be buffered before the client has to read some.
  virtual size_t room() const = 0;
  virtual Usage& usage() = 0;
};

// Sources of such bodies (a generation's outputs). The server calls pump() after the source
// woke it, after the client took some output, and on a slow tick; a source ends by calling
// Writer::end(). cancel() means the client left or stalled: release everything.
class AsyncBody {
 public:
  using Waker = std::function<void()>;  // thread-safe, cheap; may outlive the server
  virtual ~AsyncBody() = default;
  virtual void attach(Waker wake) = 0;
  virtual void pump(Writer& out) = 0;
  virtual void cancel() = 0;
};

struct Reply {
  Response response;  // when async is null
  std::shared_ptr<AsyncBody> async;
  Usage usage;
};

using Handler = std::function<Reply(const Request&)>;

struct Hooks {
  // Runs when a head arrived, before its body is read: a returned response is sent instead of
  // routing (the connection closes if a body was announced and left unread).
  std::function<std::optional<Response>(const Request&)> on_head;
  // Adds headers to every response of a request (CORS).
  std::function<void(const Request&, Headers&)> decorate;
  // One call per request when its response ended or was cut off (status 499: the client left).
  std::function<void(const Request&, int status, const Usage&, double seconds)> on_done;
  // Renders an error body for the server's own refusals (413, 431, 404, timeouts...).
  std::function<Response(int status, const std::string& message)> error_body;
};

class Server {
 public:
  Server(ServerLimits limits, Hooks hooks);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // run_inline: the handler is cheap and lock-free enough to run on the event loop (health,
  // metrics), so it answers even while every worker is busy.
  void route(std::string method, std::string path, Handler h, bool run_inline = false);

  // Binds and listens (throws lift::Error with the reason); then run() serves until stop().
  void listen(const std::string& host, int port);
  int port() const { return port_; }
  void run();
  // Thread-safe. Stops accepting; responses in progress get up to `grace` to finish.
  void stop(Millis grace = Millis{2000});

  size_t connections() const { return n_connections_.load(); }

  struct Impl;  // the event loop's state, in http_server.cpp

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<size_t> n_connections_{0};
};

}  // namespace lift::http
