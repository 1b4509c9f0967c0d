// Hostile templates and contexts: every runaway is a TemplateError that says which limit it
// hit, never a crash, a hang or unbounded memory.
#include <gtest/gtest.h>

#include <string>

#include "template/template.h"

namespace lift::tmpl {
namespace {

std::string failure(const std::string& source, const RenderOptions& opts = {}) {
  try {
    (void)Template(source).render(Object{}, opts);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_failure(const std::string& source, const std::string& needle,
                    const RenderOptions& opts = {}) {
  const std::string what = failure(source, opts);
  EXPECT_NE(what.find(needle), std::string::npos) << source.substr(0, 80) << " -> " << what;
}

TEST(TemplateLimits, RunawayRecursionStopsAtTheCallDepth) {
  expect_failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nest deeper than 40");
}

TEST(TemplateLimits, LongLoopsStopAtTheStepLimit) {
  RenderOptions small;
  small.max_steps = 1000;
  expect_failure("{% for i in range(1001) %}{% endfor %}", "1000 steps", small);
  expect_failure("{% for i in range(10) %}{% for j in range(200) %}{% endfor %}{% endfor %}",
                 "1000 steps", small);
  // range() counts its items too: 400 + 400 steps fit.
  EXPECT_EQ(failure("{% for i in range(400) %}{% endfor %}", small), "(no error)");
}

TEST(TemplateLimits, OutputStopsAtItsLimit) {
  RenderOptions small;
  small.max_output_bytes = 1000;
  expect_failure("{% for i in range(200) %}{{ 'abcdef' }}{% endfor %}", "exceeds 1000 bytes",
                 small);
  expect_failure("{{ 'x' * 100000000 }}", "repetition too large");
  expect_failure("{{ [1, 2] * 100000000 }}", "repetition too large");
}

TEST(TemplateLimits, DeepNestingIsAParseError) {
  expect_failure("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}",
                 "nests deeper than 200");
  expect_failure("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}", "nests");
  std::string ifs;
  for (int i = 0; i < 300; ++i) ifs += "{% if true %}";
  expect_failure(ifs, "nests deeper than 200");
}

TEST(TemplateLimits, BadSourcesNameTheLine) {
  expect_failure("a\nb\n{{ x | no_such_filter }}", "line 3: no filter named 'no_such_filter'");
  expect_failure("{% if x %}", "expected 'endif'");
  expect_failure("{{ 'open }}", "unterminated string");
  expect_failure("x\n{% include 'other.jinja' %}", "line 2: unsupported statement 'include'");
  expect_failure("{{ 99999999999999999999 }}", "integer literal too large");
  expect_failure("{{ 9223372036854775807 + 1 }}", "integer overflow");
}

}  // namespace
}  // namespace lift::tmpl
