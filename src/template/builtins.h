// What templates call by name: filters (x | trim), tests (x is defined), attribute and item
// access with the methods of str, dict and list, slicing, and the operators. Each follows
// Jinja2 and Python semantics; failures throw TemplateError with Python's wording where it
// helps.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "template/value.h"

namespace lift::tmpl {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(std::string_view name, const Value& v, const CallArgs& args);
bool apply_test(std::string_view name, const Value& v, const CallArgs& args);

// obj.name: a method of str/dict/list if there is one with that name, else the dict key
// (with_keys false: Python's getattr, methods and namespace attributes only).
Value get_attr(const Value& obj, const std::string& name, bool with_keys = true);
// obj[key]: the element, key or character; else a method of that name; else Undefined.
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step);

// op is one of + - * / // % **.
Value binary_op(std::string_view op, const Value& a, const Value& b);
// Python's `a in b`.
bool contains(const Value& container, const Value& item);

}  // namespace lift::tmpl
