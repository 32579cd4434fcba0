#include "server/http_message.h"

#include <zlib.h>

#include <boost/beast/http.hpp>
#include <cstring>
#include <functional>

namespace rl::server {
namespace beast_http = boost::beast::http;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HttpError too_large(size_t limit) {
  return HttpError{413, "Request body too large: the limit is " + std::to_string(limit) + " bytes",
                   "payload_too_large"};
}

HttpError bad(const std::string& message) { return HttpError{400, "Malformed HTTP request: " + message, ""}; }

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return "";
}

// Beast 1.74 subtracts a chunk's size from its body limit before it parses the chunk's extensions, and again each
// time it re-parses a header whose quoted extension ran past the bytes it has: one request split into smaller reads
// then fails with 413 where the whole one fails with 400 (found by fuzzing, issue 11). So a chunked body's limit
// is kept here instead, counted once per chunk when Beast reports the whole header.
struct RequestParser::Impl {
  uint64_t max_body = 0;
  uint64_t chunked_bytes = 0;  // the sizes of the chunks so far
  std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)> on_chunk_header =
      [this](std::uint64_t size, boost::beast::string_view, boost::beast::error_code& ec) {
        if (size > max_body - chunked_bytes) {
          ec = beast_http::error::body_limit;
        } else {
          chunked_bytes += size;
        }
      };
  beast_http::request_parser<beast_http::string_body> parser;
};

RequestParser::RequestParser(HttpLimits limits) : limits_(limits) { reset(); }
RequestParser::~RequestParser() = default;

void RequestParser::reset() {
  impl_ = std::make_unique<Impl>();
  impl_->parser.header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  impl_->parser.body_limit(limits_.max_body_bytes);
  impl_->max_body = limits_.max_body_bytes;
  impl_->parser.on_chunk_header(impl_->on_chunk_header);
  started_ = false;
  header_checked_ = false;
  request_.reset();
  error_.reset();
}

bool RequestParser::header_done() const { return impl_->parser.is_header_done(); }

bool RequestParser::expects_continue() const {
  if (!header_done() || error_) return false;
  const auto& m = impl_->parser.get();
  auto it = m.find(beast_http::field::expect);
  return it != m.end() && iequals(trim(std::string_view(it->value().data(), it->value().size())), "100-continue");
}

size_t RequestParser::feed(std::string_view data) {
  if (done() || error_) return 0;
  size_t used = 0;
  // Bytes before a request line: RFC 9112 §2.2 lets a server ignore empty lines there.
  if (!started_) {
    while (used < data.size() && (data[used] == '\r' || data[used] == '\n')) ++used;
    if (used == data.size()) return used;
    started_ = true;
  }
  auto& p = impl_->parser;
  while (used < data.size() || (header_done() && p.is_done())) {
    if (p.is_done()) {
      error_ = finish();
      return used;
    }
    // Boost.Beast 1.74's chunk-header parser assumes it is never offered fewer than 5 bytes (it asserts n >= 5
    // when it re-parses a last chunk whose trailer was incomplete, and n >= 3 before; without assertions it
    // re-parses from a guess). The rest of a chunked body is never shorter than that: the last chunk and the
    // empty line, "0\r\n\r\n", stay unconsumed until the message is complete. So in the chunked body, fewer
    // than 5 bytes wait for more (found by fuzzing twice, issue 11).
    if (header_done() && p.chunked() && data.size() - used < 5) return used;
    boost::beast::error_code ec;
    const size_t n = p.put(boost::asio::buffer(data.data() + used, data.size() - used), ec);
    used += n;
    if (ec == beast_http::error::need_more) return used;
    if (ec == beast_http::error::body_limit) {
      error_ = too_large(limits_.max_body_bytes);
      return used;
    }
    if (ec == beast_http::error::header_limit) {
      error_ = HttpError{431, "Request header block larger than " + std::to_string(limits_.max_header_bytes) +
                                  " bytes", "header_too_large"};
      return used;
    }
    if (ec) {
      error_ = bad(ec.message());
      return used;
    }
    if (header_done() && !header_checked_) {
      header_checked_ = true;
      if ((error_ = check_header())) return used;
      if (p.chunked()) p.body_limit(boost::none);  // Impl::on_chunk_header keeps it
    }
    if (n == 0 && !p.is_done()) return used;
  }
  return used;
}

void RequestParser::feed_eof() {
  if (!started_ || done() || error_) return;
  error_ = bad("the connection closed in the middle of a request");
}

std::optional<HttpError> RequestParser::check_header() {
  const auto& m = impl_->parser.get();
  if (m.version() != 10 && m.version() != 11) return bad("unsupported HTTP version");
  int num_length = 0, num_host = 0;
  std::string length;
  bool has_te = false;
  for (const auto& f : m) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    const std::string_view value(f.value().data(), f.value().size());
    if (iequals(name, "content-length")) {
      if (num_length++ > 0 && trim(value) != length) return bad("conflicting Content-Length headers");
      length = std::string(trim(value));
    } else if (iequals(name, "host")) {
      ++num_host;
    } else if (iequals(name, "transfer-encoding")) {
      if (has_te || !iequals(trim(value), "chunked")) {
        return bad("unsupported Transfer-Encoding (only \"chunked\" is accepted)");
      }
      has_te = true;
    }
  }
  if (num_length > 0 && has_te) return bad("both Content-Length and Transfer-Encoding");
  if (m.version() == 11 && num_host != 1) return bad("an HTTP/1.1 request needs exactly one Host header");
  const std::string_view target(m.target().data(), m.target().size());
  if (target.empty() || (target[0] != '/' && target.rfind("http://", 0) != 0 && target.rfind("https://", 0) != 0)) {
    return bad("the request target must be a path");
  }
  return std::nullopt;
}

std::optional<HttpError> RequestParser::finish() {
  auto& m = impl_->parser.get();
  HttpRequest r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  std::string_view t = r.target;
  if (t[0] != '/') {  // absolute-form: drop scheme and authority
    t.remove_prefix(t.find("//") + 2);
    const size_t slash = t.find('/');
    t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
  }
  const size_t q = t.find('?');
  r.path = std::string(t.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(t.substr(q + 1));
  r.version = static_cast<int>(m.version());
  r.keep_alive = m.keep_alive();
  for (const auto& f : m) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  r.body = std::move(m.body());
  const std::string coding(trim(r.header("content-encoding")));
  if (!coding.empty() && !iequals(coding, "identity")) {
    std::string decoded;
    if (auto e = decode_content(coding, r.body, limits_.max_body_bytes, &decoded)) return e;
    r.body = std::move(decoded);
  }
  request_ = std::move(r);
  return std::nullopt;
}

HttpRequest RequestParser::take() {
  HttpRequest r = std::move(*request_);
  request_.reset();
  return r;
}

std::optional<HttpError> decode_content(std::string_view coding, std::string_view in, size_t limit,
                                        std::string* out) {
  int window_bits = 0;
  if (iequals(coding, "gzip") || iequals(coding, "x-gzip")) {
    window_bits = 16 + MAX_WBITS;
  } else if (iequals(coding, "deflate")) {
    // RFC 9110 says zlib-wrapped; some clients send raw deflate. The first byte tells them apart.
    window_bits = !in.empty() && (static_cast<unsigned char>(in[0]) & 0x0f) == 8 ? MAX_WBITS : -MAX_WBITS;
  } else {
    return HttpError{415, "Unsupported Content-Encoding '" + std::string(coding).substr(0, 64) +
                              "' (gzip, deflate and identity are accepted)", "unsupported_content_encoding"};
  }
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (inflateInit2(&z, window_bits) != Z_OK) return HttpError{400, "cannot start decompression", ""};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  out->clear();
  char chunk[64 << 10];
  std::optional<HttpError> err;
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = sizeof chunk - z.avail_out;
    if (out->size() + produced > limit) {
      err = HttpError{413, "Decompressed request body too large: the limit is " + std::to_string(limit) + " bytes",
                      "payload_too_large"};
      break;
    }
    out->append(chunk, produced);
    if (rc == Z_STREAM_END) {
      if (z.avail_in != 0) err = HttpError{400, "trailing data after the compressed request body", ""};
      break;
    }
    if (rc != Z_OK || (produced == 0 && z.avail_in == 0)) {
      err = HttpError{400, "corrupt or truncated " + std::string(coding) + " request body", ""};
      break;
    }
  }
  inflateEnd(&z);
  if (err) out->clear();
  return err;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string response_head(int status, const HttpHeaders& headers, std::optional<size_t> content_length,
                          bool close) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (content_length) {
    h += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  } else {
    h += "Transfer-Encoding: chunked\r\n";
  }
  if (close) h += "Connection: close\r\n";
  h += "\r\n";
  return h;
}

}  // namespace rl::server
