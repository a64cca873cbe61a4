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
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr uint16_t kU16Max = std::numeric_limits<uint16_t>::max();

const char* const kId36 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const char* const kRef64 = "ref-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVW";
const char* const kAddress64 = "mbx:venue-b/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP";
const char* const kName64 = "operator-account-name-0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
const char* const kKey64 = "mbk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX";
const char* const kSecret64 = "hmac-secret-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP";
const char* const kSymbol32 = "SYMBOL0123456789ABCDEFGHIJKLMNOP";

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
    const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m] = x;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m);
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
  } else if constexpr (std::is_same_v<T, OrderArmed> || std::is_same_v<T, OrderTriggered>) {
    const auto& [a, b, c, d, e, f] = x;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (std::is_same_v<T, ImageStop>) {
    const auto& [order, b, c, d, e] = x;
    return std::tuple_cat(Tie(order), std::tie(b, c, d, e));
  } else if constexpr (std::is_same_v<T, IcebergAccepted>) {
    const auto& [a, b, c, d, e] = x;
    return std::tie(a, b, c, d, e);
  } else if constexpr (std::is_same_v<T, IcebergRefilled>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, ImageIceberg>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, ListOrder>) {
    const auto& [a, b, c, d, e, f, g, h, i] = x;
    return std::tie(a, b, c, d, e, f, g, h, i);
  } else if constexpr (std::is_same_v<T, PlaceOrderList>) {
    const auto& [a, b, c, d, e, orders] = x;
    return std::tuple_cat(std::tie(a, b, c, d, e), Tie(orders[0]), Tie(orders[1]), Tie(orders[2]));
  } else if constexpr (std::is_same_v<T, CancelOrderList>) {
    const auto& [a, b, c, d] = x;
    return std::tie(a, b, c, d);
  } else if constexpr (std::is_same_v<T, ListAccepted>) {
    const auto& [a, b, c, d, e, ids] = x;
    return std::tie(a, b, c, d, e, ids[0], ids[1], ids[2]);
  } else if constexpr (std::is_same_v<T, OrderPending>) {
    const auto& [a, b, terms, d, e, f, g] = x;
    return std::tuple_cat(std::tie(a, b), Tie(terms), std::tie(d, e, f, g));
  } else if constexpr (std::is_same_v<T, ListDone>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, ImageList>) {
    const auto& [a, b, c, d, e, f, ids] = x;
    return std::tie(a, b, c, d, e, f, ids[0], ids[1], ids[2]);
  } else if constexpr (std::is_same_v<T, AuthChange> || std::is_same_v<T, AuthChanged>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, ImageAccount>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, ImageApiKey>) {
    const auto& [a, b, c, d, e, f, g] = x;
    return std::tie(a, b, c, d, e, f, g);
  } else if constexpr (std::is_same_v<T, AddAsset>) {
    const auto& [a, b] = x;
    return std::tie(a, b);
  } else if constexpr (std::is_same_v<T, AssetAdded>) {
    const auto& [a, b, c] = x;
    return std::tie(a, b, c);
  } else if constexpr (std::is_same_v<T, AddMarket>) {
    const auto& [a, b, c, d, e, f, g, h, i, j, k, l] = x;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l);
  } else if constexpr (std::is_same_v<T, MarketAdded>) {
    const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m] = x;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m);
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
  const auto& [hash, seq, trade, status, totals, balances, orders, client_ids, transfers, pending,
               last_prices, stops, icebergs, lists, pending_orders, accounts, api_keys,
               added_assets, added_markets] = a;
  return hash == b.config_hash && seq == b.last_sequence && trade == b.next_trade_id &&
         status == b.market_status && VecEqual(totals, b.asset_totals) &&
         VecEqual(balances, b.balances) && VecEqual(orders, b.orders) &&
         VecEqual(client_ids, b.recent_client_ids) && VecEqual(transfers, b.transfers) &&
         VecEqual(pending, b.pending_transfers) && last_prices == b.last_prices &&
         VecEqual(stops, b.stops) && VecEqual(icebergs, b.icebergs) && VecEqual(lists, b.lists) &&
         VecEqual(pending_orders, b.pending) && VecEqual(accounts, b.accounts) &&
         VecEqual(api_keys, b.api_keys) && VecEqual(added_assets, b.added_assets) &&
         VecEqual(added_markets, b.added_markets);
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
// Records older than an enum value keep the maxima of their time (OrderType
// MARKET, RejectReason CANCEL_RESTRICTED, ExpireReason QUOTE_BUDGET_SPENT), so
// that the fingerprints of the older samples still compare with the builds
// before; kSites covers the newer maxima.
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
                          coid,
                          Price{max ? kI64Max - 1 : kI64Min + 1},
                          max ? kI32Max : kI32Min,
                          Qty{max ? 77 : -77}};
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
                            ClientOrderId::From(max ? kId36 : "p"),
                            Price{max ? kI64Min + 1 : kI64Max - 1},
                            max ? kI32Min : kI32Max,
                            Qty{max ? -78 : 78}};
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
    case CommandType::kPlaceOrderList: {
      PlaceOrderList l{AccountId{max ? kU32Max : 25}, MarketId{max ? kU16Max : uint16_t{26}},
                       max ? ListType::kOtoco : ListType::kOco,
                       max ? StpMode::kExpireBoth : StpMode::kNone, coid};
      const char* const one_char[3] = {"a", "b", "c"};
      for (int k = 0; k < 3; ++k) {
        l.orders[k] = ListOrder{max ? Side::kSell : Side::kBuy,
                                max ? OrderType::kTakeProfitLimit : OrderType::kLimit,
                                max ? TimeInForce::kFok : TimeInForce::kGtc,
                                max ? kI32Max - k : kI32Min + k,
                                Price{max ? kI64Max - k : kI64Min + k},
                                Qty{max ? kI64Min + k : kI64Max - k},
                                Price{max ? 27 + k : -27 - k},
                                Qty{max ? -30 - k : 30 + k},
                                ClientOrderId::From(max ? kId36 : one_char[k])};
      }
      c.body = l;
      break;
    }
    case CommandType::kCancelOrderList:
      c.body = CancelOrderList{AccountId{max ? kU32Max : 33},
                               MarketId{max ? kU16Max : uint16_t{34}}, max ? kU64Max : 35, coid};
      break;
    case CommandType::kChangeAuth:
      c.body = AuthChange{max ? AuthChangeKind::kRevokeKey : AuthChangeKind::kCreateAccount,
                          AccountId{max ? kU32Max : 36},
                          uint8_t{max ? uint8_t{0xff} : uint8_t{0}},
                          max,
                          max ? kI64Max : kI64Min,
                          AuthText::From(max ? kKey64 : "k"),
                          AuthText::From(max ? kSecret64 : "s")};
      break;
    case CommandType::kAddAsset:
      c.body = AddAsset{SymbolText::From(max ? kSymbol32 : "A"), max ? kI32Max : kI32Min};
      break;
    case CommandType::kAddMarket:
      c.body = AddMarket{SymbolText::From(max ? kSymbol32 : "M"),
                         AssetId{max ? kU16Max : uint16_t{37}},
                         AssetId{max ? uint16_t{kU16Max - 1} : uint16_t{38}},
                         max ? kI64Max : kI64Min,
                         max ? kI64Min : kI64Max,
                         Qty{max ? kI64Max - 1 : kI64Min + 1},
                         Qty{max ? kI64Min + 1 : kI64Max - 1},
                         Price{max ? 39 : -39},
                         Amount{max ? -40 : 40},
                         max ? kI32Max : kI32Min,
                         max ? kI32Min : kI32Max,
                         max ? MarketStatus::kCancelOnly : MarketStatus::kTrading};
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
      // that the older fingerprints still compare with the builds before the
      // transfers; kSites covers the newer maxima.
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
    case EventType::kOrderArmed:
      e.body = OrderArmed{OrderId{max ? kU64Max : 52},
                          AccountId{max ? kU32Max : 53},
                          MarketId{max ? kU16Max : uint16_t{54}},
                          max ? Side::kSell : Side::kBuy,
                          Price{hi},
                          max ? kI32Max : kI32Min};
      break;
    case EventType::kOrderTriggered:
      e.body = OrderTriggered{OrderId{max ? kU64Max : 55},
                              AccountId{max ? kU32Max : 56},
                              MarketId{max ? kU16Max : uint16_t{57}},
                              max ? Side::kSell : Side::kBuy,
                              Price{lo},
                              Amount{hi}};
      break;
    case EventType::kIcebergAccepted:
      e.body = IcebergAccepted{OrderId{max ? kU64Max : 58}, AccountId{max ? kU32Max : 59},
                               MarketId{max ? kU16Max : uint16_t{60}},
                               max ? Side::kSell : Side::kBuy, Qty{hi}};
      break;
    case EventType::kIcebergRefilled:
      e.body = IcebergRefilled{OrderId{max ? kU64Max : 61},
                               AccountId{max ? kU32Max : 62},
                               MarketId{max ? kU16Max : uint16_t{63}},
                               max ? Side::kSell : Side::kBuy,
                               Price{hi},
                               Qty{lo},
                               Qty{max ? 64 : -64}};
      break;
    case EventType::kListAccepted:
      e.body = ListAccepted{max ? kU64Max : 65,
                            AccountId{max ? kU32Max : 66},
                            MarketId{max ? kU16Max : uint16_t{67}},
                            max ? ListType::kOtoco : ListType::kOco,
                            coid,
                            {OrderId{max ? kU64Max : 68}, OrderId{max ? kU64Max - 1 : 69},
                             OrderId{max ? kU64Max - 2 : 0}}};
      break;
    case EventType::kOrderPending:
      e.body = OrderPending{
          OrderId{max ? kU64Max : 70},
          max ? kU64Max - 1 : 71,
          OrderTerms{AccountId{max ? kU32Max : 72}, MarketId{max ? kU16Max : uint16_t{73}},
                     max ? Side::kSell : Side::kBuy,
                     max ? OrderType::kTakeProfitLimit : OrderType::kLimit,
                     max ? TimeInForce::kFok : TimeInForce::kGtc,
                     max ? StpMode::kExpireBoth : StpMode::kNone, Price{hi}, Qty{lo}},
          Price{max ? 79 : -79},
          max ? kI32Min : kI32Max,
          Qty{max ? -80 : 80},
          coid};
      break;
    case EventType::kListDone:
      e.body = ListDone{max ? kU64Max : 74, AccountId{max ? kU32Max : 75},
                        MarketId{max ? kU16Max : uint16_t{76}}};
      break;
    case EventType::kAuthChanged:
      e.body = AuthChanged{max ? AuthChangeKind::kRevokeKey : AuthChangeKind::kCreateKey,
                           AccountId{max ? kU32Max : 77},
                           uint8_t{max ? uint8_t{0x80} : uint8_t{1}},
                           !max,
                           max ? kI64Min : kI64Max,
                           AuthText::From(max ? kKey64 : "j"),
                           AuthText::From(max ? kSecret64 : "t")};
      break;
    case EventType::kAssetAdded:
      e.body = AssetAdded{AssetId{max ? kU16Max : uint16_t{78}},
                          SymbolText::From(max ? kSymbol32 : "B"), max ? kI32Min : kI32Max};
      break;
    case EventType::kMarketAdded:
      e.body = MarketAdded{MarketId{max ? kU16Max : uint16_t{79}},
                           SymbolText::From(max ? kSymbol32 : "N"),
                           AssetId{max ? kU16Max : uint16_t{80}},
                           AssetId{max ? uint16_t{kU16Max - 1} : uint16_t{81}},
                           hi,
                           lo,
                           Qty{max ? 82 : -82},
                           Qty{lo},
                           Price{hi},
                           Amount{max ? -83 : 83},
                           max ? kI32Min : kI32Max,
                           max ? kI32Max : kI32Min,
                           max ? MarketStatus::kCancelOnly : MarketStatus::kHalted};
      break;
  }
  return e;
}

constexpr std::size_t kCommandTypes = std::variant_size_v<CommandBody>;
constexpr std::size_t kEventTypes = std::variant_size_v<EventBody>;

// Local names: the codec (and its test) must not need engine's types.cc.
const char* const kCommandNames[kCommandTypes] = {
    "place_order",      "cancel_order",      "cancel_all",     "amend_order",  "deposit",
    "withdraw",         "set_market_status", "cancel_replace", "transfer_out", "resolve_transfer",
    "place_order_list", "cancel_order_list", "change_auth",    "add_asset",    "add_market",
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
    "order_armed",
    "order_triggered",
    "iceberg_accepted",
    "iceberg_refilled",
    "list_accepted",
    "order_pending",
    "list_done",
    "auth_changed",
    "asset_added",
    "market_added",
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
  im.last_prices = {Price{6'550'123}, Price{0}, Price{kI64Max}};
  const ImageOrder stop_bid{OrderId{18},
                            AccountId{1},
                            MarketId{0},
                            Side::kBuy,
                            OrderType::kStopLossLimit,
                            TimeInForce::kGtc,
                            StpMode::kNone,
                            Price{6'600'000},
                            Qty{5},
                            Qty{5},
                            Amount{33'000'000},
                            1'700'000'000'000'000'001,
                            true,
                            K(0x2222, 3)};
  const ImageOrder stop_ask{OrderId{kU64Max},
                            AccountId{kU32Max},
                            MarketId{kU16Max},
                            Side::kSell,
                            OrderType::kTakeProfitLimit,
                            TimeInForce::kFok,
                            StpMode::kExpireBoth,
                            Price{kI64Max},
                            Qty{kI64Max},
                            Qty{kI64Min},
                            Amount{kI64Min},
                            kI64Min,
                            false,
                            K(0, 0)};
  im.stops = {{stop_bid, Price{6'550'000}, 0, false, Price{0}},
              {stop_ask, Price{kI64Min}, kI32Max, true, Price{kI64Max}}};
  im.icebergs = {{OrderId{17}, Qty{10}, Qty{8}}, {OrderId{kU64Max}, Qty{kI64Max}, Qty{kI64Min}}};
  const OrderId pending_id{40 + kListOrderStride};
  im.lists = {{40,
               AccountId{1},
               MarketId{0},
               ListType::kOto,
               true,
               K(0x3333, 4),
               {OrderId{40}, pending_id, OrderId{0}}},
              {kU64Max,
               AccountId{kU32Max},
               MarketId{kU16Max},
               ListType::kOtoco,
               false,
               K(0, 0),
               {OrderId{kU64Max}, OrderId{kU64Max - 1}, OrderId{kU64Max - 2}}}};
  im.pending = {
      {pending_id, 40,
       OrderTerms{AccountId{1}, MarketId{0}, Side::kSell, OrderType::kLimitMaker, TimeInForce::kGtc,
                  StpMode::kNone, Price{6'700'000}, Qty{5}},
       Price{0}, 0, Qty{0}, ClientOrderId::From("t")},
      {OrderId{kU64Max}, kU64Max,
       OrderTerms{AccountId{kU32Max}, MarketId{kU16Max}, Side::kSell, OrderType::kTakeProfitLimit,
                  TimeInForce::kFok, StpMode::kExpireBoth, Price{kI64Max}, Qty{kI64Min}},
       Price{kI64Min}, kI32Min, Qty{kI64Max}, ClientOrderId::From(kId36)}};
  im.accounts = {{AccountId{1}, 1'700'000'000'000, AuthText::From("alice")},
                 {AccountId{kU32Max}, kI64Min, AuthText::From(kName64)}};
  im.api_keys = {{AccountId{1}, 1'700'000'000'001, 0x07, false, false, AuthText::From("k1"),
                  AuthText::From("s1")},
                 {AccountId{kU32Max}, kI64Max, 0xff, true, true, AuthText::From(kKey64),
                  AuthText::From(kSecret64)}};
  im.added_assets = {{AssetId{2}, SymbolText::From("SOL"), 9},
                     {AssetId{kU16Max}, SymbolText::From(kSymbol32), kI32Min}};
  im.added_markets = {
      {MarketId{3}, SymbolText::From("SOLUSDT"), AssetId{2}, AssetId{1}, 1'000, 10'000'000, Qty{1},
       Qty{1'000'000}, Price{10'000'000}, Amount{1'000'000}, 10, 20, MarketStatus::kHalted},
      {MarketId{kU16Max}, SymbolText::From(kSymbol32), AssetId{kU16Max}, AssetId{kU16Max - 1},
       kI64Max, kI64Min, Qty{kI64Max}, Qty{kI64Min}, Price{kI64Min}, Amount{kI64Max}, kI32Max,
       kI32Min, MarketStatus::kCancelOnly}};
  return im;
}

// `im` without what an image of format `version` cannot hold: no pending
// transfer before version 2; no last price, no waiting order, no iceberg and
// no order list before 3; no account, no API key and no asset or market added
// at run time before 4.
EngineImage HeldBy(uint16_t version, EngineImage im) {
  if (version < 2) im.pending_transfers.clear();
  if (version < 4) {
    im.accounts.clear();
    im.api_keys.clear();
    im.added_assets.clear();
    im.added_markets.clear();
  }
  if (version < 3) {
    im.last_prices.clear();
    im.stops.clear();
    im.icebergs.clear();
    im.lists.clear();
    im.pending.clear();
  }
  return im;
}

// What the sections of image format 3 take when empty: the last_prices (u32),
// stops, icebergs, lists and pending (u64) counts.
constexpr std::ptrdiff_t kVersion3Counts = 4 + 4 * 8;
// The same for format 4: the accounts and api_keys (u64) counts, then the
// added assets and markets (u32) counts.
constexpr std::ptrdiff_t kVersion4Counts = 2 * 8 + 2 * 4;

// The bytes a build of image format `version` (1 to 3) wrote for `im`, which
// must hold nothing that version cannot (HeldBy): this build's encoding
// without the sections added since, under that version. The layouts of the
// older sections did not change.
std::vector<std::byte> EncodeOlderImage(uint16_t version, const EngineImage& im) {
  EXPECT_TRUE(version >= 1 && version <= 3) << version;
  EXPECT_TRUE(im.accounts.empty() && im.api_keys.empty() && im.added_assets.empty() &&
              im.added_markets.empty());
  EXPECT_TRUE(version >= 3 || (im.last_prices.empty() && im.stops.empty() && im.icebergs.empty() &&
                               im.lists.empty() && im.pending.empty()));
  EXPECT_TRUE(version >= 2 || im.pending_transfers.empty());
  std::vector<std::byte> b = EncodeImage(im);
  // The empty sections' counts sit just before the checksum: pending_transfers
  // (u64, version 2), then those of version 3, then those of version 4.
  std::ptrdiff_t cut = kVersion4Counts;
  if (version < 3) cut += kVersion3Counts;
  if (version < 2) cut += 8;
  b.erase(b.end() - 8 - cut, b.end() - 8);
  b[8] = static_cast<std::byte>(version);
  b[9] = std::byte{0};
  Reseal(&b);
  return b;
}

// Where a PlaceOrder's stop_price, trailing_delta and iceberg_qty (20 bytes,
// added with the conditional and iceberg orders) start: after the client order
// id, in a PlaceOrder and in a CancelReplace's place.
constexpr std::size_t kPlaceNewFieldsAt = 72;
constexpr std::size_t kReplaceNewFieldsAt = 124;
constexpr std::size_t kNewFieldsSize = 8 + 4 + 8;

// The bytes of `c` as the builds before the conditional and iceberg orders
// wrote them: a PlaceOrder (alone or in a CancelReplace) without those 20
// bytes. Other commands as they are.
std::vector<std::byte> EncodeWithoutNewOrderFields(const Command& c) {
  std::vector<std::byte> b = EncodeToVector(c);
  std::size_t at = 0;
  if (c.type() == CommandType::kPlaceOrder) at = kPlaceNewFieldsAt;
  if (c.type() == CommandType::kCancelReplace) at = kReplaceNewFieldsAt;
  if (at != 0) {
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
            b.begin() + static_cast<std::ptrdiff_t>(at + kNewFieldsSize));
  }
  return b;
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
  // The older event types keep their sizes (old journals hold them); the
  // transfers to other venues (segment format version 3), the conditional
  // and the iceberg orders and the order lists (version 4), the accounts and
  // API keys and the assets and markets added at run time (version 5) come
  // after them. Commands are not journaled: PlaceOrder (80 bytes before) and
  // CancelReplace (133) grew by stop_price, trailing_delta and iceberg_qty.
  EXPECT_EQ(kCommandSize, (std::array<std::size_t, 15>{100, 61, 15, 114, 88, 88, 12, 153, 161, 19,
                                                       282, 60, 154, 46, 103}));
  EXPECT_EQ(kEventSize,
            (std::array<std::size_t, 24>{104, 78, 110, 48, 48, 49, 65, 104, 104, 20,  68, 177,
                                         47,  40, 44,  48, 40, 56, 93, 116, 31,  162, 56, 113}));
  EXPECT_EQ(kMaxCommandSize, 282u);
  EXPECT_EQ(kMaxEventSize, 177u);
  EXPECT_EQ(EncodedSize(CommandType::kPlaceOrder), 100u);
  EXPECT_EQ(EncodedSize(CommandType::kCancelReplace), 153u);
  EXPECT_EQ(EncodedSize(CommandType::kTransferOut), 161u);
  EXPECT_EQ(EncodedSize(CommandType::kResolveTransfer), 19u);
  EXPECT_EQ(EncodedSize(EventType::kTransferHeld), 177u);
  EXPECT_EQ(EncodedSize(EventType::kTransferCompleted), 47u);
  EXPECT_EQ(EncodedSize(EventType::kTransferRefunded), 40u);
  EXPECT_EQ(EncodedSize(EventType::kOrderArmed), 44u);
  EXPECT_EQ(EncodedSize(EventType::kOrderTriggered), 48u);
  EXPECT_EQ(EncodedSize(EventType::kIcebergAccepted), 40u);
  EXPECT_EQ(EncodedSize(EventType::kIcebergRefilled), 56u);
  EXPECT_EQ(EncodedSize(CommandType::kPlaceOrderList), 282u);
  EXPECT_EQ(EncodedSize(CommandType::kCancelOrderList), 60u);
  EXPECT_EQ(EncodedSize(EventType::kListAccepted), 93u);
  EXPECT_EQ(EncodedSize(EventType::kOrderPending), 116u);
  EXPECT_EQ(EncodedSize(EventType::kListDone), 31u);
  EXPECT_EQ(EncodedSize(CommandType::kChangeAuth), 154u);
  EXPECT_EQ(EncodedSize(EventType::kAuthChanged), 162u);
  EXPECT_EQ(EncodedSize(CommandType::kAddAsset), 46u);
  EXPECT_EQ(EncodedSize(CommandType::kAddMarket), 103u);
  EXPECT_EQ(EncodedSize(EventType::kAssetAdded), 56u);
  EXPECT_EQ(EncodedSize(EventType::kMarketAdded), 113u);
  EXPECT_EQ(EncodedSize(static_cast<CommandType>(15)), 0u);
  EXPECT_EQ(EncodedSize(static_cast<EventType>(24)), 0u);
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
  for (unsigned t : {15u, 16u, 100u, 255u}) {
    auto bytes = EncodeToVector(MakeCommand(CommandType::kPlaceOrder, true));
    bytes[0] = static_cast<std::byte>(t);
    Command c;
    EXPECT_EQ(Decode(bytes, &c).error, DecodeError::kUnknownType) << t;
    EXPECT_EQ(Decode(std::span(bytes).first(1), &c).error, DecodeError::kUnknownType) << t;
  }
  for (unsigned t : {24u, 25u, 200u, 255u}) {
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
constexpr uint8_t kPl = Raw(CommandType::kPlaceOrderList);
constexpr uint8_t kCl = Raw(CommandType::kCancelOrderList);
constexpr uint8_t kCa = Raw(CommandType::kChangeAuth);
constexpr uint8_t kAs = Raw(CommandType::kAddAsset);
constexpr uint8_t kMk = Raw(CommandType::kAddMarket);
constexpr uint8_t kTh = Raw(EventType::kTransferHeld);
constexpr uint8_t kTr = Raw(EventType::kTransferRefunded);
constexpr uint8_t kOa = Raw(EventType::kOrderArmed);
constexpr uint8_t kOt = Raw(EventType::kOrderTriggered);
constexpr uint8_t kIa = Raw(EventType::kIcebergAccepted);
constexpr uint8_t kIr = Raw(EventType::kIcebergRefilled);
constexpr uint8_t kLa = Raw(EventType::kListAccepted);
constexpr uint8_t kOp = Raw(EventType::kOrderPending);
constexpr uint8_t kAc = Raw(EventType::kAuthChanged);
constexpr uint8_t kAd = Raw(EventType::kAssetAdded);
constexpr uint8_t kMd = Raw(EventType::kMarketAdded);

// Offsets as in docs/journal_format.md.
const Site kSites[] = {
    {false, kPo, 7, Kind::kEnum, 1, "PlaceOrder.side"},
    {false, kPo, 8, Kind::kEnum, 6, "PlaceOrder.type"},
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
    {false, kCr, 60, Kind::kEnum, 6, "CancelReplace.place.type"},
    {false, kCr, 61, Kind::kEnum, 2, "CancelReplace.place.tif"},
    {false, kCr, 62, Kind::kEnum, 3, "CancelReplace.place.stp"},
    {false, kCr, 87, Kind::kStrLen, 36, "CancelReplace.place.client_order_id.len"},
    {false, kCr, 123, Kind::kPad, 0, "CancelReplace.place.client_order_id last pad"},
    {false, kCr, 144, Kind::kEnum, 1, "CancelReplace.mode"},
    {false, kDe, 15, Kind::kStrLen, 64, "Deposit.ref.len"},
    {false, kDe, 79, Kind::kPad, 0, "Deposit.ref last pad"},
    {false, kWi, 15, Kind::kStrLen, 64, "Withdraw.ref.len"},
    {false, kWi, 17, Kind::kPad, 0, "Withdraw.ref first pad"},
    {false, kSm, 3, Kind::kEnum, 3, "SetMarketStatus.status"},
    {false, kTo, 23, Kind::kStrLen, 64, "TransferOut.ref.len"},
    {false, kTo, 87, Kind::kPad, 0, "TransferOut.ref last pad"},
    {false, kTo, 88, Kind::kStrLen, 64, "TransferOut.address.len"},
    {false, kTo, 90, Kind::kPad, 0, "TransferOut.address first pad"},
    {false, kTo, 152, Kind::kPad, 0, "TransferOut.address last pad"},
    {false, kRt, 9, Kind::kBool, 1, "ResolveTransfer.completed"},
    {false, kRt, 10, Kind::kEnum, 4, "ResolveTransfer.reason"},
    {false, kPl, 7, Kind::kEnum, 2, "PlaceOrderList.type"},
    {false, kPl, 8, Kind::kEnum, 3, "PlaceOrderList.stp"},
    {false, kPl, 9, Kind::kStrLen, 36, "PlaceOrderList.list_client_order_id.len"},
    {false, kPl, 45, Kind::kPad, 0, "PlaceOrderList.list_client_order_id last pad"},
    {false, kPl, 46, Kind::kEnum, 1, "PlaceOrderList.orders[0].side"},
    {false, kPl, 47, Kind::kEnum, 6, "PlaceOrderList.orders[0].type"},
    {false, kPl, 48, Kind::kEnum, 2, "PlaceOrderList.orders[0].tif"},
    {false, kPl, 85, Kind::kStrLen, 36, "PlaceOrderList.orders[0].client_order_id.len"},
    {false, kPl, 87, Kind::kPad, 0, "PlaceOrderList.orders[0].client_order_id first pad"},
    {false, kPl, 121, Kind::kPad, 0, "PlaceOrderList.orders[0].client_order_id last pad"},
    {false, kPl, 122, Kind::kEnum, 1, "PlaceOrderList.orders[1].side"},
    {false, kPl, 123, Kind::kEnum, 6, "PlaceOrderList.orders[1].type"},
    {false, kPl, 124, Kind::kEnum, 2, "PlaceOrderList.orders[1].tif"},
    {false, kPl, 161, Kind::kStrLen, 36, "PlaceOrderList.orders[1].client_order_id.len"},
    {false, kPl, 197, Kind::kPad, 0, "PlaceOrderList.orders[1].client_order_id last pad"},
    {false, kPl, 198, Kind::kEnum, 1, "PlaceOrderList.orders[2].side"},
    {false, kPl, 199, Kind::kEnum, 6, "PlaceOrderList.orders[2].type"},
    {false, kPl, 200, Kind::kEnum, 2, "PlaceOrderList.orders[2].tif"},
    {false, kPl, 237, Kind::kStrLen, 36, "PlaceOrderList.orders[2].client_order_id.len"},
    {false, kPl, 273, Kind::kPad, 0, "PlaceOrderList.orders[2].client_order_id last pad"},
    {false, kCl, 15, Kind::kStrLen, 36, "CancelOrderList.list_client_order_id.len"},
    {false, kCl, 51, Kind::kPad, 0, "CancelOrderList.list_client_order_id last pad"},
    {false, kCa, 1, Kind::kEnum, 2, "AuthChange.kind"},
    {false, kCa, 7, Kind::kBool, 1, "AuthChange.ed25519"},
    {false, kCa, 16, Kind::kStrLen, 64, "AuthChange.subject.len"},
    {false, kCa, 18, Kind::kPad, 0, "AuthChange.subject first pad"},
    {false, kCa, 80, Kind::kPad, 0, "AuthChange.subject last pad"},
    {false, kCa, 81, Kind::kStrLen, 64, "AuthChange.secret.len"},
    {false, kCa, 83, Kind::kPad, 0, "AuthChange.secret first pad"},
    {false, kCa, 145, Kind::kPad, 0, "AuthChange.secret last pad"},
    {false, kAs, 1, Kind::kStrLen, 32, "AddAsset.symbol.len"},
    {false, kAs, 3, Kind::kPad, 0, "AddAsset.symbol first pad"},
    {false, kAs, 33, Kind::kPad, 0, "AddAsset.symbol last pad"},
    {false, kMk, 1, Kind::kStrLen, 32, "AddMarket.symbol.len"},
    {false, kMk, 3, Kind::kPad, 0, "AddMarket.symbol first pad"},
    {false, kMk, 33, Kind::kPad, 0, "AddMarket.symbol last pad"},
    {false, kMk, 94, Kind::kEnum, 3, "AddMarket.status"},
    {true, 0, 31, Kind::kEnum, 1, "OrderAccepted.side"},
    {true, 0, 32, Kind::kEnum, 6, "OrderAccepted.type"},
    {true, 0, 33, Kind::kEnum, 2, "OrderAccepted.tif"},
    {true, 0, 34, Kind::kEnum, 3, "OrderAccepted.stp"},
    {true, 0, 67, Kind::kStrLen, 36, "OrderAccepted.client_order_id.len"},
    {true, 0, 103, Kind::kPad, 0, "OrderAccepted.client_order_id last pad"},
    {true, 1, 17, Kind::kEnum, 14, "Rejected.command"},
    {true, 1, 18, Kind::kEnum, 35, "Rejected.reason"},
    {true, 1, 41, Kind::kStrLen, 36, "Rejected.client_order_id.len"},
    {true, 1, 43, Kind::kPad, 0, "Rejected.client_order_id first pad"},
    {true, 2, 27, Kind::kEnum, 1, "Trade.taker_side"},
    {true, 2, 108, Kind::kBool, 1, "Trade.maker_filled"},
    {true, 2, 109, Kind::kBool, 1, "Trade.taker_filled"},
    {true, 3, 31, Kind::kEnum, 1, "OrderRested.side"},
    {true, 4, 31, Kind::kEnum, 1, "OrderCanceled.side"},
    {true, 5, 31, Kind::kEnum, 1, "OrderExpired.side"},
    {true, 5, 32, Kind::kEnum, 5, "OrderExpired.reason"},
    {true, 6, 31, Kind::kEnum, 1, "OrderAmended.side"},
    {true, 6, 64, Kind::kBool, 1, "OrderAmended.keeps_priority"},
    {true, 7, 39, Kind::kStrLen, 64, "Deposited.ref.len"},
    {true, 7, 103, Kind::kPad, 0, "Deposited.ref last pad"},
    {true, 8, 39, Kind::kStrLen, 64, "Withdrawn.ref.len"},
    {true, 8, 41, Kind::kPad, 0, "Withdrawn.ref first pad"},
    {true, 9, 19, Kind::kEnum, 3, "MarketStatusChanged.status"},
    {true, 10, 31, Kind::kStrLen, 36, "ClientOrderIdChanged.client_order_id.len"},
    {true, 10, 67, Kind::kPad, 0, "ClientOrderIdChanged.client_order_id last pad"},
    {true, kTh, 47, Kind::kStrLen, 64, "TransferHeld.ref.len"},
    {true, kTh, 111, Kind::kPad, 0, "TransferHeld.ref last pad"},
    {true, kTh, 112, Kind::kStrLen, 64, "TransferHeld.address.len"},
    {true, kTh, 114, Kind::kPad, 0, "TransferHeld.address first pad"},
    {true, kTh, 176, Kind::kPad, 0, "TransferHeld.address last pad"},
    {true, kTr, 39, Kind::kEnum, 4, "TransferRefunded.reason"},
    {true, kOa, 31, Kind::kEnum, 1, "OrderArmed.side"},
    {true, kOt, 31, Kind::kEnum, 1, "OrderTriggered.side"},
    {true, kIa, 31, Kind::kEnum, 1, "IcebergAccepted.side"},
    {true, kIr, 31, Kind::kEnum, 1, "IcebergRefilled.side"},
    {true, kLa, 31, Kind::kEnum, 2, "ListAccepted.type"},
    {true, kLa, 32, Kind::kStrLen, 36, "ListAccepted.list_client_order_id.len"},
    {true, kLa, 68, Kind::kPad, 0, "ListAccepted.list_client_order_id last pad"},
    {true, kOp, 39, Kind::kEnum, 1, "OrderPending.side"},
    {true, kOp, 40, Kind::kEnum, 6, "OrderPending.type"},
    {true, kOp, 41, Kind::kEnum, 2, "OrderPending.tif"},
    {true, kOp, 42, Kind::kEnum, 3, "OrderPending.stp"},
    {true, kOp, 79, Kind::kStrLen, 36, "OrderPending.client_order_id.len"},
    {true, kOp, 115, Kind::kPad, 0, "OrderPending.client_order_id last pad"},
    {true, kAc, 17, Kind::kEnum, 2, "AuthChanged.kind"},
    {true, kAc, 23, Kind::kBool, 1, "AuthChanged.ed25519"},
    {true, kAc, 32, Kind::kStrLen, 64, "AuthChanged.subject.len"},
    {true, kAc, 34, Kind::kPad, 0, "AuthChanged.subject first pad"},
    {true, kAc, 96, Kind::kPad, 0, "AuthChanged.subject last pad"},
    {true, kAc, 97, Kind::kStrLen, 64, "AuthChanged.secret.len"},
    {true, kAc, 99, Kind::kPad, 0, "AuthChanged.secret first pad"},
    {true, kAc, 161, Kind::kPad, 0, "AuthChanged.secret last pad"},
    {true, kAd, 19, Kind::kStrLen, 32, "AssetAdded.symbol.len"},
    {true, kAd, 21, Kind::kPad, 0, "AssetAdded.symbol first pad"},
    {true, kAd, 51, Kind::kPad, 0, "AssetAdded.symbol last pad"},
    {true, kMd, 19, Kind::kStrLen, 32, "MarketAdded.symbol.len"},
    {true, kMd, 21, Kind::kPad, 0, "MarketAdded.symbol first pad"},
    {true, kMd, 51, Kind::kPad, 0, "MarketAdded.symbol last pad"},
    {true, kMd, 112, Kind::kEnum, 3, "MarketAdded.status"},
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
  p.type = OrderType::kStopLossLimit;
  p.tif = TimeInForce::kIoc;
  p.stp = StpMode::kExpireBoth;
  p.price = Price{0x1112131415161718};
  p.qty = Qty{0x2122232425262728};
  p.quote_qty = Amount{-2};
  ASSERT_TRUE(p.client_order_id.Assign("abc"));
  p.stop_price = Price{0x4142434445464748};
  p.trailing_delta = 0x51525354;
  p.iceberg_qty = Qty{0x6162636465666768};
  const Command c{0x3132333435363738, p};
  const std::string golden =
      "00"  // type
      "04030201"
      "0605"
      "01"
      "04"
      "01"
      "03"  // ids, enums
      "1817161514131211"
      "2827262524232221"
      "feffffffffffffff"  // price qty quote
      "03"
      "616263" +
      std::string(33 * 2, '0') +  // client_order_id
      "4847464544434241"
      "54535251"
      "6867666564636261"   // stop_price trailing_delta iceberg_qty
      "3837363534333231";  // timestamp
  ASSERT_EQ(golden.size(), 2 * 100u);
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

TEST(CodecGolden, ConditionalAndIcebergEvents) {
  const Sequence seq{0xa1a2a3a4a5a6a7a8};
  const int64_t ts = 0x0b0c0d0e0f101112;
  const std::string head =
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b";  // seq, timestamp
  const std::string ids =
      "0807060504030201"
      "14131211"
      "2221";  // order_id account market
  const OrderId id{0x0102030405060708};
  const AccountId account{0x11121314};
  const MarketId market{0x2122};
  const Event armed{
      seq, ts, OrderArmed{id, account, market, Side::kSell, Price{0x3132333435363738}, 0x41424344}};
  const Event triggered{
      seq, ts,
      OrderTriggered{id, account, market, Side::kBuy, Price{0x3132333435363738}, Amount{-2}}};
  const Event accepted{seq, ts,
                       IcebergAccepted{id, account, market, Side::kSell, Qty{0x5152535455565758}}};
  const Event refilled{seq, ts,
                       IcebergRefilled{id, account, market, Side::kBuy, Price{0x3132333435363738},
                                       Qty{0x6162636465666768}, Qty{-1}}};
  const std::string golden_armed = "0e" + head + ids +
                                   "01"  // side
                                   "3837363534333231"
                                   "44434241";  // stop_price trailing_delta
  const std::string golden_triggered = "0f" + head + ids +
                                       "00"  // side
                                       "3837363534333231"
                                       "feffffffffffffff";  // last_price lock_delta
  const std::string golden_accepted = "10" + head + ids +
                                      "01"                 // side
                                      "5857565554535251";  // slice
  const std::string golden_refilled = "11" + head + ids +
                                      "00"  // side
                                      "3837363534333231"
                                      "6867666564636261"
                                      "ffffffffffffffff";  // price visible hidden
  ASSERT_EQ(golden_armed.size(), 2 * 44u);
  ASSERT_EQ(golden_triggered.size(), 2 * 48u);
  ASSERT_EQ(golden_accepted.size(), 2 * 40u);
  ASSERT_EQ(golden_refilled.size(), 2 * 56u);
  for (const auto& [e, golden] :
       {std::pair{armed, golden_armed}, std::pair{triggered, golden_triggered},
        std::pair{accepted, golden_accepted}, std::pair{refilled, golden_refilled}}) {
    EXPECT_EQ(Hex(EncodeToVector(e)), golden);
    Event d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(e, d)) << golden;
  }
}

TEST(CodecGolden, OrderListCommands) {
  PlaceOrderList l;
  l.account = AccountId{0x01020304};
  l.market = MarketId{0x0506};
  l.type = ListType::kOtoco;
  l.stp = StpMode::kExpireMaker;
  ASSERT_TRUE(l.list_client_order_id.Assign("L"));
  l.orders[0] = ListOrder{Side::kBuy,
                          OrderType::kLimit,
                          TimeInForce::kGtc,
                          0,
                          Price{0x1112131415161718},
                          Qty{0x2122232425262728},
                          Price{0},
                          Qty{0x0a},
                          ClientOrderId::From("w")};
  l.orders[1] = ListOrder{Side::kSell,
                          OrderType::kLimitMaker,
                          TimeInForce::kGtc,
                          0,
                          Price{0x3132333435363738},
                          Qty{0x2122232425262728},
                          Price{0},
                          Qty{0},
                          ClientOrderId::From("a")};
  l.orders[2] = ListOrder{Side::kSell,
                          OrderType::kStopLossLimit,
                          TimeInForce::kIoc,
                          0x41424344,
                          Price{0x5152535455565758},
                          Qty{0x2122232425262728},
                          Price{0x6162636465666768},
                          Qty{0},
                          ClientOrderId::From("b")};
  const Command place{0x3132333435363738, l};
  const std::string golden_place =
      "0a"  // type
      "04030201"
      "0605"
      "02"
      "02"  // account market type stp
      "01"
      "4c" +
      std::string(35 * 2, '0') +  // list_client_order_id
      "00"
      "00"
      "00"
      "00000000"  // orders[0]: side type tif trailing_delta
      "1817161514131211"
      "2827262524232221"
      "0000000000000000"
      "0a00000000000000"  // price qty stop_price iceberg_qty
      "01"
      "77" +
      std::string(35 * 2, '0') +  // client_order_id
      "01"
      "01"
      "00"
      "00000000"  // orders[1]
      "3837363534333231"
      "2827262524232221"
      "0000000000000000"
      "0000000000000000"
      "01"
      "61" +
      std::string(35 * 2, '0') +
      "01"
      "04"
      "01"
      "44434241"  // orders[2]
      "5857565554535251"
      "2827262524232221"
      "6867666564636261"
      "0000000000000000"
      "01"
      "62" +
      std::string(35 * 2, '0') + "3837363534333231";  // timestamp
  const Command cancel{0x3132333435363738,
                       CancelOrderList{AccountId{0x01020304}, MarketId{0x0506}, 0x1112131415161718,
                                       ClientOrderId::From("L")}};
  const std::string golden_cancel =
      "0b"  // type
      "04030201"
      "0605"
      "1817161514131211"  // account market list_id
      "01"
      "4c" +
      std::string(35 * 2, '0') +  // list_client_order_id
      "3837363534333231";         // timestamp
  ASSERT_EQ(golden_place.size(), 2 * 282u);
  ASSERT_EQ(golden_cancel.size(), 2 * 60u);
  for (const auto& [c, golden] :
       {std::pair{place, golden_place}, std::pair{cancel, golden_cancel}}) {
    EXPECT_EQ(Hex(EncodeToVector(c)), golden);
    Command d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(c, d)) << golden;
  }
}

TEST(CodecGolden, OrderListEvents) {
  const Sequence seq{0xa1a2a3a4a5a6a7a8};
  const int64_t ts = 0x0b0c0d0e0f101112;
  const std::string head =
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b";  // seq, timestamp
  const uint64_t list_id = 0x0102030405060708;
  const AccountId account{0x11121314};
  const MarketId market{0x2122};
  const Event accepted{
      seq, ts,
      ListAccepted{list_id,
                   account,
                   market,
                   ListType::kOto,
                   ClientOrderId::From("L"),
                   {OrderId{0x3132333435363738}, OrderId{0x4142434445464748}, OrderId{0}}}};
  const Event pending{
      seq, ts,
      OrderPending{
          OrderId{0x4142434445464748}, list_id,
          OrderTerms{account, market, Side::kSell, OrderType::kTakeProfitLimit, TimeInForce::kGtc,
                     StpMode::kExpireTaker, Price{0x5152535455565758}, Qty{0x6162636465666768}},
          Price{0x7172737475767778}, 0x0a0b0c0d, Qty{-2}, ClientOrderId::From("p")}};
  const Event done{seq, ts, ListDone{list_id, account, market}};
  const std::string golden_accepted = "12" + head +
                                      "0807060504030201"
                                      "14131211"
                                      "2221"
                                      "01"  // list_id account market type
                                      "01"
                                      "4c" +
                                      std::string(35 * 2, '0') +  // list_client_order_id
                                      "3837363534333231"
                                      "4847464544434241"
                                      "0000000000000000";  // order_ids
  const std::string golden_pending = "13" + head +
                                     "4847464544434241"
                                     "0807060504030201"  // order_id list_id
                                     "14131211"
                                     "2221"
                                     "01"
                                     "06"
                                     "00"
                                     "01"  // account market side type tif stp
                                     "5857565554535251"
                                     "6867666564636261"  // price qty
                                     "7877767574737271"
                                     "0d0c0b0a"
                                     "feffffffffffffff"  // stop_price trailing_delta iceberg_qty
                                     "01"
                                     "70" +
                                     std::string(35 * 2, '0');  // client_order_id
  const std::string golden_done = "14" + head +
                                  "0807060504030201"
                                  "14131211"
                                  "2221";  // list_id account market
  ASSERT_EQ(golden_accepted.size(), 2 * 93u);
  ASSERT_EQ(golden_pending.size(), 2 * 116u);
  ASSERT_EQ(golden_done.size(), 2 * 31u);
  for (const auto& [e, golden] :
       {std::pair{accepted, golden_accepted}, std::pair{pending, golden_pending},
        std::pair{done, golden_done}}) {
    EXPECT_EQ(Hex(EncodeToVector(e)), golden);
    Event d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(e, d)) << golden;
  }
}

// The accounts and API keys: the command and its event carry the same fields
// (kind, account, permissions, ed25519, created_ms, subject, secret).
TEST(CodecGolden, AuthChangeAndAuthChanged) {
  const AuthChange change{
      AuthChangeKind::kCreateKey, AccountId{0x01020304}, 0x05, true, 0x1112131415161718,
      AuthText::From("key"),      AuthText::From("sec")};
  const Command c{0x3132333435363738, change};
  const std::string fields =
      "01"        // kind kCreateKey
      "04030201"  // account
      "05"
      "01"                // permissions ed25519
      "1817161514131211"  // created_ms
      "03"
      "6b6579" +
      std::string(61 * 2, '0') +  // subject "key"
      "03"
      "736563" +
      std::string(61 * 2, '0');                                           // secret "sec"
  const std::string golden_command = "0c" + fields + "3837363534333231";  // timestamp
  const Event e{Sequence{0xa1a2a3a4a5a6a7a8}, 0x0b0c0d0e0f101112,
                AuthChanged{change.kind, change.account, change.permissions, change.ed25519,
                            change.created_ms, change.subject, change.secret}};
  const std::string golden_event =
      "15"
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b" +  // seq, timestamp
      fields;
  ASSERT_EQ(golden_command.size(), 2 * 154u);
  ASSERT_EQ(golden_event.size(), 2 * 162u);
  EXPECT_EQ(Hex(EncodeToVector(c)), golden_command);
  Command dc;
  ASSERT_TRUE(DecodeExact(FromHex(golden_command), &dc).ok());
  EXPECT_TRUE(Equal(c, dc));
  EXPECT_EQ(Hex(EncodeToVector(e)), golden_event);
  Event de;
  ASSERT_TRUE(DecodeExact(FromHex(golden_event), &de).ok());
  EXPECT_TRUE(Equal(e, de));

  // A new account (its id the engine's) and a revoked key, secret empty:
  // 65 zero bytes.
  const Event created{Sequence{1}, 2,
                      AuthChanged{AuthChangeKind::kCreateAccount, AccountId{7}, 0, false, -1,
                                  AuthText::From("ops"), AuthText{}}};
  EXPECT_EQ(Hex(EncodeToVector(created)),
            "15"
            "0100000000000000"
            "0200000000000000"
            "00"
            "07000000"
            "00"
            "00"
            "ffffffffffffffff"
            "03"
            "6f7073" +
                std::string(61 * 2, '0') + std::string(65 * 2, '0'));
  const Command revoke{3, AuthChange{AuthChangeKind::kRevokeKey, AccountId{0}, 0, false, 4,
                                     AuthText::From("k"), AuthText{}}};
  const auto revoke_bytes = EncodeToVector(revoke);
  EXPECT_EQ(revoke_bytes[1], std::byte{2});
  Command d;
  ASSERT_TRUE(DecodeExact(revoke_bytes, &d).ok());
  EXPECT_TRUE(Equal(revoke, d));
}

// A kind beyond kRevokeKey and an ed25519 byte other than 0 / 1 are refused,
// in the command and in the event (kSites covers every validated byte).
TEST(Codec, AuthChangeRefusesBadKindAndBool) {
  auto command = EncodeToVector(MakeCommand(CommandType::kChangeAuth, true));
  auto event = EncodeToVector(MakeEvent(EventType::kAuthChanged, true));
  Command c;
  Event e;
  ASSERT_TRUE(DecodeExact(command, &c).ok());
  ASSERT_TRUE(DecodeExact(event, &e).ok());
  command[1] = std::byte{3};
  event[17] = std::byte{3};
  EXPECT_EQ(DecodeExact(command, &c).error, DecodeError::kBadEnum);
  EXPECT_EQ(DecodeExact(event, &e).error, DecodeError::kBadEnum);
  command = EncodeToVector(MakeCommand(CommandType::kChangeAuth, true));
  event = EncodeToVector(MakeEvent(EventType::kAuthChanged, true));
  command[7] = std::byte{2};
  event[23] = std::byte{2};
  EXPECT_EQ(DecodeExact(command, &c).error, DecodeError::kBadBool);
  EXPECT_EQ(DecodeExact(event, &e).error, DecodeError::kBadBool);
  // The samples are untouched by the refusals.
  EXPECT_TRUE(Equal(c, MakeCommand(CommandType::kChangeAuth, true)));
  EXPECT_TRUE(Equal(e, MakeEvent(EventType::kAuthChanged, true)));
}

// The assets and markets added at run time: each command and its event carry
// the same fields, the event with the new id first (AddAsset: symbol, scale;
// AddMarket: symbol, base, quote, tick_units, lot_units, min_qty, max_qty,
// max_price, min_notional, maker_fee_bps, taker_fee_bps, status).
TEST(CodecGolden, AddAssetAndAddMarketAndTheirEvents) {
  const std::string ts = "3837363534333231";
  const std::string head =
      "a8a7a6a5a4a3a2a1"
      "1211100f0e0d0c0b";  // seq, timestamp
  const Sequence seq{0xa1a2a3a4a5a6a7a8};
  const int64_t event_ts = 0x0b0c0d0e0f101112;

  const AddAsset add_asset{SymbolText::From("SOL"), 0x01020304};
  const std::string asset_fields =
      "03"
      "534f4c" +
      std::string(29 * 2, '0') +  // symbol "SOL"
      "04030201";                 // scale
  const Command asset_command{0x3132333435363738, add_asset};
  const std::string golden_add_asset = "0d" + asset_fields + ts;
  const Event asset_event{seq, event_ts,
                          AssetAdded{AssetId{0x0506}, add_asset.symbol, add_asset.scale}};
  const std::string golden_asset_added = "16" + head + "0605" + asset_fields;  // asset, fields

  const AddMarket add_market{SymbolText::From("SOLUSDT"),
                             AssetId{0x0102},
                             AssetId{0x0304},
                             0x1112131415161718,
                             0x2122232425262728,
                             Qty{0x4142434445464748},
                             Qty{0x5152535455565758},
                             Price{0x6162636465666768},
                             Amount{-2},
                             0x71727374,
                             -1,
                             MarketStatus::kHalted};
  const std::string market_fields =
      "07"
      "534f4c55534454" +
      std::string(25 * 2, '0') +  // symbol "SOLUSDT"
      "0201"
      "0403"  // base quote
      "1817161514131211"
      "2827262524232221"  // tick_units lot_units
      "4847464544434241"
      "5857565554535251"  // min_qty max_qty
      "6867666564636261"
      "feffffffffffffff"  // max_price min_notional
      "74737271"
      "ffffffff"  // maker_fee_bps taker_fee_bps
      "01";       // status HALTED
  const Command market_command{0x3132333435363738, add_market};
  const std::string golden_add_market = "0e" + market_fields + ts;
  const Event market_event{
      seq, event_ts,
      MarketAdded{MarketId{0x0506}, add_market.symbol, add_market.base, add_market.quote,
                  add_market.tick_units, add_market.lot_units, add_market.min_qty,
                  add_market.max_qty, add_market.max_price, add_market.min_notional,
                  add_market.maker_fee_bps, add_market.taker_fee_bps, add_market.status}};
  const std::string golden_market_added = "17" + head + "0605" + market_fields;  // market, fields

  ASSERT_EQ(golden_add_asset.size(), 2 * 46u);
  ASSERT_EQ(golden_add_market.size(), 2 * 103u);
  ASSERT_EQ(golden_asset_added.size(), 2 * 56u);
  ASSERT_EQ(golden_market_added.size(), 2 * 113u);
  for (const auto& [c, golden] :
       {std::pair{asset_command, golden_add_asset}, std::pair{market_command, golden_add_market}}) {
    EXPECT_EQ(Hex(EncodeToVector(c)), golden);
    Command d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(c, d)) << golden;
  }
  for (const auto& [e, golden] :
       {std::pair{asset_event, golden_asset_added}, std::pair{market_event, golden_market_added}}) {
    EXPECT_EQ(Hex(EncodeToVector(e)), golden);
    Event d;
    ASSERT_TRUE(DecodeExact(FromHex(golden), &d).ok()) << golden;
    EXPECT_TRUE(Equal(e, d)) << golden;
  }

  // A 32-character symbol fills its field (no padding); an empty one is 33
  // zero bytes. The codec takes both: the engine refuses an empty symbol
  // (INVALID_LISTING).
  const Event full{Sequence{1}, 2, AssetAdded{AssetId{7}, SymbolText::From(kSymbol32), -1}};
  const std::string symbol_hex = Hex(std::as_bytes(std::span(kSymbol32, 32)));
  EXPECT_EQ(Hex(EncodeToVector(full)),
            "16"
            "0100000000000000"
            "0200000000000000"
            "0700"
            "20" +
                symbol_hex + "ffffffff");
  const Command empty{3, AddAsset{SymbolText{}, 0}};
  EXPECT_EQ(Hex(EncodeToVector(empty)), "0d" + std::string(37 * 2, '0') + "0300000000000000");
  Command d;
  ASSERT_TRUE(DecodeExact(EncodeToVector(empty), &d).ok());
  EXPECT_TRUE(Equal(empty, d));
}

// A status beyond CLOSED and a symbol longer than 32 bytes are refused,
// in the commands and in the events (kSites covers every validated byte).
TEST(Codec, AddedAssetsAndMarketsRefuseBadStatusAndSymbol) {
  auto market_command = EncodeToVector(MakeCommand(CommandType::kAddMarket, true));
  auto market_event = EncodeToVector(MakeEvent(EventType::kMarketAdded, true));
  Command c;
  Event e;
  ASSERT_TRUE(DecodeExact(market_command, &c).ok());
  ASSERT_TRUE(DecodeExact(market_event, &e).ok());
  ASSERT_EQ(market_command[94], std::byte{Raw(MarketStatus::kCancelOnly)});
  ASSERT_EQ(market_event[112], std::byte{Raw(MarketStatus::kCancelOnly)});
  market_command[94] = std::byte{4};
  market_event[112] = std::byte{4};
  EXPECT_EQ(DecodeExact(market_command, &c).error, DecodeError::kBadEnum);
  EXPECT_EQ(DecodeExact(market_event, &e).error, DecodeError::kBadEnum);
  // The symbols' length bytes (the max samples' are full: 32), one above.
  auto asset_command = EncodeToVector(MakeCommand(CommandType::kAddAsset, true));
  auto asset_event = EncodeToVector(MakeEvent(EventType::kAssetAdded, true));
  market_command = EncodeToVector(MakeCommand(CommandType::kAddMarket, true));
  market_event = EncodeToVector(MakeEvent(EventType::kMarketAdded, true));
  for (auto* b : {&asset_command, &market_command}) {
    ASSERT_EQ((*b)[1], std::byte{32});
    (*b)[1] = std::byte{33};
    EXPECT_EQ(DecodeExact(*b, &c).error, DecodeError::kBadString);
  }
  for (auto* b : {&asset_event, &market_event}) {
    ASSERT_EQ((*b)[19], std::byte{32});
    (*b)[19] = std::byte{33};
    EXPECT_EQ(DecodeExact(*b, &e).error, DecodeError::kBadString);
  }
  // The samples are untouched by the refusals.
  EXPECT_TRUE(Equal(c, MakeCommand(CommandType::kAddMarket, true)));
  EXPECT_TRUE(Equal(e, MakeEvent(EventType::kMarketAdded, true)));
}

// Commands are not journaled: the conditional and iceberg orders' fields went
// into PlaceOrder and CancelReplace in place, after the client order id.
// Cutting them out gives back the layout of every build before, byte for
// byte.
TEST(CodecGolden, NewOrderFieldsSitAfterTheClientOrderId) {
  for (const Command& c : AllCommands()) {
    if (c.type() != CommandType::kPlaceOrder && c.type() != CommandType::kCancelReplace) continue;
    SCOPED_TRACE(Name(c.type()) + " " + std::to_string(c.timestamp_ns));
    const auto b = EncodeToVector(c);
    const auto before = EncodeWithoutNewOrderFields(c);
    ASSERT_EQ(before.size() + kNewFieldsSize, b.size());
    const bool place = c.type() == CommandType::kPlaceOrder;
    const PlaceOrder& p =
        place ? std::get<PlaceOrder>(c.body) : std::get<CancelReplace>(c.body).place;
    const std::size_t at = place ? kPlaceNewFieldsAt : kReplaceNewFieldsAt;
    std::vector<std::byte> expected(kNewFieldsSize);
    PutLe64(&expected, 0, static_cast<uint64_t>(p.stop_price.value));
    for (std::size_t i = 0; i < 4; ++i) {
      expected[8 + i] = static_cast<std::byte>(static_cast<uint32_t>(p.trailing_delta) >> (8 * i));
    }
    PutLe64(&expected, 12, static_cast<uint64_t>(p.iceberg_qty.value));
    EXPECT_EQ(Hex(std::span(b).subspan(at, kNewFieldsSize)), Hex(expected));
    // What followed the client order id before (the timestamp; the mode, then
    // the timestamp) follows them.
    EXPECT_EQ(Hex(std::span(b).subspan(at + kNewFieldsSize)), Hex(std::span(before).subspan(at)));
  }
}

// One number over every sample of the record types that existed before the
// transfers to other venues (PlaceOrder and CancelReplace without the fields
// added since), and over the version-1 image of MakeImage: the value the build
// before them computed. Their layouts did not move.
TEST(CodecGolden, FingerprintOfTheOlderSamplesIsUnchanged) {
  std::vector<std::byte> all;
  for (const Command& c : AllCommands()) {
    if (Raw(c.type()) > Raw(CommandType::kCancelReplace)) continue;
    const auto b = EncodeWithoutNewOrderFields(c);
    all.insert(all.end(), b.begin(), b.end());
  }
  for (const Event& e : AllEvents()) {
    if (Raw(e.type()) > Raw(EventType::kClientOrderIdChanged)) continue;
    const auto b = EncodeToVector(e);
    all.insert(all.end(), b.begin(), b.end());
  }
  const auto image = EncodeOlderImage(1, HeldBy(1, MakeImage()));
  all.insert(all.end(), image.begin(), image.end());
  EXPECT_EQ(all.size(), 2 * (80 + 61 + 15 + 114 + 88 + 88 + 12 + 133) +
                            2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68) +
                            image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x8dc7267e26bb5d73ULL)
      << std::hex << "0x" << XXH3_64bits(all.data(), all.size());
}

// The same over every sample of the record types that existed before the
// conditional and iceberg orders and the order lists (PlaceOrder and
// CancelReplace without their fields), and over the version-2 image of
// MakeImage: the value the build before them computed.
TEST(CodecGolden, FingerprintBeforeTheConditionalOrdersIsUnchanged) {
  std::vector<std::byte> all;
  for (const Command& c : AllCommands()) {
    if (Raw(c.type()) > Raw(CommandType::kResolveTransfer)) continue;
    const auto b = EncodeWithoutNewOrderFields(c);
    all.insert(all.end(), b.begin(), b.end());
  }
  for (const Event& e : AllEvents()) {
    if (Raw(e.type()) > Raw(EventType::kTransferRefunded)) continue;
    const auto b = EncodeToVector(e);
    all.insert(all.end(), b.begin(), b.end());
  }
  const auto image = EncodeOlderImage(2, HeldBy(2, MakeImage()));
  all.insert(all.end(), image.begin(), image.end());
  EXPECT_EQ(all.size(),
            2 * (80 + 61 + 15 + 114 + 88 + 88 + 12 + 133 + 161 + 19) +
                2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68 + 177 + 47 + 40) +
                image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x881aa8f37a088e16ULL)
      << std::hex << "0x" << XXH3_64bits(all.data(), all.size());
}

// The same over every sample of the record types that existed before the
// accounts and API keys, and over the version-3 image of MakeImage: the value
// the build before them computed.
TEST(CodecGolden, FingerprintBeforeTheAccountsIsUnchanged) {
  std::vector<std::byte> all;
  for (const Command& c : AllCommands()) {
    if (Raw(c.type()) > Raw(CommandType::kCancelOrderList)) continue;
    const auto b = EncodeToVector(c);
    all.insert(all.end(), b.begin(), b.end());
  }
  for (const Event& e : AllEvents()) {
    if (Raw(e.type()) > Raw(EventType::kListDone)) continue;
    const auto b = EncodeToVector(e);
    all.insert(all.end(), b.begin(), b.end());
  }
  const auto image = EncodeOlderImage(3, HeldBy(3, MakeImage()));
  all.insert(all.end(), image.begin(), image.end());
  EXPECT_EQ(all.size(), 2 * (100 + 61 + 15 + 114 + 88 + 88 + 12 + 153 + 161 + 19 + 282 + 60) +
                            2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68 + 177 +
                                 47 + 40 + 44 + 48 + 40 + 56 + 93 + 116 + 31) +
                            image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x2c343cec7aae9e6fULL)
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
            2 * (100 + 61 + 15 + 114 + 88 + 88 + 12 + 153 + 161 + 19 + 282 + 60 + 154 + 46 + 103) +
                2 * (104 + 78 + 110 + 48 + 48 + 49 + 65 + 104 + 104 + 20 + 68 + 177 + 47 + 40 + 44 +
                     48 + 40 + 56 + 93 + 116 + 31 + 162 + 56 + 113) +
                image.size());
  EXPECT_EQ(XXH3_64bits(all.data(), all.size()), 0x9447bb93068c1dc6ULL)
      << std::hex << "0x" << XXH3_64bits(all.data(), all.size());
}

// ---------------------------------------------------------------------------
// Snapshot images
// ---------------------------------------------------------------------------

// Offsets of the image built by MakeImage (see journal_format.md).
constexpr std::size_t kHeader = 34;
constexpr std::size_t kMarketCountAt = kHeader;                           // u32, 3 statuses follow
constexpr std::size_t kAssetCountAt = kMarketCountAt + 4 + 3;             // u32, 2 x 8 follow
constexpr std::size_t kBalanceCountAt = kAssetCountAt + 4 + 16;           // u64, 2 x 22 follow
constexpr std::size_t kOrderCountAt = kBalanceCountAt + 8 + 44;           // u64, 2 x 75 follow
constexpr std::size_t kClientIdCountAt = kOrderCountAt + 8 + 150;         // u64, 2 x 28 follow
constexpr std::size_t kTransferCountAt = kClientIdCountAt + 8 + 56;       // u64, 2 x 24 follow
constexpr std::size_t kPendingCountAt = kTransferCountAt + 8 + 48;        // u64, 2 x 95 follow
constexpr std::size_t kLastPriceCountAt = kPendingCountAt + 8 + 190;      // u32, 3 x 8 follow
constexpr std::size_t kStopCountAt = kLastPriceCountAt + 4 + 24;          // u64, 2 x 96 follow
constexpr std::size_t kIcebergCountAt = kStopCountAt + 8 + 192;           // u64, 2 x 24 follow
constexpr std::size_t kListCountAt = kIcebergCountAt + 8 + 48;            // u64, 2 x 56 follow
constexpr std::size_t kPendingOrderCountAt = kListCountAt + 8 + 112;      // u64, 2 x 99 follow
constexpr std::size_t kAccountCountAt = kPendingOrderCountAt + 8 + 198;   // u64, 2 x 77 follow
constexpr std::size_t kApiKeyCountAt = kAccountCountAt + 8 + 154;         // u64, 2 x 145 follow
constexpr std::size_t kAddedAssetCountAt = kApiKeyCountAt + 8 + 290;      // u32, 2 x 39 follow
constexpr std::size_t kAddedMarketCountAt = kAddedAssetCountAt + 4 + 78;  // u32, 2 x 96 follow
constexpr std::size_t kImageSize = kAddedMarketCountAt + 4 + 192 + 8;

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
  // A version-4 image: the pending_transfers count, then the counts of
  // versions 3 and 4.
  EXPECT_EQ(bytes.size(), kMinImageSize + 8 + kVersion3Counts + kVersion4Counts);
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
  EXPECT_EQ(b[8], std::byte{4});  // this build writes version 4
  EXPECT_EQ(b[9], std::byte{0});
  for (uint16_t version : {uint16_t{0}, uint16_t{5}, uint16_t{0x0104}}) {
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
    EXPECT_NE(r.status().message().find("reads 1 to 4"), std::string::npos) << r.status().message();
  }
}

// A version-1 image (written before the transfers to other venues) ends after
// the transfers section: it still decodes, with no pending transfer.
TEST(CodecImage, Version1ImageDecodesWithNoPendingTransfers) {
  const EngineImage im = HeldBy(1, MakeImage());
  const auto v1 = EncodeOlderImage(1, im);
  ASSERT_EQ(v1.size(), kPendingCountAt + 8);
  auto decoded = DecodeImage(v1);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->pending_transfers.empty());
  EXPECT_TRUE(Equal(im, *decoded));
  // Written again, it is a version-4 image of the same state.
  const auto v4 = EncodeImage(*decoded);
  EXPECT_EQ(v4[8], std::byte{4});
  EXPECT_EQ(v4.size(), v1.size() + 8 + kVersion3Counts + kVersion4Counts);
  auto again = DecodeImage(v4);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(Equal(im, *again));

  // The empty image too.
  const auto empty_v1 = EncodeOlderImage(1, EngineImage{});
  EXPECT_EQ(empty_v1.size(), kMinImageSize);
  auto empty = DecodeImage(empty_v1);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(Equal(EngineImage{}, *empty));

  // Version 1 with a pending_transfers section: bytes a version-1 image
  // cannot hold.
  auto b = EncodeOlderImage(2, im);
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

// A version-2 image (written before the conditional and iceberg orders and
// the order lists) ends after the pending_transfers section: it still
// decodes, with no last price, no waiting order, no iceberg and no list.
TEST(CodecImage, Version2ImageDecodesWithNoLastPricesOrStops) {
  const EngineImage im = HeldBy(2, MakeImage());
  ASSERT_FALSE(im.pending_transfers.empty());
  const auto v2 = EncodeOlderImage(2, im);
  ASSERT_EQ(v2.size(), kLastPriceCountAt + 8);
  EXPECT_EQ(v2[8], std::byte{2});
  auto decoded = DecodeImage(v2);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->last_prices.empty());
  EXPECT_TRUE(decoded->stops.empty());
  EXPECT_TRUE(decoded->icebergs.empty());
  EXPECT_TRUE(decoded->lists.empty());
  EXPECT_TRUE(decoded->pending.empty());
  EXPECT_TRUE(decoded->accounts.empty());
  EXPECT_TRUE(decoded->api_keys.empty());
  EXPECT_TRUE(decoded->added_assets.empty());
  EXPECT_TRUE(decoded->added_markets.empty());
  EXPECT_TRUE(Equal(im, *decoded));
  // Written again, it is a version-4 image of the same state: the same bytes,
  // then the empty counts.
  const auto v4 = EncodeImage(*decoded);
  EXPECT_EQ(v4[8], std::byte{4});
  ASSERT_EQ(v4.size(), v2.size() + kVersion3Counts + kVersion4Counts);
  EXPECT_EQ(Hex(std::span(v4).subspan(10, v2.size() - 18)),
            Hex(std::span(v2).subspan(10, v2.size() - 18)));
  EXPECT_EQ(Hex(std::span(v4).subspan(v2.size() - 8, kVersion3Counts + kVersion4Counts)),
            std::string(2 * (kVersion3Counts + kVersion4Counts), '0'));
  auto again = DecodeImage(v4);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(Equal(im, *again));

  // The empty image too.
  const auto empty_v2 = EncodeOlderImage(2, EngineImage{});
  EXPECT_EQ(empty_v2.size(), kMinImageSize + 8);
  auto empty = DecodeImage(empty_v2);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(Equal(EngineImage{}, *empty));

  // Version 2 with the sections of version 3: bytes a version-2 image cannot
  // hold.
  auto b = EncodeOlderImage(3, HeldBy(3, MakeImage()));
  b[8] = std::byte{2};
  Reseal(&b);
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unexpected bytes"), std::string::npos)
      << r.status().message();
  // Even empty ones.
  b = EncodeOlderImage(3, im);
  b[8] = std::byte{2};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(std::to_string(kVersion3Counts) + " unexpected bytes"),
            std::string::npos)
      << r.status().message();
  // Version 3 without them: truncated before the last_prices count.
  b = v2;
  b[8] = std::byte{3};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("last_prices count"), std::string::npos)
      << r.status().message();
  // Version 3 that ends after one of its sections: truncated before the next
  // count (each u64, the last ones before the checksum).
  const std::pair<const char*, std::ptrdiff_t> cuts[] = {{"stops count", 4 * 8},
                                                         {"icebergs count", 3 * 8},
                                                         {"lists count", 2 * 8},
                                                         {"pending count", 8}};
  for (const auto& [count, cut] : cuts) {
    SCOPED_TRACE(count);
    b = EncodeOlderImage(3, im);
    b.erase(b.end() - 8 - cut, b.end() - 8);
    Reseal(&b);
    r = DecodeImage(b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(count), std::string::npos) << r.status().message();
  }
}

// A version-3 image (written before the accounts and API keys and the assets
// and markets added at run time) ends after the pending section: it still
// decodes, with no account, no key and nothing added.
TEST(CodecImage, Version3ImageDecodesWithNoAccountsOrKeys) {
  const EngineImage im = HeldBy(3, MakeImage());
  ASSERT_FALSE(im.stops.empty());
  ASSERT_FALSE(im.pending.empty());
  const auto v3 = EncodeOlderImage(3, im);
  ASSERT_EQ(v3.size(), kAccountCountAt + 8);
  EXPECT_EQ(v3[8], std::byte{3});
  EXPECT_EQ(v3[9], std::byte{0});
  auto decoded = DecodeImage(v3);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->accounts.empty());
  EXPECT_TRUE(decoded->api_keys.empty());
  EXPECT_TRUE(decoded->added_assets.empty());
  EXPECT_TRUE(decoded->added_markets.empty());
  EXPECT_EQ(decoded->last_prices, im.last_prices);
  EXPECT_TRUE(Equal(im, *decoded));
  // Written again, it is a version-4 image of the same state: the same bytes,
  // then the four empty counts.
  const auto v4 = EncodeImage(*decoded);
  EXPECT_EQ(v4[8], std::byte{4});
  ASSERT_EQ(v4.size(), v3.size() + kVersion4Counts);
  EXPECT_EQ(Hex(std::span(v4).subspan(10, v3.size() - 18)),
            Hex(std::span(v3).subspan(10, v3.size() - 18)));
  EXPECT_EQ(Hex(std::span(v4).subspan(v3.size() - 8, kVersion4Counts)),
            std::string(2 * kVersion4Counts, '0'));
  auto again = DecodeImage(v4);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(Equal(im, *again));

  // The empty image too.
  const auto empty_v3 = EncodeOlderImage(3, EngineImage{});
  EXPECT_EQ(empty_v3.size(), kMinImageSize + 8 + kVersion3Counts);
  auto empty = DecodeImage(empty_v3);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(Equal(EngineImage{}, *empty));

  // Version 3 with the sections of version 4: bytes a version-3 image cannot
  // hold, even empty ones.
  auto b = EncodeImage(MakeImage());
  b[8] = std::byte{3};
  Reseal(&b);
  auto r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unexpected bytes"), std::string::npos)
      << r.status().message();
  b = EncodeImage(im);
  b[8] = std::byte{3};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(std::to_string(kVersion4Counts) + " unexpected bytes"),
            std::string::npos)
      << r.status().message();
  // Version 4 without them: truncated before the accounts count.
  b = v3;
  b[8] = std::byte{4};
  Reseal(&b);
  r = DecodeImage(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("accounts count"), std::string::npos) << r.status().message();
  // Version 4 that ends after one of its sections: truncated before the next
  // count (api_keys u64, then the added assets and markets, u32 each, the
  // last ones before the checksum).
  const std::pair<const char*, std::ptrdiff_t> cuts[] = {
      {"api_keys count", 8 + 2 * 4}, {"assets count", 2 * 4}, {"markets count", 4}};
  for (const auto& [count, cut] : cuts) {
    SCOPED_TRACE(count);
    b = EncodeImage(im);
    b.erase(b.end() - 8 - cut, b.end() - 8);
    Reseal(&b);
    r = DecodeImage(b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(count), std::string::npos) << r.status().message();
  }
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

// The last_prices section: a u32 count, then one i64 per market (by MarketId).
// The stops section: a u64 count, then 96-byte records: the 75 bytes of an
// order record, then stop_price i64, trailing_delta i32, active bool, extreme
// i64. The icebergs section: a u64 count, then 24-byte records (id u64, slice
// i64, hidden i64). The lists section: a u64 count, then 56-byte records (id
// u64, account u32, market u16, type enum, has_client_id bool, client_id
// key128, three order ids u64). The pending section: a u64 count, then
// 99-byte records: an OrderPending event's body.
TEST(CodecImage, Version3SectionsLayout) {
  const EngineImage im = MakeImage();
  const auto b = EncodeImage(im);
  ASSERT_EQ(b.size(), kImageSize);
  EXPECT_EQ(Hex(std::span(b).subspan(kLastPriceCountAt, 4 + 3 * 8)),
            "03000000"
            "6bf2630000000000"
            "0000000000000000"
            "ffffffffffffff7f");
  EXPECT_EQ(Hex(std::span(b).subspan(kStopCountAt, 8)), "0200000000000000");
  EXPECT_EQ(Hex(std::span(b).subspan(kStopCountAt + 8, 96)),
            "1200000000000000"
            "01000000"
            "0000"
            "00040000"  // id account market side type tif stp
            "40b5640000000000"
            "0500000000000000"
            "0500000000000000"
            "408af70100000000"
            "01002a36fe9c9717"  // price qty remaining locked created_ns
            "01"
            "2222000000000000"
            "0300000000000000"  // has_client_id client_id
            "f0f1630000000000"
            "00000000"
            "00"
            "0000000000000000");  // stop_price trailing_delta active extreme
  // The second record's tail: kI64Min, kI32Max, true, kI64Max.
  EXPECT_EQ(Hex(std::span(b).subspan(kStopCountAt + 8 + 96 + 75, 21)),
            "0000000000000080"
            "ffffff7f"
            "01"
            "ffffffffffffff7f");
  auto decoded = DecodeImage(b);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->last_prices, im.last_prices);
  ASSERT_EQ(decoded->stops.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->stops, im.stops));
  EXPECT_EQ(decoded->stops[1].order.terms.type, OrderType::kTakeProfitLimit);

  EXPECT_EQ(Hex(std::span(b).subspan(kIcebergCountAt, 8 + 2 * 24)),
            "0200000000000000"
            "1100000000000000"
            "0a00000000000000"
            "0800000000000000"  // id 17, slice 10, hidden 8
            "ffffffffffffffff"
            "ffffffffffffff7f"
            "0000000000000080");
  ASSERT_EQ(decoded->icebergs.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->icebergs, im.icebergs));

  EXPECT_EQ(Hex(std::span(b).subspan(kListCountAt, 8 + 56)),
            "0200000000000000"
            "2800000000000000"
            "01000000"
            "0000"
            "01"
            "01"  // id 40, account, market, type OTO, has_client_id
            "3333000000000000"
            "0400000000000000"  // client_id
            "2800000000000000"
            "2800000000000400"
            "0000000000000000");  // orders: 40, 40 + 2^50, none
  EXPECT_EQ(Hex(std::span(b).subspan(kPendingOrderCountAt, 8 + 99)),
            "0200000000000000"
            "2800000000000400"
            "2800000000000000"  // order_id list_id
            "01000000"
            "0000"
            "01"
            "01"
            "00"
            "00"  // account market side type tif stp
            "e03b660000000000"
            "0500000000000000"  // price qty
            "0000000000000000"
            "00000000"
            "0000000000000000"  // stop_price trailing_delta iceberg_qty
            "01"
            "74" +
                std::string(35 * 2, '0'));  // client_order_id
  ASSERT_EQ(decoded->lists.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->lists, im.lists));
  ASSERT_EQ(decoded->pending.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->pending, im.pending));
  EXPECT_EQ(decoded->pending[1].client_order_id.view(), kId36);
}

// The accounts section: a u64 count, then 77-byte records (id u32, created_ms
// i64, name str<64>). The api_keys section: a u64 count, then 145-byte
// records (account u32, created_ms i64, permissions u8, ed25519 bool, revoked
// bool, key str<64>, secret str<64>).
TEST(CodecImage, Version4SectionsLayout) {
  const EngineImage im = MakeImage();
  const auto b = EncodeImage(im);
  ASSERT_EQ(b.size(), kImageSize);
  EXPECT_EQ(Hex(std::span(b).subspan(kAccountCountAt, 8 + 77)),
            "0200000000000000"
            "01000000"
            "0068e5cf8b010000"  // id 1, created_ms 1'700'000'000'000
            "05"
            "616c696365" +
                std::string(59 * 2, '0'));  // name "alice"
  // The second account: id kU32Max, created_ms kI64Min, a 64-byte name.
  EXPECT_EQ(Hex(std::span(b).subspan(kAccountCountAt + 8 + 77, 13)),
            "ffffffff"
            "0000000000000080"
            "40");
  EXPECT_EQ(Hex(std::span(b).subspan(kApiKeyCountAt, 8 + 145)),
            "0200000000000000"
            "01000000"
            "0168e5cf8b010000"  // account 1, created_ms 1'700'000'000'001
            "07"
            "00"
            "00"  // permissions ed25519 revoked
            "02"
            "6b31" +
                std::string(62 * 2, '0') +  // key "k1"
                "02"
                "7331" +
                std::string(62 * 2, '0'));  // secret "s1"
  // The second key's fixed fields: kU32Max, kI64Max, 0xff, true, true.
  EXPECT_EQ(Hex(std::span(b).subspan(kApiKeyCountAt + 8 + 145, 16)),
            "ffffffff"
            "ffffffffffffff7f"
            "ff"
            "01"
            "01"
            "40");
  auto decoded = DecodeImage(b);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->accounts.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->accounts, im.accounts));
  EXPECT_EQ(decoded->accounts[1].name.view(), kName64);
  ASSERT_EQ(decoded->api_keys.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->api_keys, im.api_keys));
  EXPECT_EQ(decoded->api_keys[1].key.view(), kKey64);
  EXPECT_EQ(decoded->api_keys[1].secret.view(), kSecret64);
  EXPECT_TRUE(decoded->api_keys[1].revoked);
  EXPECT_FALSE(decoded->api_keys[0].revoked);
}

// The added assets section: a u32 count (<= 65536), then 39-byte records: an
// AssetAdded event's body (asset u16, symbol str<32>, scale i32). The added
// markets section: a u32 count (<= 65536), then 96-byte records: a
// MarketAdded event's body (market u16, symbol str<32>, base u16, quote u16,
// tick_units i64, lot_units i64, min_qty i64, max_qty i64, max_price i64,
// min_notional i64, maker_fee_bps i32, taker_fee_bps i32, status enum).
TEST(CodecImage, AddedAssetsAndMarketsSectionsLayout) {
  const EngineImage im = MakeImage();
  const auto b = EncodeImage(im);
  ASSERT_EQ(b.size(), kImageSize);
  EXPECT_EQ(Hex(std::span(b).subspan(kAddedAssetCountAt, 4 + 39)),
            "02000000"
            "0200"  // count, asset 2
            "03"
            "534f4c" +
                std::string(29 * 2, '0') +  // symbol "SOL"
                "09000000");                // scale 9
  // The second asset: id kU16Max, a 32-character symbol, scale kI32Min.
  const std::string symbol_hex = Hex(std::as_bytes(std::span(kSymbol32, 32)));
  EXPECT_EQ(Hex(std::span(b).subspan(kAddedAssetCountAt + 4 + 39, 39)),
            "ffff"
            "20" +
                symbol_hex + "00000080");
  EXPECT_EQ(Hex(std::span(b).subspan(kAddedMarketCountAt, 4 + 96)),
            "02000000"
            "0300"  // count, market 3
            "07"
            "534f4c55534454" +
                std::string(25 * 2, '0') +  // symbol "SOLUSDT"
                "0200"
                "0100"  // base 2, quote 1
                "e803000000000000"
                "8096980000000000"  // tick_units 1'000, lot_units 10'000'000
                "0100000000000000"
                "40420f0000000000"  // min_qty 1, max_qty 1'000'000
                "8096980000000000"
                "40420f0000000000"  // max_price 10'000'000, min_notional 1'000'000
                "0a000000"
                "14000000"  // maker_fee_bps 10, taker_fee_bps 20
                "01");      // status HALTED
  // The second market: every fixed field at an extreme, status CANCEL_ONLY.
  EXPECT_EQ(Hex(std::span(b).subspan(kAddedMarketCountAt + 4 + 96, 96)),
            "ffff"
            "20" +
                symbol_hex +
                "ffff"
                "feff"
                "ffffffffffffff7f"
                "0000000000000080"
                "ffffffffffffff7f"
                "0000000000000080"
                "0000000000000080"
                "ffffffffffffff7f"
                "ffffff7f"
                "00000080"
                "02");
  auto decoded = DecodeImage(b);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->added_assets.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->added_assets, im.added_assets));
  EXPECT_EQ(decoded->added_assets[1].symbol.view(), kSymbol32);
  ASSERT_EQ(decoded->added_markets.size(), 2u);
  EXPECT_TRUE(VecEqual(decoded->added_markets, im.added_markets));
  EXPECT_EQ(decoded->added_markets[0].symbol.view(), "SOLUSDT");
  EXPECT_EQ(decoded->added_markets[1].status, MarketStatus::kCancelOnly);
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

// One record more than the bytes between a section's count and the checksum
// can hold.
constexpr uint64_t JustAbove(std::size_t count_at, std::size_t count_size, std::size_t record) {
  return (kImageSize - 8 - count_at - count_size) / record + 1;
}
static_assert(JustAbove(kAddedMarketCountAt, 4, 96) == 3);  // two records follow, exactly

TEST(CodecImage, HugeCountIsRefusedWithoutAllocating) {
  const auto good = EncodeImage(MakeImage());
  struct Case {
    std::size_t at;
    bool u32;
    uint64_t count;
    const char* section;
    const char* why;
  };
  const char* const kIdSpace = "exceeds the id space";
  const char* const kBytesLeft = "bytes left";
  const Case cases[] = {
      {kBalanceCountAt, false, kU64Max, "balances count", kBytesLeft},
      {kOrderCountAt, false, uint64_t{1} << 60, "orders count", kBytesLeft},
      {kOrderCountAt, false, JustAbove(kOrderCountAt, 8, 75), "orders count", kBytesLeft},
      {kClientIdCountAt, false, 1'000'000'000, "recent_client_ids count", kBytesLeft},
      {kTransferCountAt, false, JustAbove(kTransferCountAt, 8, 24), "transfers count", kBytesLeft},
      {kPendingCountAt, false, JustAbove(kPendingCountAt, 8, 95), "pending_transfers count",
       kBytesLeft},
      {kPendingCountAt, false, kU64Max, "pending_transfers count", kBytesLeft},
      {kLastPriceCountAt, true, JustAbove(kLastPriceCountAt, 4, 8), "last_prices count",
       kBytesLeft},
      {kLastPriceCountAt, true, 70'000, "last_prices count", kIdSpace},
      {kStopCountAt, false, JustAbove(kStopCountAt, 8, 96), "stops count", kBytesLeft},
      {kStopCountAt, false, kU64Max, "stops count", kBytesLeft},
      {kIcebergCountAt, false, JustAbove(kIcebergCountAt, 8, 24), "icebergs count", kBytesLeft},
      {kIcebergCountAt, false, uint64_t{1} << 62, "icebergs count", kBytesLeft},
      {kListCountAt, false, JustAbove(kListCountAt, 8, 56), "lists count", kBytesLeft},
      {kListCountAt, false, kU64Max / 56 + 1, "lists count", kBytesLeft},
      {kPendingOrderCountAt, false, JustAbove(kPendingOrderCountAt, 8, 99), "pending count",
       kBytesLeft},
      {kPendingOrderCountAt, false, kU64Max, "pending count", kBytesLeft},
      {kAccountCountAt, false, JustAbove(kAccountCountAt, 8, 77), "accounts count", kBytesLeft},
      {kAccountCountAt, false, kU64Max, "accounts count", kBytesLeft},
      {kApiKeyCountAt, false, JustAbove(kApiKeyCountAt, 8, 145), "api_keys count", kBytesLeft},
      {kApiKeyCountAt, false, kU64Max / 145 + 1, "api_keys count", kBytesLeft},
      {kAddedAssetCountAt, true, JustAbove(kAddedAssetCountAt, 4, 39), "assets count", kBytesLeft},
      {kAddedAssetCountAt, true, 70'000, "assets count", kIdSpace},
      {kAddedMarketCountAt, true, JustAbove(kAddedMarketCountAt, 4, 96), "markets count",
       kBytesLeft},
      {kAddedMarketCountAt, true, kU32Max, "markets count", kIdSpace},
      {kAssetCountAt, true, kU32Max, "asset_totals count", kIdSpace},
      {kMarketCountAt, true, 70'000, "market_status count", kIdSpace},
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
    EXPECT_NE(status.message().find(c.why), std::string::npos) << status.message();
    EXPECT_LT(largest, 4096u) << "allocated before checking the count";
  }
}

// One byte of a record in an image set to a value its field cannot hold:
// the decoder refuses the image and names the record (and the kind of field).
struct ImageFault {
  const char* what;
  std::size_t at;
  int expect;  // the byte's value in MakeImage()'s image (-1: not checked)
  uint8_t set;
  const char* record;       // "orders[1]": found in the message
  const char* kind;         // "enum", "bool", "string" or null: found in the message
  std::size_t also_at = 0;  // another byte MakeImage() sets (0: none), to
  int also_expect = -1;     // check the offsets against a second record
};

TEST(CodecImage, BadFieldInsideARecordIsNamed) {
  constexpr uint8_t kOtoco = Raw(ListType::kOtoco);
  constexpr uint8_t kTpLimit = Raw(OrderType::kTakeProfitLimit);
  // Offsets: the section's count, then whole records, then the field (the
  // record sizes are in the layout constants above).
  const ImageFault faults[] = {
      {"the second order's side", kOrderCountAt + 8 + 75 + 14, 1, 2, "orders[1]", "enum"},
      {"the third market's status (CLOSED is 3)", kMarketCountAt + 4 + 2, -1, 4, "market_status[2]",
       nullptr},
      {"the first order's has_client_id", kOrderCountAt + 8 + 58, 1, 2, "orders[0]", nullptr},
      {"the second pending transfer's address length, above its capacity",
       kPendingCountAt + 8 + 95 + 30, 64, 65, "pending_transfers[1]", "string"},
      {"the first pending transfer's one-byte address: its first padding byte",
       kPendingCountAt + 8 + 30 + 2, 0, 'z', "pending_transfers[0]", nullptr},
      {"the first stop's active flag", kStopCountAt + 8 + 87, 0, 2, "stops[0]", "bool",
       kStopCountAt + 8 + 87 + 96, 1},
      {"the first stop's has_client_id", kStopCountAt + 8 + 58, 1, 0xff, "stops[0]", nullptr},
      {"the second list's type (OTOCO), beyond the last ListType", kListCountAt + 8 + 56 + 14,
       kOtoco, kOtoco + 1, "lists[1]", "enum"},
      {"the first list's has_client_id", kListCountAt + 8 + 15, 1, 2, "lists[0]", "bool"},
      {"the second pending order's type, beyond the last OrderType",
       kPendingOrderCountAt + 8 + 99 + 23, kTpLimit, kTpLimit + 1, "pending[1]", "enum"},
      {"the first pending order's client order id: a padding byte",
       kPendingOrderCountAt + 8 + 62 + 2, 0, 'z', "pending[0]", "string"},
      {"the second account's name length, above its capacity", kAccountCountAt + 8 + 77 + 12, 64,
       65, "accounts[1]", "string"},
      {"the first key's ed25519 flag", kApiKeyCountAt + 8 + 13, 0, 2, "api_keys[0]", "bool",
       kApiKeyCountAt + 8 + 13 + 145, 1},
      {"the first key's revoked flag", kApiKeyCountAt + 8 + 14, 0, 2, "api_keys[0]", "bool",
       kApiKeyCountAt + 8 + 14 + 145, 1},
      {"the first key's secret (\"s1\"): a padding byte", kApiKeyCountAt + 8 + 80 + 3, 0, 'z',
       "api_keys[0]", "string", kApiKeyCountAt + 8 + 80, 2},
      {"the second added asset's symbol length (32), above its capacity",
       kAddedAssetCountAt + 4 + 39 + 2, 32, 33, "assets[1]", "string"},
      {"the first added asset's symbol (\"SOL\"): its first padding byte",
       kAddedAssetCountAt + 4 + 2 + 1 + 3, 0, 'z', "assets[0]", "string",
       kAddedAssetCountAt + 4 + 2, 3},
      {"the first added market's symbol (\"SOLUSDT\"): its last padding byte",
       kAddedMarketCountAt + 4 + 2 + 32, 0, 0x80, "markets[0]", "string",
       kAddedMarketCountAt + 4 + 2, 7},
  };
  for (const ImageFault& f : faults) {
    SCOPED_TRACE(f.what);
    auto b = EncodeImage(MakeImage());
    if (f.expect >= 0) {
      ASSERT_EQ(b[f.at], static_cast<std::byte>(f.expect));
    }
    if (f.also_at != 0) {
      ASSERT_EQ(b[f.also_at], static_cast<std::byte>(f.also_expect));
    }
    b[f.at] = static_cast<std::byte>(f.set);
    Reseal(&b);
    auto r = DecodeImage(b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(f.record), std::string::npos) << r.status().message();
    if (f.kind != nullptr) {
      EXPECT_NE(r.status().message().find(f.kind), std::string::npos) << r.status().message();
    }
  }

  auto b = EncodeImage(MakeImage());
  Result<engine::EngineImage> r = DecodeImage(b);
  // The second stop's type: every OrderType decodes (the engine's Restore
  // checks that a waiting order is a conditional one), 7 does not.
  const std::size_t stop_type = kStopCountAt + 8 + 96 + 15;
  b = EncodeImage(MakeImage());
  ASSERT_EQ(b[stop_type], std::byte{Raw(OrderType::kTakeProfitLimit)});
  for (unsigned v = 0; v <= 7; ++v) {
    SCOPED_TRACE(v);
    b[stop_type] = static_cast<std::byte>(v);
    Reseal(&b);
    r = DecodeImage(b);
    if (v <= Raw(OrderType::kTakeProfitLimit)) {
      EXPECT_TRUE(r.ok()) << r.status().message();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("stops[1]"), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find("enum"), std::string::npos) << r.status().message();
    }
  }
  // The second added market's status: every MarketStatus decodes, 4 does not
  // (the engine's checks refuse a market added CLOSED, not the codec).
  const std::size_t market_status = kAddedMarketCountAt + 4 + 96 + 95;
  b = EncodeImage(MakeImage());
  ASSERT_EQ(b[market_status], std::byte{Raw(MarketStatus::kCancelOnly)});
  ASSERT_EQ(b[market_status - 96], std::byte{Raw(MarketStatus::kHalted)});
  for (unsigned v = 0; v <= 4; ++v) {
    SCOPED_TRACE(v);
    b[market_status] = static_cast<std::byte>(v);
    Reseal(&b);
    r = DecodeImage(b);
    if (v <= Raw(MarketStatus::kClosed)) {
      EXPECT_TRUE(r.ok()) << r.status().message();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("markets[1]"), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find("enum"), std::string::npos) << r.status().message();
    }
  }
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
    // Orders as a gateway sends them: a trailing take-profit limit sell with
    // an activation price (the "max" sample keeps OrderType MARKET), and an
    // iceberg limit buy.
    PlaceOrder stop{AccountId{1},
                    MarketId{0},
                    Side::kSell,
                    OrderType::kTakeProfitLimit,
                    TimeInForce::kGtc,
                    StpMode::kNone,
                    Price{6'600'000},
                    Qty{5},
                    Amount{0},
                    ClientOrderId::From("tp-1"),
                    Price{6'550'000},
                    150,
                    Qty{0}};
    write("command_place_order_conditional", EncodeToVector(Command{1, stop}));
    PlaceOrder iceberg{AccountId{1},
                       MarketId{0},
                       Side::kBuy,
                       OrderType::kLimit,
                       TimeInForce::kGtc,
                       StpMode::kNone,
                       Price{6'500'000},
                       Qty{100},
                       Amount{0},
                       ClientOrderId{},
                       Price{0},
                       0,
                       Qty{10}};
    write("command_place_order_iceberg", EncodeToVector(Command{2, iceberg}));
    write("image_small", EncodeImage(MakeImage()));
    write("image_empty", EncodeImage(EngineImage{}));
    write("image_v1_small", EncodeOlderImage(1, HeldBy(1, MakeImage())));
    write("image_v2_small", EncodeOlderImage(2, HeldBy(2, MakeImage())));
    write("image_v3_small", EncodeOlderImage(3, HeldBy(3, MakeImage())));
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
  EXPECT_LT(seeds, 48);
}

}  // namespace
}  // namespace mb::codec
