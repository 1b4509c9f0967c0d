#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "util/error.h"

namespace lift::http {

namespace {

using Clock = std::chrono::steady_clock;
constexpr Millis kTick{100};
constexpr Millis kLinger{1000};      // how long a closing connection may drain its request
constexpr Millis kEvictAfter{1000};  // idle time after which a connection may be evicted
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerEvent = 16;  // then other connections get their turn
// epoll tags beside connection ids (which count up from 1).
constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;

std::string peer_name(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
  }
  return buf;
}

std::string head_text(int status, const std::string& content_type, const Headers& headers,
                      const std::string* length, bool chunked, bool close) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (chunked) {
    h += "Transfer-Encoding: chunked\r\n";
  } else if (length) {
    h += "Content-Length: " + *length + "\r\n";
  }
  h += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  return h;
}

// Wakes the event loop from any thread; shared with async bodies, which may outlive the loop.
struct WakeQueue {
  int fd = -1;
  std::mutex mu;
  std::vector<uint64_t> ids;
  bool closed = false;
  WakeQueue() : fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
  }
  ~WakeQueue() { close(fd); }
  void post(uint64_t id) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return;
      ids.push_back(id);
    }
    ring();
  }
  void ring() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }
};

struct Route {
  Handler handler;
  bool run_inline = false;
};

// HEAD runs a GET route where no HEAD one is registered (RFC 9110 9.3.2); respond() sends its
// head only. Uptime checkers probe /health so.
std::string route_method(const std::map<std::string, Route>& methods, const std::string& m) {
  return m == "HEAD" && !methods.count("HEAD") && methods.count("GET") ? "GET" : m;
}

// closing: the server is done with the connection (a refusal, or a response that ends it) and
// has shut down its side; it reads and discards until the client closes or kLinger passes,
// so that closing with unread request bytes does not reset the answer away.
enum class ConnState { idle, head, body, handling, responding, closing };

}  // namespace

namespace {

struct Conn final : Writer {
  Server::Impl* srv = nullptr;
  int fd = -1;
  uint64_t id = 0;
  std::string remote;
  ConnState state = ConnState::idle;
  uint32_t events = 0;

  std::string in;  // bytes read and not consumed yet
  Request req;
  HeadResult head;
  std::optional<ChunkedDecoder> chunked;
  Clock::time_point deadline;  // for the phase: idle, reading, closing
  Clock::time_point idle_since;
  Clock::time_point request_start;

  std::string out;
  size_t out_off = 0;
  Clock::time_point last_progress;
  bool close_after = false;  // close once `out` is flushed
  bool peer_closed = false;

  // The response in progress.
  std::shared_ptr<AsyncBody> async;
  bool started = false, streamed = false, ended = false;
  int status = 0;
  std::string content_type;
  Headers resp_headers;
  std::string body;  // non-streamed body until end()
  Usage use;

  size_t pending() const { return out.size() - out_off; }

  // Writer
  void start(int st, std::string ct, Headers headers, bool stream) override;
  void write(std::string_view bytes) override;
  void end() override;
  size_t room() const override;
  Usage& usage() override { return use; }
};

}  // namespace

struct Server::Impl {
  Server* self;
  ServerLimits limits;
  Hooks hooks;
  std::map<std::string, std::map<std::string, Route>> routes;  // path -> method -> route
  int listen_fd = -1;
  int epoll_fd = -1;
  int spare_fd = -1;  // closed to accept (and refuse) when out of descriptors
  std::shared_ptr<WakeQueue> wake = std::make_shared<WakeQueue>();
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  uint64_t next_request = 1;
  const std::string id_prefix = make_id_prefix();
  size_t n_closing = 0;
  std::vector<char> read_buf = std::vector<char>(kReadChunk);

  std::atomic<bool> stopping{false};
  std::atomic<int64_t> grace_ms{2000};
  Clock::time_point stop_deadline;

  // Worker pool.
  struct Job {
    uint64_t conn;
    Request req;
    const Handler* handler;
  };
  struct Done {
    uint64_t conn;
    Reply reply;
  };
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<Job> jobs;
  bool jobs_closed = false;
  std::mutex done_mu;
  std::vector<Done> done;
  std::vector<std::thread> workers;

  Impl(Server* s, ServerLimits l, Hooks h) : self(s), limits(std::move(l)), hooks(std::move(h)) {}

  // The client's X-Request-Id when it is a sane token (so logs can be joined with the
  // client's), else one made here, unique across restarts.
  std::string request_id(const Request& req, uint64_t n) const {
    if (const std::string* h = req.header("X-Request-Id")) {
      const bool sane =
          !h->empty() && h->size() <= 64 && std::all_of(h->begin(), h->end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ||
                   ch == '.' || ch == ':';
          });
      if (sane) return *h;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(n));
    return id_prefix + buf;
  }

  static std::string make_id_prefix() {
    const auto t = std::chrono::system_clock::now().time_since_epoch();
    char buf[48];
    std::snprintf(buf, sizeof buf, "req-%llx%x-",
                  static_cast<unsigned long long>(
                      std::chrono::duration_cast<std::chrono::seconds>(t).count()),
                  static_cast<unsigned>(getpid()) & 0xfff);
    return buf;
  }

  Response error_response(int status, const std::string& msg) const {
    if (hooks.error_body) return hooks.error_body(status, msg);
    Response r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = msg + "\n";
    return r;
  }

  void worker_loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(jobs_mu);
        jobs_cv.wait(lock, [&] { return jobs_closed || !jobs.empty(); });
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      Reply r = run_handler(*job.handler, job.req);
      {
        std::lock_guard<std::mutex> lock(done_mu);
        done.push_back({job.conn, std::move(r)});
      }
      wake->ring();
    }
  }

  Reply run_handler(const Handler& h, const Request& req) {
    try {
      return h(req);
    } catch (const std::exception& e) {
      Reply r;
      r.response = error_response(500, std::string("internal error: ") + e.what());
      return r;
    } catch (...) {
      Reply r;
      r.response = error_response(500, "internal error");
      return r;
    }
  }

  void set_events(Conn& c, uint32_t ev) {
    if (c.events == ev) return;
    epoll_event e{};
    e.events = ev;
    e.data.u64 = c.id;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &e);
    c.events = ev;
  }

  // What the connection should wait for now.
  void update_events(Conn& c) {
    uint32_t ev = 0;
    const bool reading = c.state == ConnState::idle || c.state == ConnState::head ||
                         c.state == ConnState::body || c.state == ConnState::closing;
    if (!reading) {
      ev |= EPOLLRDHUP;  // waiting on a handler or a source: a hang-up aborts the request
    } else if (!c.peer_closed && c.pending() <= limits.max_pending_output) {
      ev |= EPOLLIN | EPOLLRDHUP;
    }  // else: reading paused until the client takes output (level-triggered: arm nothing)
    if (c.pending() > 0) ev |= EPOLLOUT;
    set_events(c, ev);
  }

  void close_conn(uint64_t id, bool client_left) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (c.async) {
      c.async->cancel();
      c.async.reset();
    }
    const bool mid_request = c.state == ConnState::handling || c.state == ConnState::responding;
    if (mid_request && hooks.on_done) {
      const double secs = std::chrono::duration<double>(Clock::now() - c.request_start).count();
      hooks.on_done(c.req, client_left ? 499 : (c.status ? c.status : 500), c.use, secs);
    }
    if (c.state == ConnState::closing) --n_closing;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns.erase(it);
    self->n_connections_.store(conns.size() - n_closing);
  }

  // Writes what it can; false if the connection was closed.
  bool flush(Conn& c) {
    while (c.pending() > 0) {
      const ssize_t n =
          ::send(c.fd, c.out.data() + c.out_off, c.pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
        c.last_progress = Clock::now();
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      close_conn(c.id, true);
      return false;
    }
    if (c.out_off == c.out.size()) {
      if (c.pending() == 0 && !c.out.empty() && c.state == ConnState::idle) {
        c.idle_since = Clock::now();  // idle from when the client had everything
        c.deadline = c.idle_since + limits.idle_timeout;
      }
      c.out.clear();
      c.out_off = 0;
    } else if (c.out_off > (size_t{1} << 16)) {
      c.out.erase(0, c.out_off);
      c.out_off = 0;
    }
    if (c.pending() == 0 && c.close_after) {
      c.close_after = false;
      if (c.peer_closed) {
        close_conn(c.id, false);
        return false;
      }
      // Stop sending, but keep reading a little so the close does not reset the answer away.
      ::shutdown(c.fd, SHUT_WR);
      if (c.state != ConnState::closing) {
        c.state = ConnState::closing;
        ++n_closing;
        c.deadline = Clock::now() + kLinger;
        self->n_connections_.store(conns.size() - n_closing);
      }
    }
    update_events(c);
    return true;
  }

  void queue(Conn& c, std::string bytes) {
    if (c.out.empty()) {
      c.out = std::move(bytes);
      c.out_off = 0;
    } else {
      c.out += bytes;
    }
    c.last_progress = Clock::now();
  }

  // A complete response for the current request (not an async one).
  void respond(Conn& c, Response r, const Usage& use, bool close) {
    // A request refused before its head was whole (400, 408, 413, 431, ...) still gets an id
    // to quote: the client's own where it sent a sane one, else the next of ours.
    if (c.req.id.empty()) c.req.id = request_id(c.req, next_request++);
    if (hooks.decorate) hooks.decorate(c.req, r.headers);
    const bool body_left = c.state == ConnState::head || c.state == ConnState::body;
    close = close || !c.req.keep_alive || body_left || stopping.load();
    const std::string len = std::to_string(r.body.size());
    const bool no_body = r.status == 204 || r.status == 304 || r.status < 200;
    std::string bytes = head_text(r.status, no_body ? std::string() : r.content_type, r.headers,
                                  no_body ? nullptr : &len, false, close);
    if (c.req.method != "HEAD" && !no_body) bytes += r.body;
    c.status = r.status;
    c.use = use;
    queue(c, std::move(bytes));
    finish_request(c, close);
  }

  // The current request's response is fully queued.
  void finish_request(Conn& c, bool close) {
    if (hooks.on_done) {
      const double secs = std::chrono::duration<double>(Clock::now() - c.request_start).count();
      hooks.on_done(c.req, c.status, c.use, secs);
    }
    c.async.reset();
    c.started = c.streamed = c.ended = false;
    c.body.clear();
    c.resp_headers.clear();
    c.chunked.reset();
    c.status = 0;
    c.use = {};
    c.close_after = close;
    if (close) c.in.clear();  // nothing more is read from a connection that is ending
    if (c.in.empty()) std::string().swap(c.in);  // an idle connection holds no buffers
    c.req.body = std::string();
    c.state = ConnState::idle;
    c.idle_since = Clock::now();
    c.deadline = c.idle_since + limits.idle_timeout;
    flush(c);  // a pipelined request already buffered is taken up by on_readable_data's loop
  }

  void dispatch(Conn& c) {
    c.state = ConnState::handling;
    const auto pit = routes.find(c.req.path);
    const Route& route = pit->second.at(route_method(pit->second, c.req.method));
    if (route.run_inline) {
      Reply r = run_handler(route.handler, c.req);
      on_reply(c, std::move(r));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(jobs_mu);
      // The handler gets the body; the connection keeps the head for its response and log.
      std::string body = std::move(c.req.body);
      Request job = c.req;
      job.body = std::move(body);
      jobs.push_back({c.id, std::move(job), &route.handler});
    }
    jobs_cv.notify_one();
    update_events(c);
  }

  void on_reply(Conn& c, Reply r) {
    if (!r.async) {
      respond(c, std::move(r.response), r.usage, false);
      return;
    }
    c.state = ConnState::responding;
    c.async = std::move(r.async);
    c.use = r.usage;
    std::weak_ptr<WakeQueue> wq = wake;
    const uint64_t id = c.id;
    c.async->attach([wq, id] {
      if (auto q = wq.lock()) q->post(id);
    });
    pump(c);
  }

  void pump(Conn& c) {
    if (!c.async) return;
    std::shared_ptr<AsyncBody> keep = c.async;  // pump may end the response
    const uint64_t id = c.id;
    keep->pump(c);
    if (!conns.count(id)) return;
    if (c.ended) {
      const bool close = !c.req.keep_alive || stopping.load();
      if (!c.streamed) {
        Headers h = std::move(c.resp_headers);
        if (hooks.decorate) hooks.decorate(c.req, h);
        const std::string len = std::to_string(c.body.size());
        std::string bytes = head_text(c.status, c.content_type, h, &len, false, close);
        if (c.req.method != "HEAD") bytes += c.body;
        queue(c, std::move(bytes));
      } else {
        queue(c, "0\r\n\r\n");
      }
      finish_request(c, close);
      if (conns.count(id)) on_readable_data(c);
      return;
    }
    flush(c);
  }

  // Handles the bytes in c.in: every request they complete, one after the other (pipelining),
  // in a loop rather than by recursion, so a burst of tiny requests cannot grow the stack.
  void on_readable_data(Conn& c) {
    const uint64_t id = c.id;
    for (;;) {
      // A client that pipelines without reading waits until it takes some output.
      if (c.state == ConnState::idle && c.pending() > limits.max_pending_output) return;
      advance(c);
      if (!conns.count(id)) return;
      if (c.state != ConnState::idle || c.in.empty() || c.close_after) return;
    }
  }

  // Moves the current request on as far as c.in allows; may respond, dispatch or close.
  void advance(Conn& c) {
    const uint64_t id = c.id;
    // A request already with a worker or answering: nothing to move on (and never a second
    // dispatch of the same request).
    if (c.state == ConnState::handling || c.state == ConnState::responding) return;
    if (c.state == ConnState::closing || c.close_after) {
      c.in.clear();  // nothing more is read from a connection that is ending
      return;
    }
    if (c.state == ConnState::idle && !c.in.empty()) {
      c.state = ConnState::head;
      c.request_start = Clock::now();
      c.deadline = c.request_start + limits.read_timeout;
      c.req = Request{};
      c.req.remote = c.remote;
    }
    if (c.state == ConnState::head) {
      c.head = parse_head(c.in, limits.parse, c.req);
      if (c.head.state == HeadResult::State::incomplete) return;
      if (c.head.state == HeadResult::State::error) {
        if (c.req.method.empty()) c.req.method = "-";
        respond(c, error_response(c.head.error.status, c.head.error.message), {}, true);
        return;
      }
      c.in.erase(0, c.head.head_bytes);
      c.req.id = request_id(c.req, next_request++);
      c.state = ConnState::body;  // "a body may follow": respond() closes if one is unread
      if (c.head.framing == BodyFraming::none) c.state = ConnState::handling;
      if (auto refusal = hooks.on_head ? hooks.on_head(c.req) : std::nullopt) {
        respond(c, std::move(*refusal), {}, false);
        return;
      }
      const auto pit = routes.find(c.req.path);
      if (pit == routes.end()) {
        respond(c,
                error_response(404, "no route " + c.req.method + " " + c.req.path.substr(0, 200)),
                {}, false);
        return;
      }
      if (!pit->second.count(route_method(pit->second, c.req.method))) {
        Response r = error_response(
            405, "method " + c.req.method.substr(0, 32) + " is not allowed on " + c.req.path);
        std::string allow;
        for (const auto& [m, _] : pit->second) allow += (allow.empty() ? "" : ", ") + m;
        if (pit->second.count("GET") && !pit->second.count("HEAD")) allow += ", HEAD";
        r.headers.emplace_back("Allow", allow);
        respond(c, std::move(r), {}, false);
        return;
      }
      if (c.head.framing == BodyFraming::chunked) c.chunked.emplace(limits.parse.max_body_bytes);
      if (c.head.expect_continue && c.head.framing != BodyFraming::none) {
        queue(c, "HTTP/1.1 100 Continue\r\n\r\n");
        if (!flush(c)) return;
      }
      c.state = c.head.framing == BodyFraming::none ? ConnState::handling : ConnState::body;
    }
    if (c.state == ConnState::body) {
      if (c.chunked) {
        const size_t used = c.chunked->feed(c.in, c.req.body);
        c.in.erase(0, used);
        if (c.chunked->error()) {
          respond(c, error_response(c.chunked->error().status, c.chunked->error().message), {},
                  true);
          return;
        }
        if (!c.chunked->done()) return;
      } else {
        const size_t need = c.head.content_length - c.req.body.size();
        const size_t take = std::min(need, c.in.size());
        c.req.body.append(c.in, 0, take);
        c.in.erase(0, take);
        if (c.req.body.size() < c.head.content_length) return;
      }
      c.state = ConnState::handling;
    }
    if (c.state == ConnState::handling && !c.async && conns.count(id)) {
      if (stopping.load()) {
        respond(c, error_response(503, "the server is shutting down"), {}, true);
        return;
      }
      dispatch(c);
    }
  }

  void on_readable(Conn& c) {
    const uint64_t id = c.id;
    // Read no more than the phase may need: a head's limit, or what the body still lacks.
    int reads = 0;  // a fast sender gets a bounded turn, then the others
    for (;;) {
      // A connection that is ending only has its bytes drained and dropped.
      const bool discard = c.state == ConnState::closing || c.close_after;
      if (discard) c.in.clear();
      size_t cap = kReadChunk;
      if (!discard && (c.state == ConnState::idle || c.state == ConnState::head)) {
        const size_t lim = limits.parse.max_head_bytes + 1;
        if (c.in.size() >= lim) break;
        cap = std::min(cap, lim - c.in.size());
      }
      if (c.state == ConnState::handling || c.state == ConnState::responding) break;
      if (!discard && c.pending() > limits.max_pending_output) break;  // let it read first
      // Into the loop's buffer first: a connection keeps only the bytes it was sent.
      const ssize_t n = ::recv(c.fd, read_buf.data(), cap, MSG_DONTWAIT);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0 && errno == EINTR) continue;
        // EOF or reset.
        if (c.state == ConnState::closing) {
          close_conn(id, false);
          return;
        }
        c.peer_closed = true;
        break;
      }
      if (discard) {
        if (static_cast<size_t>(n) < cap || ++reads >= kMaxReadsPerEvent) break;
        continue;
      }
      c.in.append(read_buf.data(), static_cast<size_t>(n));
      on_readable_data(c);
      if (!conns.count(id)) return;
      if (c.state == ConnState::handling || c.state == ConnState::responding) break;
      if (static_cast<size_t>(n) < cap || ++reads >= kMaxReadsPerEvent) break;
    }
    if (!conns.count(id)) return;
    if (c.peer_closed) {
      // The client left, between requests or in the middle of one (a half-close counts: a
      // client that stops sending is taken to have given up, as most servers do).
      close_conn(id, c.state == ConnState::handling || c.state == ConnState::responding);
      return;
    }
    update_events(c);
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
          // Out of descriptors: accept with the spare and close at once, so the listener does
          // not stay readable forever.
          ::close(spare_fd);
          const int f = ::accept(listen_fd, nullptr, nullptr);
          if (f >= 0) ::close(f);
          spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          continue;
        }
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      bool reject = stopping.load();
      if (!reject && conns.size() - n_closing >= limits.max_connections) {
        reject = !evict_idle();
      }
      if (reject && n_closing >= limits.max_connections) {
        ::close(fd);  // even the refusals are at their limit
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->srv = this;
      c->fd = fd;
      c->id = next_id++;
      c->remote = peer_name(addr);
      c->last_progress = Clock::now();
      c->idle_since = Clock::now();
      c->deadline = c->idle_since + limits.idle_timeout;
      epoll_event e{};
      e.events = EPOLLIN | EPOLLRDHUP;
      e.data.u64 = c->id;  // not the fd: a closed fd's number may be reused in the same batch
      if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e) != 0) {
        ::close(fd);
        continue;
      }
      c->events = e.events;
      Conn& ref = *c;
      conns.emplace(c->id, std::move(c));
      if (reject) {
        ref.state = ConnState::closing;
        ++n_closing;
        ref.deadline = Clock::now() + kLinger;
        ref.req.method = "-";
        Response r = error_response(503, stopping.load()
                                             ? "the server is shutting down"
                                             : "the server has too many connections; retry later");
        r.headers.emplace_back("Retry-After", "1");
        const std::string body_len = std::to_string(r.body.size());
        queue(ref, head_text(503, r.content_type, r.headers, &body_len, false, true) + r.body);
        ref.close_after = true;
        flush(ref);
      }
      self->n_connections_.store(conns.size() - n_closing);
    }
  }

  // Closes the longest-idle connection; false if none is idle. A connection only just
  // accepted has had no chance to send its request yet, so it is spared for kEvictAfter.
  bool evict_idle() {
    Conn* oldest = nullptr;
    const auto spare_since = Clock::now() - kEvictAfter;
    for (auto& [id, c] : conns) {
      if (c->state == ConnState::idle && c->in.empty() && c->pending() == 0 &&
          c->idle_since < spare_since && (!oldest || c->idle_since < oldest->idle_since)) {
        oldest = c.get();
      }
    }
    if (!oldest) return false;
    close_conn(oldest->id, false);
    return true;
  }

  void on_tick() {
    const auto now = Clock::now();
    std::vector<uint64_t> expired, stalled, slow, responding;
    for (auto& [id, c] : conns) {
      if (c->pending() > 0 && now - c->last_progress > limits.write_timeout) {
        stalled.push_back(id);
      } else if (((c->state == ConnState::idle && c->pending() == 0) ||
                  c->state == ConnState::closing) &&
                 now > c->deadline) {
        expired.push_back(id);
      } else if ((c->state == ConnState::head || c->state == ConnState::body) &&
                 now > c->deadline) {
        slow.push_back(id);
      } else if (c->state == ConnState::responding) {
        responding.push_back(id);
      }
    }
    // Sources that lost a wake-up, or whose client took output since.
    for (uint64_t id : responding) {
      if (auto it = conns.find(id); it != conns.end()) pump(*it->second);
    }
    for (uint64_t id : expired) close_conn(id, false);
    for (uint64_t id : stalled) close_conn(id, true);
    for (uint64_t id : slow) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (c.req.method.empty()) c.req.method = "-";
      respond(c,
              error_response(408, "the request did not arrive within " +
                                      std::to_string(limits.read_timeout.count() / 1000) + " s"),
              {}, true);
    }
  }

  void drain_wakes() {
    uint64_t v;
    [[maybe_unused]] const ssize_t n = ::read(wake->fd, &v, sizeof v);
    std::vector<Done> d;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      d.swap(done);
    }
    for (Done& x : d) {
      auto it = conns.find(x.conn);
      if (it == conns.end() || it->second->state != ConnState::handling) {
        if (x.reply.async) x.reply.async->cancel();  // its client left meanwhile
        continue;
      }
      const uint64_t id = x.conn;
      on_reply(*it->second, std::move(x.reply));
      if (auto again = conns.find(id); again != conns.end()) on_readable_data(*again->second);
    }
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lock(wake->mu);
      ids.swap(wake->ids);
    }
    for (uint64_t id : ids) {
      auto it = conns.find(id);
      if (it != conns.end()) pump(*it->second);
    }
  }

  bool busy() const {
    for (const auto& [id, c] : conns) {
      if (c->state == ConnState::handling || c->state == ConnState::responding ||
          c->pending() > 0) {
        return true;
      }
    }
    return false;
  }

  void loop() {
    std::vector<epoll_event> evs(256);
    auto next_tick = Clock::now() + kTick;
    bool stop_seen = false;
    for (;;) {
      if (stopping.load() && !stop_seen) {
        stop_seen = true;
        stop_deadline = Clock::now() + Millis(grace_ms.load());
        if (listen_fd >= 0) {
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          ::close(listen_fd);
          listen_fd = -1;
        }
      }
      if (stop_seen && (!busy() || Clock::now() > stop_deadline)) break;
      const auto wait = std::chrono::duration_cast<Millis>(next_tick - Clock::now()).count();
      const int n = epoll_wait(epoll_fd, evs.data(), static_cast<int>(evs.size()),
                               static_cast<int>(std::max<int64_t>(0, wait)));
      for (int i = 0; i < n; ++i) {
        const uint64_t id = evs[static_cast<size_t>(i)].data.u64;
        const uint32_t ev = evs[static_cast<size_t>(i)].events;
        if (id == kListenTag) {
          accept_all();
          continue;
        }
        if (id == kWakeTag) {
          drain_wakes();
          continue;
        }
        auto it = conns.find(id);
        if (it == conns.end()) continue;  // closed earlier in this batch
        Conn& c = *it->second;
        if (ev & EPOLLERR) {
          close_conn(id, c.state == ConnState::handling || c.state == ConnState::responding);
          continue;
        }
        if (ev & EPOLLOUT) {
          if (!flush(c)) continue;
          if (c.state == ConnState::responding) pump(c);
          if (!conns.count(id)) continue;
          if (c.state == ConnState::idle && !c.in.empty()) on_readable_data(c);  // pipelined
          if (!conns.count(id)) continue;
        }
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
          if (c.state == ConnState::handling || c.state == ConnState::responding) {
            // Not reading now: a hang-up means the client gave up on its response.
            if (ev & (EPOLLRDHUP | EPOLLHUP)) close_conn(id, true);
            continue;
          }
          on_readable(c);
        }
      }
      if (Clock::now() >= next_tick) {
        on_tick();
        next_tick = Clock::now() + kTick;
      }
    }
    std::vector<uint64_t> all;
    for (auto& [id, c] : conns) all.push_back(id);
    for (uint64_t id : all) close_conn(id, true);
  }
};

namespace {

void Conn::start(int st, std::string ct, Headers headers, bool stream) {
  if (started) return;
  started = true;
  status = st;
  streamed = stream && req.method != "HEAD";  // HEAD: buffered for its length, never sent
  content_type = std::move(ct);
  resp_headers = std::move(headers);
  if (stream) {
    if (srv->hooks.decorate) srv->hooks.decorate(req, resp_headers);
    const bool close = !req.keep_alive || srv->stopping.load();
    srv->queue(*this, head_text(status, content_type, resp_headers, nullptr, true, close));
  }
}

void Conn::write(std::string_view bytes) {
  if (!started || ended || bytes.empty()) return;
  if (!streamed) {
    body.append(bytes);
    return;
  }
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  std::string chunk = size;
  chunk.append(bytes);
  chunk += "\r\n";
  srv->queue(*this, std::move(chunk));
}

void Conn::end() {
  if (!started) start(500, "text/plain", {}, false);
  ended = true;
}

size_t Conn::room() const {
  const size_t p = pending();
  return p >= srv->limits.max_pending_output ? 0 : srv->limits.max_pending_output - p;
}

}  // namespace

Server::Server(ServerLimits limits, Hooks hooks)
    : impl_(std::make_unique<Impl>(this, std::move(limits), std::move(hooks))) {}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lock(impl_->jobs_mu);
    impl_->jobs_closed = true;
  }
  impl_->jobs_cv.notify_all();
  for (auto& t : impl_->workers) t.join();
  {
    std::lock_guard<std::mutex> lock(impl_->wake->mu);
    impl_->wake->closed = true;
  }
  for (auto& [id, c] : impl_->conns) {
    if (c->async) c->async->cancel();
    ::close(c->fd);
  }
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  if (impl_->epoll_fd >= 0) ::close(impl_->epoll_fd);
  if (impl_->spare_fd >= 0) ::close(impl_->spare_fd);
}

void Server::route(std::string method, std::string path, Handler h, bool run_inline) {
  impl_->routes[std::move(path)][std::move(method)] = Route{std::move(h), run_inline};
}

void Server::listen(const std::string& host, int port) {
  Impl& m = *impl_;
  // Every connection is a descriptor: use all the process may have.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res); rc != 0) {
    throw Error("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      m.listen_fd = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  if (m.listen_fd < 0) {
    throw Error("cannot listen on " + host + ":" + port_s + " (" + why + ")");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (m.epoll_fd < 0) throw Error(std::string("epoll: ") + std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenTag;
  epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.listen_fd, &e);
  e.data.u64 = kWakeTag;
  epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.wake->fd, &e);
  m.spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; i < std::max(1, m.limits.handler_threads); ++i) {
    m.workers.emplace_back([&m] { m.worker_loop(); });
  }
}

void Server::run() {
  if (impl_->epoll_fd < 0) throw Error("internal: Server::run before listen");
  impl_->loop();
}

void Server::stop(Millis grace) {
  impl_->grace_ms.store(grace.count());
  impl_->stopping.store(true);
  impl_->wake->ring();
}

}  // namespace lift::http
