#include "structured/json_schema_refs.h"

#include "structured/grammar.h"

namespace lift::structured {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(std::string_view ref, std::string_view where, std::string_view why) {
  throw GrammarError("JSON Schema: $ref \"" + std::string(ref) + "\" at " + std::string(where) +
                     ": " + std::string(why));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The fragment is a URI fragment: %XX first, then the pointer's ~1 (/) and ~0 (~).
std::string percent_decode(std::string_view s, std::string_view ref, std::string_view where) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) fail(ref, where, "bad %-escape");
    const int hi = hex_value(s[i + 1]);
    const int l = hex_value(s[i + 2]);
    if (hi < 0 || l < 0) fail(ref, where, "bad %-escape");
    out += static_cast<char>(hi * 16 + l);
    i += 2;
  }
  return out;
}

std::string pointer_token(std::string_view t, std::string_view ref, std::string_view where) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '~') {
      out += t[i];
      continue;
    }
    if (i + 1 == t.size() || (t[i + 1] != '0' && t[i + 1] != '1')) fail(ref, where, "bad ~ escape");
    out += t[i + 1] == '0' ? '~' : '/';
    ++i;
  }
  return out;
}

std::string root_id(const Json& root) {
  for (const char* key : {"$id", "id"}) {
    auto it = root.find(key);
    if (it != root.end() && it->is_string()) {
      std::string id = it->get<std::string>();
      if (!id.empty() && id.back() == '#') id.pop_back();
      return id;
    }
  }
  return {};
}

}  // namespace

ResolvedRef resolve_ref(const Json& root, std::string_view ref, std::string_view where) {
  std::string_view fragment = ref;
  const size_t hash = ref.find('#');
  if (hash == std::string_view::npos) {
    if (!ref.empty() && ref == root_id(root)) return {&root, ""};
    fail(ref, where, "only references within the schema (\"#...\") are supported");
  }
  if (hash > 0) {
    const std::string id = root_id(root);
    if (id.empty() || ref.substr(0, hash) != id) {
      fail(ref, where, "only references within the schema (\"#...\") are supported");
    }
  }
  fragment = ref.substr(hash + 1);
  const std::string decoded = percent_decode(fragment, ref, where);
  if (decoded.empty()) return {&root, ""};
  if (decoded[0] != '/') fail(ref, where, "anchors (plain-name fragments) are not supported");
  const Json* cur = &root;
  size_t pos = 1;
  while (true) {
    const size_t next = decoded.find('/', pos);
    const std::string token =
        pointer_token(std::string_view(decoded).substr(
                          pos, next == std::string::npos ? std::string::npos : next - pos),
                      ref, where);
    if (cur->is_object()) {
      auto it = cur->find(token);
      if (it == cur->end()) fail(ref, where, "no such location in the schema");
      cur = &*it;
    } else if (cur->is_array()) {
      if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos ||
          (token.size() > 1 && token[0] == '0') || token.size() > 9 ||
          std::stoul(token) >= cur->size()) {
        fail(ref, where, "no such location in the schema");
      }
      cur = &(*cur)[std::stoul(token)];
    } else {
      fail(ref, where, "no such location in the schema");
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return {cur, decoded};
}

}  // namespace lift::structured
