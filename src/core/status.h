// Recoverable errors as values (design.md §1.4): a Status names what went wrong and where; Result<T> carries
// either a value or that Status. Invariant violations use RL_CHECK (check.h) instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace rl {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  const Status& status() const { return *this; }  // lets RL_RETURN_IF_ERROR take a Status or a Result

  // Prefixes context: Status::error("bad dtype").with_context("model.safetensors") → "model.safetensors: bad dtype".
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return Status(context + ": " + message_, true);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  const std::string& message() const { return status().message(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rl

// Propagates a failed Status/Result from the enclosing function.
#define RL_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    auto _rl_st = (expr);                                 \
    if (!_rl_st.is_ok()) return ::rl::Status(_rl_st.status()); \
  } while (0)

#define RL_CONCAT_INNER(a, b) a##b
#define RL_CONCAT(a, b) RL_CONCAT_INNER(a, b)
// RL_ASSIGN_OR_RETURN(auto x, make_x()); — binds the value or returns the error.
#define RL_ASSIGN_OR_RETURN(lhs, expr) RL_ASSIGN_OR_RETURN_IMPL(RL_CONCAT(_rl_res_, __LINE__), lhs, expr)
#define RL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
