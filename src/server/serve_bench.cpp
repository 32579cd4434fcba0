#include "server/serve_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>

#include "core/log.h"

namespace rl::server {
namespace {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Endpoint {
  std::string host;
  int port = 80;
};

Result<Endpoint> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return Status::error("--url must start with http:// (got \"" + url + "\")");
  std::string rest = url.substr(scheme.size());
  if (const size_t slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  Endpoint e;
  const size_t colon = rest.rfind(':');
  e.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) return Status::error("bad port in --url " + url);
    e.port = static_cast<int>(p);
  }
  if (e.host.empty()) return Status::error("no host in --url " + url);
  return e;
}

// An HTTP/1.1 response read incrementally: the status line and headers, then the body de-chunked (or up to
// Content-Length, or to the end of the connection), handed to on_body piece by piece.
class ResponseReader {
 public:
  // Consumes data; false on a malformed response.
  bool feed(std::string_view data, const std::function<void(std::string_view)>& on_body) {
    if (!header_done_) {
      head_.append(data);
      const size_t end = head_.find("\r\n\r\n");
      if (end == std::string::npos) return head_.size() < (64u << 10);
      std::string rest = head_.substr(end + 4);
      head_.resize(end);
      if (head_.rfind("HTTP/1.", 0) != 0 || head_.size() < 12) return false;
      status_ = std::atoi(head_.c_str() + 9);
      std::string lower = head_;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked_ = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
      if (const size_t cl = lower.find("\r\ncontent-length:"); cl != std::string::npos) {
        remaining_ = std::strtoll(lower.c_str() + cl + 17, nullptr, 10);
      }
      header_done_ = true;
      return rest.empty() || feed_body(rest, on_body);
    }
    return feed_body(data, on_body);
  }
  int status() const { return status_; }
  bool complete() const { return complete_; }

 private:
  bool feed_body(std::string_view data, const std::function<void(std::string_view)>& on_body) {
    if (!chunked_) {
      if (remaining_ >= 0) {
        const size_t n = std::min<size_t>(data.size(), static_cast<size_t>(remaining_));
        on_body(data.substr(0, n));
        remaining_ -= static_cast<int64_t>(n);
        complete_ = remaining_ == 0;
      } else {
        on_body(data);
      }
      return true;
    }
    pending_.append(data);
    for (;;) {
      if (chunk_left_ > 0) {
        const size_t n = std::min<size_t>(pending_.size(), static_cast<size_t>(chunk_left_));
        if (n == 0) return true;
        on_body(std::string_view(pending_).substr(0, n));
        pending_.erase(0, n);
        chunk_left_ -= static_cast<int64_t>(n);
        if (chunk_left_ > 0) return true;
        chunk_left_ = -2;  // the CRLF after the data
      }
      const size_t eol = pending_.find("\r\n");
      if (eol == std::string::npos) return pending_.size() < 4096;
      if (chunk_left_ == -2) {
        pending_.erase(0, eol + 2);
        chunk_left_ = 0;
        continue;
      }
      const int64_t size = std::strtoll(pending_.c_str(), nullptr, 16);
      pending_.erase(0, eol + 2);
      if (size < 0) return false;
      if (size == 0) {
        complete_ = true;
        return true;
      }
      chunk_left_ = size;
    }
  }

  std::string head_;
  std::string pending_;
  bool header_done_ = false;
  bool chunked_ = false;
  bool complete_ = false;
  int status_ = 0;
  int64_t remaining_ = -1;
  int64_t chunk_left_ = 0;
};

std::string request_bytes(const Endpoint& ep, const std::string& method, const std::string& path,
                          const std::string& api_key, const std::string& body) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: " + ep.host + ":" + std::to_string(ep.port) + "\r\n";
  if (!api_key.empty()) r += "Authorization: Bearer " + api_key + "\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "Connection: close\r\n\r\n" + body;
  return r;
}

struct RequestRecord {
  bool ok = false;
  std::string error;
  int64_t output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
};

// One exchange on a fresh connection: sends `request`, feeds the response body to on_body; the HTTP status, or 0 with
// *error set. Runs on the caller's io_context; never blocks a thread. timeout_s > 0: the connection is closed
// (status 0) when the whole exchange takes longer.
asio::awaitable<int> exchange(tcp::endpoint ep, std::string request, std::function<void(std::string_view)> on_body,
                              std::string* error, double timeout_s = 0) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket sock(ex);
  asio::steady_timer deadline(ex);
  if (timeout_s > 0) {
    deadline.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
    deadline.async_wait([&sock](const boost::system::error_code& e) {
      if (!e) sock.close();  // cancelled (e set) once the exchange is over: the socket is gone then
    });
  }
  boost::system::error_code ec;
  co_await sock.async_connect(ep, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *error = "connect: " + ec.message();
    co_return 0;
  }
  sock.set_option(tcp::no_delay(true), ec);
  co_await asio::async_write(sock, asio::buffer(request), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *error = "write: " + ec.message();
    co_return 0;
  }
  ResponseReader reader;
  char buf[16 << 10];
  for (;;) {
    const size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0 && !reader.feed(std::string_view(buf, n), on_body)) {
      *error = "malformed HTTP response";
      co_return 0;
    }
    if (reader.complete()) break;
    if (ec == asio::error::eof && reader.status() != 0) break;
    if (ec) {
      *error = "read: " + ec.message();
      co_return 0;
    }
  }
  co_return reader.status();
}

// One streamed completion; times in seconds from the moment it was sent (connect included).
asio::awaitable<void> run_one(tcp::endpoint ep, Endpoint host, const ServeBenchConfig* c, const std::string* body,
                              RequestRecord* rec) {
  std::string buffer;
  bool got_first = false, done = false, usage_seen = false;
  double last = 0;
  const double start = now_seconds();
  int status = 0;
  auto on_body = [&](std::string_view data) {
    buffer.append(data);
    size_t sep;
    while ((sep = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, sep);
      buffer.erase(0, sep + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      Result<Json> j = parse_json(payload, "stream chunk");
      if (!j || !j->is_object()) {
        if (rec->error.empty()) rec->error = "unparseable stream event: " + payload.substr(0, 200);
        continue;
      }
      if (j->contains("error")) {
        rec->error = (*j)["error"].is_object() ? (*j)["error"].value("message", "error event") : "error event";
        continue;
      }
      if (j->contains("usage") && (*j)["usage"].is_object()) {
        usage_seen = true;
        rec->output_tokens = (*j)["usage"].value("completion_tokens", int64_t{0});
      }
      const auto choices = j->find("choices");
      if (choices == j->end() || !choices->is_array() || choices->empty()) continue;
      const Json& ch = choices->front();
      if (!ch.contains("text") || !ch["text"].is_string() || ch["text"].get_ref<const std::string&>().empty()) continue;
      const double now = now_seconds() - start;
      if (!got_first) {
        got_first = true;
        rec->ttft = now;
      } else {
        rec->itl.push_back(now - last);
      }
      last = now;
    }
  };
  std::string http_error;
  status =
      co_await exchange(ep, request_bytes(host, "POST", "/v1/completions", c->api_key, *body), on_body, &http_error);
  rec->e2e = now_seconds() - start;
  if (status == 0) {
    rec->error = "HTTP error: " + http_error;
  } else if (status != 200) {
    rec->error = "HTTP " + std::to_string(status) + ": " + buffer.substr(0, 300);
  } else if (rec->error.empty() && (!done || !got_first)) {
    rec->error = "the stream ended without [DONE] or without text";
  } else if (rec->error.empty() && !usage_seen) {
    rec->error =
        "the stream carried no usage (stream_options.include_usage): "
        "cannot count tokens";
  }
  rec->ok = rec->error.empty();
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

double prometheus_sum(std::string_view text, std::string_view name) {
  double total = 0;
  bool found = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;  // another metric whose name starts with this one
    const size_t sp = line.find_last_of(' ');
    if (sp == std::string_view::npos || sp + 1 >= line.size()) continue;
    const std::string value(line.substr(sp + 1));
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end == value.c_str()) continue;
    total += v;
    found = true;
  }
  return found ? total : -1;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = percentile(v, 50);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  return s;
}

Result<ServeBenchResult> run_serve_bench(const ServeBenchConfig& c) {
  if (c.num_prompts < 1 || c.input_len < 1 || c.output_len < 1) {
    return Status::error("--num-prompts, --input-len and --output-len must be >= 1");
  }
  if (!(c.request_rate > 0)) return Status::error("--request-rate must be > 0 (inf: all at once)");
  RL_ASSIGN_OR_RETURN(Endpoint ep, parse_url(c.url));
  ServeBenchResult r;
  r.config = c;

  // Thousands of streams need as many descriptors.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  asio::io_context ioc(1);
  tcp::resolver resolver(ioc);
  boost::system::error_code rec_ec;
  auto resolved = resolver.resolve(ep.host, std::to_string(ep.port), rec_ec);
  if (rec_ec || resolved.empty()) return Status::error("cannot resolve " + ep.host + ": " + rec_ec.message());
  const tcp::endpoint addr = resolved.begin()->endpoint();

  // One GET on its own: the HTTP status (0: no answer or none within timeout_s > 0; *error says why) and the body,
  // of which at most kMaxGetBody bytes are kept (the server is not ours to trust).
  static constexpr size_t kMaxGetBody = size_t{16} << 20;
  const auto get = [&](const char* path, std::string* body, std::string* error, double timeout_s) {
    int status = 0;
    const auto keep = [body](std::string_view d) {
      body->append(d.substr(0, kMaxGetBody - std::min(kMaxGetBody, body->size())));
    };
    asio::co_spawn(ioc, exchange(addr, request_bytes(ep, "GET", path, c.api_key, ""), keep, error, timeout_s),
                   [&](std::exception_ptr, int st) { status = st; });
    ioc.run();
    ioc.restart();
    return status;
  };
  // The server's prefix-cache counters (vLLM's names on /metrics), when it has them: before and after the run, so
  // the report says how much of the prompts' prefill the cache skipped (repeated prompts, a warm-up with the same
  // seed), which raises throughput and lowers TTFT against a run of fresh prompts.
  const auto prefix_counters = [&](double* queries, double* hits) {
    std::string body, error;
    if (get("/metrics", &body, &error, 5.0) != 200) return false;  // a server without it may not answer at all
    *queries = prometheus_sum(body, "vllm:prefix_cache_queries_total");
    *hits = prometheus_sum(body, "vllm:prefix_cache_hits_total");
    return *queries >= 0 && *hits >= 0;
  };

  // The model and its vocabulary (our /v1/models reports vocab_size; other servers get a safe small range).
  std::string models_body, models_error = "no answer";
  const int models_status = get("/v1/models", &models_body, &models_error, 0);
  if (models_status == 0) return Status::error("cannot reach " + c.url + ": " + models_error);
  if (models_status != 200) return Status::error("GET /v1/models answered " + std::to_string(models_status));
  RL_ASSIGN_OR_RETURN(Json list, parse_json(models_body, "GET /v1/models"));
  if (!list.is_object() || !list.contains("data") || !list["data"].is_array() || list["data"].empty()) {
    return Status::error("GET /v1/models lists no model");
  }
  const Json& card = list["data"][0];
  if (r.config.model.empty()) r.config.model = card.value("id", "");
  const int64_t vocab = card.value("vocab_size", int64_t{1000});

  std::mt19937_64 rng(c.seed);
  std::uniform_int_distribution<int64_t> token(std::min<int64_t>(100, vocab / 2), std::max<int64_t>(1, vocab - 1));
  std::vector<std::string> bodies;
  for (int32_t i = 0; i < c.num_prompts; ++i) {
    Json b = Json::object();
    b["model"] = r.config.model;
    Json ids = Json::array();
    for (int32_t k = 0; k < c.input_len; ++k) ids.push_back(token(rng));
    b["prompt"] = std::move(ids);
    b["max_tokens"] = c.output_len;
    b["min_tokens"] = c.output_len;
    b["ignore_eos"] = true;
    b["temperature"] = 0;
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    bodies.push_back(b.dump());
  }

  double queries0 = 0, hits0 = 0;
  const bool have_counters = prefix_counters(&queries0, &hits0);
  // One thread drives every stream (asio coroutines): arrivals on a timer, at most max_concurrency in flight.
  std::vector<RequestRecord> records(static_cast<size_t>(c.num_prompts));
  std::exponential_distribution<double> gap(std::isinf(c.request_rate) ? 1.0 : c.request_rate);
  const double start = now_seconds();
  auto driver = [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex);
    asio::steady_timer slot(ex);  // cancelled whenever a stream finishes
    int32_t in_flight = 0;
    double next_arrival = start;
    for (int32_t i = 0; i < c.num_prompts; ++i) {
      if (!std::isinf(c.request_rate)) {
        const double wait = next_arrival - now_seconds();
        if (wait > 0) {
          timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(wait * 1e6)));
          boost::system::error_code ec;
          co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        next_arrival += gap(rng);
      }
      while (c.max_concurrency > 0 && in_flight >= c.max_concurrency) {
        slot.expires_at(asio::steady_timer::time_point::max());
        boost::system::error_code ec;
        co_await slot.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      in_flight++;
      asio::co_spawn(ex,
                     run_one(addr, ep, &r.config, &bodies[static_cast<size_t>(i)], &records[static_cast<size_t>(i)]),
                     [&in_flight, &slot](std::exception_ptr) {
                       in_flight--;
                       slot.cancel();
                     });
    }
    while (in_flight > 0) {
      slot.expires_at(asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await slot.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  };
  asio::co_spawn(ioc, driver(), asio::detached);
  ioc.run();
  r.duration_s = now_seconds() - start;
  ioc.restart();
  double queries1 = 0, hits1 = 0;
  if (have_counters && prefix_counters(&queries1, &hits1) && queries1 > queries0) {
    r.prefix_cache_hit_rate = (hits1 - hits0) / (queries1 - queries0);
  }

  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& rec : records) {
    if (!rec.ok) {
      r.failed++;
      if (r.first_error.empty()) r.first_error = rec.error;
      continue;
    }
    r.completed++;
    r.total_input_tokens += c.input_len;
    r.total_output_tokens += rec.output_tokens;
    ttft.push_back(rec.ttft * 1e3);
    e2el.push_back(rec.e2e * 1e3);
    if (rec.output_tokens > 1) tpot.push_back((rec.e2e - rec.ttft) * 1e3 / static_cast<double>(rec.output_tokens - 1));
    for (double x : rec.itl) itl.push_back(x * 1e3);
  }
  r.request_throughput = r.completed / r.duration_s;
  r.output_throughput = static_cast<double>(r.total_output_tokens) / r.duration_s;
  r.total_token_throughput = static_cast<double>(r.total_input_tokens + r.total_output_tokens) / r.duration_s;
  r.ttft_ms = summarize(ttft);
  r.tpot_ms = summarize(tpot);
  r.itl_ms = summarize(itl);
  r.e2el_ms = summarize(e2el);
  return r;
}

std::string format_report(const ServeBenchResult& r) {
  std::string out;
  char line[160];
  const auto row = [&](const char* name, const std::string& value) {
    std::snprintf(line, sizeof line, "%-40s %-10s\n", name, value.c_str());
    out += line;
  };
  const auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return std::string(b);
  };
  const auto header = [&](const char* title, char fill) {
    const std::string t = title;
    const size_t width = 50, pad = t.size() + 2 < width ? width - t.size() - 2 : 0;
    std::string s(pad / 2, fill);
    s += (t.empty() ? std::string(2, fill) : " " + t + " ") + std::string(pad - pad / 2, fill);
    out += s + "\n";
  };
  header("Serving Benchmark Result", '=');
  row("Successful requests:", std::to_string(r.completed));
  row("Failed requests:", std::to_string(r.failed));
  row("Request rate configured (RPS):", std::isinf(r.config.request_rate) ? "inf" : num(r.config.request_rate));
  if (r.config.max_concurrency > 0) row("Maximum request concurrency:", std::to_string(r.config.max_concurrency));
  row("Benchmark duration (s):", num(r.duration_s));
  row("Total input tokens:", std::to_string(r.total_input_tokens));
  row("Total generated tokens:", std::to_string(r.total_output_tokens));
  row("Request throughput (req/s):", num(r.request_throughput));
  row("Output token throughput (tok/s):", num(r.output_throughput));
  row("Total Token throughput (tok/s):", num(r.total_token_throughput));
  if (r.prefix_cache_hit_rate >= 0) row("Prefix cache hit rate (server):", num(r.prefix_cache_hit_rate));
  const auto block = [&](const char* title, const char* key, const Summary& s) {
    header(title, '-');
    const std::string k = key;
    row(("Mean " + k + " (ms):").c_str(), num(s.mean));
    row(("Median " + k + " (ms):").c_str(), num(s.median));
    row(("P90 " + k + " (ms):").c_str(), num(s.p90));
    row(("P99 " + k + " (ms):").c_str(), num(s.p99));
  };
  block("Time to First Token", "TTFT", r.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", r.tpot_ms);
  block("Inter-token Latency", "ITL", r.itl_ms);
  block("End-to-end Latency", "E2EL", r.e2el_ms);
  out += std::string(50, '=') + "\n";
  if (r.prefix_cache_hit_rate > 0) {
    out += "note: the server's prefix cache held " + num(100 * r.prefix_cache_hit_rate) +
           " % of the prompt tokens (prompts seen before: another --seed gives fresh ones)\n";
  }
  if (!r.first_error.empty()) out += "first error: " + r.first_error + "\n";
  return out;
}

OrderedJson to_json(const ServeBenchResult& r) {
  OrderedJson j = OrderedJson::object();
  j["url"] = r.config.url;
  j["model"] = r.config.model;
  j["request_rate"] = std::isinf(r.config.request_rate) ? OrderedJson("inf") : OrderedJson(r.config.request_rate);
  j["max_concurrency"] = r.config.max_concurrency > 0 ? OrderedJson(r.config.max_concurrency) : OrderedJson();
  j["num_prompts"] = r.config.num_prompts;
  j["input_len"] = r.config.input_len;
  j["output_len"] = r.config.output_len;
  j["completed"] = r.completed;
  j["failed"] = r.failed;
  j["duration"] = r.duration_s;
  j["total_input_tokens"] = r.total_input_tokens;
  j["total_output_tokens"] = r.total_output_tokens;
  j["request_throughput"] = r.request_throughput;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  j["prefix_cache_hit_rate"] = r.prefix_cache_hit_rate >= 0 ? OrderedJson(r.prefix_cache_hit_rate) : OrderedJson();
  const auto put = [&](const char* key, const Summary& s) {
    const std::string k = key;
    j["mean_" + k + "_ms"] = s.mean;
    j["median_" + k + "_ms"] = s.median;
    j["p90_" + k + "_ms"] = s.p90;
    j["p99_" + k + "_ms"] = s.p99;
  };
  put("ttft", r.ttft_ms);
  put("tpot", r.tpot_ms);
  put("itl", r.itl_ms);
  put("e2el", r.e2el_ms);
  return j;
}

}  // namespace rl::server
