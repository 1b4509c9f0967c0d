// Shared by the tests that compare lift with llama.cpp's recorded outputs
// (../shared/models/quantized and ../shared/models/archs): the recorded tokens fed back in one
// forward pass, and the log-probabilities lift gives at each recorded step.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "test_compare.h"

namespace lift::test {

// The variant an exact f32 engine is compared with: llama.cpp on the file's F32 twin, or on
// the file itself when it is F32 already (then "dequant_f32" is null).
inline const nlohmann::json& exact_variant(const nlohmann::json& e) {
  return e["dequant_f32"].is_null() ? e["kv_f32"] : e["dequant_f32"];
}

// ln softmax (in double) of each logits row wanted: the prompt's last position and every
// recorded generated token but the last, in one forward pass with the prompt as prompt tokens
// and the continuation as generated ones. Block size 16, so sliding windows of 16 and 20 skip
// whole blocks. Empty (with a test failure) when a logit is not finite: a NaN would vanish
// from the maximum, and a sentinel left in place with it.
inline std::vector<std::vector<double>> teacher_forced_logprobs(LlamaModel& m, Backend& be,
                                                                const std::vector<int32_t>& prompt,
                                                                const std::vector<int32_t>& gen) {
  std::vector<int32_t> toks = prompt;
  toks.insert(toks.end(), gen.begin(), gen.end() - 1);
  const size_t n = toks.size(), bs = 16;
  KvCache kv(m.config(), (n + bs - 1) / bs, bs);
  std::vector<int32_t> table((n + bs - 1) / bs), pos(n), rows;
  std::iota(table.begin(), table.end(), 0);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<const int32_t*> tables(n, table.data());
  for (size_t r = prompt.size() - 1; r < n; ++r) rows.push_back(static_cast<int32_t>(r));
  const size_t vocab = static_cast<size_t>(m.config().n_vocab);
  std::vector<float> logits = unwritten_floats(rows.size() * vocab);
  m.forward(be, ForwardBatch{toks, pos, tables, rows, prompt.size()}, kv, logits.data());
  std::vector<std::vector<double>> out(rows.size(), std::vector<double>(vocab));
  for (size_t s = 0; s < rows.size(); ++s) {
    const float* l = logits.data() + s * vocab;
    for (size_t i = 0; i < vocab; ++i) {
      if (!std::isfinite(l[i])) {
        ADD_FAILURE() << "logits row " << s << " element " << i << ": " << describe_bad(l[i]);
        return {};
      }
    }
    double mx = -INFINITY, sum = 0;
    for (size_t i = 0; i < vocab; ++i) mx = std::max(mx, static_cast<double>(l[i]));
    for (size_t i = 0; i < vocab; ++i) sum += std::exp(l[i] - mx);
    for (size_t i = 0; i < vocab; ++i) out[s][i] = l[i] - mx - std::log(sum);
  }
  return out;
}

}  // namespace lift::test
