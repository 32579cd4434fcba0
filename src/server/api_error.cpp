#include "server/api_error.h"

namespace rl::server {

OrderedJson ApiError::to_json() const {
  OrderedJson e = OrderedJson::object();
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? OrderedJson() : OrderedJson(param);
  e["code"] = code.empty() ? OrderedJson() : OrderedJson(code);
  OrderedJson out = OrderedJson::object();
  out["error"] = std::move(e);
  return out;
}

std::string ApiError::body() const {
  return to_json().dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

ApiError invalid_param(const std::string& param, const std::string& message) {
  return ApiError{400, message, "invalid_request_error", param, ""};
}

ApiError bad_request(const std::string& message, const std::string& code) {
  return ApiError{400, message, "invalid_request_error", "", code};
}

ApiError not_found(const std::string& message, const std::string& code) {
  return ApiError{404, message, "invalid_request_error", "", code};
}

ApiError unauthorized() {
  return ApiError{401, "Incorrect or missing API key: send it as \"Authorization: Bearer <key>\"",
                  "authentication_error", "", "invalid_api_key"};
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
  return ApiError{405, "Method " + method + " is not allowed on " + path, "invalid_request_error", "",
                  "method_not_allowed"};
}

ApiError payload_too_large(size_t limit_bytes) {
  return ApiError{413, "Request body is larger than the limit of " + std::to_string(limit_bytes) + " bytes",
                  "invalid_request_error", "", "payload_too_large"};
}

ApiError overloaded(const std::string& message) {
  return ApiError{503, message, "server_overloaded", "", "queue_full"};
}

ApiError internal_error(const std::string& message) {
  return ApiError{500, message, "server_error", "", "internal_error"};
}

}  // namespace rl::server
