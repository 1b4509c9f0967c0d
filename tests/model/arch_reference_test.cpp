// Each architecture against llama.cpp: the six files of ../shared/models/archs (README there),
// teacher-forced on llama.cpp's greedy continuation. lift computes in float32 with exact
// weights, so it is compared with the exact variant (dequant_f32 for F16 files, kv_f32 for F32
// ones): top-10 logprobs within the entry's tolerance, and its own greedy ids equal llama.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "teacher_forced.h"
#include "test_compare.h"
#include "test_paths.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

using nlohmann::json;

const json& references() {
  static const json j = [] {
    std::ifstream in(test::model_path("archs/reference_outputs.json"));
    return json::parse(in);
  }();
  return j;
}

using test::exact_variant;

// Worst |lift - llama.cpp| over every recorded top-10 logprob.
double worst_top10_error(const std::vector<std::vector<double>>& lp, const json& steps) {
  EXPECT_EQ(lp.size(), steps.size());
  double worst = 0;
  for (size_t s = 0; s < std::min(lp.size(), steps.size()); ++s) {
    for (const auto& pair : steps[s][1]) {
      const double err = std::abs(lp[s].at(pair[0].get<size_t>()) - pair[1].get<double>());
      if (std::isnan(err)) return err;
      worst = std::max(worst, err);
    }
  }
  return worst;
}

class ArchReference : public ::testing::TestWithParam<std::string> {
 protected:
  const json& entry() const {
    for (const auto& [family, files] : references()["families"].items()) {
      for (const auto& e : files) {
        if (e["file"] == GetParam()) return e;
      }
    }
    throw std::runtime_error("no entry for " + GetParam());
  }
  static double tolerance(const json& e) { return e.value("logprob_tolerance", 1e-3); }
};

TEST_P(ArchReference, TeacherForcedTop10MatchesExactVariant) {
  const json& e = entry();
  auto model = LlamaModel::load(test::model_path("archs/" + GetParam()));
  EXPECT_EQ(model->config().arch, e["architecture"].get<std::string>());
  ThreadPool pool(2);
  const json& v = exact_variant(e);
  const auto prompt = e["prompt_ids"].get<std::vector<int32_t>>();
  const auto gen = v["generated_ids"].get<std::vector<int32_t>>();
  auto cpu = make_cpu_backend(pool, BackendOptions{.quantize_activations = false});
  EXPECT_LE(worst_top10_error(test::teacher_forced_logprobs(*model, *cpu, prompt, gen), v["steps"]),
            tolerance(e))
      << "cpu backend";
  auto ref = make_reference_backend(BackendOptions{.quantize_activations = false});
  EXPECT_LE(worst_top10_error(test::teacher_forced_logprobs(*model, *ref, prompt, gen), v["steps"]),
            tolerance(e))
      << "reference backend";
}

TEST_P(ArchReference, GreedyIdsMatch) {
  const json& e = entry();
  auto model = LlamaModel::load(test::model_path("archs/" + GetParam()));
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool, BackendOptions{.quantize_activations = false});
  const auto want = exact_variant(e)["generated_ids"].get<std::vector<int32_t>>();
  GenerationRequest req;
  req.prompt = e["prompt_ids"].get<std::vector<int32_t>>();
  req.max_tokens = static_cast<int>(want.size());
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  EXPECT_EQ(generate(*model, *be, req).tokens, want);
}

INSTANTIATE_TEST_SUITE_P(Files, ArchReference,
                         ::testing::Values("archs-llama3rope.gguf", "archs-llama-linear.gguf",
                                           "archs-qwen2.gguf", "archs-phi3.gguf",
                                           "archs-gemma2.gguf", "archs-gemma2-46l.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string s = param_info.param.substr(6, param_info.param.size() - 11);
                           for (char& c : s)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

}  // namespace
}  // namespace lift
