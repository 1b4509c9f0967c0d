#include "structured/json_schema_format.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "structured/regex.h"

namespace lift::structured {

namespace {

// RFC 3339 full-date: months 01-12, days checked against the month; 29 February only in leap
// years (divisible by 4, centuries only when divisible by 400).
constexpr std::string_view kDate =
    "(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|"
    "(?:0[13578]|1[02])-31)|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|"
    "(?:[02468][048]|[13579][26])00)-02-29)";
// RFC 3339 full-time: an offset is required; no leap second (narrower).
constexpr std::string_view kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-"
    "9])";

// RFC 3986 pieces.
constexpr std::string_view kPct = "%[0-9A-Fa-f]{2}";
constexpr std::string_view kUnreservedSub = "A-Za-z0-9\\-._~!$&'()*+,;=";

std::string uri_pieces_pchar() {
  return "(?:[" + std::string(kUnreservedSub) + ":@]|" + std::string(kPct) + ")";
}

// authority = [userinfo "@"] reg-name [":" port] (IP literals in brackets left out).
std::string uri_authority() {
  const std::string user = "(?:[" + std::string(kUnreservedSub) + ":]|" + std::string(kPct) + ")*";
  const std::string host = "(?:[" + std::string(kUnreservedSub) + "]|" + std::string(kPct) + ")*";
  return "(?:" + user + "@)?" + host + "(?::[0-9]*)?";
}

std::string uri_tail() {  // [ "?" query ] [ "#" fragment ]
  const std::string q = "(?:" + uri_pieces_pchar() + "|[/?])*";
  return "(?:\\?" + q + ")?(?:#" + q + ")?";
}

std::string uri() {
  const std::string pchar = uri_pieces_pchar();
  const std::string segment = pchar + "*";
  const std::string segment_nz = pchar + "+";
  const std::string hier = "(?://" + uri_authority() + "(?:/" + segment + ")*|/(?:" + segment_nz +
                           "(?:/" + segment + ")*)?|" + segment_nz + "(?:/" + segment + ")*|)";
  return "[A-Za-z][A-Za-z0-9+.\\-]*:" + hier + uri_tail();
}

std::string uri_reference() {
  const std::string pchar = uri_pieces_pchar();
  const std::string segment = pchar + "*";
  const std::string nc = "(?:[" + std::string(kUnreservedSub) + "@]|" + std::string(kPct) + ")+";
  const std::string relative = "(?://" + uri_authority() + "(?:/" + segment + ")*|/(?:" + pchar +
                               "+(?:/" + segment + ")*)?|" + nc + "(?:/" + segment + ")*|)";
  return "(?:" + uri() + "|" + relative + uri_tail() + ")";
}

constexpr std::string_view kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";

std::string ipv4() {
  const std::string o(kOctet);
  return o + "\\." + o + "\\." + o + "\\." + o;
}

// At most 4 labels of at most 62 characters (under the 253 limit), the last starting with a
// letter so it is never all digits.
constexpr std::string_view kHostname =
    "(?:[A-Za-z0-9](?:[A-Za-z0-9\\-]{0,60}[A-Za-z0-9])?\\.){0,3}"
    "[A-Za-z](?:[A-Za-z0-9\\-]{0,60}[A-Za-z0-9])?";

// dot-atom local part @ a domain of two or more labels.
constexpr std::string_view kEmail =
    "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+)*@"
    "[A-Za-z0-9](?:[A-Za-z0-9\\-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9\\-]{0,61}"
    "[A-Za-z0-9])?)+";

constexpr std::string_view kUuid =
    "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}";

// RFC 4291 section 2.2 text forms (RFC 3986's IPv6address): eight groups, or fewer around one
// "::", the last 32 bits optionally as IPv4. No zone index (narrower).
std::string ipv6() {
  // Appended piece by piece: g++ 12 warns falsely (-Wrestrict) on literal + string chains.
  const std::string h = "[0-9A-Fa-f]{1,4}";
  std::string ls32 = "(?:";
  ls32.append(h).append(":").append(h).append("|").append(ipv4()).append(")");
  auto groups = [&](int n) {
    std::string g = "(?:";
    g.append(h).append(":){").append(std::to_string(n)).append("}");
    return g;
  };
  // Up to n groups before the "::": [ *(n-1)( h16 ":" ) h16 ].
  auto head = [&](int n) {
    std::string g;
    if (n > 0) g.append("(?:(?:").append(h).append(":){0,").append(std::to_string(n - 1));
    if (n > 0) g.append("}").append(h).append(")?");
    return g;
  };
  std::string re = "(?:";
  re.append(groups(6)).append(ls32).append("|::").append(groups(5)).append(ls32);
  for (int n = 1; n <= 4; ++n)
    re.append("|").append(head(n)).append("::").append(groups(4 - n)).append(ls32);
  re.append("|").append(head(5)).append("::").append(h).append("|").append(head(6)).append("::)");
  return re;
}

// RFC 3339 appendix A duration: P with date parts, a time part, or weeks; no fractions.
constexpr std::string_view kDuration =
    "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)";

// RFC 6901: "/"-prefixed reference tokens, "~" only as ~0 or ~1.
constexpr std::string_view kJsonPointer = "(?:/(?:[^~/]|~[01])*)*";

// Formats the JSON Schema specification defines. Format is an annotation unless a validator
// asserts it, and validators assert exactly these; any other name is left unchecked, as they
// leave it. A defined one lift cannot express is refused rather than silently unchecked.
constexpr std::string_view kDefinedFormats[] = {
    "date-time", "date",          "time", "duration",     "email",        "idn-email",
    "hostname",  "idn-hostname",  "ipv4", "ipv6",         "uri",          "uri-reference",
    "iri",       "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer",
    "regex"};

std::string format_regex(std::string_view format) {
  if (format == "date") return std::string(kDate);
  if (format == "time") return std::string(kTime);
  if (format == "date-time") return std::string(kDate) + "T" + std::string(kTime);
  if (format == "email") return std::string(kEmail);
  if (format == "uuid") return std::string(kUuid);
  if (format == "uri") return uri();
  if (format == "uri-reference") return uri_reference();
  if (format == "ipv4") return ipv4();
  if (format == "ipv6") return ipv6();
  if (format == "hostname") return std::string(kHostname);
  if (format == "duration") return std::string(kDuration);
  if (format == "json-pointer") return std::string(kJsonPointer);
  return {};
}

}  // namespace

std::optional<ExprId> json_string_format(GrammarBuilder& b, std::string_view format,
                                         std::string_view pointer) {
  const std::string re = format_regex(format);
  if (re.empty()) {
    if (std::find(std::begin(kDefinedFormats), std::end(kDefinedFormats), format) ==
        std::end(kDefinedFormats)) {
      return std::nullopt;
    }
    throw GrammarError("JSON Schema: format \"" + std::string(format) + "\" at " +
                       std::string(pointer) + " is not supported");
  }
  RegexOptions o;
  o.anchored = true;
  o.json_string = true;
  return compile_regex(re, b, o);
}

}  // namespace lift::structured
