// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with the HTTP status that goes with
// them. Every way a request can fail ends as one of these; a client's mistake is always a 4xx.
#pragma once

#include <string>

#include "core/json.h"

namespace rl::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" → null
  std::string code;   // "" → null

  OrderedJson to_json() const;
  std::string body() const;
};

// 400 naming the offending parameter.
ApiError invalid_param(const std::string& param, const std::string& message);
ApiError bad_request(const std::string& message, const std::string& code = "");
ApiError not_found(const std::string& message, const std::string& code = "not_found");
ApiError unauthorized();
ApiError method_not_allowed(const std::string& method, const std::string& path);
ApiError payload_too_large(size_t limit_bytes);
ApiError overloaded(const std::string& message);
ApiError internal_error(const std::string& message);

}  // namespace rl::server
