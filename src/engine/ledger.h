// The ledger view of the event stream: every balance change as a double-entry
// line (account, asset, bucket, delta, reason, reference). Events carry the
// amounts; this expands them, so the ledger is exactly as durable as the
// journal and needs no state of its own.
//
// Thread safety: pure functions over immutable configuration.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/strong.h"
#include "engine/event.h"
#include "engine/market.h"

namespace mb::engine {

// kHeld: what a transfer to another venue holds until the destination
// answers (one line per transfer; neither available nor locked).
enum class Bucket : uint8_t { kAvailable = 0, kLocked = 1, kHeld = 2 };

enum class LedgerReason : uint8_t {
  kOrderLock = 0,     // available -> locked when an order is accepted or amended up
  kOrderRelease = 1,  // locked -> available on cancel, expiry, amend down, price improvement
  kTradeSpend = 2,    // locked funds paid to the counterparty
  kTradeReceive = 3,  // funds received from the counterparty, before fee
  kFee = 4,           // fee paid (negative) by a trader
  kFeeIncome = 5,     // fee credited to the fee account
  kDeposit = 6,
  kWithdrawal = 7,
  kTransferHold = 8,     // available -> held: a transfer to another venue accepted
  kTransferOut = 9,      // the held amount left for the destination (completed)
  kTransferRefund = 10,  // held -> available: the destination refused, or voided
};

enum class RefKind : uint8_t { kOrder = 0, kTrade = 1, kTransfer = 2 };

struct LedgerEntry {
  Sequence seq{};
  AccountId account{};
  AssetId asset{};
  Bucket bucket = Bucket::kAvailable;
  int64_t delta = 0;
  LedgerReason reason = LedgerReason::kOrderLock;
  RefKind ref_kind = RefKind::kOrder;
  uint64_t ref = 0;  // OrderId, TradeId or TransferId
};

// Appends the ledger lines of one event to *out. Lines of one trade sum to zero
// per asset (the fee account's income balances the fees paid); a lock or a
// release sums to zero per account and asset. Rejects and market status changes
// append nothing. A price-improvement release (Trade.taker_released,
// OrderRested.released) is referenced to the order, not the trade.
void AppendLedgerEntries(const EngineConfig& config, const Event& event,
                         std::vector<LedgerEntry>* out);

std::string_view ToString(LedgerReason v) noexcept;

}  // namespace mb::engine
