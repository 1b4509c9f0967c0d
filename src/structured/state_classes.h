// Which DFA states no token can tell apart, so that the matcher walks the vocabulary trie once
// per class instead of once per state. A state's cache entry depends only on which byte
// strings no longer than the longest token it consumes, and after which of them its rule may
// end; a long counted string (`[^"]{0,1000}`) has hundreds of positions that agree on all of
// those and differ only beyond the longest token.
#pragma once

#include <cstdint>
#include <vector>

#include "structured/grammar_data.h"

namespace lift::structured {

// class_of[s] for every state with reach[s] set (others -1): states of one class accept the
// same byte strings of length <= `depth` and may end their rule after the same ones. Two
// states are put together only when they belong to the same rule and make the same calls
// (same rule, same return state), so what a call consumes cannot tell them apart either.
std::vector<int32_t> depth_bounded_classes(const Grammar::Data& d,
                                           const std::vector<uint8_t>& reach, size_t depth);

}  // namespace lift::structured
