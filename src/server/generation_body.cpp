#include "server/generation_body.h"

namespace lift {

namespace {

std::string sse(const nlohmann::json& j) { return "data: " + dump(j) + "\n\n"; }

constexpr const char* kShutdown = "the server is shutting down";

}  // namespace

GenerationBody::GenerationBody(Engine& engine, std::shared_ptr<ApiRequest> req, Submitted sub,
                               std::unique_ptr<ResponseBuilder> builder, OnEnd on_end)
    : engine_(engine),
      req_(std::move(req)),
      sub_(std::move(sub)),
      builder_(std::move(builder)),
      on_end_(std::move(on_end)),
      acc_(static_cast<size_t>(req_->params.n)) {}

GenerationBody::~GenerationBody() {
  sub_.stream->set_listener(nullptr);
  if (!ended_.load()) cancel();
}

void GenerationBody::end(Outcome o) {
  if (ended_.exchange(true)) return;
  if (on_end_) on_end_(o);
}

void GenerationBody::attach(Waker wake) { sub_.stream->set_listener(std::move(wake)); }

void GenerationBody::cancel() {
  if (ended_.load()) return;
  engine_.abort(sub_.id);  // its blocks come back; the stream ends with abort
  end(Outcome::aborted);
}

void GenerationBody::pump(http::Writer& out) {
  if (ended_.load()) return;
  if (req_->stream) {
    pump_stream(out);
  } else {
    pump_whole(out);
  }
}

void GenerationBody::pump_stream(http::Writer& out) {
  if (!started_) {
    started_ = true;
    out.start(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, /*streamed=*/true);
    if (req_->chat) {
      for (int i = 0; i < req_->params.n; ++i) out.write(sse(builder_->role_chunk(i)));
    }
  }
  // Only as much as the client has room for: the rest waits in the stream.
  while (out.room() > 0) {
    auto o = sub_.stream->try_pop();
    if (!o) break;
    if (o->finish == FinishReason::abort || o->finish == FinishReason::error) {
      worst_ = worst_ == FinishReason::error ? worst_ : o->finish;
      if (o->finish == FinishReason::error && error_.empty()) error_ = o->error;
    }
    if (o->finish != FinishReason::none) completion_tokens_ += o->completion_tokens;
    if (o->text.empty() && o->finish == FinishReason::none && o->logprobs.empty()) continue;
    if (o->finish != FinishReason::none && (!o->text.empty() || !o->logprobs.empty())) {
      // As OpenAI does: the last content, then a chunk with an empty delta and the reason.
      RequestOutput content = *o;
      content.finish = FinishReason::none;
      if (const auto c = builder_->chunk(content); !c.is_null()) out.write(sse(c));
      o->text.clear();
      o->logprobs.clear();
    }
    if (const auto c = builder_->chunk(*o); !c.is_null()) out.write(sse(c));
  }
  if (!sub_.stream->done()) return;
  out.usage().completion_tokens = completion_tokens_;
  if (worst_ != FinishReason::none) {
    // The status went out long ago: say what happened in the stream itself (the SDKs raise
    // an error on it), after each sample's finish_reason "abort" or "error".
    const std::string msg = worst_ == FinishReason::error ? error_ : kShutdown;
    out.write(sse(error_json(msg, "server_error", "", "")));
  } else if (req_->include_usage) {
    out.write(
        sse(builder_->usage_chunk(static_cast<int>(req_->prompt.size()), completion_tokens_)));
  }
  out.write("data: [DONE]\n\n");
  out.end();
  end(worst_ == FinishReason::none    ? Outcome::finished
      : worst_ == FinishReason::error ? Outcome::failed
                                      : Outcome::aborted);
}

void GenerationBody::pump_whole(http::Writer& out) {
  while (auto o = sub_.stream->try_pop()) {
    SampleAccum& a = acc_.at(static_cast<size_t>(o->index));
    a.text += o->text;
    a.logprobs.insert(a.logprobs.end(), o->logprobs.begin(), o->logprobs.end());
    if (o->finish != FinishReason::none) {
      a.finish = o->finish;
      a.completion_tokens = o->completion_tokens;
      completion_tokens_ += o->completion_tokens;
    }
    if (o->finish == FinishReason::error) {
      worst_ = FinishReason::error;
      if (error_.empty()) error_ = o->error;
    } else if (o->finish == FinishReason::abort && worst_ == FinishReason::none) {
      worst_ = FinishReason::abort;
    }
  }
  if (!sub_.stream->done()) return;
  out.usage().completion_tokens = completion_tokens_;
  if (worst_ == FinishReason::error) {
    out.start(500, "application/json", {}, false);
    out.write(dump(error_json(error_, "server_error", "", "")));
  } else if (worst_ == FinishReason::abort) {
    out.start(503, "application/json", {}, false);
    out.write(dump(error_json(kShutdown, "server_error", "", "")));
  } else {
    out.start(200, "application/json", {}, false);
    out.write(dump(builder_->full(acc_, static_cast<int>(req_->prompt.size()))));
  }
  out.end();
  end(worst_ == FinishReason::none    ? Outcome::finished
      : worst_ == FinishReason::error ? Outcome::failed
                                      : Outcome::aborted);
}

}  // namespace lift
