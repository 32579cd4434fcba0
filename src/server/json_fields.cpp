#include "server/json_fields.h"

#include <cmath>
#include <cstdio>

namespace rl::server {

const OrderedJson* field(const OrderedJson& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* json_type_name(const OrderedJson& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

MaybeError read_bool(const OrderedJson& obj, const char* name, bool* out) {
  const OrderedJson* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    return invalid_param(name, std::string("'") + name + "' must be a boolean, got " + json_type_name(*v));
  }
  *out = v->get<bool>();
  return std::nullopt;
}

MaybeError as_int(const OrderedJson& v, const std::string& what, int64_t lo, int64_t hi, int64_t* out) {
  char range_buf[64];
  std::snprintf(range_buf, sizeof range_buf, "[%lld, %lld]", static_cast<long long>(lo), static_cast<long long>(hi));
  const std::string range = range_buf;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return invalid_param(what, "'" + what + "' must be in " + range + ", got " + v.dump());
    }
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return invalid_param(what, "'" + what + "' must be in " + range + ", got " + v.dump());
    *out = x;
    return std::nullopt;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d != std::floor(d)) return invalid_param(what, "'" + what + "' must be an integer, got " + v.dump());
    if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi))) {
      return invalid_param(what, "'" + what + "' must be in " + range + ", got " + v.dump());
    }
    *out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return invalid_param(what, "'" + what + "' must be an integer, got " + json_type_name(v));
}

MaybeError read_int(const OrderedJson& obj, const char* name, int64_t lo, int64_t hi,
                    std::optional<int64_t>* out) {
  const OrderedJson* v = field(obj, name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (MaybeError e = as_int(*v, name, lo, hi, &x)) return e;
  *out = x;
  return std::nullopt;
}

MaybeError read_number(const OrderedJson& obj, const char* name, double lo, double hi,
                       std::optional<double>* out) {
  const OrderedJson* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    return invalid_param(name, std::string("'") + name + "' must be a number, got " + json_type_name(*v));
  }
  double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "'%s' must be in [%g, %g], got %s", name, lo, hi, v->dump().c_str());
    return invalid_param(name, buf);
  }
  *out = d;
  return std::nullopt;
}

MaybeError read_string(const OrderedJson& obj, const char* name, std::optional<std::string>* out) {
  const OrderedJson* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    return invalid_param(name, std::string("'") + name + "' must be a string, got " + json_type_name(*v));
  }
  *out = v->get<std::string>();
  return std::nullopt;
}

MaybeError read_string_or_list(const OrderedJson& obj, const char* name, size_t max_items, size_t max_bytes,
                               std::vector<std::string>* out) {
  const OrderedJson* v = field(obj, name);
  if (!v) return std::nullopt;
  std::vector<std::string> items;
  const std::string n = name;
  if (v->is_string()) {
    items.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_items) {
      return invalid_param(n, "'" + n + "' has " + std::to_string(v->size()) + " entries; at most " +
                                  std::to_string(max_items) + " are allowed");
    }
    for (const auto& s : *v) {
      if (!s.is_string()) return invalid_param(n, "'" + n + "' entries must be strings, got " + json_type_name(s));
      items.push_back(s.get<std::string>());
    }
  } else {
    return invalid_param(n, "'" + n + "' must be a string or an array of strings, got " + json_type_name(*v));
  }
  for (const std::string& s : items) {
    if (s.empty()) return invalid_param(n, "'" + n + "' strings must not be empty");
    if (s.size() > max_bytes) {
      return invalid_param(n, "'" + n + "' strings must be at most " + std::to_string(max_bytes) + " bytes");
    }
  }
  *out = std::move(items);
  return std::nullopt;
}

}  // namespace rl::server
