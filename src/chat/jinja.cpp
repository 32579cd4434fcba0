#include "chat/jinja.h"

#include <exception>

#include "chat/builtins.h"
#include "chat/parser.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

Status to_status(const TemplateError& e) {
  if (e.line() <= 0) return Status::error(e.message());
  return Status::error("line " + std::to_string(e.line()) + ": " + e.message());
}

}  // namespace

Result<Template> Template::parse(const std::string& source) {
  try {
    Template t;
    t.body_ = std::make_shared<const Body>(parse_template(source));
    return t;
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return Status::error(std::string("template parse failed: ") + e.what());
  }
}

Result<std::string> Template::render(const Object& variables, const RenderLimits& limits,
                                     const RenderOptions& options) const {
  if (!body_) return Status::error("render of an empty (unparsed) template");
  try {
    Object globals;
    add_builtin_globals(&globals);
    for (const auto& kv : variables.items) globals.set(kv.first, kv.second);
    Interpreter interp(limits, options);
    return interp.render(*body_, globals);
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::bad_alloc&) {
    return Status::error("template render ran out of memory");
  } catch (const std::exception& e) {
    return Status::error(std::string("template render failed: ") + e.what());
  }
}

}  // namespace rl::jinja
