#include "marketdata/read_side.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "common/append_only.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "engine/listing.h"

namespace mb::marketdata {

using engine::Balance;
using engine::ClientOrderIdChanged;
using engine::Deposited;
using engine::EngineConfig;
using engine::EngineImage;
using engine::Event;
using engine::MarketSpec;
using engine::MarketStatusChanged;
using engine::OrderAccepted;
using engine::OrderAmended;
using engine::OrderArmed;
using engine::OrderCanceled;
using engine::OrderExpired;
using engine::OrderRested;
using engine::OrderTriggered;
using engine::Rejected;
using engine::Side;
using engine::Trade;
using engine::TransferCompleted;
using engine::TransferHeld;
using engine::TransferRefunded;
using engine::Withdrawn;

namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kHourMs = 60 * kMinuteMs;
constexpr int64_t kDayMs = 24 * kHourMs;
// Rolling windows sum the 1m candles of up to 7 days: the 1m series keeps at
// least this many closed candles whatever klines_per_interval says.
constexpr std::size_t kRollingMinutes = static_cast<std::size_t>(kRollingWindowMaxMs / kMinuteMs);

constexpr int64_t kWeekMs = 7 * kDayMs;
// 1970-01-05, the first Monday after the epoch: weeks open on Mondays.
constexpr int64_t kFirstMondayMs = 4 * kDayMs;

constexpr std::array<std::string_view, kKlineIntervals> kIntervalNames = {
    "1m", "3m", "5m",  "15m", "30m", "1h", "2h", "4h",
    "6h", "8h", "12h", "1d",  "1s",  "3d", "1w", "1M"};
constexpr std::array<int64_t, kKlineIntervals> kIntervalLengthMs = {
    kMinuteMs,   3 * kMinuteMs, 5 * kMinuteMs, 15 * kMinuteMs, 30 * kMinuteMs, kHourMs,
    2 * kHourMs, 4 * kHourMs,   6 * kHourMs,   8 * kHourMs,    12 * kHourMs,   kDayMs,
    1000,        3 * kDayMs,    kWeekMs,       31 * kDayMs};
// Sources of candles in a zone that does not align with UTC's: the
// fixed-length intervals of at most a day, longest first (each divides 1d,
// 3d, 1w and a month of whole days).
constexpr std::array<KlineInterval, 11> kZoneSources = {
    KlineInterval::k1d,  KlineInterval::k12h, KlineInterval::k8h, KlineInterval::k6h,
    KlineInterval::k4h,  KlineInterval::k2h,  KlineInterval::k1h, KlineInterval::k30m,
    KlineInterval::k15m, KlineInterval::k5m,  KlineInterval::k3m};

// Floor division: event times before the epoch still align downwards.
int64_t FloorDiv(int64_t a, int64_t b) noexcept {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t NsToMs(int64_t ns) noexcept { return FloorDiv(ns, kNsPerMs); }

// Proleptic Gregorian calendar <-> days since 1970-01-01 (the usual era
// arithmetic: 400-year eras of 146097 days, years starting on March 1st so
// that the leap day ends them).
struct CivilDate {
  int64_t year = 1970;
  int64_t month = 1;  // 1..12
  int64_t day = 1;    // 1..31
};

CivilDate CivilFromDays(int64_t days) noexcept {
  days += 719'468;  // days from 0000-03-01 to 1970-01-01
  const int64_t era = FloorDiv(days, 146'097);
  const int64_t doe = days - era * 146'097;                                      // [0, 146096]
  const int64_t yoe = (doe - doe / 1'460 + doe / 36'524 - doe / 146'096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                   // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;  // [0, 11], March = 0
  CivilDate d;
  d.day = doy - (153 * mp + 2) / 5 + 1;
  d.month = mp < 10 ? mp + 3 : mp - 9;
  d.year = yoe + era * 400 + (d.month <= 2 ? 1 : 0);
  return d;
}

int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day) noexcept {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(year, 400);
  const int64_t yoe = year - era * 400;                                               // [0, 399]
  const int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;                          // [0, 146096]
  return era * 146'097 + doe - 719'468;
}

// Adds candle c (later in time) into the candle being summed.
void MergeInto(Kline* into, const Kline& c) noexcept {
  into->high = std::max(into->high, c.high);
  into->low = std::min(into->low, c.low);
  into->close = c.close;
  into->volume += c.volume;
  into->base_volume += c.base_volume;
  into->quote_volume += c.quote_volume;
  into->taker_buy_base += c.taker_buy_base;
  into->taker_buy_quote += c.taker_buy_quote;
  into->trades += c.trades;
  into->last_trade = c.last_trade;
}

std::size_t SideIndex(Side s) noexcept { return static_cast<std::size_t>(Raw(s)); }

// Up to n of the newest rows held from `head` on, oldest first.
std::vector<TradeRow> NewestRows(const TradeChunk* head, std::size_t n) {
  std::vector<const TradeChunk*> chunks;
  std::size_t held = 0;
  for (const TradeChunk* c = head; c != nullptr && held < n; c = c->older.get()) {
    chunks.push_back(c);
    held += c->rows.size();
  }
  std::vector<TradeRow> out;
  out.reserve(std::min(held, n));
  std::size_t skip = held > n ? held - n : 0;
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
    const std::vector<TradeRow>& rows = (*it)->rows;
    const std::size_t from = std::min(skip, rows.size());
    skip -= from;
    out.insert(out.end(), rows.begin() + static_cast<std::ptrdiff_t>(from), rows.end());
  }
  return out;
}

// True when time_ns (placing or trade time) lies in [start_ms, end_ms], 0
// meaning unbounded.
bool InWindow(int64_t time_ns, int64_t start_ms, int64_t end_ms) noexcept {
  const int64_t ms = NsToMs(time_ns);
  return (start_ms == 0 || ms >= start_ms) && (end_ms == 0 || ms <= end_ms);
}

// Binance list semantics shared by AllOrders and MyTrades: `rows` ascending;
// with a lower bound (from id or start time) the oldest `limit`, otherwise the
// newest `limit`, always returned ascending.
template <class T>
void Limit(std::vector<T>* rows, bool from_start, std::size_t limit) {
  if (rows->size() <= limit) return;
  if (from_start) {
    rows->resize(limit);
  } else {
    rows->erase(rows->begin(), rows->end() - static_cast<std::ptrdiff_t>(limit));
  }
}

// Key of the client order id index: ids are looked up per market.
std::string ClientKey(MarketId market, std::string_view cid) {
  std::string k = std::to_string(Raw(market));
  k.push_back(':');
  k.append(cid);
  return k;
}

}  // namespace

// ------------------------------------------------------------- plain helpers

std::optional<KlineInterval> ParseKlineInterval(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kKlineIntervals; ++i) {
    if (kIntervalNames[i] == s) return static_cast<KlineInterval>(i);
  }
  return std::nullopt;
}

std::string_view ToString(KlineInterval i) noexcept {
  const auto k = static_cast<std::size_t>(i);
  return k < kKlineIntervals ? kIntervalNames[k] : std::string_view("?");
}

int64_t IntervalMs(KlineInterval i) noexcept {
  const auto k = static_cast<std::size_t>(i);
  return k < kKlineIntervals ? kIntervalLengthMs[k] : 0;
}

std::optional<int32_t> ParseTimeZone(std::string_view s) noexcept {
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  auto digits = [](std::string_view d, int32_t* out) {
    if (d.empty() || d.size() > 2) return false;
    int32_t v = 0;
    for (char c : d) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  const std::size_t colon = s.find(':');
  int32_t hours = 0;
  int32_t minutes = 0;
  if (!digits(s.substr(0, colon), &hours)) return std::nullopt;
  if (colon != std::string_view::npos) {
    const std::string_view m = s.substr(colon + 1);
    if (m.size() != 2 || !digits(m, &minutes) || minutes > 59) return std::nullopt;
  }
  const int32_t total = (negative ? -1 : 1) * (hours * 60 + minutes);
  if (total < kMinZoneMinutes || total > kMaxZoneMinutes) return std::nullopt;
  return total;
}

int64_t KlineOpenMs(KlineInterval i, int64_t t_ms, int32_t zone_min) noexcept {
  const int64_t offset = int64_t{zone_min} * kMinuteMs;
  const int64_t local = t_ms + offset;
  int64_t open = 0;
  switch (i) {
    case KlineInterval::k1M: {
      const CivilDate d = CivilFromDays(FloorDiv(local, kDayMs));
      open = DaysFromCivil(d.year, d.month, 1) * kDayMs;
      break;
    }
    case KlineInterval::k1w:
      open = FloorDiv(local - kFirstMondayMs, kWeekMs) * kWeekMs + kFirstMondayMs;
      break;
    default: {
      const int64_t len = IntervalMs(i);
      open = FloorDiv(local, len) * len;
      break;
    }
  }
  return open - offset;
}

int64_t KlineNextOpenMs(KlineInterval i, int64_t open_ms, int32_t zone_min) noexcept {
  if (i != KlineInterval::k1M) return open_ms + IntervalMs(i);
  const int64_t offset = int64_t{zone_min} * kMinuteMs;
  const CivilDate d = CivilFromDays(FloorDiv(open_ms + offset, kDayMs));
  const int64_t year = d.month == 12 ? d.year + 1 : d.year;
  const int64_t month = d.month == 12 ? 1 : d.month + 1;
  return DaysFromCivil(year, month, 1) * kDayMs - offset;
}

bool ZoneAligned(KlineInterval i, int32_t zone_min) noexcept {
  if (zone_min == 0) return true;
  if (i == KlineInterval::k1M || i == KlineInterval::k1w) return false;
  return (int64_t{zone_min} * kMinuteMs) % IntervalMs(i) == 0;
}

KlineInterval ZoneSource(KlineInterval interval, int32_t zone_min) noexcept {
  const int64_t offset = int64_t{zone_min} * kMinuteMs;
  const bool calendar = interval == KlineInterval::k1M;
  for (KlineInterval s : kZoneSources) {
    const int64_t len = IntervalMs(s);
    if (offset % len != 0) continue;
    // A month is whole days (every source divides a day); the others must
    // be a whole number of source candles, and longer than one.
    if (calendar || (IntervalMs(interval) % len == 0 && IntervalMs(interval) > len)) return s;
  }
  return KlineInterval::k1m;
}

// ------------------------------------------------------------- KlineHistory

std::size_t KlineHistory::LowerBound(int64_t open_ms) const noexcept {
  std::size_t lo = 0, hi = size_;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if ((*this)[mid].open_time_ms < open_ms) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::size_t KlineHistory::UpperBound(int64_t open_ms) const noexcept {
  std::size_t lo = 0, hi = size_;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if ((*this)[mid].open_time_ms <= open_ms) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::shared_ptr<const KlineHistory> KlineHistory::Append(const KlineHistory* history,
                                                         const Kline& k, std::size_t bound) {
  auto out = std::make_shared<KlineHistory>();
  if (history != nullptr) *out = *history;  // the chunk pointers, not the candles
  if (out->chunks_.empty() || out->chunks_.back()->size() == kChunk) {
    auto chunk = std::make_shared<std::vector<Kline>>();
    chunk->reserve(kChunk);
    chunk->push_back(k);
    out->chunks_.push_back(std::move(chunk));
  } else {
    // The partial last chunk is shared with older snapshots: copy it.
    auto chunk = std::make_shared<std::vector<Kline>>();
    chunk->reserve(kChunk);
    chunk->assign(out->chunks_.back()->begin(), out->chunks_.back()->end());
    chunk->push_back(k);
    out->chunks_.back() = std::move(chunk);
  }
  ++out->size_;
  while (out->size_ > std::max<std::size_t>(bound, 1)) {
    out->truncated_ = true;
    --out->size_;
    if (++out->skip_ == kChunk) {
      out->chunks_.erase(out->chunks_.begin());
      out->skip_ = 0;
    }
  }
  return out;
}

std::size_t ClosedCandlesKept(const ReadSideOptions& options, KlineInterval interval) noexcept {
  return interval == KlineInterval::k1m ? std::max(options.klines_per_interval, kRollingMinutes)
                                        : options.klines_per_interval;
}

bool SameAggregate(const TradeRow& prev, const TradeRow& row) noexcept {
  const OrderId prev_taker = prev.buyer_is_maker ? prev.sell_order : prev.buy_order;
  const OrderId taker = row.buyer_is_maker ? row.sell_order : row.buy_order;
  return prev_taker == taker && prev.price == row.price && prev.seq == row.seq;
}

std::optional<Kline> AddToCandle(KlineInterval interval, const TradeRow& row, bool taker_buys,
                                 std::optional<Kline>* current) {
  const int64_t open = KlineOpenMs(interval, NsToMs(row.time_ns));
  std::optional<Kline> closed;
  // A trade stamped before the open candle (a clock stepping back at
  // intake) counts in the open candle: candles never reopen.
  if (*current && open > (*current)->open_time_ms) {
    closed = std::move(*current);
    current->reset();
  }
  if (!*current) {
    Kline k;
    k.open_time_ms = open;
    k.open = k.high = k.low = row.price;
    k.first_trade = row.id;
    *current = k;
  }
  Kline& k = **current;
  k.high = std::max(k.high, row.price);
  k.low = std::min(k.low, row.price);
  k.close = row.price;
  k.volume += row.qty;
  k.base_volume += row.base_qty;
  k.quote_volume += row.notional;
  if (taker_buys) {
    k.taker_buy_base += row.base_qty;
    k.taker_buy_quote += row.notional;
  }
  ++k.trades;
  k.last_trade = row.id;
  return closed;
}

std::vector<AggTrade> Aggregate(std::span<const TradeRow> rows) {
  std::vector<AggTrade> out;
  TradeId open_id{};  // the aggregate id of out.back()
  for (const TradeRow& r : rows) {
    const TradeId agg = Raw(r.agg_id) != 0 ? r.agg_id : r.id;
    if (!out.empty() && agg == open_id && out.back().market == r.market) {
      AggTrade& a = out.back();
      a.qty += r.qty;
      a.last = r.id;
      continue;
    }
    AggTrade a;
    a.id = agg;
    a.market = r.market;
    a.price = r.price;
    a.qty = r.qty;
    a.first = r.id;
    a.last = r.id;
    a.time_ns = r.time_ns;
    a.buyer_is_maker = r.buyer_is_maker;
    out.push_back(a);
    open_id = agg;
  }
  return out;
}

void BatchOutput::Clear() {
  first_seq = Sequence{};
  last_seq = Sequence{};
  time_ns = 0;
  depth.clear();
  trades.clear();
  markets.clear();
  accounts.clear();
}

// ------------------------------------------------------------ MarketSnapshot

std::vector<TradeRow> MarketSnapshot::RecentTrades(std::size_t limit, uint64_t from_id) const {
  if (limit == 0) return {};
  if (from_id == 0) return NewestRows(trades.get(), limit);
  // Chunks hold ascending ids, newer chunks higher ones: stop at the first
  // chunk that starts at or below from_id.
  std::vector<const TradeChunk*> chunks;
  for (const TradeChunk* c = trades.get(); c != nullptr; c = c->older.get()) {
    chunks.push_back(c);
    if (!c->rows.empty() && Raw(c->rows.front().id) <= from_id) break;
  }
  std::vector<TradeRow> out;
  for (auto it = chunks.rbegin(); it != chunks.rend() && out.size() < limit; ++it) {
    for (const TradeRow& r : (*it)->rows) {
      if (Raw(r.id) < from_id) continue;
      out.push_back(r);
      if (out.size() == limit) break;
    }
  }
  return out;
}

bool MarketSnapshot::TradesBeyondHeld(uint64_t from_id, int64_t start_ms) const {
  if (from_id == 0 && start_ms == 0) return false;
  const TradeChunk* c = trades.get();
  while (c != nullptr && c->older != nullptr) c = c->older.get();
  if (c == nullptr || c->rows.empty()) return true;  // nothing held: all of it elsewhere
  const TradeRow& oldest = c->rows.front();
  return from_id != 0 ? from_id <= Raw(oldest.id) : start_ms <= NsToMs(oldest.time_ns);
}

std::vector<AggTrade> MarketSnapshot::AggTrades(std::size_t limit, uint64_t from_id,
                                                int64_t start_ms, int64_t end_ms) const {
  if (limit == 0) return {};
  const std::size_t held = trades ? trades->total : 0;
  std::vector<AggTrade> all = Aggregate(NewestRows(trades.get(), held));
  // The oldest aggregate may have lost its first trades to the bound.
  if (!all.empty() && all.front().first != all.front().id) all.erase(all.begin());
  std::vector<AggTrade> out;
  for (const AggTrade& a : all) {
    if (Raw(a.id) < from_id || !InWindow(a.time_ns, start_ms, end_ms)) continue;
    out.push_back(a);
  }
  Limit(&out, from_id > 0 || start_ms != 0, limit);
  return out;
}

std::vector<Kline> MarketSnapshot::Klines(KlineInterval interval, int64_t start_ms, int64_t end_ms,
                                          std::size_t limit, int32_t zone_min) const {
  std::vector<Kline> out;
  const auto k = static_cast<std::size_t>(interval);
  if (k >= kKlineIntervals || limit == 0) return out;
  auto in = [&](const Kline& c) {
    return (start_ms == 0 || c.open_time_ms >= start_ms) &&
           (end_ms == 0 || c.open_time_ms <= end_ms);
  };
  if (!ZoneAligned(interval, zone_min)) {
    // Sum the source candles into the zone's: a candle opening at or after
    // start_ms is made of source candles opening at or after it.
    const KlineSeries& src = klines[static_cast<std::size_t>(ZoneSource(interval, zone_min))];
    auto add = [&](const Kline& c) {
      const int64_t open = KlineOpenMs(interval, c.open_time_ms, zone_min);
      if (!out.empty() && out.back().open_time_ms == open) {
        MergeInto(&out.back(), c);
      } else {
        out.push_back(c);
        out.back().open_time_ms = open;
      }
    };
    if (src.closed) {
      const KlineHistory& closed = *src.closed;
      for (std::size_t i = start_ms == 0 ? 0 : closed.LowerBound(start_ms); i < closed.size();
           ++i) {
        add(closed[i]);
      }
    }
    if (src.current) add(*src.current);
    std::erase_if(out, [&](const Kline& c) { return !in(c); });
    Limit(&out, start_ms != 0, limit);
    return out;
  }
  const KlineSeries& series = klines[k];
  if (series.closed) {
    const KlineHistory& closed = *series.closed;
    std::size_t first = start_ms == 0 ? 0 : closed.LowerBound(start_ms);
    const std::size_t last = end_ms == 0 ? closed.size() : closed.UpperBound(end_ms);
    // Without a start only the newest `limit` can be returned: copy no more.
    if (start_ms == 0 && last > first && last - first > limit) first = last - limit;
    for (std::size_t i = first; i < last; ++i) out.push_back(closed[i]);
  }
  if (series.current && in(*series.current)) out.push_back(*series.current);
  Limit(&out, start_ms != 0, limit);
  return out;
}

bool MarketSnapshot::KlinesBeyondHeld(KlineInterval interval, int64_t start_ms, int64_t end_ms,
                                      std::size_t limit, int32_t zone_min) const {
  const auto k = static_cast<std::size_t>(interval);
  if (k >= kKlineIntervals || limit == 0 || !ZoneAligned(interval, zone_min)) return false;
  const KlineSeries& series = klines[k];
  if (!series.closed || !series.closed->truncated() || series.closed->empty()) return false;
  const KlineHistory& closed = *series.closed;
  if (start_ms != 0) return start_ms < closed[0].open_time_ms;
  // The newest `limit` up to end_ms: held ones are fewer than that.
  const std::size_t held =
      (end_ms == 0 ? closed.size() : closed.UpperBound(end_ms)) +
      (series.current && (end_ms == 0 || series.current->open_time_ms <= end_ms) ? 1 : 0);
  return held < limit;
}

std::optional<Kline> MarketSnapshot::Candle(KlineInterval interval, int64_t open_ms,
                                            int32_t zone_min) const {
  const auto k = static_cast<std::size_t>(interval);
  if (k >= kKlineIntervals) return std::nullopt;
  if (ZoneAligned(interval, zone_min)) {
    const KlineSeries& series = klines[k];
    if (series.current && series.current->open_time_ms == open_ms) return series.current;
    if (series.closed) {
      const std::size_t i = series.closed->LowerBound(open_ms);
      if (i < series.closed->size() && (*series.closed)[i].open_time_ms == open_ms) {
        return (*series.closed)[i];
      }
    }
    return std::nullopt;
  }
  const KlineSeries& src = klines[static_cast<std::size_t>(ZoneSource(interval, zone_min))];
  const int64_t next = KlineNextOpenMs(interval, open_ms, zone_min);
  std::optional<Kline> out;
  auto add = [&](const Kline& c) {
    if (c.open_time_ms < open_ms || c.open_time_ms >= next) return;
    if (out) {
      MergeInto(&*out, c);
    } else {
      out = c;
      out->open_time_ms = open_ms;
    }
  };
  if (src.closed) {
    const KlineHistory& closed = *src.closed;
    for (std::size_t i = closed.LowerBound(open_ms); i < closed.size(); ++i) {
      if (closed[i].open_time_ms >= next) break;
      add(closed[i]);
    }
  }
  if (src.current) add(*src.current);
  return out;
}

std::optional<Kline> MarketSnapshot::LatestCandle(KlineInterval interval, int32_t zone_min) const {
  const auto k = static_cast<std::size_t>(interval);
  if (k >= kKlineIntervals) return std::nullopt;
  if (ZoneAligned(interval, zone_min)) return klines[k].current;
  const KlineSeries& src = klines[static_cast<std::size_t>(ZoneSource(interval, zone_min))];
  if (!src.current) return std::nullopt;
  return Candle(interval, KlineOpenMs(interval, src.current->open_time_ms, zone_min), zone_min);
}

Ticker24h MarketSnapshot::Ticker(int64_t now_ms) const { return Rolling(kDayMs, now_ms); }

namespace {

// Adds candle c to window statistics.
void AddCandle(Ticker24h* t, const Kline& c) {
  if (!t->any_trade) {
    t->any_trade = true;
    t->open = c.open;
    t->high = c.high;
    t->low = c.low;
    t->first_trade = c.first_trade;
  } else {
    t->high = std::max(t->high, c.high);
    t->low = std::min(t->low, c.low);
  }
  t->last = c.close;
  t->last_trade = c.last_trade;
  t->base_volume += c.base_volume;
  t->quote_volume += c.quote_volume;
  t->trades += c.trades;
}

// The quantity of trade `id` if it is still held.
Qty TradeQty(const TradeChunk* head, TradeId id) {
  // The last trade is almost always the newest row held.
  for (const TradeChunk* c = head; c != nullptr; c = c->older.get()) {
    if (c->rows.empty() || Raw(c->rows.front().id) > Raw(id)) continue;
    for (auto it = c->rows.rbegin(); it != c->rows.rend(); ++it) {
      if (it->id == id) return it->qty;
    }
    break;
  }
  return Qty{0};
}

}  // namespace

Ticker24h MarketSnapshot::TradingDay(int32_t zone_min, int64_t now_ms) const {
  const int64_t open = KlineOpenMs(KlineInterval::k1d, now_ms, zone_min);
  Ticker24h t;
  t.open_time_ms = open;
  t.close_time_ms = KlineNextOpenMs(KlineInterval::k1d, open, zone_min) - 1;
  if (const std::optional<Kline> day = Candle(KlineInterval::k1d, open, zone_min)) {
    AddCandle(&t, *day);
    t.last_qty = TradeQty(trades.get(), t.last_trade);
  }
  return t;
}

MarketSnapshot::AvgPrice MarketSnapshot::AveragePrice(int64_t now_ms) const {
  AvgPrice a;
  const Ticker24h w = Rolling(kAvgPriceMinutes * kMinuteMs, now_ms);
  a.base_volume = w.base_volume;
  a.quote_volume = w.quote_volume;
  const std::vector<TradeRow> last = NewestRows(trades.get(), 1);
  if (!last.empty()) {
    a.any_trade = true;
    a.last = last.back().price;
    a.last_trade_ms = NsToMs(last.back().time_ns);
  }
  return a;
}

Ticker24h MarketSnapshot::Rolling(int64_t window_ms, int64_t now_ms) const {
  Ticker24h t;
  t.open_time_ms = now_ms - window_ms;
  t.close_time_ms = now_ms;
  auto add = [&](const Kline& c) {
    if (c.open_time_ms >= t.open_time_ms && c.open_time_ms <= now_ms) AddCandle(&t, c);
  };
  const KlineSeries& series = klines[static_cast<std::size_t>(KlineInterval::k1m)];
  if (series.closed) {
    const KlineHistory& closed = *series.closed;
    for (std::size_t i = closed.LowerBound(t.open_time_ms); i < closed.size(); ++i) add(closed[i]);
  }
  if (series.current) add(*series.current);
  if (t.any_trade) t.last_qty = TradeQty(trades.get(), t.last_trade);
  return t;
}

// ------------------------------------------------------------------ ReadSide

class ReadSide::Impl {
 public:
  Impl(const EngineConfig& config, ReadSideOptions options)
      : cfg_(config), opts_(options), n_assets_(cfg_.assets.size()), markets_(cfg_.markets.size()) {
    for (std::size_t m = 0; m < markets_.size(); ++m) {
      markets_[m].status = cfg_.markets[m].status;
      snapshots_.emplace_back();
      Publish(static_cast<MarketId>(m));
    }
  }

  // ------------------------------------------------------------ writer

  void Bootstrap(const EngineImage& img) {
    // What was added at run time first: the image's markets and assets
    // include them.
    {
      WriterLock lock(mu_);
      for (const engine::AssetAdded& a : img.added_assets) On(a);
      for (const engine::MarketAdded& m : img.added_markets) On(m);
    }
    // The image comes from an Engine running this configuration; anything
    // else is a wiring bug, caught before any state changes.
    const bool shape_ok = img.market_status.size() == markets_.size();
    if (!shape_ok) {
      std::fprintf(stderr, "ReadSide::Bootstrap: image has %zu markets, configuration %zu\n",
                   img.market_status.size(), markets_.size());
    }
    MB_CHECK(shape_ok);
    for (const auto& b : img.balances) {
      MB_CHECK(Raw(b.account) < cfg_.max_accounts && Raw(b.asset) < cfg_.assets.size());
    }
    for (const auto& o : img.orders) {
      MB_CHECK(Raw(o.terms.market) < markets_.size() && Raw(o.terms.account) < cfg_.max_accounts &&
               o.remaining.value > 0 && o.remaining <= o.terms.qty);
    }
    for (const auto& s : img.stops) {
      const engine::ImageOrder& o = s.order;
      MB_CHECK(Raw(o.terms.market) < markets_.size() && Raw(o.terms.account) < cfg_.max_accounts &&
               engine::IsConditional(o.terms.type) && o.remaining == o.terms.qty);
    }

    WriterLock lock(mu_);
    // Again on a replica that resynchronises: nothing of the old state stays.
    accounts_.clear();
    touched_accounts_.clear();
    touched_markets_.clear();
    open_orders_ = 0;
    closed_orders_ = 0;
    const uint64_t last = Raw(img.last_sequence);
    for (std::size_t m = 0; m < markets_.size(); ++m) {
      MarketState& ms = markets_[m];
      ms = MarketState{};
      ms.status = img.market_status[m];
      ms.seq = img.last_sequence;
      // Depth ids continue from the sequence: a batch that changes a book
      // holds at least one command, so the ids a previous run published never
      // exceed the sequence it reached, and clients that kept a book across
      // the restart see ids that keep growing.
      ms.update_id = last;
    }
    for (const auto& b : img.balances) {
      Account(b.account).balances[Raw(b.asset)] = Balance{b.available, b.locked};
    }
    for (const auto& p : img.pending_transfers) {
      MB_CHECK(Raw(p.account) < cfg_.max_accounts && Raw(p.asset) < cfg_.assets.size());
      Account(p.account).held[Raw(p.asset)] += p.amount;
    }
    std::unordered_map<uint64_t, const engine::ImageIceberg*> icebergs;
    for (const auto& ib : img.icebergs) icebergs.emplace(Raw(ib.id), &ib);
    list_of_.clear();
    for (const auto& l : img.lists) {
      MB_CHECK(Raw(l.market) < markets_.size() && Raw(l.account) < cfg_.max_accounts);
      ListRecord rec;
      rec.id = l.id;
      rec.account = l.account;
      rec.market = l.market;
      rec.type = l.type;
      for (int k = 0; k < 3; ++k) {
        rec.orders[k] = l.orders[k];
        if (Raw(l.orders[k]) != 0) list_of_[Raw(l.orders[k])] = l.id;
      }
      // Only a hash of the list client order id survives in the image.
      Account(l.account).lists.emplace(l.id, rec);
    }
    for (const auto& o : img.orders) {
      const MarketSpec& spec = cfg_.markets[Raw(o.terms.market)];
      OrderRecord r;
      r.id = o.id;
      r.terms = o.terms;
      r.remaining = o.remaining;
      r.list_id = ListOf(o.id);
      Qty level = o.remaining;
      if (auto ib = icebergs.find(Raw(o.id)); ib != icebergs.end()) {
        // The image's remaining is the visible part.
        r.iceberg_qty = ib->second->slice;
        r.visible = o.remaining;
        r.remaining = o.remaining + ib->second->hidden;
      }
      r.executed = o.terms.qty - o.remaining;
      // The image does not say at which prices the filled part traded, so
      // this is an estimate at the current limit price: exact for an order
      // that only filled as a maker at that price; a part taken on arrival
      // may have traded better (a buy paid at most, a sell got at least this).
      r.cumulative_quote =
          Amount{o.terms.price.value * r.executed.value * spec.notional_per_tick_lot};
      r.status = r.executed.value > 0 ? OrderStatus::kPartiallyFilled : OrderStatus::kNew;
      // Only a hash of the client order id survives in the image, so these
      // orders cannot be found by client order id.
      r.time_ns = o.created_ns;
      r.update_ns = o.created_ns;
      r.working = true;
      // A conditional order in the book was triggered; the image keeps
      // neither its stop price nor its trigger time, so its placing time
      // stands in for the latter (it is working).
      if (engine::IsConditional(o.terms.type)) r.trigger_ns = std::max<int64_t>(o.created_ns, 1);
      std::map<int64_t, int64_t>& side =
          markets_[Raw(o.terms.market)].levels[SideIndex(o.terms.side)];
      side[o.terms.price.value] += level.value;
      if (Account(o.terms.account).open.emplace(Raw(o.id), r).second) ++open_orders_;
    }
    for (const engine::OrderPending& p : img.pending) {
      MB_CHECK(Raw(p.terms.market) < markets_.size() && Raw(p.terms.account) < cfg_.max_accounts);
      const OrderRecord r = PendingOrderRecord(p, 0);
      AccountState& acc = Account(p.terms.account);
      if (!p.client_order_id.empty()) {
        acc.client_ids[ClientKey(p.terms.market, p.client_order_id.view())] = Raw(p.order_id);
      }
      if (acc.open.emplace(Raw(p.order_id), r).second) ++open_orders_;
      if (auto l = acc.lists.find(p.list_id); l != acc.lists.end()) {
        for (int k = 0; k < 3; ++k) {
          if (l->second.orders[k] == p.order_id) l->second.client_ids[k] = p.client_order_id;
        }
      }
    }
    for (const auto& s : img.stops) {
      const engine::ImageOrder& o = s.order;
      OrderRecord r;
      r.id = o.id;
      r.terms = o.terms;
      r.remaining = o.remaining;
      r.status = OrderStatus::kNew;
      r.time_ns = o.created_ns;
      r.update_ns = o.created_ns;
      r.stop_price = s.stop_price;
      r.trailing_delta = s.trailing_delta;
      r.list_id = ListOf(o.id);
      if (s.trailing_delta != 0) {
        if (s.active) {
          // The image does not say when it began tracking: its placing time
          // stands in.
          r.trailing_ns = std::max<int64_t>(o.created_ns, 1);
        } else {
          Watch(r);
        }
      }
      if (Account(o.terms.account).open.emplace(Raw(o.id), r).second) ++open_orders_;
    }
    lock.Unlock();
    for (std::size_t m = 0; m < markets_.size(); ++m) Publish(static_cast<MarketId>(m));
    // Release: pairs with the acquire in applied_seq(); the snapshots and the
    // account state above are visible to whoever reads the new value.
    open_count_.store(open_orders_, std::memory_order_relaxed);
    closed_count_.store(closed_orders_, std::memory_order_relaxed);
    applied_seq_.store(last, std::memory_order_release);
  }

  void SeedHistory(std::span<const MarketHistory> markets,
                   std::span<const OrderRecord> open_orders) {
    {
      // The image keeps only a hash of an open order's client order id.
      WriterLock lock(mu_);
      for (const OrderRecord& o : open_orders) {
        auto acc = accounts_.find(Raw(o.terms.account));
        if (acc == accounts_.end()) continue;
        auto it = acc->second.open.find(Raw(o.id));
        if (it == acc->second.open.end() || !it->second.client_order_id.view().empty()) continue;
        it->second.client_order_id = o.client_order_id;
        acc->second.client_ids.try_emplace(ClientKey(o.terms.market, o.client_order_id.view()),
                                           Raw(o.id));
      }
    }
    for (const MarketHistory& h : markets) {
      if (Raw(h.market) >= markets_.size()) continue;
      MarketState& m = markets_[Raw(h.market)];
      if (!h.trades.empty() && opts_.recent_trades > 0) {
        auto chunk = std::make_shared<TradeChunk>();
        const std::size_t keep = std::min(h.trades.size(), opts_.recent_trades);
        chunk->rows.assign(h.trades.end() - static_cast<std::ptrdiff_t>(keep), h.trades.end());
        chunk->total = chunk->rows.size();
        m.trades = std::move(chunk);
      }
      for (std::size_t i = 0; i < kKlineIntervals; ++i) {
        const std::vector<Kline>& c = h.candles[i];
        KlineSeries& s = m.klines[i];
        s = KlineSeries{};
        if (c.empty()) continue;
        const std::size_t bound = ClosedBound(i);
        const std::size_t closed = c.size() - 1;
        // One more than the bound when the store had more: the series then
        // knows it lacks older candles (KlineHistory::truncated).
        for (std::size_t k = closed - std::min(closed, bound + 1); k < closed && bound > 0; ++k) {
          s.closed = KlineHistory::Append(s.closed.get(), c[k], bound);
        }
        s.current = c.back();
      }
      Publish(h.market);
    }
  }

  void Apply(std::span<const Event> events, BatchOutput* out) {
    out->Clear();
    if (events.empty()) return;
    out_ = out;
    {
      WriterLock lock(mu_);
      for (const Event& e : events) {
        seq_ = e.seq;
        ts_ = e.timestamp_ns;
        std::visit([this](const auto& body) MB_REQUIRES(mu_) { On(body); }, e.body);
      }
      FinishAccounts();
    }
    FinishMarkets();
    out->first_seq = events.front().seq;
    out->last_seq = events.back().seq;
    out->time_ns = events.back().timestamp_ns;
    out_ = nullptr;
    open_count_.store(open_orders_, std::memory_order_relaxed);
    closed_count_.store(closed_orders_, std::memory_order_relaxed);
    // Release: pairs with the acquire in applied_seq() (see Bootstrap).
    applied_seq_.store(Raw(events.back().seq), std::memory_order_release);
  }

  // ------------------------------------------------------------ readers

  std::shared_ptr<const MarketSnapshot> Snapshot(MarketId market) const {
    if (Raw(market) >= snapshots_.size()) return nullptr;
    return snapshots_[Raw(market)].Load();
  }

  uint64_t applied_seq() const noexcept { return applied_seq_.load(std::memory_order_acquire); }
  uint64_t open_orders() const noexcept { return open_count_.load(std::memory_order_relaxed); }
  uint64_t closed_orders() const noexcept { return closed_count_.load(std::memory_order_relaxed); }

  Balance balance(AccountId account, AssetId asset) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr || Raw(asset) >= n_assets_) return {};
    return acc->balances[Raw(asset)];
  }

  std::vector<BalanceRow> Balances(AccountId account) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    std::vector<BalanceRow> rows;
    rows.reserve(n_assets_);
    for (std::size_t a = 0; a < n_assets_; ++a) {
      BalanceRow r;
      r.asset = static_cast<AssetId>(a);
      if (acc != nullptr) {
        r.available = acc->balances[a].available;
        r.locked = acc->balances[a].locked;
        r.held = acc->held[a];
      }
      rows.push_back(r);
    }
    return rows;
  }

  std::vector<OrderRecord> OpenOrders(AccountId account, std::optional<MarketId> market) const {
    ReaderLock lock(mu_);
    std::vector<OrderRecord> out;
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return out;
    for (const auto& [id, r] : acc->open) {
      if (!market || r.terms.market == *market) out.push_back(r);
    }
    return out;
  }

  std::optional<OrderRecord> FindOrder(AccountId account, MarketId market, OrderId id) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return std::nullopt;
    return Lookup(*acc, market, Raw(id));
  }

  std::optional<OrderRecord> FindOrderByClientId(AccountId account, MarketId market,
                                                 std::string_view cid) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr || cid.empty()) return std::nullopt;
    auto it = acc->client_ids.find(ClientKey(market, cid));
    if (it == acc->client_ids.end()) return std::nullopt;
    return Lookup(*acc, market, it->second);
  }

  std::vector<OrderRecord> AllOrders(AccountId account, MarketId market, uint64_t from_id,
                                     int64_t start_ms, int64_t end_ms, std::size_t limit) const {
    ReaderLock lock(mu_);
    std::vector<OrderRecord> out;
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return out;
    auto take = [&](const std::map<uint64_t, OrderRecord>& orders) {
      for (auto it = orders.lower_bound(from_id); it != orders.end(); ++it) {
        const OrderRecord& r = it->second;
        if (r.terms.market == market && InWindow(r.time_ns, start_ms, end_ms)) out.push_back(r);
      }
    };
    take(acc->open);
    take(acc->closed);
    std::sort(out.begin(), out.end(),
              [](const OrderRecord& a, const OrderRecord& b) { return Raw(a.id) < Raw(b.id); });
    Limit(&out, from_id > 0 || start_ms != 0, limit);
    return out;
  }

  std::vector<Fill> MyTrades(AccountId account, MarketId market, uint64_t order_id,
                             uint64_t from_id, int64_t start_ms, int64_t end_ms,
                             std::size_t limit) const {
    ReaderLock lock(mu_);
    std::vector<Fill> out;
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return out;
    for (const Fill& f : acc->fills) {  // trade order == ascending trade id
      if (f.market != market || Raw(f.trade_id) < from_id) continue;
      if (order_id != 0 && Raw(f.order_id) != order_id) continue;
      if (!InWindow(f.time_ns, start_ms, end_ms)) continue;
      out.push_back(f);
    }
    Limit(&out, from_id > 0 || start_ms != 0, limit);
    return out;
  }

  int64_t account_update_ns(AccountId account) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    return acc == nullptr ? 0 : acc->update_ns;
  }

  std::size_t IcebergOrders(AccountId account, MarketId market) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return 0;
    std::size_t n = 0;
    for (const auto& [id, r] : acc->open) {
      if (r.terms.market == market && r.iceberg_qty.value != 0) ++n;
    }
    return n;
  }

  std::optional<ListRecord> FindList(AccountId account, uint64_t list_id) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return std::nullopt;
    if (auto it = acc->lists.find(list_id); it != acc->lists.end()) return it->second;
    if (auto it = acc->closed_lists.find(list_id); it != acc->closed_lists.end()) return it->second;
    return std::nullopt;
  }

  std::optional<ListRecord> FindListByClientId(AccountId account, std::string_view cid) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr || cid.empty()) return std::nullopt;
    for (const auto& [id, l] : acc->lists) {
      if (l.list_client_order_id.view() == cid) return l;
    }
    for (auto it = acc->closed_lists.rbegin(); it != acc->closed_lists.rend(); ++it) {
      if (it->second.list_client_order_id.view() == cid) return it->second;
    }
    return std::nullopt;
  }

  std::vector<ListRecord> OpenLists(AccountId account) const {
    ReaderLock lock(mu_);
    std::vector<ListRecord> out;
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return out;
    for (const auto& [id, l] : acc->lists) out.push_back(l);
    return out;
  }

  std::vector<ListRecord> AllLists(AccountId account, uint64_t from_id, int64_t start_ms,
                                   int64_t end_ms, std::size_t limit) const {
    ReaderLock lock(mu_);
    std::vector<ListRecord> out;
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return out;
    auto take = [&](const std::map<uint64_t, ListRecord>& lists) {
      for (auto it = lists.lower_bound(from_id); it != lists.end(); ++it) {
        if (InWindow(it->second.time_ns, start_ms, end_ms)) out.push_back(it->second);
      }
    };
    take(acc->lists);
    take(acc->closed_lists);
    std::sort(out.begin(), out.end(),
              [](const ListRecord& a, const ListRecord& b) { return a.id < b.id; });
    Limit(&out, from_id > 0 || start_ms != 0, limit);
    return out;
  }

  std::size_t WaitingOrders(AccountId account, MarketId market) const {
    ReaderLock lock(mu_);
    const AccountState* acc = FindAccount(account);
    if (acc == nullptr) return 0;
    std::size_t n = 0;
    for (const auto& [id, r] : acc->open) {
      if (r.terms.market == market && Waiting(r)) ++n;
    }
    return n;
  }

 private:
  // A trailing stop with an activation price that has not begun tracking:
  // the first trade at a price meeting its stop condition starts it.
  struct TrailWatch {
    AccountId account{};
    Price stop{};
    bool rise = false;  // the condition is "price >= stop" (else "<=")
  };

  // One market as the writer sees it. Writer only; readers get snapshots.
  struct MarketState {
    MarketStatus status = MarketStatus::kTrading;
    std::map<int64_t, int64_t> levels[2];  // [Side]: price ticks -> lots, ascending prices
    uint64_t update_id = 0;  // u of the last depth diff: the sequence of its last change
    Sequence seq{};
    Sequence book_seq{};  // the last command that changed a level
    int64_t time_ns = 0;
    std::shared_ptr<const TradeChunk> trades;
    std::array<KlineSeries, kKlineIntervals> klines;
    std::map<uint64_t, TrailWatch> trailing;  // by order id
    // This batch:
    bool touched = false;
    std::map<int64_t, int64_t> before[2];  // level totals at their first change
    std::vector<TradeRow> batch_trades;
  };

  // The published snapshot of one market. The lock covers a pointer copy or
  // swap only (a reference count change), never building a snapshot, and the
  // replaced snapshot is released outside it, so neither side waits on the
  // other's work. It is what libstdc++'s atomic shared_ptr functions do, made
  // explicit: std::atomic<std::shared_ptr> in libstdc++ 12 guards the pointer
  // with a bit ThreadSanitizer cannot see, and the free std::atomic_load /
  // std::atomic_store overloads are deprecated in C++20. The mutex also gives
  // the ordering: a snapshot is fully built before Store() makes it reachable.
  class alignas(64) SnapshotSlot {
   public:
    std::shared_ptr<const MarketSnapshot> Load() const {
      MutexLock lock(mu_);
      return ptr_;
    }
    void Store(std::shared_ptr<const MarketSnapshot> next) {
      {
        MutexLock lock(mu_);
        ptr_.swap(next);
      }
      // `next` (the replaced snapshot) is released here, after the unlock.
    }

   private:
    mutable Mutex mu_;
    std::shared_ptr<const MarketSnapshot> ptr_ MB_GUARDED_BY(mu_);
  };

  // Reached through accounts_, under mu_ (the writer holds it exclusively
  // while applying a batch).
  struct AccountState {
    std::vector<Balance> balances;                         // by asset
    std::vector<Amount> held;                              // by asset: transfers out, unresolved
    std::map<uint64_t, OrderRecord> open;                  // by order id
    std::map<uint64_t, OrderRecord> closed;                // history, by order id
    std::deque<uint64_t> closed_order;                     // history ids, oldest closed first
    std::unordered_map<std::string, uint64_t> client_ids;  // ClientKey -> newest order id
    std::deque<Fill> fills;                                // oldest first
    std::map<uint64_t, ListRecord> lists;                  // open order lists, by id
    std::map<uint64_t, ListRecord> closed_lists;           // done, by id
    std::deque<uint64_t> closed_list_order;                // oldest done first
    int64_t update_ns = 0;
    // This batch (writer only):
    std::ptrdiff_t slot = -1;  // index in out_->accounts
    std::vector<AssetId> changed_assets;
  };

  // ---- lookups -------------------------------------------------------------

  const AccountState* FindAccount(AccountId account) const MB_REQUIRES_SHARED(mu_) {
    auto it = accounts_.find(Raw(account));
    return it == accounts_.end() ? nullptr : &it->second;
  }

  AccountState& Account(AccountId account) MB_REQUIRES(mu_) {
    auto [it, inserted] = accounts_.try_emplace(Raw(account));
    if (inserted) {
      it->second.balances.resize(n_assets_);
      it->second.held.resize(n_assets_);
    }
    return it->second;
  }

  static std::optional<OrderRecord> Lookup(const AccountState& acc, MarketId market, uint64_t id) {
    auto it = acc.open.find(id);
    if (it == acc.open.end()) {
      it = acc.closed.find(id);
      if (it == acc.closed.end()) return std::nullopt;
    }
    if (it->second.terms.market != market) return std::nullopt;
    return it->second;
  }

  // The open order an event names, or null (then the event still moves
  // balances and levels, which it carries itself).
  OrderRecord* OpenOrder(AccountId account, OrderId id) MB_REQUIRES(mu_) {
    AccountState& acc = Account(account);
    auto it = acc.open.find(Raw(id));
    assert(it != acc.open.end() && "event for an order the read side does not hold");
    return it == acc.open.end() ? nullptr : &it->second;
  }

  MarketState& TouchMarket(MarketId market) {
    MarketState& m = markets_[Raw(market)];
    if (!m.touched) {
      m.touched = true;
      touched_markets_.push_back(market);
    }
    m.seq = seq_;
    m.time_ns = ts_;
    return m;
  }

  // ---- per-batch output ----------------------------------------------------

  AccountUpdate& Update(AccountId account) MB_REQUIRES(mu_) {
    AccountState& acc = Account(account);
    if (acc.slot < 0) {
      acc.slot = static_cast<std::ptrdiff_t>(out_->accounts.size());
      out_->accounts.push_back(AccountUpdate{});
      out_->accounts.back().account = account;
      touched_accounts_.push_back(account);
    }
    return out_->accounts[static_cast<std::size_t>(acc.slot)];
  }

  void Report(ExecType type, const OrderRecord& r, std::optional<Fill> fill = std::nullopt,
              engine::RejectReason reject = engine::RejectReason::kNone) MB_REQUIRES(mu_) {
    ExecutionReport rep;
    rep.type = type;
    rep.order = r;
    rep.fill = std::move(fill);
    rep.reject = reject;
    rep.seq = seq_;
    rep.time_ns = ts_;
    Update(r.terms.account).reports.push_back(std::move(rep));
  }

  void ChangeBalance(AccountId account, AssetId asset, Amount d_available, Amount d_locked)
      MB_REQUIRES(mu_) {
    if (d_available.value == 0 && d_locked.value == 0) return;
    AccountState& acc = Account(account);
    Balance& b = acc.balances[Raw(asset)];
    b.available += d_available;
    b.locked += d_locked;
    acc.update_ns = ts_;
    (void)Update(account);
    if (std::find(acc.changed_assets.begin(), acc.changed_assets.end(), asset) ==
        acc.changed_assets.end()) {
      acc.changed_assets.push_back(asset);
    }
  }

  // Moves `amount` of the spend asset between available and locked (> 0 locks).
  void Lock(AccountId account, MarketId market, Side side, Amount amount) MB_REQUIRES(mu_) {
    const AssetId asset = engine::SpendAsset(cfg_.markets[Raw(market)], side);
    ChangeBalance(account, asset, Amount{-amount.value}, amount);
  }

  void AdjustLevel(MarketState& m, Side side, Price price, int64_t delta) {
    if (delta == 0) return;
    std::map<int64_t, int64_t>& levels = m.levels[SideIndex(side)];
    auto it = levels.find(price.value);
    const int64_t old = it == levels.end() ? 0 : it->second;
    m.before[SideIndex(side)].try_emplace(price.value, old);
    m.book_seq = seq_;
    const int64_t now = old + delta;
    assert(now >= 0 && "level total below zero");
    if (now <= 0) {
      if (it != levels.end()) levels.erase(it);
    } else if (it == levels.end()) {
      levels.emplace(price.value, now);
    } else {
      it->second = now;
    }
  }

  // ---- closing orders and history -------------------------------------------

  // Moves an open order (already in its final state) into the history.
  void Close(AccountId account, OrderId id) MB_REQUIRES(mu_) {
    AccountState& acc = Account(account);
    auto it = acc.open.find(Raw(id));
    if (it == acc.open.end()) return;
    acc.closed.insert(acc.open.extract(it));
    --open_orders_;
    ++closed_orders_;
    acc.closed_order.push_back(Raw(id));
    while (acc.closed_order.size() > opts_.history_orders) {
      auto old = acc.closed.find(acc.closed_order.front());
      acc.closed_order.pop_front();
      if (old == acc.closed.end()) continue;
      const OrderRecord& r = old->second;
      if (!r.client_order_id.empty()) {
        auto ci = acc.client_ids.find(ClientKey(r.terms.market, r.client_order_id.view()));
        if (ci != acc.client_ids.end() && ci->second == Raw(r.id)) acc.client_ids.erase(ci);
      }
      acc.closed.erase(old);
    }
  }

  void AddFill(const Fill& f) MB_REQUIRES(mu_) {
    std::deque<Fill>& fills = Account(f.account).fills;
    fills.push_back(f);
    while (fills.size() > opts_.history_trades) fills.pop_front();
  }

  // Follows a trailing stop with an activation price until it begins tracking.
  void Watch(const OrderRecord& r) {
    markets_[Raw(r.terms.market)].trailing[Raw(r.id)] = TrailWatch{
        r.terms.account, r.stop_price, engine::TriggersOnRise(r.terms.type, r.terms.side)};
  }

  // A trade at `price`: the trailing stops whose activation price it meets
  // begin tracking now (as the engine's, at the trade).
  void Activate(MarketState& m, Price price) MB_REQUIRES(mu_) {
    for (auto it = m.trailing.begin(); it != m.trailing.end();) {
      const TrailWatch& w = it->second;
      if (w.rise ? price < w.stop : price > w.stop) {
        ++it;
        continue;
      }
      AccountState& acc = Account(w.account);
      auto o = acc.open.find(it->first);
      if (o != acc.open.end()) o->second.trailing_ns = ts_;
      it = m.trailing.erase(it);
    }
  }

  // The last report of order `id` queued in this batch by this record, if any.
  ExecutionReport* LastReport(AccountId account, OrderId id) MB_REQUIRES(mu_) {
    const AccountState& acc = Account(account);
    if (acc.slot < 0) return nullptr;
    std::vector<ExecutionReport>& reports =
        out_->accounts[static_cast<std::size_t>(acc.slot)].reports;
    for (auto it = reports.rbegin(); it != reports.rend(); ++it) {
      if (it->order.id != id) continue;
      return it->seq == seq_ ? &*it : nullptr;
    }
    return nullptr;
  }

  // ---- events --------------------------------------------------------------

  void On(const OrderAccepted& a) MB_REQUIRES(mu_) {
    TouchMarket(a.terms.market);
    Lock(a.terms.account, a.terms.market, a.terms.side, a.locked);
    OrderRecord r = NewOrderRecord(a, ts_);
    r.list_id = ListOf(a.order_id);
    AccountState& acc = Account(a.terms.account);
    if (r.list_id != 0) SetListClientId(a.terms.account, r.list_id, a.order_id, a.client_order_id);
    if (!a.client_order_id.empty()) {
      acc.client_ids[ClientKey(a.terms.market, a.client_order_id.view())] = Raw(a.order_id);
    }
    const auto [at, inserted] = acc.open.insert_or_assign(Raw(a.order_id), r);
    if (inserted) ++open_orders_;
    const OrderRecord& held = at->second;
    Report(ExecType::kNew, held);
  }

  void On(const Rejected& x) MB_REQUIRES(mu_) {
    // Only a refused order is an execution report (Binance answers a refused
    // cancel or amend with an error, not on the stream). An account outside
    // the configuration cannot have a stream.
    if (Raw(x.account) >= cfg_.max_accounts) return;
    if (x.command == engine::CommandType::kPlaceOrderList && Raw(x.order_id) != 0) {
      // A pending order of a list that could not be placed once its working
      // order filled.
      AccountState& acc = Account(x.account);
      auto it = acc.open.find(Raw(x.order_id));
      if (it == acc.open.end()) return;
      OrderRecord& r = it->second;
      r.status = OrderStatus::kRejected;
      r.remaining = Qty{0};
      r.update_ns = ts_;
      Report(ExecType::kRejected, r, std::nullopt, x.reason);
      Close(x.account, x.order_id);
      return;
    }
    if (x.command != engine::CommandType::kPlaceOrder) return;
    OrderRecord r;
    r.terms.account = x.account;
    r.terms.market = x.market;
    r.status = OrderStatus::kRejected;
    r.client_order_id = x.client_order_id;
    r.time_ns = ts_;
    r.update_ns = ts_;
    Report(ExecType::kRejected, r, std::nullopt, x.reason);
  }

  void On(const Trade& t) MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(t.market);
    const MarketSpec& spec = cfg_.markets[Raw(t.market)];
    const Side maker_side = engine::Opposite(t.taker_side);
    // The maker rests at the trade price.
    AdjustLevel(m, maker_side, t.price, -t.qty.value);

    // Settlement, as the engine's ledger does it.
    const bool taker_buys = t.taker_side == Side::kBuy;
    const AccountId buyer = taker_buys ? t.taker_account : t.maker_account;
    const AccountId seller = taker_buys ? t.maker_account : t.taker_account;
    const Amount buyer_fee = taker_buys ? t.taker_fee : t.maker_fee;
    const Amount seller_fee = taker_buys ? t.maker_fee : t.taker_fee;
    ChangeBalance(buyer, spec.quote, Amount{0}, Amount{-t.notional.value});
    ChangeBalance(buyer, spec.base, t.base_qty - buyer_fee, Amount{0});
    ChangeBalance(seller, spec.base, Amount{0}, Amount{-t.base_qty.value});
    ChangeBalance(seller, spec.quote, t.notional - seller_fee, Amount{0});
    ChangeBalance(cfg_.fee_account, spec.base, buyer_fee, Amount{0});
    ChangeBalance(cfg_.fee_account, spec.quote, seller_fee, Amount{0});
    if (t.taker_released.value != 0) {
      Lock(t.taker_account, t.market, t.taker_side, Amount{-t.taker_released.value});
    }

    TradeRow row;
    row.id = t.trade_id;
    row.market = t.market;
    row.price = t.price;
    row.qty = t.qty;
    row.base_qty = t.base_qty;
    row.notional = t.notional;
    row.time_ns = ts_;
    row.buyer_is_maker = t.taker_side == Side::kSell;
    row.buy_order = taker_buys ? t.taker_order_id : t.maker_order_id;
    row.sell_order = taker_buys ? t.maker_order_id : t.taker_order_id;
    row.seq = seq_;
    // One taker's consecutive fills at one price are one aggregate trade. A
    // taker's fills are the events of one command, so of one batch.
    row.agg_id = row.id;
    if (!m.batch_trades.empty() && SameAggregate(m.batch_trades.back(), row)) {
      row.agg_id = m.batch_trades.back().agg_id;
    }
    m.batch_trades.push_back(row);
    out_->trades.push_back(row);
    AddToKlines(m, row, t.taker_side);
    if (!m.trailing.empty()) Activate(m, t.price);

    FillOrder(t, true);
    FillOrder(t, false);
  }

  void FillOrder(const Trade& t, bool maker) MB_REQUIRES(mu_) {
    const MarketSpec& spec = cfg_.markets[Raw(t.market)];
    Fill f;
    f.trade_id = t.trade_id;
    f.order_id = maker ? t.maker_order_id : t.taker_order_id;
    f.account = maker ? t.maker_account : t.taker_account;
    f.market = t.market;
    f.side = maker ? engine::Opposite(t.taker_side) : t.taker_side;
    f.price = t.price;
    f.qty = t.qty;
    f.base_qty = t.base_qty;
    f.notional = t.notional;
    f.commission = maker ? t.maker_fee : t.taker_fee;
    f.commission_asset = f.side == Side::kBuy ? spec.base : spec.quote;
    f.is_maker = maker;
    f.time_ns = ts_;
    AddFill(f);

    OrderRecord* r = OpenOrder(f.account, f.order_id);
    if (r == nullptr) return;
    const bool filled = maker ? t.maker_filled : t.taker_filled;
    r->executed += t.qty;
    r->cumulative_quote += t.notional;
    if (r->quote_qty.value == 0) r->remaining -= t.qty;  // a budget order has no lots left
    if (maker && r->iceberg_qty.value != 0) r->visible -= t.qty;
    r->update_ns = ts_;
    if (filled) {
      r->status = OrderStatus::kFilled;
      r->remaining = Qty{0};
      r->working = false;
    } else {
      r->status = OrderStatus::kPartiallyFilled;
    }
    Report(ExecType::kTrade, *r, f);
    if (filled) Close(f.account, f.order_id);
  }

  void On(const OrderRested& x) MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(x.market);
    if (x.released.value != 0) Lock(x.account, x.market, x.side, Amount{-x.released.value});
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->remaining = x.remaining;
    r->working = true;
    r->update_ns = ts_;
    // An iceberg shows its first slice (or what is left of the order).
    if (r->iceberg_qty.value != 0) r->visible = std::min(r->iceberg_qty, x.remaining);
    AdjustLevel(m, x.side, r->terms.price, LevelQty(*r).value);
    // The report this command queued last for the order (NEW, or its last
    // TRADE) describes it after the command: on the book.
    if (ExecutionReport* rep = LastReport(x.account, x.order_id)) {
      rep->order.working = true;
      rep->order.remaining = x.remaining;
      rep->order.visible = r->visible;
    }
  }

  // The conditional order just accepted waits for its trigger: its stop
  // price and trailing delta go into the order and into its NEW report.
  void On(const OrderArmed& x) MB_REQUIRES(mu_) {
    TouchMarket(x.market);
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->stop_price = x.stop_price;
    r->trailing_delta = x.trailing_delta;
    if (x.trailing_delta != 0) {
      // Without an activation price a trailing stop tracks from the start.
      if (x.stop_price.value == 0) {
        r->trailing_ns = ts_;
      } else {
        Watch(*r);
      }
    }
    if (ExecutionReport* rep = LastReport(x.account, x.order_id)) {
      if (rep->type == ExecType::kNew) rep->order = *r;
    }
  }

  // The order enters matching (the events that follow match it as a
  // taker): a stop-market buy locks what its walk costs now. Reported as
  // NEW again, working from now on (Binance's W).
  void On(const OrderTriggered& x) MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(x.market);
    Lock(x.account, x.market, x.side, x.lock_delta);
    m.trailing.erase(Raw(x.order_id));
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->trigger_ns = ts_;
    r->update_ns = ts_;
    Report(ExecType::kNew, *r);
  }

  // A cancel or an expiry: the order leaves, whatever it still locked returns.
  void CloseOrder(AccountId account, MarketId market, Side side, OrderId id, Qty remaining,
                  Amount released, OrderStatus status, ExecType type, engine::ExpireReason reason)
      MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(market);
    Lock(account, market, side, Amount{-released.value});
    m.trailing.erase(Raw(id));
    OrderRecord* r = OpenOrder(account, id);
    if (r == nullptr) return;
    // A taker that never rested (IOC, FOK, MARKET remainders, self-trade
    // prevention while matching) has no level to leave.
    // An iceberg leaves its level with its visible part only.
    if (r->working) {
      AdjustLevel(m, side, r->terms.price,
                  -(r->iceberg_qty.value != 0 ? r->visible : remaining).value);
    }
    r->working = false;
    r->visible = Qty{0};
    r->remaining = Qty{0};
    r->status = status;
    if (status == OrderStatus::kExpired) r->expire_reason = reason;
    r->update_ns = ts_;
    Report(type, *r);
    Close(account, id);
  }

  void On(const OrderCanceled& x) MB_REQUIRES(mu_) {
    CloseOrder(x.account, x.market, x.side, x.order_id, x.remaining, x.released,
               OrderStatus::kCanceled, ExecType::kCanceled, engine::ExpireReason::kIocRemainder);
  }

  void On(const OrderExpired& x) MB_REQUIRES(mu_) {
    if (x.reason == engine::ExpireReason::kQuoteBudgetSpent) return BudgetSpent(x);
    CloseOrder(x.account, x.market, x.side, x.order_id, x.remaining, x.released,
               OrderStatus::kExpired, ExecType::kExpired, x.reason);
  }

  // A market order by quote amount that spent its budget is FILLED (Binance):
  // no EXPIRED report; its last fill's report, in this batch (the order's
  // events are one command's), says FILLED.
  void BudgetSpent(const OrderExpired& x) MB_REQUIRES(mu_) {
    TouchMarket(x.market);
    Lock(x.account, x.market, x.side, Amount{-x.released.value});
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->working = false;
    r->remaining = Qty{0};
    r->status = OrderStatus::kFilled;
    r->update_ns = ts_;
    std::vector<ExecutionReport>& reports = Update(x.account).reports;
    for (auto it = reports.rbegin(); it != reports.rend(); ++it) {
      if (it->order.id != x.order_id) continue;
      it->order.status = OrderStatus::kFilled;
      it->order.remaining = Qty{0};
      break;
    }
    Close(x.account, x.order_id);
  }

  // The amend just reported gave the order a new client order id: the order
  // is found by it (no longer by the previous one), and the amend's report
  // carries it (c) with the previous one (C).
  void On(const ClientOrderIdChanged& x) MB_REQUIRES(mu_) {
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    AccountState& acc = Account(x.account);
    const ClientOrderId previous = r->client_order_id;
    if (!previous.empty()) {
      auto ci = acc.client_ids.find(ClientKey(x.market, previous.view()));
      if (ci != acc.client_ids.end() && ci->second == Raw(x.order_id)) acc.client_ids.erase(ci);
    }
    if (!x.client_order_id.empty()) {
      acc.client_ids[ClientKey(x.market, x.client_order_id.view())] = Raw(x.order_id);
    }
    r->client_order_id = x.client_order_id;
    std::vector<ExecutionReport>& reports = Update(x.account).reports;
    for (auto it = reports.rbegin(); it != reports.rend(); ++it) {
      if (it->order.id != x.order_id) continue;
      if (it->type == ExecType::kAmended) {
        it->order.client_order_id = x.client_order_id;
        it->orig_client_order_id = previous;
      }
      break;
    }
  }

  void On(const OrderAmended& x) MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(x.market);
    Lock(x.account, x.market, x.side, x.lock_delta);
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    if (x.keeps_priority) {
      if (r->working)
        AdjustLevel(m, x.side, r->terms.price, x.new_remaining.value - r->remaining.value);
    } else {
      // The order leaves the book; the Trades and the OrderRested that follow
      // place it again at its new price.
      if (r->working) AdjustLevel(m, x.side, r->terms.price, -r->remaining.value);
      r->working = false;
      r->terms.price = x.new_price;
    }
    r->terms.qty = x.new_qty;
    r->remaining = x.new_remaining;
    r->update_ns = ts_;
    Report(ExecType::kAmended, *r);
  }

  void On(const Deposited& x) MB_REQUIRES(mu_) {
    ChangeBalance(x.account, x.asset, x.amount, Amount{0});
    Update(x.account).transfers.push_back(BalanceDelta{x.account, x.asset, x.amount, seq_, ts_});
  }

  void On(const Withdrawn& x) MB_REQUIRES(mu_) {
    ChangeBalance(x.account, x.asset, Amount{-x.amount.value}, Amount{0});
    Update(x.account).transfers.push_back(
        BalanceDelta{x.account, x.asset, Amount{-x.amount.value}, seq_, ts_});
  }

  // A transfer to another venue leaves the balance when it is held (as on
  // Binance: neither free nor locked while it travels) and comes back if
  // refunded; its completion only pays the fee account.
  void On(const TransferHeld& x) MB_REQUIRES(mu_) {
    ChangeBalance(x.account, x.asset, Amount{-x.amount.value}, Amount{0});
    Account(x.account).held[Raw(x.asset)] += x.amount;
    Update(x.account).transfers.push_back(
        BalanceDelta{x.account, x.asset, Amount{-x.amount.value}, seq_, ts_});
  }

  void On(const TransferCompleted& x) MB_REQUIRES(mu_) {
    Account(x.account).held[Raw(x.asset)] -= x.amount;
    if (x.fee.value == 0) return;
    ChangeBalance(cfg_.fee_account, x.asset, x.fee, Amount{0});
    Update(cfg_.fee_account)
        .transfers.push_back(BalanceDelta{cfg_.fee_account, x.asset, x.fee, seq_, ts_});
  }

  void On(const TransferRefunded& x) MB_REQUIRES(mu_) {
    Account(x.account).held[Raw(x.asset)] -= x.amount;
    ChangeBalance(x.account, x.asset, x.amount, Amount{0});
    Update(x.account).transfers.push_back(BalanceDelta{x.account, x.asset, x.amount, seq_, ts_});
  }

  void On(const MarketStatusChanged& x) { TouchMarket(x.market).status = x.status; }

  // The order just accepted is an iceberg: its slice goes into the order
  // and its NEW report (it rests, if it does, in the events that follow).
  void On(const engine::IcebergAccepted& x) MB_REQUIRES(mu_) {
    TouchMarket(x.market);
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->iceberg_qty = x.slice;
    if (ExecutionReport* rep = LastReport(x.account, x.order_id)) rep->order.iceberg_qty = x.slice;
  }

  // A resting iceberg's next slice joins the tail of its level (its visible
  // part was filled by the trade just before).
  void On(const engine::IcebergRefilled& x) MB_REQUIRES(mu_) {
    MarketState& m = TouchMarket(x.market);
    AdjustLevel(m, x.side, x.price, x.visible.value);
    OrderRecord* r = OpenOrder(x.account, x.order_id);
    if (r == nullptr) return;
    r->visible = x.visible;
    assert(r->remaining == x.visible + x.hidden && "iceberg parts disagree with the engine");
  }

  void On(const engine::ListAccepted& x) MB_REQUIRES(mu_) {
    TouchMarket(x.market);
    ListRecord l;
    l.id = x.list_id;
    l.account = x.account;
    l.market = x.market;
    l.type = x.type;
    l.list_client_order_id = x.list_client_order_id;
    for (int k = 0; k < 3; ++k) {
      l.orders[k] = x.order_ids[k];
      if (Raw(x.order_ids[k]) != 0) list_of_[Raw(x.order_ids[k])] = x.list_id;
    }
    l.time_ns = ts_;
    l.update_ns = ts_;
    Account(x.account).lists.insert_or_assign(x.list_id, l);
    ReportList(l);
  }

  // A pending order of an OTO / OTOCO list: open as PENDING_NEW, in no
  // book, locking nothing, until placed (an OrderAccepted with its id).
  void On(const engine::OrderPending& x) MB_REQUIRES(mu_) {
    TouchMarket(x.terms.market);
    const OrderRecord r = PendingOrderRecord(x, ts_);
    AccountState& acc = Account(x.terms.account);
    if (!x.client_order_id.empty()) {
      acc.client_ids[ClientKey(x.terms.market, x.client_order_id.view())] = Raw(x.order_id);
    }
    const auto [at, inserted] = acc.open.insert_or_assign(Raw(x.order_id), r);
    if (inserted) ++open_orders_;
    SetListClientId(x.terms.account, x.list_id, x.order_id, x.client_order_id);
    Report(ExecType::kNew, at->second);
  }

  // Accounts and keys: the gateway's key store serves them.
  void On(const engine::AuthChanged&) MB_REQUIRES(mu_) {}
  // Assets and markets added at run time: every account gets the asset's
  // balance; the market gets its (empty) book and snapshot. Known already
  // (bootstrapped from an image that holds it): nothing.
  void On(const engine::AssetAdded& a) MB_REQUIRES(mu_) {
    if (!engine::LearnListing(&cfg_, a)) return;
    n_assets_ = cfg_.assets.size();
    for (auto& [id, acc] : accounts_) {
      acc.balances.resize(n_assets_);
      acc.held.resize(n_assets_);
    }
  }
  void On(const engine::MarketAdded& m) MB_REQUIRES(mu_) {
    if (!engine::LearnListing(&cfg_, m)) return;
    MarketState& ms = markets_.emplace_back();
    ms.status = m.status;
    ms.seq = seq_;
    ms.update_id = Raw(seq_);
    snapshots_.emplace_back();
    Publish(m.market);
  }

  // No order of the list is open or pending any more: pending orders that
  // were never placed (their working order did not fill) are canceled.
  void On(const engine::ListDone& x) MB_REQUIRES(mu_) {
    TouchMarket(x.market);
    AccountState& acc = Account(x.account);
    auto it = acc.lists.find(x.list_id);
    if (it == acc.lists.end()) return;
    ListRecord l = it->second;
    acc.lists.erase(it);
    for (const OrderId id : l.orders) {
      if (Raw(id) == 0) continue;
      list_of_.erase(Raw(id));
      auto o = acc.open.find(Raw(id));
      if (o == acc.open.end() || o->second.status != OrderStatus::kPendingNew) continue;
      o->second.status = OrderStatus::kCanceled;
      o->second.remaining = Qty{0};
      o->second.update_ns = ts_;
      Report(ExecType::kCanceled, o->second);
      Close(x.account, id);
    }
    l.status = ListStatus::kAllDone;
    l.update_ns = ts_;
    ReportList(l);
    acc.closed_lists.emplace(l.id, l);
    acc.closed_list_order.push_back(l.id);
    while (acc.closed_list_order.size() > opts_.history_orders) {
      acc.closed_lists.erase(acc.closed_list_order.front());
      acc.closed_list_order.pop_front();
    }
  }

  // The list an order belongs to (0: none), while the list is open.
  uint64_t ListOf(OrderId id) const {
    auto it = list_of_.find(Raw(id));
    return it == list_of_.end() ? 0 : it->second;
  }

  // The list's order `id` has client order id `cid`: kept in the list, and
  // in the list's reports of this command (its EXEC_STARTED names its
  // orders' ids).
  void SetListClientId(AccountId account, uint64_t list_id, OrderId id, const ClientOrderId& cid)
      MB_REQUIRES(mu_) {
    AccountState& acc = Account(account);
    auto set = [&](ListRecord& l) {
      for (int k = 0; k < 3; ++k) {
        if (l.orders[k] == id) l.client_ids[k] = cid;
      }
    };
    if (auto it = acc.lists.find(list_id); it != acc.lists.end()) set(it->second);
    if (acc.slot < 0) return;
    for (ListStatusReport& rep : out_->accounts[static_cast<std::size_t>(acc.slot)].lists) {
      if (rep.list.id == list_id && rep.seq == seq_) set(rep.list);
    }
  }

  // A listStatus for the list's account, after the reports queued so far.
  void ReportList(const ListRecord& l) MB_REQUIRES(mu_) {
    AccountUpdate& u = Update(l.account);
    ListStatusReport rep;
    rep.list = l;
    rep.after_reports = u.reports.size();
    rep.seq = seq_;
    rep.time_ns = ts_;
    u.lists.push_back(rep);
  }

  // ---- klines and trades -----------------------------------------------------

  std::size_t ClosedBound(std::size_t interval) const {
    return ClosedCandlesKept(opts_, static_cast<KlineInterval>(interval));
  }

  void AddToKlines(MarketState& m, const TradeRow& row, Side taker_side) {
    for (std::size_t i = 0; i < kKlineIntervals; ++i) {
      KlineSeries& s = m.klines[i];
      const std::optional<Kline> closed =
          AddToCandle(static_cast<KlineInterval>(i), row, taker_side == Side::kBuy, &s.current);
      if (!closed) continue;
      const std::size_t bound = ClosedBound(i);
      if (bound > 0) {
        s.closed = KlineHistory::Append(s.closed.get(), *closed, bound);
      } else {
        s.closed.reset();
      }
    }
  }

  // Adds this batch's trades as one chunk; past 2 x recent_trades rows the
  // list is rewritten as one chunk of the newest recent_trades, so each trade
  // is copied O(1) times on average.
  void AppendTrades(MarketState& m) {
    const std::size_t n = opts_.recent_trades;
    if (n == 0) {
      m.batch_trades.clear();
      return;
    }
    auto chunk = std::make_shared<TradeChunk>();
    chunk->rows = std::move(m.batch_trades);
    m.batch_trades = {};
    chunk->older = m.trades;
    chunk->total = chunk->rows.size() + (m.trades ? m.trades->total : 0);
    if (chunk->total > 2 * n) {
      auto compact = std::make_shared<TradeChunk>();
      compact->rows = NewestRows(chunk.get(), n);
      compact->total = compact->rows.size();
      m.trades = std::move(compact);
    } else {
      m.trades = std::move(chunk);
    }
  }

  // ---- end of batch ----------------------------------------------------------

  void FinishAccounts() MB_REQUIRES(mu_) {
    for (AccountId id : touched_accounts_) {
      AccountState& acc = Account(id);
      AccountUpdate& u = out_->accounts[static_cast<std::size_t>(acc.slot)];
      std::sort(acc.changed_assets.begin(), acc.changed_assets.end());
      for (AssetId a : acc.changed_assets) {
        const Balance& b = acc.balances[Raw(a)];
        u.balances.push_back(BalanceRow{a, b.available, b.locked});
      }
      acc.changed_assets.clear();
      acc.slot = -1;
    }
    touched_accounts_.clear();
  }

  void FinishMarkets() {
    for (MarketId id : touched_markets_) {
      MarketState& m = markets_[Raw(id)];
      DepthDiff d;
      const bool book_changed = !m.before[0].empty() || !m.before[1].empty();
      for (std::size_t s = 0; s < 2; ++s) {
        std::vector<Level>& diff = s == SideIndex(Side::kBuy) ? d.bids : d.asks;
        for (const auto& [price, old] : m.before[s]) {
          auto it = m.levels[s].find(price);
          const int64_t now = it == m.levels[s].end() ? 0 : it->second;
          if (now != old) diff.push_back(Level{Price{price}, Qty{now}});
        }
        m.before[s].clear();
      }
      std::reverse(d.bids.begin(), d.bids.end());  // best (highest) first
      if (book_changed) {
        // Ids follow the journal, not the batching: u is the sequence of the
        // batch's last command that changed a level, U the previous diff's u
        // + 1. A replica that applies the same records in other batches
        // publishes the same book under the same id at every sequence. A
        // batch whose changes cancel out still sends its (empty) diff, so
        // the chain U = previous u + 1 never breaks.
        d.market = id;
        d.first_update_id = m.update_id + 1;
        m.update_id = std::max(m.update_id + 1, Raw(m.book_seq));
        d.last_update_id = m.update_id;
        d.time_ns = m.time_ns;
        out_->depth.push_back(std::move(d));
      }
      if (!m.batch_trades.empty()) AppendTrades(m);
      out_->markets.push_back(id);
      m.touched = false;
      Publish(id);
    }
    touched_markets_.clear();
  }

  void Publish(MarketId id) {
    const MarketState& m = markets_[Raw(id)];
    auto s = std::make_shared<MarketSnapshot>();
    s->market = id;
    s->status = m.status;
    s->seq = m.seq;
    s->last_update_id = m.update_id;
    s->time_ns = m.time_ns;
    const std::size_t depth = opts_.max_depth_levels;
    const auto& bids = m.levels[SideIndex(Side::kBuy)];
    const auto& asks = m.levels[SideIndex(Side::kSell)];
    s->bids.reserve(std::min(depth, bids.size()));
    for (auto it = bids.rbegin(); it != bids.rend() && s->bids.size() < depth; ++it) {
      s->bids.push_back(Level{Price{it->first}, Qty{it->second}});
    }
    s->asks.reserve(std::min(depth, asks.size()));
    for (auto it = asks.begin(); it != asks.end() && s->asks.size() < depth; ++it) {
      s->asks.push_back(Level{Price{it->first}, Qty{it->second}});
    }
    s->trades = m.trades;
    s->klines = m.klines;
    snapshots_[Raw(id)].Store(std::move(s));
  }

  // The configuration, grown by the AssetAdded and MarketAdded events (writer
  // only; readers use the snapshots and the account state).
  EngineConfig cfg_;
  const ReadSideOptions opts_;
  std::size_t n_assets_ MB_GUARDED_BY(mu_);

  // Writer only.
  std::vector<MarketState> markets_;
  std::vector<MarketId> touched_markets_;
  std::vector<AccountId> touched_accounts_;
  // Order id -> its list's id, for the orders of open lists.
  std::unordered_map<uint64_t, uint64_t> list_of_;
  BatchOutput* out_ = nullptr;
  Sequence seq_{};
  int64_t ts_ = 0;

  // Shared with readers.
  mutable SharedMutex mu_;
  std::unordered_map<uint32_t, AccountState> accounts_ MB_GUARDED_BY(mu_);
  // By market. One writer (Publish, and the market's slot appended before
  // anything names the market), any readers.
  AppendOnlyVector<SnapshotSlot> snapshots_;
  std::atomic<uint64_t> applied_seq_{0};
  // Orders open now and closed since the start (writer only; published below
  // after each batch for the metrics).
  uint64_t open_orders_ = 0, closed_orders_ = 0;
  std::atomic<uint64_t> open_count_{0}, closed_count_{0};
};

ReadSide::ReadSide(const engine::EngineConfig& config, ReadSideOptions options)
    : impl_(std::make_unique<Impl>(config, options)) {}
ReadSide::~ReadSide() = default;

void ReadSide::Bootstrap(const engine::EngineImage& image) { impl_->Bootstrap(image); }
void ReadSide::SeedHistory(std::span<const MarketHistory> markets,
                           std::span<const OrderRecord> open_orders) {
  impl_->SeedHistory(markets, open_orders);
}

void ReadSide::Apply(std::span<const engine::Event> events, BatchOutput* out) {
  impl_->Apply(events, out);
}

std::shared_ptr<const MarketSnapshot> ReadSide::Snapshot(MarketId market) const {
  return impl_->Snapshot(market);
}

uint64_t ReadSide::applied_seq() const noexcept { return impl_->applied_seq(); }
uint64_t ReadSide::open_orders() const noexcept { return impl_->open_orders(); }
uint64_t ReadSide::closed_orders() const noexcept { return impl_->closed_orders(); }

engine::Balance ReadSide::balance(AccountId account, AssetId asset) const {
  return impl_->balance(account, asset);
}

std::vector<BalanceRow> ReadSide::Balances(AccountId account) const {
  return impl_->Balances(account);
}

std::vector<OrderRecord> ReadSide::OpenOrders(AccountId account,
                                              std::optional<MarketId> market) const {
  return impl_->OpenOrders(account, market);
}

std::optional<OrderRecord> ReadSide::FindOrder(AccountId account, MarketId market,
                                               OrderId id) const {
  return impl_->FindOrder(account, market, id);
}

std::optional<OrderRecord> ReadSide::FindOrderByClientId(AccountId account, MarketId market,
                                                         std::string_view client_order_id) const {
  return impl_->FindOrderByClientId(account, market, client_order_id);
}

std::vector<OrderRecord> ReadSide::AllOrders(AccountId account, MarketId market, uint64_t from_id,
                                             int64_t start_ms, int64_t end_ms,
                                             std::size_t limit) const {
  return impl_->AllOrders(account, market, from_id, start_ms, end_ms, limit);
}

std::vector<Fill> ReadSide::MyTrades(AccountId account, MarketId market, uint64_t order_id,
                                     uint64_t from_id, int64_t start_ms, int64_t end_ms,
                                     std::size_t limit) const {
  return impl_->MyTrades(account, market, order_id, from_id, start_ms, end_ms, limit);
}

int64_t ReadSide::account_update_ns(AccountId account) const {
  return impl_->account_update_ns(account);
}

std::size_t ReadSide::WaitingOrders(AccountId account, MarketId market) const {
  return impl_->WaitingOrders(account, market);
}

std::size_t ReadSide::IcebergOrders(AccountId account, MarketId market) const {
  return impl_->IcebergOrders(account, market);
}

std::optional<ListRecord> ReadSide::FindList(AccountId account, uint64_t list_id) const {
  return impl_->FindList(account, list_id);
}

std::optional<ListRecord> ReadSide::FindListByClientId(AccountId account,
                                                       std::string_view cid) const {
  return impl_->FindListByClientId(account, cid);
}

std::vector<ListRecord> ReadSide::OpenLists(AccountId account) const {
  return impl_->OpenLists(account);
}

std::vector<ListRecord> ReadSide::AllLists(AccountId account, uint64_t from_id, int64_t start_ms,
                                           int64_t end_ms, std::size_t limit) const {
  return impl_->AllLists(account, from_id, start_ms, end_ms, limit);
}

}  // namespace mb::marketdata
