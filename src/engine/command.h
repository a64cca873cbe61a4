// Commands: the engine's only input. A command carries everything the engine
// needs, time included, so that the same command stream always yields the same
// events. All types are trivially copyable and fixed-size: they travel through
// rings and the journal as they are.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <type_traits>
#include <variant>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/types.h"

namespace mb::engine {

struct PlaceOrder {
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  OrderType type = OrderType::kLimit;
  TimeInForce tif = TimeInForce::kGtc;  // ignored for MARKET (always IOC) and LIMIT_MAKER (GTC)
  StpMode stp = StpMode::kNone;
  Price price{};                    // LIMIT / LIMIT_MAKER only
  Qty qty{};                        // LIMIT, LIMIT_MAKER, MARKET by base quantity
  Amount quote_qty{};               // MARKET by quote amount (then qty == 0)
  ClientOrderId client_order_id{};  // empty: none
  // Conditional orders only (IsConditional(type)); 0 on every other order.
  // stop_price is required unless trailing_delta is given, which makes the
  // order a trailing stop (basis points, 1..9999); with both, the stop price
  // is the trailing stop's activation price.
  Price stop_price{};
  int32_t trailing_delta = 0;
  // An iceberg order (GTC LIMIT or LIMIT_MAKER only): the book shows at most
  // this many lots of it at a time; 0: the whole order shows.
  Qty iceberg_qty{};
};

// Targets one open order by id, or by client order id when order_id == 0.
// With both, the order named by order_id must carry that client order id
// (Binance's rule); otherwise the command is refused as kUnknownOrder. An
// order whose state does not meet `restriction` is not canceled
// (kCancelRestricted).
struct CancelOrder {
  AccountId account{};
  MarketId market{};
  OrderId order_id{};
  ClientOrderId orig_client_order_id{};
  CancelRestriction restriction = CancelRestriction::kNone;
};

struct CancelAll {
  AccountId account{};
  MarketId market{};
};

// new_qty is the new total quantity, filled part included (Binance semantics);
// 0 leaves the quantity alone. new_price 0 leaves the price alone. The order
// is named as CancelOrder names it.
// keep_priority: the amend may only reduce the quantity at the same price
// (Binance's amend/keepPriority); a larger quantity is refused with
// kQuantityIncrease, the same quantity with kNoChange, a price with
// kInvalidPrice.
struct AmendOrder {
  AccountId account{};
  MarketId market{};
  OrderId order_id{};
  ClientOrderId orig_client_order_id{};
  Price new_price{};
  Qty new_qty{};
  bool keep_priority = false;
  // Empty: the order keeps its client order id. Otherwise the amended order
  // takes this id (Binance's newClientOrderId); an id another open order of
  // the account holds is refused (kDuplicateClientOrderId, the amend changes
  // nothing), the order's own id changes nothing.
  ClientOrderId new_client_order_id{};
};

struct Deposit {
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  TransferRef ref{};  // idempotency key: a second deposit with the same ref is rejected
};

struct Withdraw {
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  TransferRef ref{};
};

// The first step of a transfer to another venue (a withdrawal to a deposit
// address there): `amount` leaves the account's available balance for a hold
// of its own, neither available nor locked, until a ResolveTransfer completes
// or refunds it. `fee` (<= amount) goes to the fee account on completion;
// the destination receives amount - fee. `ref` is the idempotency key, as
// for Withdraw; `address` is carried, unread, for the dispatcher.
struct TransferOut {
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  Amount fee{};
  TransferRef ref{};
  TransferAddress address{};
};

// The second step: the destination credited the transfer (completed: the hold
// leaves the account and the supply, the fee goes to the fee account) or
// refused it, or an operator voided it (refunded: the hold returns to
// available). A transfer resolves once; a second resolution is refused
// (kUnknownTransfer).
struct ResolveTransfer {
  TransferId transfer_id{};
  bool completed = false;
  RefundReason reason = RefundReason::kVoided;  // when refunded
};

struct SetMarketStatus {
  MarketId market{};
  MarketStatus status = MarketStatus::kTrading;
};

// Cancels an open order and places a new one in one step (Binance's
// order/cancelReplace): no other command comes between the two. Its events are
// the cancel's (OrderCanceled, or Rejected with command kCancelOrder), then,
// unless the cancel was refused under kStopOnFailure, the new order's (as a
// PlaceOrder's; a refusal is Rejected with command kPlaceOrder). The new
// order's id is the command's sequence, as for PlaceOrder.
struct CancelReplace {
  CancelOrder cancel{};
  PlaceOrder place{};
  CancelReplaceMode mode = CancelReplaceMode::kStopOnFailure;
};

// One order of a list: its account, market and self-trade prevention mode
// are the list's.
struct ListOrder {
  Side side = Side::kBuy;
  OrderType type = OrderType::kLimit;
  TimeInForce tif = TimeInForce::kGtc;
  int32_t trailing_delta = 0;
  Price price{};
  Qty qty{};
  Price stop_price{};
  Qty iceberg_qty{};
  ClientOrderId client_order_id{};
};

// Places an order list in one step, all of it or nothing (docs/engine.md,
// "Order lists"). orders by type:
//   kOco:   [0] above, [1] below the price: one side, one quantity; SELL: a
//           LIMIT_MAKER / TAKE_PROFIT(_LIMIT) above and a STOP_LOSS(_LIMIT)
//           below; BUY: a STOP_LOSS(_LIMIT) above and a LIMIT_MAKER /
//           TAKE_PROFIT(_LIMIT) below. [2] unused.
//   kOto:   [0] the working order (LIMIT or LIMIT_MAKER), [1] the pending
//           order (any type but a MARKET by quote amount). [2] unused.
//   kOtoco: [0] the working order, [1] and [2] the pending OCO pair (above,
//           below) as kOco's.
// The list's id is the command's sequence; its orders' ids are the sequence
// plus k x kListOrderStride for orders[k].
struct PlaceOrderList {
  AccountId account{};
  MarketId market{};
  ListType type = ListType::kOco;
  StpMode stp = StpMode::kNone;
  ClientOrderId list_client_order_id{};  // empty: none
  ListOrder orders[3]{};
};

// Cancels a list: every open order of it, and its pending orders. Named by
// list_id, or by list_client_order_id when list_id == 0.
struct CancelOrderList {
  AccountId account{};
  MarketId market{};
  uint64_t list_id = 0;
  ClientOrderId list_client_order_id{};
};

// An account or an API key is created, or a key revoked (AuthChangeKind).
// The gateway makes the key and the secret; the engine only checks and
// records them, so a replay gives the same store. The account of
// kCreateAccount is the engine's to choose (the next id): the command's is
// ignored.
struct AuthChange {
  AuthChangeKind kind = AuthChangeKind::kCreateAccount;
  AccountId account{};      // kCreateKey: the key's account
  uint8_t permissions = 0;  // kCreateKey: the key's Permission bits (gateway/auth.h)
  bool ed25519 = false;     // kCreateKey: `secret` is the base64 Ed25519 public key
  int64_t created_ms = 0;   // wall time in ms, as the operator API reports it
  AuthText subject{};       // kCreateAccount: the name; else the API key
  AuthText secret{};        // kCreateKey: the HMAC secret or the Ed25519 public key
};

// An asset is added at run time under the next AssetId, with the checks of
// the configuration file's [[assets]] (engine/market.h ValidateNewAsset).
struct AddAsset {
  SymbolText symbol{};
  int32_t scale = 0;
};

// A market is added at run time under the next MarketId, with the checks of
// the configuration file's [[markets]] (engine/market.h ValidateNewMarket).
// Sizes as MarketSpec's.
struct AddMarket {
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

// Variant index == CommandType.
using CommandBody = std::variant<PlaceOrder, CancelOrder, CancelAll, AmendOrder, Deposit, Withdraw,
                                 SetMarketStatus, CancelReplace, TransferOut, ResolveTransfer,
                                 PlaceOrderList, CancelOrderList, AuthChange, AddAsset, AddMarket>;

struct Command {
  int64_t timestamp_ns = 0;  // wall time assigned at intake; the engine never reads a clock
  CommandBody body;

  CommandType type() const noexcept { return static_cast<CommandType>(body.index()); }
};

static_assert(std::is_trivially_copyable_v<Command>);

}  // namespace mb::engine
