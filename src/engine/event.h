// Events: the engine's only output and the journal's content. Applying them in
// order through Evolve() rebuilds the engine's state exactly; every balance
// change is carried by an event field (see engine/ledger.h for the ledger view).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <type_traits>
#include <variant>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/order_terms.h"
#include "engine/types.h"

namespace mb::engine {

// A new order (or nothing, when rejected) passed every check. Locks `locked` of
// the spend asset (quote for buys, base for sells): available -= locked,
// locked += locked. The order is not in the book yet.
struct OrderAccepted {
  OrderId order_id{};
  OrderTerms terms{};
  Amount quote_qty{};  // MARKET by quote amount (then terms.qty == 0)
  Amount locked{};
  ClientOrderId client_order_id{};
};

// A command changed nothing. For duplicates, existing_id names the first
// outcome (the order or the transfer that used the id/ref before).
struct Rejected {
  CommandType command = CommandType::kPlaceOrder;
  RejectReason reason = RejectReason::kNone;
  AccountId account{};
  MarketId market{};
  OrderId order_id{};        // the target of a cancel/amend, if any
  uint64_t existing_id = 0;  // OrderId or TransferId of the first outcome, for duplicates
  ClientOrderId client_order_id{};
};

// One fill at the maker's price. Settles: buyer locked quote -= notional, buyer
// available base += base_qty - buyer fee; seller locked base -= base_qty, seller
// available quote += notional - seller fee; the fee account receives both fees.
// taker_released returns the rest of the taker's lock to available when this
// fill completes the taker (a buy filled below its limit).
struct Trade {
  TradeId trade_id{};
  MarketId market{};
  Side taker_side = Side::kBuy;
  OrderId maker_order_id{};
  OrderId taker_order_id{};
  AccountId maker_account{};
  AccountId taker_account{};
  Price price{};
  Qty qty{};
  Amount base_qty{};   // qty in base units
  Amount notional{};   // quote units
  Amount maker_fee{};  // in the asset the maker receives
  Amount taker_fee{};  // in the asset the taker receives
  Amount taker_released{};
  bool maker_filled = false;  // the maker left the book
  bool taker_filled = false;
};

// The taker's remainder enters the book at its limit price (FIFO tail). A buy
// that filled below its limit returns the price-improvement surplus here, so a
// resting order locks exactly what it can still spend (price x remaining).
struct OrderRested {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Qty remaining{};
  Amount released{};
};

struct OrderCanceled {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Qty remaining{};    // unfilled quantity removed
  Amount released{};  // lock returned to available
};

struct OrderExpired {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  ExpireReason reason = ExpireReason::kIocRemainder;
  Qty remaining{};
  Amount released{};
};

// keeps_priority: quantity went down at the same price; the order stays where it
// is in the queue. Otherwise the order left the book, and (like an accepted
// order) trades and rests or fills in the events that follow.
// lock_delta > 0 locks more of the spend asset, < 0 releases.
struct OrderAmended {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Price new_price{};
  Qty new_qty{};  // new total quantity
  Qty new_remaining{};
  Amount lock_delta{};
  bool keeps_priority = false;
};

struct Deposited {
  TransferId transfer_id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  TransferRef ref{};
};

struct Withdrawn {
  TransferId transfer_id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  TransferRef ref{};
};

struct MarketStatusChanged {
  MarketId market{};
  MarketStatus status = MarketStatus::kTrading;
};

// An amended order took a new client order id (AmendOrder's
// new_client_order_id). Follows the amend's OrderAmended, before any trade of
// the amended order. The id it had before is free from here on.
struct ClientOrderIdChanged {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  ClientOrderId client_order_id{};
};

// A transfer to another venue is held: available -= amount, the asset's held
// total += amount (the supply is unchanged: held funds are still this
// venue's). The transfer id is the command's sequence.
struct TransferHeld {
  TransferId transfer_id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  Amount fee{};
  TransferRef ref{};
  TransferAddress address{};
};

// The destination credited amount - fee: the held total and the supply go
// down by amount - fee; the fee account's available goes up by fee.
struct TransferCompleted {
  TransferId transfer_id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  Amount fee{};
};

// The hold returns to the account's available balance.
struct TransferRefunded {
  TransferId transfer_id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  RefundReason reason = RefundReason::kVoided;
};

// A conditional order waits for its trigger: it follows the order's
// OrderAccepted (whose lock is what the order holds while it waits) in the
// same command. The order is open, in no level, in its market's trigger
// structure. stop_price 0: a trailing stop without an activation price.
struct OrderArmed {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Price stop_price{};
  int32_t trailing_delta = 0;  // basis points; 0: not trailing
};

// The market's last trade price (last_price) met a waiting order's condition:
// it leaves the trigger structure and, in the events that follow, matches as
// a taker (Trade, then OrderRested / OrderExpired as any order). lock_delta
// is what a stop-market buy locks now, the cost of its book walk (it locked
// nothing while it waited); 0 for every other order.
struct OrderTriggered {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Price last_price{};
  Amount lock_delta{};
};

// An iceberg order: follows its OrderAccepted. While it rests the book shows
// at most `slice` lots of it (its visible part); the rest is hidden. It
// matches as a taker with its whole quantity.
struct IcebergAccepted {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Qty slice{};
};

// A resting iceberg's visible part filled (the Trade just before): the next
// slice, `visible` lots (the slice or what is left), joins the tail of its
// price level, behind every order already there; `hidden` lots stay hidden.
struct IcebergRefilled {
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Price price{};
  Qty visible{};
  Qty hidden{};
};

// An order list is placed: its orders follow (each an OrderAccepted, or an
// OrderPending for the pending orders of OTO / OTOCO). order_ids[k] is the
// id of the list's k-th order (0: none).
struct ListAccepted {
  uint64_t list_id = 0;
  AccountId account{};
  MarketId market{};
  ListType type = ListType::kOco;
  ClientOrderId list_client_order_id{};
  OrderId order_ids[3]{};
};

// A pending order of an OTO / OTOCO list: it waits, locking nothing, until
// the list's working order fills completely; then it is placed (an
// OrderAccepted with this id) or, when it no longer can be, refused (a
// Rejected naming it). Binance's PENDING_NEW.
struct OrderPending {
  OrderId order_id{};
  uint64_t list_id = 0;
  OrderTerms terms{};
  Price stop_price{};
  int32_t trailing_delta = 0;
  Qty iceberg_qty{};
  ClientOrderId client_order_id{};
};

// A list is over: none of its orders is open or pending any more.
struct ListDone {
  uint64_t list_id = 0;
  AccountId account{};
  MarketId market{};
};

// An AuthChange took effect: its fields, with the new account's id for
// kCreateAccount.
struct AuthChanged {
  AuthChangeKind kind = AuthChangeKind::kCreateAccount;
  AccountId account{};
  uint8_t permissions = 0;
  bool ed25519 = false;
  int64_t created_ms = 0;
  AuthText subject{};
  AuthText secret{};
};

// An AddAsset took effect: the asset's id and definition.
struct AssetAdded {
  AssetId asset{};
  SymbolText symbol{};
  int32_t scale = 0;
};

// An AddMarket took effect: the market's id and definition.
struct MarketAdded {
  MarketId market{};
  SymbolText symbol{};
  AssetId base{};
  AssetId quote{};
  int64_t tick_units = 0;
  int64_t lot_units = 0;
  Qty min_qty{};
  Qty max_qty{};
  Price max_price{};
  Amount min_notional{};
  int32_t maker_fee_bps = 0;
  int32_t taker_fee_bps = 0;
  MarketStatus status = MarketStatus::kTrading;
};

enum class EventType : uint8_t {
  kOrderAccepted = 0,
  kRejected = 1,
  kTrade = 2,
  kOrderRested = 3,
  kOrderCanceled = 4,
  kOrderExpired = 5,
  kOrderAmended = 6,
  kDeposited = 7,
  kWithdrawn = 8,
  kMarketStatusChanged = 9,
  kClientOrderIdChanged = 10,
  kTransferHeld = 11,
  kTransferCompleted = 12,
  kTransferRefunded = 13,
  kOrderArmed = 14,
  kOrderTriggered = 15,
  kIcebergAccepted = 16,
  kIcebergRefilled = 17,
  kListAccepted = 18,
  kOrderPending = 19,
  kListDone = 20,
  kAuthChanged = 21,
  kAssetAdded = 22,
  kMarketAdded = 23,
};

// Variant index == EventType.
using EventBody =
    std::variant<OrderAccepted, Rejected, Trade, OrderRested, OrderCanceled, OrderExpired,
                 OrderAmended, Deposited, Withdrawn, MarketStatusChanged, ClientOrderIdChanged,
                 TransferHeld, TransferCompleted, TransferRefunded, OrderArmed, OrderTriggered,
                 IcebergAccepted, IcebergRefilled, ListAccepted, OrderPending, ListDone,
                 AuthChanged, AssetAdded, MarketAdded>;

struct Event {
  Event() = default;
  // Built in place from its parts (EventBuffer::emplace_back(seq, ts, body)):
  // the body is constructed once, in its slot.
  template <class Body>
  Event(Sequence s, int64_t ts, const Body& b) noexcept : seq(s), timestamp_ns(ts), body(b) {}

  Sequence seq{};            // the command that caused it
  int64_t timestamp_ns = 0;  // the command's timestamp
  EventBody body;

  EventType type() const noexcept { return static_cast<EventType>(body.index()); }
};

static_assert(std::is_trivially_copyable_v<Event>);

std::string_view ToString(EventType v) noexcept;

}  // namespace mb::engine
