// EngineImage: the whole engine state at one sequence, as plain data. The codec
// (codec/codec.h) turns it into bytes; Engine::ExportImage / Engine::Restore
// move it in and out of the live structures. Ordering is canonical, so two
// engines with the same history export identical images.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/event.h"
#include "engine/order_terms.h"
#include "engine/types.h"

namespace mb::engine {

// 128-bit hash of a client order id or transfer reference (XXH3-128).
struct Key128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Key128&, const Key128&) = default;
};

struct ImageOrder {
  OrderId id{};
  OrderTerms terms{};
  Qty remaining{};
  Amount locked{};
  int64_t created_ns = 0;
  bool has_client_id = false;
  Key128 client_id{};
};

struct ImageBalance {
  AccountId account{};
  AssetId asset{};
  Amount available{};
  Amount locked{};
};

// A client order id of a closed order that stays reserved (oldest first).
struct ImageClientId {
  AccountId account{};
  Key128 client_id{};
  OrderId order_id{};
};

struct ImageTransfer {
  Key128 ref{};
  TransferId id{};
};

// A transfer to another venue, held until the destination answers
// (TransferHeld, not yet TransferCompleted / TransferRefunded).
struct PendingTransfer {
  TransferId id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  Amount fee{};
  TransferAddress address{};
};

// A conditional order waiting for its trigger (engine/types.h IsConditional):
// open, in no level, nothing of it executed (remaining == terms.qty).
struct ImageStop {
  ImageOrder order{};
  Price stop_price{};          // 0: a trailing stop without an activation price
  int32_t trailing_delta = 0;  // basis points; 0: a plain stop
  bool active = false;         // a trailing stop tracks the price
  Price extreme{};             // its best last price so far (0: none yet)
};

// A resting iceberg order (its ImageOrder's remaining is the visible part).
struct ImageIceberg {
  OrderId id{};
  Qty slice{};
  Qty hidden{};
};

// An order list not done yet; orders[k] its k-th order's id (0: none).
struct ImageList {
  uint64_t id = 0;
  AccountId account{};
  MarketId market{};
  ListType type = ListType::kOco;
  bool has_client_id = false;
  Key128 client_id{};
  OrderId orders[3]{};
};

// Deposits minus withdrawals of one asset: what all accounts (the fee account
// included) hold of it in total.
struct ImageAssetTotals {
  Amount supply{};
};

// The operator's accounts (ids 1, 2, ... in order) and API keys (in the
// order they were made), as AuthChange made them.
struct ImageAccount {
  AccountId id{};
  int64_t created_ms = 0;
  AuthText name{};
};

struct ImageApiKey {
  AccountId account{};
  int64_t created_ms = 0;
  uint8_t permissions = 0;
  bool ed25519 = false;
  bool revoked = false;
  AuthText key{};
  AuthText secret{};  // the HMAC secret, or the base64 Ed25519 public key
};

struct EngineImage {
  uint64_t config_hash = 0;  // Engine::ConfigHash() of the configuration it ran with
  Sequence last_sequence{};
  TradeId next_trade_id{1};
  std::vector<MarketStatus> market_status;     // by MarketId
  std::vector<ImageAssetTotals> asset_totals;  // by AssetId
  std::vector<ImageBalance> balances;          // non-zero only, by (account, asset)
  // Resting orders in priority order: by market, bids best-first then asks
  // best-first, FIFO within a level.
  std::vector<ImageOrder> orders;
  std::vector<ImageClientId> recent_client_ids;    // oldest first
  std::vector<ImageTransfer> transfers;            // by ref (lo, hi) ascending
  std::vector<PendingTransfer> pending_transfers;  // by id ascending
  // Each market's last trade price (0: none yet), by MarketId; the waiting
  // conditional orders and the resting icebergs, by id ascending. Images of
  // format 2 and older have none of them.
  std::vector<Price> last_prices;
  std::vector<ImageStop> stops;
  std::vector<ImageIceberg> icebergs;  // by id ascending (format 3)
  std::vector<ImageList> lists;        // by id ascending (format 3)
  std::vector<OrderPending> pending;   // lists' pending orders, by id ascending (format 3)
  std::vector<ImageAccount> accounts;  // by id ascending (format 4)
  std::vector<ImageApiKey> api_keys;   // in creation order (format 4)
  // Assets and markets added at run time (AddAsset, AddMarket), by id
  // ascending, after the configuration's own (format 4). config_hash stays
  // the hash of the configuration the engine started with.
  std::vector<AssetAdded> added_assets;
  std::vector<MarketAdded> added_markets;
};

// The state hash of an image: Engine::StateHash() == HashImage(ExportImage()).
uint64_t HashImage(const EngineImage& image);

}  // namespace mb::engine
