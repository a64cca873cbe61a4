// The forwarder on mb-forward: one io_context run by one thread, so the pool
// and the queue need no lock of their own beyond what Forward() posts.
#include "gateway/forwarder.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "gateway/api_error.h"

namespace mb::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

class Forwarder::Impl : public std::enable_shared_from_this<Forwarder::Impl> {
 public:
  Impl(std::string host, std::string port, ForwarderOptions options)
      : host_(std::move(host)),
        port_(std::move(port)),
        primary_(host_ + ":" + port_),
        options_(options),
        work_(asio::make_work_guard(io_)) {}

  void Start() {
    thread_ = std::thread([self = shared_from_this()] {
      pthread_setname_np(pthread_self(), "mb-forward");
      self->io_.run();
    });
  }

  void Forward(Request request, std::string client, std::function<void(Response)> done) {
    if (stopped_.load(std::memory_order_acquire)) {
      return done(Failure(request, 502, "The forwarder is stopped."));
    }
    waiting_.fetch_add(1, std::memory_order_relaxed);
    asio::post(io_, [self = shared_from_this(), req = std::move(request),
                     client = std::move(client), done = std::move(done)]() mutable {
      self->queue_.push_back(Job{std::move(req), std::move(done), false});
      self->queue_.back().request.set(kClientAddressHeader, client);
      self->Pump();
    });
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    asio::post(io_, [self = shared_from_this()] {
      for (auto& c : self->idle_) {
        beast::error_code ec;
        c->stream.socket().close(ec);
      }
      self->idle_.clear();
      while (!self->queue_.empty()) {
        Job j = std::move(self->queue_.front());
        self->queue_.pop_front();
        self->waiting_.fetch_sub(1, std::memory_order_relaxed);
        j.done(self->Failure(j.request, 502, "The replica is shutting down."));
      }
      self->work_.reset();
    });
    // Exchanges in flight end by their deadline at the latest.
    if (thread_.joinable()) thread_.join();
  }

  ForwarderStats stats() const {
    ForwarderStats s;
    s.forwarded = forwarded_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.connections = open_.load(std::memory_order_relaxed);
    s.waiting = waiting_.load(std::memory_order_relaxed);
    return s;
  }

  const std::string& primary() const noexcept { return primary_; }

 private:
  struct Job {
    Request request;
    std::function<void(Response)> done;
    bool retried = false;
  };
  struct Conn {
    explicit Conn(asio::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    SteadyClock::time_point idle_since{};
    bool reused = false;
  };

  Response Failure(const Request& req, int status, std::string_view why) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::server, "matchbook");
    res.set(http::field::content_type, "application/json;charset=UTF-8");
    res.keep_alive(req.keep_alive());
    res.body() = ApiError{status, -1001, fmt::format("{} (primary {})", why, primary_)}.Json();
    res.prepare_payload();
    return res;
  }

  // mb-forward: hands waiting requests to free connections, opening new ones
  // up to the limit.
  void Pump() {
    while (!queue_.empty()) {
      std::shared_ptr<Conn> conn;
      const auto now = SteadyClock::now();
      while (!idle_.empty()) {
        std::shared_ptr<Conn> c = std::move(idle_.back());
        idle_.pop_back();
        if (now - c->idle_since < options_.idle_close) {
          conn = std::move(c);
          break;
        }
        Close(*c);
      }
      if (!conn && open_.load(std::memory_order_relaxed) >= options_.max_connections) return;
      Job job = std::move(queue_.front());
      queue_.pop_front();
      waiting_.fetch_sub(1, std::memory_order_relaxed);
      if (conn) {
        conn->reused = true;
        Send(std::move(conn), std::move(job));
      } else {
        Open(std::move(job));
      }
    }
  }

  void Close(Conn& c) {
    beast::error_code ec;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    c.stream.socket().close(ec);
    open_.fetch_sub(1, std::memory_order_relaxed);
  }

  void Open(Job job) {
    open_.fetch_add(1, std::memory_order_relaxed);
    auto conn = std::make_shared<Conn>(io_);
    auto resolver = std::make_shared<tcp::resolver>(io_);
    auto j = std::make_shared<Job>(std::move(job));
    resolver->async_resolve(
        host_, port_,
        [self = shared_from_this(), conn, resolver, j](beast::error_code ec,
                                                       tcp::resolver::results_type results) {
          if (ec) return self->Fail(conn, std::move(*j), 502, "Cannot resolve the primary", ec);
          conn->stream.expires_after(self->options_.connect_timeout);
          conn->stream.async_connect(
              results, [self, conn, j](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) {
                  return self->Fail(conn, std::move(*j), 502, "Cannot connect to the primary", ec2);
                }
                beast::error_code nd;
                conn->stream.socket().set_option(tcp::no_delay(true), nd);
                self->Send(conn, std::move(*j));
              });
        });
  }

  void Send(std::shared_ptr<Conn> conn, Job job) {
    auto j = std::make_shared<Job>(std::move(job));
    // The client's own keep-alive wish is answered by the replica; the
    // primary connection stays open.
    const bool client_keep_alive = j->request.keep_alive();
    const unsigned client_version = j->request.version();
    j->request.version(11);
    j->request.keep_alive(true);
    conn->stream.expires_after(options_.timeout);
    http::async_write(
        conn->stream, j->request,
        [self = shared_from_this(), conn, j, client_keep_alive, client_version](
            beast::error_code ec, std::size_t) {
          j->request.keep_alive(client_keep_alive);
          j->request.version(client_version);
          if (ec) return self->Retry(conn, std::move(*j), ec);
          conn->parser.emplace();
          conn->parser->body_limit(self->options_.max_body_bytes);
          conn->parser->header_limit(64 * 1024);
          http::async_read(conn->stream, conn->buffer, *conn->parser,
                           [self, conn, j](beast::error_code ec2, std::size_t bytes) {
                             if (ec2) {
                               // Nothing of an answer read on a reused connection: the
                               // primary closed it before taking the request.
                               if (bytes == 0 && ec2 != beast::error::timeout) {
                                 return self->Retry(conn, std::move(*j), ec2);
                               }
                               return self->Fail(conn, std::move(*j),
                                                 ec2 == beast::error::timeout ? 504 : 502,
                                                 ec2 == beast::error::timeout
                                                     ? "The primary did not answer in time"
                                                     : "The primary's answer was cut off",
                                                 ec2);
                             }
                             Response res = conn->parser->release();
                             const bool primary_keeps = res.keep_alive();
                             res.keep_alive(j->request.keep_alive());
                             res.version(j->request.version());
                             self->forwarded_.fetch_add(1, std::memory_order_relaxed);
                             j->done(std::move(res));
                             if (primary_keeps && !self->stopped_.load(std::memory_order_acquire)) {
                               conn->stream.expires_never();
                               conn->idle_since = SteadyClock::now();
                               self->idle_.push_back(conn);
                             } else {
                               self->Close(*conn);
                             }
                             self->Pump();
                           });
        });
  }

  // A reused connection that failed before any answer: a GET goes once more
  // on a new connection; anything else may have reached the primary.
  void Retry(const std::shared_ptr<Conn>& conn, Job job, beast::error_code ec) {
    if (conn->reused && !job.retried && job.request.method() == http::verb::get) {
      Close(*conn);
      job.retried = true;
      Open(std::move(job));
      return;
    }
    Fail(conn, std::move(job), 502, "The connection to the primary failed", ec);
  }

  void Fail(const std::shared_ptr<Conn>& conn, Job job, int status, std::string_view what,
            beast::error_code ec) {
    Close(*conn);
    job.done(Failure(job.request, status, fmt::format("{}: {}", what, ec.message())));
    Pump();
  }

  const std::string host_;
  const std::string port_;
  const std::string primary_;
  const ForwarderOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> open_{0};
  std::atomic<uint64_t> waiting_{0};
  // mb-forward only.
  std::deque<Job> queue_;
  std::vector<std::shared_ptr<Conn>> idle_;
};

Result<std::unique_ptr<Forwarder>> Forwarder::Create(std::string_view primary,
                                                     ForwarderOptions options) {
  std::string_view rest = primary;
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  while (rest.ends_with('/')) rest.remove_suffix(1);
  const std::size_t colon = rest.rfind(':');
  const bool bracketed = rest.starts_with('[');
  std::string host(colon == std::string_view::npos ? rest : rest.substr(0, colon));
  if (bracketed && host.size() >= 2 && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port(colon == std::string_view::npos ? "" : rest.substr(colon + 1));
  const bool port_ok = !port.empty() && port.size() <= 5 &&
                       port.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoul(port) > 0 && std::stoul(port) <= 65535;
  if (primary.starts_with("https://") || host.empty() || !port_ok ||
      rest.find('/') != std::string_view::npos) {
    return InvalidArgument(
        fmt::format("primary \"{}\" is not http://HOST:PORT (the primary's API address)", primary));
  }
  auto impl = std::make_shared<Impl>(std::move(host), port, options);
  impl->Start();
  return std::unique_ptr<Forwarder>(new Forwarder(std::move(impl)));
}

Forwarder::Forwarder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Forwarder::~Forwarder() { Stop(); }
void Forwarder::Forward(Request request, std::string client_address,
                        std::function<void(Response)> done) {
  impl_->Forward(std::move(request), std::move(client_address), std::move(done));
}
void Forwarder::Stop() { impl_->Stop(); }
ForwarderStats Forwarder::stats() const { return impl_->stats(); }
const std::string& Forwarder::primary() const noexcept { return impl_->primary(); }

}  // namespace mb::gateway
