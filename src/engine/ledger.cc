#include "engine/ledger.h"

namespace mb::engine {
namespace {

class Lines {
 public:
  Lines(Sequence seq, RefKind kind, uint64_t ref, std::vector<LedgerEntry>* out)
      : seq_(seq), kind_(kind), ref_(ref), out_(out) {}

  void Add(AccountId account, AssetId asset, Bucket bucket, int64_t delta, LedgerReason reason) {
    if (delta == 0) return;
    out_->push_back(LedgerEntry{seq_, account, asset, bucket, delta, reason, kind_, ref_});
  }

  // available <-> locked within one account: a lock when amount > 0.
  void Move(AccountId account, AssetId asset, int64_t amount) {
    LedgerReason r = amount > 0 ? LedgerReason::kOrderLock : LedgerReason::kOrderRelease;
    Add(account, asset, Bucket::kAvailable, -amount, r);
    Add(account, asset, Bucket::kLocked, amount, r);
  }

 private:
  Sequence seq_;
  RefKind kind_;
  uint64_t ref_;
  std::vector<LedgerEntry>* out_;
};

}  // namespace

void AppendLedgerEntries(const EngineConfig& config, const Event& event,
                         std::vector<LedgerEntry>* out) {
  switch (event.type()) {
    case EventType::kOrderAccepted: {
      const auto& a = std::get<OrderAccepted>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(a.order_id), out);
      l.Move(a.terms.account, SpendAsset(config.markets[Raw(a.terms.market)], a.terms.side),
             a.locked.value);
      break;
    }
    case EventType::kTrade: {
      const auto& t = std::get<Trade>(event.body);
      const MarketSpec& m = config.markets[Raw(t.market)];
      const bool taker_buys = t.taker_side == Side::kBuy;
      AccountId buyer = taker_buys ? t.taker_account : t.maker_account;
      AccountId seller = taker_buys ? t.maker_account : t.taker_account;
      int64_t buyer_fee = (taker_buys ? t.taker_fee : t.maker_fee).value;
      int64_t seller_fee = (taker_buys ? t.maker_fee : t.taker_fee).value;
      Lines l(event.seq, RefKind::kTrade, Raw(t.trade_id), out);
      l.Add(buyer, m.quote, Bucket::kLocked, -t.notional.value, LedgerReason::kTradeSpend);
      l.Add(seller, m.quote, Bucket::kAvailable, t.notional.value, LedgerReason::kTradeReceive);
      l.Add(seller, m.base, Bucket::kLocked, -t.base_qty.value, LedgerReason::kTradeSpend);
      l.Add(buyer, m.base, Bucket::kAvailable, t.base_qty.value, LedgerReason::kTradeReceive);
      l.Add(buyer, m.base, Bucket::kAvailable, -buyer_fee, LedgerReason::kFee);
      l.Add(config.fee_account, m.base, Bucket::kAvailable, buyer_fee, LedgerReason::kFeeIncome);
      l.Add(seller, m.quote, Bucket::kAvailable, -seller_fee, LedgerReason::kFee);
      l.Add(config.fee_account, m.quote, Bucket::kAvailable, seller_fee, LedgerReason::kFeeIncome);
      if (t.taker_released.value != 0) {
        // The price-improvement surplus goes back to the taker, referenced to its order.
        Lines r(event.seq, RefKind::kOrder, Raw(t.taker_order_id), out);
        r.Move(t.taker_account, SpendAsset(m, t.taker_side), -t.taker_released.value);
      }
      break;
    }
    case EventType::kOrderCanceled: {
      const auto& c = std::get<OrderCanceled>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(c.order_id), out);
      l.Move(c.account, SpendAsset(config.markets[Raw(c.market)], c.side), -c.released.value);
      break;
    }
    case EventType::kOrderExpired: {
      const auto& x = std::get<OrderExpired>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(x.order_id), out);
      l.Move(x.account, SpendAsset(config.markets[Raw(x.market)], x.side), -x.released.value);
      break;
    }
    case EventType::kOrderAmended: {
      const auto& a = std::get<OrderAmended>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(a.order_id), out);
      l.Move(a.account, SpendAsset(config.markets[Raw(a.market)], a.side), a.lock_delta.value);
      break;
    }
    case EventType::kDeposited: {
      const auto& d = std::get<Deposited>(event.body);
      Lines l(event.seq, RefKind::kTransfer, Raw(d.transfer_id), out);
      l.Add(d.account, d.asset, Bucket::kAvailable, d.amount.value, LedgerReason::kDeposit);
      break;
    }
    case EventType::kWithdrawn: {
      const auto& w = std::get<Withdrawn>(event.body);
      Lines l(event.seq, RefKind::kTransfer, Raw(w.transfer_id), out);
      l.Add(w.account, w.asset, Bucket::kAvailable, -w.amount.value, LedgerReason::kWithdrawal);
      break;
    }
    case EventType::kTransferHeld: {
      const auto& t = std::get<TransferHeld>(event.body);
      Lines l(event.seq, RefKind::kTransfer, Raw(t.transfer_id), out);
      l.Add(t.account, t.asset, Bucket::kAvailable, -t.amount.value, LedgerReason::kTransferHold);
      l.Add(t.account, t.asset, Bucket::kHeld, t.amount.value, LedgerReason::kTransferHold);
      break;
    }
    case EventType::kTransferCompleted: {
      const auto& t = std::get<TransferCompleted>(event.body);
      Lines l(event.seq, RefKind::kTransfer, Raw(t.transfer_id), out);
      l.Add(t.account, t.asset, Bucket::kHeld, -(t.amount - t.fee).value,
            LedgerReason::kTransferOut);
      if (t.fee.value != 0) {
        l.Add(t.account, t.asset, Bucket::kHeld, -t.fee.value, LedgerReason::kFee);
        l.Add(config.fee_account, t.asset, Bucket::kAvailable, t.fee.value,
              LedgerReason::kFeeIncome);
      }
      break;
    }
    case EventType::kTransferRefunded: {
      const auto& t = std::get<TransferRefunded>(event.body);
      Lines l(event.seq, RefKind::kTransfer, Raw(t.transfer_id), out);
      l.Add(t.account, t.asset, Bucket::kHeld, -t.amount.value, LedgerReason::kTransferRefund);
      l.Add(t.account, t.asset, Bucket::kAvailable, t.amount.value, LedgerReason::kTransferRefund);
      break;
    }
    case EventType::kOrderRested: {
      const auto& r = std::get<OrderRested>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(r.order_id), out);
      l.Move(r.account, SpendAsset(config.markets[Raw(r.market)], r.side), -r.released.value);
      break;
    }
    case EventType::kOrderTriggered: {
      const auto& t = std::get<OrderTriggered>(event.body);
      Lines l(event.seq, RefKind::kOrder, Raw(t.order_id), out);
      l.Move(t.account, SpendAsset(config.markets[Raw(t.market)], t.side), t.lock_delta.value);
      break;
    }
    case EventType::kRejected:
    case EventType::kMarketStatusChanged:
    case EventType::kClientOrderIdChanged:
    case EventType::kOrderArmed:
    case EventType::kIcebergAccepted:
    case EventType::kIcebergRefilled:
    case EventType::kListAccepted:
    case EventType::kOrderPending:
    case EventType::kListDone:
    case EventType::kAuthChanged:
    case EventType::kAssetAdded:
    case EventType::kMarketAdded:
      break;
  }
}

}  // namespace mb::engine
