#include "server/access_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <fstream>

#include "util/error.h"

namespace lift {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

bool loopback_name(std::string_view host) {
  const std::string h = lower(host);
  if (h == "localhost" || ends_with(h, ".localhost")) return true;  // RFC 6761 §6.3
  in_addr a4{};
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

void check_key(const std::string& k) {
  if (k.empty()) throw Error("an API key must not be empty");
  for (unsigned char c : k) {
    if (c <= 0x20 || c == 0x7f) {
      throw Error("an API key must not contain spaces or control characters");
    }
  }
}

}  // namespace

bool is_loopback_address(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return loopback_name(host);
}

bool host_header_is_loopback(std::string_view host) {
  if (host.empty()) return false;
  if (host.front() == '[') {  // [v6]:port
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || rest.size() == 1)) return false;
    return loopback_name(host.substr(1, close - 1));
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string_view port = host.substr(colon + 1);
    if (port.empty() ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    host = host.substr(0, colon);
  }
  return loopback_name(host);
}

OriginPolicy::OriginPolicy(std::vector<std::string> allowed) : allowed_(std::move(allowed)) {
  for (auto& o : allowed_) {
    while (!o.empty() && o.back() == '/') o.pop_back();  // "http://x/" names the origin http://x
    if (o == "*") any_ = true;
  }
}

bool OriginPolicy::allows(std::string_view origin) const {
  if (any_) return true;
  return std::any_of(allowed_.begin(), allowed_.end(),
                     [&](const std::string& a) { return lower(a) == lower(origin); });
}

ApiKeys::ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {
  for (const auto& k : keys_) check_key(k);
}

bool constant_time_equals(std::string_view given, std::string_view secret) {
  if (secret.empty()) return false;
  // Every byte of `given` is compared against the secret (cycled), so the time depends on
  // the attacker's input only; the length mismatch is folded in at the end.
  volatile unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff =
        static_cast<unsigned char>(diff | (static_cast<unsigned char>(given[i]) ^
                                           static_cast<unsigned char>(secret[i % secret.size()])));
  }
  return diff == 0;
}

bool ApiKeys::accepts(const std::string* authorization) const {
  if (keys_.empty()) return true;
  if (!authorization) return false;
  std::string_view v = *authorization;
  constexpr std::string_view kBearer = "Bearer ";
  if (v.size() < kBearer.size() || lower(v.substr(0, kBearer.size())) != "bearer ") return false;
  v.remove_prefix(kBearer.size());
  bool ok = false;
  for (const auto& k : keys_) ok = constant_time_equals(v, k) || ok;  // no early exit
  return ok;
}

std::vector<std::string> gather_api_keys(const std::vector<std::string>& flags,
                                         const std::string& file, const char* env_value) {
  std::vector<std::string> keys = flags;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw Error("cannot read the API key file '" + file + "'");
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
        line.pop_back();
      size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      keys.push_back(line.substr(start));
    }
    if (keys.size() == flags.size()) throw Error("the API key file '" + file + "' holds no key");
  }
  if (env_value && *env_value) {
    std::string_view env = env_value;
    while (!env.empty()) {
      const size_t comma = env.find(',');
      const std::string_view k = env.substr(0, comma);
      if (!k.empty()) keys.emplace_back(k);
      if (comma == std::string_view::npos) break;
      env.remove_prefix(comma + 1);
    }
  }
  for (const auto& k : keys) check_key(k);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace lift
