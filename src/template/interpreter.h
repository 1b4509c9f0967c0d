// Runs a parsed template: statements, expression evaluation, scopes (each for-loop
// iteration and macro call gets its own, as in Jinja2), loop variables and the global
// functions (range, namespace, dict, raise_exception, strftime_now).
#pragma once

#include <string>

#include "template/ast.h"
#include "template/template.h"

namespace lift::tmpl {

std::string run_template(const Body& body, const Object& context, const RenderOptions& opts);

}  // namespace lift::tmpl
