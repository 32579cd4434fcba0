#include "grammar/json_schema.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "grammar/regex.h"

namespace rl::grammar {

namespace {

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",  "$schema",
                                          "$id",      "$comment",    "deprecated", "readOnly", "writeOnly"};
  return k;
}
const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {
      "type",     "properties", "required",  "additionalProperties", "enum",      "const",
      "anyOf",    "oneOf",      "allOf",     "$ref",                 "$defs",     "definitions",
      "items",    "prefixItems", "minItems", "maxItems",             "minLength", "maxLength",
      "pattern",  "format",     "minimum",   "maximum",              "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

// Formats as regexes over JSON string content (every format's language needs no escapes).
const std::unordered_map<std::string, std::string>& format_regexes() {
  // Day ranges per month (29 February in any year).
  static const std::string kDate =
      "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-9])|(0[13-9]|1[0-2])-30|(0[13578]|1[02])-31)";
  static const std::string kTime = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string kByte = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  // Labels of at most 32 characters, so that no generated name passes the 253-character limit of a host name.
  static const std::string kLabel = "[a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?";
  static const std::unordered_map<std::string, std::string> k = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDate + "T" + kTime},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"email", "[a-zA-Z0-9_+-]{1,32}(\\.[a-zA-Z0-9_+-]{1,32}){0,3}@" + kLabel + "(\\." + kLabel + "){0,3}\\.[a-zA-Z]{2,12}"},
      {"ipv4", kByte + "(\\." + kByte + "){3}"},
      {"ipv6", "[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}"},
      {"hostname", kLabel + "(\\." + kLabel + "){0,5}"},
      {"uri", "https?://" + kLabel + "(\\." + kLabel + "){0,5}(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]{0,64}){0,8}"},
  };
  return k;
}

std::string digits9(int n) { return std::string(static_cast<size_t>(n), '9'); }

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder* b, const OrderedJson& root, std::string prefix)
      : b_(b), root_(root), prefix_(std::move(prefix)) {}

  Result<RuleId> schema_rule(const OrderedJson& s, int depth) {
    if (depth > kMaxSchemaDepth) return Status::error("JSON schema nested deeper than " + std::to_string(kMaxSchemaDepth));
    if (++num_nodes_ > kMaxSchemaNodes) return Status::error("JSON schema has more than " + std::to_string(kMaxSchemaNodes) + " subschemas");
    RuleId r = b_->declare(prefix_ + "s" + std::to_string(b_->num_rules()));
    RL_ASSIGN_OR_RETURN(ExprId e, schema_expr(s, depth));
    b_->define(r, e);
    return r;
  }

  RuleId ws() {
    if (ws_ < 0) {
      ws_ = b_->declare(prefix_ + "ws");
      // One space, or a newline and indentation: enough for compact and pretty-printed JSON, and too little for a
      // model to spend its tokens on whitespace.
      b_->define(ws_, b_->optional(b_->alt({b_->literal(" "), b_->seq({b_->literal("\n"), b_->repeat(b_->char_class({{' ', ' '}}), 0, kMaxIndent)})})));
    }
    return ws_;
  }
  ExprId W() { return b_->ref(ws()); }

  // The generic JSON value rules (json_object mode, untyped schemas).
  RuleId any_value() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = b_->declare(prefix_ + "value");
    any_object_ = b_->declare(prefix_ + "object");
    RuleId arr = b_->declare(prefix_ + "array");
    ExprId v = b_->ref(any_value_);
    b_->define(any_value_, b_->alt({b_->ref(any_object_), b_->ref(arr), b_->ref(string_rule()), number_expr(false),
                                    b_->literal("true"), b_->literal("false"), b_->literal("null")}));
    ExprId kv = b_->seq({b_->ref(string_rule()), W(), b_->literal(":"), W(), v});
    b_->define(any_object_,
               b_->seq({b_->literal("{"), W(),
                        b_->optional(b_->seq({kv, b_->star(b_->seq({W(), b_->literal(","), W(), kv}))})), W(),
                        b_->literal("}")}));
    b_->define(arr, b_->seq({b_->literal("["), W(),
                             b_->optional(b_->seq({v, b_->star(b_->seq({W(), b_->literal(","), W(), v}))})), W(),
                             b_->literal("]")}));
    return any_value_;
  }
  RuleId any_object() {
    any_value();
    return any_object_;
  }

  ExprId json_char() {
    if (char_ < 0) {
      char_ = b_->declare(prefix_ + "char");
      ExprId hex = b_->char_class({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
      b_->define(char_, b_->alt({b_->char_class({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
                                 b_->seq({b_->literal("\\"), b_->alt({b_->char_class({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                                       unicode_escape(hex)})})}));
    }
    return b_->ref(char_);
  }
  // \uXXXX without the surrogate range D800-DFFF (a lone surrogate escape is rejected by strict parsers).
  ExprId unicode_escape(ExprId hex) {
    ExprId not_d = b_->char_class({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}});
    return b_->seq({b_->literal("u"), b_->alt({b_->seq({not_d, b_->repeat(hex, 3, 3)}),
                                               b_->seq({b_->char_class({{'d', 'd'}, {'D', 'D'}}),
                                                        b_->char_class({{'0', '7'}}), b_->repeat(hex, 2, 2)})})});
  }
  RuleId string_rule() {
    if (string_ < 0) {
      string_ = b_->declare(prefix_ + "string");
      b_->define(string_, b_->seq({b_->literal("\""), b_->star(json_char()), b_->literal("\"")}));
    }
    return string_;
  }

  ExprId digits(int min, int max) { return b_->repeat(b_->char_class({{'0', '9'}}), min, max); }
  ExprId int_magnitude() { return b_->alt({b_->literal("0"), b_->seq({b_->char_class({{'1', '9'}}), digits(0, 15)})}); }
  ExprId number_expr(bool integer) {
    ExprId i = b_->seq({b_->optional(b_->literal("-")), int_magnitude()});
    if (integer) return i;
    return b_->seq({i, b_->optional(b_->seq({b_->literal("."), digits(1, 16)})),
                    b_->optional(b_->seq({b_->char_class({{'e', 'e'}, {'E', 'E'}}), b_->optional(b_->char_class({{'+', '+'}, {'-', '-'}})), digits(1, 2)}))});
  }

  // Decimal strings (no leading zeros) of the integers in [lo, hi], 0 <= lo <= hi.
  ExprId same_len(const std::string& a, const std::string& b) {
    if (a.empty()) return b_->empty();
    if (a[0] == b[0]) return b_->seq({b_->literal(a.substr(0, 1)), same_len(a.substr(1), b.substr(1))});
    const size_t rest = a.size() - 1;
    std::vector<ExprId> opts;
    opts.push_back(b_->seq({b_->literal(a.substr(0, 1)), same_len(a.substr(1), digits9(static_cast<int>(rest)))}));
    if (b[0] - a[0] > 1)
      opts.push_back(b_->seq({b_->char_class({{static_cast<char32_t>(a[0] + 1), static_cast<char32_t>(b[0] - 1)}}),
                              digits(static_cast<int>(rest), static_cast<int>(rest))}));
    opts.push_back(b_->seq({b_->literal(b.substr(0, 1)), same_len(std::string(rest, '0'), b.substr(1))}));
    return b_->alt(std::move(opts));
  }
  ExprId int_range(int64_t lo, int64_t hi) {
    std::vector<ExprId> opts;
    const std::string hs = std::to_string(hi);
    for (size_t n = std::to_string(lo).size(); n <= hs.size(); ++n) {
      const int64_t first = n == 1 ? 0 : static_cast<int64_t>(std::pow(10.0, static_cast<double>(n - 1)));
      const int64_t a = std::max(lo, first);
      const std::string bs = n == hs.size() ? hs : digits9(static_cast<int>(n));
      opts.push_back(same_len(std::to_string(a), bs));
    }
    return b_->alt(std::move(opts));
  }
  ExprId int_at_least(int64_t lo) {
    const int n = static_cast<int>(std::to_string(lo).size());
    std::vector<ExprId> opts = {int_range(lo, std::stoll(digits9(n)))};
    if (n < 16) opts.push_back(b_->seq({b_->char_class({{'1', '9'}}), digits(n, 15)}));
    return b_->alt(std::move(opts));
  }

  Result<ExprId> integer_expr(const OrderedJson& s) {
    std::optional<int64_t> lo, hi;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      const OrderedJson& v = s[k];
      if (!v.is_number()) return Status::error(std::string("JSON schema keyword '") + k + "' must be a number");
      const double d = v.get<double>();
      if (std::fabs(d) > 1e15) return Status::error(std::string("JSON schema '") + k + "' beyond +-1e15 is not supported");
      const std::string key = k;
      if (key == "minimum") lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::ceil(d)));
      if (key == "exclusiveMinimum") lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::floor(d)) + 1);
      if (key == "maximum") hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::floor(d)));
      if (key == "exclusiveMaximum") hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::ceil(d)) - 1);
    }
    if (!lo && !hi) return number_expr(true);
    if (lo && hi && *lo > *hi) return Status::error("JSON schema integer bounds are empty (minimum > maximum)");
    std::vector<ExprId> opts;
    // Negative part: -m for m in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
      const int64_t mlo = hi && *hi < 0 ? -*hi : 1;
      ExprId mag = lo ? int_range(mlo, -*lo) : int_at_least(mlo);
      opts.push_back(b_->seq({b_->literal("-"), mag}));
    }
    if (!hi || *hi >= 0) {
      const int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
      opts.push_back(hi ? int_range(a, *hi) : int_at_least(a));
    }
    return b_->alt(std::move(opts));
  }

  Result<ExprId> number_bounded(const OrderedJson& s) {
    bool any = false;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) any = any || s.contains(k);
    if (!any) return number_expr(false);
    auto int_bound = [&](const char* k, int64_t* out) -> Status {
      const OrderedJson& v = s[k];
      if (!v.is_number()) return Status::error(std::string("JSON schema keyword '") + k + "' must be a number");
      const double d = v.get<double>();
      if (d != std::floor(d) || d < 0 || d > 1e15)
        return Status::error(std::string("unsupported JSON schema keyword '") + k +
                             "' on a number with a negative or non-integer bound");
      *out = static_cast<int64_t>(d);
      return Status::ok();
    };
    if (s.contains("exclusiveMaximum")) return Status::error("unsupported JSON schema keyword 'exclusiveMaximum' on a number");
    ExprId frac = b_->optional(b_->seq({b_->literal("."), digits(1, 16)}));
    if (s.contains("exclusiveMinimum")) {
      int64_t m = 0;
      RL_RETURN_IF_ERROR(int_bound("exclusiveMinimum", &m));
      if (m != 0 || s.contains("minimum") || s.contains("maximum"))
        return Status::error("unsupported JSON schema keyword 'exclusiveMinimum' other than 0 alone on a number");
      // Positive numbers: integer part >= 1, or 0.<digits with a non-zero>.
      return b_->alt({b_->seq({int_at_least(1), frac}),
                      b_->seq({b_->literal("0."), digits(0, 15), b_->char_class({{'1', '9'}})})});
    }
    int64_t lo = 0;
    if (s.contains("minimum")) RL_RETURN_IF_ERROR(int_bound("minimum", &lo));
    if (!s.contains("maximum")) return b_->seq({int_at_least(lo), frac});
    int64_t hi = 0;
    RL_RETURN_IF_ERROR(int_bound("maximum", &hi));
    if (hi < lo) return Status::error("JSON schema number bounds are empty (minimum > maximum)");
    std::vector<ExprId> opts = {b_->literal(std::to_string(hi))};
    if (hi > lo) opts.push_back(b_->seq({int_range(lo, hi - 1), frac}));
    return b_->alt(std::move(opts));
  }

  Result<const OrderedJson*> resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#') return Status::error("JSON schema $ref '" + ref + "': only local references (#...) are supported");
    const OrderedJson* cur = &root_;
    size_t pos = 1;
    while (pos < ref.size()) {
      if (ref[pos] != '/') return Status::error("JSON schema $ref '" + ref + "' is not a JSON pointer");
      size_t next = ref.find('/', pos + 1);
      std::string part = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      std::string un;
      for (size_t i = 0; i < part.size(); ++i) {
        if (part[i] == '~' && i + 1 < part.size() && (part[i + 1] == '0' || part[i + 1] == '1')) {
          un.push_back(part[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          un.push_back(part[i]);
        }
      }
      if (cur->is_object() && cur->contains(un)) {
        cur = &(*cur)[un];
      } else if (cur->is_array() && !un.empty() && un.find_first_not_of("0123456789") == std::string::npos &&
                 un.size() < 9 && std::stoul(un) < cur->size()) {
        cur = &(*cur)[std::stoul(un)];
      } else {
        return Status::error("JSON schema $ref '" + ref + "' does not resolve");
      }
      if (next == std::string::npos) break;
      pos = next;
    }
    return cur;
  }

  Result<ExprId> object_expr(const OrderedJson& s, int depth) {
    std::vector<std::pair<std::string, const OrderedJson*>> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::error("JSON schema 'required' must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return Status::error("JSON schema 'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    static const OrderedJson kAny = OrderedJson::object();
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Status::error("JSON schema 'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items()) props.push_back({k, &v});
    }
    for (const std::string& r : required) {
      bool found = false;
      for (auto& p : props) found = found || p.first == r;
      if (!found) props.push_back({r, &kAny});
    }
    const OrderedJson* extra = nullptr;
    if (s.contains("additionalProperties")) {
      const OrderedJson& ap = s["additionalProperties"];
      if (ap.is_object()) extra = &ap;
      else if (!ap.is_boolean()) return Status::error("JSON schema 'additionalProperties' must be a boolean or a schema");
    }
    if (props.empty()) {
      if (s.contains("additionalProperties") && s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>())
        return b_->seq({b_->literal("{"), W(), b_->literal("}")});
      if (!extra) return b_->ref(any_object());
      RL_ASSIGN_OR_RETURN(RuleId v, schema_rule(*extra, depth + 1));
      ExprId kv = b_->seq({b_->ref(string_rule()), W(), b_->literal(":"), W(), b_->ref(v)});
      return b_->seq({b_->literal("{"), W(),
                      b_->optional(b_->seq({kv, b_->star(b_->seq({W(), b_->literal(","), W(), kv}))})), W(),
                      b_->literal("}")});
    }
    // rest[i]: properties i.. after at least one was written; first[i]: properties i.. with none written yet.
    const size_t n = props.size();
    std::vector<RuleId> rest(n + 1), first(n + 1);
    rest[n] = b_->declare(prefix_ + "rest");
    b_->define(rest[n], b_->empty());
    first[n] = rest[n];
    for (size_t i = n; i-- > 0;) {
      RL_ASSIGN_OR_RETURN(RuleId v, schema_rule(*props[i].second, depth + 1));
      const std::string key = OrderedJson(props[i].first).dump();
      ExprId kv = b_->seq({b_->literal(key), W(), b_->literal(":"), W(), b_->ref(v)});
      const bool req = required.count(props[i].first) > 0;
      rest[i] = b_->declare(prefix_ + "rest");
      first[i] = b_->declare(prefix_ + "first");
      ExprId with = b_->seq({W(), b_->literal(","), W(), kv, b_->ref(rest[i + 1])});
      b_->define(rest[i], req ? with : b_->alt({with, b_->ref(rest[i + 1])}));
      ExprId lead = b_->seq({kv, b_->ref(rest[i + 1])});
      b_->define(first[i], req ? lead : b_->alt({lead, b_->ref(first[i + 1])}));
    }
    return b_->seq({b_->literal("{"), W(), b_->ref(first[0]), W(), b_->literal("}")});
  }

  Result<ExprId> array_expr(const OrderedJson& s, int depth) {
    auto count = [&](const char* k, int64_t dflt, int64_t* out) -> Status {
      *out = dflt;
      if (!s.contains(k)) return Status::ok();
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0)
        return Status::error(std::string("JSON schema '") + k + "' must be a non-negative integer");
      *out = std::min<int64_t>(s[k].get<int64_t>(), kMaxRepeat + 1);
      return Status::ok();
    };
    int64_t min_items = 0, max_items = -1;
    RL_RETURN_IF_ERROR(count("minItems", 0, &min_items));
    RL_RETURN_IF_ERROR(count("maxItems", -1, &max_items));
    if (min_items > kMaxRepeat || max_items > kMaxRepeat)
      return Status::error("JSON schema minItems/maxItems above " + std::to_string(kMaxRepeat) + " are not supported");
    if (max_items >= 0 && max_items < min_items) return Status::error("JSON schema maxItems < minItems");
    std::vector<RuleId> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Status::error("JSON schema 'prefixItems' must be an array");
      for (const auto& p : s["prefixItems"]) {
        RL_ASSIGN_OR_RETURN(RuleId r, schema_rule(p, depth + 1));
        prefix.push_back(r);
      }
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    std::optional<RuleId> item;
    if (s.contains("items")) {
      const OrderedJson& it = s["items"];
      if (it.is_boolean()) {
        if (it.get<bool>()) item = any_value();
      } else if (it.is_object()) {
        RL_ASSIGN_OR_RETURN(RuleId r, schema_rule(it, depth + 1));
        item = r;
      } else {
        return Status::error("JSON schema 'items' must be a schema (tuple arrays use 'prefixItems')");
      }
    } else if (k == 0) {
      item = any_value();
    }
    if (max_items >= 0 && max_items < k) return Status::error("JSON schema maxItems is below the prefixItems count");
    if (!item && min_items > k) return Status::error("JSON schema minItems exceeds prefixItems with items: false");
    ExprId sep = b_->seq({W(), b_->literal(","), W()});
    std::vector<ExprId> parts = {b_->literal("["), W()};
    for (int64_t i = 0; i < k; ++i) {
      if (i > 0) parts.push_back(sep);
      parts.push_back(b_->ref(prefix[i]));
    }
    if (item) {
      const int32_t lo = static_cast<int32_t>(std::max<int64_t>(0, min_items - k));
      const int32_t hi = max_items < 0 ? kUnbounded : static_cast<int32_t>(max_items - k);
      if (hi != 0) {
        ExprId it = b_->ref(*item);
        if (k > 0) {
          parts.push_back(b_->repeat(b_->seq({sep, it}), lo, hi));
        } else {
          ExprId list = b_->seq({it, b_->repeat(b_->seq({sep, it}), std::max(lo - 1, 0), hi == kUnbounded ? kUnbounded : hi - 1)});
          parts.push_back(lo == 0 ? b_->optional(list) : list);
        }
      }
    }
    parts.push_back(W());
    parts.push_back(b_->literal("]"));
    return b_->seq(std::move(parts));
  }

  Result<ExprId> string_expr(const OrderedJson& s) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern") || s.contains("format")) {
      if (has_len) return Status::error("unsupported JSON schema keyword 'minLength'/'maxLength' together with pattern or format");
      if (s.contains("pattern") && s.contains("format")) return Status::error("unsupported JSON schema keyword 'format' together with 'pattern'");
      std::string re;
      bool full = true;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) return Status::error("JSON schema 'pattern' must be a string");
        re = s["pattern"].get<std::string>();
        full = false;
      } else {
        if (!s["format"].is_string()) return Status::error("JSON schema 'format' must be a string");
        const std::string f = s["format"].get<std::string>();
        auto it = format_regexes().find(f);
        if (it == format_regexes().end()) return Status::error("unsupported JSON schema format '" + f + "'");
        re = it->second;
      }
      auto e = regex_to_expr(b_, re, true, full);
      if (!e) return Status::error("JSON schema pattern: " + e.message());
      return b_->seq({b_->literal("\""), *e, b_->literal("\"")});
    }
    if (!has_len) return b_->ref(string_rule());
    int64_t lo = 0, hi = -1;
    if (s.contains("minLength")) {
      if (!s["minLength"].is_number_integer() || s["minLength"].get<int64_t>() < 0) return Status::error("JSON schema 'minLength' must be a non-negative integer");
      lo = s["minLength"].get<int64_t>();
    }
    if (s.contains("maxLength")) {
      if (!s["maxLength"].is_number_integer() || s["maxLength"].get<int64_t>() < 0) return Status::error("JSON schema 'maxLength' must be a non-negative integer");
      hi = s["maxLength"].get<int64_t>();
    }
    if (lo > kMaxRepeat || hi > kMaxRepeat) return Status::error("JSON schema minLength/maxLength above " + std::to_string(kMaxRepeat) + " are not supported");
    if (hi >= 0 && hi < lo) return Status::error("JSON schema maxLength < minLength");
    return b_->seq({b_->literal("\""), b_->repeat(json_char(), static_cast<int32_t>(lo), hi < 0 ? kUnbounded : static_cast<int32_t>(hi)),
                    b_->literal("\"")});
  }

  Result<ExprId> typed_expr(const std::string& type, const OrderedJson& s, int depth) {
    if (type == "object") return object_expr(s, depth);
    if (type == "array") return array_expr(s, depth);
    if (type == "string") return string_expr(s);
    if (type == "integer") return integer_expr(s);
    if (type == "number") return number_bounded(s);
    if (type == "boolean") return b_->alt({b_->literal("true"), b_->literal("false")});
    if (type == "null") return b_->literal("null");
    return Status::error("JSON schema type '" + type + "' is unknown");
  }

  Result<ExprId> schema_expr(const OrderedJson& s, int depth) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_->ref(any_value());
      return Status::error("JSON schema 'false' matches nothing");
    }
    if (!s.is_object()) return Status::error("a JSON schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      (void)v;
      if (!supported_keywords().count(k) && !annotation_keywords().count(k))
        return Status::error("unsupported JSON schema keyword '" + k + "'");
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Status::error("JSON schema '$ref' must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      auto it = ref_rules_.find(ref);
      if (it != ref_rules_.end()) return b_->ref(it->second);
      RL_ASSIGN_OR_RETURN(const OrderedJson* target, resolve(ref));
      RuleId r = b_->declare(prefix_ + "ref");
      ref_rules_[ref] = r;
      RL_ASSIGN_OR_RETURN(ExprId e, schema_expr(*target, depth + 1));
      b_->define(r, e);
      return b_->ref(r);
    }
    if (s.contains("const")) return b_->literal(s["const"].dump());
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return Status::error("JSON schema 'enum' must be a non-empty array");
      std::vector<ExprId> opts;
      for (const auto& v : s["enum"]) opts.push_back(b_->literal(v.dump()));
      return b_->alt(std::move(opts));
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_array() || s[k].empty()) return Status::error(std::string("JSON schema '") + k + "' must be a non-empty array");
      std::vector<ExprId> opts;
      for (const auto& sub : s[k]) {
        // Sibling keywords (e.g. a shared "type") apply to every branch.
        OrderedJson merged = sub;
        if (merged.is_object())
          for (const auto& [kk, vv] : s.items())
            if (kk != k && !annotation_keywords().count(kk) && !merged.contains(kk)) merged[kk] = vv;
        RL_ASSIGN_OR_RETURN(RuleId r, schema_rule(merged, depth + 1));
        opts.push_back(b_->ref(r));
      }
      return b_->alt(std::move(opts));
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].empty()) return Status::error("JSON schema 'allOf' must be a non-empty array");
      OrderedJson merged = s;
      merged.erase("allOf");
      for (const auto& sub0 : s["allOf"]) {
        const OrderedJson* sub = &sub0;
        if (sub->is_object() && sub->contains("$ref")) {
          if (!(*sub)["$ref"].is_string()) return Status::error("JSON schema '$ref' must be a string");
          RL_ASSIGN_OR_RETURN(sub, resolve((*sub)["$ref"].get<std::string>()));
        }
        if (!sub->is_object()) return Status::error("unsupported JSON schema keyword 'allOf' (of a non-object schema)");
        for (const auto& [k, v] : sub->items()) {
          if (annotation_keywords().count(k)) continue;
          if (k == "properties") {
            for (const auto& [pk, pv] : v.items()) merged["properties"][pk] = pv;
          } else if (k == "required") {
            for (const auto& r : v) merged["required"].push_back(r);
          } else if (!merged.contains(k) || merged[k] == v) {
            merged[k] = v;
          } else {
            return Status::error("unsupported JSON schema keyword 'allOf' (conflicting '" + k + "')");
          }
        }
      }
      return schema_expr(merged, depth + 1);
    }
    if (!s.contains("type")) {
      // Untyped: infer from the keywords present, else any value.
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) return object_expr(s, depth);
      if (s.contains("items") || s.contains("prefixItems")) return array_expr(s, depth);
      if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) return string_expr(s);
      if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
        return number_bounded(s);
      return b_->ref(any_value());
    }
    const OrderedJson& t = s["type"];
    if (t.is_string()) return typed_expr(t.get<std::string>(), s, depth);
    if (!t.is_array() || t.empty()) return Status::error("JSON schema 'type' must be a string or a non-empty array");
    std::vector<ExprId> opts;
    for (const auto& one : t) {
      if (!one.is_string()) return Status::error("JSON schema 'type' entries must be strings");
      RL_ASSIGN_OR_RETURN(ExprId e, typed_expr(one.get<std::string>(), s, depth));
      opts.push_back(e);
    }
    return b_->alt(std::move(opts));
  }

 private:
  GrammarBuilder* b_;
  const OrderedJson& root_;
  std::string prefix_;
  int num_nodes_ = 0;
  RuleId ws_ = -1, any_value_ = -1, any_object_ = -1, char_ = -1, string_ = -1;
  std::unordered_map<std::string, RuleId> ref_rules_;
};

}  // namespace

Result<RuleId> add_json_schema(GrammarBuilder* b, const OrderedJson& schema, const std::string& prefix) {
  SchemaCompiler c(b, schema, prefix);
  auto r = c.schema_rule(schema, 0);
  RL_RETURN_IF_ERROR(b->status());
  return r;
}

Result<std::shared_ptr<const CompiledGrammar>> json_schema_grammar(const OrderedJson& schema) {
  GrammarBuilder b;
  RL_ASSIGN_OR_RETURN(RuleId root, add_json_schema(&b, schema, ""));
  return compile(b, root);
}

Result<std::shared_ptr<const CompiledGrammar>> json_object_grammar() {
  GrammarBuilder b;
  SchemaCompiler c(&b, OrderedJson::object(), "");
  RuleId root = c.any_object();
  return compile(b, root);
}

}  // namespace rl::grammar
