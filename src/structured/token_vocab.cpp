#include "structured/token_vocab.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift::structured {

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens)
    : bytes_(std::move(token_bytes)), is_end_(bytes_.size(), false) {
  for (int32_t t : end_tokens) {
    if (t < 0 || static_cast<size_t>(t) >= bytes_.size())
      throw Error("constraint vocabulary: end token " + std::to_string(t) + " out of range");
    if (!is_end_[static_cast<size_t>(t)]) end_tokens_.push_back(t);
    is_end_[static_cast<size_t>(t)] = true;
  }
  // Tokens sorted by their bytes: a prefix comes before its extensions, so the trie is built
  // in one pass, in depth-first order.
  std::vector<int32_t> order;
  for (size_t t = 0; t < bytes_.size(); ++t)
    if (!bytes_[t].empty() && !is_end_[t]) order.push_back(static_cast<int32_t>(t));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] ||
           (bytes_[static_cast<size_t>(a)] == bytes_[static_cast<size_t>(b)] && a < b);
  });
  Trie& tr = trie_;
  auto add_node = [&](uint8_t byte, uint16_t depth) {
    tr.byte.push_back(byte);
    tr.depth.push_back(depth);
    tr.subtree_end.push_back(0);
    tr.token_begin.push_back(static_cast<uint32_t>(tr.node_tokens.size()));
    return static_cast<uint32_t>(tr.byte.size() - 1);
  };
  std::vector<uint32_t> path{add_node(0, 0)};  // path[d]: node at depth d on the current path
  std::string prev;
  for (int32_t t : order) {
    const std::string& s = bytes_[static_cast<size_t>(t)];
    if (s.size() > UINT16_MAX)
      throw Error("constraint vocabulary: token " + std::to_string(t) + " too long");
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (path.size() > common + 1) {
      tr.subtree_end[path.back()] = static_cast<uint32_t>(tr.byte.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d)
      path.push_back(add_node(static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1)));
    tr.node_tokens.push_back(t);
    prev = s;
  }
  while (!path.empty()) {
    tr.subtree_end[path.back()] = static_cast<uint32_t>(tr.byte.size());
    path.pop_back();
  }
  // token_begin[i] was the count before node i existed; tokens of node i were appended while
  // it was the path's end, i.e. before node i + 1 was added.
  tr.token_begin.push_back(static_cast<uint32_t>(tr.node_tokens.size()));

  const size_t n = tr.size();
  tr.height.assign(n, 0);
  tr.plain_below.assign(n, 1);
  auto plain = [](uint8_t b) { return b >= 0x20 && b <= 0x7E && b != '"' && b != '\\'; };
  for (size_t i = n; i-- > 0;)
    for (uint32_t c = static_cast<uint32_t>(i + 1); c < tr.subtree_end[i]; c = tr.subtree_end[c]) {
      tr.height[i] = std::max<uint16_t>(tr.height[i], static_cast<uint16_t>(tr.height[c] + 1));
      if (!plain(tr.byte[c]) || !tr.plain_below[c]) tr.plain_below[i] = 0;
    }
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(
    const Tokenizer& tok, const std::vector<int32_t>& extra_end_tokens) {
  const Vocab& v = tok.vocab();
  std::vector<std::string> bytes(static_cast<size_t>(v.size()));
  for (int32_t t = 0; t < v.size(); ++t) {
    TokenType type = v.type(t);
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused)
      continue;
    bytes[static_cast<size_t>(t)] = std::string(tok.token_to_piece(t));
  }
  std::vector<int32_t> ends = extra_end_tokens;
  if (v.eos_id() >= 0) ends.push_back(v.eos_id());
  return std::make_shared<const TokenVocab>(std::move(bytes), std::move(ends));
}

}  // namespace lift::structured
