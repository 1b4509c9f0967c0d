#include "parallel/tp_step.h"

#include <algorithm>
#include <memory>

#include "util/error.h"

namespace lift {

namespace {

// Message layout (int32): [0] op; for kForward [1] tokens, [2] logits rows, [3] n_prompt,
// [4] tables, [5] table entries, [6] copies, then tokens, positions, per token its table's
// index, per table its length, the tables' entries, logits rows, copy pairs; for kGeometry
// [1] blocks, [2] block size, [3] KvType, [4] max model length.
constexpr size_t kHeader = 8;
enum Op : int32_t { kStop = 0, kForward = 1, kGeometry = 2 };

}  // namespace

void TpLeader::send(std::vector<int32_t>& msg) {
  uint64_t size = msg.size();
  comm_.broadcast(&size, sizeof size);
  comm_.broadcast(msg.data(), 4 * msg.size());
}

void TpLeader::send_geometry(const KvCache& kv, size_t max_model_len) {
  msg_.assign(kHeader, 0);
  msg_[0] = kGeometry;
  msg_[1] = static_cast<int32_t>(kv.n_blocks());
  msg_[2] = static_cast<int32_t>(kv.block_size());
  msg_[3] = static_cast<int32_t>(kv.type());
  msg_[4] = static_cast<int32_t>(max_model_len);
  send(msg_);
}

void TpLeader::forward(LlamaModel& model, Backend& backend, const ForwardBatch& batch, KvCache& kv,
                       float* logits, std::span<const std::pair<int32_t, int32_t>> copies) {
  const size_t n = batch.tokens.size();
  const size_t bs = kv.block_size();
  // One copy of each sequence's table, as long as its furthest token needs. A sequence's
  // tokens sit together in the batch (in at most two runs: prompt rows, then generated ones),
  // so the previous token's table is nearly always the one; otherwise a scan of the few seen.
  tables_.clear();
  lengths_.clear();
  index_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t* t = batch.block_tables[i];
    size_t k =
        i > 0 && tables_[static_cast<size_t>(index_[i - 1])] == t
            ? static_cast<size_t>(index_[i - 1])
            : static_cast<size_t>(std::find(tables_.begin(), tables_.end(), t) - tables_.begin());
    if (k == tables_.size()) {
      tables_.push_back(t);
      lengths_.push_back(0);
    }
    index_[i] = static_cast<int32_t>(k);
    const auto need = static_cast<int32_t>(static_cast<size_t>(batch.positions[i]) / bs + 1);
    lengths_[k] = std::max(lengths_[k], need);
  }
  size_t entries = 0;
  for (int32_t l : lengths_) entries += static_cast<size_t>(l);
  msg_.assign(kHeader, 0);
  msg_[0] = kForward;
  msg_[1] = static_cast<int32_t>(n);
  msg_[2] = static_cast<int32_t>(batch.logit_rows.size());
  msg_[3] = static_cast<int32_t>(batch.n_prompt);
  msg_[4] = static_cast<int32_t>(tables_.size());
  msg_[5] = static_cast<int32_t>(entries);
  msg_[6] = static_cast<int32_t>(copies.size());
  msg_.insert(msg_.end(), batch.tokens.begin(), batch.tokens.end());
  msg_.insert(msg_.end(), batch.positions.begin(), batch.positions.end());
  msg_.insert(msg_.end(), index_.begin(), index_.end());
  msg_.insert(msg_.end(), lengths_.begin(), lengths_.end());
  for (size_t t = 0; t < tables_.size(); ++t) {
    msg_.insert(msg_.end(), tables_[t], tables_[t] + lengths_[t]);
  }
  msg_.insert(msg_.end(), batch.logit_rows.begin(), batch.logit_rows.end());
  for (const auto& [src, dst] : copies) {
    msg_.push_back(src);
    msg_.push_back(dst);
  }
  send(msg_);
  model.forward(backend, batch, kv, logits);
}

void TpLeader::stop() {
  if (stopped_) return;
  stopped_ = true;
  msg_.assign(kHeader, 0);
  msg_[0] = kStop;
  send(msg_);
}

void tp_follow(Comm& comm, LlamaModel& model, Backend& backend) {
  std::unique_ptr<KvCache> kv;
  std::vector<int32_t> msg;
  std::vector<const int32_t*> starts;  // per table, where its entries begin in msg
  std::vector<const int32_t*> tables;
  std::vector<float> logits;
  const auto vocab = static_cast<size_t>(model.config().n_vocab);
  for (;;) {
    uint64_t size = 0;
    comm.broadcast(&size, sizeof size, /*patient=*/true);  // the leader may be idle
    msg.resize(size);
    comm.broadcast(msg.data(), 4 * size);
    if (msg[0] == kStop) return;
    if (msg[0] == kGeometry) {
      kv = std::make_unique<KvCache>(model.config(), static_cast<size_t>(msg[1]),
                                     static_cast<size_t>(msg[2]), static_cast<KvType>(msg[3]),
                                     comm.shard());
      model.set_context_length(static_cast<size_t>(msg[4]));
      continue;
    }
    if (!kv) throw Error("tensor parallelism: a forward pass before the K/V geometry");
    const auto n = static_cast<size_t>(msg[1]), n_rows = static_cast<size_t>(msg[2]);
    const auto n_tables = static_cast<size_t>(msg[4]), entries = static_cast<size_t>(msg[5]);
    const auto n_copies = static_cast<size_t>(msg[6]);
    const int32_t* p = msg.data() + kHeader;
    const int32_t* tokens = p;
    const int32_t* positions = tokens + n;
    const int32_t* index = positions + n;
    const int32_t* lengths = index + n;
    const int32_t* entry = lengths + n_tables;
    const int32_t* rows = entry + entries;
    const int32_t* copy = rows + n_rows;
    starts.resize(n_tables);
    for (size_t t = 0; t < n_tables; ++t) {
      starts[t] = entry;
      entry += lengths[t];
    }
    for (size_t c = 0; c < n_copies; ++c) kv->copy_block(copy[2 * c], copy[2 * c + 1]);
    tables.resize(n);
    for (size_t i = 0; i < n; ++i) tables[i] = starts[static_cast<size_t>(index[i])];
    if (logits.size() < n_rows * vocab) logits.resize(n_rows * vocab);
    model.forward(backend,
                  ForwardBatch{{tokens, n},
                               {positions, n},
                               {tables.data(), n},
                               {rows, n_rows},
                               static_cast<size_t>(msg[3])},
                  *kv, logits.data());
  }
}

}  // namespace lift
