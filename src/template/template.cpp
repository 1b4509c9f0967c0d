#include "template/template.h"

#include "template/interpreter.h"
#include "template/parser.h"

namespace lift::tmpl {

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const Object& context, const RenderOptions& opts) const {
  return run_template(*body_, context, opts);
}

}  // namespace lift::tmpl
