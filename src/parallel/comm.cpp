#include "parallel/comm.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

#ifdef LIFT_HAVE_MPI
#include <mpi.h>
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#endif

namespace lift {

#ifdef LIFT_HAVE_MPI
namespace {
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("MPI ") + what + " failed");
}
void finalize_at_exit() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}
}  // namespace

Comm& Comm::world(int want) {
  static Comm* comm = [] {
    // MPI starts threads of its own; they must not take SIGINT/SIGTERM, which lift serve
    // waits for (sigwait) to drain: they inherit the mask in force while MPI starts.
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    check(rc, "init");
    if (provided < MPI_THREAD_SERIALIZED) {
      throw Error("this MPI library cannot run collectives from the engine thread");
    }
    std::atexit(finalize_at_exit);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return new Comm(rank, size);
  }();
  if (comm->size_ != want) {
    throw Error("--tp " + std::to_string(want) + " needs " + std::to_string(want) +
                " MPI ranks (mpirun -np " + std::to_string(want) + " lift ...), this group has " +
                std::to_string(comm->size_));
  }
  return *comm;
}

namespace {
// How long a patient wait (a follower waiting for the leader's next pass) polls before it
// sleeps between polls: longer than the leader's work between two passes of a busy engine
// (sampling, scheduling), so steps meet no sleep, while an idle server's followers take next to
// no CPU (they polled a core each at 100%) and start the first pass after idling at most
// kIdlePoll late.
constexpr std::chrono::milliseconds kPatientSpin{5};
constexpr std::chrono::microseconds kIdlePoll{500};

// Waits for a non-blocking collective; past `timeout_s` (unless negative: patient) aborts the
// job.
void wait(MPI_Request& req, double timeout_s, int rank, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  bool idle = false;
  for (uint64_t spins = 0;; ++spins) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (idle) {
      std::this_thread::sleep_for(kIdlePoll);
      continue;
    }
    if (spins % 1024 != 0) continue;
    if (timeout_s < 0) {
      idle = std::chrono::steady_clock::now() - start > kPatientSpin;
      continue;
    }
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > timeout_s) {
      std::fprintf(stderr,
                   "lift: error: rank %d: %s not completed after %.0f s: another rank "
                   "hangs; aborting the job (--tp-timeout)\n",
                   rank, what, timeout_s);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}
}  // namespace

void Comm::broadcast(void* data, size_t bytes, bool patient) {
  if (size_ == 1) return;
  auto* p = static_cast<char*>(data);
  // MPI counts are int: send large buffers in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t off = 0; off < bytes; off += kPiece) {
    const size_t n = bytes - off < kPiece ? bytes - off : kPiece;
    MPI_Request req;
    check(MPI_Ibcast(p + off, static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD, &req), "broadcast");
    wait(req, patient ? -1.0 : timeout_s_, rank_, "broadcast");
  }
}

void Comm::all_gather(const float* mine, std::span<const int> counts, std::span<const int> displs,
                      float* all) {
  MPI_Request req;
  check(MPI_Iallgatherv(mine, counts[static_cast<size_t>(rank_)], MPI_FLOAT, all, counts.data(),
                        displs.data(), MPI_FLOAT, MPI_COMM_WORLD, &req),
        "all-gather");
  wait(req, timeout_s_, rank_, "all-gather");
}

#else
Comm& Comm::world(int want) {
  static Comm comm(0, 1);
  if (want != 1) {
    throw Error("--tp " + std::to_string(want) +
                ": this lift was built without MPI (install libopenmpi-dev and rebuild)");
  }
  return comm;
}

void Comm::broadcast(void*, size_t, bool) {}

void Comm::all_gather(const float* mine, std::span<const int> counts, std::span<const int>,
                      float* all) {
  for (int i = 0; i < counts[0]; ++i) all[i] = mine[i];
}

#endif

}  // namespace lift
