// Python's string semantics on UTF-8 text, as chat templates see them through Jinja2:
// lengths, indices and slices count code points; strip() and split() know Unicode
// whitespace; str() and repr() of floats and strings print what CPython prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lift::tmpl {

// Code points of valid UTF-8 (invalid bytes decode as U+FFFD; request text is validated
// before it gets here, so this only keeps hostile template literals from misbehaving).
std::vector<char32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t count_code_points(std::string_view s);
// At most max_cps code points of s, as valid UTF-8 (for error messages quoting text).
std::string excerpt_utf8(std::string_view s, size_t max_cps);

// str.isspace() for one code point.
bool py_isspace(char32_t c);

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace, otherwise any code point of
// *chars.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split(): sep == nullopt splits on runs of whitespace (dropping empty parts);
// maxsplit < 0 means no limit. Throws lift::Error for an empty separator, as Python raises.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code
// points, as Python does.
std::string py_replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                       int64_t count);
// Case mappings for ASCII letters; other code points are left as they are (see
// docs/templates.md).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

// repr(str): quotes chosen as Python does, control characters escaped.
std::string py_repr_string(std::string_view s);
// repr(float) == str(float): the shortest text that reads back as the same double.
std::string py_float_str(double d);
// json.dumps(str, ensure_ascii=False).
void append_json_string(std::string& out, std::string_view s);

}  // namespace lift::tmpl
