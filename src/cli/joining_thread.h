// A thread for the CLI's benchmarks that cannot take the process down: it joins when destroyed
// (a joinable std::thread destroyed while an exception unwinds the stack calls std::terminate:
// "terminate called without an active exception"), and what its function throws is kept and
// rethrown by join() on the owner's thread instead of terminating the process.
#pragma once

#include <exception>
#include <thread>
#include <utility>

namespace lift::cli {

class JoiningThread {
 public:
  template <class F>
  explicit JoiningThread(F&& f)
      : thread_([this, fn = std::forward<F>(f)]() mutable {
          try {
            fn();
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  // The thread refers to this object.
  JoiningThread(const JoiningThread&) = delete;
  JoiningThread& operator=(const JoiningThread&) = delete;
  ~JoiningThread() {
    if (thread_.joinable()) thread_.join();
  }

  // Waits for the function to return; rethrows what it threw (once).
  void join() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  std::exception_ptr error_;  // before thread_: set up before the thread starts
  std::thread thread_;
};

}  // namespace lift::cli
