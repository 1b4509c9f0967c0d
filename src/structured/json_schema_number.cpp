#include "structured/json_schema_number.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lift::structured {

namespace {

using Json = nlohmann::ordered_json;

// Normalizes sign, digits and decimal exponent (value = digits * 10^exp10) into a Decimal.
Decimal make_decimal(bool negative, std::string digits, long exp10) {
  std::string int_part, frac_part;
  if (exp10 >= 0) {
    int_part = digits + std::string(static_cast<size_t>(exp10), '0');
  } else {
    const size_t shift = static_cast<size_t>(-exp10);
    if (shift >= digits.size()) digits.insert(0, shift - digits.size() + 1, '0');
    int_part = digits.substr(0, digits.size() - shift);
    frac_part = digits.substr(digits.size() - shift);
  }
  const size_t nz = int_part.find_first_not_of('0');
  int_part = nz == std::string::npos ? "0" : int_part.substr(nz);
  const size_t last = frac_part.find_last_not_of('0');
  frac_part = last == std::string::npos ? "" : frac_part.substr(0, last + 1);
  Decimal d;
  d.negative = negative && !(int_part == "0" && frac_part.empty());
  d.int_part = int_part;
  d.frac_part = frac_part;
  return d;
}

}  // namespace

Decimal Decimal::from_json(const Json& v) {
  // dump() spells a double in its shortest round-trip form, e.g. "0.1", "1e+20", "-2.5e-07".
  const std::string s = v.dump();
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) ++i;
  std::string digits;
  long exp10 = 0;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') continue;
    digits += s[i];
    if (s.find('.') != std::string::npos && i > s.find('.')) --exp10;
  }
  if (i < s.size()) exp10 += std::stol(s.substr(i + 1));
  return make_decimal(negative, digits, exp10);
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int mag = 0;  // |a| vs |b|
  if (a.int_part.size() != b.int_part.size()) {
    mag = a.int_part.size() < b.int_part.size() ? -1 : 1;
  } else if (int c = a.int_part.compare(b.int_part); c != 0) {
    mag = c < 0 ? -1 : 1;
  } else if (int f = a.frac_part.compare(b.frac_part); f != 0) {
    mag = f < 0 ? -1 : 1;  // no trailing zeros: lexicographic order is numeric order
  }
  return a.negative ? -mag : mag;
}

void NumberBounds::add_lo(const Decimal& d, bool exclusive) {
  const int c = lo ? compare(d, *lo) : 1;
  if (c > 0 || (c == 0 && exclusive)) {
    lo = d;
    lo_exclusive = exclusive;
  }
}

void NumberBounds::add_hi(const Decimal& d, bool exclusive) {
  const int c = hi ? compare(d, *hi) : -1;
  if (c < 0 || (c == 0 && exclusive)) {
    hi = d;
    hi_exclusive = exclusive;
  }
}

namespace {

// Builds the expressions over unsigned magnitudes: an integer part (0|[1-9][0-9]*) and, unless
// `integer`, an optional fraction (\.[0-9]+).
class MagnitudeBuilder {
 public:
  MagnitudeBuilder(GrammarBuilder& b, bool integer)
      : b_(b), integer_(integer), digit_(b.byte_range('0', '9')) {}

  ExprId digits(uint32_t min, uint32_t max) { return b_.repeat(digit_, min, max); }
  ExprId int_any() {
    return b_.alt({b_.literal("0"), b_.seq({b_.byte_range('1', '9'), digits(0, kUnbounded)})});
  }
  ExprId frac_any() {
    return integer_ ? b_.empty() : b_.opt(b_.seq({b_.literal("."), digits(1, kUnbounded)}));
  }
  ExprId all() { return b_.seq({int_any(), frac_any()}); }

  ExprId ge(const Decimal& d) {
    return b_.alt({b_.seq({int_gt(d.int_part), frac_any()}),
                   b_.seq({b_.literal(d.int_part), frac_ge(d.frac_part)})});
  }
  ExprId gt(const Decimal& d) {
    return b_.alt({b_.seq({int_gt(d.int_part), frac_any()}),
                   b_.seq({b_.literal(d.int_part), frac_gt(d.frac_part)})});
  }
  ExprId le(const Decimal& d) {
    return b_.alt({b_.seq({int_lt(d.int_part), frac_any()}),
                   b_.seq({b_.literal(d.int_part), frac_le(d.frac_part)})});
  }
  ExprId lt(const Decimal& d) {
    return b_.alt({b_.seq({int_lt(d.int_part), frac_any()}),
                   b_.seq({b_.literal(d.int_part), frac_lt(d.frac_part)})});
  }

 private:
  ExprId digit_range(int lo, int hi) {
    if (lo > hi) return b_.nothing();
    return b_.byte_range(static_cast<uint8_t>('0' + lo), static_cast<uint8_t>('0' + hi));
  }
  static int at(const std::string& s, size_t k) { return s[k] - '0'; }

  // Integer parts (no leading zeros) above / below n (no leading zeros).
  ExprId int_gt(const std::string& n) {
    const uint32_t len = static_cast<uint32_t>(n.size());
    std::vector<ExprId> alts{b_.seq({b_.byte_range('1', '9'), digits(len, kUnbounded)})};
    for (size_t k = 0; k < n.size(); ++k) {
      alts.push_back(
          b_.seq({b_.literal(n.substr(0, k)), digit_range(at(n, k) + 1, 9),
                  digits(len - static_cast<uint32_t>(k) - 1, len - static_cast<uint32_t>(k) - 1)}));
    }
    return b_.alt(alts);
  }
  ExprId int_lt(const std::string& n) {
    if (n == "0") return b_.nothing();
    const uint32_t len = static_cast<uint32_t>(n.size());
    std::vector<ExprId> alts;
    if (len >= 2) {
      alts.push_back(b_.literal("0"));
      alts.push_back(b_.seq({b_.byte_range('1', '9'), digits(0, len - 2)}));
    }
    for (size_t k = 0; k < n.size(); ++k) {
      const int lo = (k == 0 && len > 1) ? 1 : 0;
      alts.push_back(
          b_.seq({b_.literal(n.substr(0, k)), digit_range(lo, at(n, k) - 1),
                  digits(len - static_cast<uint32_t>(k) - 1, len - static_cast<uint32_t>(k) - 1)}));
    }
    return b_.alt(alts);
  }

  // Fraction digit strings f (one or more digits) with 0.f above / below 0.frac, frac not
  // ending in zero; `strict` leaves equality out.
  ExprId frac_digits_above(const std::string& frac, bool strict) {
    std::vector<ExprId> alts;
    for (size_t k = 0; k < frac.size(); ++k) {
      alts.push_back(b_.seq(
          {b_.literal(frac.substr(0, k)), digit_range(at(frac, k) + 1, 9), digits(0, kUnbounded)}));
    }
    const ExprId rest =
        strict ? b_.seq({digits(0, kUnbounded), b_.byte_range('1', '9'), digits(0, kUnbounded)})
               : digits(0, kUnbounded);
    alts.push_back(b_.seq({b_.literal(frac), rest}));
    return b_.alt(alts);
  }
  ExprId frac_digits_below(const std::string& frac, bool strict) {
    std::vector<ExprId> alts;
    for (size_t k = 0; k < frac.size(); ++k) {
      alts.push_back(b_.seq(
          {b_.literal(frac.substr(0, k)), digit_range(0, at(frac, k) - 1), digits(0, kUnbounded)}));
      if (k > 0) alts.push_back(b_.literal(frac.substr(0, k)));  // a proper prefix is smaller
    }
    if (!strict) alts.push_back(b_.seq({b_.literal(frac), b_.star(b_.literal("0"))}));
    return b_.alt(alts);
  }

  // The fraction part (possibly absent) compared with 0.frac.
  ExprId frac_ge(const std::string& frac) {
    if (frac.empty()) return frac_any();
    if (integer_) return b_.nothing();
    return b_.seq({b_.literal("."), frac_digits_above(frac, false)});
  }
  ExprId frac_gt(const std::string& frac) {
    if (integer_) return b_.nothing();
    if (frac.empty()) {
      return b_.seq(
          {b_.literal("."), digits(0, kUnbounded), b_.byte_range('1', '9'), digits(0, kUnbounded)});
    }
    return b_.seq({b_.literal("."), frac_digits_above(frac, true)});
  }
  ExprId frac_le(const std::string& frac) {
    if (integer_) return b_.empty();
    if (frac.empty()) return b_.opt(b_.seq({b_.literal("."), b_.plus(b_.literal("0"))}));
    return b_.opt(b_.seq({b_.literal("."), frac_digits_below(frac, false)}));
  }
  ExprId frac_lt(const std::string& frac) {
    if (frac.empty()) return b_.nothing();
    if (integer_) return b_.empty();
    return b_.opt(b_.seq({b_.literal("."), frac_digits_below(frac, true)}));
  }

  GrammarBuilder& b_;
  bool integer_;
  ExprId digit_;
};

}  // namespace

ExprId json_number(GrammarBuilder& b, const NumberBounds& bounds, bool integer) {
  MagnitudeBuilder m(b, integer);
  const ExprId minus = b.literal("-");
  if (!bounds.bounded()) {
    const ExprId exponent = integer ? b.empty()
                                    : b.opt(b.seq({b.byte_set([] {
                                                     ByteSet s;
                                                     s.set('e');
                                                     s.set('E');
                                                     return s;
                                                   }()),
                                                   b.opt(b.byte_set([] {
                                                     ByteSet s;
                                                     s.set('+');
                                                     s.set('-');
                                                     return s;
                                                   }())),
                                                   m.digits(1, kUnbounded)}));
    return b.seq({b.opt(minus), m.all(), exponent});
  }
  if (bounds.lo && bounds.hi) {
    const int c = compare(*bounds.lo, *bounds.hi);
    if (c > 0 || (c == 0 && (bounds.lo_exclusive || bounds.hi_exclusive))) return b.nothing();
  }
  const Decimal zero;
  ExprId above = b.seq({b.opt(minus), m.all()});
  if (bounds.lo) {
    const Decimal& lo = *bounds.lo;
    Decimal mag = lo;
    mag.negative = false;
    if (!lo.negative) {
      above = bounds.lo_exclusive
                  ? m.gt(mag)
                  : b.alt({m.ge(mag), lo == zero ? b.seq({minus, m.le(zero)}) : b.nothing()});
    } else {
      above = b.alt({m.all(), b.seq({minus, bounds.lo_exclusive ? m.lt(mag) : m.le(mag)})});
    }
  }
  ExprId below = b.seq({b.opt(minus), m.all()});
  if (bounds.hi) {
    const Decimal& hi = *bounds.hi;
    Decimal mag = hi;
    mag.negative = false;
    if (!hi.negative) {
      // Every negative number (and -0) lies below a positive bound; below 0 only "-" nonzero.
      const ExprId negatives = bounds.hi_exclusive && hi == zero ? m.gt(zero) : m.all();
      below = b.alt({bounds.hi_exclusive ? m.lt(mag) : m.le(mag), b.seq({minus, negatives})});
    } else {
      below = b.seq({minus, bounds.hi_exclusive ? m.gt(mag) : m.ge(mag)});
    }
  }
  if (!bounds.lo) return below;
  if (!bounds.hi) return above;
  return b.intersect(above, below);
}

namespace {

// |d| as an integer, if it is one below 10^15 (exact in int64 with room to add m).
std::optional<int64_t> small_integer(const Decimal& d) {
  if (!d.is_integer() || d.int_part.size() > 15) return std::nullopt;
  const int64_t v = std::stoll(d.int_part);
  return d.negative ? -v : v;
}

// floor / ceil of a / m for m > 0.
int64_t floor_div(int64_t a, int64_t m) { return a >= 0 ? a / m : -((-a + m - 1) / m); }
int64_t ceil_div(int64_t a, int64_t m) { return -floor_div(-a, m); }

// The smallest integer within a lower bound (lo, exclusive or not) and the largest within an
// upper one, if they are small integers; a fractional bound rounds inward.
std::optional<int64_t> int_lo(const Decimal& lo, bool exclusive) {
  Decimal whole = lo;
  whole.frac_part.clear();
  auto v = small_integer(whole);
  if (!v) return std::nullopt;
  // Truncation moved a fraction towards zero: up for negatives, down for positives.
  if (!lo.is_integer()) return lo.negative ? *v : *v + 1;
  return exclusive ? *v + 1 : *v;
}
std::optional<int64_t> int_hi(const Decimal& hi, bool exclusive) {
  Decimal negated = hi;  // the largest integer up to hi is minus the smallest from -hi on
  negated.negative = !hi.negative && hi != Decimal{};
  const auto v = int_lo(negated, exclusive);
  return v ? std::optional<int64_t>(-*v) : std::nullopt;
}

constexpr int64_t kMaxRemainders = 1000;  // rules of a digit-by-digit multiple
constexpr int64_t kMaxListed = 4096;      // multiples spelled out between two bounds

// The multiples k m for k in [k0, k1] as literals ("-0" beside "0", as for integers).
ExprId listed(GrammarBuilder& b, int64_t m, int64_t k0, int64_t k1) {
  std::vector<ExprId> alts;
  for (int64_t k = k0; k <= k1; ++k) {
    alts.push_back(b.literal(std::to_string(k * m)));
    if (k == 0) alts.push_back(b.literal("-0"));
  }
  return b.alt(alts);
}

ExprId digit(GrammarBuilder& b, int d) {
  return b.literal(std::string(1, static_cast<char>('0' + d)));
}

// Nonnegative multiples of m in decimal (positive only: without "0"): rule r reads the digits
// after a prefix whose value is r mod m, and may end where r is 0.
ExprId digit_multiples(GrammarBuilder& b, int64_t m, bool positive_only) {
  std::vector<RuleId> rem(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    rem[static_cast<size_t>(r)] =
        b.declare("{multiple of " + std::to_string(m) + ", remainder " + std::to_string(r) + "}");
  }
  for (int64_t r = 0; r < m; ++r) {
    std::vector<ExprId> alts;
    for (int d = 0; d <= 9; ++d) {
      const auto next = static_cast<size_t>((10 * r + d) % m);
      alts.push_back(b.seq({digit(b, d), b.call(rem[next])}));
    }
    if (r == 0) alts.push_back(b.empty());
    b.define(rem[static_cast<size_t>(r)], b.alt(alts));
  }
  std::vector<ExprId> lead;
  if (!positive_only) lead.push_back(b.literal("0"));
  for (int d = 1; d <= 9; ++d) {
    lead.push_back(b.seq({digit(b, d), b.call(rem[static_cast<size_t>(d % m)])}));
  }
  return b.alt(lead);
}

std::optional<ExprId> integer_multiples(GrammarBuilder& b, const NumberBounds& bounds, int64_t m,
                                        std::string& why) {
  const std::string ms = std::to_string(m);
  std::optional<int64_t> lo, hi;
  if (bounds.lo && !(lo = int_lo(*bounds.lo, bounds.lo_exclusive))) {
    why = "multipleOf " + ms + " with a lower bound of magnitude 10^15 or more";
    return std::nullopt;
  }
  if (bounds.hi && !(hi = int_hi(*bounds.hi, bounds.hi_exclusive))) {
    why = "multipleOf " + ms + " with an upper bound of magnitude 10^15 or more";
    return std::nullopt;
  }
  if (lo && hi) {
    const int64_t k0 = ceil_div(*lo, m), k1 = floor_div(*hi, m);
    if (k1 < k0) return b.nothing();
    if (k1 - k0 + 1 > kMaxListed) {
      why = "multipleOf " + ms + " between bounds that hold more than " +
            std::to_string(kMaxListed) + " multiples";
      return std::nullopt;
    }
    return listed(b, m, k0, k1);
  }
  if (m > kMaxRemainders) {
    why = "multipleOf " + ms + " (at most " + std::to_string(kMaxRemainders) +
          " without both bounds)";
    return std::nullopt;
  }
  const ExprId minus = b.literal("-");
  if (!lo && !hi) return b.seq({b.opt(minus), digit_multiples(b, m, false)});
  // One bound: the unbounded side by digits, the multiples between the bound and zero listed.
  // A bound past the first multiple on its side of zero would need the smaller multiples taken
  // out of the digit rules, which a difference of rules cannot do: refused.
  const std::string listed_max = std::to_string(kMaxListed);
  const auto too_far = [&](const std::string& side) {
    why = "multipleOf " + ms + " with " + side;
    return std::nullopt;
  };
  if (lo) {
    const int64_t k = ceil_div(*lo, m);  // the first multiple is k m
    if (k == 1) return digit_multiples(b, m, true);
    if (k > 1) return too_far("a positive lower bound past its first multiple");
    if (-k > kMaxListed)
      return too_far("a lower bound more than " + listed_max + " multiples below zero");
    std::vector<ExprId> alts = {digit_multiples(b, m, false), b.literal("-0")};
    if (k < 0) alts.push_back(listed(b, m, k, -1));
    return b.alt(alts);
  }
  const int64_t k = floor_div(*hi, m);  // the last multiple is k m
  if (k == -1) return b.seq({minus, digit_multiples(b, m, true)});
  if (k < -1) return too_far("a negative upper bound past its first multiple");
  if (k > kMaxListed)
    return too_far("an upper bound more than " + listed_max + " multiples above zero");
  std::vector<ExprId> alts = {b.seq({minus, digit_multiples(b, m, true)}), b.literal("0"),
                              b.literal("-0")};
  if (k > 0) alts.push_back(listed(b, m, 1, k));
  return b.alt(alts);
}

}  // namespace

std::optional<ExprId> json_multiple(GrammarBuilder& b, const NumberBounds& bounds, bool integer,
                                    const Decimal& m, std::string& why) {
  if (m.is_integer()) {
    if (m.int_part == "1") return json_number(b, bounds, true);
    const auto v = small_integer(m);
    if (!v) {
      why = "multipleOf " + m.int_part + " (at most 10^15)";
      return std::nullopt;
    }
    return integer_multiples(b, bounds, *v, why);
  }
  const std::string& f = m.frac_part;
  // Integers that are multiples of m = p / q (in lowest terms, q a power of ten) are those of
  // p: an integer v is k p / q exactly when p divides v q, so p divides v.
  if (integer && m.int_part.size() + f.size() <= 18) {
    int64_t p = std::stoll(m.int_part + f), q = 1;
    for (size_t i = 0; i < f.size(); ++i) q *= 10;
    for (const int64_t prime : {2, 5}) {
      while (q % prime == 0 && p % prime == 0) p /= prime, q /= prime;
    }
    if (p == 1) return json_number(b, bounds, true);
    return integer_multiples(b, bounds, p, why);
  }
  // 10^-k: numbers of at most k fraction digits.
  if (m.int_part == "0" && f.find_first_not_of('0') == f.size() - 1 && f.back() == '1') {
    MagnitudeBuilder mb(b, true);
    const ExprId fraction = b.opt(b.seq(
        {b.literal("."), b.repeat(b.byte_range('0', '9'), 1, static_cast<uint32_t>(f.size()))}));
    const ExprId spelled = b.seq({b.opt(b.literal("-")), mb.all(), fraction});
    return b.intersect(json_number(b, bounds, false), spelled);
  }
  why = "multipleOf " + std::string(m.negative ? "-" : "") + m.int_part + "." + f +
        " (integers and powers of ten below one, 0.1, 0.01, ..., are supported)";
  return std::nullopt;
}

}  // namespace lift::structured
