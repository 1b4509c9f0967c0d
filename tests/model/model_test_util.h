// Helpers for model tests: run a model over token sequences through the paged forward pass.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "temp_file.h"
#include "test_compare.h"
#include "test_paths.h"

namespace lift::test {

// BOS then n - 1 random ordinary token ids.
inline std::vector<int32_t> random_tokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  t[0] = 1;
  return t;
}

// Two logits rows with the same bits (test::same_bits): fails on different sizes, on empty
// rows (a sequence that got no logits), and on any NaN, the unwritten sentinel step() fills
// its output with included, even where both rows hold it.
inline ::testing::AssertionResult bitwise_equal(const std::vector<float>& a,
                                                const std::vector<float>& b) {
  return same_bits(a, b);
}

// Shared model files by relative path, or "synthetic:TYPE" for a small GQA model (dim 128, 8
// heads, 2 KV heads) with the stories260K vocabulary, written once per process (ctest runs the
// tests of this binary in parallel processes). TYPE: Q8_0, Q4_0, F16; Q4_K_M (dim 128 is no
// multiple of 256, so that file mixes llama-quantize's fallbacks, Q5_0 and a Q8_0 output, with
// Q4_K/Q6_K ffn_down); IQ4_XS (dim 256 and ffn 512: every matrix IQ4_XS).
inline std::string resolve_model(const std::string& name) {
  const std::string prefix = "synthetic:";
  if (name.rfind(prefix, 0) != 0) return model_path(name);
  const std::string type = name.substr(prefix.size());
  const std::string path =
      ::testing::TempDir() + "lift-synth-gqa-" + type + "-" + std::to_string(::getpid()) + ".gguf";
  if (::access(path.c_str(), R_OK) == 0) return path;
  SyntheticSpec spec;
  spec.dim = 128;
  spec.n_layers = 2;
  spec.n_heads = 8;
  spec.n_kv_heads = 2;
  spec.ffn = 256;
  spec.seed = 3;
  spec.vocab_from = model_path("stories260K/stories260K.gguf");
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::IQ4_XS}) {
    if (ggml_type_name(t) == type) spec.type = t;
  }
  if (type == "IQ4_XS") {
    spec.dim = 256;
    spec.ffn = 512;
  }
  if (type == "Q4_K_M") {
    spec.type = GgmlType::Q4_K;
    spec.k_mix = true;
  }
  write_synthetic_model(spec, path);
  remove_at_exit(path);
  return path;
}

// One sequence's K/V blocks inside a shared cache. Tokens before n_prompt are prompt tokens,
// the rest generated ones (kernels::RowKind).
struct TestSequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;
  size_t cached = 0;  // tokens whose K/V are already in the cache
  size_t n_prompt = SIZE_MAX;
};

// Runs `take[i]` new tokens of each sequence i in one batch and returns each sequence's
// logits for its last token of this step (empty for sequences with take 0). As the engine's
// model runner does, the batch holds every prompt token first, then the generated ones.
inline std::vector<std::vector<float>> step(LlamaModel& m, Backend& be, KvCache& kv,
                                            std::vector<TestSequence*> seqs,
                                            const std::vector<size_t>& take) {
  std::vector<int32_t> tok, pos, rows;
  std::vector<const int32_t*> tables;
  std::vector<size_t> owner;
  size_t n_prompt = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t s = 0; s < seqs.size(); ++s) {
      const size_t end = seqs[s]->cached + take[s];
      const auto [b, e] = chunk_part(seqs[s]->cached, end, seqs[s]->n_prompt, pass);
      for (size_t p = b; p < e; ++p) {
        tok.push_back(seqs[s]->tokens[p]);
        pos.push_back(static_cast<int32_t>(p));
        tables.push_back(seqs[s]->table.data());
      }
      if (b < e && e == end) {
        rows.push_back(static_cast<int32_t>(tok.size() - 1));
        owner.push_back(s);
      }
    }
    if (pass == 0) n_prompt = tok.size();
  }
  const size_t vocab = static_cast<size_t>(m.config().n_vocab);
  // Exactly the rows asked for, each element the unwritten sentinel until forward() writes it.
  std::vector<float> logits = unwritten_floats(rows.size() * vocab);
  m.forward(be, ForwardBatch{tok, pos, tables, rows, n_prompt}, kv, logits.data());
  std::vector<std::vector<float>> out(seqs.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    out[owner[r]].assign(logits.begin() + static_cast<ptrdiff_t>(r * vocab),
                         logits.begin() + static_cast<ptrdiff_t>((r + 1) * vocab));
  }
  for (size_t s = 0; s < seqs.size(); ++s) seqs[s]->cached += take[s];
  return out;
}

// Gives each sequence a disjoint run of blocks [first, first + n).
inline void assign_blocks(TestSequence& s, int32_t first, size_t n) {
  s.table.resize(n);
  std::iota(s.table.begin(), s.table.end(), first);
}

// max |v[i]|, NaN if any element is NaN (std::max would drop it).
inline float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, std::abs(x));
  }
  return m;
}

}  // namespace lift::test
