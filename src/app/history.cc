#include "app/history.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace mb::app {
namespace {

projection::HistoryQuery Query(const gateway::HistoryFilter& f) {
  projection::HistoryQuery q;
  q.account = static_cast<uint32_t>(f.account);
  q.market = static_cast<uint16_t>(f.market);
  q.order_id = f.order_id;
  q.from_id = f.from_id;
  q.start_ms = f.start_ms;
  q.end_ms = f.end_ms;
  q.limit = f.limit;
  return q;
}

gateway::LedgerLine Line(const projection::LedgerRow& r) {
  gateway::LedgerLine l;
  l.seq = r.seq;
  l.idx = r.idx;
  l.account = static_cast<AccountId>(r.account);
  l.asset = static_cast<AssetId>(r.asset);
  l.bucket = r.bucket;
  l.delta = Amount{r.delta};
  l.reason = r.reason;
  l.ref_kind = r.ref_kind;
  l.ref = r.ref;
  l.time_ns = r.time_ns;
  return l;
}

projection::TransferQuery Query(const gateway::TransferFilter& f) {
  projection::TransferQuery q;
  if (f.account) q.account = static_cast<uint32_t>(*f.account);
  if (f.asset) q.asset = static_cast<uint16_t>(*f.asset);
  if (f.state) {
    switch (*f.state) {
      case gateway::TransferState::kPending:
        q.state = projection::TransferState::kPending;
        break;
      case gateway::TransferState::kCompleted:
        q.state = projection::TransferState::kCompleted;
        break;
      case gateway::TransferState::kRefunded:
        q.state = projection::TransferState::kRefunded;
        break;
    }
  }
  q.start_ms = f.start_ms;
  q.end_ms = f.end_ms;
  q.offset = f.offset;
  q.limit = f.limit;
  return q;
}

gateway::TransferState State(projection::TransferState s) {
  switch (s) {
    case projection::TransferState::kPending:
      return gateway::TransferState::kPending;
    case projection::TransferState::kCompleted:
      return gateway::TransferState::kCompleted;
    case projection::TransferState::kRefunded:
      return gateway::TransferState::kRefunded;
  }
  return gateway::TransferState::kPending;
}

gateway::WithdrawalRecord Withdrawal(const projection::WithdrawalRow& r) {
  gateway::WithdrawalRecord w;
  w.transfer_id = r.held.transfer_id;
  w.account = static_cast<AccountId>(r.held.account);
  w.asset = static_cast<AssetId>(r.held.asset);
  w.amount = Amount{r.held.amount};
  w.fee = Amount{r.held.fee};
  w.ref = r.held.ref;
  w.address = r.held.address;
  w.time_ns = r.held.time_ns;
  w.state = State(r.state);
  w.reason = r.reason;
  w.resolved_ns = r.resolved_ns;
  return w;
}

gateway::DepositRecord Deposit(const projection::TransferRow& r) {
  gateway::DepositRecord d;
  d.transfer_id = r.transfer_id;
  d.account = static_cast<AccountId>(r.account);
  d.asset = static_cast<AssetId>(r.asset);
  d.amount = Amount{r.amount};
  d.ref = r.ref;
  d.time_ns = r.time_ns;
  return d;
}

}  // namespace

Result<std::vector<marketdata::OrderRecord>> ProjectionHistory::AllOrders(
    const gateway::HistoryFilter& f) {
  return store_->AllOrders(Query(f));
}

Result<std::optional<marketdata::OrderRecord>> ProjectionHistory::FindOrder(AccountId account,
                                                                            MarketId market,
                                                                            OrderId id) {
  return store_->FindOrder(static_cast<uint32_t>(account), static_cast<uint16_t>(market),
                           static_cast<uint64_t>(id));
}

Result<std::optional<marketdata::OrderRecord>> ProjectionHistory::FindOrderByClientId(
    AccountId account, MarketId market, std::string_view client_order_id) {
  return store_->FindOrderByClientId(static_cast<uint32_t>(account), static_cast<uint16_t>(market),
                                     client_order_id);
}

Result<std::vector<marketdata::Fill>> ProjectionHistory::MyTrades(const gateway::HistoryFilter& f) {
  return store_->MyTrades(Query(f));
}

Result<std::vector<marketdata::ListRecord>> ProjectionHistory::AllOrderLists(
    const gateway::HistoryFilter& f) {
  return store_->AllOrderLists(Query(f));
}

Result<std::optional<marketdata::ListRecord>> ProjectionHistory::FindOrderList(AccountId account,
                                                                               uint64_t list_id) {
  return store_->FindOrderList(static_cast<uint32_t>(account), list_id);
}

Result<std::optional<marketdata::ListRecord>> ProjectionHistory::FindOrderListByClientId(
    AccountId account, std::string_view list_client_order_id) {
  return store_->FindOrderListByClientId(static_cast<uint32_t>(account), list_client_order_id);
}

Result<std::vector<gateway::LedgerLine>> ProjectionHistory::Ledger(const gateway::LedgerFilter& f) {
  projection::LedgerQuery q;
  q.account = static_cast<uint32_t>(f.account);
  q.from_seq = f.from_seq;
  q.limit = f.limit;
  auto rows = store_->Ledger(q);
  if (!rows.ok()) return rows.status();
  std::vector<gateway::LedgerLine> lines;
  lines.reserve(rows->size());
  for (const projection::LedgerRow& r : *rows) lines.push_back(Line(r));
  return lines;
}

Result<std::vector<gateway::WithdrawalRecord>> ProjectionHistory::Withdrawals(
    const gateway::TransferFilter& f) {
  auto rows = store_->Withdrawals(Query(f));
  if (!rows.ok()) return rows.status();
  std::vector<gateway::WithdrawalRecord> out;
  out.reserve(rows->size());
  for (const projection::WithdrawalRow& r : *rows) out.push_back(Withdrawal(r));
  return out;
}

Result<std::vector<gateway::DepositRecord>> ProjectionHistory::Deposits(
    const gateway::TransferFilter& f) {
  auto rows = store_->Deposits(Query(f));
  if (!rows.ok()) return rows.status();
  std::vector<gateway::DepositRecord> out;
  out.reserve(rows->size());
  for (const projection::TransferRow& r : *rows) out.push_back(Deposit(r));
  return out;
}

Result<std::optional<gateway::WithdrawalRecord>> ProjectionHistory::FindWithdrawal(
    AccountId account, uint64_t id, std::string_view ref) {
  auto row = store_->FindWithdrawal(static_cast<uint32_t>(account), id, ref);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return std::optional<gateway::WithdrawalRecord>{};
  return std::optional<gateway::WithdrawalRecord>(Withdrawal(**row));
}

gateway::HistoryHealth ProjectionHistory::Health() const {
  const projection::ProjectorStats ps = projector_->stats();
  gateway::HistoryHealth h;
  h.backend = std::string(store_->backend());
  h.applied_seq = ps.applied_seq;
  h.lag_events = ps.lag_events;
  h.lag_seconds = ps.lag_seconds;
  h.healthy = ps.healthy;
  h.last_error = ps.last_error;
  if (ps.storage) {
    const projection::StorageStats& s = *ps.storage;
    gateway::HistoryStorage d;
    d.db_bytes = s.db_bytes;
    d.wal_bytes = s.wal_bytes;
    d.wal_max_bytes = s.wal_max_bytes;
    d.frames_written = s.frames_written;
    d.frames_checkpointed = s.frames_checkpointed;
    d.checkpoints = s.checkpoints;
    d.checkpoints_completed = s.checkpoints_completed;
    d.ceiling_waits = s.ceiling_waits;
    d.seconds_since_checkpoint = s.seconds_since_checkpoint;
    d.over_ceiling = s.over_ceiling;
    h.storage = d;
  }
  return h;
}

namespace {

// Appends a history store's trade as the read side holds it: one taker's
// consecutive fills at one price in one command are one aggregate trade,
// with its first trade's id. True when it begins a new aggregate.
bool AppendTradeRow(const projection::TradeRecord& t, std::vector<marketdata::TradeRow>* rows) {
  marketdata::TradeRow row = projection::ToTradeRow(t);
  const bool continues = !rows->empty() && marketdata::SameAggregate(rows->back(), row);
  if (continues) row.agg_id = rows->back().agg_id;
  rows->push_back(row);
  return !continues;
}

std::vector<marketdata::TradeRow> TradeRows(const std::vector<projection::TradeRecord>& trades) {
  std::vector<marketdata::TradeRow> out;
  out.reserve(trades.size());
  for (const projection::TradeRecord& t : trades) AppendTradeRow(t, &out);
  return out;
}

}  // namespace

Result<std::vector<marketdata::TradeRow>> ProjectionHistory::MarketTrades(MarketId market,
                                                                          uint64_t from_id,
                                                                          std::size_t limit) {
  if (!store_->keeps_market_data()) return NotFound("this history keeps no market trades");
  auto trades = store_->MarketTrades(Raw(market), from_id, limit);
  if (!trades.ok()) return trades.status();
  return TradeRows(*trades);
}

Result<std::vector<marketdata::AggTrade>> ProjectionHistory::AggTrades(
    MarketId market, uint64_t from_id, int64_t start_ms, int64_t end_ms, std::size_t limit) {
  if (!store_->keeps_market_data()) return NotFound("this history keeps no market trades");
  std::vector<marketdata::AggTrade> out;
  if (limit == 0) return out;
  uint64_t first = from_id;
  if (start_ms != 0) {
    // In ns, within int64 (a startTime before 1970 is the first trade's).
    constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max() / 1'000'000;
    const int64_t start_ns = std::clamp<int64_t>(start_ms, 0, kMaxMs) * 1'000'000;
    auto at = store_->FirstTradeFrom(Raw(market), start_ns);
    if (!at.ok()) return at.status();
    if (*at == 0) return out;
    first = std::max(first, *at);
  }
  // An aggregate's id is its first trade's; its fills share one time.
  const auto wanted = [&](uint64_t agg_id, int64_t time_ns) {
    const int64_t ms = time_ns / 1'000'000;
    return agg_id >= first && (start_ms == 0 || ms >= start_ms) && (end_ms == 0 || ms <= end_ms);
  };
  // Read forward from the trade before `first`, so an aggregate that began
  // before it is seen whole and left out. The rows get their aggregate ids
  // as they come; an aggregate is whole once a row of another one follows
  // it (or the market's newest trade was read).
  constexpr std::size_t kPage = 1000;
  std::vector<marketdata::TradeRow> rows;
  uint64_t next = first > 1 ? first - 1 : first;
  bool newest = false;
  std::size_t whole = 0;  // wanted aggregates known whole
  while (!newest && whole < limit) {
    auto page = store_->MarketTrades(Raw(market), next, kPage);
    if (!page.ok()) return page.status();
    newest = page->size() < kPage;
    for (const projection::TradeRecord& t : *page) {
      if (AppendTradeRow(t, &rows) && rows.size() > 1) {
        // The row before ends its aggregate: counted when it is wanted.
        const marketdata::TradeRow& end = rows[rows.size() - 2];
        if (wanted(Raw(end.agg_id) != 0 ? Raw(end.agg_id) : Raw(end.id), end.time_ns)) ++whole;
      }
    }
    if (!page->empty()) next = page->back().trade_id + 1;
    // Past end_ms nothing more is wanted (a command's fills share one time).
    if (end_ms != 0 && !page->empty() && page->back().time_ns / 1'000'000 > end_ms) break;
  }
  std::vector<marketdata::AggTrade> all = marketdata::Aggregate(rows);
  // The last aggregate may go on past the last page read.
  if (!newest && !all.empty()) all.pop_back();
  for (const marketdata::AggTrade& a : all) {
    if (!wanted(Raw(a.id), a.time_ns)) continue;
    out.push_back(a);
    if (out.size() == limit) break;
  }
  return out;
}

Result<std::vector<marketdata::Kline>> ProjectionHistory::Klines(MarketId market,
                                                                 marketdata::KlineInterval interval,
                                                                 int64_t start_ms, int64_t end_ms,
                                                                 std::size_t limit) {
  if (!store_->keeps_market_data()) return NotFound("this history keeps no candles");
  return store_->Candles(Raw(market), static_cast<uint8_t>(interval), start_ms, end_ms, limit);
}

Result<std::vector<marketdata::MarketHistory>> LoadMarketHistory(
    projection::Store* store, const engine::EngineConfig& config,
    const marketdata::ReadSideOptions& options) {
  std::vector<marketdata::MarketHistory> out;
  if (!store->keeps_market_data()) return out;
  for (std::size_t m = 0; m < config.markets.size(); ++m) {
    const auto market = static_cast<uint16_t>(m);
    // Twice as many trades as are kept: the oldest kept one's aggregate may
    // begin before it.
    auto trades = store->MarketTrades(market, 0, 2 * options.recent_trades);
    if (!trades.ok()) return trades.status();
    if (trades->empty()) continue;
    marketdata::MarketHistory h;
    h.market = static_cast<MarketId>(market);
    h.trades = TradeRows(*trades);
    for (std::size_t i = 0; i < marketdata::kKlineIntervals; ++i) {
      const std::size_t keep =
          marketdata::ClosedCandlesKept(options, static_cast<marketdata::KlineInterval>(i));
      // The open candle, the kept closed ones, and one older when there is
      // one: the read side then knows older candles are in the store.
      auto candles = store->Candles(market, static_cast<uint8_t>(i), 0, 0, keep + 2);
      if (!candles.ok()) return candles.status();
      h.candles[i] = std::move(*candles);
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace mb::app
