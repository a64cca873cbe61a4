// Server: HTTP/1.1 and WebSocket sessions on Boost.Beast (contract in server.h).
//
// Threads: options.io_threads io threads, each running an io_context of its
// own (concurrency hint 1); connections are given to the contexts in turn as
// they are accepted and stay on theirs, each on its own strand. A shared
// context would let any free thread run any connection, but Asio's scheduler
// then wakes an idle thread (a futex wake, and on a VM an inter-processor
// interrupt) for nearly every handler posted: measured at 1,000 orders/s,
// the two io threads spent a third of their time waking each other. With a
// context per thread a handler runs where it was posted.
//
// Lifetimes: sessions are owned by shared_ptrs held by their pending
// operations, by the Respond functions handed to the HttpHandler and by
// WsConnection users. Every session also holds the Core (io_context, stats,
// handlers, registry), so a session that outlives the Server — a Respond kept
// by the handler — still destroys its socket against a live io_context. After
// Stop() nothing is posted to the io_contexts any more (Core::Post; the
// plain posts are an accepted connection handed to its context, on the
// acceptor's strand, which Stop() drains first, and Stop()'s own cancel of
// the write rounds' timers, which holds no session), so a queued handler can
// never keep a session alive inside a context nobody runs; what a write
// round still lists when the io threads end is let go (DropRounds).
//
// Errors: every Asio/Beast call uses its error_code overload; exceptions
// thrown by handler code are caught at the io thread boundary.

#include "gateway/server.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <future>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/json_escape.h"
#include "common/thread_annotations.h"
#include "common/ws_frame.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "net/stream.h"

namespace mb::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using Millis = std::chrono::milliseconds;

// Deadlines the options do not expose.
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // one HTTP response to a slow reader
// After the last answer on a connection: how long unread request bytes are
// drained so that closing does not reset the connection (and destroy the
// answer in the client's receive queue) — nginx's lingering close.
constexpr auto kLingerTimeout = std::chrono::seconds(1);
constexpr auto kWsHandshakeTimeout = std::chrono::seconds(30);
// A close started by Close(): the queue is flushed and the close handshake done
// within this, else the TCP connection is torn down.
constexpr auto kWsCloseTimeout = std::chrono::seconds(5);
// Stop(): how long the io threads may take to finish after every connection
// was closed before the io_context is stopped outright.
constexpr auto kStopTimeout = std::chrono::seconds(2);
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);  // e.g. out of descriptors
constexpr std::size_t kFirstReadBytes = 4096;
constexpr int kMaxIoThreads = 1024;
constexpr std::string_view kServerName = "matchbook";
constexpr std::string_view kSlowConsumerReason = "slow consumer: send queue full";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::size_t kMaxCloseReasonBytes = 123;  // RFC 6455 5.5.1: 125-byte payload

using ConnStream = wire::Stream;

// Binance codes on the server's own answers: -1000 UNKNOWN, -1008 SERVER_BUSY.
constexpr int kCodeUnknown = -1000;
constexpr int kCodeServerBusy = -1008;
// -1003 TOO_MANY_REQUESTS: Binance's code for an address over its limits.
constexpr int kCodeTooManyConnections = -1003;

// The server's own answers: {"code":...,"msg":...}, JSON, connection closed.
Response ErrorResponse(http::status status, int code, std::string_view msg, unsigned version) {
  Response res{status, version};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, "application/json");
  res.body() = "{\"code\":" + std::to_string(code) + ",\"msg\":" + JsonString(msg) + "}";
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

// The close codes Beast (and browsers) accept on the wire.
bool SendableCloseCode(uint16_t code) {
  if (code < 1000 || (code >= 1016 && code <= 2999)) return false;
  return code != 1004 && code != 1005 && code != 1006 && code != 1014 && code != 1015;
}

// At most kMaxCloseReasonBytes, cut on a UTF-8 character boundary.
std::string CloseReasonText(std::string reason) {
  if (reason.size() <= kMaxCloseReasonBytes) return reason;
  std::size_t n = kMaxCloseReasonBytes;
  while (n > 0 && (static_cast<unsigned char>(reason[n]) & 0xC0) == 0x80) --n;
  reason.resize(n);
  return reason;
}

// A connection as the registry sees it: Stop() tears every one down.
class Connection {
 public:
  virtual ~Connection() = default;
  // Any thread: close the socket now (posted to the connection's strand).
  virtual void Shutdown() = 0;
  // Its io thread, from the context's write round: send what is queued.
  virtual void Flush() {}
};

// One io context's write rounds. A WebSocket session with messages waiting
// joins the context's list; the io thread writes every listed session in
// one round, at once when its last round is at least `interval` old, else
// when the interval since that round is up. Under a stream of batches each
// subscriber then gets one send per interval, however many batches it
// spans, and the fan-out posts one handler per round instead of one per
// session; the first message after a quiet interval waits for nothing.
struct WriteRounds {
  explicit WriteRounds(net::io_context& ioc) : timer(ioc) {}
  Mutex mu;
  std::vector<std::shared_ptr<Connection>> listed MB_GUARDED_BY(mu);
  bool scheduled MB_GUARDED_BY(mu) = false;  // a round is posted or its timer set
  bool closed MB_GUARDED_BY(mu) = false;     // the server stopped: nothing is listed any more
  // The io thread's own.
  net::steady_timer timer;
  // Long enough ago that the first round never waits (the steady clock's
  // zero is arbitrary, e.g. the boot).
  int64_t last_round_ns = std::numeric_limits<int64_t>::min() / 2;
  std::vector<std::shared_ptr<Connection>> taking;  // keeps its capacity
};

// Open connections per peer address (ServerOptions::max_connections_per_ip).
//
// Thread safety: any thread.
class PeerCounts {
 public:
  // Counts one more from `ip` unless it has `limit` open already.
  bool TryAdd(const std::string& ip, uint32_t limit) {
    MutexLock lock(mu_);
    uint32_t& n = open_[ip];
    if (n >= limit) {
      if (n == 0) open_.erase(ip);
      return false;
    }
    ++n;
    return true;
  }
  void Remove(const std::string& ip) {
    MutexLock lock(mu_);
    auto it = open_.find(ip);
    if (it != open_.end() && --it->second == 0) open_.erase(it);
  }

 private:
  Mutex mu_;
  std::unordered_map<std::string, uint32_t> open_ MB_GUARDED_BY(mu_);
};

// Shared by the Server and every session (see the file comment on lifetimes).
struct Core {
  Core(ServerOptions opts, HttpHandler* http_handler, WsHandler* ws_handler)
      : options(std::move(opts)), http(http_handler), ws(ws_handler) {
    const int n = std::clamp(options.io_threads, 1, kMaxIoThreads);
    iocs.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      iocs.push_back(std::make_unique<net::io_context>(1));
      rounds.push_back(std::make_unique<WriteRounds>(*iocs.back()));
    }
  }

  // The context the next accepted connection lives on (round robin).
  net::io_context& NextContext() {
    return *iocs[next_ioc.fetch_add(1, std::memory_order_relaxed) % iocs.size()];
  }

  // Posts f to ex unless Stop() has begun; false when dropped. Stop() sets
  // `stopping` and then waits for `posting` to reach zero (both seq_cst): a
  // post either sees `stopping` and drops, or completes before Stop() releases
  // the io threads, so it still runs.
  template <class F>
  bool Post(const net::any_io_executor& ex, F&& f) {
    posting.fetch_add(1);
    if (stopping.load()) {
      posting.fetch_sub(1);
      return false;
    }
    net::post(ex, std::forward<F>(f));
    posting.fetch_sub(1);
    return true;
  }

  // The index of the io context an executor runs on (a session's strand is
  // always on one of them: a round on another context's thread would race
  // with the session's own handlers).
  std::size_t ContextOf(const net::any_io_executor& ex) const {
    const auto* ctx = &net::query(ex, net::execution::context);
    std::size_t i = 0;
    while (i < iocs.size() && static_cast<const net::execution_context*>(iocs[i].get()) != ctx) {
      ++i;
    }
    MB_CHECK(i < iocs.size());
    return i;
  }

  // Any thread: lists `conn` for context i's next write round; false when the
  // server is stopping.
  bool ListForWrite(std::size_t i, std::shared_ptr<Connection> conn) {
    WriteRounds& r = *rounds[i];
    bool post = false;
    {
      MutexLock lock(r.mu);
      if (r.closed) return false;
      r.listed.push_back(std::move(conn));
      post = !std::exchange(r.scheduled, true);
    }
    return !post || Post(iocs[i]->get_executor(), [this, i] { ScheduleRound(i); });
  }

  // Context i's thread: the round now, or when the interval is up.
  void ScheduleRound(std::size_t i) {
    WriteRounds& r = *rounds[i];
    const int64_t due = r.last_round_ns + static_cast<int64_t>(options.ws_write_interval_us) * 1000;
    const int64_t now = SteadyNs();
    if (now >= due || stopping.load()) {  // a stopping server arms no timer
      RunRound(i, now);
      return;
    }
    r.timer.expires_after(std::chrono::nanoseconds(due - now));
    r.timer.async_wait([this, i](error_code ec) {
      if (!ec) RunRound(i, SteadyNs());
    });
  }

  void RunRound(std::size_t i, int64_t now) {
    WriteRounds& r = *rounds[i];
    r.taking.clear();
    {
      MutexLock lock(r.mu);
      r.taking.swap(r.listed);
      r.scheduled = false;
    }
    r.last_round_ns = now;
    for (const auto& conn : r.taking) {
      try {
        conn->Flush();
      } catch (const std::exception& e) {  // that session only: the round goes on
        log::Error("gateway", fmt::format("server: a WebSocket write round threw: {}", e.what()));
      }
    }
    r.taking.clear();
  }

  // Stop(), while the io threads still run: no round waits for its timer.
  void CancelRounds() {
    for (std::size_t i = 0; i < iocs.size(); ++i) {
      net::post(*iocs[i], [r = rounds[i].get()] { r->timer.cancel(); });
    }
  }

  // After the io threads have ended: what rounds still list (a round posted
  // as the server stopped never runs) is let go, so sessions and the Core
  // that they hold do not keep each other alive.
  void DropRounds() {
    for (auto& r : rounds) {
      std::vector<std::shared_ptr<Connection>> drop;
      {
        MutexLock lock(r->mu);
        r->closed = true;
        drop.swap(r->listed);
      }
      r->taking.clear();
    }
  }

  // False when the server is stopping: the caller closes its socket.
  bool Register(uint64_t id, std::weak_ptr<Connection> conn) {
    MutexLock lock(mu);
    if (stopping.load()) return false;
    live.emplace(id, std::move(conn));
    return true;
  }
  void Unregister(uint64_t id) {
    MutexLock lock(mu);
    live.erase(id);
  }
  // Marks the server stopping and returns the connections to tear down.
  std::vector<std::shared_ptr<Connection>> BeginStop() {
    stopping.store(true);
    while (posting.load() != 0) std::this_thread::yield();
    std::vector<std::shared_ptr<Connection>> out;
    MutexLock lock(mu);
    for (auto& [id, weak] : live) {
      if (auto conn = weak.lock()) out.push_back(std::move(conn));
    }
    return out;
  }

  std::vector<std::unique_ptr<net::io_context>> iocs;  // one per io thread
  std::vector<std::unique_ptr<WriteRounds>> rounds;    // one per io context (after it)
  std::atomic<uint64_t> next_ioc{0};
  const ServerOptions options;
  HttpHandler* const http;
  WsHandler* const ws;
  ServerStats stats;
  PeerCounts peers;  // open connections per address
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  std::atomic<uint32_t> posting{0};
  Mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> live MB_GUARDED_BY(mu);
};

// One admitted connection in stats.connections_open (and in its address's
// count when that is limited); moves from the HTTP session to the WebSocket
// session on upgrade.
class OpenSlot {
 public:
  OpenSlot() = default;
  // peers null: the address is not counted.
  OpenSlot(ServerStats* stats, PeerCounts* peers, std::string ip)
      : stats_(stats), peers_(peers), ip_(std::move(ip)) {}
  OpenSlot(OpenSlot&& other) noexcept
      : stats_(std::exchange(other.stats_, nullptr)),
        peers_(std::exchange(other.peers_, nullptr)),
        ip_(std::move(other.ip_)) {}
  OpenSlot& operator=(OpenSlot&& other) noexcept {
    if (this != &other) {
      Release();
      stats_ = std::exchange(other.stats_, nullptr);
      peers_ = std::exchange(other.peers_, nullptr);
      ip_ = std::move(other.ip_);
    }
    return *this;
  }
  OpenSlot(const OpenSlot&) = delete;
  OpenSlot& operator=(const OpenSlot&) = delete;
  ~OpenSlot() { Release(); }
  void Release() {
    if (stats_ != nullptr) std::exchange(stats_, nullptr)->connections_open.fetch_sub(1);
    if (peers_ != nullptr) std::exchange(peers_, nullptr)->Remove(ip_);
  }

 private:
  ServerStats* stats_ = nullptr;
  PeerCounts* peers_ = nullptr;
  std::string ip_;
};

// Why a connection is not served (it is answered once and closed).
enum class Refusal : uint8_t { kNone, kServerFull, kAddressFull };

struct PeerAddress {
  std::string text;
  bool loopback = false;
};

PeerAddress Describe(net::ip::address addr) {
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6());
  }
  return {addr.to_string(), addr.is_loopback()};
}

PeerAddress DescribePeer(const tcp::endpoint& ep) { return Describe(ep.address()); }

// The client a request is for: the peer, or the address a trusted proxy (a
// replica) forwards for.
PeerAddress ClientOf(const Request& req, const PeerAddress& peer,
                     const std::vector<std::string>& trusted) {
  if (trusted.empty()) return peer;
  const auto h = req.find(kClientAddressHeader);
  if (h == req.end() || std::find(trusted.begin(), trusted.end(), peer.text) == trusted.end()) {
    return peer;
  }
  boost::system::error_code ec;
  std::string_view v = h->value();
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  const net::ip::address addr = net::ip::make_address(v, ec);
  if (ec) return peer;
  // Never loopback: a client of a replica is not local to this server,
  // whatever address it had where the replica saw it.
  return PeerAddress{Describe(addr).text, false};
}

// ---------------------------------------------------------------------------
// WebSocket

// A WebSocket session's transport: one buffer in front of the socket that
// every frame goes through. The session appends its data frames itself
// (AppendText: RFC 6455's unmasked server frame, FIN, text, built here; each
// message one frame) — all the messages queued for the connection while a
// batch is published, up to 4 KiB at a time — and then sends them in one
// write; Beast, which runs the handshake, reads, answers pings and closes,
// writes its own frames through async_write_some into the same buffer, each
// frame in one call, so frames never interleave, and the teardown waits
// until the close frame is sent. A send is first tried at once on the
// non-blocking socket (the common case costs no handler); what the socket
// does not take is sent asynchronously, and until then the session keeps
// its messages in its own bounded queue (busy()), so a slow reader still
// fills that queue and is cut off.
//
// Strand only (the session's). Beast runs one write at a time, so at most
// one of its writes is outstanding.
class GatheringStream {
 public:
  using executor_type = ConnStream::executor_type;
  using next_layer_type = ConnStream;
  // What the session appends before each send; while a send is in flight,
  // Beast's frames beyond it wait.
  static constexpr std::size_t kSendBytes = 4 * 1024;
  static constexpr std::size_t kKeptBytes = 64 * 1024;

  GatheringStream(ConnStream stream, ServerStats* stats)
      : stream_(std::move(stream)), stats_(stats) {}
  GatheringStream(GatheringStream&&) = default;

  executor_type get_executor() noexcept { return stream_.get_executor(); }
  ConnStream& next_layer() noexcept { return stream_; }
  const ConnStream& next_layer() const noexcept { return stream_; }

  // Once, before the handshake: the session (kept alive by a pending send),
  // what to call when a send the socket could not take at once has ended,
  // and the socket made non-blocking for the first try of a send.
  void Open(std::weak_ptr<void> owner, std::function<void()> on_sent) {
    owner_ = std::move(owner);
    on_sent_ = std::move(on_sent);
    if (stream_.tls()) return;  // TLS records go out through the TLS stream only
    error_code ec;
    stream_.socket().non_blocking(true, ec);
    if (ec) error_ = ec;
  }

  // A send is in flight (the socket was full) or the socket failed: append
  // nothing more now.
  bool busy() const noexcept { return sending_ || static_cast<bool>(error_); }
  bool failed() const noexcept { return static_cast<bool>(error_); }

  // One text message as one frame (a server's: unmasked).
  void AppendText(std::string_view payload) {
    char header[kMaxWsFrameHeader];
    gathered_.append(header, EncodeWsFrameHeader(0x1, false, payload.size(), header));
    gathered_.append(payload);
  }
  std::size_t gathered() const noexcept { return gathered_.size(); }

  // Sends what gathered: at once what the socket takes, the rest
  // asynchronously (busy() until then).
  void Send() {
    if (sending_ || gathered_.empty() || error_) return;
    stats_->ws_socket_writes.fetch_add(1, std::memory_order_relaxed);
    error_code ec;
    // Plain TCP: first what the socket takes at once. TLS: all of it
    // through the TLS stream, asynchronously.
    const std::size_t sent =
        stream_.tls() ? 0 : stream_.socket().write_some(net::buffer(gathered_), ec);
    if (ec == net::error::would_block || ec == net::error::try_again) ec = {};
    if (ec) return Fail(ec);
    if (sent == gathered_.size()) {
      gathered_.clear();
      Trim(&gathered_);
      return;
    }
    sending_ = true;
    sending_buf_.assign(gathered_, sent);
    gathered_.clear();
    net::async_write(stream_, net::buffer(sending_buf_),
                     [this, owner = owner_.lock()](error_code e, std::size_t) {
                       if (owner) OnSent(e);
                     });
  }

  template <class MutableBufferSequence, class ReadHandler>
  auto async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    return stream_.async_read_some(buffers, std::forward<ReadHandler>(handler));
  }

  // Beast's frames. Each arrives whole in one call: Beast writes only
  // control frames (at most 127 bytes) and the handshake's answer here, and
  // net::async_write hands over up to 64 KiB per call. A Beast write of a
  // data message above 64 KiB would arrive in pieces that the session's own
  // frames could come between, so the session never writes through Beast.
  template <class ConstBufferSequence, class WriteHandler>
  auto async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    return net::async_initiate<WriteHandler, void(error_code, std::size_t)>(
        [this](auto h, const ConstBufferSequence& b) { this->Gather(std::move(h), b); }, handler,
        buffers);
  }

  // Calls `then` (posted) once everything gathered has been sent or the
  // socket has failed: the close frame goes out before the teardown.
  template <class Then>
  void AsyncFlush(Then then) {
    flushed_ = Later::Of([then = std::move(then)](error_code) mutable { std::move(then)(); });
    Send();
    if (!sending_) RunFlushed();
  }

 private:
  // What runs once a send ends (a held Beast write, AsyncFlush's
  // continuation); move-only callables, as Asio's handlers are.
  struct Later {
    virtual ~Later() = default;
    virtual void Run(error_code ec) = 0;
    template <class F>
    static std::unique_ptr<Later> Of(F f) {
      struct Impl final : Later {
        explicit Impl(F fn) : f(std::move(fn)) {}
        void Run(error_code ec) override { std::move(f)(ec); }
        F f;
      };
      return std::make_unique<Impl>(std::move(f));
    }
  };
  void RunFlushed() {
    if (!flushed_) return;
    net::post(stream_.get_executor(),
              [then = std::shared_ptr<Later>(std::exchange(flushed_, nullptr))] { then->Run({}); });
  }

  template <class Handler, class ConstBufferSequence>
  void Gather(Handler h, const ConstBufferSequence& b) {
    if (error_) return Complete(std::move(h), error_, 0);
    const std::size_t n = net::buffer_size(b);
    for (auto it = net::buffer_sequence_begin(b); it != net::buffer_sequence_end(b); ++it) {
      const net::const_buffer piece(*it);
      gathered_.append(static_cast<const char*>(piece.data()), piece.size());
    }
    if (sending_ && gathered_.size() > kSendBytes) {
      // One of Beast's writes, held while a send is in flight and enough
      // waits behind it.
      held_ = Later::Of([this, h = std::move(h), n](error_code ec) mutable {
        Complete(std::move(h), ec, ec ? 0 : n);
      });
      return;
    }
    Complete(std::move(h), {}, n);
    Send();
  }

  // A write's completion, posted: never inside the initiating call.
  template <class Handler>
  void Complete(Handler h, error_code ec, std::size_t n) {
    net::post(stream_.get_executor(), [h = std::move(h), ec, n]() mutable { std::move(h)(ec, n); });
  }

  void OnSent(error_code ec) {
    sending_ = false;
    sending_buf_.clear();
    Trim(&sending_buf_);
    if (ec) {
      Fail(ec);
    } else {
      if (held_) std::exchange(held_, nullptr)->Run({});
      Send();
      if (!sending_) RunFlushed();
    }
    if (on_sent_) on_sent_();
  }

  // A connection keeps no more than kKeptBytes of buffer between sends, so
  // one large message does not stay resident per subscriber.
  static void Trim(std::string* buffer) {
    if (buffer->capacity() > kKeptBytes) std::string().swap(*buffer);
  }

  void Fail(error_code ec) {
    error_ = ec;
    gathered_.clear();
    if (held_) std::exchange(held_, nullptr)->Run(ec);
    RunFlushed();
  }

  ConnStream stream_;
  ServerStats* stats_;
  std::weak_ptr<void> owner_;
  std::function<void()> on_sent_;
  std::string gathered_;     // frames not yet sent
  std::string sending_buf_;  // what the socket has yet to take of the send in flight
  bool sending_ = false;
  error_code error_;  // the socket failed: every later write fails with it
  std::unique_ptr<Later> held_;
  std::unique_ptr<Later> flushed_;  // AsyncFlush()'s continuation
};

// Closing: Beast tears the TCP connection down under the gathering layer
// (the session only closes asynchronously).
template <class TeardownHandler>
void async_teardown(beast::role_type role, GatheringStream& s, TeardownHandler&& handler) {
  s.AsyncFlush([role, &s, h = std::forward<TeardownHandler>(handler)]() mutable {
    wire::async_teardown(role, s.next_layer(), std::move(h));
  });
}

class WsSession final : public WsConnection, public Connection {
 public:
  WsSession(std::shared_ptr<Core> core, ConnStream stream, OpenSlot slot, std::string remote,
            std::string target)
      : core_(std::move(core)),
        executor_(stream.get_executor()),
        context_(core_->ContextOf(executor_)),
        ws_(std::move(stream), &core_->stats),
        teardown_timer_(executor_),
        slot_(std::move(slot)),
        remote_(std::move(remote)),
        target_(std::move(target)),
        id_(core_->next_id.fetch_add(1)) {}

  ~WsSession() override { core_->Unregister(id_); }

  WsSession(const WsSession&) = delete;
  WsSession& operator=(const WsSession&) = delete;

  // On the strand (the HTTP session's completion handler): the handshake.
  void Run(Request request) {
    ws_.next_layer().Open(std::weak_ptr<void>(Self()), [weak = std::weak_ptr<WsSession>(Self())] {
      if (auto self = weak.lock()) self->WriteNext();  // on the strand: the socket took the rest
    });
    if (!core_->Register(id_, std::weak_ptr<Connection>(Self()))) {
      FailHandshake({});
      return;
    }
    const ServerOptions& o = core_->options;
    ws_.set_option(websocket::stream_base::timeout{
        kWsHandshakeTimeout,
        o.ws_idle_ping_ms == 0 ? websocket::stream_base::none() : Millis(o.ws_idle_ping_ms),
        o.ws_idle_ping_ms != 0});
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, kServerName); }));
    ws_.read_message_max(o.ws_max_message_bytes);
    ws_.text(true);
    ws_.auto_fragment(false);  // one frame per message: one gather write, no 4 KiB frames
    upgrade_ = std::move(request);
    ws_.async_accept(upgrade_, [self = Self()](error_code ec) { self->OnAccept(ec); });
  }

  using WsConnection::Send;
  bool Send(std::shared_ptr<const std::string> text, int64_t origin_wall_ns) override {
    return Queue(std::move(text), origin_wall_ns, false);
  }
  bool Publish(std::shared_ptr<const std::string> text, int64_t origin_wall_ns) override {
    return Queue(std::move(text), origin_wall_ns, true);
  }

  // Any thread. in_round: the writer may wait for the context's write round;
  // else it runs at once (also when a round would have started it).
  bool Queue(std::shared_ptr<const std::string> text, int64_t origin_wall_ns, bool in_round) {
    if (!text) return false;
    const ServerOptions& o = core_->options;
    const std::size_t bytes = text->size();
    bool overflow = false;
    bool start_writer = false;
    bool list = false;
    {
      MutexLock lock(mu_);
      if (state_ != State::kOpen) return false;
      if (queue_.size() + 1 > o.ws_send_queue_messages ||
          waiting_bytes_ + bytes > o.ws_send_queue_bytes) {
        // Slow consumer: drop what waits and close; what the socket has yet
        // to take is the last thing the peer gets before the close frame.
        overflow = true;
        state_ = State::kFailed;
        core_->stats.ws_dropped_messages.fetch_add(1 + queue_.size());
        queue_.clear();
        waiting_bytes_ = 0;
      } else {
        queue_.push_back({std::move(text), origin_wall_ns});
        waiting_bytes_ += bytes;
        if (!writing_) {
          writing_ = true;
          listed_ = list = in_round;
          start_writer = !in_round;
        } else if (!in_round && listed_) {
          listed_ = false;  // an answer does not wait for the round
          start_writer = true;
        }
      }
    }
    if (overflow) {
      core_->stats.ws_slow_disconnects.fetch_add(1);
      core_->Post(executor_, [self = Self()] {
        self->StartClose(static_cast<uint16_t>(websocket::close_code::policy_error),
                         std::string(kSlowConsumerReason),
                         std::chrono::milliseconds(self->core_->options.ws_slow_close_grace_ms));
      });
      return false;
    }
    if (list) return core_->ListForWrite(context_, Self());
    if (!start_writer) return true;  // the running (or listed) writer picks it up
    return core_->Post(executor_, [self = Self()] { self->WriteNext(); });
  }

  void Close(uint16_t code, std::string reason) override {
    {
      MutexLock lock(mu_);
      if (state_ != State::kOpen) return;
      state_ = State::kClosing;
      close_code_ = SendableCloseCode(code) ? code : uint16_t{1000};
      close_reason_ = CloseReasonText(std::move(reason));
    }
    core_->Post(executor_, [self = Self()] { self->BeginClose(); });
  }

  uint64_t id() const noexcept override { return id_; }
  const std::string& target() const noexcept override { return target_; }
  const std::string& remote() const noexcept override { return remote_; }

  void Shutdown() override {
    net::post(executor_, [self = Self()] { self->Teardown(); });
  }

  // The context's write round (its one thread, so the strand's too).
  void Flush() override { WriteNext(); }

 private:
  enum class State : uint8_t {
    kOpen,     // Send() queues
    kClosing,  // Close(): the queue is flushed, then the close handshake
    kFailed,   // slow consumer: the queue was dropped, 1008 goes out
    kClosed,   // the read loop ended
  };

  std::shared_ptr<WsSession> Self() {
    return std::static_pointer_cast<WsSession>(shared_from_this());
  }

  void FailHandshake(error_code ec) {
    finished_ = true;
    if (ec == beast::error::timeout) core_->stats.timeouts.fetch_add(1);
    {
      MutexLock lock(mu_);
      state_ = State::kClosed;
    }
    slot_.Release();
    // Beast's refusal (e.g. 400) may still be in the transport's buffer.
    ws_.next_layer().AsyncFlush([self = Self()] { beast::get_lowest_layer(self->ws_).close(); });
  }

  void OnAccept(error_code ec) {
    if (ec) {
      FailHandshake(ec);
      return;
    }
    upgrade_ = {};
    opened_ = true;
    core_->stats.ws_open.fetch_add(1);
    core_->stats.ws_total.fetch_add(1);
    try {
      core_->ws->OnOpen(Self());
    } catch (const std::exception& e) {
      log::Error("gateway", fmt::format("server: WsHandler::OnOpen threw: {}", e.what()));
    }
    Read();
  }

  void Read() {
    ws_.async_read(read_buffer_, [self = Self()](error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (ec) {
      Finish(ec);
      return;
    }
    const auto data = read_buffer_.cdata();
    const std::string_view text(static_cast<const char*>(data.data()), data.size());
    try {
      core_->ws->OnMessage(Self(), text);
    } catch (const std::exception& e) {
      log::Error("gateway", fmt::format("server: WsHandler::OnMessage threw: {}", e.what()));
    }
    read_buffer_.consume(read_buffer_.size());
    Read();
  }

  // The one writer: moves what is queued into the transport's buffer, up
  // to 4 KiB at a time, and sends it, until the queue is empty or the socket
  // is full (the transport calls back once it has taken the rest).
  void WriteNext() {
    GatheringStream& out = ws_.next_layer();
    for (;;) {
      bool close_now = false;
      uint16_t code = 0;
      std::string reason;
      {
        MutexLock lock(mu_);
        listed_ = false;  // this run does what the round would
        // !is_open(): Beast is closing (the peer's close, or a protocol
        // error) and its close frame may already be in the buffer: no data
        // frame may follow it (RFC 6455 5.5.1).
        if (finished_ || close_started_ || !ws_.is_open()) {
          writing_ = false;
          return;
        }
        if (out.busy() && !out.failed()) return;  // writing_ stays: the send's end calls back
        if (out.failed() || queue_.empty()) {
          writing_ = false;
          if (!out.failed() && state_ == State::kClosing) {
            close_now = true;
            code = close_code_;
            reason = close_reason_;
          }
        } else {
          batch_.clear();
          std::size_t taken = out.gathered();
          do {
            taken += queue_.front().text->size();
            waiting_bytes_ -= queue_.front().text->size();
            batch_.push_back(std::move(queue_.front()));
            queue_.pop_front();
          } while (!queue_.empty() && taken < GatheringStream::kSendBytes);
        }
      }
      if (out.failed()) {
        Teardown();  // the read loop ends and reports the close
        return;
      }
      if (close_now) {
        StartClose(code, std::move(reason), kWsCloseTimeout);
        return;
      }
      if (batch_.empty()) return;
      const int64_t now_ns = core_->options.ws_freshness != nullptr ? WallNs() : 0;
      for (const Queued& m : batch_) {
        out.AppendText(*m.text);
        if (m.origin_wall_ns != 0 && now_ns != 0) {
          core_->options.ws_freshness->RecordDelta(now_ns - m.origin_wall_ns);
        }
      }
      core_->stats.ws_messages_sent.fetch_add(batch_.size());
      batch_.clear();
      out.Send();
    }
  }

  void BeginClose() {
    uint16_t code = 0;
    std::string reason;
    {
      MutexLock lock(mu_);
      if (writing_) return;  // WriteNext() closes once the queue is flushed
      code = close_code_;
      reason = close_reason_;
    }
    StartClose(code, std::move(reason), kWsCloseTimeout);
  }

  // Sends the close frame (Beast holds it behind an in-flight write) and tears
  // the connection down if the handshake is not done within `timeout`.
  void StartClose(uint16_t code, std::string reason, std::chrono::steady_clock::duration timeout) {
    if (finished_ || close_started_) return;
    close_started_ = true;
    teardown_timer_.expires_after(timeout);
    teardown_timer_.async_wait([self = Self()](error_code ec) {
      if (!ec) self->Teardown();
    });
    ws_.async_close(websocket::close_reason(static_cast<websocket::close_code>(code), reason),
                    [self = Self()](error_code) {
                      // The read loop sees the end of the connection and finishes.
                    });
  }

  void Teardown() {
    if (finished_) return;
    beast::get_lowest_layer(ws_).close();
  }

  // The read loop ended: the connection is over. Reports OnClose once.
  void Finish(error_code ec) {
    if (finished_) return;
    finished_ = true;
    if (ec == beast::error::timeout) core_->stats.timeouts.fetch_add(1);
    {
      MutexLock lock(mu_);
      state_ = State::kClosed;
      queue_.clear();
      waiting_bytes_ = 0;
    }
    teardown_timer_.cancel();
    // No Beast timer may outlive the connection (it would hold Stop() up).
    ws_.set_option(websocket::stream_base::timeout{websocket::stream_base::none(),
                                                   websocket::stream_base::none(), false});
    beast::get_lowest_layer(ws_).close();
    slot_.Release();
    if (opened_) {
      core_->stats.ws_open.fetch_sub(1);
      core_->stats.ws_closed.fetch_add(1);
      try {
        core_->ws->OnClose(Self());
      } catch (const std::exception& e) {
        log::Error("gateway", fmt::format("server: WsHandler::OnClose threw: {}", e.what()));
      }
    }
  }

  const std::shared_ptr<Core> core_;     // first: destroyed last (owns the io_context)
  const net::any_io_executor executor_;  // the strand
  const std::size_t context_;            // which io context runs it
  websocket::stream<GatheringStream> ws_;
  net::steady_timer teardown_timer_;
  beast::flat_buffer read_buffer_;
  Request upgrade_;  // kept until the handshake completes
  OpenSlot slot_;
  const std::string remote_;
  const std::string target_;
  const uint64_t id_;

  // Strand only.
  bool opened_ = false;
  bool finished_ = false;
  bool close_started_ = false;

  Mutex mu_;
  State state_ MB_GUARDED_BY(mu_) = State::kOpen;
  struct Queued {
    std::shared_ptr<const std::string> text;
    int64_t origin_wall_ns = 0;
  };
  std::deque<Queued> queue_ MB_GUARDED_BY(mu_);       // not yet written
  std::vector<Queued> batch_;                         // strand only: WriteNext()'s current take
  std::size_t waiting_bytes_ MB_GUARDED_BY(mu_) = 0;  // bytes in queue_
  bool writing_ MB_GUARDED_BY(mu_) = false;           // a WriteNext chain is running or posted
  bool listed_ MB_GUARDED_BY(mu_) = false;            // writing_, waiting for a write round
  uint16_t close_code_ MB_GUARDED_BY(mu_) = 1000;
  std::string close_reason_ MB_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// HTTP

class HttpSession final : public Connection, public std::enable_shared_from_this<HttpSession> {
 public:
  // slot: its place in the open connections, when it is admitted (refusal
  // kNone; else the session answers 503 or 429 and closes). tls: the context
  // of a TLS port (null: plain).
  HttpSession(std::shared_ptr<Core> core, tcp::socket socket, OpenSlot slot, Refusal refusal,
              PeerAddress peer, std::shared_ptr<ssl::context> tls)
      : core_(std::move(core)),
        executor_(socket.get_executor()),
        stream_(std::move(socket), std::move(tls)),
        slot_(std::move(slot)),
        refusal_(refusal),
        remote_(std::move(peer.text)),
        loopback_(peer.loopback),
        id_(core_->next_id.fetch_add(1)) {}

  ~HttpSession() override { core_->Unregister(id_); }

  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Any thread.
  void Run() {
    const bool registered = core_->Register(id_, std::weak_ptr<Connection>(shared_from_this()));
    net::post(executor_, [self = shared_from_this(), registered] {
      if (!registered) {
        self->CloseNow();
      } else if (self->stream_.tls()) {
        self->Handshake();
      } else if (self->refusal_ != Refusal::kNone) {
        self->WriteRefusal();  // without reading the request
      } else {
        self->ReadFirstByte();
      }
    });
  }

  void Shutdown() override {
    net::post(executor_, [self = shared_from_this()] { self->CloseNow(); });
  }

 private:
  // A TLS port: the handshake, within read_timeout_ms, before anything else.
  void Handshake() {
    stream_.expires_after(Millis(core_->options.read_timeout_ms));
    stream_.tls_stream().async_handshake(ssl::stream_base::server,
                                         [self = shared_from_this()](error_code ec) {
                                           ServerStats& stats = self->core_->stats;
                                           if (ec) {
                                             stats.tls_handshake_failures.fetch_add(1);
                                             if (ec == beast::error::timeout)
                                               stats.timeouts.fetch_add(1);
                                             self->CloseNow();
                                             return;
                                           }
                                           stats.tls_handshakes.fetch_add(1);
                                           if (self->refusal_ != Refusal::kNone) {
                                             self->WriteRefusal();
                                           } else {
                                             self->ReadFirstByte();
                                           }
                                         });
  }

  // Waits up to idle_timeout_ms for the first byte of the next request.
  void ReadFirstByte() {
    if (core_->stopping.load()) {
      CloseNow();
      return;
    }
    if (buffer_.size() > 0) {  // a pipelined request is already here
      ReadHeader();
      return;
    }
    stream_.expires_after(Millis(core_->options.idle_timeout_ms));
    stream_.async_read_some(
        buffer_.prepare(kFirstReadBytes),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->OnFirstByte(ec, n); });
  }

  void OnFirstByte(error_code ec, std::size_t n) {
    if (ec) {
      if (ec == beast::error::timeout) core_->stats.timeouts.fetch_add(1);
      CloseNow();
      return;
    }
    buffer_.commit(n);
    ReadHeader();
  }

  // The whole request, header and body, must arrive within read_timeout_ms.
  void ReadHeader() {
    const ServerOptions& o = core_->options;
    parser_.emplace();
    parser_->header_limit(o.max_header_bytes);
    parser_->body_limit(o.max_body_bytes);
    stream_.expires_after(Millis(o.read_timeout_ms));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    const auto& fields = parser_->get();
    const auto count = static_cast<uint64_t>(std::distance(fields.begin(), fields.end()));
    if (count > core_->options.max_header_count) {
      core_->stats.bad_requests.fetch_add(1);
      WriteError(http::status::request_header_fields_too_large, kCodeUnknown,
                 "Too many header fields.");
      return;
    }
    if (parser_->is_done()) {
      OnRequest();
      return;
    }
    if (beast::iequals(fields[http::field::expect], "100-continue")) {
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](error_code wec, std::size_t) {
                         if (wec) {
                           self->CloseNow();
                         } else {
                           self->ReadBody();
                         }
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       if (ec) {
                         self->OnReadError(ec);
                       } else {
                         self->OnRequest();
                       }
                     });
  }

  void OnReadError(error_code ec) {
    auto& stats = core_->stats;
    if (ec == beast::error::timeout) {
      stats.timeouts.fetch_add(1);  // the stream closed the socket already
      CloseNow();
    } else if (ec == http::error::header_limit) {
      stats.bad_requests.fetch_add(1);
      WriteError(http::status::request_header_fields_too_large, kCodeUnknown,
                 "Request header too large.");
    } else if (ec == http::error::body_limit) {
      stats.bad_requests.fetch_add(1);
      WriteError(http::status::payload_too_large, kCodeUnknown, "Request body too large.");
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      stats.bad_requests.fetch_add(1);
      WriteError(http::status::bad_request, kCodeUnknown, "Malformed request: " + ec.message());
    } else {
      CloseNow();  // the peer went away (end of stream, reset, ...)
    }
  }

  void OnRequest() {
    Request req = parser_->release();
    parser_.reset();
    core_->stats.requests.fetch_add(1);
    if (websocket::is_upgrade(req)) {
      Upgrade(std::move(req));
      return;
    }
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_request_ = req.method() == http::verb::head;
    if (core_->http == nullptr) {
      WriteError(http::status::not_found, kCodeUnknown, "Not found.");
      return;
    }
    const uint64_t seq = ++request_seq_;
    awaiting_response_ = true;
    Respond respond = [self = shared_from_this(), seq](Response res) {
      self->core_->Post(self->executor_, [self, seq, res = std::move(res)]() mutable {
        self->OnResponse(seq, std::move(res));
      });
    };
    Respond fallback = respond;
    try {
      const PeerAddress client =
          ClientOf(req, PeerAddress{remote_, loopback_}, core_->options.trusted_proxies);
      core_->http->Handle(std::move(req), client.text, client.loopback, std::move(respond));
    } catch (const std::exception& e) {
      log::Error("gateway", fmt::format("server: HttpHandler::Handle threw: {}", e.what()));
      fallback(ErrorResponse(http::status::internal_server_error, kCodeUnknown, "Internal error.",
                             version_));
    }
  }

  void Upgrade(Request req) {
    bool accepted = false;
    if (core_->ws != nullptr) {
      try {
        accepted = core_->ws->Accepts(req);
      } catch (const std::exception& e) {
        log::Error("gateway", fmt::format("server: WsHandler::Accepts threw: {}", e.what()));
      }
    }
    if (!accepted) {
      version_ = req.version();
      WriteError(http::status::not_found, kCodeUnknown, "No WebSocket endpoint at this path.");
      return;
    }
    // The socket (and its strand and the open-connection slot) move to the
    // WebSocket session; this session is done.
    closed_ = true;
    stream_.expires_never();
    std::string target(req.target());
    auto ws = std::make_shared<WsSession>(
        core_, std::move(stream_), std::move(slot_),
        ClientOf(req, PeerAddress{remote_, loopback_}, core_->options.trusted_proxies).text,
        std::move(target));
    ws->Run(std::move(req));
  }

  // The handler's answer to request `seq`, on the strand.
  void OnResponse(uint64_t seq, Response res) {
    if (closed_ || !awaiting_response_ || seq != request_seq_) return;  // late or repeated
    awaiting_response_ = false;
    const bool handler_closes = http::token_list{res[http::field::connection]}.exists("close");
    const bool keep = keep_alive_ && !handler_closes && !core_->stopping.load();
    res.version(version_);
    res.keep_alive(keep);
    res.set(http::field::server, kServerName);
    res.prepare_payload();
    // A HEAD answer carries the GET answer's Content-Length but no body.
    if (head_request_) res.body().clear();
    Write(std::move(res), keep);
  }

  // Over max_connections (503) or max_connections_per_ip (429).
  void WriteRefusal() {
    if (refusal_ == Refusal::kAddressFull) {
      WriteError(http::status::too_many_requests, kCodeTooManyConnections,
                 "Too many connections from this address.");
    } else {
      WriteError(http::status::service_unavailable, kCodeServerBusy,
                 "Server is currently overloaded with other requests. Please try again in a few "
                 "minutes.");
    }
  }

  void WriteError(http::status status, int code, std::string_view msg) {
    Write(ErrorResponse(status, code, msg, version_), false);
  }

  void Write(Response res, bool keep_alive) {
    if (closed_) return;
    response_.emplace(std::move(res));
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keep_alive](error_code ec, std::size_t) {
                        self->OnWrite(ec, keep_alive);
                      });
  }

  void OnWrite(error_code ec, bool keep_alive) {
    response_.reset();
    if (ec) {
      if (ec == beast::error::timeout) core_->stats.timeouts.fetch_add(1);
      CloseNow();
    } else if (keep_alive) {
      ReadFirstByte();
    } else {
      Linger();
    }
  }

  // Last answer written: stop sending, discard what the client still sends
  // for a moment, then close (see kLingerTimeout).
  void Linger() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec || core_->stopping.load()) {
      CloseNow();
      return;
    }
    buffer_.clear();
    stream_.expires_after(kLingerTimeout);
    Drain();
  }

  // Raw bytes, TLS or not: they are thrown away.
  void Drain() {
    stream_.tcp_layer().async_read_some(buffer_.prepare(kFirstReadBytes),
                                        [self = shared_from_this()](error_code ec, std::size_t) {
                                          if (ec) {
                                            self->CloseNow();
                                          } else {
                                            self->Drain();
                                          }
                                        });
  }

  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    stream_.close();
    slot_.Release();
  }

  const std::shared_ptr<Core> core_;     // first: destroyed last (owns the io_context)
  const net::any_io_executor executor_;  // the strand; read from any thread by Respond
  ConnStream stream_;
  OpenSlot slot_;
  const Refusal refusal_;
  const std::string remote_;
  const bool loopback_;
  const uint64_t id_;

  // Strand only.
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<Response> response_;  // being written
  uint64_t request_seq_ = 0;
  bool awaiting_response_ = false;
  bool keep_alive_ = false;
  bool head_request_ = false;
  unsigned version_ = 11;
  bool closed_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------
// Server

class Server::Impl {
 public:
  Impl(ServerOptions options, HttpHandler* http, WsHandler* ws)
      : core_(std::make_shared<Core>(std::move(options), http, ws)),
        acceptor_(net::make_strand(*core_->iocs[0])),
        accept_retry_(acceptor_.get_executor()) {}

  ~Impl() { Stop(); }

  Status Start() {
    const ServerOptions& o = core_->options;
    if (started_) return InvalidArgument("gateway server: Start() called twice");
    if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
      return InvalidArgument("gateway server: TLS needs both a certificate and its key");
    }
    if (!o.tls_cert_file.empty()) {
      auto ctx = wire::MakeServerTlsContext(o.tls_cert_file, o.tls_key_file);
      if (!ctx.ok()) return ctx.status();
      MutexLock lock(tls_mu_);
      tls_ = std::move(*ctx);
    }
    if (o.io_threads < 1 || o.io_threads > kMaxIoThreads) {
      return InvalidArgument("gateway server: io_threads must be 1.." +
                             std::to_string(kMaxIoThreads) + ", got " +
                             std::to_string(o.io_threads));
    }
    const std::string where = o.host + ":" + std::to_string(o.port);
    error_code ec;
    // No name lookup at startup: an address, or "localhost".
    const net::ip::address addr = o.host == "localhost"
                                      ? net::ip::address(net::ip::address_v4::loopback())
                                      : net::ip::make_address(o.host, ec);
    if (ec) {
      return InvalidArgument("gateway server: listen host '" + o.host +
                             "' is not an IP address: " + ec.message());
    }
    const tcp::endpoint endpoint(addr, o.port);
    auto fail = [&](const char* what) {
      error_code ignored;
      acceptor_.close(ignored);
      return Unavailable("gateway server: cannot " + std::string(what) + " " + where + ": " +
                         ec.message());
    };
    if (acceptor_.open(endpoint.protocol(), ec); ec) return fail("open a socket for");
    if (acceptor_.set_option(net::socket_base::reuse_address(true), ec); ec) {
      return fail("set SO_REUSEADDR for");
    }
    if (acceptor_.bind(endpoint, ec); ec) return fail("bind");
    if (acceptor_.listen(net::socket_base::max_listen_connections, ec); ec)
      return fail("listen on");
    const tcp::endpoint bound = acceptor_.local_endpoint(ec);
    if (ec) return fail("read the bound port of");
    port_ = bound.port();

    started_ = true;
    for (auto& ioc : core_->iocs) work_.push_back(net::make_work_guard(*ioc));
    Accept();  // no io thread runs yet: safe from this thread
    const int n = static_cast<int>(core_->iocs.size());
    {
      MutexLock lock(exit_mu_);
      running_ = n;
    }
    threads_.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, i] {
        const std::string name = fmt::format("mb-io-{}", i);
        pthread_setname_np(pthread_self(), name.c_str());
        RunIoThread(*core_->iocs[static_cast<std::size_t>(i)]);
      });
    }
    return Status::Ok();
  }

  void Stop() {
    if (!started_ || stopped_) return;
    stopped_ = true;
    // The acceptor is closed on its strand, and waited for, before anything
    // else: an accept being handled there hands its connection to another
    // io thread's context with a plain post, which must reach that context
    // while its work guard still keeps it running.
    auto acceptor_closed = std::make_shared<std::promise<void>>();
    std::future<void> closed = acceptor_closed->get_future();
    net::post(acceptor_.get_executor(), [this, acceptor_closed] {
      error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
      acceptor_closed->set_value();
    });
    if (closed.wait_for(kStopTimeout) != std::future_status::ready) {
      log::Warn("gateway", "server: the acceptor did not close in time; stopping anyway");
    }
    const auto live = core_->BeginStop();
    for (const auto& conn : live) conn->Shutdown();
    core_->CancelRounds();  // a round's timer would hold its context up to an interval
    work_.clear();
    {
      MutexLock lock(exit_mu_);
      if (!exit_cv_.wait_for(lock.native(), kStopTimeout,
                             [this]() MB_REQUIRES(exit_mu_) { return running_ == 0; })) {
        // Something still holds the io_context (a handler blocked in user
        // code, a timer): stop it outright. WebSocket sessions cut off this
        // way may miss their OnClose.
        log::Warn("gateway", fmt::format("server: io threads still busy after {} ms; stopping",
                                         Millis(kStopTimeout).count()));
        for (auto& ioc : core_->iocs) ioc->stop();
      }
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
    core_->DropRounds();
  }

  uint16_t port() const noexcept { return port_; }
  const ServerStats& stats() const noexcept { return core_->stats; }
  bool tls() const noexcept { return !core_->options.tls_cert_file.empty(); }

  Status ReloadTls() {
    const ServerOptions& o = core_->options;
    if (o.tls_cert_file.empty()) return InvalidArgument("the server has no TLS certificate");
    auto ctx = wire::MakeServerTlsContext(o.tls_cert_file, o.tls_key_file);
    if (!ctx.ok()) return ctx.status();
    {
      MutexLock lock(tls_mu_);
      tls_ = std::move(*ctx);
    }
    core_->stats.tls_reloads.fetch_add(1);
    return Status::Ok();
  }

 private:
  std::shared_ptr<ssl::context> CurrentTls() {
    MutexLock lock(tls_mu_);
    return tls_;
  }

  void Accept() {
    acceptor_.async_accept(
        net::make_strand(core_->NextContext()),
        [this](error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
  }

  // On the acceptor's strand.
  void OnAccept(error_code ec, tcp::socket socket) {
    if (core_->stopping.load() || ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors and the like: try again shortly rather than spin.
      accept_retry_.expires_after(kAcceptRetryDelay);
      accept_retry_.async_wait([this](error_code wec) {
        if (!wec && !core_->stopping.load()) Accept();
      });
      return;
    }
    error_code peer_ec;
    const tcp::endpoint peer = socket.remote_endpoint(peer_ec);
    if (!peer_ec) {  // else the peer is already gone
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      ServerStats& stats = core_->stats;
      const ServerOptions& o = core_->options;
      PeerAddress address = DescribePeer(peer);
      // Replicas forward many clients over few connections: not limited.
      const bool limited = o.max_connections_per_ip != 0 &&
                           std::find(o.trusted_proxies.begin(), o.trusted_proxies.end(),
                                     address.text) == o.trusted_proxies.end();
      Refusal refusal = Refusal::kNone;
      if (stats.connections_open.load() >= o.max_connections) {
        refusal = Refusal::kServerFull;
        stats.connections_refused.fetch_add(1);
      } else if (limited && !core_->peers.TryAdd(address.text, o.max_connections_per_ip)) {
        refusal = Refusal::kAddressFull;
        stats.connections_refused_per_ip.fetch_add(1);
      } else {
        stats.connections_open.fetch_add(1);
        stats.connections_total.fetch_add(1);
      }
      // The slot gives the connection back when it is destroyed (out of
      // memory below included: the connection is dropped, accepting goes on).
      OpenSlot slot = refusal == Refusal::kNone
                          ? OpenSlot(&stats, limited ? &core_->peers : nullptr, address.text)
                          : OpenSlot();
      std::shared_ptr<HttpSession> session;
      try {
        session = std::make_shared<HttpSession>(core_, std::move(socket), std::move(slot), refusal,
                                                std::move(address), CurrentTls());
      } catch (const std::exception& e) {
        log::Error("gateway", fmt::format("server: cannot start a session: {}", e.what()));
      }
      try {
        if (session) session->Run();
      } catch (const std::exception& e) {
        log::Error("gateway", fmt::format("server: cannot start a session: {}", e.what()));
      }
    }
    Accept();
  }

  void RunIoThread(net::io_context& ioc) {
    for (;;) {
      try {
        ioc.run();
        break;
      } catch (const std::exception& e) {
        log::Error("gateway", fmt::format("server: io thread caught: {}", e.what()));
      } catch (...) {
        log::Error("gateway", "server: io thread caught an unknown exception");
      }
    }
    {
      MutexLock lock(exit_mu_);
      --running_;
    }
    exit_cv_.notify_all();
  }

  const std::shared_ptr<Core> core_;  // first: destroyed last
  tcp::acceptor acceptor_;            // on its own strand
  net::steady_timer accept_retry_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  Mutex exit_mu_;
  std::condition_variable exit_cv_;
  int running_ MB_GUARDED_BY(exit_mu_) = 0;  // io threads not yet out of run()
  Mutex tls_mu_;
  std::shared_ptr<ssl::context> tls_ MB_GUARDED_BY(tls_mu_);  // null: plain
};

Server::Server(ServerOptions options, HttpHandler* http, WsHandler* ws)
    : impl_(std::make_unique<Impl>(std::move(options), http, ws)) {}

Server::~Server() { impl_->Stop(); }

Status Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
uint16_t Server::port() const noexcept { return impl_->port(); }
bool Server::tls() const noexcept { return impl_->tls(); }
Status Server::ReloadTls() { return impl_->ReloadTls(); }
const ServerStats& Server::stats() const noexcept { return impl_->stats(); }

}  // namespace mb::gateway
