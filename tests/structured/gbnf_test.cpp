// GBNF (llama.cpp's grammar format): each construct on strings it must and must not match,
// llama.cpp's newline rules, two realistic recursive grammars (JSON, arithmetic), and errors
// with their line:column.
#include "structured/gbnf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lift::structured {
namespace {

void expect_language(std::string_view grammar, const std::vector<std::string>& yes,
                     const std::vector<std::string>& no) {
  const Grammar g = gbnf_grammar(grammar);
  for (const auto& s : yes) EXPECT_TRUE(g.matches(s)) << grammar << "\nshould match '" << s << "'";
  for (const auto& s : no)
    EXPECT_FALSE(g.matches(s)) << grammar << "\nshould not match '" << s << "'";
}

void expect_error(std::string_view grammar, const std::vector<std::string>& parts) {
  try {
    gbnf_grammar(grammar);
    ADD_FAILURE() << grammar << "\ncompiled";
  } catch (const GrammarError& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << grammar << "\n'" << e.what() << "' lacks '" << p << "'";
    }
  }
}

// Written for these tests after llama.cpp's grammars/json.gbnf (the same language: any JSON
// value, bounded whitespace).
constexpr std::string_view kJson = R"g(# any JSON value
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws

ws ::= | " " | "\n" [ \t]{0,20}
)g";

constexpr std::string_view kArithmetic = R"gbnf(
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
)gbnf";

TEST(GbnfSyntax, LiteralsClassesDotAndRuleReferences) {
  expect_language(R"g(root ::= "a" digits "\x41\u00e9\U0001F600\n\t\r\"\\"
digits ::= [0-9]+)g",
                  {"a1A\u00e9\U0001F600\n\t\r\"\\", "a123A\u00e9\U0001F600\n\t\r\"\\"},
                  {"aA\u00e9\U0001F600\n\t\r\"\\"});
  expect_language(R"g(root ::= [^a-c\]\-] [\x41-\x43] [\u00e0-\u00ff])g", {"dBé", "xAà"},
                  {"aBé", "]Bé", "-Bé", "dDé"});
  expect_language(R"g(root ::= [a-] [-x])g", {"--", "ax"}, {"bx"});
  expect_language("root ::= . .", {"a😀", "\n\n"}, {"a", "abc"});
  expect_language(R"g(root ::= "é" [😀-😂])g", {"é😁"}, {"é😃"});
  expect_language(R"g(root ::= rule-2 x_y
rule-2 ::= "r"
x_y ::= "s")g",
                  {"rs"}, {"r"});
  expect_language(R"g(root ::= "")g", {""}, {"a"});
}

TEST(GbnfSyntax, GroupsAlternationAndRepetition) {
  expect_language(R"g(root ::= ("ab" | "c")* "d"?)g", {"", "d", "abcd", "cc"}, {"a", "dd"});
  expect_language(R"g(root ::= "a"+ "b")g", {"ab", "aaab"}, {"b"});
  expect_language(R"g(root ::= "a"{3})g", {"aaa"}, {"aa", "aaaa"});
  expect_language(R"g(root ::= "a"{2,})g", {"aa", "aaaaa"}, {"a"});
  expect_language(R"g(root ::= "a"{ 1 , 3 } "b"{0,1})g", {"a", "aaab"}, {"", "aaaa"});
  expect_language(R"g(root ::= x{2}
x ::= "x" | "yy")g",
                  {"xx", "xyy", "yyyy"}, {"x", "xxx"});
}

TEST(GbnfSyntax, CommentsAndLlamaCppNewlineRules) {
  // Newlines continue a rule inside parentheses, after '|' and after '::='; elsewhere they end it.
  expect_language(
      "# leading comment\n\nroot ::=\n  \"a\" | # trailing comment\n  \"b\" |\n  (\n \"c\"\n  | "
      "\"d\" )\r\n\n# end",
      {"a", "b", "c", "d"}, {"cd", "ab"});
  expect_language("root ::= x\nx ::= \"x\"  \n", {"x"}, {""});
  expect_language("root ::= (\n  \"c\" # c\n\n  \"d\"\n) \"e\"", {"cde"}, {"c", "cd"});
  // As in llama.cpp, a line may not start with '|' outside parentheses: the rule has ended.
  expect_error("root ::= \"a\"\n  | \"b\"\n", {"expected a rule name", "2:3"});
}

TEST(GbnfRealistic, JsonGrammarAcceptsJsonAndRejectsTheRest) {
  expect_language(
      kJson,
      {"{}", "[]", "null", "-0.5e+3", "\"a\\u00e9\\n\"",
       R"g({"a": [1, 2.5, {"b": null}], "c": "d\"e"})g", "[\n  true,\n  false\n]", "\"é😀\""},
      {"{", "[1,]", "{\"a\" 1}", "01", "\"a", "\"\x01\"", "\"\\x\"", "tru", "{} {}", "1."});
}

TEST(GbnfRealistic, ArithmeticGrammarWithRecursion) {
  expect_language(kArithmetic, {"1", "1+2*3", "(1+2)*3", "-(4/2)-1.5", "((((7))))"},
                  {"", "1+", "(1", "1)", "1++2", "()", "1.2.3"});
}

TEST(GbnfErrors, SyntaxErrorsAndUndefinedRulesNameLineAndColumn) {
  expect_error("root ::= x\nx ::= y\n", {"undefined rule 'y'", "2:7"});
  expect_error("a ::= \"a\"\n", {"no 'root' rule"});
  expect_error("", {"no 'root' rule"});
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", {"defined twice", "2:1"});
  expect_error("root ::= \"abc\n", {"unterminated", "1:10"});
  expect_error("root ::= \"a\\q\"", {"unknown escape", "1:12"});
  expect_error("root ::= [ab\n", {"unclosed '['", "1:10"});
  expect_error("root ::= [z-a]", {"out of order", "1:12"});
  expect_error("root ::= (\"a\"\n", {"unclosed '('", "1:10"});
  expect_error("root ::= \"a\" )", {"unexpected ')'", "1:14"});
  expect_error("root ::= * \"a\"", {"nothing before it", "1:10"});
  expect_error("root ::= \"a\"{3,2}", {"below", "1:13"});
  expect_error("root ::= \"a\"{x}", {"expected a number", "1:14"});
  expect_error("root ::= \"a\"{2", {"'}'", "1:13"});
  expect_error("root ::= \"\\x4\"", {"hex digits", "1:11"});
  expect_error("root ::= \"\\uD800\"", {"not a code point"});
  expect_error("root ::= \"a\" | \nb ::= \"b\"", {"'::=' inside a rule", "2:1"});
  expect_error("root := \"a\"", {"expected '::='", "1:6"});
  expect_error("root ::= <[1000]>", {"token references"});
  expect_error("root ::= " + std::string(100000, '(') + std::string(100000, ')'),
               {"nested deeper than 256", "1:266"});
  expect_error("root ::= \"\xff\"", {"invalid UTF-8", "1:11"});
  // Left recursion is refused when the grammar is built.
  expect_error("root ::= root \"x\" | \"y\"", {"root"});
}

}  // namespace
}  // namespace lift::structured
