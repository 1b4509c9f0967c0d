// lift make-draft: a draft model for speculative decoding cut from a target model: its first
// layers, with its vocabulary, embeddings and output head (model/layer_prefix.h).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/layer_prefix.h"

namespace lift::cli {

namespace {
struct MakeDraftOptions {
  std::string model;
  std::string out;
  int layers = 1;
};
}  // namespace

Runner add_make_draft(CLI::App& app) {
  auto o = std::make_shared<MakeDraftOptions>();
  CLI::App* c = app.add_subcommand(
      "make-draft",
      "Write a draft model for --spec draft: a GGUF's first layers, its vocabulary, "
      "embeddings and output copied byte for byte");
  c->add_option("-m,--model", o->model, "Target GGUF")->required();
  c->add_option("-o,--output", o->out, "Output GGUF path")->required();
  c->add_option("--layers", o->layers, "Transformer blocks to keep (the first N)")->required();
  return [o] {
    write_layer_prefix(o->model, o->out, o->layers);
    std::fprintf(stderr, "lift: wrote %s (%d layers of %s)\n", o->out.c_str(), o->layers,
                 o->model.c_str());
    return 0;
  };
}

}  // namespace lift::cli
