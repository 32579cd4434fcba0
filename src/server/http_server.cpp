#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "core/log.h"

namespace rl::server {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// A fixed set of threads and a bounded queue of tasks.
class WorkerPool {
 public:
  void start(int num_threads, size_t max_queued) {
    max_queued_ = max_queued;
    for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { work(); });
  }
  bool try_post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || (idle_ == 0 && queue_.size() >= max_queued_)) return false;
    queue_.push_back(std::move(task));
    cv_.notify_one();
    return true;
  }
  // Drops queued tasks, waits for running ones.
  void stop() {
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (stopping_) return;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      task = nullptr;
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  size_t max_queued_ = 0;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerConfig config;
  HttpHandler handler;
  HttpErrorBody error_body;
  std::atomic<int> num_connections{0};
  std::atomic<bool> stopping{false};
  std::mutex conns_mu;
  std::list<std::weak_ptr<Connection>> conns;
  WorkerPool pool;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  int port = -1;

  void accept();
};

// One client connection. Every member is touched only on the connection's strand, except write_blocking() and
// finish_request(), which workers call and which post to the strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl* srv, tcp::socket socket)
      : srv_(srv), stream_(std::move(socket)), parser_(srv->config.limits) {
    srv_->num_connections++;
  }
  ~Connection() { srv_->num_connections--; }

  void start() { asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->process(); }); }

  void close() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->closed_ = true;
      boost::beast::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.close();
    });
  }

  // Worker side: writes data and waits for it to reach the kernel (false: the client is gone or too slow).
  bool write_blocking(std::string data) {
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> result = done->get_future();
    auto buf = std::make_shared<std::string>(std::move(data));
    asio::post(stream_.get_executor(), [self = shared_from_this(), buf, done] {
      if (self->closed_) return done->set_value(false);
      self->stream_.expires_after(ms(self->srv_->config.write_timeout_s));
      asio::async_write(self->stream_, asio::buffer(*buf),
                        [self, buf, done](boost::beast::error_code ec, size_t) {
                          if (ec) self->close_now();
                          done->set_value(!ec);
                        });
    });
    try {
      if (result.wait_for(ms(srv_->config.write_timeout_s + 5)) != std::future_status::ready) return false;
      return result.get();
    } catch (const std::future_error&) {  // the I/O threads stopped with the write pending
      return false;
    }
  }

  bool keep_alive() const { return keep_alive_; }
  bool head_only() const { return head_only_; }

  // Worker side, after the response: read the next request (or close).
  void finish_request(bool reusable) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), reusable] {
      if (!reusable || !self->keep_alive_ || self->srv_->stopping) return self->linger_close();
      self->parser_.reset();
      self->process();
    });
  }

 private:
  void close_now() {
    closed_ = true;
    boost::beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  // Parses what is buffered; dispatches a complete request, answers an error, or reads more.
  void process() {
    if (closed_) return;
    if (!in_.empty()) {
      const bool was_started = parser_.started();
      const size_t used = parser_.feed(in_);
      in_.erase(0, used);
      if (!was_started && parser_.started()) request_start_ = Clock::now();
    }
    if (parser_.error()) return reply_error(*parser_.error());
    if (parser_.done()) return dispatch(parser_.take());
    if (eof_) {
      parser_.feed_eof();
      if (parser_.error()) return reply_error(*parser_.error());
      return linger_close();
    }
    if (parser_.header_done() && parser_.expects_continue() && !sent_continue_) {
      sent_continue_ = true;
      auto msg = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      stream_.expires_after(ms(srv_->config.write_timeout_s));
      asio::async_write(stream_, asio::buffer(*msg), [self = shared_from_this(), msg](boost::beast::error_code ec,
                                                                                     size_t) {
        if (ec) return self->close_now();
        self->read_more();
      });
      return;
    }
    read_more();
  }

  void read_more() {
    double timeout = srv_->config.read_timeout_s;
    if (parser_.started()) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - request_start_).count();
      timeout = std::min(timeout, srv_->config.request_timeout_s - elapsed);
      if (timeout <= 0) {
        return reply_error(HttpError{408, "The request took longer than " +
                                              std::to_string(static_cast<int>(srv_->config.request_timeout_s)) +
                                              " s to arrive", "request_timeout"});
      }
    }
    stream_.expires_after(ms(timeout));
    stream_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](boost::beast::error_code ec, size_t n) {
      if (ec == asio::error::eof) {
        self->eof_ = true;
      } else if (ec) {
        return self->close_now();  // timeout, reset, or closed by stop()
      }
      self->in_.append(self->buf_, n);
      self->process();
    });
  }

  void dispatch(HttpRequest req) {
    keep_alive_ = req.keep_alive && !eof_;
    head_only_ = req.method == "HEAD";
    sent_continue_ = false;
    auto self = shared_from_this();
    if (srv_->num_connections > srv_->config.max_connections) {
      return reply_error(HttpError{503, "Too many open connections; retry later", "overloaded"});
    }
    auto task = [self, r = std::make_shared<HttpRequest>(std::move(req))] {
      bool reusable = true;
      {
        HttpResponder res(self, self->head_only_);
        try {
          self->srv_->handler(*r, res);
        } catch (const std::exception& e) {
          log_error(std::string("handler failed: ") + e.what());
        }
        if (!res.responded()) {
          res.send(500, "application/json", self->srv_->error_body(HttpError{500, "internal server error", ""}));
        }
        if (!res.finish()) reusable = false;
      }
      self->finish_request(reusable);
    };
    if (!srv_->pool.try_post(std::move(task))) {
      reply_error(HttpError{503, "The server is busy (every worker is taken); retry later", "overloaded"});
    }
  }

  // Answers an error the server itself found, then closes.
  void reply_error(const HttpError& e) {
    const std::string body = srv_->error_body(e);
    HttpHeaders h = {{"Content-Type", "application/json"}};
    if (e.status == 503) h.emplace_back("Retry-After", "1");
    auto msg = std::make_shared<std::string>(response_head(e.status, h, body.size(), true) + body);
    stream_.expires_after(ms(srv_->config.write_timeout_s));
    asio::async_write(stream_, asio::buffer(*msg), [self = shared_from_this(), msg](boost::beast::error_code ec,
                                                                                   size_t) {
      if (ec) return self->close_now();
      self->linger_close();
    });
  }

  // Closes gracefully: our side first, then read and drop what the client still sends (for a while), so the
  // kernel does not answer unread bytes with a reset that could destroy the response in flight.
  void linger_close() {
    if (closed_) return;
    boost::beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (eof_) return close_now();
    linger_until_ = Clock::now() + std::chrono::seconds(2);
    drain();
  }
  void drain() {
    stream_.expires_at(linger_until_);
    stream_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](boost::beast::error_code ec, size_t) {
      if (ec) return self->close_now();
      self->drain();
    });
  }

  HttpServer::Impl* srv_;
  boost::beast::tcp_stream stream_;
  RequestParser parser_;
  std::string in_;
  char buf_[16 << 10];
  Clock::time_point request_start_{};
  Clock::time_point linger_until_{};
  bool eof_ = false;
  bool closed_ = false;
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool sent_continue_ = false;
};

HttpResponder::HttpResponder(std::shared_ptr<Connection> conn, bool head_only)
    : conn_(std::move(conn)), head_only_(head_only) {}

HttpResponder::~HttpResponder() = default;

void HttpResponder::send(int status, const std::string& content_type, std::string body, HttpHeaders extra) {
  if (responded_) return;
  responded_ = true;
  finished_ = true;
  extra.emplace(extra.begin(), "Content-Type", content_type);
  std::string msg = response_head(status, extra, body.size(), !conn_->keep_alive());
  if (!head_only_) msg += body;
  if (!conn_->write_blocking(std::move(msg))) failed_ = true;
}

bool HttpResponder::start(int status, const std::string& content_type, HttpHeaders extra) {
  if (responded_) return false;
  responded_ = true;
  chunked_ = true;
  extra.emplace(extra.begin(), "Content-Type", content_type);
  if (!conn_->write_blocking(response_head(status, extra, std::nullopt, !conn_->keep_alive()))) failed_ = true;
  return !failed_;
}

bool HttpResponder::write(std::string_view data) {
  if (failed_ || finished_) return false;
  if (head_only_ || data.empty()) return true;
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string chunk = size;
  chunk.append(data);
  chunk += "\r\n";
  if (!conn_->write_blocking(std::move(chunk))) failed_ = true;
  return !failed_;
}

bool HttpResponder::finish() {
  if (failed_) return false;
  if (finished_) return true;
  finished_ = true;
  if (chunked_ && !head_only_ && !conn_->write_blocking("0\r\n\r\n")) failed_ = true;
  return !failed_;
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](boost::beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      // Out of descriptors, typically: let open connections finish before accepting again.
      log_warn("accept failed: " + ec.message());
      auto timer = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](boost::beast::error_code) { accept(); });
      return;
    }
    boost::beast::error_code nd;
    socket.set_option(tcp::no_delay(true), nd);
    auto conn = std::make_shared<Connection>(this, std::move(socket));
    {
      std::lock_guard<std::mutex> lock(conns_mu);
      for (auto it = conns.begin(); it != conns.end();) it = it->expired() ? conns.erase(it) : std::next(it);
      conns.push_back(conn);
    }
    conn->start();
    accept();
  });
}

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorBody error_body)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->handler = std::move(handler);
  impl_->error_body = std::move(error_body);
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  Impl& s = *impl_;
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(s.config.host, ec);
  if (ec) return Status::error("cannot listen on '" + s.config.host + "': not an IP address");
  const tcp::endpoint ep(addr, static_cast<unsigned short>(s.config.port));
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::error("cannot listen on " + s.config.host + ":" + std::to_string(s.config.port) + " (" +
                         ec.message() + ")");
  }
  s.port = s.acceptor.local_endpoint().port();
  return Status::ok();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() {
  Impl& s = *impl_;
  if (s.stopping) return;
  s.work.emplace(s.ioc.get_executor());
  s.pool.start(s.config.num_workers, static_cast<size_t>(s.config.max_queued));
  s.accept();
  std::vector<std::thread> io;
  for (int i = 1; i < s.config.num_io_threads; ++i) io.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (std::thread& t : io) t.join();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  asio::post(s.ioc, [&s] {
    boost::system::error_code ec;
    s.acceptor.close(ec);
    std::lock_guard<std::mutex> lock(s.conns_mu);
    for (auto& w : s.conns) {
      if (auto c = w.lock()) c->close();
    }
  });
  s.pool.stop();  // handlers return as their writes fail
  s.work.reset();
  s.ioc.stop();
}

}  // namespace rl::server
