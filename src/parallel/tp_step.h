// The leader's forward passes, replayed by the other ranks. Rank 0 runs the engine (scheduler,
// sampler, server) as it does alone; for each forward pass it broadcasts the batch (tokens,
// positions, block tables, logits rows) and the copy-on-write block copies made since the last
// one, then every rank runs the model on it through a TpBackend, whose products meet in
// all-gathers. A follower keeps a K/V cache of the leader's geometry and writes it exactly as
// the leader writes its own, so attention agrees too.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/llama_model.h"
#include "parallel/comm.h"

namespace lift {

class TpLeader {
 public:
  explicit TpLeader(Comm& comm) : comm_(comm) {}
  TpShard shard() const { return comm_.shard(); }
  // The K/V pool the followers must hold from now on (a fresh one: the next passes write it
  // from empty, as `kv` is).
  void send_geometry(const KvCache& kv, size_t max_model_len);
  // Broadcasts the pass, then runs it here.
  void forward(LlamaModel& model, Backend& backend, const ForwardBatch& batch, KvCache& kv,
               float* logits, std::span<const std::pair<int32_t, int32_t>> copies = {});
  // Ends the followers' loops.
  void stop();

 private:
  void send(std::vector<int32_t>& msg);

  Comm& comm_;
  std::vector<int32_t> msg_, index_, lengths_;  // reused from pass to pass
  std::vector<const int32_t*> tables_;
  bool stopped_ = false;
};

// A follower's life after loading the model: builds the K/V caches the leader describes and
// replays its passes until it stops. Returns when it does.
void tp_follow(Comm& comm, LlamaModel& model, Backend& backend);

}  // namespace lift
