// Closed sets of the engine's domain: sides, order types, time in force,
// self-trade prevention modes, market states and reject reasons. Each value is
// part of the binary codec: never renumber, only append.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string_view>

namespace mb::engine {

enum class Side : uint8_t { kBuy = 0, kSell = 1 };

enum class OrderType : uint8_t {
  kLimit = 0,
  kLimitMaker = 1,  // post-only: rejected if any part would take liquidity
  kMarket = 2,      // by base quantity (qty > 0) or by quote amount (quote_qty > 0)
  // Conditional orders: they wait, out of the book, until the market's last
  // trade price meets their stop price (or their trailing condition), then
  // enter matching as the MARKET (kStopLoss, kTakeProfit) or LIMIT
  // (kStopLossLimit, kTakeProfitLimit) order they carry. docs/engine.md,
  // "Conditional orders".
  kStopLoss = 3,
  kStopLossLimit = 4,
  kTakeProfit = 5,
  kTakeProfitLimit = 6,
};

enum class TimeInForce : uint8_t { kGtc = 0, kIoc = 1, kFok = 2 };

enum class StpMode : uint8_t {
  kNone = 0,         // self-trades are allowed
  kExpireTaker = 1,  // the incoming order expires when it meets its own account's order
  kExpireMaker = 2,  // the resting order of the same account expires; matching goes on
  kExpireBoth = 3,   // both expire
};

// kTrading: everything. kHalted: nothing is taken (orders rest untouched).
// kCancelOnly: open orders may be canceled, none placed or amended.
// kClosed (delisted): every open order of the market was canceled as it
// closed, and nothing is taken until an operator opens it again. A market is
// never removed; a configuration or a new market may not start closed.
enum class MarketStatus : uint8_t { kTrading = 0, kHalted = 1, kCancelOnly = 2, kClosed = 3 };

// A condition a cancel puts on the order's state (Binance's cancelRestrictions).
enum class CancelRestriction : uint8_t {
  kNone = 0,
  kOnlyNew = 1,              // nothing of the order executed yet
  kOnlyPartiallyFilled = 2,  // some of it executed
};

// What a CancelReplace does when its cancel is refused (Binance's
// cancelReplaceMode).
enum class CancelReplaceMode : uint8_t {
  kStopOnFailure = 0,  // the new order is not attempted
  kAllowFailure = 1,   // the new order is placed anyway
};

enum class CommandType : uint8_t {
  kPlaceOrder = 0,
  kCancelOrder = 1,
  kCancelAll = 2,
  kAmendOrder = 3,
  kDeposit = 4,
  kWithdraw = 5,
  kSetMarketStatus = 6,
  kCancelReplace = 7,
  kTransferOut = 8,
  kResolveTransfer = 9,
  kPlaceOrderList = 10,
  kCancelOrderList = 11,
  kChangeAuth = 12,
  kAddAsset = 13,
  kAddMarket = 14,
};

// What an AuthChange does: the operator's accounts and API keys, journaled
// like every other change so that a standby and a snapshot carry them.
enum class AuthChangeKind : uint8_t {
  kCreateAccount = 0,  // the next account id, under a name no account has
  kCreateKey = 1,      // an API key of an existing account
  kRevokeKey = 2,      // an existing key stops working, for good
};

// Binance's order lists: one-cancels-the-other (two orders, above and below
// the price; one executing cancels the other), one-triggers-the-other (a
// working order whose complete fill places a pending order), and both (a
// working order whose fill places a pending OCO pair).
enum class ListType : uint8_t { kOco = 0, kOto = 1, kOtoco = 2 };

// The orders of a list after the first take ids the list's command sequence
// cannot collide with: sequence + k x kListOrderStride for its k-th order
// (k = 1, 2). The first order's id, and the list's id, are the sequence.
inline constexpr uint64_t kListOrderStride = uint64_t{1} << 50;

// The command sequence an order id comes from.
constexpr uint64_t SequenceOfOrder(uint64_t order_id) noexcept {
  return order_id % kListOrderStride;
}

// Why a command changed nothing. Every reject is an event, never an error.
enum class RejectReason : uint8_t {
  kNone = 0,
  kUnknownMarket = 1,
  kUnknownAccount = 2,
  kUnknownAsset = 3,
  kUnauthorized = 4,          // the fee account may not trade
  kMarketNotTrading = 5,      // halted, or cancel-only for anything but cancels
  kInvalidOrderType = 6,      // an inconsistent type / time-in-force / side combination
  kInvalidPrice = 7,          // <= 0 or above the market's maximum price
  kInvalidQuantity = 8,       // <= 0, outside min/max quantity, or amend to <= filled
  kMinNotional = 9,           // price x quantity below the market's minimum notional
  kOverflow = 10,             // a product or a balance would not fit in int64
  kInsufficientBalance = 11,  // available balance below what the order must lock
  kWouldTakeLiquidity = 12,   // LIMIT_MAKER would cross the book
  kFokNotFillable = 13,       // not emitted: an unfillable FOK expires (ExpireReason)
  kDuplicateClientOrderId = 14,
  kUnknownOrder = 15,       // no such open order for this account and market
  kDuplicateTransfer = 16,  // a deposit/withdrawal reference already used
  kInvalidAmount = 17,      // deposit/withdrawal amount <= 0
  kInvalidStatus = 18,      // unknown market status value
  kNoChange = 19,           // amend that changes neither price nor quantity
  kQuantityIncrease = 20,   // a keep-priority amend to a larger quantity
  kCancelRestricted = 21,   // the order's state does not meet the cancel's restriction
  kUnknownTransfer = 22,    // no transfer to another venue waits under that id
  // A conditional order whose stop price the last trade price already meets.
  kWouldTriggerImmediately = 23,
  kInvalidTrailingDelta = 24,  // outside 1..9999 basis points, or on a non-conditional order
  kInvalidStopPrice = 25,      // missing, <= 0, above the maximum price, or on a
                               // non-conditional order
  // icebergQty on anything but a GTC LIMIT / LIMIT_MAKER order, below the
  // minimum quantity, or not below the order's quantity.
  kInvalidIcebergQty = 26,
  // An order list whose orders do not fit its type: sides, types,
  // quantities or the order of their prices (Binance's "The relationship of
  // the prices for the orders is not correct.").
  kInvalidOrderList = 27,
  kUnknownOrderList = 28,  // no open list of this account and market by that id
  // Accounts and API keys (AuthChange).
  kNameTaken = 29,          // another account has this name
  kNoAccountIdLeft = 30,    // every id below max_accounts is taken
  kKeyTaken = 31,           // the API key, or the Ed25519 public key, is registered already
  kUnknownApiKey = 32,      // no such API key
  kInvalidAuthChange = 33,  // an empty name, key or secret, or an unknown kind
  // Assets and markets added at run time (AddAsset, AddMarket).
  kSymbolTaken = 34,  // an asset or market has this symbol already
  // A definition the configuration file would refuse (ValidateNewAsset,
  // ValidateNewMarket), or no id left.
  kInvalidListing = 35,
};

// Why a transfer to another venue was refunded (TransferRefunded).
enum class RefundReason : uint8_t {
  kVoided = 0,              // an operator voided it
  kInvalidAddress = 1,      // the destination knows no such address
  kUnknownAsset = 2,        // the destination does not list the asset
  kAccountUnavailable = 3,  // the destination account cannot receive (closed, unknown)
  kRefused = 4,             // the destination refused it for another reason
};

// Why an order left the book or the matching loop without filling completely.
enum class ExpireReason : uint8_t {
  kIocRemainder = 0,  // IOC / FOK / MARKET remainder after matching
  kSelfTradePrevention = 1,
  // A MARKET order ran out of book. (Segments of format version 1 also use it
  // for a budget order stopped by its budget: kQuoteBudgetSpent came later.)
  kNoLiquidity = 2,
  kFokNotFillable = 3,  // FOK could not fill completely: expired on acceptance, nothing traded
  // A MARKET order by quote amount that spent its budget down to less than
  // one lot at the next price while the book still had liquidity: it is done
  // (Binance reports it FILLED, origQty = the executed quantity).
  kQuoteBudgetSpent = 4,
  // A triggered stop-market buy (kStopLoss / kTakeProfit by quantity, which
  // locks nothing while it waits) could not lock what the book walk costs.
  kInsufficientBalance = 5,
};

std::string_view ToString(Side v) noexcept;
std::string_view ToString(OrderType v) noexcept;
std::string_view ToString(TimeInForce v) noexcept;
std::string_view ToString(StpMode v) noexcept;
std::string_view ToString(MarketStatus v) noexcept;
std::string_view ToString(CancelRestriction v) noexcept;
std::string_view ToString(CancelReplaceMode v) noexcept;
std::string_view ToString(ListType v) noexcept;
std::string_view ToString(CommandType v) noexcept;
std::string_view ToString(RejectReason v) noexcept;
std::string_view ToString(ExpireReason v) noexcept;
std::string_view ToString(RefundReason v) noexcept;
std::string_view ToString(AuthChangeKind v) noexcept;

constexpr Side Opposite(Side s) noexcept { return s == Side::kBuy ? Side::kSell : Side::kBuy; }

// A stop-loss or take-profit order, of either flavour.
constexpr bool IsConditional(OrderType t) noexcept {
  return t == OrderType::kStopLoss || t == OrderType::kStopLossLimit ||
         t == OrderType::kTakeProfit || t == OrderType::kTakeProfitLimit;
}

// Matches at any price (no limit): MARKET, and the conditional orders that
// become MARKET orders when triggered.
constexpr bool IsMarketLike(OrderType t) noexcept {
  return t == OrderType::kMarket || t == OrderType::kStopLoss || t == OrderType::kTakeProfit;
}

// Whether a conditional order's stop condition is "last price >= stop price"
// (a stop-loss buy, a take-profit sell) rather than "last price <= stop
// price" (a stop-loss sell, a take-profit buy). Binance's table in
// docs/engine.md.
constexpr bool TriggersOnRise(OrderType t, Side s) noexcept {
  const bool stop_loss = t == OrderType::kStopLoss || t == OrderType::kStopLossLimit;
  return stop_loss == (s == Side::kBuy);
}

}  // namespace mb::engine
