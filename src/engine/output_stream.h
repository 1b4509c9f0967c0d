// A request's outputs, from the engine thread to whoever reads them (CLI, HTTP handler).
// The engine only ever pushes; a push takes a short lock and never waits for the reader.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace lift {

class OutputStream {
 public:
  explicit OutputStream(int n_samples) : open_samples_(n_samples) {}

  void push(RequestOutput out) {
    std::shared_ptr<const std::function<void()>> listener;  // a copy without allocating
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (out.finish != FinishReason::none) --open_samples_;
      queue_.push_back(std::move(out));
      listener = listener_;
    }
    cv_.notify_all();
    if (listener) (*listener)();
  }

  // Called (on the pushing thread, without the lock) after every push, so an event loop can
  // wait for many streams at once; called once at once if outputs are already waiting.
  void set_listener(std::function<void()> f) {
    bool ready = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      listener_ = f ? std::make_shared<const std::function<void()>>(f) : nullptr;
      ready = !queue_.empty() || open_samples_ == 0;
    }
    if (ready && f) f();
  }

  // The next output if one is waiting; never blocks.
  std::optional<RequestOutput> try_pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }

  // Next output, waiting up to `timeout`; nullopt on timeout or when everything was read.
  std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || open_samples_ == 0; });
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }

  // True once every sample has finished and all outputs were read.
  bool done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_samples_ == 0 && queue_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  int open_samples_;
  std::shared_ptr<const std::function<void()>> listener_;
};

}  // namespace lift
