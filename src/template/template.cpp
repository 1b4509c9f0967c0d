#include "template/template.h"

#include "template/interpreter.h"
#include "template/parser.h"
#include "tokenizer/utf8.h"

namespace lift::tmpl {

namespace {

// Python's Jinja2 only ever sees text: a source that is not UTF-8 is refused up front.
std::string_view checked_utf8(std::string_view source) {
  if (!is_valid_utf8(source)) throw TemplateError("the template source is not valid UTF-8");
  return source;
}

}  // namespace

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(checked_utf8(source)))) {}

std::string Template::render(const Object& context, const RenderOptions& opts) const {
  return run_template(*body_, context, opts);
}

}  // namespace lift::tmpl
