#include "structured/json_schema.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace lift::structured {
namespace {

using Json = nlohmann::ordered_json;

Grammar compile(const std::string& schema, JsonSchemaOptions opt = {}) {
  return json_schema_grammar(Json::parse(schema), opt);
}

// Expects `text` in (valid) or out of the language, naming the text on failure.
void expect(const Grammar& g, const std::string& text, bool valid) {
  EXPECT_EQ(g.matches(text), valid) << text;
}
std::string quoted(const char* t) {
  std::string s(1, '"');
  s += t;
  s += '"';
  return s;
}
void ok(const Grammar& g, const std::string& text) { expect(g, text, true); }
void no(const Grammar& g, const std::string& text) { expect(g, text, false); }

// The GrammarError's message, or "" when the schema compiles.
std::string refusal(const std::string& schema) {
  try {
    compile(schema);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, ScalarTypesAndTypeArrays) {
  Grammar g = compile(R"({"type": ["integer", "null", "boolean"]})");
  for (const char* t : {"0", "-12", "null", "true", "false", "90071992547409931234"}) ok(g, t);
  for (const char* t : {"1.5", "01", "\"1\"", "[]", "{}", "1e3", " 1", "1 ", "-"}) no(g, t);
  Grammar n = compile(R"({"type": "number"})");
  for (const char* t : {"0", "-0.5", "1e-05", "2.5E+10", "-0"}) ok(n, t);
  for (const char* t : {".5", "1.", "+1", "1e", "0x10", "NaN"}) no(n, t);
  Grammar any = compile("{}");
  for (const char* t : {"null", R"({"a": [1, {"b": "c"}]})", R"("x")", "[]"}) ok(any, t);
  no(any, "[1,]");
  // A schema nothing validates is refused: there is no text to generate.
  EXPECT_NE(refusal("false"), "");
}

TEST(JsonSchema, IntegerBoundsInclusiveExclusiveAndDraft4) {
  Grammar g = compile(R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 120})");
  for (const char* t : {"-5", "-0", "0", "7", "99", "119"}) ok(g, t);
  for (const char* t : {"-6", "-50", "120", "121", "1000"}) no(g, t);
  Grammar d4 = compile(R"({"type": "integer", "minimum": 10, "exclusiveMinimum": true,
                           "maximum": 12, "exclusiveMaximum": false})");
  ok(d4, "11");
  ok(d4, "12");
  no(d4, "10");
  no(d4, "13");
  // A fractional bound on an integer rounds inward.
  Grammar f = compile(R"({"type": "integer", "minimum": 2.5, "maximum": 4.5})");
  ok(f, "3");
  ok(f, "4");
  no(f, "2");
  no(f, "5");
  EXPECT_NE(refusal(R"({"type": "integer", "minimum": 3, "maximum": 2})"), "");
  Grammar below_zero = compile(R"({"type": "integer", "exclusiveMaximum": 0})");
  ok(below_zero, "-1");
  no(below_zero, "-0");
  no(below_zero, "0");
}

TEST(JsonSchema, DecimalBoundsAreExact) {
  Grammar g = compile(R"({"type": "number", "exclusiveMinimum": 0.1, "maximum": 2})");
  for (const char* t : {"0.10001", "0.2", "1", "2", "2.000", "1.99999999999999999999"}) ok(g, t);
  for (const char* t : {"0.1", "0.100", "0.09999", "0", "-1", "2.0000001", "3"}) no(g, t);
  Grammar neg = compile(R"({"type": "number", "minimum": -1.25, "exclusiveMaximum": 0})");
  for (const char* t : {"-1.25", "-1.2", "-0.0001", "-1"}) ok(neg, t);
  for (const char* t : {"-1.26", "-2", "0", "-0", "-0.0", "0.5"}) no(neg, t);
  Grammar zero = compile(R"({"type": "number", "minimum": 0})");
  ok(zero, "-0.0");
  ok(zero, "0");
  no(zero, "-0.001");
}

TEST(JsonSchema, StringLengthCountsCodePointsAndEscapes) {
  Grammar g = compile(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* t : {R"("ab")", R"("abc")", "\"\xc3\xa9\xe2\x82\xac\"", R"("\n\u00e9")",
                        R"("\ud83d\ude00x")", "\"\xf0\x9f\x98\x80y\""}) {
    ok(g, t);
  }
  for (const char* t : {R"("a")", R"("abcd")", R"("\u00e9")", "\"a\x01\"", R"("\x")", "ab"}) {
    no(g, t);
  }
}

TEST(JsonSchema, PatternIsUnanchoredAndMeetsLength) {
  Grammar g = compile(R"({"type": "string", "pattern": "[0-9]{3}"})");
  ok(g, R"("ab123cd")");
  no(g, R"("ab12cd")");
  Grammar a = compile(R"({"type": "string", "pattern": "^a+$", "maxLength": 3})");
  ok(a, R"("aaa")");
  ok(a, R"("\u0061a")");
  no(a, R"("aaaa")");
  no(a, R"("")");
  EXPECT_NE(refusal(R"({"type": "string", "pattern": "(a"})").find("/pattern"), std::string::npos);
}

TEST(JsonSchema, Formats) {
  Grammar date = compile(R"({"type": "string", "format": "date"})");
  for (const char* t : {"2024-02-29", "2000-02-29", "2023-12-31", "2023-04-30"}) {
    ok(date, quoted(t));
  }
  for (const char* t : {"2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "2023-1-01"}) {
    no(date, quoted(t));
  }
  Grammar dt = compile(R"({"type": "string", "format": "date-time"})");
  ok(dt, R"("2023-05-01T12:30:00Z")");
  ok(dt, R"("2023-05-01T12:30:00.25+02:00")");
  no(dt, R"("2023-05-01 12:30:00Z")");
  no(dt, R"("2023-05-01T24:00:00Z")");
  Grammar uuid = compile(R"({"type": "string", "format": "uuid"})");
  ok(uuid, R"("123e4567-e89b-12d3-a456-426614174000")");
  no(uuid, R"("123e4567e89b12d3a456426614174000")");
  Grammar email = compile(R"({"type": "string", "format": "email"})");
  ok(email, R"("a.b+c@example.co.uk")");
  no(email, R"("a..b@example.com")");
  no(email, R"("ab@localhost")");
  Grammar uri = compile(R"({"type": "string", "format": "uri"})");
  ok(uri, R"("https://user@example.com:8080/a/b?q=1#frag")");
  ok(uri, R"("urn:isbn:0451450523")");
  no(uri, R"("http://example.com:80x/")");
  no(uri, R"("/relative/path")");
  no(uri, R"("http://a b")");
  Grammar v6 = compile(R"({"type": "string", "format": "ipv6"})");
  for (const char* t : {"::", "::1", "fe80::1:2", "2001:db8:0:0:1:0:0:1", "1:2:3:4:5:6:7:8",
                        "::ffff:192.168.0.1", "1::", "a:b:c:d:e:f::"}) {
    ok(v6, quoted(t));
  }
  for (const char* t : {"1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":1:2",
                        "::ffff:192.168.0.256", "1:2:3:4:5:6:7::8"}) {
    no(v6, quoted(t));
  }
  Grammar dur = compile(R"({"type": "string", "format": "duration"})");
  for (const char* t : {"P1D", "P3Y6M4DT12H30M5S", "PT36H", "P4W", "P1M", "PT0S"})
    ok(dur, quoted(t));
  for (const char* t : {"P", "PT", "P1H", "1D", "P1DT", "P1W2D"}) no(dur, quoted(t));
  Grammar ptr = compile(R"({"type": "string", "format": "json-pointer"})");
  for (const char* t : {"", "/", "/a/b", "/a~0b/~1"}) ok(ptr, quoted(t));
  for (const char* t : {"a", "/a~2", "/~"}) no(ptr, quoted(t));
  // A name the specification does not define is an annotation, as validators treat it; a
  // defined one lift cannot check is refused, naming where.
  Grammar any = compile(R"({"properties": {"x": {"format": "int32"}}})");
  ok(any, R"({"x": "not a number"})");
  ok(any, R"({"x": 5})");
  EXPECT_NE(refusal(R"({"properties": {"x": {"format": "iri"}}})").find("/properties/x/format"),
            std::string::npos);
}

TEST(JsonSchema, PropertiesInSchemaOrderRequiredAndOptional) {
  Grammar g = compile(R"({"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"],
      "additionalProperties": false})");
  for (const char* t : {R"({"a": "x"})", R"({"b": 1, "a": "x"})", R"({"a":"x","c":true})",
                        R"({"b":1,"a":"x","c":false})", "{ \"a\" :\"x\"\n}"}) {
    ok(g, t);
  }
  for (const char* t : {R"({})", R"({"b": 1})", R"({"a": "x", "b": 1})", R"({"a": 1})",
                        R"({"a": "x", "a": "y"})", R"({"a": "x", "d": 1})", R"({"a": "x",})"}) {
    no(g, t);
  }
}

TEST(JsonSchema, AdditionalPropertiesDefaultSchemaAndStrict) {
  const std::string schema = R"({"type": "object", "properties": {"id": {"type": "integer"}}})";
  Grammar open = compile(schema);
  ok(open, R"({"x": [1], "id": 3, "y": null})");
  no(open, R"({"x": 1, "id": "3"})");
  // An additional key never spells a declared one, in any escaping.
  no(open, R"({"\u0069d": "3"})");
  JsonSchemaOptions strict;
  strict.strict = true;
  Grammar closed = compile(schema, strict);
  ok(closed, R"({"id": 3})");
  no(closed, R"({"id": 3, "x": 1})");
  Grammar typed = compile(R"({"type": "object", "additionalProperties": {"type": "string"}})");
  ok(typed, R"({"a": "1", "b": "2"})");
  no(typed, R"({"a": "1", "b": 2})");
  Grammar req = compile(R"({"type": "object", "required": ["k"],
                            "additionalProperties": {"type": "integer"}})");
  ok(req, R"({"k": 1})");
  no(req, R"({})");
  no(req, R"({"k": "1"})");
}

// A schema is request input: its automaton must grow with what it spells. n required
// properties with additional ones allowed between them take states linear in n (each
// object state once held its own copy of the additional-key class: 107k states at n = 300,
// 800 MB of mask cache with the Llama 3 vocabulary); optional ones, each state holding the keys
// that may still come, quadratic in n but only over the keys' bytes.
TEST(JsonSchema, ObjectStatesGrowWithTheKeysNotWithCopiesOfTheirValues) {
  auto object = [](int n, bool required) {
    Json s = {{"type", "object"}, {"properties", Json::object()}};
    for (int i = 0; i < n; ++i) {
      s["properties"]["p" + std::to_string(i)] = {{"type", "string"}};
      if (required) s["required"].push_back("p" + std::to_string(i));
    }
    return s.dump();
  };
  const size_t r100 = compile(object(100, true)).state_count();
  const size_t r200 = compile(object(200, true)).state_count();
  EXPECT_LT(static_cast<double>(r200), 2.2 * static_cast<double>(r100)) << r100 << " " << r200;
  EXPECT_LT(r200, 30'000u);
  EXPECT_LT(compile(object(200, false)).state_count(), 100'000u);

  // The language is the same: in order, each at most once, additional keys anywhere between.
  const Grammar g = compile(object(3, false));
  ok(g, R"({"p0": "a", "x": 1, "p2": "c"})");
  ok(g, R"({"x": 1, "y": [2], "p1": "b", "z": null})");
  no(g, R"({"p1": "b", "p0": "a"})");
  no(g, R"({"p0": "a", "p0": "b"})");
  no(g, R"({"p0": 1})");
  const Grammar r = compile(object(3, true));
  ok(r, R"({"p0": "a", "q": 0, "p1": "b", "p2": "c"})");
  no(r, R"({"p0": "a", "p2": "c"})");
}

TEST(JsonSchema, PatternPropertiesAndPropertyNames) {
  Grammar g = compile(R"({"type": "object", "properties": {"name": {"type": "string"}},
      "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": false})");
  ok(g, R"({"name": "a", "x-one": 1})");
  no(g, R"({"name": "a", "x-one": "1"})");
  no(g, R"({"other": 1})");
  Grammar names = compile(R"({"type": "object", "propertyNames": {"pattern": "^[a-z]+$",
                              "maxLength": 3}})");
  ok(names, R"({"abc": 1, "d": 2})");
  no(names, R"({"abcd": 1})");
  no(names, R"({"A": 1})");
}

TEST(JsonSchema, MinAndMaxProperties) {
  Grammar g = compile(R"({"type": "object", "minProperties": 1, "maxProperties": 2})");
  ok(g, R"({"a": 1})");
  ok(g, R"({"a": 1, "b": 2})");
  no(g, R"({})");
  no(g, R"({"a": 1, "b": 2, "c": 3})");
}

TEST(JsonSchema, ArraysItemsTuplesAndCounts) {
  Grammar g = compile(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1,
                          "maxItems": 3})");
  ok(g, "[1]");
  ok(g, "[1, 2,3]");
  no(g, "[]");
  no(g, "[1,2,3,4]");
  no(g, "[1, \"2\"]");
  Grammar t = compile(R"({"prefixItems": [{"type": "string"}, {"type": "null"}], "items": false})");
  ok(t, "[]");
  ok(t, R"(["a"])");
  ok(t, R"(["a", null])");
  no(t, R"(["a", null, 1])");
  no(t, "[null]");
  Grammar old = compile(R"({"type": "array", "items": [{"type": "boolean"}],
                            "additionalItems": {"type": "integer"}})");
  ok(old, "[true, 1, 2]");
  no(old, "[true, false]");
  EXPECT_NE(refusal(R"({"type": "array", "uniqueItems": true})").find("uniqueItems"),
            std::string::npos);
}

TEST(JsonSchema, EnumAndConstTakeAnyJsonValue) {
  Grammar g = compile(R"({"enum": ["red", 1.5, null, [1, {"a": true}], {"k": "v"}]})");
  for (const char* t : {R"("red")", R"("r\u0065d")", "1.5", "null", "[1,{\"a\":true}]",
                        "[ 1 , { \"a\" : true } ]", R"({"k": "v"})"}) {
    ok(g, t);
  }
  for (const char* t : {R"("blue")", "1.50", "[1]", R"({"k": "w"})", "true"}) no(g, t);
  // Values must also satisfy the rest of the schema.
  Grammar typed = compile(R"({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1})");
  ok(typed, R"("a")");
  no(typed, "1");
  no(typed, R"("bb")");
  Grammar c = compile(R"({"const": {"x": [1, 2]}})");
  ok(c, R"({"x":[1,2]})");
  no(c, R"({"x":[2,1]})");
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
  Grammar any = compile(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]})");
  ok(any, R"("a")");
  ok(any, "3");
  no(any, R"("ab")");
  Grammar one = compile(R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"},
      "x": {"type": "integer"}}, "required": ["kind"]}, {"type": "object", "properties": {
      "kind": {"const": "b"}}, "required": ["kind"]}, {"type": "null"}]})");
  ok(one, R"({"kind": "a", "x": 1})");
  ok(one, R"({"kind": "b"})");
  ok(one, "null");
  no(one, R"({"kind": "c"})");
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "integer"}, {"minimum": 3}]})").find("/oneOf"),
            std::string::npos);
  // Overlapping branches: each holds without the other (non-objects meet both, so neither).
  Grammar req = compile(R"({"oneOf": [{"required": ["a", "b"]}, {"required": ["c"]}]})");
  ok(req, R"({"a": 1, "b": 2})");
  ok(req, R"({"c": 1})");
  ok(req, R"({"a": 1, "c": 2})");
  no(req, R"({"a": 1, "b": 2, "c": 3})");
  no(req, "{}");
  no(req, "1");
  EXPECT_NE(refusal(R"({"oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]})")
                .find("/oneOf"),
            std::string::npos);
  Grammar all = compile(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
      "required": ["a"]}, {"properties": {"a": {"minimum": 2}, "b": {"type": "string"}}}]})");
  ok(all, R"({"a": 2, "b": "x"})");
  no(all, R"({"a": 1})");
  no(all, R"({"b": "x"})");
  // Siblings of anyOf apply to every branch.
  Grammar sib = compile(R"({"type": "integer", "anyOf": [{"maximum": 0}, {"minimum": 10}]})");
  ok(sib, "-1");
  ok(sib, "10");
  no(sib, "5");
}

TEST(JsonSchema, RefsRecursionAndPointerEscapes) {
  Grammar tree = compile(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array",
      "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}}})");
  ok(tree, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})");
  no(tree, R"({"v": 1, "kids": [{"v": "2"}]})");
  Grammar root = compile(R"({"type": ["array", "integer"], "items": {"$ref": "#"}})");
  ok(root, "[1, [2, [3]], []]");
  no(root, "[1, [\"2\"]]");
  Grammar esc = compile(R"({"definitions": {"a/b": {"type": "integer"}, "c~d": {"type": "null"},
      "e f": {"type": "boolean"}}, "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
      {"$ref": "#/definitions/c~0d"}, {"$ref": "#/definitions/e%20f"}]})");
  ok(esc, "[1, null, true]");
  no(esc, "[null, null, true]");
  EXPECT_NE(refusal(R"({"$ref": "other.json#/x"})").find("other.json"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "#/definitions/missing"})").find("missing"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})"), "");
}

// Counts are compared as numbers, never cast first (1e20 does not fit an integer: undefined
// behaviour, once read as INT64_MIN and refused); whole floats count, others are refused.
TEST(JsonSchema, CountKeywordsTakeAnyWholeNumber) {
  EXPECT_EQ(refusal(R"({"type": "string", "maxLength": 1e20})"), "");
  EXPECT_EQ(refusal(R"({"type": "array", "maxItems": 1e20, "minItems": 2.0})"), "");
  EXPECT_EQ(refusal(R"({"type": "object", "maxProperties": 1e20})"), "");
  EXPECT_NE(refusal(R"({"type": "string", "minLength": 1.5})").find("non-negative integer"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "array", "minItems": -1})").find("non-negative integer"),
            std::string::npos);
  ok(compile(R"({"type": "array", "minItems": 2.0})"), "[1, 2]");
  no(compile(R"({"type": "array", "minItems": 2.0})"), "[1]");
}

// multipleOf: integers by their remainder digit by digit, or listed between two bounds; powers
// of ten below one as a cap on the fraction digits. Every text is checked against the value.
TEST(JsonSchema, MultipleOfIntegersAndPowersOfTenBelowOne) {
  Grammar seven = compile(R"({"type": "integer", "multipleOf": 7})");
  for (const char* t : {"0", "-0", "7", "-7", "700", "1001", "-98", "7000000000000000007"}) {
    ok(seven, t);
  }
  for (const char* t : {"1", "8", "-15", "1000", "7.0", "07", "70.5", "7e1", "-", ""}) {
    no(seven, t);
  }
  // Every integer up to 2,000 against its remainder.
  Grammar eleven = compile(R"({"type": "number", "multipleOf": 11.0})");
  for (int v = -1000; v <= 1000; ++v) expect(eleven, std::to_string(v), v % 11 == 0);

  // One bound: the far side by digits, the multiples between the bound and zero listed.
  Grammar nonneg = compile(R"({"type": "integer", "multipleOf": 5, "minimum": 0})");
  for (const char* t : {"0", "5", "1235"}) ok(nonneg, t);
  for (const char* t : {"-5", "3", "-10"}) no(nonneg, t);
  Grammar positive = compile(R"({"type": "integer", "multipleOf": 5, "exclusiveMinimum": 0})");
  ok(positive, "5");
  no(positive, "0");
  Grammar from_minus = compile(R"({"type": "integer", "multipleOf": 4, "minimum": -9})");
  for (int v = -20; v <= 40; ++v) expect(from_minus, std::to_string(v), v >= -9 && v % 4 == 0);
  Grammar upto = compile(R"({"type": "integer", "multipleOf": 3, "maximum": 10.5})");
  for (int v = -40; v <= 20; ++v) expect(upto, std::to_string(v), v <= 10 && v % 3 == 0);
  Grammar below = compile(R"({"type": "integer", "multipleOf": 3, "exclusiveMaximum": -2})");
  for (int v = -40; v <= 20; ++v) expect(below, std::to_string(v), v < -2 && v % 3 == 0);

  // Two bounds: the multiples between them.
  Grammar range = compile(R"({"type": "integer", "multipleOf": 11, "minimum": -30,
                              "exclusiveMaximum": 99})");
  for (int v = -60; v <= 130; ++v)
    expect(range, std::to_string(v), v >= -30 && v < 99 && v % 11 == 0);
  EXPECT_NE(refusal(R"({"type": "integer", "multipleOf": 3, "minimum": 10, "maximum": 2})"), "");

  // 10^-k: at most k fraction digits, within the bounds.
  Grammar cents = compile(R"({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 10})");
  for (const char* t : {"0", "1.5", "9.99", "10", "0.01", "3.10"}) ok(cents, t);
  for (const char* t : {"-0.01", "10.01", "1.005", "0.001", "1e1", "11"}) no(cents, t);
  Grammar tenths = compile(R"({"type": "number", "multipleOf": 0.1})");
  for (const char* t : {"-12.3", "0", "4"}) ok(tenths, t);
  no(tenths, "0.25");
  ok(compile(R"({"type": "integer", "multipleOf": 0.001})"), "17");
  // An integer is a multiple of p / q (lowest terms) when it is one of p: 2.5 -> 5, 0.5 -> 1.
  Grammar halves = compile(R"({"type": "integer", "multipleOf": 2.5, "minimum": -20})");
  for (int v = -40; v <= 40; ++v) expect(halves, std::to_string(v), v >= -20 && v % 5 == 0);
  ok(compile(R"({"type": "integer", "multipleOf": 0.5})"), "3");
  no(compile(R"({"type": "integer", "multipleOf": 1.5})"), "4");

  // Anything else is refused, naming the keyword.
  for (const char* s :
       {R"({"type": "number", "multipleOf": 2.5})", R"({"type": "integer", "multipleOf": 1001})",
        R"({"type": "integer", "multipleOf": 5, "minimum": 7})",
        R"({"type": "integer", "multipleOf": 5, "maximum": -7})",
        R"({"type": "integer", "multipleOf": 3, "minimum": -1e16})",
        R"({"type": "integer", "multipleOf": 2, "minimum": 0, "maximum": 100000})",
        R"({"type": "integer", "multipleOf": 0})"}) {
    EXPECT_NE(refusal(s).find("multipleOf"), std::string::npos) << s << ": " << refusal(s);
  }
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedNamingThePointer) {
  for (const char* s :
       {R"({"properties": {"a": {"contains": {}}}})", R"({"if": {}, "then": {"type": "string"}})",
        R"({"unevaluatedProperties": false})", R"({"not": {"type": "string", "format": "date"}})",
        R"({"type": "number", "multipleOf": 0.5})", R"({"type": "blob"})",
        R"({"properties": {"a": 3}})"}) {
    EXPECT_NE(refusal(s), "") << s;
  }
  EXPECT_NE(refusal(R"({"properties": {"a": {"contains": {}}}})").find("/properties/a/contains"),
            std::string::npos);
  // Annotations and keywords outside the vocabulary are not constraints.
  Grammar g = compile(R"({"title": "t", "description": "d", "_format": "x", "x-y": 1,
                          "examples": [1], "type": "integer", "$comment": "c"})");
  ok(g, "1");
}

TEST(JsonSchema, DependentRequiredBothForms) {
  for (const char* schema : {R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
            "dependentRequired": {"a": ["b"]}})",
                             R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
            "dependencies": {"a": ["b"]}})"}) {
    Grammar g = compile(schema);
    ok(g, "{}");
    ok(g, R"({"b": 1})");
    ok(g, R"({"c": 1})");
    ok(g, R"({"a": 1, "b": 2})");
    ok(g, R"({"a": 1, "b": 2, "c": 3})");
    no(g, R"({"a": 1})");
    no(g, R"({"a": 1, "c": 3})");
  }
  // Chained: a needs b, b needs c. Undeclared names are additional properties.
  Grammar chain = compile(R"({"type": "object", "dependentRequired": {"a": ["b"], "b": ["c"]}})");
  ok(chain, R"({"c": 1})");
  ok(chain, R"({"b": 1, "c": 2})");
  ok(chain, R"({"a": 1, "b": 2, "c": 3})");
  no(chain, R"({"a": 1, "b": 2})");
  no(chain, R"({"b": 2})");
  no(chain, R"({"a": 1, "c": 3})");
  // Only objects are constrained; a trigger that cannot appear or a rule already met is a no-op.
  Grammar any = compile(R"({"dependencies": {"a": ["b"]}})");
  ok(any, R"("x")");
  ok(any, "[1]");
  no(any, R"({"a": 1})");
  Grammar never = compile(R"({"properties": {"a": false}, "dependentRequired": {"a": ["b"]}})");
  ok(never, "{}");
  no(never, R"({"a": 1, "b": 2})");
  Grammar met = compile(R"({"required": ["b"], "dependentRequired": {"a": ["b"]}})");
  ok(met, R"({"a": 1, "b": 2})");
  no(met, R"({"a": 1})");
  // The trigger is required: the rule always applies.
  Grammar always = compile(R"({"required": ["a"], "dependentRequired": {"a": ["b"]}})");
  ok(always, R"({"a": 1, "b": 2})");
  no(always, R"({"a": 1})");
  EXPECT_NE(refusal(R"({"dependentRequired": {"a": "b"}})"), "");
  EXPECT_NE(refusal(R"({"dependentRequired": {"a": [1]}})"), "");
}

TEST(JsonSchema, DependentSchemasMergeWhenTheTriggerIsPresent) {
  for (const char* schema : {R"({"type": "object", "properties": {"a": {}, "b": {}},
            "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}},
                                       "required": ["b"]}}})",
                             R"({"type": "object", "properties": {"a": {}, "b": {}},
            "dependencies": {"a": {"properties": {"b": {"type": "integer"}},
                                   "required": ["b"]}}})"}) {
    Grammar g = compile(schema);
    ok(g, "{}");
    ok(g, R"({"b": "x"})");
    ok(g, R"({"a": 1, "b": 2})");
    no(g, R"({"a": 1, "b": "x"})");
    no(g, R"({"a": 1})");
  }
  Grammar forbid = compile(R"({"properties": {"a": {}, "b": {}},
                               "dependentSchemas": {"a": false}})");
  ok(forbid, R"({"b": 1})");
  no(forbid, R"({"a": 1})");
  // A closed object cannot take the dependent schema's other properties: refused, not loosened.
  EXPECT_NE(refusal(R"({"properties": {"a": {}}, "additionalProperties": false,
                        "dependentSchemas": {"a": {"properties": {"c": {}}}}})"),
            "");
  // More rules than cases the compiler will write out.
  EXPECT_NE(refusal(R"({"dependentRequired": {"a": ["z"], "b": ["z"], "c": ["z"], "d": ["z"],
                                               "e": ["z"]}})"),
            "");
}

TEST(JsonSchema, NotRequiredAndNotType) {
  Grammar g = compile(R"({"type": "object", "not": {"required": ["b"]}})");
  ok(g, R"({"a": 1})");
  no(g, R"({"a": 1, "b": 2})");
  Grammar t = compile(R"({"type": ["string", "null"], "not": {"type": "null"}})");
  ok(t, R"("s")");
  no(t, "null");
}

// "not" split by type: a type the negated schema cannot have stays whole, scalars lose the
// negated schema's values, a type it takes whole (only vacuous keywords) goes.
TEST(JsonSchema, NotOfScalarsEnumsAndRequiredLists) {
  Grammar e = compile(R"({"type": "string", "not": {"enum": ["delayed"]}})");
  ok(e, R"("delaye")");
  ok(e, R"("delayedx")");
  no(e, R"("delayed")");
  no(e, R"("\u0064elayed")");
  Grammar p = compile(R"({"not": {"pattern": "a"}})");
  ok(p, R"("bcd")");
  no(p, R"("cat")");
  no(p, R"("c\u0061t")");  // the negated pattern sees through escapes
  for (const char* v : {"1", "null", "true", "{}", "[]"}) no(p, v);
  Grammar len = compile(R"({"not": {"type": "string", "maxLength": 2}})");
  ok(len, R"("abc")");
  no(len, R"("ab")");
  for (const char* v : {"1", "null", "{}", "[1]"}) ok(len, v);
  Grammar twice = compile(R"({"not": {"not": {"type": "integer", "minimum": 3}}})");
  ok(twice, "3");
  no(twice, "2");
  no(twice, R"("3")");
  Grammar en = compile(R"({"enum": ["a", "b", 1], "not": {"type": "string"}})");
  ok(en, "1");
  no(en, R"("a")");
  Grammar cn = compile(R"({"type": ["integer", "null"], "not": {"const": null}})");
  ok(cn, "5");
  no(cn, "null");
  Grammar req = compile(R"({"type": "object", "not": {"required": ["a", "b"]}})");
  ok(req, "{}");
  ok(req, R"({"a": 1})");
  ok(req, R"({"b": 1})");
  no(req, R"({"a": 1, "b": 2})");
  Grammar untyped = compile(R"({"not": {"required": ["a"]}})");  // non-objects all have "a"
  ok(untyped, R"({"b": 1})");
  no(untyped, R"({"a": 1})");
  no(untyped, "1");
  // Where the complement would not be exact: refused, naming the "not".
  for (const char* s : {R"({"not": {"type": "object", "minProperties": 1}})",
                        R"({"type": "number", "not": {"minimum": 3}})",
                        R"({"type": "number", "not": {"type": "integer"}})",
                        R"({"type": "string", "not": {"format": "date"}})"}) {
    EXPECT_NE(refusal(s).find("/not"), std::string::npos) << s;
  }
}

TEST(JsonSchema, WhitespaceIsBoundedAndNeverAroundTheValue) {
  JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "array"}}})";
  Grammar c = compile(schema, compact);
  ok(c, R"({"a":[1,2]})");
  no(c, R"({"a": [1,2]})");
  JsonSchemaOptions two;
  two.max_whitespace = 2;
  Grammar w = compile(schema, two);
  ok(w, "{\"a\" :\t\n[1 ,  2]}");
  no(w, "{\"a\":   [1]}");
  no(w, " {\"a\":[1]}");
  no(w, "{\"a\":[1]}\n");
}

// Python's json.dumps(data, ensure_ascii=False): ", " and ": " separators.
std::string python_dumps(const Json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() > 1) out += ", ";
      out += Json(it.key()).dump();
      out += ": ";
      out += python_dumps(it.value());
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      out += python_dumps(v[i]);
    }
    return out + "]";
  }
  return v.dump();
}

std::string maskbench_file(const std::string& name) {
  std::string cmd = "tar -xJf ";
  cmd += LIFT_SOURCE_DIR;
  cmd += "/../shared/structured/maskbench-dev.tar.xz dev/";
  cmd += name;
  cmd += " -O";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// Real schemas of the developer subset (function calls, nested refs, oneOf by type, enums,
// formats): every test instance judged as the file says.
TEST(JsonSchemaMaskBench, DevFilesJudgeEveryInstance) {
  for (const char* name : {"BFCL_java_0.json"}) {
    const std::string text = maskbench_file(name);
    ASSERT_FALSE(text.empty()) << name;
    const Json doc = Json::parse(text);
    const Grammar g = json_schema_grammar(doc.at("schema"));
    for (const Json& t : doc.at("tests")) {
      expect(g, python_dumps(t.at("data")), t.at("valid").get<bool>());
    }
  }
}

}  // namespace
}  // namespace lift::structured
