// The ranks of one tensor-parallel group: a thin layer over MPI, so that nothing else includes
// mpi.h and a build without MPI still compiles (every collective then needs a group of one).
// Only the engine thread (or the follower loop) calls into it: MPI runs at
// MPI_THREAD_SERIALIZED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "parallel/tp_split.h"

namespace lift {

class Comm {
 public:
  // The process's group (MPI_COMM_WORLD), MPI initialized on first use. `want` ranks are
  // required: throws lift::Error when the process was started with another count (e.g. not
  // under `mpirun -np want`) or lift was built without MPI and want > 1.
  static Comm& world(int want);
  // A group's shard of the model for this rank; the whole model without a group.
  static TpShard shard_of(const Comm* c) { return c != nullptr ? c->shard() : TpShard{}; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }
  TpShard shard() const { return {rank_, size_}; }

  // Rank 0's bytes to every rank. `patient`: may wait without end (a follower waiting for the
  // leader's next pass: the server may be idle); otherwise the collective must complete
  // within the timeout.
  void broadcast(void* data, size_t bytes, bool patient = false);
  // Each rank's `mine` (counts[rank] floats) to every rank, rank after rank, in `all`.
  void all_gather(const float* mine, std::span<const int> counts, std::span<const int> displs,
                  float* all);
  // A collective inside a forward pass that has not completed after this long means a rank
  // hangs (stopped, deadlocked; a dead one ends the job through mpirun): the job is aborted
  // with an error naming the operation, instead of a server that never answers again.
  void set_timeout(double seconds) { timeout_s_ = seconds; }

 private:
  Comm(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 60;
};

}  // namespace lift
