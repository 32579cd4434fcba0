// A sandboxed Jinja engine for chat templates: jinja2 semantics as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, tojson = json.dumps).
// No I/O: include/import/extends are errors. Rendering is bounded by RenderLimits.
//
//   RL_ASSIGN_OR_RETURN(auto t, jinja::Template::parse("{{ greeting }}, {{ name | upper }}"));
//   jinja::Object vars;
//   vars.set("greeting", jinja::Value::string("hi"));
//   RL_ASSIGN_OR_RETURN(std::string out, t.render(vars));
#pragma once

#include <memory>
#include <string>

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/value.h"
#include "core/status.h"

namespace rl::jinja {

class Template {
 public:
  // Parses once; errors name the line ("line 3: unknown tag 'foo'").
  static Result<Template> parse(const std::string& source);

  // Thread-safe: the parsed tree is immutable and each call has its own interpreter. `variables` are the
  // template's globals, next to the builtins (range, namespace, dict, raise_exception, strftime_now).
  Result<std::string> render(const Object& variables, const RenderLimits& limits = {},
                             const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace rl::jinja
