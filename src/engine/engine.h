// The serving engine: requests in from any thread, one engine thread running steps of
// continuous batching (schedule → forward → sample → detokenize → stream), outputs out
// through each request's OutputStream. No lock is held across a forward pass.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/logits_processor.h"
#include "engine/memory_plan.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/spec_config.h"
#include "engine/spec_controller.h"
#include "engine/spec_verify.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace lift {

class Comm;
class TpLeader;

// Zeros and empties mean "the default" (src/engine/memory_plan.h says which).
struct EngineConfig {
  SchedulerConfig scheduler;
  size_t max_model_len = 0;   // longest prompt + output; at most the model's context
  size_t kv_cache_bytes = 0;  // 0: from the machine's available memory
  size_t kv_blocks = 0;       // if set, overrides kv_cache_bytes
  size_t block_size = 16;
  std::optional<KvType> kv_type;
  bool prefix_caching = true;
  int threads = 0;
  BackendOptions backend;
  bool reference_backend = false;  // the scalar, double-accumulating kernels (slow; checks)
  bool check_invariants = false;   // scheduler and block-manager self-checks every step
  SpecConfig spec;
  // A tensor-parallel group (parallel/tp_backend.h) this engine leads; null or one rank: alone.
  // The other ranks run tp_follow() on the same model.
  Comm* tp = nullptr;
};

struct Submitted {
  uint64_t id = 0;
  std::shared_ptr<OutputStream> stream;
};

class Engine {
 public:
  Engine(LlamaModel& model, const Tokenizer& tokenizer, EngineConfig cfg);
  ~Engine();

  // Validates and queues a request; throws lift::Error with what to fix (empty prompt, prompt +
  // max_tokens beyond max-model-len, bad parameters, n above max_seqs, a request the KV pool
  // can never hold).
  // Thread-safe. Once stop() has begun (until the next start()), the request is not run: its
  // stream gets at once a final output per sample with FinishReason::abort.
  Submitted add_request(std::vector<int32_t> prompt, RequestParams params);
  Submitted add_request(std::string_view text, RequestParams params);
  // Ends a request wherever it is; its samples finish with FinishReason::abort and its KV
  // blocks come back. Unknown or finished ids are ignored. Thread-safe.
  void abort(uint64_t id);

  // Runs the engine loop on its own thread until stop(). stop() ends every request still
  // open (FinishReason::abort) before it returns, and those submitted while it runs or after.
  void start();
  void stop();
  // One step on the calling thread (tests, offline benchmarks); false when idle.
  bool step();
  // Steps until every submitted request has finished.
  void run_until_idle();

  EngineMetrics metrics() const;
  // The model, max-model-len, K/V type and the pool's capacity with where each came from, as
  // lines for start-up logs.
  std::string memory_plan() const;
  const MemoryPlan& plan() const { return plan_; }
  // Longest prompt + max_tokens a request may ask for.
  size_t max_model_len() const { return plan_.max_model_len; }
  const BlockManager& blocks() const { return blocks_; }
  const KvCache& kv() const { return kv_; }
  const LlamaModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const EngineConfig& config() const { return cfg_; }
  // Whether RequestParams::priority orders requests (--scheduling-policy priority); under
  // fcfs it is ignored, and a front end should refuse a non-zero priority.
  bool priority_scheduling() const { return cfg_.scheduler.priority_scheduling(); }

 private:
  void drain_inbox();
  void admit(std::unique_ptr<RequestState> req, std::vector<int32_t> prompt);
  void finish(Sequence* seq, RequestOutput& out);
  void sample_and_emit(Sequence* seq, std::span<float> logits);
  // Ends one sample whose constraint failed (structured::GrammarError); the others go on.
  void fail_sample(Sequence* seq, const std::string& why);
  // Speculative decoding: drafts for the step's speculating sequences, appended to their
  // tokens; then, after the forward pass, the verifier's walk over a sequence's logits rows.
  void propose_drafts();
  void verify_and_emit(const ModelRunner::Sampled& s, const Draft& draft);
  // Tokens the next step carries besides drafts, as the controller plans it.
  size_t base_tokens() const;
  // Bookkeeping once a sample has a new token: counts, TTFT and inter-token latency.
  void count_tokens(Sequence* s, size_t n);
  void fork_samples(Sequence* parent);
  // Copies the scheduler and KV gauges into metrics_; counts a step only when one ran.
  void refresh_gauges(bool ran_step = false);
  void fail_all(const std::string& why);
  // Ends every open sample of a request with `reason`, releasing its blocks.
  void end_request(uint64_t id, FinishReason reason, const std::string& error);
  void loop();

  LlamaModel& model_;
  const Tokenizer& tok_;
  EngineConfig cfg_;
  MemoryPlan plan_;
  ThreadPool pool_;
  std::unique_ptr<Backend> backend_;
  KvCache kv_;
  BlockManager blocks_;
  Scheduler scheduler_;
  ModelRunner runner_;
  OutputProcessor outputs_;
  Sampler sampler_;
  LogitsProcessor logits_processor_;
  SpecVerifier verifier_;
  std::shared_ptr<Proposer> proposer_;  // null: no speculation
  std::unique_ptr<TpLeader> tp_;        // null: no tensor parallelism
  SpecController controller_;
  std::vector<DraftRequest> draft_reqs_;
  std::vector<Draft> drafts_;        // [i]: draft_reqs_[i]'s
  std::vector<size_t> draft_batch_;  // [i]: its entry in step_.batch
  std::vector<int32_t> popped_;
  SampleResult sample_result_;
  SchedulerOutput step_;
  std::vector<float> logits_copy_;

  // Engine-thread state.
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Sequence>>> seqs_;  // by request
  uint64_t next_seq_id_ = 0;
  uint64_t gauge_mark_ = 0;

  // Inbox from other threads.
  struct Pending {
    std::unique_ptr<RequestState> req;
    std::vector<int32_t> prompt;
  };
  std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<Pending> inbox_;
  std::vector<uint64_t> aborts_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<uint64_t> in_flight_{0};

  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;
  uint64_t recomputed_tokens_ = 0;

  std::thread thread_;
  std::atomic<bool> stop_{false};  // set and cleared under inbox_mu_
};

}  // namespace lift
