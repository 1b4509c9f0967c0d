// One generation request's response, fed by the engine's OutputStream and pumped by the HTTP
// event loop: server-sent events as tokens arrive, or one JSON body whose status is decided
// when the request ends (500 for an engine error, 503 when the server shut down first) —
// never a 200 committed before the outcome is known.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "server/http/http_server.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace lift {

// How a request ended, for the server's counters.
enum class Outcome { finished, failed, aborted };

class GenerationBody final : public http::AsyncBody {
 public:
  using OnEnd = std::function<void(Outcome)>;  // exactly once, on any thread
  GenerationBody(Engine& engine, std::shared_ptr<ApiRequest> req, Submitted sub,
                 std::unique_ptr<ResponseBuilder> builder, OnEnd on_end);
  ~GenerationBody() override;

  void attach(Waker wake) override;
  void pump(http::Writer& out) override;
  void cancel() override;

 private:
  void pump_stream(http::Writer& out);
  void pump_whole(http::Writer& out);
  void end(Outcome o);

  Engine& engine_;
  std::shared_ptr<ApiRequest> req_;
  Submitted sub_;
  std::unique_ptr<ResponseBuilder> builder_;
  OnEnd on_end_;
  std::atomic<bool> ended_{false};

  bool started_ = false;
  int completion_tokens_ = 0;
  FinishReason worst_ = FinishReason::none;  // abort or error, if any sample had one
  std::string error_;
  std::vector<SampleAccum> acc_;
};

}  // namespace lift
