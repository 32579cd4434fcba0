// Typed, range-checked reads of optional fields of a JSON request object. A field that is absent or null leaves
// the output untouched; a present field of the wrong type or out of range yields a 400 that names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/api_error.h"

namespace rl::server {

using MaybeError = std::optional<ApiError>;

// Request bodies (and JSON inside their strings, e.g. tool-call arguments) nest at most this deep: a 400
// naming the limit above it. Real requests (messages, tools with JSON-schema parameters) stay far below.
constexpr int kMaxRequestDepth = 64;

// The field, or nullptr when absent or null.
const OrderedJson* field(const OrderedJson& obj, const char* name);
const char* json_type_name(const OrderedJson& v);

MaybeError read_bool(const OrderedJson& obj, const char* name, bool* out);
// Integers; a float with an integral value (3.0) is accepted.
MaybeError read_int(const OrderedJson& obj, const char* name, int64_t lo, int64_t hi, std::optional<int64_t>* out);
MaybeError read_number(const OrderedJson& obj, const char* name, double lo, double hi, std::optional<double>* out);
MaybeError read_string(const OrderedJson& obj, const char* name, std::optional<std::string>* out);
// A string or an array of strings (OpenAI's `stop`), at most max_items, each 1..max_bytes bytes.
MaybeError read_string_or_list(const OrderedJson& obj, const char* name, size_t max_items, size_t max_bytes,
                               std::vector<std::string>* out);
// An integer from a JSON value (not a field); `what` names it in the error.
MaybeError as_int(const OrderedJson& v, const std::string& what, int64_t lo, int64_t hi, int64_t* out);

}  // namespace rl::server
