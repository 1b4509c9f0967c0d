// Who may use the server: API keys, browser origins (CORS) and, on a loopback address
// without keys, the Host header (DNS rebinding). Pure checks over header values, so every
// rule is tested without sockets.
//
// Why each rule exists:
//   - A web page the user visits can send requests to http://127.0.0.1:8080 from the
//     browser. Browsers mark such requests with `Origin`; lift refuses every origin not
//     allowed on purpose (--allowed-origins), so the page can neither read answers nor spend
//     compute. curl and the SDKs send no Origin and are unaffected.
//   - DNS rebinding makes a page's own host name resolve to 127.0.0.1, so the browser
//     considers the request same-origin and may omit Origin; its Host header still names the
//     page's host. Without keys on a loopback bind, only loopback host names are served.
//   - Keys are compared in time that depends only on the presented key, never on how much of
//     a real key it matches.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lift {

// Whether a listen address is a loopback one (127.0.0.0/8, ::1, localhost).
bool is_loopback_address(std::string_view host);
// Whether a Host header value ("localhost:8080", "127.0.0.1", "[::1]:80", "a.localhost")
// names a loopback host.
bool host_header_is_loopback(std::string_view host);

// --allowed-origins: exact origins ("http://localhost:3000"), or "*" for any.
class OriginPolicy {
 public:
  OriginPolicy() = default;
  explicit OriginPolicy(std::vector<std::string> allowed);
  bool allows(std::string_view origin) const;
  const std::vector<std::string>& allowed() const { return allowed_; }

 private:
  std::vector<std::string> allowed_;
  bool any_ = false;
};

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // `authorization`: the Authorization header's value, or nullptr. Checks every key, in time
  // that depends only on the presented value's length.
  bool accepts(const std::string* authorization) const;

 private:
  std::vector<std::string> keys_;
};

// Keys from every source a user may choose: --api-key flags (visible in `ps`, so the others
// exist), --api-key-file (one key a line; blank lines and lines starting with # ignored) and
// the LIFT_API_KEY environment variable (keys separated by commas). Throws lift::Error on an
// unreadable file or a key with spaces or control characters.
std::vector<std::string> gather_api_keys(const std::vector<std::string>& flags,
                                         const std::string& file, const char* env_value);

// True when both sides are equal, in time that depends only on `given`'s length.
bool constant_time_equals(std::string_view given, std::string_view secret);

}  // namespace lift
