// Architecture hyper-parameters of a Llama-family model, read from GGUF metadata and checked
// against the tensor shapes, so a file whose metadata and tensors disagree is refused early.
#pragma once

#include <cstdint>
#include <string>

namespace lift {
namespace gguf {
class File;
}

struct ModelConfig {
  std::string arch;
  std::string name;
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;
  int ffn_dim = 0;
  int context_length = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;

  int kv_dim() const { return n_kv_heads * head_dim; }

  static ModelConfig from_gguf(const gguf::File& f);
};

}  // namespace lift
