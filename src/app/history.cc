#include "app/history.h"

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

}  // namespace mb::app
