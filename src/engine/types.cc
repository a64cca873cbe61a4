// Short, stable names of the engine's enums, for logs, tools and the API.
// Binance-facing values use Binance's spelling (BUY, LIMIT_MAKER, GTC,
// EXPIRE_TAKER, TRADING); internal ones use their enumerator name without the
// k. Names are part of the journal inspector's output: never rename.
#include "engine/types.h"

#include <string_view>

#include "engine/event.h"
#include "engine/ledger.h"

namespace mb::engine {

std::string_view ToString(Side v) noexcept {
  switch (v) {
    case Side::kBuy:
      return "BUY";
    case Side::kSell:
      return "SELL";
  }
  return "UNKNOWN";
}

std::string_view ToString(OrderType v) noexcept {
  switch (v) {
    case OrderType::kLimit:
      return "LIMIT";
    case OrderType::kLimitMaker:
      return "LIMIT_MAKER";
    case OrderType::kMarket:
      return "MARKET";
    case OrderType::kStopLoss:
      return "STOP_LOSS";
    case OrderType::kStopLossLimit:
      return "STOP_LOSS_LIMIT";
    case OrderType::kTakeProfit:
      return "TAKE_PROFIT";
    case OrderType::kTakeProfitLimit:
      return "TAKE_PROFIT_LIMIT";
  }
  return "UNKNOWN";
}

std::string_view ToString(TimeInForce v) noexcept {
  switch (v) {
    case TimeInForce::kGtc:
      return "GTC";
    case TimeInForce::kIoc:
      return "IOC";
    case TimeInForce::kFok:
      return "FOK";
  }
  return "UNKNOWN";
}

std::string_view ToString(StpMode v) noexcept {
  switch (v) {
    case StpMode::kNone:
      return "NONE";
    case StpMode::kExpireTaker:
      return "EXPIRE_TAKER";
    case StpMode::kExpireMaker:
      return "EXPIRE_MAKER";
    case StpMode::kExpireBoth:
      return "EXPIRE_BOTH";
  }
  return "UNKNOWN";
}

std::string_view ToString(MarketStatus v) noexcept {
  switch (v) {
    case MarketStatus::kTrading:
      return "TRADING";
    case MarketStatus::kHalted:
      return "HALTED";
    case MarketStatus::kCancelOnly:
      return "CANCEL_ONLY";
    case MarketStatus::kClosed:
      return "CLOSED";
  }
  return "UNKNOWN";
}

std::string_view ToString(CommandType v) noexcept {
  switch (v) {
    case CommandType::kPlaceOrder:
      return "PlaceOrder";
    case CommandType::kCancelOrder:
      return "CancelOrder";
    case CommandType::kCancelAll:
      return "CancelAll";
    case CommandType::kAmendOrder:
      return "AmendOrder";
    case CommandType::kDeposit:
      return "Deposit";
    case CommandType::kWithdraw:
      return "Withdraw";
    case CommandType::kSetMarketStatus:
      return "SetMarketStatus";
    case CommandType::kCancelReplace:
      return "CancelReplace";
    case CommandType::kTransferOut:
      return "TransferOut";
    case CommandType::kResolveTransfer:
      return "ResolveTransfer";
    case CommandType::kPlaceOrderList:
      return "PlaceOrderList";
    case CommandType::kCancelOrderList:
      return "CancelOrderList";
    case CommandType::kChangeAuth:
      return "ChangeAuth";
    case CommandType::kAddAsset:
      return "AddAsset";
    case CommandType::kAddMarket:
      return "AddMarket";
  }
  return "UNKNOWN";
}

std::string_view ToString(ListType v) noexcept {
  switch (v) {
    case ListType::kOco:
      return "OCO";
    case ListType::kOto:
      return "OTO";
    case ListType::kOtoco:
      return "OTOCO";
  }
  return "UNKNOWN";
}

std::string_view ToString(RejectReason v) noexcept {
  switch (v) {
    case RejectReason::kNone:
      return "None";
    case RejectReason::kUnknownMarket:
      return "UnknownMarket";
    case RejectReason::kUnknownAccount:
      return "UnknownAccount";
    case RejectReason::kUnknownAsset:
      return "UnknownAsset";
    case RejectReason::kUnauthorized:
      return "Unauthorized";
    case RejectReason::kMarketNotTrading:
      return "MarketNotTrading";
    case RejectReason::kInvalidOrderType:
      return "InvalidOrderType";
    case RejectReason::kInvalidPrice:
      return "InvalidPrice";
    case RejectReason::kInvalidQuantity:
      return "InvalidQuantity";
    case RejectReason::kMinNotional:
      return "MinNotional";
    case RejectReason::kOverflow:
      return "Overflow";
    case RejectReason::kInsufficientBalance:
      return "InsufficientBalance";
    case RejectReason::kWouldTakeLiquidity:
      return "WouldTakeLiquidity";
    case RejectReason::kFokNotFillable:
      return "FokNotFillable";
    case RejectReason::kDuplicateClientOrderId:
      return "DuplicateClientOrderId";
    case RejectReason::kUnknownOrder:
      return "UnknownOrder";
    case RejectReason::kDuplicateTransfer:
      return "DuplicateTransfer";
    case RejectReason::kInvalidAmount:
      return "InvalidAmount";
    case RejectReason::kInvalidStatus:
      return "InvalidStatus";
    case RejectReason::kNoChange:
      return "NoChange";
    case RejectReason::kQuantityIncrease:
      return "QuantityIncrease";
    case RejectReason::kCancelRestricted:
      return "CancelRestricted";
    case RejectReason::kUnknownTransfer:
      return "UnknownTransfer";
    case RejectReason::kWouldTriggerImmediately:
      return "WouldTriggerImmediately";
    case RejectReason::kInvalidTrailingDelta:
      return "InvalidTrailingDelta";
    case RejectReason::kInvalidStopPrice:
      return "InvalidStopPrice";
    case RejectReason::kInvalidIcebergQty:
      return "InvalidIcebergQty";
    case RejectReason::kInvalidOrderList:
      return "InvalidOrderList";
    case RejectReason::kUnknownOrderList:
      return "UnknownOrderList";
    case RejectReason::kNameTaken:
      return "NameTaken";
    case RejectReason::kNoAccountIdLeft:
      return "NoAccountIdLeft";
    case RejectReason::kKeyTaken:
      return "KeyTaken";
    case RejectReason::kUnknownApiKey:
      return "UnknownApiKey";
    case RejectReason::kInvalidAuthChange:
      return "InvalidAuthChange";
    case RejectReason::kSymbolTaken:
      return "SymbolTaken";
    case RejectReason::kInvalidListing:
      return "InvalidListing";
  }
  return "UNKNOWN";
}

std::string_view ToString(RefundReason v) noexcept {
  switch (v) {
    case RefundReason::kVoided:
      return "VOIDED";
    case RefundReason::kInvalidAddress:
      return "INVALID_ADDRESS";
    case RefundReason::kUnknownAsset:
      return "UNKNOWN_ASSET";
    case RefundReason::kAccountUnavailable:
      return "ACCOUNT_UNAVAILABLE";
    case RefundReason::kRefused:
      return "REFUSED";
  }
  return "UNKNOWN";
}

std::string_view ToString(CancelRestriction v) noexcept {
  switch (v) {
    case CancelRestriction::kNone:
      return "NONE";
    case CancelRestriction::kOnlyNew:
      return "ONLY_NEW";
    case CancelRestriction::kOnlyPartiallyFilled:
      return "ONLY_PARTIALLY_FILLED";
  }
  return "UNKNOWN";
}

std::string_view ToString(CancelReplaceMode v) noexcept {
  switch (v) {
    case CancelReplaceMode::kStopOnFailure:
      return "STOP_ON_FAILURE";
    case CancelReplaceMode::kAllowFailure:
      return "ALLOW_FAILURE";
  }
  return "UNKNOWN";
}

std::string_view ToString(ExpireReason v) noexcept {
  switch (v) {
    case ExpireReason::kIocRemainder:
      return "IocRemainder";
    case ExpireReason::kSelfTradePrevention:
      return "SelfTradePrevention";
    case ExpireReason::kNoLiquidity:
      return "NoLiquidity";
    case ExpireReason::kFokNotFillable:
      return "FokNotFillable";
    case ExpireReason::kQuoteBudgetSpent:
      return "QuoteBudgetSpent";
    case ExpireReason::kInsufficientBalance:
      return "InsufficientBalance";
  }
  return "UNKNOWN";
}

std::string_view ToString(EventType v) noexcept {
  switch (v) {
    case EventType::kOrderAccepted:
      return "OrderAccepted";
    case EventType::kRejected:
      return "Rejected";
    case EventType::kTrade:
      return "Trade";
    case EventType::kOrderRested:
      return "OrderRested";
    case EventType::kOrderCanceled:
      return "OrderCanceled";
    case EventType::kOrderExpired:
      return "OrderExpired";
    case EventType::kOrderAmended:
      return "OrderAmended";
    case EventType::kDeposited:
      return "Deposited";
    case EventType::kWithdrawn:
      return "Withdrawn";
    case EventType::kMarketStatusChanged:
      return "MarketStatusChanged";
    case EventType::kClientOrderIdChanged:
      return "ClientOrderIdChanged";
    case EventType::kTransferHeld:
      return "TransferHeld";
    case EventType::kTransferCompleted:
      return "TransferCompleted";
    case EventType::kTransferRefunded:
      return "TransferRefunded";
    case EventType::kOrderArmed:
      return "OrderArmed";
    case EventType::kOrderTriggered:
      return "OrderTriggered";
    case EventType::kIcebergAccepted:
      return "IcebergAccepted";
    case EventType::kIcebergRefilled:
      return "IcebergRefilled";
    case EventType::kListAccepted:
      return "ListAccepted";
    case EventType::kOrderPending:
      return "OrderPending";
    case EventType::kListDone:
      return "ListDone";
    case EventType::kAuthChanged:
      return "AuthChanged";
    case EventType::kAssetAdded:
      return "AssetAdded";
    case EventType::kMarketAdded:
      return "MarketAdded";
  }
  return "UNKNOWN";
}

std::string_view ToString(AuthChangeKind v) noexcept {
  switch (v) {
    case AuthChangeKind::kCreateAccount:
      return "CREATE_ACCOUNT";
    case AuthChangeKind::kCreateKey:
      return "CREATE_KEY";
    case AuthChangeKind::kRevokeKey:
      return "REVOKE_KEY";
  }
  return "UNKNOWN";
}

std::string_view ToString(LedgerReason v) noexcept {
  switch (v) {
    case LedgerReason::kOrderLock:
      return "OrderLock";
    case LedgerReason::kOrderRelease:
      return "OrderRelease";
    case LedgerReason::kTradeSpend:
      return "TradeSpend";
    case LedgerReason::kTradeReceive:
      return "TradeReceive";
    case LedgerReason::kFee:
      return "Fee";
    case LedgerReason::kFeeIncome:
      return "FeeIncome";
    case LedgerReason::kDeposit:
      return "Deposit";
    case LedgerReason::kWithdrawal:
      return "Withdrawal";
    case LedgerReason::kTransferHold:
      return "TransferHold";
    case LedgerReason::kTransferOut:
      return "TransferOut";
    case LedgerReason::kTransferRefund:
      return "TransferRefund";
  }
  return "UNKNOWN";
}

}  // namespace mb::engine
