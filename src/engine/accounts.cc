#include "engine/accounts.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mb::engine {

Accounts::Accounts(uint32_t max_accounts, std::size_t assets, uint32_t expected_open_orders,
                   uint32_t client_id_memory)
    : max_accounts_(max_accounts),
      assets_(assets),
      balances_(static_cast<std::size_t>(max_accounts) * assets),
      supply_(assets),
      transfers_(1024),
      held_(assets),
      pending_(64),
      client_ids_(expected_open_orders / 16 + client_id_memory),
      recent_(client_id_memory) {}

void Accounts::AddAsset() {
  const std::size_t n = assets_ + 1;
  std::vector<Balance> wider(static_cast<std::size_t>(max_accounts_) * n);
  for (std::size_t a = 0; a < max_accounts_; ++a) {
    std::copy_n(balances_.begin() + static_cast<std::ptrdiff_t>(a * assets_), assets_,
                wider.begin() + static_cast<std::ptrdiff_t>(a * n));
  }
  balances_ = std::move(wider);
  supply_.emplace_back();
  held_.emplace_back();
  assets_ = n;
}

void Accounts::Deposit(AccountId a, AssetId s, Amount amount, const Key128& ref, TransferId id) {
  balances_[Slot(a, s)].available += amount;
  supply_[Raw(s)] += amount;
  transfers_.Put(ref, id);
}

const Balance& Accounts::Withdraw(AccountId a, AssetId s, Amount amount, const Key128& ref,
                                  TransferId id) {
  Balance& b = balances_[Slot(a, s)];
  b.available -= amount;
  supply_[Raw(s)] -= amount;
  transfers_.Put(ref, id);
  return b;
}

const Balance& Accounts::Hold(const PendingTransfer& t, const Key128& ref) {
  Balance& b = balances_[Slot(t.account, t.asset)];
  b.available -= t.amount;
  held_[Raw(t.asset)] += t.amount;
  transfers_.Put(ref, t.id);
  pending_.Put(t.id, t);
  return b;
}

const Balance& Accounts::Unhold(TransferId id, bool refund) {
  const PendingTransfer t = *pending_.Find(id);
  Balance& b = balances_[Slot(t.account, t.asset)];
  held_[Raw(t.asset)] -= t.amount;
  if (refund) b.available += t.amount;
  pending_.Erase(id);
  return b;
}

void Accounts::RestorePending(const PendingTransfer& t) {
  held_[Raw(t.asset)] += t.amount;
  pending_.Put(t.id, t);
}

void Accounts::ReserveClientId(AccountId a, const Key128& id, OrderId order) {
  if (recent_count_ == recent_.size()) {
    const RecentId& old = recent_[recent_head_];
    const OrderId* held = client_ids_.Find(old.key);
    // The oldest reservation ends; its id is freed if the table still gives it that order.
    if (held != nullptr && *held == old.order) client_ids_.Erase(old.key);
    recent_head_ = (recent_head_ + 1) % recent_.size();
    --recent_count_;
  }
  recent_[(recent_head_ + recent_count_) % recent_.size()] = RecentId{ClientKey{a, id}, order};
  ++recent_count_;
}

}  // namespace mb::engine
