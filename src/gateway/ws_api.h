// The Binance WebSocket API at /ws-api/v3: requests {id, method, params}
// answered {id, status, result | error{code,msg}, rateLimits[]} on the same
// connection, which stays usable after any error in a request.
//
// Each trading or data method is served by the handler of the REST endpoint
// it mirrors (order.place by POST /api/v3/order, ...: FindWsApiMethod), so
// the same request through either API makes the same command and the same
// answer body. This module reads the envelope, turns `params` into the
// endpoint's parameters, authenticates SIGNED methods and hands the call to a
// WsApiBackend (the gateway), which counts the request weight in the same
// per-IP and per-key buckets as REST and answers through the endpoint's
// handler. Authentication: per request, `apiKey` + `timestamp` (+
// `recvWindow`) + `signature` over the other parameters sorted by name as
// k=v&k=v (HMAC-SHA256 hex for HMAC keys, Ed25519 base64 for Ed25519 keys);
// or, after session.logon with an Ed25519 key, `timestamp` alone until
// session.logout. userDataStream.* methods are passed on to the streams
// (streams.h), which own user data subscriptions; every other connection
// (market streams) too.
//
// Threads: the WsHandler callbacks run on the io threads. Answers are sent
// from whichever thread the backend answers on (an io thread, the engine
// thread for ACK, the fan-out thread for RESULT/FULL, the history thread),
// through WsConnection::Send, which any thread may call.
//
// Thread safety: any thread; the sessions are under a mutex.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/strong.h"
#include "gateway/api_error.h"
#include "gateway/auth.h"
#include "gateway/params.h"
#include "gateway/server.h"

namespace mb::gateway {

// A WebSocket API method. A method with a path is served by that REST
// endpoint's handler; one without (the session.* methods) by WsApi itself,
// at `weight`.
struct WsApiMethod {
  std::string_view name;  // "order.place"
  http::verb verb = http::verb::get;
  std::string_view path;   // "/api/v3/order"; empty: answered by WsApi
  bool is_signed = false;  // TRADE / USER_DATA: a signature or a logged-on session
  uint32_t weight = 1;     // of a method without a path (the endpoint's weight otherwise)
};

// The method named `name` (case-sensitive), or null.
const WsApiMethod* FindWsApiMethod(std::string_view name);

// An upgrade target of the WebSocket API (/ws-api/v3, with or without a query).
bool IsWsApiTarget(std::string_view target);

// One request for the backend.
struct WsApiCall {
  // Null or without a path: nothing to dispatch; the backend counts `weight`
  // and answers `error`, or else 200 with `body`.
  const WsApiMethod* method = nullptr;
  uint32_t weight = 1;
  std::optional<ApiError> error;  // refused before dispatch (envelope, authentication)
  std::string body;               // the answer of a method without a path
  Params params;                  // the endpoint's parameters
  std::string remote;             // the peer's address: the per-IP weight bucket
  // SIGNED methods: the authenticated key and its account.
  std::string api_key;
  AccountId account{};
};

// The endpoint's answer: its HTTP status and JSON body, with the IP's used
// weight and, for orders, the account's order counts (what REST puts in the
// X-MBX-* headers).
struct WsApiAnswer {
  int status = 200;
  std::string body;
  uint32_t used_weight = 0;
  std::optional<std::pair<uint32_t, uint32_t>> order_counts;  // 10 s, 1 day
};

using WsApiDone = std::function<void(WsApiAnswer)>;

class WsApiBackend {
 public:
  virtual ~WsApiBackend() = default;
  // Counts the weight, then answers the call: `done` exactly once, from any
  // thread (possibly before Call returns).
  virtual void Call(WsApiCall call, WsApiDone done) = 0;
};

struct WsApiOptions {
  // Shown in each answer's rateLimits (0: that limit is off and not shown).
  uint32_t weight_per_minute = 12000;  // the per-IP bucket's rate
  uint32_t orders_per_10s = 0;
  uint32_t orders_per_day = 0;
  // A request longer than this is answered with an error and the connection
  // kept; a frame over ServerOptions::ws_max_message_bytes closes it (1009).
  uint32_t max_request_bytes = 16 * 1024;
};

// The answer envelope around an endpoint's answer: `result` for status 200,
// `error` otherwise; rateLimits unless return_rate_limits is false. id_json:
// the request's id as JSON text.
std::string WsApiEnvelope(std::string_view id_json, const WsApiAnswer& answer,
                          const WsApiOptions& options, bool return_rate_limits);

class WsApi final : public WsHandler {
 public:
  // `streams` serves every connection but /ws-api/v3 and the userDataStream.*
  // methods; `backend` the calls. Both outlive this. clock_us: wall time in µs.
  WsApi(const KeyStore& keys, WsApiBackend& backend, WsHandler& streams, WsApiOptions options,
        std::function<int64_t()> clock_us);
  ~WsApi() override;

  bool Accepts(const Request& request) override;
  void OnOpen(const std::shared_ptr<WsConnection>& conn) override;
  void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) override;
  void OnClose(const std::shared_ptr<WsConnection>& conn) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::gateway
