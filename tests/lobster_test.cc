// Replays real NASDAQ order flow (LOBSTER sample: AAPL, 2012-06-21, the first
// 998 events) through one engine market and holds the engine's 10-level depth
// to LOBSTER's reconstructed book after every event.
//
// Mapping (one market, one LOBSTER price unit = 1 tick, 1 share = 1 lot):
//   1 new limit order     -> resting GTC limit order (LOBSTER id -> engine OrderId)
//   2 partial cancel      -> AmendOrder, new_qty = total - cancelled (keeps priority)
//   3 delete              -> CancelOrder (or a quantity-down amend of a synthetic order)
//   4 visible execution   -> opposite IOC limit of exactly that size at that price from a
//                            taker account; every Trade must name the executed order as maker
//   5 hidden execution, 6 cross trade -> no visible book change
//   7 trading halt        -> SetMarketStatus (-1 halted, 0 quoting and 1 resume: trading)
//
// Two facts about the data shape the replay (both checked against the files):
//  - The first book row is the book *after* the first message, so the starting
//    state is that row with the first message undone: one synthetic resting
//    order per level stands for the orders that rested before the first message.
//    Messages on unknown ids act on the synthetic order at their price.
//  - The message file only holds events inside the visible 10 levels: no message
//    touches a price beyond the previous row's 10th level. What happens deeper is
//    invisible, so a level that comes into view from beyond the previous row's
//    window ("revealed") may differ from what the engine last knew of it. Each
//    event is therefore checked in two steps: (1) every level at or inside the
//    previous row's window must match exactly — this is where the engine's own
//    decisions show; (2) revealed levels are reconciled (synthetic orders added,
//    stale ones cancelled, each counted) and then all 10 levels must match.
//
// Why this catches FIFO errors: executions (type 4) name the order they hit, and
// the IOC that replays one must trade against exactly that engine order; a book
// serving any other order first fails on the Trade's maker_order_id at that
// row. A cancel or amend applied to the wrong order changes a level's quantity
// or later executions. The Fault tests below inject both and expect a failure at
// the very row of the injection.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace mb::engine {
namespace {

constexpr std::string_view kMessageFile = "AAPL_2012-06-21_34200000_57600000_message_10.csv";
constexpr std::string_view kBookFile = "AAPL_2012-06-21_34200000_57600000_orderbook_10.csv";
constexpr std::size_t kLobsterLevels = 10;
constexpr std::size_t kAllLevels = 1 << 20;
constexpr MarketId kMarket{0};
constexpr AssetId kUsd{0};
constexpr AssetId kAapl{1};
constexpr uint32_t kMakerAccounts = 500;  // accounts 1..500 place LOBSTER's resting orders
constexpr AccountId kTaker{1000};         // replays executions; never a maker
constexpr int64_t kUsdDeposit = 100'000'000'000'000;  // 10^10 USD at scale 4
constexpr int64_t kAaplDeposit = 1'000'000'000;

struct BookLevel {
  int64_t price = 0;
  int64_t qty = 0;
  friend bool operator==(const BookLevel&, const BookLevel&) = default;
};

// One side, best first, empty levels dropped.
using SideLevels = std::vector<BookLevel>;

struct BookRow {
  SideLevels asks;
  SideLevels bids;
};

struct Message {
  int line = 0;  // 1-based line in the message file (== row of the book file)
  std::string text;
  int64_t time_ns = 0;
  int type = 0;
  uint64_t id = 0;
  int64_t size = 0;
  int64_t price = 0;
  Side side = Side::kBuy;  // the side of the resting order LOBSTER refers to
};

struct LobsterData {
  std::vector<Message> messages;
  std::vector<BookRow> rows;  // rows[i]: the book after messages[i]
};

// ------------------------------------------------------------------ loading

bool ParseInt(std::string_view s, int64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> f;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    f.push_back(line.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return f;
}

// "34200.004241176" (seconds after midnight) -> nanoseconds.
bool ParseTime(std::string_view s, int64_t* ns) {
  std::size_t dot = s.find('.');
  int64_t whole = 0;
  if (!ParseInt(s.substr(0, dot), &whole)) return false;
  int64_t frac = 0;
  if (dot != std::string_view::npos) {
    std::string digits(s.substr(dot + 1));
    if (digits.size() > 9) digits.resize(9);
    digits.append(9 - digits.size(), '0');
    if (!ParseInt(digits, &frac)) return false;
  }
  *ns = whole * 1'000'000'000 + frac;
  return true;
}

// The sample lives in the repository (tests/data/lobster, with its README).
std::string DataDir() { return std::string(MB_SOURCE_DIR) + "/tests/data/lobster"; }

// Returns an error message, or "" when both files loaded.
std::string LoadLobster(const std::string& dir, LobsterData* data) {
  std::ifstream msg_in(dir + "/" + std::string(kMessageFile));
  std::ifstream book_in(dir + "/" + std::string(kBookFile));
  if (!msg_in || !book_in) return "cannot open the LOBSTER files in " + dir;
  std::string line;
  int n = 0;
  while (std::getline(msg_in, line)) {
    ++n;
    if (line.empty()) continue;
    auto f = SplitCsv(line);
    Message m;
    m.line = n;
    m.text = line;
    int64_t type = 0;
    int64_t id = 0;
    int64_t dir_v = 0;
    if (f.size() != 6 || !ParseTime(f[0], &m.time_ns) || !ParseInt(f[1], &type) ||
        !ParseInt(f[2], &id) || !ParseInt(f[3], &m.size) || !ParseInt(f[4], &m.price) ||
        !ParseInt(f[5], &dir_v) || id < 0 || (dir_v != 1 && dir_v != -1)) {
      return "message file line " + std::to_string(n) + " is malformed: " + line;
    }
    m.type = static_cast<int>(type);
    m.id = static_cast<uint64_t>(id);
    m.side = dir_v == 1 ? Side::kBuy : Side::kSell;
    data->messages.push_back(std::move(m));
  }
  n = 0;
  while (std::getline(book_in, line)) {
    ++n;
    if (line.empty()) continue;
    auto f = SplitCsv(line);
    if (f.size() != 4 * kLobsterLevels) {
      return "book file line " + std::to_string(n) + " has " + std::to_string(f.size()) + " fields";
    }
    BookRow row;
    for (std::size_t l = 0; l < kLobsterLevels; ++l) {
      int64_t v[4] = {};
      for (std::size_t k = 0; k < 4; ++k) {
        if (!ParseInt(f[4 * l + k], &v[k])) {
          return "book file line " + std::to_string(n) + " is malformed";
        }
      }
      if (v[1] > 0) row.asks.push_back(BookLevel{v[0], v[1]});
      if (v[3] > 0) row.bids.push_back(BookLevel{v[2], v[3]});
    }
    data->rows.push_back(std::move(row));
  }
  if (data->messages.size() != data->rows.size() || data->messages.empty()) {
    return "message and book files differ in length (" + std::to_string(data->messages.size()) +
           " vs " + std::to_string(data->rows.size()) + ")";
  }
  return "";
}

// ------------------------------------------------------------------ comparison

std::string FormatLevel(const BookLevel* l) {
  if (l == nullptr) return "-";
  return std::to_string(l->price) + " x " + std::to_string(l->qty);
}

// Compares one side level by level. Returns "" when equal, else a table of
// every level with the differing ones marked.
std::string CompareSide(std::string_view side_name, const SideLevels& expected,
                        const SideLevels& actual) {
  if (expected == actual) return "";
  std::ostringstream os;
  os << "  " << side_name << " level   expected (LOBSTER)      actual (engine)\n";
  std::size_t n = std::max(expected.size(), actual.size());
  for (std::size_t i = 0; i < n; ++i) {
    const BookLevel* e = i < expected.size() ? &expected[i] : nullptr;
    const BookLevel* a = i < actual.size() ? &actual[i] : nullptr;
    bool same = e != nullptr && a != nullptr && *e == *a;
    std::string es = FormatLevel(e);
    std::string as = FormatLevel(a);
    os << "  " << side_name << " " << (i + 1 < 10 ? " " : "") << (i + 1) << "      " << es
       << std::string(es.size() < 24 ? 24 - es.size() : 1, ' ') << as
       << (same ? "" : "   <-- differs") << "\n";
  }
  return os.str();
}

// True when `price` lies at or inside a window whose worst visible price is
// `edge` (nullopt: the whole side was visible).
bool Within(Side side, int64_t price, std::optional<int64_t> edge) {
  if (!edge) return true;
  return side == Side::kBuy ? price >= *edge : price <= *edge;
}

SideLevels Restrict(const SideLevels& levels, Side side, std::optional<int64_t> edge) {
  SideLevels out;
  for (const auto& l : levels) {
    if (Within(side, l.price, edge)) out.push_back(l);
  }
  return out;
}

std::optional<int64_t> WindowEdge(const SideLevels& levels) {
  if (levels.size() < kLobsterLevels) return std::nullopt;
  return levels.back().price;
}

// ------------------------------------------------------------------ replay

enum class Fault {
  kNone,
  // At the first delete of a known order whose level holds another order of a
  // different size, cancel that other order instead.
  kCancelWrongOrder,
  // At the first execution hitting a level of two or more orders, move the
  // executed order to the back of its level first (a FIFO violation).
  kBreakFifo,
};

EngineConfig LobsterConfig() {
  EngineConfig c;
  c.assets = {AssetSpec{"USD", 4}, AssetSpec{"AAPL", 0}};
  MarketSpec m;
  m.symbol = "AAPLUSD";
  m.base = kAapl;
  m.quote = kUsd;
  m.tick_units = 1;  // one LOBSTER price unit (USD 0.0001) per share
  m.lot_units = 1;   // one share
  m.min_qty = Qty{1};
  m.max_qty = Qty{100'000'000};
  m.max_price = Price{10'000'000'000};  // USD 1,000,000
  m.min_notional = Amount{0};
  m.maker_fee_bps = 0;
  m.taker_fee_bps = 0;
  c.markets = {m};
  c.max_accounts = 1024;
  c.fee_account = AccountId{0};
  c.expected_open_orders = 4096;
  c.client_id_memory = 1024;
  return c;
}

class LobsterReplay {
 public:
  LobsterReplay(const LobsterData& data, Fault fault)
      : data_(data), fault_(fault), engine_(MakeConfig()) {
    events_.reserve(256);
  }

  // Replays every message. Returns the first failure, or "" when every row matched.
  std::string Run() {
    if (!config_error_.empty()) return config_error_;
    if (std::string err = Setup(); !err.empty()) return err;
    for (std::size_t i = 0; i < data_.messages.size(); ++i) {
      const Message& m = data_.messages[i];
      now_ns_ = m.time_ns;
      std::string err = ApplyMessage(m);
      if (err.empty()) err = CheckRow(i);
      if (!err.empty()) {
        return "row " + std::to_string(m.line) + " (message \"" + m.text + "\", " + Describe(m) +
               "):\n" + err;
      }
      ++rows_checked_;
    }
    return "";
  }

  int rows_checked() const { return rows_checked_; }
  int executions_checked() const { return executions_checked_; }
  int reconciled_levels() const { return reconciled_levels_; }
  int fault_row() const { return fault_row_; }

 private:
  EngineConfig MakeConfig() {
    EngineConfig c = LobsterConfig();
    Status s = c.Validate();
    if (!s.ok()) {
      config_error_ = "EngineConfig::Validate: " + s.message();
    } else if (c.markets[0].notional_per_tick_lot != 1) {
      config_error_ = "notional_per_tick_lot is " +
                      std::to_string(c.markets[0].notional_per_tick_lot) + ", expected 1";
    }
    return c;
  }

  static std::string Describe(const Message& m) {
    std::string side = m.side == Side::kBuy ? "buy" : "sell";
    std::string what;
    switch (m.type) {
      case 1:
        what = "new " + side + " order";
        break;
      case 2:
        what = "partial cancel of " + side + " order";
        break;
      case 3:
        what = "delete of " + side + " order";
        break;
      case 4:
        what = "execution of visible " + side + " order";
        break;
      case 5:
        what = "execution of hidden " + side + " order";
        break;
      case 6:
        what = "cross trade";
        break;
      case 7:
        what = "trading halt indicator";
        break;
      default:
        what = "type " + std::to_string(m.type);
        break;
    }
    return what + " " + std::to_string(m.id) + ", " + std::to_string(m.size) + " @ " +
           std::to_string(m.price);
  }

  // Processes one command; returns its events, or an error when it was rejected.
  std::string Execute(CommandBody body) {
    Command c;
    c.timestamp_ns = now_ns_;
    c.body = body;
    events_.clear();
    engine_.Process(c, &events_);
    if (events_.empty())
      return "the engine emitted no event for a " + std::string(ToString(c.type())) + " command";
    if (const auto* r = std::get_if<Rejected>(&events_.front().body)) {
      return "the engine rejected a " + std::string(ToString(c.type())) +
             " command: " + std::string(ToString(r->reason));
    }
    return "";
  }

  AccountId NextMaker() {
    maker_cursor_ = maker_cursor_ % kMakerAccounts + 1;
    return AccountId{maker_cursor_};
  }

  // Places a resting GTC limit order; *id receives its engine id.
  std::string PlaceResting(Side side, int64_t price, int64_t qty, OrderId* id) {
    PlaceOrder p;
    p.account = NextMaker();
    p.market = kMarket;
    p.side = side;
    p.type = OrderType::kLimit;
    p.tif = TimeInForce::kGtc;
    p.stp = StpMode::kNone;
    p.price = Price{price};
    p.qty = Qty{qty};
    if (std::string err = Execute(p); !err.empty()) return err;
    const auto* acc = std::get_if<OrderAccepted>(&events_.front().body);
    if (acc == nullptr) return "a new order did not start with OrderAccepted";
    for (const Event& e : events_) {
      if (e.type() == EventType::kTrade) {
        return "a resting order at " + std::to_string(price) + " crossed the engine's book";
      }
    }
    if (events_.back().type() != EventType::kOrderRested) return "a new order did not rest";
    *id = acc->order_id;
    return "";
  }

  std::string PlaceSynthetic(Side side, int64_t price, int64_t qty) {
    OrderId id{};
    if (std::string err = PlaceResting(side, price, qty, &id); !err.empty()) return err;
    synthetic_[{side, price}].push_back(id);
    return "";
  }

  std::string Cancel(const OrderView& o) {
    CancelOrder c;
    c.account = o.terms.account;
    c.market = kMarket;
    c.order_id = o.id;
    return Execute(c);
  }

  // Reduces an open order by `by` lots, keeping its priority; cancels it when
  // nothing would remain.
  std::string Reduce(const OrderView& o, int64_t by) {
    if (by >= o.remaining.value) return Cancel(o);
    AmendOrder a;
    a.account = o.terms.account;
    a.market = kMarket;
    a.order_id = o.id;
    a.new_qty = Qty{o.terms.qty.value - by};
    if (std::string err = Execute(a); !err.empty()) return err;
    const auto* am = std::get_if<OrderAmended>(&events_.front().body);
    if (am == nullptr || !am->keeps_priority) return "a quantity-down amend lost priority";
    return "";
  }

  // The starting book: the first row with the first message undone.
  std::string Setup() {
    for (uint32_t a = 1; a <= kMakerAccounts + 1; ++a) {
      AccountId acct = a <= kMakerAccounts ? AccountId{a} : kTaker;
      for (auto [asset, amount] : {std::pair{kUsd, kUsdDeposit}, std::pair{kAapl, kAaplDeposit}}) {
        Deposit d;
        d.account = acct;
        d.asset = asset;
        d.amount = Amount{amount};
        d.ref = TransferRef::From("seed-" + std::to_string(a) + "-" + std::to_string(Raw(asset)));
        if (std::string err = Execute(d); !err.empty()) return "deposit: " + err;
      }
    }
    const Message& first = data_.messages.front();
    now_ns_ = first.time_ns;
    std::map<int64_t, int64_t> levels[2];  // by side: price -> qty
    for (const auto& l : data_.rows.front().bids) levels[0][l.price] += l.qty;
    for (const auto& l : data_.rows.front().asks) levels[1][l.price] += l.qty;
    auto& lv = levels[Raw(first.side)];
    switch (first.type) {
      case 1:
        if (lv[first.price] < first.size) return "the first message adds more than its level holds";
        lv[first.price] -= first.size;
        if (lv[first.price] == 0) lv.erase(first.price);
        break;
      case 2:
      case 3:
      case 4:
        lv[first.price] += first.size;
        break;
      default:
        break;
    }
    for (int s = 0; s < 2; ++s) {
      for (const auto& [price, qty] : levels[s]) {
        if (std::string err = PlaceSynthetic(static_cast<Side>(s), price, qty); !err.empty()) {
          return "initial book: " + err;
        }
      }
    }
    edge_[0] = WindowEdge(data_.rows.front().bids);
    edge_[1] = WindowEdge(data_.rows.front().asks);
    return "";
  }

  // The engine order a message acts on: the mapped order when LOBSTER's id is
  // known, else the oldest synthetic order still open at that price.
  std::optional<OrderView> Target(const Message& m) {
    if (auto it = ids_.find(m.id); it != ids_.end()) return engine_.FindOrder(it->second);
    auto s = synthetic_.find({m.side, m.price});
    if (s == synthetic_.end()) return std::nullopt;
    auto& ids = s->second;
    while (!ids.empty()) {
      if (auto o = engine_.FindOrder(ids.front())) return o;
      ids.erase(ids.begin());
    }
    return std::nullopt;
  }

  std::vector<OrderView> OrdersAt(Side side, int64_t price) const {
    std::vector<OrderView> out;
    for (const OrderView& o : engine_.Orders(kMarket, side)) {
      if (o.terms.price.value == price) out.push_back(o);
    }
    return out;
  }

  std::string ApplyMessage(const Message& m) {
    switch (m.type) {
      case 1: {
        OrderId id{};
        if (std::string err = PlaceResting(m.side, m.price, m.size, &id); !err.empty()) return err;
        ids_[m.id] = id;
        return "";
      }
      case 2:
      case 3:
      case 4:
        break;
      case 5:
      case 6:
        return "";  // hidden liquidity and crosses leave the visible book alone
      case 7: {
        MarketStatus want = m.price == -1 ? MarketStatus::kHalted : MarketStatus::kTrading;
        if (engine_.market_status(kMarket) == want) return "";
        SetMarketStatus s;
        s.market = kMarket;
        s.status = want;
        return Execute(s);
      }
      default:
        return "unknown LOBSTER event type " + std::to_string(m.type);
    }
    std::optional<OrderView> target = Target(m);
    if (!target) {
      return "the engine holds no open order for LOBSTER order " + std::to_string(m.id) +
             " (known id: " + (ids_.count(m.id) ? "yes" : "no") + ")";
    }
    if (target->terms.price.value != m.price || target->terms.side != m.side) {
      return "LOBSTER order " + std::to_string(m.id) + " rests at " +
             std::to_string(target->terms.price.value) + " in the engine";
    }
    const bool known = ids_.count(m.id) != 0;
    if (m.size > target->remaining.value || (m.type == 2 && m.size == target->remaining.value)) {
      return "message size " + std::to_string(m.size) + " does not fit engine order " +
             std::to_string(Raw(target->id)) + " with " + std::to_string(target->remaining.value) +
             " remaining";
    }
    if (m.type == 2) return Reduce(*target, m.size);
    if (m.type == 3) {
      if (known && m.size != target->remaining.value) {
        return "delete of " + std::to_string(m.size) + " but engine order " +
               std::to_string(Raw(target->id)) + " has " + std::to_string(target->remaining.value) +
               " remaining";
      }
      if (fault_ == Fault::kCancelWrongOrder && known && fault_row_ < 0) {
        for (const OrderView& o : OrdersAt(m.side, m.price)) {
          if (o.id != target->id && o.remaining != target->remaining) {
            fault_row_ = m.line;
            return Cancel(o);
          }
        }
      }
      return Reduce(*target, m.size);
    }
    return ReplayExecution(m, *target);
  }

  // Type 4: an opposite IOC of exactly the executed size at the executed price.
  std::string ReplayExecution(const Message& m, OrderView target) {
    if (fault_ == Fault::kBreakFifo && fault_row_ < 0) {
      std::vector<OrderView> level = OrdersAt(m.side, m.price);
      if (level.size() >= 2 && level.front().id == target.id) {
        fault_row_ = m.line;
        OrderId moved{};
        if (std::string err = Cancel(target); !err.empty()) return err;
        if (std::string err = PlaceResting(m.side, m.price, target.remaining.value, &moved);
            !err.empty()) {
          return err;
        }
        // The test still expects `target` (LOBSTER's order) to be hit.
      }
    }
    PlaceOrder p;
    p.account = kTaker;
    p.market = kMarket;
    p.side = Opposite(m.side);
    p.type = OrderType::kLimit;
    p.tif = TimeInForce::kIoc;
    p.stp = StpMode::kNone;
    p.price = Price{m.price};
    p.qty = Qty{m.size};
    if (std::string err = Execute(p); !err.empty()) return err;
    int64_t filled = 0;
    for (const Event& e : events_) {
      if (const auto* t = std::get_if<Trade>(&e.body)) {
        if (t->maker_order_id != target.id) {
          return "the execution traded against engine order " +
                 std::to_string(Raw(t->maker_order_id)) + " but LOBSTER executed engine order " +
                 std::to_string(Raw(target.id)) + " (price-time priority differs)";
        }
        if (t->price.value != m.price)
          return "the execution traded at " + std::to_string(t->price.value);
        filled += t->qty.value;
      } else if (e.type() == EventType::kOrderExpired) {
        return "the execution IOC expired after filling " + std::to_string(filled) + " of " +
               std::to_string(m.size);
      }
    }
    if (filled != m.size) {
      return "the execution filled " + std::to_string(filled) + " of " + std::to_string(m.size);
    }
    ++executions_checked_;
    return "";
  }

  SideLevels EngineSide(Side side, std::size_t max_levels) const {
    SideLevels out;
    for (const LevelView& l : engine_.Depth(kMarket, side, max_levels)) {
      out.push_back(BookLevel{l.price.value, l.qty.value});
    }
    return out;
  }

  // Makes the engine's levels in the revealed part of the window match the row.
  std::string Reconcile(Side side, const SideLevels& row, std::optional<int64_t> prev_edge) {
    if (!prev_edge) return "";  // the whole side was visible: nothing can be revealed
    std::optional<int64_t> edge = WindowEdge(row);
    std::map<int64_t, int64_t> revealed;
    for (const auto& l : row) {
      if (!Within(side, l.price, prev_edge)) revealed[l.price] = l.qty;
    }
    for (const auto& l : EngineSide(side, kAllLevels)) {
      if (Within(side, l.price, prev_edge) || !Within(side, l.price, edge)) continue;
      if (revealed.count(l.price)) continue;
      ++reconciled_levels_;
      for (const OrderView& o : OrdersAt(side, l.price)) {
        if (std::string err = Cancel(o); !err.empty()) return "reconcile: " + err;
      }
    }
    for (const auto& [price, qty] : revealed) {
      std::vector<OrderView> orders = OrdersAt(side, price);
      int64_t have = 0;
      for (const auto& o : orders) have += o.remaining.value;
      if (have == qty) continue;
      ++reconciled_levels_;
      if (have < qty) {
        // Orders added out of view arrived after the ones the engine holds.
        if (std::string err = PlaceSynthetic(side, price, qty - have); !err.empty()) {
          return "reconcile: " + err;
        }
        continue;
      }
      // Something left out of view: prefer an order of exactly the missing size
      // (a delete), newest first; else take it from the back of the queue.
      int64_t missing = have - qty;
      for (auto it = orders.rbegin(); it != orders.rend() && missing > 0; ++it) {
        if (it->remaining.value == missing) {
          if (std::string err = Cancel(*it); !err.empty()) return "reconcile: " + err;
          missing = 0;
        }
      }
      for (auto it = orders.rbegin(); it != orders.rend() && missing > 0; ++it) {
        int64_t by = std::min(missing, it->remaining.value);
        if (std::string err = Reduce(*it, by); !err.empty()) return "reconcile: " + err;
        missing -= by;
      }
    }
    return "";
  }

  std::string CheckRow(std::size_t i) {
    const BookRow& row = data_.rows[i];
    const SideLevels* expected[2] = {&row.bids, &row.asks};
    const char* names[2] = {"bid", "ask"};
    // (1) Inside the previous window: the engine's own work, compared exactly.
    std::string diff;
    for (int s = 0; s < 2; ++s) {
      Side side = static_cast<Side>(s);
      diff += CompareSide(names[s], Restrict(*expected[s], side, edge_[s]),
                          Restrict(EngineSide(side, kLobsterLevels), side, edge_[s]));
    }
    if (!diff.empty()) {
      return "depth differs at prices inside the previous row's 10-level window:\n" + diff;
    }
    // (2) Reconcile what came into view, then all ten levels must match.
    for (int s = 0; s < 2; ++s) {
      if (std::string err = Reconcile(static_cast<Side>(s), *expected[s], edge_[s]); !err.empty()) {
        return err;
      }
    }
    for (int s = 0; s < 2; ++s) {
      diff += CompareSide(names[s], *expected[s], EngineSide(static_cast<Side>(s), kLobsterLevels));
    }
    if (!diff.empty()) return "depth differs after reconciling revealed levels:\n" + diff;
    if (Status st = engine_.CheckInvariants(); !st.ok()) {
      return "CheckInvariants: " + st.message();
    }
    edge_[0] = WindowEdge(row.bids);
    edge_[1] = WindowEdge(row.asks);
    return "";
  }

  const LobsterData& data_;
  Fault fault_;
  std::string config_error_;
  Engine engine_;
  EventBuffer events_;
  int64_t now_ns_ = 0;
  uint32_t maker_cursor_ = 0;
  std::unordered_map<uint64_t, OrderId> ids_;  // LOBSTER id -> engine order
  std::map<std::pair<Side, int64_t>, std::vector<OrderId>> synthetic_;  // oldest first
  std::optional<int64_t> edge_[2];  // by side: worst price of the previous row's window
  int rows_checked_ = 0;
  int executions_checked_ = 0;
  int reconciled_levels_ = 0;
  int fault_row_ = -1;
};

class LobsterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new LobsterData;
    load_error_ = LoadLobster(DataDir(), data_);
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(load_error_, "") << "data directory: " << DataDir(); }

  static LobsterData* data_;
  static std::string load_error_;
};

LobsterData* LobsterTest::data_ = nullptr;
std::string LobsterTest::load_error_;

TEST_F(LobsterTest, DataHasOnlyInWindowMessages) {
  // The premise of the two-step check: no message acts beyond the previous row's
  // window, so deeper changes are invisible and only revealed levels may differ.
  for (std::size_t i = 1; i < data_->messages.size(); ++i) {
    const Message& m = data_->messages[i];
    if (m.type < 1 || m.type > 4) continue;
    const BookRow& prev = data_->rows[i - 1];
    const SideLevels& lv = m.side == Side::kBuy ? prev.bids : prev.asks;
    EXPECT_TRUE(Within(m.side, m.price, WindowEdge(lv))) << "line " << m.line << ": " << m.text;
  }
}

TEST_F(LobsterTest, ReproducesEveryBookRow) {
  LobsterReplay replay(*data_, Fault::kNone);
  std::string failure = replay.Run();
  ASSERT_EQ(failure, "");
  EXPECT_EQ(replay.rows_checked(), static_cast<int>(data_->rows.size()));
  EXPECT_EQ(replay.executions_checked(), 98);
  std::cout << "LOBSTER replay: " << replay.rows_checked() << " rows matched, "
            << replay.executions_checked() << " executions hit the named order, "
            << replay.reconciled_levels() << " revealed levels reconciled\n";
}

TEST_F(LobsterTest, DetectsCancellingTheWrongOrder) {
  LobsterReplay replay(*data_, Fault::kCancelWrongOrder);
  std::string failure = replay.Run();
  ASSERT_GT(replay.fault_row(), 0) << "the data holds no level where the fault applies";
  EXPECT_NE(failure.find("row " + std::to_string(replay.fault_row()) + " "), std::string::npos)
      << "expected a failure at row " << replay.fault_row() << ", got:\n"
      << failure;
  EXPECT_NE(failure.find("<-- differs"), std::string::npos) << failure;
  std::cout << "injected fault detected as:\n" << failure;
}

TEST_F(LobsterTest, DetectsFifoViolation) {
  LobsterReplay replay(*data_, Fault::kBreakFifo);
  std::string failure = replay.Run();
  ASSERT_GT(replay.fault_row(), 0) << "the data holds no multi-order level that is executed";
  EXPECT_NE(failure.find("row " + std::to_string(replay.fault_row()) + " "), std::string::npos)
      << "expected a failure at row " << replay.fault_row() << ", got:\n"
      << failure;
  EXPECT_NE(failure.find("price-time priority differs"), std::string::npos) << failure;
  std::cout << "injected fault detected as:\n" << failure << "\n";
}

TEST(LobsterCompareTest, MarksEachDifferingLevel) {
  SideLevels expected = {{5859300, 100}, {5859400, 200}, {5859800, 200}};
  SideLevels actual = {{5859300, 100}, {5859400, 180}};
  std::string diff = CompareSide("ask", expected, actual);
  EXPECT_NE(diff.find("ask  2      5859400 x 200"), std::string::npos) << diff;
  EXPECT_NE(diff.find("5859400 x 180   <-- differs"), std::string::npos) << diff;
  EXPECT_NE(diff.find("5859800 x 200           -   <-- differs"), std::string::npos) << diff;
  EXPECT_EQ(CompareSide("ask", expected, expected), "");
}

}  // namespace
}  // namespace mb::engine
