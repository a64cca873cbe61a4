// The forwarder on mb-forward: one io_context run by one thread, so the pool
// and the queue need no lock of their own beyond what Forward() posts.
#include "gateway/forwarder.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "gateway/api_error.h"
#include "log/log.h"
#include "net/stream.h"
#include "transfer/protocol.h"

namespace mb::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
namespace websocket = beast::websocket;

namespace {

// One relayed WebSocket, on mb-forward (every handler and every posted call
// run there, so its state needs no lock).
class Tunnel final : public WsTunnel, public std::enable_shared_from_this<Tunnel> {
 public:
  // tls: the primary's TLS context (null: plain).
  Tunnel(asio::io_context& io, std::shared_ptr<wire::TlsContext> tls, std::atomic<uint64_t>* open,
         std::function<void(std::string)> on_message,
         std::function<void(uint16_t, std::string)> on_close)
      : io_(io),
        ws_(wire::Stream(tcp::socket(io), std::move(tls))),
        resolver_(io),
        open_count_(open),
        on_message_(std::move(on_message)),
        on_close_(std::move(on_close)) {}

  void Start(const std::string& host, const std::string& port, std::string target,
             std::string client, std::chrono::milliseconds connect_timeout) {
    auto self = shared_from_this();
    resolver_.async_resolve(
        host, port,
        [self, host, port, target = std::move(target), client = std::move(client), connect_timeout](
            beast::error_code ec, tcp::resolver::results_type results) mutable {
          if (ec) return self->End(1011, "the primary cannot be resolved: " + ec.message());
          wire::Stream& conn = self->ws_.next_layer();
          conn.expires_after(connect_timeout);
          conn.tcp_layer().async_connect(
              results, [self, host, port, target = std::move(target), client = std::move(client),
                        connect_timeout](beast::error_code ec2, const tcp::endpoint&) mutable {
                if (ec2) return self->End(1011, "the primary cannot be reached: " + ec2.message());
                self->ws_.next_layer().async_client_handshake(
                    host, [self, host, port, target = std::move(target), client = std::move(client),
                           connect_timeout](beast::error_code ec4) {
                      if (ec4) {
                        return self->End(1011,
                                         "the primary's TLS handshake failed: " + ec4.message());
                      }
                      self->Handshake(host, port, target, client, connect_timeout);
                    });
              });
        });
  }

  // Connected (TLS set up where the primary speaks it): the WebSocket
  // handshake, bounded by the connect timeout; an open tunnel may stay silent.
  void Handshake(const std::string& host, const std::string& port, const std::string& target,
                 const std::string& client, std::chrono::milliseconds connect_timeout) {
    auto self = shared_from_this();
    ws_.next_layer().expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = connect_timeout;
    t.idle_timeout = websocket::stream_base::none();
    t.keep_alive_pings = false;
    ws_.set_option(t);
    ws_.set_option(websocket::stream_base::decorator(
        [client](websocket::request_type& req) { req.set(kClientAddressHeader, client); }));
    ws_.async_handshake(response_, host + ":" + port, target, [self](beast::error_code ec3) {
      if (ec3) {
        const unsigned status = self->response_.result_int();
        return self->End(
            1008, status != 0 ? fmt::format("the primary refused the connection: HTTP {}", status)
                              : "the primary's handshake failed: " + ec3.message());
      }
      self->open_ = true;
      self->open_count_->fetch_add(1, std::memory_order_relaxed);
      if (self->closing_) return self->DoClose();
      self->Read();
      self->Write();
    });
  }

  void Send(std::string text) override {
    asio::post(io_, [self = shared_from_this(), text = std::move(text)]() mutable {
      if (self->ended_ || self->closing_) return;
      if (self->out_.size() >= kMaxQueued) {
        // The client sends faster than the primary takes: not without bound.
        self->End(1008, "too many messages waiting for the primary");
        return;
      }
      self->out_.push_back(std::move(text));
      self->Write();
    });
  }

  // mb-forward: the forwarder stops; whatever is in flight ends now.
  void Abort() {
    closing_ = true;
    beast::error_code ignored;
    resolver_.cancel();
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  void Close() override {
    asio::post(io_, [self = shared_from_this()] {
      if (self->ended_ || self->closing_) return;
      self->closing_ = true;
      if (self->open_) self->DoClose();
      // Not open yet: the handshake's handler closes it.
    });
  }

 private:
  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) {
        const websocket::close_reason r = self->ws_.reason();
        return self->End(r.code != 0 ? static_cast<uint16_t>(r.code) : uint16_t{1011},
                         r.code != 0 ? std::string(r.reason.c_str())
                                     : "the connection to the primary ended: " + ec.message());
      }
      std::string text = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      // Text only, as the primary sends; a binary frame is not relayed.
      if (!self->closing_ && self->ws_.got_text()) self->on_message_(std::move(text));
      self->Read();
    });
  }

  void Write() {
    if (!open_ || writing_ || out_.empty() || ended_) return;
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) {
                      self->writing_ = false;
                      if (ec) return self->End(1011, "writing to the primary: " + ec.message());
                      self->out_.pop_front();
                      if (self->closing_ && self->out_.empty()) return self->DoClose();
                      self->Write();
                    });
  }

  void DoClose() {
    if (writing_) return;  // after the write in flight
    ws_.async_close(websocket::close_code::normal,
                    [self = shared_from_this()](beast::error_code) { self->End(1000, ""); });
  }

  // The primary's side is over: tell the client's side once.
  void End(uint16_t code, std::string reason) {
    if (ended_) return;
    ended_ = true;
    if (open_) open_count_->fetch_sub(1, std::memory_order_relaxed);
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (!closing_) on_close_(code, std::move(reason));
  }

  static constexpr std::size_t kMaxQueued = 4096;  // messages to the primary
  asio::io_context& io_;
  websocket::stream<wire::Stream> ws_;
  tcp::resolver resolver_;
  std::atomic<uint64_t>* const open_count_;
  const std::function<void(std::string)> on_message_;
  const std::function<void(uint16_t, std::string)> on_close_;
  websocket::response_type response_;
  beast::flat_buffer buffer_;
  std::deque<std::string> out_;
  bool open_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool ended_ = false;
};

}  // namespace

class Forwarder::Impl : public std::enable_shared_from_this<Forwarder::Impl> {
 public:
  struct Endpoint {
    std::string host, port;
    std::string name;  // "host:port"
    bool tls = false;  // https://
  };

  // tls: the context for the endpoints that speak TLS (null when none does).
  Impl(std::vector<Endpoint> endpoints, ForwarderOptions options,
       std::shared_ptr<wire::TlsContext> tls)
      : endpoints_(std::move(endpoints)),
        options_(options),
        tls_(std::move(tls)),
        work_(asio::make_work_guard(io_)),
        timer_(io_) {}

  void Start() {
    if (endpoints_.size() > 1) {
      // Requests wait for the first round: the first URL may be a standby.
      asio::post(io_, [self = shared_from_this()] {
        self->Probe(true);
        self->ArmProbeTimer();
      });
    }
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
      self->waiting_.fetch_sub(1, std::memory_order_relaxed);
      if (self->stopped_.load(std::memory_order_acquire)) {
        return done(self->Failure(req, 502, "The replica is shutting down."));
      }
      self->waiting_.fetch_add(1, std::memory_order_relaxed);
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
      // Exchanges in flight and tunnels end now (their handlers see the
      // sockets closed), so the thread has nothing left to wait for.
      for (const auto& w : self->active_) {
        if (auto c = w.lock()) {
          beast::error_code ec;
          c->stream.socket().close(ec);
        }
      }
      for (const auto& w : self->tunnel_list_) {
        if (auto t = w.lock()) t->Abort();
      }
      self->timer_.cancel();
      for (const auto& w : self->probe_list_) {
        if (auto p = w.lock()) {
          beast::error_code ec;
          p->resolver.cancel();
          p->stream.socket().close(ec);
        }
      }
      while (!self->queue_.empty()) {
        Job j = std::move(self->queue_.front());
        self->queue_.pop_front();
        self->waiting_.fetch_sub(1, std::memory_order_relaxed);
        j.done(self->Failure(j.request, 502, "The replica is shutting down."));
      }
      self->work_.reset();
      // After the handlers of what was just cancelled (queued before this):
      // the library's own timers (a WebSocket closing handshake's) are not
      // waited for.
      asio::post(self->io_, [self] { self->io_.stop(); });
    });
    if (thread_.joinable()) thread_.join();
    // What was posted or completed after the thread stopped (a request just
    // forwarded, a resolve finishing) runs now and ends: every `done` is
    // called and nothing keeps this object alive.
    io_.restart();
    io_.run_for(std::chrono::milliseconds(500));
  }

  std::shared_ptr<WsTunnel> Tunnel(std::string target, std::string client,
                                   std::function<void(std::string)> on_message,
                                   std::function<void(uint16_t, std::string)> on_close) {
    auto t = std::make_shared<mb::gateway::Tunnel>(io_, TlsOf(current()), &tunnels_,
                                                   std::move(on_message), std::move(on_close));
    asio::post(io_, [self = shared_from_this(), t, target = std::move(target),
                     client = std::move(client)]() mutable {
      const Endpoint& e = self->current();
      if (self->stopped_.load(std::memory_order_acquire)) {
        t->Start(e.host, e.port, std::move(target), std::move(client),
                 self->options_.connect_timeout);
        t->Abort();
        return;
      }
      std::erase_if(self->tunnel_list_, [](const auto& w) { return w.expired(); });
      self->tunnel_list_.push_back(t);
      t->Start(e.host, e.port, std::move(target), std::move(client),
               self->options_.connect_timeout);
    });
    return t;
  }

  ForwarderStats stats() const {
    ForwarderStats s;
    s.tunnels = tunnels_.load(std::memory_order_relaxed);
    s.forwarded = forwarded_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.connections = open_.load(std::memory_order_relaxed);
    s.waiting = waiting_.load(std::memory_order_relaxed);
    s.probes = probes_.load(std::memory_order_relaxed);
    s.switches = switches_.load(std::memory_order_relaxed);
    return s;
  }

  const std::string& primary() const noexcept { return current().name; }

 private:
  struct Job {
    Request request;
    std::function<void(Response)> done;
    bool retried = false;
    bool probed = false;  // could not connect once; sent again after a probe round
  };
  struct Conn {
    Conn(asio::io_context& io, std::shared_ptr<wire::TlsContext> tls)
        : stream(tcp::socket(io), std::move(tls)) {}
    wire::Stream stream;
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    SteadyClock::time_point idle_since{};
    std::size_t endpoint = 0;  // index into endpoints_
    bool reused = false;
  };
  // One URL's role probe: GET kPingTarget on a connection of its own.
  struct ProbeConn {
    ProbeConn(asio::io_context& io, std::shared_ptr<wire::TlsContext> tls)
        : resolver(io), stream(tcp::socket(io), std::move(tls)) {}
    tcp::resolver resolver;
    wire::Stream stream;
    beast::flat_buffer buffer;
    http::request<http::empty_body> request;
    http::response<http::string_body> response;
  };
  // One round over every URL: what each said. The round ends as soon as a
  // URL says primary and every URL before it has answered, so a URL that
  // does not answer delays only a round whose primary is listed after it.
  struct ProbeRound {
    enum class Said : uint8_t { kNothingYet, kPrimary, kOther };
    explicit ProbeRound(std::size_t n) : said(n, Said::kNothingYet) {}
    std::vector<Said> said;
    bool ended = false;
  };

  // A 503-triggered round no sooner than this after the previous one: a
  // busy primary answering 503 to many requests is probed once.
  static constexpr std::chrono::milliseconds kMinProbeGap{1000};

  std::shared_ptr<wire::TlsContext> TlsOf(const Endpoint& e) const {
    return e.tls ? tls_ : nullptr;
  }

  const Endpoint& current() const noexcept {
    // Pairs with the store in Probed(): endpoints_ is immutable, so only the
    // index needs to be read whole.
    return endpoints_[current_.load(std::memory_order_acquire)];
  }

  void ArmProbeTimer() {
    timer_.expires_after(options_.probe_interval);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->stopped_.load(std::memory_order_acquire)) return;
      self->Probe(false);
      self->ArmProbeTimer();
    });
  }

  // mb-forward: starts a round unless one is in flight. hold: the queue
  // waits for the round's end (a failure or the start asked for it).
  void Probe(bool hold) {
    if (endpoints_.size() < 2 || stopped_.load(std::memory_order_acquire)) return;
    if (hold) hold_ = true;
    if (probing_) return;
    probing_ = true;
    probes_.fetch_add(1, std::memory_order_relaxed);
    auto round = std::make_shared<ProbeRound>(endpoints_.size());
    std::erase_if(probe_list_, [](const auto& w) { return w.expired(); });
    for (std::size_t i = 0; i < endpoints_.size(); ++i) ProbeOne(round, i);
  }

  void ProbeOne(const std::shared_ptr<ProbeRound>& round, std::size_t i) {
    const Endpoint& e = endpoints_[i];
    auto p = std::make_shared<ProbeConn>(io_, TlsOf(e));
    probe_list_.push_back(p);
    p->request = http::request<http::empty_body>(http::verb::get, transfer::kPingTarget, 11);
    p->request.set(http::field::host, e.name);
    p->request.keep_alive(false);
    auto self = shared_from_this();
    auto end = [self, p, round, i](bool primary) {
      beast::error_code ignored;
      p->stream.socket().close(ignored);
      self->Probed(*round, i, primary);
    };
    p->resolver.async_resolve(
        e.host, e.port,
        [self, p, end, host = e.host](beast::error_code ec, tcp::resolver::results_type results) {
          if (ec || self->stopped_.load(std::memory_order_acquire)) return end(false);
          // One deadline for the whole probe: connect, ask, read.
          p->stream.expires_after(self->options_.connect_timeout);
          p->stream.tcp_layer().async_connect(
              results, [p, end, host](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) return end(false);
                p->stream.async_client_handshake(host, [p, end](beast::error_code ec5) {
                  if (ec5) return end(false);
                  http::async_write(
                      p->stream, p->request, [p, end](beast::error_code ec3, std::size_t) {
                        if (ec3) return end(false);
                        http::async_read(p->stream, p->buffer, p->response,
                                         [p, end](beast::error_code ec4, std::size_t) {
                                           end(!ec4 && p->response[transfer::kRoleHeader] ==
                                                           transfer::kRolePrimary);
                                         });
                      });
                });
              });
        });
  }

  // mb-forward: one URL of the round answered (or could not).
  void Probed(ProbeRound& round, std::size_t i, bool primary) {
    round.said[i] = primary ? ProbeRound::Said::kPrimary : ProbeRound::Said::kOther;
    if (round.ended) return;
    // The first URL that is not kOther decides: still waiting, or primary.
    const auto first = std::find_if(round.said.begin(), round.said.end(), [](ProbeRound::Said x) {
      return x != ProbeRound::Said::kOther;
    });
    if (first != round.said.end() && *first == ProbeRound::Said::kNothingYet) return;
    round.ended = true;
    probing_ = false;
    const std::size_t was = current_.load(std::memory_order_relaxed);
    if (first == round.said.end()) {
      if (!no_primary_logged_) {
        no_primary_logged_ = true;
        log::Warn("gateway",
                  "forwarder: no URL's ping says primary; staying with " + endpoints_[was].name);
      }
    } else {
      no_primary_logged_ = false;
      const auto now = static_cast<std::size_t>(first - round.said.begin());
      if (now != was) {
        // Pairs with the load in current(): Forward's callers on other
        // threads read the index.
        current_.store(now, std::memory_order_release);
        switches_.fetch_add(1, std::memory_order_relaxed);
        log::Info("gateway", "forwarder: the primary is now " + endpoints_[now].name,
                  {{"was", endpoints_[was].name}});
      }
    }
    hold_ = false;
    Pump();
  }

  Response Failure(const Request& req, int status, std::string_view why) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::server, "matchbook");
    res.set(http::field::content_type, "application/json;charset=UTF-8");
    res.keep_alive(req.keep_alive());
    res.body() =
        ApiError{status, -1001, fmt::format("{} (primary {})", why, current().name)}.Json();
    res.prepare_payload();
    return res;
  }

  // mb-forward: hands waiting requests to free connections, opening new ones
  // up to the limit.
  void Pump() {
    while (!queue_.empty() && !hold_) {
      std::shared_ptr<Conn> conn;
      const auto now = SteadyClock::now();
      const std::size_t cur = current_.load(std::memory_order_relaxed);
      while (!idle_.empty()) {
        std::shared_ptr<Conn> c = std::move(idle_.back());
        idle_.pop_back();
        if (c->endpoint == cur && now - c->idle_since < options_.idle_close) {
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
    const std::size_t at = current_.load(std::memory_order_relaxed);
    auto conn = std::make_shared<Conn>(io_, TlsOf(endpoints_[at]));
    conn->endpoint = at;
    std::erase_if(active_, [](const auto& w) { return w.expired(); });
    active_.push_back(conn);
    auto resolver = std::make_shared<tcp::resolver>(io_);
    auto j = std::make_shared<Job>(std::move(job));
    const Endpoint& e = endpoints_[conn->endpoint];
    resolver->async_resolve(
        e.host, e.port,
        [self = shared_from_this(), conn, resolver, j](beast::error_code ec,
                                                       tcp::resolver::results_type results) {
          if (ec || self->stopped_.load(std::memory_order_acquire)) {
            if (ec && self->Reprobe(conn, *j)) return;
            return self->Fail(conn, std::move(*j), 502, "Cannot resolve the primary",
                              ec ? ec : asio::error::operation_aborted);
          }
          conn->stream.expires_after(self->options_.connect_timeout);
          conn->stream.tcp_layer().async_connect(
              results, [self, conn, j](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) {
                  if (self->Reprobe(conn, *j)) return;
                  return self->Fail(conn, std::move(*j), 502, "Cannot connect to the primary", ec2);
                }
                beast::error_code nd;
                conn->stream.socket().set_option(tcp::no_delay(true), nd);
                conn->stream.async_client_handshake(
                    self->endpoints_[conn->endpoint].host, [self, conn, j](beast::error_code ec3) {
                      if (ec3) {
                        // Nothing of the request left: a wrong certificate is not retried.
                        return self->Fail(conn, std::move(*j), 502,
                                          "The TLS handshake with the primary failed", ec3);
                      }
                      self->Send(conn, std::move(*j));
                    });
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
                             // A 503 from the current primary: it may be one no more.
                             const bool probe = res.result_int() == 503 && self->MayProbe(*conn);
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
                             if (probe) self->Probe(true);
                             self->Pump();
                           });
        });
  }

  // A reused connection that failed before any answer: a GET goes once more
  // on a new connection; anything else may have reached the primary.
  void Retry(const std::shared_ptr<Conn>& conn, Job job, beast::error_code ec) {
    if (conn->reused && !job.retried && job.request.method() == http::verb::get &&
        !stopped_.load(std::memory_order_acquire)) {
      Close(*conn);
      job.retried = true;
      Open(std::move(job));
      return;
    }
    // Several URLs: the current one may have gone; the next requests wait
    // for a round instead of finding its other kept-alive connections dead.
    if (MayProbe(*conn)) Probe(true);
    Fail(conn, std::move(job), 502, "The connection to the primary failed", ec);
  }

  // A 503 or a broken connection from the current URL (several URLs) starts
  // a round, at most one per kMinProbeGap.
  bool MayProbe(const Conn& conn) {
    if (endpoints_.size() < 2 || conn.endpoint != current_.load(std::memory_order_relaxed)) {
      return false;
    }
    const auto now = SteadyClock::now();
    if (now - last_triggered_ < kMinProbeGap) return false;
    last_triggered_ = now;
    return true;
  }

  // A request that could not connect to the URL it was given (several URLs,
  // its first failure): back to the front of the queue, which waits for a
  // probe round; it is then sent to whichever URL is current. False: not so.
  bool Reprobe(const std::shared_ptr<Conn>& conn, Job& job) {
    if (endpoints_.size() < 2 || job.probed || stopped_.load(std::memory_order_acquire)) {
      return false;
    }
    Close(*conn);
    job.probed = true;
    waiting_.fetch_add(1, std::memory_order_relaxed);
    queue_.push_front(std::move(job));
    Probe(true);
    return true;
  }

  void Fail(const std::shared_ptr<Conn>& conn, Job job, int status, std::string_view what,
            beast::error_code ec) {
    Close(*conn);
    job.done(Failure(job.request, status, fmt::format("{}: {}", what, ec.message())));
    Pump();
  }

  const std::vector<Endpoint> endpoints_;  // the URLs given, in order
  const ForwarderOptions options_;
  const std::shared_ptr<wire::TlsContext> tls_;  // https:// endpoints (null: none)
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> open_{0};
  std::atomic<uint64_t> waiting_{0};
  std::atomic<uint64_t> tunnels_{0};
  std::atomic<uint64_t> probes_{0};
  std::atomic<uint64_t> switches_{0};
  // Written on mb-forward only (Probed); read anywhere.
  std::atomic<std::size_t> current_{0};
  // mb-forward only.
  asio::steady_timer timer_;  // the background probes (several URLs)
  bool probing_ = false;      // a round is in flight
  bool hold_ = false;         // the queue waits for the round in flight
  bool no_primary_logged_ = false;
  SteadyClock::time_point last_triggered_{};  // the last round a 503 or broken connection started
  std::vector<std::weak_ptr<ProbeConn>> probe_list_;
  std::deque<Job> queue_;
  std::vector<std::shared_ptr<Conn>> idle_;
  std::vector<std::weak_ptr<Conn>> active_;  // every connection opened, while it lives
  std::vector<std::weak_ptr<mb::gateway::Tunnel>> tunnel_list_;
};

Result<std::vector<std::pair<std::string, std::string>>> ParsePrimary(std::string_view primary,
                                                                      std::vector<bool>* tls) {
  std::vector<bool> ignored;
  return transfer::ParseHttpUrls(primary, "primary", "the primary's API address",
                                 tls != nullptr ? tls : &ignored);
}

Result<std::unique_ptr<Forwarder>> Forwarder::Create(std::string_view primary,
                                                     ForwarderOptions options) {
  std::vector<bool> tls;
  auto parsed = ParsePrimary(primary, &tls);
  if (!parsed.ok()) return parsed.status();
  std::vector<Impl::Endpoint> endpoints;
  bool any_tls = false;
  for (std::size_t i = 0; i < parsed->size(); ++i) {
    auto& [host, port] = (*parsed)[i];
    std::string name = host + ":" + port;
    endpoints.push_back(Impl::Endpoint{std::move(host), std::move(port), std::move(name), tls[i]});
    any_tls = any_tls || tls[i];
  }
  std::shared_ptr<wire::TlsContext> context;
  if (any_tls) {
    auto made = wire::MakeClientTlsContext(options.ca_file);
    if (!made.ok()) {
      return Status(made.status().code(), "--primary-ca: " + made.status().message());
    }
    context = std::move(*made);
  }
  auto impl = std::make_shared<Impl>(std::move(endpoints), options, std::move(context));
  impl->Start();
  return std::unique_ptr<Forwarder>(new Forwarder(std::move(impl)));
}

Forwarder::Forwarder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Forwarder::~Forwarder() { Stop(); }
void Forwarder::Forward(Request request, std::string client_address,
                        std::function<void(Response)> done) {
  impl_->Forward(std::move(request), std::move(client_address), std::move(done));
}
std::shared_ptr<WsTunnel> Forwarder::Tunnel(std::string target, std::string client_address,
                                            std::function<void(std::string)> on_message,
                                            std::function<void(uint16_t, std::string)> on_close) {
  return impl_->Tunnel(std::move(target), std::move(client_address), std::move(on_message),
                       std::move(on_close));
}
void Forwarder::Stop() { impl_->Stop(); }
ForwarderStats Forwarder::stats() const { return impl_->stats(); }
const std::string& Forwarder::primary() const noexcept { return impl_->primary(); }

}  // namespace mb::gateway
