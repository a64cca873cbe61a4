// A replica's way to the primary: requests it does not answer itself (signed
// and API-key calls, order entry) are sent on to the primary over a pool of
// keep-alive HTTP/1.1 connections, on a thread of their own (mb-forward).
//
// The request goes as the client sent it — method, target (query string),
// headers and body unchanged, so signatures stay valid — with one header
// added: kClientAddressHeader, the client's address, which the primary
// believes only from the addresses it is told are replicas
// (GatewayOptions::trusted_replicas). The primary's answer comes back as it
// was sent, headers included.
//
// Connections: up to max_connections open at once; a request waits for a free
// one in arrival order. A connection idle for idle_close is closed rather
// than reused (the primary may have closed it already). A GET whose reused
// connection turns out closed before any answer is sent once more on a new
// connection; any other request is not repeated (it may have reached the
// primary) and gets 502.
//
// Several primaries: `primary` may list URLs ("http://a:8080,http://b:8080",
// a primary and its standbys). Requests go to the current one: the first
// whose GET /api/v3/ping answer says "X-MB-Role: primary". Every URL is
// probed so at start (requests wait for that round, at most connect_timeout),
// every probe_interval in the background, and whenever a request to the
// current one cannot connect or is answered 503; a request waits for the
// round its own failure started. A request that could not connect is sent
// once more, to whichever URL is current after the round (nothing of it
// reached a server); a 503 answer is passed on as it is. A round in which no
// URL says primary keeps the current one, whose answers (or 502) the
// requests get. Connections to a URL that is no longer current are closed
// when next picked. With one URL nothing is probed.
//
// WebSocket connections a replica does not serve (user data, the WebSocket
// API) are tunnelled the same way: a connection of their own to the primary
// with the same target and the client's address, every text message relayed
// both ways unchanged, a close on either side closing the other.
//
// Thread safety: Forward, Tunnel, WsTunnel's calls and stats() from any
// thread; Stop from the owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gateway/server.h"

namespace mb::gateway {

struct ForwarderOptions {
  std::size_t max_connections = 64;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds timeout{10000};  // a whole exchange (write + answer)
  std::chrono::milliseconds idle_close{30000};
  uint32_t max_body_bytes = 64u << 20;  // of an answer
  // Several URLs: how often each one's role is read in the background.
  std::chrono::milliseconds probe_interval{3000};
  // https:// URLs: the CA that checks the primary's certificate ("": the
  // system's CAs); the certificate must name the URL's host.
  std::string ca_file;
};

struct ForwarderStats {
  uint64_t forwarded = 0;    // answers received from the primary
  uint64_t failed = 0;       // answered 502/504 by the forwarder itself
  uint64_t connections = 0;  // open now
  uint64_t waiting = 0;      // requests waiting for a connection
  uint64_t tunnels = 0;      // WebSocket tunnels open now (the primary's side handshaken)
  uint64_t probes = 0;       // rounds of role probes (several URLs only)
  uint64_t switches = 0;     // times the current primary changed
};

// One client's WebSocket relayed to the primary (Forwarder::Tunnel).
class WsTunnel {
 public:
  virtual ~WsTunnel() = default;
  // A text message to the primary (queued until the connection is open).
  virtual void Send(std::string text) = 0;
  // Closes the primary's side (normal closure). Idempotent.
  virtual void Close() = 0;
};

// "http://host:port" (the scheme optional) or "https://host:port", or
// several separated by commas → each host and port, in order (tls: whether
// each is https://); an element that is not that shape is an error naming it
// and saying what is expected.
Result<std::vector<std::pair<std::string, std::string>>> ParsePrimary(
    std::string_view primary, std::vector<bool>* tls = nullptr);

class Forwarder {
 public:
  // primary: "http://host:port" (the scheme optional), or several separated
  // by commas. Error: an element not of that shape.
  static Result<std::unique_ptr<Forwarder>> Create(std::string_view primary,
                                                   ForwarderOptions options = {});
  ~Forwarder();  // Stop()s
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Sends `request` to the primary with the client's address added; `done`
  // gets the primary's answer, or 502 (the primary cannot be reached or
  // closed the connection) / 504 (no answer in time) as a Binance error body.
  // `done` runs exactly once: on mb-forward, or at once on the calling thread
  // when the forwarder is stopped.
  void Forward(Request request, std::string client_address, std::function<void(Response)> done);
  // Opens a WebSocket to the primary at `target` with the client's address;
  // on_message gets each text message of the primary's, on_close once when
  // the primary's side ends (or never opens: the reason says why; or the
  // client sent 4,096 messages more than the primary took), unless the
  // forwarder stopped first. Both run on mb-forward.
  std::shared_ptr<WsTunnel> Tunnel(std::string target, std::string client_address,
                                   std::function<void(std::string)> on_message,
                                   std::function<void(uint16_t, std::string)> on_close);
  // Answers whatever waits with 502 and joins mb-forward. Idempotent.
  void Stop();

  ForwarderStats stats() const;
  // The current primary's "host:port" (with several URLs it changes as the
  // probes find the primary; the string itself lives as long as this).
  const std::string& primary() const noexcept;

 private:
  class Impl;
  explicit Forwarder(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace mb::gateway
