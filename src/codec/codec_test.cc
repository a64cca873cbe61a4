#include "codec/codec.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <new>
#include <string>
#include <tuple>
#include <vector>

// The allocation probe: the largest single allocation made while tracking is
// on shows that a garbage count in an image is refused before it is allocated.
#include "common/counting_new.h"

namespace mb::codec {
namespace {

using namespace mb::engine;  // NOLINT(google-build-using-namespace)

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint16_t kU16Max = std::numeric_limits<uint16_t>::max();

const char* const kId36 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const char* const kRef64 = "ref-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVW";
const char* const kAddress64 = "mbx:venue-b/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP";

// ---------------------------------------------------------------------------
// Field-by-field equality. The structured bindings fail to compile when a
// struct gains a member, so a new field can't go unchecked.
// ---------------------------------------------------------------------------

template <class T>
auto Tie(const T& x) {
  if constexpr (std::is_same_v<T, OrderTerms>) {
    const auto& [a, b, c, d, e, f, g, h] = x;
    return std::tie(a, b, c, d, e, f, g, h);
  } else if constexpr (std::is_same_v<T, PlaceOrder>) {
    const auto& [a, b, c, d, e, f, g, h, i, j] = x;
    return std::tie(a, b, c, d, e, f, g, h, i, j);
  } else if constexpr (std::is_same_v<T, CancelOrder>) {
    const auto& [a, b, c, d, e] = x;
    return std::tie(a, b, c, d, e);
  } else if constexpr (std::is_same_v<T, CancelAll>) {
    const auto& [a, b] = x;
    return std::tie(a, b);
  } else if constexpr (std::is_same_v<T, AmendOrder>) {
    const auto& [a, b, c, d, e, f, g, h] = x;
    return std::tie(a, b, c, d, e, f, g, h);
  } else if constexpr (std::is_same_v<T, CancelReplace>) {
    const auto& [cancel, place, mode] = x;
    return std::tuple_cat(Tie(cancel), Tie(place), std::tie(mode));
  } else if constexpr (std::is_same_v<T, ClientOrderIdChanged>) {
    const auto& [a, b, c, d] = x;
    return std::tie(a, b, c, d);
  } else if constexpr (std::is_same_v<T, Deposit> || std::is_same_v<T, Withdraw>) {
    const auto& [a, b, c, d] = x;
    return std::tie(a, b, c, d);
  } else if constexpr (std::is_same_v<T, SetMarketStatus> ||
                       std::is_same_v<T, MarketStatusChanged>) {
    const auto& [a, b] = x;
    return std::tie(a, b);
  } else if constexpr (std::is_same_v<T, OrderAccepted>) {
    const auto& [a, terms, c, d, e] = x;
    return std::tuple_cat(std::tie(a), Tie(terms), std::tie(c, d, e));
  } else if constexpr (std::is_same_v<T, Rejected>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, Trade>) {
    const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = x;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p);
  } else if constexpr (std::is_same_v<T, OrderRested>) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (std::is_same_v<T, OrderCanceled>) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (std::is_same_v<T, OrderExpired>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, OrderAmended>) {
    const auto& [a, b, c, d, e, f, g, h, i] = x;
    return std::tie(a, b, c, d, e, f, g, h, i);
  } else if constexpr (std::is_same_v<T, Deposited> || std::is_same_v<T, Withdrawn>) {
    const auto& [a, b, c, d, e] = x;
    return std::tie(a, b, c, d, e);
  } else if constexpr (std::is_same_v<T, ImageOrder>) {
    const auto& [a, terms, c, d, e, f, g] = x;
    return std::tuple_cat(std::tie(a), Tie(terms), std::tie(c, d, e, f, g));
  } else if constexpr (std::is_same_v<T, ImageBalance>) {
    const auto& [a, b, c, d] = x;
    return std::tie(a, b, c, d);
  } else if constexpr (std::is_same_v<T, ImageClientId>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, ImageTransfer>) {
    const auto& [a, b] = x;
    return std::tie(a, b);
  } else if constexpr (std::is_same_v<T, ImageAssetTotals>) {
    const auto& [a] = x;
    return std::tie(a);
  } else if constexpr (std::is_same_v<T, TransferOut>) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (std::is_same_v<T, ResolveTransfer>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, TransferHeld>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, TransferCompleted> ||
                       std::is_same_v<T, TransferRefunded>) {
    const auto& [a, b, c, d, e] = x;
    return std::tie(a, b, c, d, e);
  } else if constexpr (std::is_same_v<T, PendingTransfer>) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else {
    static_assert(sizeof(T) == 0, "no field list for this type");
  }
}

template <class T>
bool VecEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const T& x, const T& y) { return Tie(x) == Tie(y); });
}

bool Equal(const Command& a, const Command& b) {
  if (a.timestamp_ns != b.timestamp_ns || a.body.index() != b.body.index()) return false;
  return std::visit(
      [&b](const auto& x) { return Tie(x) == Tie(std::get<std::decay_t<decltype(x)>>(b.body)); },
      a.body);
}

bool Equal(const Event& a, const Event& b) {
  if (a.seq != b.seq || a.timestamp_ns != b.timestamp_ns || a.body.index() != b.body.index()) {
    return false;
  }
  return std::visit(
      [&b](const auto& x) { return Tie(x) == Tie(std::get<std::decay_t<decltype(x)>>(b.body)); },
      a.body);
}

bool Equal(const EngineImage& a, const EngineImage& b) {
  const auto& [hash, seq, trade, status, totals, balances, orders, client_ids, transfers, pending] =
      a;
  return hash == b.config_hash && seq == b.last_sequence && trade == b.next_trade_id &&
         status == b.market_status && VecEqual(totals, b.asset_totals) &&
         VecEqual(balances, b.balances) && VecEqual(orders, b.orders) &&
         VecEqual(client_ids, b.recent_client_ids) && VecEqual(transfers, b.transfers) &&
         VecEqual(pending, b.pending_transfers);
}

// ---------------------------------------------------------------------------
// Byte helpers
// ---------------------------------------------------------------------------

std::string Hex(std::span<const std::byte> b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::byte x : b) {
    const auto v = std::to_integer<unsigned>(x);
    s += kDigits[v >> 4];
    s += kDigits[v & 0xf];
  }
  return s;
}

std::vector<std::byte> FromHex(std::string_view hex) {
  std::vector<std::byte> out;
  auto nibble = [](char c) -> unsigned {
    return c <= '9' ? static_cast<unsigned>(c - '0') : static_cast<unsigned>(c - 'a' + 10);
  };
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
}

void PutLe64(std::vector<std::byte>* v, std::size_t at, uint64_t x) {
  for (std::size_t i = 0; i < 8; ++i) (*v)[at + i] = static_cast<std::byte>(x >> (8 * i));
}

// Rewrites an image's trailing checksum after a deliberate edit, so that the
// structural checks behind it are reached.
void Reseal(std::vector<std::byte>* image) {
  const std::size_t body = image->size() - 8;
  PutLe64(image, body, XXH3_64bits(image->data(), body));
}

// ---------------------------------------------------------------------------
// Samples: for every type, a "max" sample (every field non-default, int64
// extremes, full-length strings, the highest enum values) and a "min" sample
// (the other extremes, one-character strings, the lowest enum values).
// ---------------------------------------------------------------------------

Command MakeCommand(CommandType type, bool max) {
  Command c;
  c.timestamp_ns = max ? kI64Min : kI64Max;
  const auto coid = ClientOrderId::From(max ? kId36 : "x");
  const auto ref = TransferRef::From(max ? kRef64 : "r");
  switch (type) {
    case CommandType::kPlaceOrder:
      c.body = PlaceOrder{AccountId{max ? kU32Max : 1},
                          MarketId{max ? kU16Max : uint16_t{2}},
                          max ? Side::kSell : Side::kBuy,
                          max ? OrderType::kMarket : OrderType::kLimit,
                          max ? TimeInForce::kFok : TimeInForce::kGtc,
                          max ? StpMode::kExpireBoth : StpMode::kNone,
                          Price{max ? kI64Max : kI64Min},
                          Qty{max ? kI64Min : kI64Max},
                          Amount{max ? -1 : 1},
                          coid};
      break;
    case CommandType::kCancelOrder:
      c.body =
          CancelOrder{AccountId{max ? kU32Max - 1 : 3}, MarketId{max ? kU16Max : uint16_t{4}},
                      OrderId{max ? kU64Max : 5}, coid,
                      max ? CancelRestriction::kOnlyPartiallyFilled : CancelRestriction::kNone};
      break;
    case CommandType::kCancelAll:
      c.body = CancelAll{AccountId{max ? kU32Max : 6}, MarketId{max ? kU16Max : uint16_t{7}}};
      break;
    case CommandType::kAmendOrder:
      c.body = AmendOrder{AccountId{max ? kU32Max : 8},
                          MarketId{max ? kU16Max : uint16_t{9}},
                          OrderId{max ? kU64Max : 10},
                          coid,
                          Price{max ? kI64Max : kI64Min},
                          Qty{max ? kI64Min : kI64Max},
                          max,
                          ClientOrderId::From(max ? kId36 : "n")};
      break;
    case CommandType::kCancelReplace: {
      CancelReplace cr;
      cr.cancel =
          CancelOrder{AccountId{max ? kU32Max : 16}, MarketId{max ? kU16Max : uint16_t{17}},
                      OrderId{max ? kU64Max : 18}, coid,
                      max ? CancelRestriction::kOnlyPartiallyFilled : CancelRestriction::kOnlyNew};
      cr.place = PlaceOrder{AccountId{max ? kU32Max - 1 : 19},
                            MarketId{max ? uint16_t{kU16Max - 1} : uint16_t{20}},
                            max ? Side::kSell : Side::kBuy,
                            max ? OrderType::kMarket : OrderType::kLimitMaker,
                            max ? TimeInForce::kFok : TimeInForce::kIoc,
                            max ? StpMode::kExpireBoth : StpMode::kExpireMaker,
                            Price{max ? kI64Min : kI64Max},
                            Qty{max ? kI64Max : kI64Min},
                            Amount{max ? 21 : -21},
                            ClientOrderId::From(max ? kId36 : "p")};
      cr.mode = max ? CancelReplaceMode::kAllowFailure : CancelReplaceMode::kStopOnFailure;
      c.body = cr;
      break;
    }
    case CommandType::kDeposit:
      c.body = Deposit{AccountId{max ? kU32Max : 11}, AssetId{max ? kU16Max : uint16_t{12}},
                       Amount{max ? kI64Max : kI64Min}, ref};
      break;
    case CommandType::kWithdraw:
      c.body = Withdraw{AccountId{max ? kU32Max : 13}, AssetId{max ? kU16Max : uint16_t{14}},
                        Amount{max ? kI64Min : kI64Max}, ref};
      break;
    case CommandType::kSetMarketStatus:
      c.body = SetMarketStatus{MarketId{max ? kU16Max : uint16_t{15}},
                               max ? MarketStatus::kCancelOnly : MarketStatus::kHalted};
      break;
    case CommandType::kTransferOut:
      c.body = TransferOut{AccountId{max ? kU32Max : 22},
                           AssetId{max ? kU16Max : uint16_t{23}},
                           Amount{max ? kI64Max : kI64Min},
                           Amount{max ? kI64Min : kI64Max},
                           ref,
                           TransferAddress::From(max ? kAddress64 : "a")};
      break;
    case CommandType::kResolveTransfer:
      c.body = ResolveTransfer{TransferId{max ? kU64Max : 24}, max,
                               max ? RefundReason::kRefused : RefundReason::kVoided};
      break;
  }
  return c;
}

Event MakeEvent(EventType type, bool max) {
  Event e;
  e.seq = Sequence{max ? kU64Max : 1};
  e.timestamp_ns = max ? kI64Max : kI64Min;
  const auto coid = ClientOrderId::From(max ? kId36 : "y");
  const auto ref = TransferRef::From(max ? kRef64 : "s");
  const int64_t hi = max ? kI64Max : kI64Min;
  const int64_t lo = max ? kI64Min : kI64Max;
  switch (type) {
    case EventType::kOrderAccepted:
      e.body = OrderAccepted{OrderId{max ? kU64Max : 2},
                             AccountId{max ? kU32Max : 3},
                             MarketId{max ? kU16Max : uint16_t{4}},
                             max ? Side::kSell : Side::kBuy,
                             max ? OrderType::kMarket : OrderType::kLimitMaker,
                             max ? TimeInForce::kFok : TimeInForce::kIoc,
                             max ? StpMode::kExpireBoth : StpMode::kExpireTaker,
                             Price{hi},
                             Qty{lo},
                             Amount{max ? -5 : 5},
                             Amount{max ? 6 : -6},
                             coid};
      break;
    case EventType::kRejected:
      // The maxima of version 2 (kCancelReplace, kCancelRestricted), kept so
      // that FingerprintOfTheOlderSamplesIsUnchanged still compares with the
      // build before the transfers; kSites covers the new maxima.
      e.body = Rejected{max ? CommandType::kCancelReplace : CommandType::kCancelOrder,
                        max ? RejectReason::kCancelRestricted : RejectReason::kUnknownMarket,
                        AccountId{max ? kU32Max : 7},
                        MarketId{max ? kU16Max : uint16_t{8}},
                        OrderId{max ? kU64Max : 9},
                        max ? kU64Max - 1 : 10,
                        coid};
      break;
    case EventType::kTrade:
      e.body = Trade{TradeId{max ? kU64Max : 11},
                     MarketId{max ? kU16Max : uint16_t{12}},
                     max ? Side::kSell : Side::kBuy,
                     OrderId{max ? kU64Max - 1 : 13},
                     OrderId{max ? kU64Max - 2 : 14},
                     AccountId{max ? kU32Max : 15},
                     AccountId{max ? kU32Max - 1 : 16},
                     Price{hi},
                     Qty{lo},
                     Amount{max ? 17 : -17},
                     Amount{max ? -18 : 18},
                     Amount{max ? kI64Max - 1 : kI64Min + 1},
                     Amount{max ? kI64Min + 2 : kI64Max - 2},
                     Amount{max ? 19 : -19},
                     max,
                     !max};
      break;
    case EventType::kOrderRested:
      e.body = OrderRested{OrderId{max ? kU64Max : 20},
                           AccountId{max ? kU32Max : 24},
                           MarketId{max ? kU16Max : uint16_t{21}},
                           max ? Side::kSell : Side::kBuy,
                           Qty{hi},
                           Amount{lo}};
      break;
    case EventType::kOrderCanceled:
      e.body = OrderCanceled{OrderId{max ? kU64Max : 22},
                             AccountId{max ? kU32Max : 23},
                             MarketId{max ? kU16Max : uint16_t{24}},
                             max ? Side::kSell : Side::kBuy,
                             Qty{hi},
                             Amount{lo}};
      break;
    case EventType::kOrderExpired:
      e.body =
          OrderExpired{OrderId{max ? kU64Max : 25},
                       AccountId{max ? kU32Max : 26},
                       MarketId{max ? kU16Max : uint16_t{27}},
                       max ? Side::kSell : Side::kBuy,
                       max ? ExpireReason::kQuoteBudgetSpent : ExpireReason::kSelfTradePrevention,
                       Qty{hi},
                       Amount{lo}};
      break;
    case EventType::kOrderAmended:
      e.body = OrderAmended{OrderId{max ? kU64Max : 28},
                            AccountId{max ? kU32Max : 29},
                            MarketId{max ? kU16Max : uint16_t{30}},
                            max ? Side::kSell : Side::kBuy,
                            Price{hi},
                            Qty{lo},
                            Qty{max ? 31 : -31},
                            Amount{max ? -32 : 32},
                            max};
      break;
    case EventType::kDeposited:
      e.body = Deposited{TransferId{max ? kU64Max : 33}, AccountId{max ? kU32Max : 34},
                         AssetId{max ? kU16Max : uint16_t{35}}, Amount{hi}, ref};
      break;
    case EventType::kWithdrawn:
      e.body = Withdrawn{TransferId{max ? kU64Max : 36}, AccountId{max ? kU32Max : 37},
                         AssetId{max ? kU16Max : uint16_t{38}}, Amount{lo}, ref};
      break;
    case EventType::kMarketStatusChanged:
      e.body = MarketStatusChanged{MarketId{max ? kU16Max : uint16_t{39}},
                                   max ? MarketStatus::kCancelOnly : MarketStatus::kHalted};
      break;
    case EventType::kClientOrderIdChanged:
      e.body = ClientOrderIdChanged{OrderId{max ? kU64Max : 40}, AccountId{max ? kU32Max : 41},
                                    MarketId{max ? kU16Max : uint16_t{42}}, coid};
      break;
    case EventType::kTransferHeld:
      e.body = TransferHeld{TransferId{max ? kU64Max : 43},
                            AccountId{max ? kU32Max : 44},
                            AssetId{max ? kU16Max : uint16_t{45}},
                            Amount{hi},
                            Amount{lo},
                            ref,
                            TransferAddress::From(max ? kAddress64 : "b")};
      break;
    case EventType::kTransferCompleted:
      e.body = TransferCompleted{TransferId{max ? kU64Max : 46}, AccountId{max ? kU32Max : 47},
                                 AssetId{max ? kU16Max : uint16_t{48}}, Amount{hi}, Amount{lo}};
      break;
    case EventType::kTransferRefunded:
      e.body = TransferRefunded{TransferId{max ? kU64Max : 49}, AccountId{max ? kU32Max : 50},
                                AssetId{max ? kU16Max : uint16_t{51}}, Amount{lo},
                                max ? RefundReason::kRefused : RefundReason::kVoided};
      break;
  }
  return e;
}

constexpr std::size_t kCommandTypes = std::variant_size_v<CommandBody>;
constexpr std::size_t kEventTypes = std::variant_size_v<EventBody>;

// Local names: the codec (and its test) must not need engine's types.cc.
const char* const kCommandNames[kCommandTypes] = {
    "place_order", "cancel_order",      "cancel_all",     "amend_order",  "deposit",
    "withdraw",    "set_market_status", "cancel_replace", "transfer_out", "resolve_transfer",
};
const char* const kEventNames[kEventTypes] = {
    "order_accepted",
    "rejected",
    "trade",
    "order_rested",
    "order_canceled",
    "order_expired",
    "order_amended",
    "deposited",
    "withdrawn",
    "market_status_changed",
    "client_order_id_changed",
    "transfer_held",
    "transfer_completed",
    "transfer_refunded",
};
std::string Name(CommandType t) { return kCommandNames[Raw(t)]; }
std::string Name(EventType t) { return kEventNames[Raw(t)]; }

std::vector<Command> AllCommands() {
  std::vector<Command> v;
  for (std::size_t t = 0; t < kCommandTypes; ++t) {
    for (bool max : {true, false}) v.push_back(MakeCommand(static_cast<CommandType>(t), max));
  }
  return v;
}

std::vector<Event> AllEvents() {
  std::vector<Event> v;
  for (std::size_t t = 0; t < kEventTypes; ++t) {
    for (bool max : {true, false}) v.push_back(MakeEvent(static_cast<EventType>(t), max));
  }
  return v;
}

Key128 K(uint64_t lo, uint64_t hi) { return Key128{lo, hi}; }

EngineImage MakeImage() {
  EngineImage im;
  im.config_hash = 0x0123456789abcdefULL;
  im.last_sequence = Sequence{kU64Max - 7};
  im.next_trade_id = TradeId{424242};
  im.market_status = {MarketStatus::kTrading, MarketStatus::kHalted, MarketStatus::kCancelOnly};
  im.asset_totals = {{Amount{kI64Max}}, {Amount{kI64Min}}};
  im.balances = {{AccountId{1}, AssetId{0}, Amount{100}, Amount{kI64Max}},
                 {AccountId{kU32Max}, AssetId{kU16Max}, Amount{kI64Min}, Amount{-1}}};
  ImageOrder bid{OrderId{17},    AccountId{1},        MarketId{0},
                 Side::kBuy,     OrderType::kLimit,   TimeInForce::kGtc,
                 StpMode::kNone, Price{6'500'000},    Qty{30},
                 Qty{12},        Amount{780'000'000}, 1'700'000'000'000'000'000,
                 true,           K(0x1111, kU64Max)};
  ImageOrder ask{OrderId{kU64Max},
                 AccountId{kU32Max},
                 MarketId{kU16Max},
                 Side::kSell,
                 OrderType::kLimitMaker,
                 TimeInForce::kFok,
                 StpMode::kExpireBoth,
                 Price{kI64Max},
                 Qty{kI64Max},
                 Qty{kI64Min},
                 Amount{kI64Min},
                 kI64Min,
                 false,
                 K(0, 0)};
  im.orders = {bid, ask};
  im.recent_client_ids = {{AccountId{1}, K(1, 2), OrderId{3}},
                          {AccountId{kU32Max}, K(kU64Max, kU64Max), OrderId{kU64Max}}};
  im.transfers = {{K(0, 1), TransferId{9}}, {K(7, 0), TransferId{kU64Max}}};
  im.pending_transfers = {
      {TransferId{5}, AccountId{1}, AssetId{0}, Amount{100}, Amount{1}, TransferAddress::From("a")},
      {TransferId{kU64Max}, AccountId{kU32Max}, AssetId{kU16Max}, Amount{kI64Max}, Amount{kI64Min},
       TransferAddress::From(kAddress64)}};
  return im;
}

// The bytes a version-1 build wrote for `im` (which must hold no pending
// transfer): this build's encoding without the pending_transfers section,
// under version 1. Layouts of the six older sections did not change.
std::vector<std::byte> EncodeVersion1Image(const EngineImage& im) {
  EXPECT_TRUE(im.pending_transfers.empty());
  std::vector<std::byte> b = EncodeImage(im);
  // The pending_transfers count (u64 0) sits just before the checksum.
  b.erase(b.end() - 16, b.end() - 8);
  b[8] = std::byte{1};
  b[9] = std::byte{0};
  Reseal(&b);
  return b;
}

EngineImage WithoutPending(EngineImage im) {
  im.pending_transfers.clear();
  return im;
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

TEST(CodecCommand, EveryTypeRoundTrips) {
  const auto all = AllCommands();
  ASSERT_EQ(all.size(), 2 * kCommandTypes);
  for (const Command& c : all) {
    SCOPED_TRACE(Name(c.type()) + " " + std::to_string(c.timestamp_ns));
    const std::size_t n = EncodedSize(c);
    EXPECT_EQ(n, kCommandSize[c.body.index()]);
    EXPECT_EQ(n, EncodedSize(c.type()));
    EXPECT_LE(n, kMaxCommandSize);

    std::vector<std::byte> buf(n + 1, std::byte{0xAA});
    ASSERT_EQ(Encode(c, std::span(buf).first(n)), n);
    EXPECT_EQ(buf[n], std::byte{0xAA}) << "wrote past the record";
    EXPECT_EQ(std::to_integer<std::size_t>(buf[0]), c.body.index());
    EXPECT_EQ(Hex(EncodeToVector(c)), Hex(std::span(buf).first(n)));

    Command d;
    const DecodeResult r = Decode(buf, &d);  // one trailing byte: Decode leaves it alone
    ASSERT_EQ(r.error, DecodeError::kOk) << ToString(r.error);
    EXPECT_EQ(r.consumed, n);
    EXPECT_TRUE(Equal(c, d));
    EXPECT_EQ(Hex(EncodeToVector(d)), Hex(std::span(buf).first(n)));

    Command exact;
    EXPECT_EQ(DecodeExact(std::span(buf).first(n), &exact).error, DecodeError::kOk);
    EXPECT_TRUE(Equal(c, exact));
    EXPECT_EQ(DecodeExact(buf, &exact).error, DecodeError::kTrailingBytes);
  }
}

TEST(CodecEvent, EveryTypeRoundTrips) {
  const auto all = AllEvents();
  ASSERT_EQ(all.size(), 2 * kEventTypes);
  for (const Event& e : all) {
    SCOPED_TRACE(Name(e.type()) + " " + std::to_string(e.timestamp_ns));
    const std::size_t n = EncodedSize(e);
    EXPECT_EQ(n, kEventSize[e.body.index()]);
    EXPECT_EQ(n, EncodedSize(e.type()));
    EXPECT_LE(n, kMaxEventSize);

    std::vector<std::byte> buf(n + 1, std::byte{0xAA});
    ASSERT_EQ(Encode(e, std::span(buf).first(n)), n);
    EXPECT_EQ(buf[n], std::byte{0xAA}) << "wrote past the record";
    EXPECT_EQ(std::to_integer<std::size_t>(buf[0]), e.body.index());

    Event d;
    const DecodeResult r = Decode(buf, &d);
    ASSERT_EQ(r.error, DecodeError::kOk) << ToString(r.error);
    EXPECT_EQ(r.consumed, n);
    EXPECT_TRUE(Equal(e, d));
    EXPECT_EQ(Hex(EncodeToVector(d)), Hex(std::span(buf).first(n)));

    Event exact;
    EXPECT_EQ(DecodeExact(std::span(buf).first(n), &exact).error, DecodeError::kOk);
    EXPECT_TRUE(Equal(e, exact));
    EXPECT_EQ(DecodeExact(buf, &exact).error, DecodeError::kTrailingBytes);
  }
}

TEST(Codec, SizesAreTheDocumentedOnes) {
  // The older types keep their sizes (old journals hold them); the transfers
  // to other venues (segment format version 3) come after them.
  EXPECT_EQ(kCommandSize, (std::array<std::size_t, 10>{80, 61, 15, 114, 88, 88, 12, 133, 161, 19}));
  EXPECT_EQ(kEventSize, (std::array<std::size_t, 14>{104, 78, 110, 48, 48, 49, 65, 104, 104, 20, 68,
                                                     177, 47, 40}));
  EXPECT_EQ(kMaxCommandSize, 161u);
  EXPECT_EQ(kMaxEventSize, 177u);
  EXPECT_EQ(EncodedSize(CommandType::kTransferOut), 161u);
  EXPECT_EQ(EncodedSize(CommandType::kResolveTransfer), 19u);
  EXPECT_EQ(EncodedSize(EventType::kTransferHeld), 177u);
  EXPECT_EQ(EncodedSize(EventType::kTransferCompleted), 47u);
  EXPECT_EQ(EncodedSize(EventType::kTransferRefunded), 40u);
  EXPECT_EQ(EncodedSize(static_cast<CommandType>(10)), 0u);
  EXPECT_EQ(EncodedSize(static_cast<EventType>(14)), 0u);
}

TEST(Codec, StreamOfRecordsDecodesInOrder) {
  std::vector<std::byte> stream;
  const auto all = AllEvents();
  for (const Event& e : all) {
    const auto b = EncodeToVector(e);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  std::span<const std::byte> rest(stream);
  for (const Event& e : all) {
    Event d;
    const DecodeResult r = Decode(rest, &d);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(Equal(e, d));
    rest = rest.subspan(r.consumed);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(Codec, EncodeIntoShortBufferWritesNothing) {
  for (const Command& c : AllCommands()) {
    const std::size_t n = EncodedSize(c);
    std::vector<std::byte> buf(n - 1, std::byte{0x5A});
    EXPECT_EQ(Encode(c, buf), 0u);
    EXPECT_TRUE(
        std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0x5A}; }));
  }
  for (const Event& e : AllEvents()) {
    std::vector<std::byte> buf(EncodedSize(e) - 1, std::byte{0x5A});
    EXPECT_EQ(Encode(e, buf), 0u);
    EXPECT_TRUE(
        std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0x5A}; }));
  }
}

TEST(Codec, StringPaddingInMemoryIsNotWritten) {
  // A FixedString shortened by hand keeps stale bytes after len; they must not
  // reach the wire (the wire is canonical: zero padding).
  PlaceOrder p;
  ASSERT_TRUE(p.client_order_id.Assign("abcdef"));
  p.client_order_id.len = 2;
  const auto bytes = EncodeToVector(Command{1, p});
  EXPECT_EQ(bytes[35], std::byte{2});
  for (std::size_t i = 38; i < 72; ++i) EXPECT_EQ(bytes[i], std::byte{0}) << i;
  Command d;
  ASSERT_TRUE(Decode(bytes, &d).ok());
  EXPECT_EQ(std::get<PlaceOrder>(d.body).client_order_id.view(), "ab");
}

// ---------------------------------------------------------------------------
// Garbage
// ---------------------------------------------------------------------------

TEST(Codec, EveryTruncationIsTruncated) {
  for (const Command& c : AllCommands()) {
    const auto bytes = EncodeToVector(c);
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      Command untouched = MakeCommand(CommandType::kCancelAll, true);
      const DecodeResult r = Decode(std::span(bytes).first(len), &untouched);
      EXPECT_EQ(r.error, DecodeError::kTruncated) << Name(c.type()) << " len " << len;
      EXPECT_EQ(r.consumed, 0u);
      EXPECT_TRUE(Equal(untouched, MakeCommand(CommandType::kCancelAll, true)));
      EXPECT_EQ(DecodeExact(std::span(bytes).first(len), &untouched).error,
                DecodeError::kTruncated);
    }
  }
  for (const Event& e : AllEvents()) {
    const auto bytes = EncodeToVector(e);
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      Event d;
      const DecodeResult r = Decode(std::span(bytes).first(len), &d);
      EXPECT_EQ(r.error, DecodeError::kTruncated) << Name(e.type()) << " len " << len;
      EXPECT_EQ(r.consumed, 0u);
    }
  }
}

TEST(Codec, UnknownTypeIsRejected) {
  for (unsigned t : {10u, 11u, 100u, 255u}) {
    auto bytes = EncodeToVector(MakeCommand(CommandType::kPlaceOrder, true));
    bytes[0] = static_cast<std::byte>(t);
    Command c;
    EXPECT_EQ(Decode(bytes, &c).error, DecodeError::kUnknownType) << t;
    EXPECT_EQ(Decode(std::span(bytes).first(1), &c).error, DecodeError::kUnknownType) << t;
  }
  for (unsigned t : {14u, 15u, 200u, 255u}) {
    auto bytes = EncodeToVector(MakeEvent(EventType::kTrade, true));
    bytes[0] = static_cast<std::byte>(t);
    Event e;
    EXPECT_EQ(Decode(bytes, &e).error, DecodeError::kUnknownType) << t;
  }
}

enum class Kind { kEnum, kBool, kStrLen, kPad };

// One validated byte: its offset in the record, what it holds, and the largest
// valid value (enum maximum, 1 for bools, capacity for string lengths).
struct Site {
  bool event;
  uint8_t type;
  std::size_t offset;
  Kind kind;
  unsigned max;
  const char* what;
};

constexpr uint8_t kPo = Raw(CommandType::kPlaceOrder);
constexpr uint8_t kCo = Raw(CommandType::kCancelOrder);
constexpr uint8_t kAm = Raw(CommandType::kAmendOrder);
constexpr uint8_t kDe = Raw(CommandType::kDeposit);
constexpr uint8_t kWi = Raw(CommandType::kWithdraw);
constexpr uint8_t kSm = Raw(CommandType::kSetMarketStatus);
constexpr uint8_t kCr = Raw(CommandType::kCancelReplace);
constexpr uint8_t kTo = Raw(CommandType::kTransferOut);
constexpr uint8_t kRt = Raw(CommandType::kResolveTransfer);
constexpr uint8_t kTh = Raw(EventType::kTransferHeld);
constexpr uint8_t kTr = Raw(EventType::kTransferRefunded);

// Offsets as in docs/journal_format.md.
const Site kSites[] = {
    {false, kPo, 7, Kind::kEnum, 1, "PlaceOrder.side"},
    {false, kPo, 8, Kind::kEnum, 2, "PlaceOrder.type"},
    {false, kPo, 9, Kind::kEnum, 2, "PlaceOrder.tif"},
    {false, kPo, 10, Kind::kEnum, 3, "PlaceOrder.stp"},
    {false, kPo, 35, Kind::kStrLen, 36, "PlaceOrder.client_order_id.len"},
    {false, kPo, 37, Kind::kPad, 0, "PlaceOrder.client_order_id first pad"},
    {false, kPo, 71, Kind::kPad, 0, "PlaceOrder.client_order_id last pad"},
    {false, kCo, 15, Kind::kStrLen, 36, "CancelOrder.orig_client_order_id.len"},
    {false, kCo, 51, Kind::kPad, 0, "CancelOrder.orig_client_order_id last pad"},
    {false, kCo, 52, Kind::kEnum, 2, "CancelOrder.restriction"},
    {false, kAm, 15, Kind::kStrLen, 36, "AmendOrder.orig_client_order_id.len"},
    {false, kAm, 17, Kind::kPad, 0, "AmendOrder.orig_client_order_id first pad"},
    {false, kAm, 68, Kind::kBool, 1, "AmendOrder.keep_priority"},
    {false, kAm, 69, Kind::kStrLen, 36, "AmendOrder.new_client_order_id.len"},
    {false, kAm, 105, Kind::kPad, 0, "AmendOrder.new_client_order_id last pad"},
    {false, kCr, 15, Kind::kStrLen, 36, "CancelReplace.cancel.orig_client_order_id.len"},
    {false, kCr, 52, Kind::kEnum, 2, "CancelReplace.cancel.restriction"},
    {false, kCr, 59, Kind::kEnum, 1, "CancelReplace.place.side"},
    {false, kCr, 60, Kind::kEnum, 2, "CancelReplace.place.type"},
    {false, kCr, 61, Kind::kEnum, 2, "CancelReplace.place.tif"},
    {false, kCr, 62, Kind::kEnum, 3, "CancelReplace.place.stp"},
    {false, kCr, 87, Kind::kStrLen, 36, "CancelReplace.place.client_order_id.len"},
    {false, kCr, 123, Kind::kPad, 0, "CancelReplace.place.client_order_id last pad"},
    {false, kCr, 124, Kind::kEnum, 1, "CancelReplace.mode"},
    {false, kDe, 15, Kind::kStrLen, 64, "Deposit.ref.len"},
    {false, kDe, 79, Kind::kPad, 0, "Deposit.ref last pad"},
    {false, kWi, 15, Kind::kStrLen, 64, "Withdraw.ref.len"},
    {false, kWi, 17, Kind::kPad, 0, "Withdraw.ref first pad"},
    {false, kSm, 3, Kind::kEnum, 2, "SetMarketStatus.status"},
    {false, kTo, 23, Kind::kStrLen, 64, "TransferOut.ref.len"},
    {false, kTo, 87, Kind::kPad, 0, "TransferOut.ref last pad"},
    {false, kTo, 88, Kind::kStrLen, 64, "TransferOut.address.len"},
    {false, kTo, 90, Kind::kPad, 0, "TransferOut.address first pad"},
    {false, kTo, 152, Kind::kPad, 0, "TransferOut.address last pad"},
    {false, kRt, 9, Kind::kBool, 1, "ResolveTransfer.completed"},
    {false, kRt, 10, Kind::kEnum, 4, "ResolveTransfer.reason"},
    {true, 0, 31, Kind::kEnum, 1, "OrderAccepted.side"},
    {true, 0, 32, Kind::kEnum, 2, "OrderAccepted.type"},
    {true, 0, 33, Kind::kEnum, 2, "OrderAccepted.tif"},
    {true, 0, 34, Kind::kEnum, 3, "OrderAccepted.stp"},
    {true, 0, 67, Kind::kStrLen, 36, "OrderAccepted.client_order_id.len"},
    {true, 0, 103, Kind::kPad, 0, "OrderAccepted.client_order_id last pad"},
    {true, 1, 17, Kind::kEnum, 9, "Rejected.command"},
    {true, 1, 18, Kind::kEnum, 22, "Rejected.reason"},
    {true, 1, 41, Kind::kStrLen, 36, "Rejected.client_order_id.len"},
    {true, 1, 43, Kind::kPad, 0, "Rejected.client_order_id first pad"},
    {true, 2, 27, Kind::kEnum, 1, "Trade.taker_side"},
    {true, 2, 108, Kind::kBool, 1, "Trade.maker_filled"},
    {true, 2, 109, Kind::kBool, 1, "Trade.taker_filled"},
    {true, 4, 31, Kind::kEnum, 1, "OrderCanceled.side"},
    {true, 5, 31, Kind::kEnum, 1, "OrderExpired.side"},
    {true, 5, 32, Kind::kEnum, 4, "OrderExpired.reason"},
    {true, 6, 31, Kind::kEnum, 1, "OrderAmended.side"},
    {true, 6, 64, Kind::kBool, 1, "OrderAmended.keeps_priority"},
    {true, 7, 39, Kind::kStrLen, 64, "Deposited.ref.len"},
    {true, 7, 103, Kind::kPad, 0, "Deposited.ref last pad"},
    {true, 8, 39, Kind::kStrLen, 64, "Withdrawn.ref.len"},
    {true, 8, 41, Kind::kPad, 0, "Withdrawn.ref first pad"},
    {true, 9, 19, Kind::kEnum, 2, "MarketStatusChanged.status"},
    {true, 10, 31, Kind::kStrLen, 36, "ClientOrderIdChanged.client_order_id.len"},
    {true, 10, 67, Kind::kPad, 0, "ClientOrderIdChanged.client_order_id last pad"},
    {true, kTh, 47, Kind::kStrLen, 64, "TransferHeld.ref.len"},
    {true, kTh, 111, Kind::kPad, 0, "TransferHeld.ref last pad"},
    {true, kTh, 112, Kind::kStrLen, 64, "TransferHeld.address.len"},
    {true, kTh, 114, Kind::kPad, 0, "TransferHeld.address first pad"},
    {true, kTh, 176, Kind::kPad, 0, "TransferHeld.address last pad"},
    {true, kTr, 39, Kind::kEnum, 4, "TransferRefunded.reason"},
};

// Decodes `bytes` as the site's kind of record.
DecodeError DecodeAs(bool event, std::span<const std::byte> bytes) {
  if (event) {
    Event e;
    return Decode(bytes, &e).error;
  }
  Command c;
  return Decode(bytes, &c).error;
}

TEST(Codec, EveryValidatedByteIsChecked) {
  for (const Site& s : kSites) {
    SCOPED_TRACE(s.what);
    // The "min" samples carry one-character strings, so padding follows them.
    const auto good = s.event
                          ? EncodeToVector(MakeEvent(static_cast<EventType>(s.type), false))
                          : EncodeToVector(MakeCommand(static_cast<CommandType>(s.type), false));
    ASSERT_LT(s.offset, good.size());
    ASSERT_EQ(DecodeAs(s.event, good), DecodeError::kOk);
    auto with = [&](unsigned v) {
      auto b = good;
      b[s.offset] = static_cast<std::byte>(v);
      return DecodeAs(s.event, b);
    };
    switch (s.kind) {
      case Kind::kEnum:
        for (unsigned v = 0; v <= s.max; ++v) EXPECT_EQ(with(v), DecodeError::kOk) << v;
        EXPECT_EQ(with(s.max + 1), DecodeError::kBadEnum);
        EXPECT_EQ(with(255), DecodeError::kBadEnum);
        break;
      case Kind::kBool:
        EXPECT_EQ(with(0), DecodeError::kOk);
        EXPECT_EQ(with(1), DecodeError::kOk);
        EXPECT_EQ(with(2), DecodeError::kBadBool);
        EXPECT_EQ(with(255), DecodeError::kBadBool);
        break;
      case Kind::kStrLen:
        ASSERT_EQ(std::to_integer<unsigned>(good[s.offset]), 1u) << "not a length byte";
        EXPECT_EQ(with(0), DecodeError::kBadString);  // the one content byte becomes padding
        EXPECT_EQ(with(s.max), DecodeError::kOk);     // the zero padding becomes content
        EXPECT_EQ(with(s.max + 1), DecodeError::kBadString);
        EXPECT_EQ(with(255), DecodeError::kBadString);
        break;
      case Kind::kPad:
        ASSERT_EQ(good[s.offset], std::byte{0}) << "not a padding byte";
        EXPECT_EQ(with(1), DecodeError::kBadString);
        EXPECT_EQ(with(0x80), DecodeError::kBadString);
        break;
    }
  }
}

TEST(Codec, DecodeErrorNames) {
  EXPECT_EQ(ToString(DecodeError::kOk), "ok");
  EXPECT_EQ(ToString(DecodeError::kTruncated), "truncated");
  EXPECT_EQ(ToString(DecodeError::kBadEnum), "enum value out of range");
  EXPECT_EQ(ToString(static_cast<DecodeError>(200)), "unknown decode error");
}

// ---------------------------------------------------------------------------
// Golden bytes: the format must not change silently. If one of these fails,
// the wire format changed: update docs/journal_format.md and think about old
// journals before updating the constant.
// ---------------------------------------------------------------------------

TEST(CodecGolden, PlaceOrder) {
  PlaceOrder p;
  p.account = AccountId{0x01020304};
  p.market = MarketId{0x0506};
  p.side = Side::kSell;
  p.type = OrderType::kLimit;
  p.tif = TimeInForce::kIoc;
  p.stp = StpMode::kExpireBoth;
  p.price = Price{0x1112131415161718};
  p.qty = Qty{0x2122232425262728};
  p.quote_qty = Amount{-2};
  ASSERT_TRUE(p.client_order_id.Assign("abc"));
  const Command c{0x3132333435363738, p};
  const std::string golden =
      "00"  // type
      "04030201"
      "0605"
      "01"
      "00"
      "01"
      "03"  // ids, enums
      "1817161514131211"
      "2827262524232221"
      "feffffffffffffff"  // price qty quote
      "03"
      "616263" +
      std::string(33 * 2, '0') +  // client_order_id
      "3837363534333231";         // timestamp
  EXPECT_EQ(Hex(EncodeToVector(c)), golden);
  Command d;
  ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok());
  EXPECT_TRUE(Equal(c, d));
}

TEST(CodecGolden, Trade) {
  Trade t;
  t.trade_id = TradeId{0x0102030405060708};
  t.market = MarketId{0x090a};
  t.taker_side = Side::kBuy;
  t.maker_order_id = OrderId{0x1112131415161718};
  t.taker_order_id = OrderId{0x2122232425262728};
  t.maker_account = AccountId{0x31323334};
  t.taker_account = AccountId{0x41424344};
  t.price = Price{0x5152535455565758};
  t.qty = Qty{0x6162636465666768};
  t.base_qty = Amount{1};
  t.notional = Amount{kI64Max};
  t.maker_fee = Amount{kI64Min};
  t.taker_fee = Amount{-1};
  t.taker_released = Amount{0x7172737475767778};
  t.maker_filled = true;
  t.taker_filled = false;
  const Event e{Sequence{0xa1a2a3a4a5a6a7a8}, 0x0b0c0d0e0f101112, t};
  const std::string golden =
      "02"  // type
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b"  // seq, timestamp
      "0807060504030201"
      "0a09"
      "00"  // trade_id market taker_side
      "1817161514131211"
      "2827262524232221"  // maker / taker order
      "34333231"
      "44434241"  // maker / taker account
      "5857565554535251"
      "6867666564636261"  // price qty
      "0100000000000000"
      "ffffffffffffff7f"
      "0000000000000080"  // base notional maker_fee
      "ffffffffffffffff"
      "7877767574737271"  // taker_fee taker_released
      "01"
      "00";  // maker/taker filled
  EXPECT_EQ(Hex(EncodeToVector(e)), golden);
  Event d;
  ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok());
  EXPECT_TRUE(Equal(e, d));
}

TEST(CodecGolden, TransferOut) {
  TransferOut t;
  t.account = AccountId{0x01020304};
  t.asset = AssetId{0x0506};
  t.amount = Amount{0x1112131415161718};
  t.fee = Amount{0x21};
  ASSERT_TRUE(t.ref.Assign("ab"));
  ASSERT_TRUE(t.address.Assign("xyz"));
  const Command c{0x3132333435363738, t};
  const std::string golden =
      "08"  // type
      "04030201"
      "0605"  // account asset
      "1817161514131211"
      "2100000000000000"  // amount fee
      "02"
      "6162" +
      std::string(62 * 2, '0') +  // ref
      "03"
      "78797a" +
      std::string(61 * 2, '0') +  // address
      "3837363534333231";         // timestamp
  EXPECT_EQ(Hex(EncodeToVector(c)), golden);
  Command d;
  ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok());
  EXPECT_TRUE(Equal(c, d));
}

TEST(CodecGolden, ResolveTransfer) {
  const Command c{0x3132333435363738, ResolveTransfer{TransferId{0x0102030405060708}, false,
                                                      RefundReason::kAccountUnavailable}};
  const std::string golden =
      "09"                // type
      "0807060504030201"  // transfer_id
      "00"
      "03"                 // completed reason
      "3837363534333231";  // timestamp
  EXPECT_EQ(Hex(EncodeToVector(c)), golden);
  Command d;
  ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok());
  EXPECT_TRUE(Equal(c, d));
}

TEST(CodecGolden, TransferEvents) {
  TransferHeld h;
  h.transfer_id = TransferId{0x0102030405060708};
  h.account = AccountId{0x11121314};
  h.asset = AssetId{0x2122};
  h.amount = Amount{0x31};
  h.fee = Amount{-1};
  ASSERT_TRUE(h.ref.Assign("r"));
  ASSERT_TRUE(h.address.Assign("ad"));
  const Sequence seq{0xa1a2a3a4a5a6a7a8};
  const int64_t ts = 0x0b0c0d0e0f101112;
  const std::string head =
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b";  // seq, timestamp
  const std::string golden_held = "0b" + head +
                                  "0807060504030201"
                                  "14131211"
                                  "2221"  // id account asset
                                  "3100000000000000"
                                  "ffffffffffffffff"  // amount fee
                                  "01"
                                  "72" +
                                  std::string(63 * 2, '0') +  // ref
                                  "02"
                                  "6164" +
                                  std::string(62 * 2, '0');  // address
  const std::string golden_completed = "0c" + head +
                                       "0807060504030201"
                                       "14131211"
                                       "2221"
                                       "3100000000000000"
                                       "ffffffffffffffff";
  const std::string golden_refunded = "0d" + head +
                                      "0807060504030201"
                                      "14131211"
                                      "2221"
                                      "3100000000000000"
                                      "04";  // kRefused
  const Event held{seq, ts, h};
  const Event completed{seq, ts,
                        TransferCompleted{h.transfer_id, h.account, h.asset, h.amount, h.fee}};
  const Event refunded{
      seq, ts,
      TransferRefunded{h.transfer_id, h.account, h.asset, h.amount, RefundReason::kRefused}};
  for (const auto& [e, golden] :
       {std::pair{held, golden_held}, std::pair{completed, golden_completed},
        std::pair{refunded, golden_refunded}}) {
    EXPECT_EQ(Hex(EncodeToVector(e)), golden);
    Event d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(e, d)) << golden;
  }
}

// One number over every sample of the record types that existed before the
// transfers to other venues, and over the version-1 image of MakeImage: the
// value the build before them computed. Their layouts did not move.
TEST(CodecGolden, FingerprintOfTheOlderSamplesIsUnchanged) {
  std::vector<std::byte> all;
  for (const Command& c : AllCommands()) {
    if (Raw(c.type()) > Raw(CommandType::kCancelReplace)) continue;
    const auto b = EncodeToVector(c);
    all.insert(all.end(), b.begin(), b.end());
  }
  for (const Event& e : AllEvents()) {
    if (Raw(e.type()) > Raw(EventType::kClientOrderIdChanged)) continue;
    const auto b = EncodeToVector(e);
    all.insert(all.end(), b.begin(), b.end());
  }
  const auto image = EncodeVersion1Image(WithoutPending(MakeImage()));
  all.insert(all.end(), image.begin(), image.end());
  EXPECT_EQ(all.size(), 2 * (80 + 61 + 15 + 114 + 88 + 88 + 12 + 133) +
                            2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68) +
                            image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x8dc7267e26bb5d73ULL)
      << std::hex << "0x" << XXH3_64bits(all.data(), all.size());
}

// One number over every sample of every type: catches a layout change in the
// record types the goldens above don't spell out.
TEST(CodecGolden, FingerprintOfAllSamples) {
  std::vector<std::byte> all;
  for (const Command& c : AllCommands()) {
    const auto b = EncodeToVector(c);
    all.insert(all.end(), b.begin(), b.end());
  }
  for (const Event& e : AllEvents()) {
    const auto b = EncodeToVector(e);
    all.insert(all.end(), b.begin(), b.end());
  }
  const auto image = EncodeImage(MakeImage());
  all.insert(all.end(), image.begin(), image.end());
  EXPECT_EQ(all.size(),
            2 * (80 + 61 + 15 + 114 + 88 + 88 + 12 + 133 + 161 + 19) +
                2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68 + 177 + 47 + 40) +
                image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x881aa8f37a088e16ULL)
      << std::hex << "0x" << XXH3_64bits(all.data(), all.size());
}

// ---------------------------------------------------------------------------
// Snapshot images
// ---------------------------------------------------------------------------

// Offsets of the image built by MakeImage (see journal_format.md).
constexpr std::size_t kHeader = 34;
constexpr std::size_t kMarketCountAt = kHeader;                      // u32, 3 statuses follow
constexpr std::size_t kAssetCountAt = kMarketCountAt + 4 + 3;        // u32, 2 x 8 follow
constexpr std::size_t kBalanceCountAt = kAssetCountAt + 4 + 16;      // u64, 2 x 22 follow
constexpr std::size_t kOrderCountAt = kBalanceCountAt + 8 + 44;      // u64, 2 x 75 follow
constexpr std::size_t kClientIdCountAt = kOrderCountAt + 8 + 150;    // u64, 2 x 28 follow
constexpr std::size_t kTransferCountAt = kClientIdCountAt + 8 + 56;  // u64, 2 x 24 follow
constexpr std::size_t kPendingCountAt = kTransferCountAt + 8 + 48;   // u64, 2 x 95 follow
constexpr std::size_t kImageSize = kPendingCountAt + 8 + 190 + 8;

TEST(CodecImage, RoundTrips) {
  const EngineImage im = MakeImage();
  const auto bytes = EncodeImage(im);
  ASSERT_EQ(bytes.size(), kImageSize);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8), "MBSNAP01");
  auto decoded = DecodeImage(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(Equal(im, *decoded));
  EXPECT_EQ(Hex(EncodeImage(*decoded)), Hex(bytes));
}

TEST(CodecImage, EmptyImageRoundTrips) {
  const EngineImage im;
  const auto bytes = EncodeImage(im);
  EXPECT_EQ(bytes.size(), kMinImageSize + 8);  // a version-2 image: the pending_transfers count
  auto decoded = DecodeImage(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(Equal(im, *decoded));
}

TEST(CodecImage, EveryFlippedByteIsCaught) {
  const auto bytes = EncodeImage(MakeImage());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned bit : {0u, 7u}) {
      auto b = bytes;
      b[i] ^= static_cast<std::byte>(1u << bit);
      auto r = DecodeImage(b);
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
      if (i >= 8) {
        EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos)
            << r.status().message();
      }
    }
  }
}

TEST(CodecImage, EveryTruncationIsCaught) {
  const auto bytes = EncodeImage(MakeImage());
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    auto r = DecodeImage(std::span(bytes).first(len));
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
  // Resealed after truncation, so the structural checks see it.
  for (std::size_t len = kMinImageSize; len < bytes.size(); ++len) {
    std::vector<std::byte> b(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    Reseal(&b);
    auto r = DecodeImage(b);
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
}

TEST(CodecImage, BadMagicAndVersion) {
  auto b = EncodeImage(MakeImage());
  b[0] = std::byte{'X'};
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos) << r.status().message();

  b = EncodeImage(MakeImage());
  EXPECT_EQ(b[8], std::byte{2});  // this build writes version 2
  EXPECT_EQ(b[9], std::byte{0});
  for (uint16_t version : {uint16_t{0}, uint16_t{3}, uint16_t{0x0102}}) {
    SCOPED_TRACE(version);
    b = EncodeImage(MakeImage());
    b[8] = static_cast<std::byte>(version & 0xff);
    b[9] = static_cast<std::byte>(version >> 8);
    Reseal(&b);
    r = DecodeImage(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find("format version " + std::to_string(version)),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("reads 1 to 2"), std::string::npos) << r.status().message();
  }
}

// A version-1 image (written before the transfers to other venues) ends after
// the transfers section: it still decodes, with no pending transfer.
TEST(CodecImage, Version1ImageDecodesWithNoPendingTransfers) {
  const EngineImage im = WithoutPending(MakeImage());
  const auto v1 = EncodeVersion1Image(im);
  ASSERT_EQ(v1.size(), kImageSize - 8 - 190);
  auto decoded = DecodeImage(v1);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->pending_transfers.empty());
  EXPECT_TRUE(Equal(im, *decoded));
  // Written again, it is a version-2 image of the same state.
  const auto v2 = EncodeImage(*decoded);
  EXPECT_EQ(v2[8], std::byte{2});
  EXPECT_EQ(v2.size(), v1.size() + 8);
  auto again = DecodeImage(v2);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(Equal(im, *again));

  // The empty image too.
  const auto empty_v1 = EncodeVersion1Image(EngineImage{});
  EXPECT_EQ(empty_v1.size(), kMinImageSize);
  auto empty = DecodeImage(empty_v1);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(Equal(EngineImage{}, *empty));

  // Version 1 with a pending_transfers section: bytes a version-1 image
  // cannot hold.
  auto b = EncodeImage(im);
  b[8] = std::byte{1};
  Reseal(&b);
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unexpected bytes"), std::string::npos)
      << r.status().message();
  // Version 2 without one: truncated before its count.
  b = v1;
  b[8] = std::byte{2};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pending_transfers count"), std::string::npos)
      << r.status().message();
}

// The pending_transfers section: a u64 count, then 95-byte records (id u64,
// account u32, asset u16, amount i64, fee i64, address len u8 + 64 bytes).
TEST(CodecImage, PendingTransfersSectionLayout) {
  const EngineImage im = MakeImage();
  const auto b = EncodeImage(im);
  ASSERT_EQ(b.size(), kImageSize);
  std::vector<std::byte> count(b.begin() + kPendingCountAt, b.begin() + kPendingCountAt + 8);
  EXPECT_EQ(Hex(count), "0200000000000000");
  const std::size_t first = kPendingCountAt + 8;
  std::vector<std::byte> rec(b.begin() + static_cast<std::ptrdiff_t>(first),
                             b.begin() + static_cast<std::ptrdiff_t>(first + 95));
  EXPECT_EQ(Hex(rec),
            "0500000000000000"
            "01000000"
            "0000"
            "6400000000000000"
            "0100000000000000"
            "01"
            "61" +
                std::string(63 * 2, '0'));
  auto decoded = DecodeImage(b);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->pending_transfers.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->pending_transfers, im.pending_transfers));
  EXPECT_EQ(decoded->pending_transfers[1].address.view(), kAddress64);
}

// Decodes with the allocation probe on; returns the largest single allocation.
std::size_t LargestAllocationDuring(const std::vector<std::byte>& b, Status* status) {
  mb::testing::g_largest_allocation.store(0);
  mb::testing::g_track_largest.store(true);
  auto r = DecodeImage(b);
  mb::testing::g_track_largest.store(false);
  *status = r.status();
  return mb::testing::g_largest_allocation.load();
}

TEST(CodecImage, HugeCountIsRefusedWithoutAllocating) {
  const auto good = EncodeImage(MakeImage());
  struct Case {
    std::size_t at;
    bool u32;
    uint64_t count;
    const char* section;
  };
  const Case cases[] = {
      {kBalanceCountAt, false, kU64Max, "balances count"},
      {kOrderCountAt, false, uint64_t{1} << 60, "orders count"},
      // Just above what the bytes left can hold: 150 + 64 + 56 + 198 bytes
      // follow the orders count (7 x 75 = 525), 48 + 198 the transfers count
      // (11 x 24 = 264), 190 the pending_transfers count (3 x 95 = 285).
      {kOrderCountAt, false, 7, "orders count"},
      {kClientIdCountAt, false, 1'000'000'000, "recent_client_ids count"},
      {kTransferCountAt, false, 11, "transfers count"},
      {kPendingCountAt, false, 3, "pending_transfers count"},
      {kPendingCountAt, false, kU64Max, "pending_transfers count"},
      {kAssetCountAt, true, kU32Max, "asset_totals count"},
      {kMarketCountAt, true, 70'000, "market_status count"},  // above the u16 id space
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.section);
    auto b = good;
    if (c.u32) {
      for (std::size_t i = 0; i < 4; ++i) b[c.at + i] = static_cast<std::byte>(c.count >> (8 * i));
    } else {
      PutLe64(&b, c.at, c.count);
    }
    Reseal(&b);
    Status status;
    const std::size_t largest = LargestAllocationDuring(b, &status);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kCorruption);
    EXPECT_NE(status.message().find(c.section), std::string::npos) << status.message();
    EXPECT_LT(largest, 4096u) << "allocated before checking the count";
  }
}

TEST(CodecImage, BadFieldInsideARecordIsNamed) {
  auto b = EncodeImage(MakeImage());
  // Second order's side byte: count, one order (75), then id 8, account 4, market 2.
  const std::size_t side = kOrderCountAt + 8 + 75 + 14;
  ASSERT_EQ(b[side], std::byte{1});
  b[side] = std::byte{2};
  Reseal(&b);
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("orders[1]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("enum"), std::string::npos) << r.status().message();

  b = EncodeImage(MakeImage());
  b[kMarketCountAt + 4 + 2] = std::byte{3};  // third market status
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("market_status[2]"), std::string::npos)
      << r.status().message();

  b = EncodeImage(MakeImage());
  const std::size_t has_client_id = kOrderCountAt + 8 + 58;  // first order
  ASSERT_EQ(b[has_client_id], std::byte{1});
  b[has_client_id] = std::byte{2};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("orders[0]"), std::string::npos) << r.status().message();

  // The second pending transfer's address length, above its capacity.
  b = EncodeImage(MakeImage());
  const std::size_t address_len = kPendingCountAt + 8 + 95 + 30;
  ASSERT_EQ(b[address_len], std::byte{64});
  b[address_len] = std::byte{65};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pending_transfers[1]"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("string"), std::string::npos) << r.status().message();
  // Its first padding byte, non-zero: the first record holds a one-byte address.
  b = EncodeImage(MakeImage());
  const std::size_t pad = kPendingCountAt + 8 + 30 + 2;
  ASSERT_EQ(b[pad], std::byte{0});
  b[pad] = std::byte{'z'};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pending_transfers[0]"), std::string::npos)
      << r.status().message();
}

TEST(CodecImage, TrailingBytesBeforeTheChecksumAreRefused) {
  auto b = EncodeImage(MakeImage());
  b.insert(b.end() - 8, std::byte{0});
  Reseal(&b);
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unexpected bytes"), std::string::npos)
      << r.status().message();
}

// ---------------------------------------------------------------------------
// Fuzz seed corpus. With MB_WRITE_FUZZ_CORPUS=<dir> this writes the seeds;
// otherwise it checks that the committed seeds still decode.
// ---------------------------------------------------------------------------

TEST(FuzzCorpus, SeedsDecode) {
  if (const char* dir = std::getenv("MB_WRITE_FUZZ_CORPUS")) {
    std::filesystem::create_directories(dir);
    auto write = [dir](const std::string& name, const std::vector<std::byte>& b) {
      std::ofstream f(std::filesystem::path(dir) / name, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    };
    for (std::size_t t = 0; t < kCommandTypes; ++t) {
      const auto type = static_cast<CommandType>(t);
      write("command_" + Name(type), EncodeToVector(MakeCommand(type, true)));
    }
    for (std::size_t t = 0; t < kEventTypes; ++t) {
      const auto type = static_cast<EventType>(t);
      write("event_" + Name(type), EncodeToVector(MakeEvent(type, true)));
    }
    write("image_small", EncodeImage(MakeImage()));
    write("image_empty", EncodeImage(EngineImage{}));
    write("image_v1_small", EncodeVersion1Image(WithoutPending(MakeImage())));
    return;
  }
  const std::filesystem::path dir = std::filesystem::path(MB_SOURCE_DIR) / "src/codec/fuzz_corpus";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(entry.path(), std::ios::binary);
    const std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(s.size());
    std::transform(s.begin(), s.end(), b.begin(),
                   [](char ch) { return static_cast<std::byte>(ch); });
    Command c;
    Event e;
    const bool ok = DecodeExact(b, &c).ok() || DecodeExact(b, &e).ok() || DecodeImage(b).ok();
    EXPECT_TRUE(ok) << entry.path() << " no longer decodes";
    ++seeds;
  }
  EXPECT_GT(seeds, 0);
  EXPECT_LT(seeds, 32);
}

}  // namespace
}  // namespace mb::codec
