#include "util/thread_pool.h"

#include <immintrin.h>

namespace lift {

namespace {
// About 50 µs of spinning: long enough to catch the next matmul of the same forward pass,
// short enough not to matter when the engine goes idle.
constexpr int kSpinIterations = 20000;
inline void cpu_relax() { _mm_pause(); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads < 1 ? 1 : n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_seq_.fetch_add(1);
  wake_seq_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(uint32_t gen, int thread) {
  Job& job = jobs_[gen & 1];
  const Thunk thunk = job.thunk.load(std::memory_order_relaxed);
  void* const ctx = job.ctx.load(std::memory_order_relaxed);
  const uint32_t n = job.n_tasks.load(std::memory_order_relaxed);
  uint64_t s = state_.load(std::memory_order_acquire);
  // A successful claim proves job `gen` is still running, so the slot read above was not
  // being rewritten: the next job is only set up once every claimed task is done.
  while (static_cast<uint32_t>(s >> 32) == gen && static_cast<uint32_t>(s) < n) {
    if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
      thunk(ctx, static_cast<uint32_t>(s), thread);
      done_.fetch_add(1, std::memory_order_release);
      s = state_.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::run(size_t n_tasks, Thunk thunk, void* ctx) {
  const uint32_t gen = ++generation_;
  Job& job = jobs_[gen & 1];
  job.thunk.store(thunk, std::memory_order_relaxed);
  job.ctx.store(ctx, std::memory_order_relaxed);
  job.n_tasks.store(static_cast<uint32_t>(n_tasks), std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  state_.store(static_cast<uint64_t>(gen) << 32);  // seq_cst: pairs with sleeping_ below
  if (sleeping_.load() > 0) {
    wake_seq_.fetch_add(1);
    wake_seq_.notify_all();
  }
  drain(gen, 0);
  // Wait only for tasks that workers claimed. Spin first, then yield, so that a worker
  // sharing its core with another process gets to finish its one task.
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n_tasks) {
    if (++spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t gen = static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 32);
    while (gen == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        const uint32_t ticket = wake_seq_.load();
        sleeping_.fetch_add(1);
        if (static_cast<uint32_t>(state_.load() >> 32) == seen && !stop_.load()) {
          wake_seq_.wait(ticket);
        }
        sleeping_.fetch_sub(1);
        spins = 0;
      }
      gen = static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 32);
    }
    if (stop_.load()) return;
    seen = gen;
    drain(gen, index);
  }
}

}  // namespace lift
