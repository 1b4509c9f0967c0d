#include "server/json_scanner.h"

namespace lift {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

JsonScanner::Num JsonScanner::next(Num n, char c) {
  const bool d = is_digit(c);
  switch (n) {
    case Num::minus:
      return c == '0' ? Num::zero : d ? Num::digits : Num::bad;
    case Num::zero:
      return c == '.' ? Num::dot : (c == 'e' || c == 'E') ? Num::e : Num::bad;
    case Num::digits:
      return d ? Num::digits : c == '.' ? Num::dot : (c == 'e' || c == 'E') ? Num::e : Num::bad;
    case Num::dot:
      return d ? Num::frac : Num::bad;
    case Num::frac:
      return d ? Num::frac : (c == 'e' || c == 'E') ? Num::e : Num::bad;
    case Num::e:
      return d ? Num::exp : (c == '+' || c == '-') ? Num::esign : Num::bad;
    case Num::esign:
    case Num::exp:
      return d ? Num::exp : Num::bad;
    case Num::bad:
      break;
  }
  return Num::bad;
}

bool JsonScanner::accepting(Num n) {
  return n == Num::zero || n == Num::digits || n == Num::frac || n == Num::exp;
}

JsonScanner::Step JsonScanner::fail() {
  st_ = St::failed;
  return Step::error;
}

JsonScanner::Step JsonScanner::end_value() {
  if (stack_.empty()) {
    st_ = St::finished;
    return Step::done;
  }
  st_ = St::after;
  return Step::more;
}

JsonScanner::Step JsonScanner::start_value(char c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return fail();
      stack_.push_back(c);
      st_ = c == '{' ? St::obj_first : St::arr_first;
      return Step::more;
    case '"':
      st_ = St::str;
      key_ = false;
      return Step::more;
    case 't':
      lit_ = "rue";
      st_ = St::lit;
      return Step::more;
    case 'f':
      lit_ = "alse";
      st_ = St::lit;
      return Step::more;
    case 'n':
      lit_ = "ull";
      st_ = St::lit;
      return Step::more;
    case '-':
      num_ = Num::minus;
      st_ = St::num;
      return Step::more;
    default:
      if (!is_digit(c)) return fail();
      num_ = c == '0' ? Num::zero : Num::digits;
      st_ = St::num;
      return Step::more;
  }
}

JsonScanner::Step JsonScanner::push(char c) {
  switch (st_) {
    case St::value:
      if (is_ws(c) && !stack_.empty()) return Step::more;
      return start_value(c);
    case St::obj_first:
    case St::obj_key:
      if (is_ws(c)) return Step::more;
      if (c == '}' && st_ == St::obj_first) {
        stack_.pop_back();
        return end_value();
      }
      if (c != '"') return fail();
      st_ = St::str;
      key_ = true;
      return Step::more;
    case St::colon:
      if (is_ws(c)) return Step::more;
      if (c != ':') return fail();
      st_ = St::value;
      return Step::more;
    case St::arr_first:
      if (is_ws(c)) return Step::more;
      if (c == ']') {
        stack_.pop_back();
        return end_value();
      }
      return start_value(c);
    case St::after: {
      if (is_ws(c)) return Step::more;
      const bool object = stack_.back() == '{';
      if (c == ',') {
        st_ = object ? St::obj_key : St::value;
        return Step::more;
      }
      if (c != (object ? '}' : ']')) return fail();
      stack_.pop_back();
      return end_value();
    }
    case St::str:
      if (c == '"') {
        if (!key_) return end_value();
        key_ = false;
        st_ = St::colon;
        return Step::more;
      }
      if (c == '\\') {
        st_ = St::esc;
        return Step::more;
      }
      // Control characters must be escaped inside JSON strings.
      return static_cast<unsigned char>(c) < 0x20 ? fail() : Step::more;
    case St::esc:
      if (c == 'u') {
        hex_left_ = 4;
        st_ = St::hex;
        return Step::more;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
          c != 't') {
        return fail();
      }
      st_ = St::str;
      return Step::more;
    case St::hex:
      if (!is_hex(c)) return fail();
      if (--hex_left_ == 0) st_ = St::str;
      return Step::more;
    case St::lit:
      if (c != *lit_) return fail();
      return *++lit_ == '\0' ? end_value() : Step::more;
    case St::num: {
      if (const Num n = next(num_, c); n != Num::bad) {
        num_ = n;
        return Step::more;
      }
      if (!accepting(num_)) return fail();
      if (stack_.empty()) {
        st_ = St::finished;
        return Step::ended_before;
      }
      st_ = St::after;
      return push(c);  // the delimiter belongs to the container
    }
    case St::finished:
    case St::failed:
      break;
  }
  return fail();
}

bool JsonScanner::complete() const {
  return st_ == St::finished || (st_ == St::num && stack_.empty() && accepting(num_));
}

}  // namespace lift
