// The engine's accounts: each account's balance of each asset (available and
// locked), each asset's supply (deposits minus withdrawals) and held total
// (transfers to other venues not yet resolved, one record each), the transfer
// references already used, and the client order ids an account may not use
// again: those of its open orders and of the last EngineConfig::client_id_memory
// orders closed (oldest forgotten first).
//
// Balances sit in one array indexed by (account, asset), sized for every valid
// account at start, so a balance change is an indexed add. The tables of
// client ids and transfer references are open-addressing hash tables keyed by
// the strings' 128-bit hashes (internal/key128.h).
//
// This is a part of Engine (engine/engine.h): decide checks balances and ids
// here, evolve moves the funds. Nothing here checks a balance's sign; evolve
// checks what docs/architecture.md ("The domain's invariants") requires after each move (MB_CHECK)
// and CheckInvariants() checks the totals.
//
// Thread safety: none; owned by the engine thread, like the Engine holding it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/image.h"
#include "engine/internal/flat_map.h"

namespace mb::engine {

class Accounts {
 public:
  Accounts(uint32_t max_accounts, std::size_t assets, uint32_t expected_open_orders,
           uint32_t client_id_memory);
  Accounts(const Accounts&) = delete;
  Accounts& operator=(const Accounts&) = delete;

  uint32_t max_accounts() const noexcept { return max_accounts_; }
  std::size_t assets() const noexcept { return assets_; }
  // One more asset under the next AssetId (AddAsset): every account holds
  // none of it. Lays the balances out again: O(max_accounts x assets).
  void AddAsset();

  // --- balances -----------------------------------------------------------
  // REQUIRES (each): account < max_accounts(), asset < assets(). Those that
  // change a balance return it, for the caller's checks.

  const Balance& balance(AccountId a, AssetId s) const noexcept { return balances_[Slot(a, s)]; }
  // available -> locked; a negative amount moves funds back.
  const Balance& Lock(AccountId a, AssetId s, Amount amount) noexcept;
  // locked -> available.
  const Balance& Release(AccountId a, AssetId s, Amount amount) noexcept;
  // Locked funds paid to a counterparty.
  const Balance& Spend(AccountId a, AssetId s, Amount amount) noexcept;
  // Funds received into available.
  const Balance& Credit(AccountId a, AssetId s, Amount amount) noexcept;
  // Replaces a balance (restoring an image).
  void SetBalance(AccountId a, AssetId s, Balance b) noexcept { balances_[Slot(a, s)] = b; }

  // --- deposits, withdrawals, supply --------------------------------------

  // Deposits minus withdrawals of an asset. Aborts on an unknown asset.
  Amount supply(AssetId s) const noexcept { return supply_.at(Raw(s)); }
  void SetSupply(AssetId s, Amount supply) noexcept { supply_[Raw(s)] = supply; }
  // Credits available and the supply, and records the reference.
  void Deposit(AccountId a, AssetId s, Amount amount, const Key128& ref, TransferId id);
  // Debits available and the supply, and records the reference.
  const Balance& Withdraw(AccountId a, AssetId s, Amount amount, const Key128& ref, TransferId id);
  // --- transfers to other venues: held until resolved ----------------------

  // What all pending transfers of an asset hold.
  Amount held(AssetId s) const noexcept { return held_.at(Raw(s)); }
  // The pending transfer with that id, or null.
  const PendingTransfer* FindPending(TransferId id) const noexcept { return pending_.Find(id); }
  std::size_t pending_count() const noexcept { return pending_.size(); }
  // available -> held, and records the reference and the pending transfer.
  const Balance& Hold(const PendingTransfer& t, const Key128& ref);
  // Ends a pending transfer: the hold leaves the held total; refunded, it
  // returns to available. REQUIRES: FindPending(id) != null.
  const Balance& Unhold(TransferId id, bool refund);
  // Restoring an image: a pending transfer (its reference is restored apart).
  void RestorePending(const PendingTransfer& t);
  // f(const TransferId&, const PendingTransfer&) for every pending transfer, in no order.
  template <class F>
  void ForEachPending(F&& f) const {
    pending_.ForEach(f);
  }

  // The transfer that used a reference, or null.
  const TransferId* FindTransfer(const Key128& ref) const noexcept { return transfers_.Find(ref); }
  void RecordTransfer(const Key128& ref, TransferId id) { transfers_.Put(ref, id); }
  // f(const Key128& ref, const TransferId& id) for every transfer, in no order.
  template <class F>
  void ForEachTransfer(F&& f) const {
    transfers_.ForEach(f);
  }

  // --- client order ids ---------------------------------------------------

  // The order (open, or closed and remembered) that used a client id, or null.
  const OrderId* FindClientId(AccountId a, const Key128& id) const noexcept {
    return client_ids_.Find(ClientKey{a, id});
  }
  // An order opens with a client id.
  void HoldClientId(AccountId a, const Key128& id, OrderId order) {
    client_ids_.Put(ClientKey{a, id}, order);
  }
  // An order with a client id closed and its id is free (Binance's rule).
  void ReleaseClientId(AccountId a, const Key128& id, OrderId order) {
    const OrderId* held = client_ids_.Find(ClientKey{a, id});
    if (held != nullptr && *held == order) client_ids_.Erase(ClientKey{a, id});
  }
  // An order with a client id closed: the id stays taken until client_id_memory
  // later closes push it out (then it is free, unless an open order took it).
  void ReserveClientId(AccountId a, const Key128& id, OrderId order);
  std::size_t client_id_memory() const noexcept { return recent_.size(); }
  std::size_t reserved_client_ids() const noexcept { return recent_count_; }
  // f(AccountId, const Key128& client_id, OrderId) for the closed orders'
  // reserved ids, oldest first.
  template <class F>
  void ForEachReservedClientId(F&& f) const {
    for (std::size_t k = 0; k < recent_count_; ++k) {
      const RecentId& r = recent_[(recent_head_ + k) % recent_.size()];
      f(r.key.account, r.key.id, r.order);
    }
  }

 private:
  struct ClientKey {
    AccountId account{};
    Key128 id{};
    friend bool operator==(const ClientKey&, const ClientKey&) = default;
  };
  struct ClientKeyHash {
    uint64_t operator()(const ClientKey& k) const noexcept {
      return k.id.lo ^ (uint64_t{Raw(k.account)} * internal::kGolden);
    }
  };
  struct TransferIdHash {
    uint64_t operator()(TransferId id) const noexcept { return Raw(id) * internal::kGolden; }
  };
  struct Key128Hash {
    uint64_t operator()(const Key128& k) const noexcept { return k.lo ^ k.hi; }
  };
  struct RecentId {
    ClientKey key{};
    OrderId order{};
  };

  std::size_t Slot(AccountId a, AssetId s) const noexcept { return Raw(a) * assets_ + Raw(s); }

  // One writer: the engine thread.
  uint32_t max_accounts_;
  std::size_t assets_;
  std::vector<Balance> balances_;  // [account * assets + asset]
  std::vector<Amount> supply_;     // deposits - withdrawals, per asset
  internal::FlatMap<Key128, TransferId, Key128Hash> transfers_;
  std::vector<Amount> held_;  // pending transfers' holds, per asset
  internal::FlatMap<TransferId, PendingTransfer, TransferIdHash> pending_;
  internal::FlatMap<ClientKey, OrderId, ClientKeyHash> client_ids_;  // open and remembered
  std::vector<RecentId> recent_;  // ring of reserved client ids of closed orders
  std::size_t recent_head_ = 0;
  std::size_t recent_count_ = 0;
};

// ---- the matching path, inline --------------------------------------------

inline const Balance& Accounts::Lock(AccountId a, AssetId s, Amount amount) noexcept {
  Balance& b = balances_[Slot(a, s)];
  b.available -= amount;
  b.locked += amount;
  return b;
}

inline const Balance& Accounts::Release(AccountId a, AssetId s, Amount amount) noexcept {
  Balance& b = balances_[Slot(a, s)];
  b.locked -= amount;
  b.available += amount;
  return b;
}

inline const Balance& Accounts::Spend(AccountId a, AssetId s, Amount amount) noexcept {
  Balance& b = balances_[Slot(a, s)];
  b.locked -= amount;
  return b;
}

inline const Balance& Accounts::Credit(AccountId a, AssetId s, Amount amount) noexcept {
  Balance& b = balances_[Slot(a, s)];
  b.available += amount;
  return b;
}

}  // namespace mb::engine
