// The HTTP/1.1 server under `ridgeline serve`, on Boost.Asio: an acceptor and a few I/O threads own every socket
// (reads, writes, timeouts, all asynchronous, one strand per connection), and a bounded pool of worker threads
// runs the handlers. A connection reads one request at a time (RequestParser, http_message.h), hands it to a
// worker, and reads the next only after the response is complete, so pipelined requests are answered in order,
// and a half-closed client (FIN after its request) still gets its answer.
//
// Threads: the I/O threads never block; a handler blocks only its own worker, and only while that connection's
// kernel buffer is full (a slow reader), at most write_timeout_s per write, after which the connection is
// closed and write() returns false. When every worker is busy and the queue is full, a request gets 503 with
// Retry-After from the I/O thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "server/http_message.h"

namespace rl::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  HttpLimits limits;
  int num_io_threads = 2;
  int num_workers = 64;
  int max_queued = 1024;         // requests parsed and waiting for a worker; beyond: 503
  int max_connections = 8192;    // beyond: 503 and close
  double read_timeout_s = 10.0;  // no byte of a request (or of an idle keep-alive connection) for this long
  double request_timeout_s = 60.0;  // a whole request's bytes, however slowly they trickle
  double write_timeout_s = 30.0;    // one write into a full socket buffer
};

class Connection;

// A handler's view of its response. Either send() once, or start() / write()... / finish(). Called on the
// worker thread that runs the handler.
class HttpResponder {
 public:
  HttpResponder(std::shared_ptr<Connection> conn, bool head_only);
  ~HttpResponder();
  void send(int status, const std::string& content_type, std::string body, HttpHeaders extra = {});
  // Chunked. false: the client is gone (stop producing; the connection is closed).
  bool start(int status, const std::string& content_type, HttpHeaders extra = {});
  bool write(std::string_view data);
  bool finish();
  bool responded() const { return responded_; }
  bool failed() const { return failed_; }

 private:
  std::shared_ptr<Connection> conn_;
  bool head_only_;
  bool responded_ = false;
  bool chunked_ = false;
  bool finished_ = false;
  bool failed_ = false;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;
// The body of an error the server itself answers (framing, overload) — the caller's error shape.
using HttpErrorBody = std::function<std::string(const HttpError&)>;

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorBody error_body);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  Status bind();
  int port() const;
  // Serves until stop().
  void run();
  // Thread-safe: closes the listener and every connection (handlers see write() fail), then run() returns.
  void stop();

 private:
  friend class Connection;
  friend class HttpResponder;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl::server
