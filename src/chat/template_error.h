// The error type of the Jinja engine. It is thrown only inside src/chat and always caught at the public API
// (jinja.h / chat_template.h), which turns it into an rl::Status; nothing outside this module sees it.
#pragma once

#include <stdexcept>
#include <string>

namespace rl::jinja {

class TemplateError : public std::runtime_error {
 public:
  TemplateError(int line, const std::string& message)
      : std::runtime_error(message), line_(line), message_(message) {}
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  int line_;
  std::string message_;
};

[[noreturn]] inline void fail(int line, const std::string& message) { throw TemplateError(line, message); }

}  // namespace rl::jinja
