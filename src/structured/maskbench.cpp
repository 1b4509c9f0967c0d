#include "structured/maskbench.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <set>
#include <span>
#include <sstream>

#include "structured/matcher.h"
#include "structured/token_vocab.h"
#include "template/py_text.h"  // append_json_string: Python json.dumps(ensure_ascii=False) strings
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift::structured::maskbench {

namespace {

using Clock = std::chrono::steady_clock;
int64_t ns_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

std::string first_line(std::string_view s) { return std::string(s.substr(0, s.find('\n'))); }

// A string as a JSON literal, for messages: shows controls and partial UTF-8 of a token.
std::string as_literal(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

// ---- Python's json.dumps ---------------------------------------------------------------------

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  // Shortest round-trip digits, as Python's repr picks them (the nearest of the shortest).
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // "-d.ddde+XX"
  const size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  int exp = 0;
  const std::string_view e_text = sci.substr(e_pos + 1);
  std::from_chars(e_text.data() + (e_text[0] == '+' ? 1 : 0), e_text.data() + e_text.size(), exp);

  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_digits = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_digits) {
    return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

namespace {

// Writes, while a document streams through nlohmann's SAX parser, the Python text of the
// values it is told to capture: the whole document, or each /tests/N/data of a MaskBench file.
// Streaming is what keeps a number's original text, so integers past 64 bits stay exact.
class PythonWriter : public nlohmann::json_sax<nlohmann::json> {
 public:
  enum class Capture { root, test_data };
  explicit PythonWriter(Capture what) : what_(what) {}

  // The captured texts; for test_data, indexed by N (empty where a test has no data).
  std::vector<std::string>& texts() { return texts_; }

  bool null() override { return scalar("null"); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return scalar(std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(std::to_string(v)); }
  bool number_float(number_float_t v, const string_t& text) override {
    // Python reads a number without fraction or exponent as an int of any size.
    const bool integral = text.find_first_of(".eE") == std::string::npos;
    return scalar(integral ? text : python_float_repr(v));
  }
  bool string(string_t& v) override {
    begin_value();
    if (out_) tmpl::append_json_string(*out_, v);
    return end_value();
  }
  bool binary(binary_t&) override { return false; }  // JSON text has none
  bool start_object(size_t) override { return open(true, "{"); }
  bool end_object() override { return close("}"); }
  bool start_array(size_t) override { return open(false, "["); }
  bool end_array() override { return close("]"); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (out_ && frames_.size() > depth_) {
      if (!f.keys.insert(k).second) {
        throw Error("duplicate key " + as_literal(k) + " in a test's data");
      }
      if (f.count++ > 0) *out_ += ", ";
      tmpl::append_json_string(*out_, k);
      *out_ += ": ";
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) override {
    throw Error(std::string("not JSON: ") + e.what());
  }

 private:
  struct Frame {
    bool object = false;
    std::string key;             // objects: the key of the value being read
    size_t count = 0;            // values read so far
    std::set<std::string> keys;  // inside captured objects only
  };

  bool at_capture_point() const {
    if (what_ == Capture::root) return frames_.empty();
    return frames_.size() == 3 && frames_[0].object && frames_[0].key == "tests" &&
           !frames_[1].object && frames_[2].object && frames_[2].key == "data";
  }
  void begin_value() {
    if (!out_ && at_capture_point()) {
      const size_t n = what_ == Capture::root ? 0 : frames_[1].count;
      if (texts_.size() <= n) texts_.resize(n + 1);
      out_ = &texts_[n];
      depth_ = frames_.size();
    }
    if (out_ && frames_.size() > depth_ && !frames_.back().object && frames_.back().count > 0) {
      *out_ += ", ";
    }
  }
  bool end_value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().count;
    if (out_ && frames_.size() == depth_) out_ = nullptr;
    return true;
  }
  bool scalar(const std::string& text) {
    begin_value();
    if (out_) *out_ += text;
    return end_value();
  }
  bool open(bool object, const char* bracket) {
    begin_value();
    if (out_) *out_ += bracket;
    frames_.push_back(Frame{object, {}, 0, {}});
    return true;
  }
  bool close(const char* bracket) {
    frames_.pop_back();
    if (out_) *out_ += bracket;
    return end_value();
  }

  Capture what_;
  std::vector<Frame> frames_;  // the containers open around the current event
  std::vector<std::string> texts_;
  std::string* out_ = nullptr;  // the capture being written, if any
  size_t depth_ = 0;            // frames_.size() where the capture started
};

std::vector<std::string> python_texts(std::string_view text, PythonWriter::Capture what) {
  PythonWriter w(what);
  nlohmann::json::sax_parse(text, &w);
  return std::move(w.texts());
}

}  // namespace

std::string python_dumps(std::string_view json_text) {
  return python_texts(json_text, PythonWriter::Capture::root).at(0);
}

// ---- files -----------------------------------------------------------------------------------

BenchFile parse_file(std::string_view text, const std::string& name) {
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(name + ": not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("schema")) throw Error(name + ": no \"schema\"");
  BenchFile f;
  f.name = name;
  f.schema = std::move(doc["schema"]);
  if (!doc.contains("tests")) return f;
  const nlohmann::ordered_json& tests = doc["tests"];
  if (!tests.is_array()) throw Error(name + ": \"tests\" is not an array");
  std::vector<std::string> texts;
  try {
    texts = python_texts(text, PythonWriter::Capture::test_data);
  } catch (const Error& e) {
    throw Error(name + ": " + e.what());
  }
  for (size_t i = 0; i < tests.size(); ++i) {
    const nlohmann::ordered_json& t = tests[i];
    const std::string where = name + ": test #" + std::to_string(i);
    if (!t.is_object() || !t.contains("data") || i >= texts.size()) {
      throw Error(where + " has no \"data\"");
    }
    if (!t.contains("valid") || !t["valid"].is_boolean()) {
      throw Error(where + " has no boolean \"valid\"");
    }
    Instance inst;
    inst.valid = t["valid"].get<bool>();
    if (t.contains("description") && t["description"].is_string()) {
      inst.description = t["description"].get<std::string>();
    }
    inst.text = std::move(texts[i]);
    f.tests.push_back(std::move(inst));
  }
  return f;
}

BenchFile load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_file(ss.str(), std::filesystem::path(path).filename().string());
}

std::vector<std::string> list_files(const std::string& dir, const std::string& filter,
                                    size_t limit) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".json" &&
        name.find(filter) != std::string::npos) {
      files.push_back(e.path().string());
    }
  }
  if (ec) throw Error(dir + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());
  if (limit > 0 && files.size() > limit) files.resize(limit);
  return files;
}

// ---- verdicts --------------------------------------------------------------------------------

namespace {

constexpr std::pair<Verdict, const char*> kVerdictNames[] = {
    {Verdict::pass, "pass"},
    {Verdict::load_error, "load_error"},
    {Verdict::compile_error, "compile_error"},
    {Verdict::validation_error, "validation_error"},
    {Verdict::engine_error, "engine_error"},
    {Verdict::invalidation_error, "invalidation_error"},
    {Verdict::crash, "crash"},
    {Verdict::timeout, "timeout"},
};

}  // namespace

const char* verdict_name(Verdict v) {
  for (const auto& [verdict, name] : kVerdictNames) {
    if (verdict == v) return name;
  }
  return "?";
}

Verdict verdict_from_name(std::string_view name) {
  for (const auto& [verdict, n] : kVerdictNames) {
    if (n == name) return verdict;
  }
  throw Error("unknown MaskBench verdict " + as_literal(name));
}

nlohmann::json to_json(const FileResult& r) {
  return {{"name", r.name},
          {"verdict", verdict_name(r.verdict)},
          {"reason", r.reason},
          {"compiled", r.compiled},
          {"ttfm_ns", r.ttfm_ns},
          {"tbm_ns", r.tbm_ns},
          {"accept_ns", r.accept_ns},
          {"instances", r.instances},
          {"instances_right", r.instances_right},
          {"tokens", r.tokens}};
}

FileResult file_result_from_json(const nlohmann::json& j) {
  FileResult r;
  r.name = j.at("name").get<std::string>();
  r.verdict = verdict_from_name(j.at("verdict").get<std::string>());
  r.reason = j.at("reason").get<std::string>();
  r.compiled = j.at("compiled").get<bool>();
  r.ttfm_ns = j.at("ttfm_ns").get<int64_t>();
  r.tbm_ns = j.at("tbm_ns").get<std::vector<int64_t>>();
  r.accept_ns = j.at("accept_ns").get<std::vector<int64_t>>();
  r.instances = j.at("instances").get<size_t>();
  r.instances_right = j.at("instances_right").get<size_t>();
  r.tokens = j.at("tokens").get<size_t>();
  return r;
}

// ---- running one file ------------------------------------------------------------------------

namespace {

struct Judgement {
  Verdict verdict = Verdict::pass;
  std::string reason;
};

// Where a walk stopped, for the reason line: the token and the text just before it.
std::string token_context(const Instance& inst, const Tokenizer& tok,
                          const std::vector<int32_t>& tokens, size_t pos) {
  if (pos >= tokens.size()) return "after all " + std::to_string(tokens.size()) + " tokens";
  size_t offset = 0;
  for (size_t i = 0; i < pos; ++i) offset += tok.token_to_piece(tokens[i]).size();
  const size_t from = offset > 40 ? offset - 40 : 0;
  return "token " + std::to_string(pos) + " of " + std::to_string(tokens.size()) + " " +
         as_literal(tok.token_to_piece(tokens[pos])) + " after " +
         as_literal(std::string_view(inst.text).substr(from, offset - from));
}

// Walks one instance: a mask before each token (timed), the token's bit, accept(). The text is
// accepted when every token is allowed and the matcher can end after the last one.
Judgement judge(const Instance& inst, size_t index, const std::shared_ptr<const CompiledGrammar>& g,
                const Tokenizer& tok, std::span<uint64_t> mask, FileResult& r) {
  const std::string label =
      "test #" + std::to_string(index) + (inst.valid ? " (valid)" : " (invalid)");
  const std::vector<int32_t> tokens = tok.encode(inst.text, false, false);
  Matcher m(g);
  size_t pos = 0;
  bool allowed = true;
  try {
    for (; pos < tokens.size(); ++pos) {
      const auto t = static_cast<size_t>(tokens[pos]);
      const auto t0 = Clock::now();
      m.fill_mask(mask);
      const auto t1 = Clock::now();
      allowed = (mask[t / 64] >> (t % 64)) & 1;
      const bool took = m.accept(tokens[pos]);
      r.tbm_ns.push_back(ns_since(t0, t1));
      r.accept_ns.push_back(ns_since(t1, Clock::now()));
      ++r.tokens;
      if (took != allowed) {
        return {Verdict::engine_error, label + ": " + token_context(inst, tok, tokens, pos) +
                                           ": the mask " + (allowed ? "allows" : "forbids") +
                                           " it but accept() " + (took ? "takes" : "refuses") +
                                           " it"};
      }
      if (!allowed) break;
    }
    const std::vector<int32_t>& ends = g->vocab().end_tokens();
    if (allowed && !ends.empty()) {
      // A sampler ends the text with an end token, so its bit must say what can_end() says
      // (not timed: the published protocol has no mask after the last token).
      m.fill_mask(mask);
      const auto eos = static_cast<size_t>(ends[0]);
      const bool end_allowed = (mask[eos / 64] >> (eos % 64)) & 1;
      if (end_allowed != m.can_end()) {
        return {Verdict::engine_error,
                label + ": after the last token the mask " + (end_allowed ? "allows" : "forbids") +
                    " the end token but can_end() is " + (end_allowed ? "false" : "true")};
      }
    }
  } catch (const GrammarError& e) {
    // The engine gave up on this text (a limit): the request would fail, not go wrong.
    return {Verdict::validation_error,
            label + ": " + token_context(inst, tok, tokens, pos) + ": " + first_line(e.what())};
  }
  const bool complete = allowed && m.can_end();
  if (inst.valid && !allowed) {
    return {Verdict::validation_error,
            label + ": " + token_context(inst, tok, tokens, pos) + " not allowed"};
  }
  if (inst.valid && !complete) {
    return {Verdict::validation_error,
            label + ": all " + std::to_string(tokens.size()) +
                " tokens allowed but the text is not complete (can_end() false)"};
  }
  if (!inst.valid && complete) {
    return {Verdict::invalidation_error, label + ": all " + std::to_string(tokens.size()) +
                                             " tokens allowed and can_end() true"};
  }
  return {};
}

std::string exception_reason(const char* phase, const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return std::string(phase) + ": out of memory";
  return std::string(phase) + ": unexpected exception: " + first_line(e.what());
}

}  // namespace

FileResult run_file(const BenchFile& file, const Tokenizer& tok,
                    const std::shared_ptr<const TokenVocab>& vocab, const RunOptions& opt,
                    const std::function<void(const std::string&)>& phase) {
  FileResult r;
  r.name = file.name;
  r.instances = file.tests.size();
  std::vector<uint64_t> mask(vocab->mask_words());
  std::shared_ptr<const CompiledGrammar> g;
  if (phase) phase("compiling");
  try {
    const auto t0 = Clock::now();
    g = CompiledGrammar::compile(json_schema_grammar(file.schema, opt.schema), vocab);
    Matcher(g).fill_mask(mask);
    r.ttfm_ns = ns_since(t0, Clock::now());
    r.compiled = true;
  } catch (const GrammarError& e) {
    r.verdict = Verdict::compile_error;
    r.reason = first_line(e.what());
    return r;
  } catch (const std::exception& e) {
    r.verdict = Verdict::engine_error;
    r.reason = exception_reason("compile", e);
    return r;
  }
  for (size_t i = 0; i < file.tests.size(); ++i) {
    if (phase) phase("walking test #" + std::to_string(i));
    Judgement j;
    try {
      j = judge(file.tests[i], i, g, tok, mask, r);
    } catch (const std::exception& e) {
      j = {Verdict::engine_error,
           "test #" + std::to_string(i) + ": " + exception_reason("mask", e)};
    }
    if (j.verdict == Verdict::pass) ++r.instances_right;
    if (j.verdict > r.verdict) {
      r.verdict = j.verdict;
      r.reason = std::move(j.reason);
    }
  }
  return r;
}

// ---- isolation -------------------------------------------------------------------------------

namespace {

// The pipe carries notes ('\x01' text '\n') and then the result ('\x02' text to the end).
constexpr char kNoteMark = '\x01', kResultMark = '\x02';

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent gave up on us (timeout): nothing left to tell
    s.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

ChildOutcome run_in_child(const std::function<std::string(const Note& note)>& work,
                          double time_limit_s, uint64_t mem_limit_bytes) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // or the child's exit would print our buffered output a second time
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (mem_limit_bytes > 0) {
      const rlimit rl{mem_limit_bytes, mem_limit_bytes};
      ::setrlimit(RLIMIT_AS, &rl);
    }
    const Note note = [fd = fds[1]](const std::string& text) {
      write_all(fd, kNoteMark + first_line(text) + '\n');
    };
    int status = 0;
    std::string out;
    try {
      out = work(note);
    } catch (const std::exception& e) {
      out = first_line(e.what());
      status = 3;
    }
    write_all(fds[1], kResultMark + out);
    ::_exit(status);  // no destructors or atexit handlers of the parent's objects
  }
  ::close(fds[1]);

  ChildOutcome c;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(time_limit_s));
  char buf[65536];
  std::string received;
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child exited (or closed its end)
    received.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  size_t pos = 0;
  while (pos < received.size() && received[pos] == kNoteMark) {
    const size_t end = received.find('\n', pos);
    if (end == std::string::npos) break;  // killed while writing it
    c.last_note = received.substr(pos + 1, end - pos - 1);
    pos = end + 1;
  }
  if (pos < received.size() && received[pos] == kResultMark) c.output = received.substr(pos + 1);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    c.kind = ChildOutcome::timed_out;
    c.output.clear();
  } else if (WIFSIGNALED(status)) {
    c.kind = ChildOutcome::crashed;
    c.detail =
        "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    c.output.clear();
  } else if (WEXITSTATUS(status) != 0) {
    c.kind = ChildOutcome::crashed;
    c.detail = "exit status " + std::to_string(WEXITSTATUS(status)) +
               (c.output.empty() ? "" : ": " + first_line(c.output));
    c.output.clear();
  }
  return c;
}

FileResult run_file_isolated(const std::string& path, const Tokenizer& tok,
                             const std::shared_ptr<const TokenVocab>& vocab, const RunOptions& opt,
                             double time_limit_s, uint64_t mem_limit_bytes) {
  const std::string name = std::filesystem::path(path).filename().string();
  const ChildOutcome c = run_in_child(
      [&](const Note& note) {
        FileResult r;
        BenchFile f;
        try {
          f = load_file(path);
        } catch (const Error& e) {
          r.name = name;
          r.verdict = Verdict::load_error;
          r.reason = first_line(e.what());
          return to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
        return to_json(run_file(f, tok, vocab, opt, note))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      },
      time_limit_s, mem_limit_bytes);
  FileResult r;
  r.name = name;
  if (c.kind == ChildOutcome::timed_out) {
    r.verdict = Verdict::timeout;
    char s[64];
    std::snprintf(s, sizeof s, "killed after the time limit of %g s", time_limit_s);
    r.reason = s + (c.last_note.empty() ? "" : ", while " + c.last_note);
  } else if (c.kind == ChildOutcome::crashed) {
    r.verdict = Verdict::crash;
    r.reason = c.detail + (c.last_note.empty() ? "" : ", while " + c.last_note);
  } else {
    try {
      r = file_result_from_json(nlohmann::json::parse(c.output));
    } catch (const std::exception& e) {
      r.verdict = Verdict::crash;
      r.reason = std::string("the child's result does not parse: ") + first_line(e.what());
    }
  }
  return r;
}

// ---- the report ------------------------------------------------------------------------------

namespace {

bool is_word(std::string_view w) {
  return !w.empty() && w.size() <= 40 && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '$' || c == '_' || c == '-';
  });
}

// The first word in quotes ('x', "x" or `x`), or "".
std::string quoted_word(std::string_view message) {
  for (size_t i = 0; i < message.size(); ++i) {
    const char q = message[i];
    if (q != '\'' && q != '"' && q != '`') continue;
    const size_t end = message.find(q, i + 1);
    if (end == std::string::npos) break;
    if (is_word(message.substr(i + 1, end - i - 1))) {
      return std::string(message.substr(i + 1, end - i - 1));
    }
    i = end;
  }
  return "";
}

// The last segment of the first JSON pointer that is a keyword (not an index, not the name of
// a property or definition), or "".
std::string pointer_keyword(std::string_view message) {
  static const std::set<std::string_view> kNameMaps = {
      "properties",       "patternProperties", "$defs",       "definitions",
      "dependentSchemas", "dependentRequired", "dependencies"};
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] != '/' || (i > 0 && message[i - 1] != ' ' && message[i - 1] != '(')) continue;
    std::vector<std::string_view> segments;
    size_t end = i;
    while (end < message.size() && message[end] == '/') {
      const size_t from = end + 1;
      end = from;
      while (end < message.size() && !std::isspace(static_cast<unsigned char>(message[end])) &&
             std::strchr("/),:", message[end]) == nullptr) {
        ++end;
      }
      segments.push_back(message.substr(from, end - from));
    }
    for (size_t k = segments.size(); k-- > 0;) {
      const std::string_view seg = segments[k];
      const bool index =
          std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; });
      const bool name = k > 0 && kNameMaps.count(segments[k - 1]) > 0;
      if (!index && !name && is_word(seg)) return std::string(seg);
    }
    i = end;
  }
  return "";
}

}  // namespace

std::string error_keyword(const std::string& message) {
  const std::string quoted = quoted_word(message);
  // allOf / $ref merging names the keyword it could not combine in quotes.
  if (message.find("cannot combine") != std::string::npos && !quoted.empty()) {
    return "allOf/$ref: " + quoted;
  }
  const std::string keyword = pointer_keyword(message);
  // Formats are worth counting one by one: each is a separate piece of work.
  if (keyword == "format" && !quoted.empty()) return "format " + quoted;
  if (!keyword.empty()) return keyword;
  if (!quoted.empty()) return quoted;
  // Messages without either start with the stage that failed ("grammar: ...").
  const size_t colon = message.find(':');
  if (colon != std::string::npos && colon <= 20) return "(" + message.substr(0, colon) + ")";
  return "(unnamed)";
}

Percentiles percentiles_us(std::vector<int64_t> ns) {
  Percentiles p;
  p.count = ns.size();
  if (ns.empty()) return p;
  std::sort(ns.begin(), ns.end());
  // numpy's default: linear between the closest ranks.
  const auto at = [&](double q) {
    const double rank = q / 100 * static_cast<double>(ns.size() - 1);
    const auto lo = static_cast<size_t>(rank);
    const size_t hi = std::min(lo + 1, ns.size() - 1);
    const double frac = rank - static_cast<double>(lo);
    return (static_cast<double>(ns[lo]) * (1 - frac) + static_cast<double>(ns[hi]) * frac) / 1e3;
  };
  p.p25 = at(25);
  p.p50 = at(50);
  p.p75 = at(75);
  p.p90 = at(90);
  p.p95 = at(95);
  p.p99 = at(99);
  p.p999 = at(99.9);
  p.max = static_cast<double>(ns.back()) / 1e3;
  return p;
}

Summary summarize(const std::vector<FileResult>& results) {
  Summary s;
  for (const auto& [v, name] : kVerdictNames) s.counts[v] = 0;
  std::vector<int64_t> tbm, ttfm, accept;
  for (const FileResult& r : results) {
    ++s.files;
    ++s.counts[r.verdict];
    s.instances += r.instances;
    s.instances_right += r.instances_right;
    s.tokens += r.tokens;
    if (r.compiled) {
      ++s.compiled;
      ttfm.push_back(r.ttfm_ns);
      tbm.insert(tbm.end(), r.tbm_ns.begin(), r.tbm_ns.end());
      accept.insert(accept.end(), r.accept_ns.begin(), r.accept_ns.end());
    }
    if (r.verdict == Verdict::compile_error) ++s.compile_error_keywords[error_keyword(r.reason)];
    if (r.verdict != Verdict::pass) s.failures.push_back(&r);
  }
  s.tbm = percentiles_us(std::move(tbm));
  s.ttfm = percentiles_us(std::move(ttfm));
  s.accept = percentiles_us(std::move(accept));
  return s;
}

namespace {

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"count", p.count}, {"p25", p.p25}, {"p50", p.p50},    {"p75", p.p75}, {"p90", p.p90},
          {"p95", p.p95},     {"p99", p.p99}, {"p99.9", p.p999}, {"max", p.max}};
}

}  // namespace

nlohmann::json summary_json(const Summary& s, size_t max_failures) {
  nlohmann::json j = {{"benchmark", "maskbench"}, {"files", s.files}};
  for (const auto& [v, n] : s.counts) j[v == Verdict::pass ? "passing" : verdict_name(v)] = n;
  j["pass_rate"] =
      s.files ? static_cast<double>(s.counts.at(Verdict::pass)) / static_cast<double>(s.files)
              : 0.0;
  j["instances"] = s.instances;
  j["instances_right"] = s.instances_right;
  j["tokens"] = s.tokens;
  j["timed_files"] = s.compiled;
  j["tbm_us"] = percentiles_json(s.tbm);
  j["ttfm_us"] = percentiles_json(s.ttfm);
  j["accept_us"] = percentiles_json(s.accept);
  j["compile_errors_by_keyword"] = s.compile_error_keywords;
  nlohmann::json failures = nlohmann::json::array();
  for (size_t i = 0; i < s.failures.size() && i < max_failures; ++i) {
    const FileResult& r = *s.failures[i];
    failures.push_back(
        {{"file", r.name}, {"verdict", verdict_name(r.verdict)}, {"reason", r.reason}});
  }
  j["failures"] = std::move(failures);
  return j;
}

}  // namespace lift::structured::maskbench
