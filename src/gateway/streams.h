// WebSocket streams: Binance market streams and user data.
//
//   /ws, /ws/<anything>     raw streams; SUBSCRIBE / UNSUBSCRIBE /
//                           LIST_SUBSCRIPTIONS / SET_PROPERTY-free requests
//   /stream?streams=a/b     combined: every message {"stream":name,"data":{...}}
//   /ws/<listenKey>         the user data of the listenKey's account
//   /ws-api/v3              WebSocket API (ws_api.h, which passes these on):
//                           userDataStream.subscribe.signature,
//                           userDataStream.unsubscribe
//
// Market streams: <symbol>@depth (1000 ms), @depth@100ms, @depth@0ms (every
// durable batch), @depth5/10/20 (partial book, @100ms / 1000 ms), @trade,
// @aggTrade, @ticker, @miniTicker, @bookTicker, @kline_<interval> (1s..1M)
// and @kline_<interval>@<zone> (candles aligned in a time zone, "+08:00"),
// @ticker_<1h|4h|1d>, @avgPrice; and of every market !ticker@arr,
// !miniTicker@arr, !ticker_<1h|4h|1d>@arr (an array a second of the markets
// that changed; nothing is formatted while nobody subscribes). Symbols
// are lower case in stream names. Depth diffs are coalesced per interval
// with U of the first and u of the last diff in it, so U == previous u + 1.
//
// Times: `?timeUnit=MICROSECOND` (or MILLISECOND, any letter case) on any
// stream URL (/ws, /ws/<streams>, /stream?streams=...) puts every time field
// of the connection's market stream events in µs; another value refuses the
// connection. User data events stay in ms. E of trades, aggTrades and depth
// diffs is the engine time of the batch they come from (for a coalesced
// diff: of its newest change), so E in µs is exact; tickers and klines carry
// the publishing time, at ms resolution.
//
// Each message is formatted once per stream and time unit in use, and shared
// by its subscribers; a subscriber whose send queue overflows is disconnected
// by the server (server.h) and never slows the publisher. Every message that
// comes from a durable batch is sent with that batch's engine time
// (WsConnection::Send's origin, CLOCK_REALTIME ns) so that the server can
// measure engine-to-socket freshness; replies and clock-driven messages
// (candles closed by the clock, listenKeyExpired) carry none.
//
// Thread safety: WsHandler callbacks on io threads; Publish() and Tick() on
// the fan-out thread only (the read side's writer); the listenKey calls from
// any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/market.h"
#include "gateway/auth.h"
#include "gateway/server.h"
#include "marketdata/read_side.h"

namespace mb::gateway {

struct StreamOptions {
  uint32_t max_streams_per_connection = 1024;
  uint32_t max_requests_per_second = 10;  // control messages per connection (Binance: 5)
  uint32_t listen_key_ttl_ms = 60 * 60 * 1000;
  int64_t recv_window_max_ms = 60'000;
};

struct StreamStats {
  std::atomic<uint64_t> subscriptions{0};
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> user_connections{0};
};

// /ws/<listenKey>: a user-data stream's upgrade target (a key of the right
// shape; whether it is open is the hub's to say).
bool IsUserDataTarget(std::string_view target);

class StreamHub : public WsHandler {
 public:
  // `clock_ms` gives wall time in ms (tests inject one).
  StreamHub(const engine::EngineConfig& config, const marketdata::ReadSide& read_side,
            const KeyStore& keys, StreamOptions options, std::function<int64_t()> clock_ms);
  ~StreamHub() override;

  // WsHandler
  bool Accepts(const Request& request) override;
  void OnOpen(const std::shared_ptr<WsConnection>& conn) override;
  void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) override;
  void OnClose(const std::shared_ptr<WsConnection>& conn) override;

  // Fan-out thread, after ReadSide::Apply() published the batch's snapshots.
  void Publish(const marketdata::BatchOutput& batch);
  // Fan-out thread, at least every 10 ms: flushes coalesced depth streams
  // whose interval has elapsed.
  void Tick(int64_t now_ms);
  // Fan-out thread: the read side was bootstrapped again (a replica's
  // resynchronisation). Coalesced depth changes not yet sent are dropped, so
  // no diff claims continuity across the jump: the next one's U shows a gap
  // to every depth client, which then fetches a fresh snapshot.
  void Forget();
  // Fan-out thread: a market added at run time (MarketAdded), before the
  // configuration the io threads read names it.
  void AddMarket(std::string_view symbol);

  // listenKey flow (POST/PUT/DELETE /api/v3/userDataStream).
  std::string CreateListenKey(AccountId account);  // an open key of the account is reused
  bool KeepAliveListenKey(AccountId account, std::string_view key);
  bool CloseListenKey(AccountId account, std::string_view key);

  const StreamStats& stats() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::gateway
