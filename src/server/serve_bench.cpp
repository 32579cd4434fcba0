#include "server/serve_bench.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "core/log.h"
#include "server/http.h"

namespace rl::server {
namespace {

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

httplib::Headers auth_headers(const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  return h;
}

struct RequestRecord {
  bool ok = false;
  std::string error;
  int64_t output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
};

// One streamed completion; times in seconds from the moment it was sent.
RequestRecord run_one(const Endpoint& ep, const ServeBenchConfig& c, const std::string& body) {
  RequestRecord rec;
  httplib::Client cli(ep.host, ep.port);
  cli.set_read_timeout(600, 0);
  cli.set_write_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = auth_headers(c.api_key);
  req.set_header("Content-Type", "application/json");
  req.body = body;
  std::string buffer;
  bool got_first = false, done = false;
  double last = 0;
  int64_t chunks = 0;
  const double start = now_seconds();
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
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
      if (!j) continue;
      if (j->contains("error")) {
        rec.error = (*j)["error"].value("message", "error event");
        continue;
      }
      if (j->contains("usage") && (*j)["usage"].is_object()) {
        rec.output_tokens = (*j)["usage"].value("completion_tokens", int64_t{0});
      }
      const auto choices = j->find("choices");
      if (choices == j->end() || !choices->is_array() || choices->empty()) continue;
      const Json& ch = choices->front();
      if (!ch.contains("text") || !ch["text"].is_string() || ch["text"].get<std::string>().empty()) continue;
      const double now = now_seconds() - start;
      chunks++;
      if (!got_first) {
        got_first = true;
        rec.ttft = now;
      } else {
        rec.itl.push_back(now - last);
      }
      last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  rec.e2e = now_seconds() - start;
  if (!sent) {
    rec.error = "HTTP error: " + httplib::to_string(err);
  } else if (res.status != 200) {
    rec.error = "HTTP " + std::to_string(res.status) + ": " + buffer.substr(0, 300);
  } else if (rec.error.empty() && (!done || !got_first)) {
    rec.error = "the stream ended without [DONE] or without text";
  }
  if (rec.output_tokens == 0) rec.output_tokens = chunks;
  rec.ok = rec.error.empty();
  return rec;
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
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

  // The model and its vocabulary (our /v1/models reports vocab_size; other servers get a safe small range).
  httplib::Client probe(ep.host, ep.port);
  probe.set_read_timeout(30, 0);
  auto models = probe.Get("/v1/models", auth_headers(c.api_key));
  if (!models) return Status::error("cannot reach " + c.url + ": " + httplib::to_string(models.error()));
  if (models->status != 200) return Status::error("GET /v1/models answered " + std::to_string(models->status));
  RL_ASSIGN_OR_RETURN(Json list, parse_json(models->body, "GET /v1/models"));
  if (!list.contains("data") || !list["data"].is_array() || list["data"].empty()) {
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

  std::vector<RequestRecord> records(static_cast<size_t>(c.num_prompts));
  std::mutex mu;
  std::condition_variable cv;
  int32_t in_flight = 0;
  std::vector<std::thread> threads;
  std::exponential_distribution<double> gap(std::isinf(c.request_rate) ? 1.0 : c.request_rate);
  const double start = now_seconds();
  double next_arrival = start;
  for (int32_t i = 0; i < c.num_prompts; ++i) {
    if (!std::isinf(c.request_rate)) {
      const double wait = next_arrival - now_seconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      next_arrival += gap(rng);
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return c.max_concurrency <= 0 || in_flight < c.max_concurrency; });
      in_flight++;
    }
    threads.emplace_back([&, i] {
      records[static_cast<size_t>(i)] = run_one(ep, r.config, bodies[static_cast<size_t>(i)]);
      {
        std::lock_guard<std::mutex> lock(mu);
        in_flight--;
      }
      cv.notify_all();
    });
  }
  for (std::thread& t : threads) t.join();
  r.duration_s = now_seconds() - start;

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
