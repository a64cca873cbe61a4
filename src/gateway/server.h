// HTTP/1.1 and WebSocket on one port (Boost.Beast on Asio), with no knowledge
// of the API it serves: requests go to an HttpHandler, WebSocket upgrades to a
// WsHandler.
//
// Per connection: keep-alive; pipelined requests are read one at a time and
// answered in order (the next request is read only after the previous answer
// is written). Limits, all configurable: total connections (over the limit a
// new connection gets 503 and is closed), request header bytes and count, body
// bytes (413), a read deadline for a whole request from its first byte (a
// slow-loris client is cut off), an idle deadline between requests, open
// connections per peer address (over it: 429 and closed).
//
// WebSocket: every connection has a bounded send queue (messages and bytes);
// Send() on a full queue closes the connection with code 1008 and the reason
// "slow consumer: send queue full" and returns false — a slow subscriber never
// blocks the sender. Beast answers pings; the server pings idle clients.
// The frames queued for one connection leave in one send: the session's
// writer appends up to 4 KiB of them to the connection's send buffer and
// sends; while a send the socket could not take at once is in flight, the
// writer waits, so a slow reader still fills its queue.
//
// Freshness: a message queued with an origin time (Send's origin_wall_ns,
// CLOCK_REALTIME ns, e.g. the engine time of the batch it reports) records
// "now - origin" into ServerOptions::ws_freshness when its frame is in the
// send buffer: the age of the news as it leaves for the socket.
//
// TLS: with a certificate (ServerOptions::tls_cert_file / tls_key_file) the
// port speaks HTTPS and WSS only — TLS 1.2 and 1.3, forward-secret AEAD
// ciphers, no renegotiation, no compression. The handshake must finish within
// read_timeout_ms. ReloadTls() reads the files again: connections accepted
// afterwards use the new pair, those open keep theirs; files that do not
// load leave the old pair in use.
//
// Thread safety: Start/Stop from one thread; ReloadTls from any. HttpHandler::Handle and
// WsHandler callbacks run on the io threads. Respond (once per request) and
// WsConnection::Send/Close may be called from any thread.
#pragma once

#include <atomic>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mb::metrics {
class Histogram;
}  // namespace mb::metrics

namespace mb::gateway {

namespace http = boost::beast::http;

// The header a replica sets to the address of the client it forwards for.
inline constexpr std::string_view kClientAddressHeader = "X-MB-Client-Address";
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: an ephemeral port (see Server::port())
  int io_threads = 2;
  uint32_t max_connections = 10'000;
  // Open connections from one peer address; over it a new connection gets
  // 429 and is closed. trusted_proxies are not limited. 0: no limit.
  uint32_t max_connections_per_ip = 2'000;
  uint32_t max_header_bytes = 16 * 1024;
  uint32_t max_header_count = 100;
  uint32_t max_body_bytes = 1 << 20;
  uint32_t read_timeout_ms = 10'000;   // one whole request, from its first byte
  uint32_t idle_timeout_ms = 120'000;  // keep-alive wait for the next request
  uint32_t ws_max_message_bytes = 64 * 1024;
  uint32_t ws_send_queue_messages = 4096;
  uint32_t ws_send_queue_bytes = 8 << 20;
  // How long a slow consumer's close may take (its close frame waits behind
  // the data it has not read) before the connection is torn down.
  uint32_t ws_slow_close_grace_ms = 2'000;
  // Stream messages (WsConnection::Publish) are written in rounds per io
  // thread, at least this many µs apart: every session with messages waiting
  // is written in one round, so under a stream of batches a subscriber gets
  // one send per interval, not one per batch. A message after a quiet
  // interval goes at once. 0: a round as soon as the io thread gets to it.
  uint32_t ws_write_interval_us = 0;
  uint32_t ws_idle_ping_ms = 30'000;  // ping a silent client; close if no pong in as long
  // Where written WebSocket messages that carry an origin time record their
  // age (ns); null: not measured. Must outlive the server.
  metrics::Histogram* ws_freshness = nullptr;
  // Peers whose kClientAddressHeader is believed (a venue's replicas): the
  // handlers then see that address as the request's or connection's remote,
  // never as loopback. From any other peer the header is ignored.
  std::vector<std::string> trusted_proxies;
  // PEM certificate (the chain may follow it) and its private key: TLS only
  // on the port. Both empty: plain HTTP and WebSocket.
  std::string tls_cert_file;
  std::string tls_key_file;
};

struct ServerStats {
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> connections_refused{0};         // over max_connections
  std::atomic<uint64_t> connections_refused_per_ip{0};  // over max_connections_per_ip
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> bad_requests{0};  // unparsable, too large, too many headers
  std::atomic<uint64_t> ws_open{0};
  std::atomic<uint64_t> ws_total{0};   // handshakes completed
  std::atomic<uint64_t> ws_closed{0};  // opened connections that ended, for any reason
  std::atomic<uint64_t> ws_messages_sent{0};
  // Sends to WebSocket sockets: the frames gathered for one connection
  // leave in one (ws_messages_sent / ws_socket_writes frames per send).
  std::atomic<uint64_t> ws_socket_writes{0};
  // Messages discarded by an overflowing send queue: the one that did not fit
  // and those still waiting behind the in-flight one.
  std::atomic<uint64_t> ws_dropped_messages{0};
  std::atomic<uint64_t> ws_slow_disconnects{0};
  std::atomic<uint64_t> tls_handshakes{0};          // completed
  std::atomic<uint64_t> tls_handshake_failures{0};  // refused, failed or timed out
  std::atomic<uint64_t> tls_reloads{0};             // certificate pairs taken by ReloadTls
};

// Delivers the answer to one request; call exactly once, from any thread.
using Respond = std::function<void(Response)>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // remote: the peer's address ("127.0.0.1"); loopback: the peer is local.
  virtual void Handle(Request request, std::string_view remote, bool loopback, Respond respond) = 0;
};

class WsConnection : public std::enable_shared_from_this<WsConnection> {
 public:
  virtual ~WsConnection() = default;
  // Queues a text message. False when the connection is closed or its queue
  // overflowed (it is then being closed with 1008). origin_wall_ns: when what
  // the message reports happened (CLOCK_REALTIME ns; 0: not measured), for
  // the freshness histogram.
  virtual bool Send(std::shared_ptr<const std::string> text, int64_t origin_wall_ns = 0) = 0;
  bool Send(std::string text) { return Send(std::make_shared<const std::string>(std::move(text))); }
  // A stream message: as Send, except that it may wait for its io thread's
  // next write round (ServerOptions::ws_write_interval_us) and leave with
  // whatever else waits for the connection. Answers to requests use Send.
  virtual bool Publish(std::shared_ptr<const std::string> text, int64_t origin_wall_ns) {
    return Send(std::move(text), origin_wall_ns);
  }
  virtual void Close(uint16_t code, std::string reason) = 0;
  virtual uint64_t id() const noexcept = 0;
  virtual const std::string& target() const noexcept = 0;  // the upgrade request's target
  virtual const std::string& remote() const noexcept = 0;
  // The handler's per-connection state, set in OnOpen.
  std::shared_ptr<void> user;
};

class WsHandler {
 public:
  virtual ~WsHandler() = default;
  // An upgrade request; return false to refuse it (404 before the handshake).
  virtual bool Accepts(const Request& request) = 0;
  virtual void OnOpen(const std::shared_ptr<WsConnection>& conn) = 0;
  virtual void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) = 0;
  virtual void OnClose(const std::shared_ptr<WsConnection>& conn) = 0;
};

class Server {
 public:
  Server(ServerOptions options, HttpHandler* http, WsHandler* ws);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the io threads. Error: the address cannot be used.
  Status Start();
  // Stops accepting, closes every connection, joins the io threads. Idempotent.
  void Stop();
  uint16_t port() const noexcept;  // the bound port, after Start()
  bool tls() const noexcept;       // the port speaks TLS
  // Reads the certificate and key files again (SIGHUP). An error names the
  // file and why; the pair in use then stays.
  Status ReloadTls();
  const ServerStats& stats() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::gateway
