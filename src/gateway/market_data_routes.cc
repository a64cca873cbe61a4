// REST market data (/api/v3/depth, trades, klines, tickers, exchangeInfo):
// answered on the io thread that read the request, from the read side's
// snapshots.
#include "gateway/gateway_impl.h"
#include "transfer/protocol.h"

namespace mb::gateway {

// The answer says in X-MB-Role which server this is, so that replicas and
// other venues given several URLs find the primary without the admin token
// (transfer/protocol.h): a replica-mode gateway is its ReplicaOptions::role
// ("replica", or "standby" for serve --standby); a primary whose intake is
// closed (its leadership lost, or handed over) is "standby" too.
void Gateway::Impl::Ping(Ctx& c) {
  std::string_view role = transfer::kRolePrimary;
  if (replica_) {
    role = replica_options_.role;
  } else if (exchange_ == nullptr || !exchange_->IntakeRefusal().empty()) {
    role = transfer::kRoleStandby;
  }
  Response res = MakeResponse(c.version, c.keep_alive, 200, "{}", c.meta);
  res.set(transfer::kRoleHeader, role);
  c.respond(std::move(res));
}

void Gateway::Impl::Time(Ctx& c) { Ok(c, fmt::format("{{\"serverTime\":{}}}", clock_.wall_ms())); }

void Gateway::Impl::ExchangeInfo(Ctx& c) {
  SymbolSelection sel;
  if (auto e = SelectSymbols(c, StatusFilter::kAlone, &sel)) return Reply(c, *e);
  bool spot = true;  // every Matchbook market has the SPOT permission, and only it
  if (auto p = c.params.Get("permissions")) {
    if (c.params.Has("symbol") || c.params.Has("symbols")) {
      return Reply(c, ApiError::BadParamCombination());
    }
    if (auto e = PermissionsParam(*p, &spot)) return Reply(c, *e);
  }
  bool show_sets = true;
  if (auto v = c.params.Get("showPermissionSets")) {
    if (*v == "false") {
      show_sets = false;
    } else if (*v != "true") {
      return Reply(c, ApiError::BadParam("showPermissionSets", "true or false"));
    }
  }
  if (!spot) sel.markets.clear();
  std::vector<MarketStatus> statuses;
  for (std::size_t i = 0; i < config_.markets.size(); ++i) {
    statuses.push_back(Snap(static_cast<MarketId>(i))->status);
  }
  const std::vector<RateLimitJson> limits = RateLimits();
  Ok(c, ExchangeInfoJson(config_, statuses, clock_.wall_ms(), limits, sel.markets, show_sets,
                         options_.market_rules));
}

// The limits this server applies, as exchangeInfo lists them. Weight is
// counted per IP, as on Binance (a per-key bucket, when configured, is
// Matchbook's own addition and not listed).
std::vector<RateLimitJson> Gateway::Impl::RateLimits() const {
  std::vector<RateLimitJson> out;
  if (options_.ip_limit.weight_per_minute != 0) {
    out.push_back({"REQUEST_WEIGHT", "MINUTE", 1, options_.ip_limit.weight_per_minute});
  }
  if (options_.order_limit.per_10s != 0) {
    out.push_back({"ORDERS", "SECOND", 10, options_.order_limit.per_10s});
  }
  if (options_.order_limit.per_day != 0) {
    out.push_back({"ORDERS", "DAY", 1, options_.order_limit.per_day});
  }
  return out;
}

// exchangeInfo's `permissions`: one name (SPOT) or a JSON array of names.
// *spot: whether SPOT is among them.
std::optional<ApiError> Gateway::Impl::PermissionsParam(std::string_view v, bool* spot) {
  std::vector<std::string> names;
  if (!v.empty() && v.front() == '[') {
    json::error_code ec;
    json::value parsed = json::parse(v, ec);
    if (ec || !parsed.is_array() || parsed.as_array().empty()) {
      return ApiError::BadParam("permissions", "expected a name or a JSON array of names");
    }
    for (const json::value& x : parsed.as_array()) {
      if (!x.is_string()) return ApiError::BadParam("permissions", "expected strings");
      names.emplace_back(x.as_string());
    }
  } else {
    names.emplace_back(v);
  }
  *spot = false;
  for (const std::string& n : names) {
    if (n.empty() || !std::all_of(n.begin(), n.end(), [](char ch) {
          return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        })) {
      return ApiError::BadParam("permissions", "expected permission names such as SPOT");
    }
    if (n == "SPOT") *spot = true;
  }
  return std::nullopt;
}

void Gateway::Impl::Depth(Ctx& c) {
  MarketId m{};
  std::size_t limit = 0;
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  if (auto e = LimitParam(c, 100, 5000, &limit)) return Reply(c, *e);
  if (auto e = SymbolStatusParam(c, m)) return Reply(c, *e);
  Ok(c, DepthJson(config_, *Snap(m), limit));
}

template <class Rows, class Fetch, class Json>
void Gateway::Impl::DeferOlder(Ctx& c, Rows held, Fetch fetch, Json json) {
  Defer(c, [this, held = std::move(held), fetch = std::move(fetch),
            json = std::move(json)](HistoryJob& j) {
    auto older = fetch();
    if (older.status().code() == StatusCode::kNotFound) return JobReply(j, 200, json(held));
    if (!older.ok()) return HistoryUnavailable(j, older.status());
    JobReply(j, 200, json(*older));
  });
}

void Gateway::Impl::Trades(Ctx& c) {
  MarketId m{};
  std::size_t limit = 0;
  std::optional<uint64_t> from;
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  if (auto e = LimitParam(c, 500, 1000, &limit)) return Reply(c, *e);
  if (auto e = c.params.GetUint("fromId", &from)) return Reply(c, *e);
  auto rows = Snap(m)->RecentTrades(limit, from.value_or(0));
  // Older than the read side's recent trades: from the history store, which
  // keeps every trade of the market.
  if (from && *from > 0 && history_ != nullptr && (rows.empty() || Raw(rows.front().id) > *from)) {
    return DeferOlder(
        c, std::move(rows),
        [this, m, from = *from, limit] { return history_->MarketTrades(m, from, limit); },
        [this](const auto& r) { return TradesJson(config_, r); });
  }
  Ok(c, TradesJson(config_, rows));
}

std::optional<ApiError> Gateway::Impl::ParseHistory(const Ctx& c, std::string_view from_param,
                                                    HistoryQuery* q) {
  if (auto e = SymbolParam(c, &q->market)) return e;
  if (auto e = LimitParam(c, 500, 1000, &q->limit)) return e;
  if (auto e = c.params.GetUint(from_param, &q->from)) return e;
  if (auto e = c.params.GetInt("startTime", &q->start)) return e;
  return c.params.GetInt("endTime", &q->end);
}

void Gateway::Impl::AggTrades(Ctx& c) {
  HistoryQuery q;
  if (auto e = ParseHistory(c, "fromId", &q)) return Reply(c, *e);
  const auto snap = Snap(q.market);
  auto rows = snap->AggTrades(q.limit, q.from.value_or(0), q.start.value_or(0), q.end.value_or(0));
  // From an id or a time at or before the oldest trade held: from the
  // history store, which keeps every trade of the market.
  if (history_ != nullptr && snap->TradesBeyondHeld(q.from.value_or(0), q.start.value_or(0))) {
    return DeferOlder(
        c, std::move(rows),
        [this, q] {
          return history_->AggTrades(q.market, q.from.value_or(0), q.start.value_or(0),
                                     q.end.value_or(0), q.limit);
        },
        [this](const auto& r) { return AggTradesJson(config_, r); });
  }
  Ok(c, AggTradesJson(config_, rows));
}

void Gateway::Impl::Klines(Ctx& c) {
  MarketId m{};
  std::size_t limit = 0;
  std::string_view iv;
  std::optional<int64_t> start, end;
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  if (auto e = c.params.Require("interval", &iv)) return Reply(c, *e);
  const auto interval = marketdata::ParseKlineInterval(iv);
  if (!interval) return Reply(c, ApiError::InvalidInterval());
  if (auto e = LimitParam(c, 500, 1000, &limit)) return Reply(c, *e);
  if (auto e = c.params.GetInt("startTime", &start)) return Reply(c, *e);
  if (auto e = c.params.GetInt("endTime", &end)) return Reply(c, *e);
  int32_t zone = 0;
  if (auto e = TimeZoneParam(c, &zone)) return Reply(c, *e);
  const auto snap = Snap(m);
  auto rows = snap->Klines(*interval, start.value_or(0), end.value_or(0), limit, zone);
  // Older than the read side's candles: from the history store, which keeps
  // every candle of the market.
  if (history_ != nullptr &&
      snap->KlinesBeyondHeld(*interval, start.value_or(0), end.value_or(0), limit, zone)) {
    return DeferOlder(
        c, std::move(rows),
        [this, m, iv = *interval, start = start.value_or(0), end = end.value_or(0), limit] {
          return history_->Klines(m, iv, start, end, limit);
        },
        [this, m, iv = *interval, zone](const auto& r) {
          return KlinesJson(config_, m, iv, r, zone);
        });
  }
  Ok(c, KlinesJson(config_, m, *interval, rows, zone));
}

void Gateway::Impl::Ticker24h(Ctx& c) {
  const int64_t now = clock_.wall_ms();
  bool mini = false;
  if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
  TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
    return gateway::Ticker24hJson(config_, s, now, mini);
  });
}

// GET /ticker and /ticker/tradingDay name their symbols (no "every market").
std::optional<ApiError> Gateway::Impl::RequireSymbols(const Ctx& c) {
  if (c.params.Has("symbol") || c.params.Has("symbols")) return std::nullopt;
  return ApiError::MandatoryMissing("symbol");
}

void Gateway::Impl::RollingTicker(Ctx& c) {
  const int64_t now = clock_.wall_ms();
  if (auto e = RequireSymbols(c)) return Reply(c, *e);
  int64_t window = 24 * 3'600'000;
  if (const auto w = c.params.Get("windowSize")) {
    const std::optional<int64_t> parsed = ParseWindowSize(*w);
    if (!parsed) return Reply(c, ApiError::IllegalChars("windowSize", "1m..59m, 1h..23h, 1d..7d"));
    window = *parsed;
  }
  bool mini = false;
  if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
  TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
    return WindowTickerJson(config_, s.market, s.Rolling(window, now), mini);
  });
}

void Gateway::Impl::TradingDayTicker(Ctx& c) {
  const int64_t now = clock_.wall_ms();
  if (auto e = RequireSymbols(c)) return Reply(c, *e);
  int32_t zone = 0;
  if (auto e = TimeZoneParam(c, &zone)) return Reply(c, *e);
  bool mini = false;
  if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
  TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
    return WindowTickerJson(config_, s.market, s.TradingDay(zone, now), mini);
  });
}

void Gateway::Impl::AvgPrice(Ctx& c) {
  MarketId m{};
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  Ok(c, AvgPriceJson(config_, *Snap(m), clock_.wall_ms()));
}

void Gateway::Impl::TickerPrice(Ctx& c) {
  TickerLike(c, [&](const marketdata::MarketSnapshot& s) { return PriceTickerJson(config_, s); });
}

void Gateway::Impl::BookTicker(Ctx& c) {
  TickerLike(c, [&](const marketdata::MarketSnapshot& s) { return BookTickerJson(config_, s); });
}

}  // namespace mb::gateway
