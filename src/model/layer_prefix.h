// A model cut down to its first layers: what `lift make-draft` writes, a draft model for
// speculative decoding that shares the target's vocabulary, embeddings and output head
// (engine/draft_proposer.h). For random-weight targets it is the only kind of draft that agrees
// with them at all; for trained ones a cheap one that agrees often.
#pragma once

#include <string>

namespace lift {

// Writes `out`: the GGUF `in` with <arch>.block_count = n_layers, every tensor outside the
// blocks (token_embd, output_norm, output, rope_freqs, ...) and blk.0 .. blk.<n_layers - 1>
// copied byte for byte, whatever their types; metadata in the same order, per-layer arrays
// (<arch>.* arrays with one entry per block) cut to n_layers. Throws lift::Error naming the
// problem: n_layers outside 1 .. block_count, no architecture or block count, a kept block
// without tensors (a vocabulary-only file), `out` naming the input file, an I/O failure.
void write_layer_prefix(const std::string& in, const std::string& out, int n_layers);

}  // namespace lift
