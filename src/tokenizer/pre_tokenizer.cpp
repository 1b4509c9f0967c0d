#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {
namespace {

// The regexes as the models' tokenizer.json files (and llama.cpp) publish them.
constexpr std::string_view kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kLlama3[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
// Qwen2: Llama 3's rule with single digits.
constexpr std::string_view kQwen2[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::string_view kGpt2Only[] = {kGpt2};
// OpenAI's o200k (Phi-4-mini's `gpt-4o`, Llama 4): case-aware words that keep a trailing
// contraction, so camelCase splits at its capitals; digits in threes. PCRE2 runs the letter
// subclasses as written (llama.cpp rewrites them as ASCII-case approximations).
constexpr std::string_view kO200k[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
// Mistral's tekken (Mistral Nemo, Mistral Small 3): o200k's words without the contractions,
// every digit alone.
constexpr std::string_view kTekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
// Qwen 3.5: Qwen2's rule with combining marks inside words.
constexpr std::string_view kQwen35[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
// Seed-Coder: Llama 3's rule with single digits and no newlines after punctuation.
constexpr std::string_view kSeedCoder[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}|"
    " ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
// Viking (LumiOpen): runs of anything but whitespace and a few punctuation marks, then digits.
constexpr std::string_view kViking[] = {
    " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+", "\\p{N}"};
// StarCoder, Refact, Command-R: every digit alone, then GPT-2's rule.
constexpr std::string_view kDigitsThenGpt2[] = {"\\p{N}", kGpt2};
constexpr std::string_view kFalcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
constexpr std::string_view kDeepseekLlm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
    "\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}+",
};
constexpr std::string_view kDeepseekCoder[] = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                               "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
                                               "\\p{N}"};
// llama.cpp's rule for vocabularies that name no pre-tokenizer.
constexpr std::string_view kDefault[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+",
                                         "[0-9][0-9][0-9]"};

// One row per name; adding a pre-tokenizer is adding a row.
constexpr PreTokenizerSpec kTable[] = {
    {"default", kDefault, false, false},
    {"llama-bpe", kLlama3, true, true},
    {"llama3", kLlama3, true, true},
    {"llama-v3", kLlama3, true, true},
    {"qwen2", kQwen2, false, false},
    {"gpt-2", kGpt2Only, false, false},
    {"mpt", kGpt2Only, false, false},
    {"olmo", kGpt2Only, false, false},
    {"deepseek-llm", kDeepseekLlm, false, false},
    {"deepseek-coder", kDeepseekCoder, false, false},
    {"falcon", kFalcon, false, false},
    {"starcoder", kDigitsThenGpt2, false, false},
    {"refact", kDigitsThenGpt2, false, false},
    {"command-r", kDigitsThenGpt2, false, false},
    {"smollm", kDigitsThenGpt2, false, false},
    // Names llama.cpp's converter gives other models that run the same rules.
    {"falcon3", kLlama3, true, true},
    {"dbrx", kLlama3, false, false},  // also Phi-4 (cl100k)
    {"smaug-bpe", kLlama3, false, false},
    {"deepseek-r1-qwen", kQwen2, false, false},
    {"megrez", kQwen2, false, false},
    {"stablelm2", kQwen2, false, false},
    {"a.x-4.0", kGpt2Only, false, false},
    {"phi-2", kGpt2Only, false, false},
    {"trillion", kGpt2Only, false, false},
    {"minerva-7b", kDigitsThenGpt2, false, false},
    {"exaone", kDigitsThenGpt2, false, false},
    {"gpt-4o", kO200k, false, false},
    {"llama4", kO200k, false, false},
    {"tekken", kTekken, true, true},
    {"qwen35", kQwen35, false, false},
    {"seed-coder", kSeedCoder, false, false},
    {"viking", kViking, false, false},
};

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
  for (const PreTokenizerSpec& s : kTable) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string known_pre_tokenizers() {
  std::string out;
  for (const PreTokenizerSpec& s : kTable) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

struct PreTokenizer::Compiled {
  std::vector<pcre2_code*> codes;
  ~Compiled() {
    for (pcre2_code* c : codes) pcre2_code_free(c);
  }
};

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec)
    : spec_(&spec), compiled_(std::make_unique<Compiled>()) {
  for (const std::string_view re : spec.splits) {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw Error("pre-tokenizer '" + std::string(spec.name) + "': regex does not compile at " +
                  std::to_string(at) + ": " + reinterpret_cast<const char*>(msg.data()));
    }
    compiled_->codes.push_back(code);
    // Without JIT (unsupported CPU, no executable memory) pcre2_match interprets: same result.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back(text);
  std::vector<std::string_view> next;
  for (pcre2_code* code : compiled_->codes) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
    if (!md) throw Error("pre-tokenizer: out of memory for match data");
    next.clear();
    for (const std::string_view piece : out) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t gap = 0;  // start of the text not matched yet
      size_t pos = 0;
      while (pos < piece.size()) {
        int rc = pcre2_match(code, subject, piece.size(), pos, 0, md.get(), nullptr);
        // The JIT's stack is bounded; the interpreter's heap limit is far larger.
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(code, subject, piece.size(), pos, PCRE2_NO_JIT, md.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          std::array<PCRE2_UCHAR, 256> msg{};
          pcre2_get_error_message(rc, msg.data(), msg.size());
          throw Error("pre-tokenizer '" + std::string(spec_->name) +
                      "': matching failed: " + reinterpret_cast<const char*>(msg.data()));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t start = ov[0];
        const size_t end = ov[1];
        if (end == start) {  // none of the rules match empty text, but be safe: step on
          if (start >= piece.size()) break;
          pos = start + next_utf8(piece, start).length;
          continue;
        }
        if (start > gap) next.push_back(piece.substr(gap, start - gap));
        next.push_back(piece.substr(start, end - start));
        gap = pos = end;
      }
      if (gap < piece.size()) next.push_back(piece.substr(gap));
    }
    out.swap(next);
  }
}

}  // namespace lift
