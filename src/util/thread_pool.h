// A persistent pool of worker threads for the forward pass. Workers spin briefly after a
// job (the next matmul usually follows within microseconds), then sleep on a futex, so an
// idle engine or a busy neighbour never burns a core for long.
//
// Work is handed out as task indices from a shared counter; each task computes a fixed set
// of outputs, so results never depend on which thread ran which task. The caller never
// waits for a worker that has not started: if a core is busy elsewhere, the calling
// thread simply takes all the tasks, and the job ends when every *claimed* task is done.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace lift {

class ThreadPool {
 public:
  // n_threads counts the calling thread, which always takes part; 0 = hardware concurrency.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for task in [0, n_tasks) and returns when all are done.
  // thread is in [0, size()). fn must not throw. One parallel_for at a time per pool.
  template <typename Fn>
  void parallel_for(size_t n_tasks, Fn&& fn) {
    if (n_tasks == 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (size_t t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    auto thunk = [](void* ctx, size_t task, int thread) {
      (*static_cast<std::remove_reference_t<Fn>*>(ctx))(task, thread);
    };
    run(n_tasks, thunk, &fn);
  }

 private:
  using Thunk = void (*)(void*, size_t, int);
  // Two job slots, used alternately: a late worker can still be reading job G's slot
  // while job G+1 is being set up in the other one.
  struct Job {
    std::atomic<Thunk> thunk{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<uint32_t> n_tasks{0};
  };

  void run(size_t n_tasks, Thunk thunk, void* ctx);
  void worker(int index);
  // Claims and runs tasks of job `gen` until none are left or another job has started.
  void drain(uint32_t gen, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job jobs_[2];
  uint32_t generation_ = 0;  // owned by the calling thread
  // High 32 bits: the current job's generation; low 32 bits: next task to claim.
  alignas(64) std::atomic<uint64_t> state_{0};
  alignas(64) std::atomic<uint32_t> done_{0};
  alignas(64) std::atomic<uint32_t> wake_seq_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace lift
