// lift make-model: writes a random-weight Llama GGUF of any shape, for benchmarks and tests
// at realistic sizes (speed does not depend on the weights' values).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace lift::cli {

namespace {
struct MakeModelOptions {
  SyntheticSpec spec;
  std::string type = "Q8_0";
  std::string out;
};

// A ggml type name, or Q3_K_M / Q4_K_M / Q5_K_M: that K type with llama-quantize's _M mix.
void parse_type(const std::string& s, SyntheticSpec& spec) {
  const bool mix = s == "Q3_K_M" || s == "Q4_K_M" || s == "Q5_K_M";
  const std::string name = mix ? s.substr(0, 4) : s;
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q2_K,
        GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    if (ggml_type_name(t) == name) {
      spec.type = t;
      spec.k_mix = mix;
      return;
    }
  }
  throw Error("unknown weight type '" + s +
              "' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, "
              "Q6_K, IQ4_XS, Q3_K_M, Q4_K_M, Q5_K_M)");
}
}  // namespace

Runner add_make_model(CLI::App& app) {
  auto o = std::make_shared<MakeModelOptions>();
  o->spec.n_kv_heads = 0;  // as many as --heads unless given: `--heads 4` alone must work
  CLI::App* c = app.add_subcommand("make-model", "Write a random-weight Llama GGUF of any shape");
  c->add_option("-o,--output", o->out, "Output GGUF path")->required();
  c->add_option("--dim", o->spec.dim, "Embedding width");
  c->add_option("--layers", o->spec.n_layers, "Transformer blocks");
  c->add_option("--heads", o->spec.n_heads, "Attention heads");
  c->add_option("--kv-heads", o->spec.n_kv_heads, "Key/value heads (GQA); 0 = heads");
  c->add_option("--ffn", o->spec.ffn, "Feed-forward width");
  c->add_option("--type", o->type,
                "Type of every 2-D weight: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL Q2_K "
                "Q3_K Q4_K Q5_K Q6_K IQ4_XS, or llama-quantize's mixes Q3_K_M Q4_K_M Q5_K_M (Q6_K "
                "output; more bits for some attn_v/ffn_down, Q3_K_M's attn_output). Rows 256 does "
                "not tile take llama-quantize's fallbacks (Q4_K Q5_0, Q6_K Q8_0, ...)");
  c->add_flag("--tied", o->spec.tied, "Omit output.weight (tied to token_embd)");
  c->add_option("--seed", o->spec.seed, "Random seed");
  c->add_option("--residual-scale", o->spec.residual_scale,
                "Spread of attn_output and ffn_down relative to the other weights (small: later "
                "layers refine, so make-draft's drafts agree)");
  c->add_option("--context", o->spec.context_length, "Context length");
  c->add_option("--experts", o->spec.n_experts,
                "Mixture of experts (Mixtral-style): experts per layer, each of --ffn width");
  c->add_option("--experts-used", o->spec.n_experts_used, "Experts each token runs");
  c->add_option("--vocab-from", o->spec.vocab_from, "GGUF whose tokenizer metadata is copied");
  return [o] {
    if (o->spec.n_kv_heads <= 0) o->spec.n_kv_heads = o->spec.n_heads;
    parse_type(o->type, o->spec);
    write_synthetic_model(o->spec, o->out);
    std::fprintf(stderr, "lift: wrote %s\n", o->out.c_str());
    return 0;
  };
}

}  // namespace lift::cli
