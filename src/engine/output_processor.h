// Turns each sampled token into text a client may see: incremental, UTF-8 safe (via the
// streaming detokenizer), and holding back any tail that could still become a stop string,
// which is never returned. Decides when a sample is finished.
#pragma once

#include "engine/sequence.h"

namespace lift {

class OutputProcessor {
 public:
  OutputProcessor(const Tokenizer& tok, int context_length)
      : tok_(tok), context_length_(context_length) {}

  // Appends `token` to seq and fills `out` with what became final; sets out.finish when the
  // sample is done (EOS, stop token id, stop string, max_tokens, context full).
  void process(Sequence& seq, int32_t token, RequestOutput& out);
  // Final text of a sample ending for an outside reason (abort): flushes held-back text.
  void flush(Sequence& seq, RequestOutput& out);

 private:
  const Tokenizer& tok_;
  int context_length_;
};

}  // namespace lift
