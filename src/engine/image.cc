// The engine's image: EngineImage out of and back into the live structures,
// and the hashes over an image and over a configuration.
#include "engine/image.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/checked.h"
#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/engine.h"
#include "engine/internal/engine_impl.h"
#include "engine/listing.h"

namespace mb::engine {
namespace {

using internal::EnumInRange;

class Hasher {
 public:
  Hasher() { XXH3_64bits_reset(&state_); }
  void Add(int64_t v) noexcept { XXH3_64bits_update(&state_, &v, sizeof v); }
  void Add(uint64_t v) noexcept { XXH3_64bits_update(&state_, &v, sizeof v); }
  void Add(std::string_view s) noexcept {
    Add(static_cast<uint64_t>(s.size()));
    XXH3_64bits_update(&state_, s.data(), s.size());
  }
  uint64_t Digest() const noexcept { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

}  // namespace

uint64_t HashConfig(const EngineConfig& config) {
  Hasher h;
  h.Add(uint64_t{config.assets.size()});
  for (const auto& a : config.assets) {
    h.Add(a.symbol);
    h.Add(int64_t{a.scale});
  }
  h.Add(uint64_t{config.markets.size()});
  for (const auto& m : config.markets) {
    h.Add(m.symbol);
    h.Add(uint64_t{Raw(m.base)});
    h.Add(uint64_t{Raw(m.quote)});
    h.Add(m.tick_units);
    h.Add(m.lot_units);
    h.Add(m.min_qty.value);
    h.Add(m.max_qty.value);
    h.Add(m.max_price.value);
    h.Add(m.min_notional.value);
    h.Add(int64_t{m.maker_fee_bps});
    h.Add(int64_t{m.taker_fee_bps});
  }
  h.Add(uint64_t{config.max_accounts});
  h.Add(uint64_t{Raw(config.fee_account)});
  h.Add(uint64_t{config.client_id_memory});
  if (config.client_order_ids != ClientOrderIds::kBinance) {
    h.Add(uint64_t{static_cast<uint8_t>(config.client_order_ids)});
  }
  return h.Digest();
}

uint64_t HashImage(const EngineImage& img) {
  Hasher h;
  h.Add(img.config_hash);
  h.Add(uint64_t{Raw(img.last_sequence)});
  h.Add(uint64_t{Raw(img.next_trade_id)});
  for (MarketStatus s : img.market_status) h.Add(uint64_t{Raw(s)});
  for (const auto& t : img.asset_totals) h.Add(t.supply.value);
  for (const auto& b : img.balances) {
    h.Add(uint64_t{Raw(b.account)});
    h.Add(uint64_t{Raw(b.asset)});
    h.Add(b.available.value);
    h.Add(b.locked.value);
  }
  for (const auto& o : img.orders) {
    const OrderTerms& t = o.terms;
    h.Add(uint64_t{Raw(o.id)});
    h.Add(uint64_t{Raw(t.account)});
    h.Add(uint64_t{Raw(t.market)});
    h.Add(uint64_t{Raw(t.side)} | uint64_t{Raw(t.type)} << 8 | uint64_t{Raw(t.tif)} << 16 |
          uint64_t{Raw(t.stp)} << 24 | uint64_t{o.has_client_id} << 32);
    h.Add(t.price.value);
    h.Add(t.qty.value);
    h.Add(o.remaining.value);
    h.Add(o.locked.value);
    h.Add(o.created_ns);
    h.Add(o.client_id.lo);
    h.Add(o.client_id.hi);
  }
  for (const auto& c : img.recent_client_ids) {
    h.Add(uint64_t{Raw(c.account)});
    h.Add(c.client_id.lo);
    h.Add(c.client_id.hi);
    h.Add(uint64_t{Raw(c.order_id)});
  }
  for (const auto& t : img.transfers) {
    h.Add(t.ref.lo);
    h.Add(t.ref.hi);
    h.Add(uint64_t{Raw(t.id)});
  }
  // Only when some are pending: the hashes of states without any stay those
  // of the images that had no such section.
  for (const auto& p : img.pending_transfers) {
    h.Add(uint64_t{Raw(p.id)});
    h.Add(uint64_t{Raw(p.account)} | uint64_t{Raw(p.asset)} << 32);
    h.Add(p.amount.value);
    h.Add(p.fee.value);
    h.Add(p.address.view());
  }
  // Also only when some wait: the last prices decide nothing else.
  if (!img.stops.empty()) {
    for (Price p : img.last_prices) h.Add(p.value);
  }
  for (const auto& s : img.stops) {
    const ImageOrder& o = s.order;
    const OrderTerms& t = o.terms;
    h.Add(uint64_t{Raw(o.id)});
    h.Add(uint64_t{Raw(t.account)} | uint64_t{Raw(t.market)} << 32);
    h.Add(uint64_t{Raw(t.side)} | uint64_t{Raw(t.type)} << 8 | uint64_t{Raw(t.tif)} << 16 |
          uint64_t{Raw(t.stp)} << 24 | uint64_t{o.has_client_id} << 32 | uint64_t{s.active} << 40);
    h.Add(t.price.value);
    h.Add(t.qty.value);
    h.Add(o.locked.value);
    h.Add(o.created_ns);
    h.Add(o.client_id.lo);
    h.Add(o.client_id.hi);
    h.Add(s.stop_price.value);
    h.Add(int64_t{s.trailing_delta});
    h.Add(s.extreme.value);
  }
  for (const auto& i : img.icebergs) {
    h.Add(uint64_t{Raw(i.id)});
    h.Add(i.slice.value);
    h.Add(i.hidden.value);
  }
  for (const auto& l : img.lists) {
    h.Add(l.id);
    h.Add(uint64_t{Raw(l.account)} | uint64_t{Raw(l.market)} << 32 | uint64_t{Raw(l.type)} << 48 |
          uint64_t{l.has_client_id} << 56);
    h.Add(l.client_id.lo);
    h.Add(l.client_id.hi);
    for (const OrderId id : l.orders) h.Add(uint64_t{Raw(id)});
  }
  for (const auto& p : img.pending) {
    const OrderTerms& t = p.terms;
    h.Add(uint64_t{Raw(p.order_id)});
    h.Add(p.list_id);
    h.Add(uint64_t{Raw(t.account)} | uint64_t{Raw(t.market)} << 32);
    h.Add(uint64_t{Raw(t.side)} | uint64_t{Raw(t.type)} << 8 | uint64_t{Raw(t.tif)} << 16 |
          uint64_t{Raw(t.stp)} << 24);
    h.Add(t.price.value);
    h.Add(t.qty.value);
    h.Add(p.stop_price.value);
    h.Add(int64_t{p.trailing_delta});
    h.Add(p.iceberg_qty.value);
    h.Add(p.client_order_id.view());
  }
  // Accounts and keys: none in the images of format 3 and older, whose
  // hashes stay as they were.
  for (const auto& a : img.accounts) {
    h.Add(uint64_t{Raw(a.id)});
    h.Add(a.created_ms);
    h.Add(a.name.view());
  }
  for (const auto& k : img.api_keys) {
    h.Add(uint64_t{Raw(k.account)} | uint64_t{k.permissions} << 32 | uint64_t{k.ed25519} << 40 |
          uint64_t{k.revoked} << 48);
    h.Add(k.created_ms);
    h.Add(k.key.view());
    h.Add(k.secret.view());
  }
  // Assets and markets added at run time: none in the images of format 3
  // and older either.
  for (const auto& a : img.added_assets) {
    h.Add(uint64_t{Raw(a.asset)});
    h.Add(a.symbol.view());
    h.Add(int64_t{a.scale});
  }
  for (const auto& m : img.added_markets) {
    h.Add(uint64_t{Raw(m.market)} | uint64_t{Raw(m.base)} << 16 | uint64_t{Raw(m.quote)} << 32 |
          uint64_t{Raw(m.status)} << 48);
    h.Add(m.symbol.view());
    h.Add(m.tick_units);
    h.Add(m.lot_units);
    h.Add(m.min_qty.value);
    h.Add(m.max_qty.value);
    h.Add(m.max_price.value);
    h.Add(m.min_notional.value);
    h.Add(int64_t{m.maker_fee_bps});
    h.Add(int64_t{m.taker_fee_bps});
  }
  return h.Digest();
}

uint64_t Engine::Impl::ConfigHash() const { return config_hash_; }

uint64_t Engine::Impl::StateHash() const {
  EngineImage img;
  ExportImage(&img);
  return HashImage(img);
}

void Engine::Impl::ExportImage(EngineImage* out) const {
  EngineImage& img = *out;
  img.asset_totals.clear();
  img.balances.clear();
  img.orders.clear();
  img.recent_client_ids.clear();
  img.transfers.clear();
  img.pending_transfers.clear();
  img.stops.clear();
  img.icebergs.clear();
  img.lists.clear();
  img.pending.clear();
  img.config_hash = ConfigHash();
  img.last_prices = last_price_;
  img.last_sequence = last_seq_;
  img.next_trade_id = next_trade_;
  img.market_status = status_;
  const std::size_t n_assets = accounts_.assets();
  for (std::size_t a = 0; a < n_assets; ++a) {
    img.asset_totals.push_back(
        ImageAssetTotals{accounts_.supply(AssetId{static_cast<uint16_t>(a)})});
  }
  for (uint32_t acct = 0; acct < cfg_.max_accounts; ++acct) {
    for (std::size_t a = 0; a < n_assets; ++a) {
      const AssetId asset{static_cast<uint16_t>(a)};
      const Balance& b = accounts_.balance(AccountId{acct}, asset);
      if (b.available.value != 0 || b.locked.value != 0) {
        img.balances.push_back(ImageBalance{AccountId{acct}, asset, b.available, b.locked});
      }
    }
  }
  for (std::size_t m = 0; m < book_.markets(); ++m) {
    const MarketId mid{static_cast<uint16_t>(m)};
    for (int s = 0; s < 2; ++s) {
      const Side sd = static_cast<Side>(s);
      for (uint32_t li = book_.BestLevel(mid, sd); li != kNil; li = book_.NextLevel(mid, sd, li)) {
        for (uint32_t i = book_.level(li).head; i != kNil; i = book_.order(i).next) {
          const Order& o = book_.order(i);
          img.orders.push_back(ImageOrder{o.id, o.terms(), o.remaining, o.locked, o.created_ns,
                                          o.has_client_id, o.client_id});
        }
      }
    }
  }
  accounts_.ForEachReservedClientId([&](AccountId account, const Key128& id, OrderId order) {
    img.recent_client_ids.push_back(ImageClientId{account, id, order});
  });
  accounts_.ForEachTransfer([&](const Key128& k, const TransferId& id) {
    img.transfers.push_back(ImageTransfer{k, id});
  });
  std::sort(img.transfers.begin(), img.transfers.end(),
            [](const ImageTransfer& a, const ImageTransfer& b) {
              return a.ref.lo != b.ref.lo ? a.ref.lo < b.ref.lo : a.ref.hi < b.ref.hi;
            });
  accounts_.ForEachPending(
      [&](const TransferId&, const PendingTransfer& p) { img.pending_transfers.push_back(p); });
  std::sort(img.pending_transfers.begin(), img.pending_transfers.end(),
            [](const PendingTransfer& a, const PendingTransfer& b) { return a.id < b.id; });
  for (const auto& [id, s] : stops_) {
    const Order& o = book_.order(book_.Find(s.id));
    img.stops.push_back(ImageStop{ImageOrder{o.id, o.terms(), o.remaining, o.locked, o.created_ns,
                                             o.has_client_id, o.client_id},
                                  s.stop, s.delta, s.active, s.extreme});
  }
  for (const auto& [id, ice] : icebergs_) {
    img.icebergs.push_back(ImageIceberg{OrderId{id}, ice.slice, ice.hidden});
  }
  for (const auto& [id, l] : lists_) {
    img.lists.push_back(ImageList{l.id,
                                  l.account,
                                  l.market,
                                  l.type,
                                  l.has_client_id,
                                  l.client_id,
                                  {l.orders[0], l.orders[1], l.orders[2]}});
  }
  for (const auto& [id, p] : pending_) img.pending.push_back(p);
  auth_.Export(&img);
  img.added_assets.clear();
  for (std::size_t a = start_cfg_.assets.size(); a < cfg_.assets.size(); ++a) {
    const AssetSpec& s = cfg_.assets[a];
    img.added_assets.push_back(
        AssetAdded{AssetId{static_cast<uint16_t>(a)}, SymbolText::From(s.symbol), s.scale});
  }
  img.added_markets.clear();
  for (std::size_t m = start_cfg_.markets.size(); m < cfg_.markets.size(); ++m) {
    const MarketSpec& s = cfg_.markets[m];
    // The status the market was added with: the current one is market_status's.
    img.added_markets.push_back(
        MarketAdded{MarketId{static_cast<uint16_t>(m)}, SymbolText::From(s.symbol), s.base, s.quote,
                    s.tick_units, s.lot_units, s.min_qty, s.max_qty, s.max_price, s.min_notional,
                    s.maker_fee_bps, s.taker_fee_bps, s.status});
  }
}

uint32_t Engine::Impl::OpenImageOrder(const ImageOrder& o) {
  const OrderTerms& t = o.terms;
  const uint32_t i = book_.Allocate();
  Order& n = book_.order(i);
  n.id = o.id;
  n.price = t.price;
  n.qty_or_budget = t.qty.value;
  n.remaining = o.remaining;
  n.locked = o.locked;
  n.created_ns = o.created_ns;
  n.client_id = o.client_id;
  n.account = t.account;
  n.market = t.market;
  n.side = t.side;
  n.type = t.type;
  n.tif = t.tif;
  n.stp = t.stp;
  n.has_client_id = o.has_client_id;
  book_.Open(i);
  if (n.has_client_id) accounts_.HoldClientId(n.account, n.client_id, n.id);
  return i;
}

Status Engine::Impl::Load(const EngineImage& img) {
  if (img.config_hash != ConfigHash()) {
    return InvalidArgument("snapshot was taken with a different configuration (config hash " +
                           std::to_string(img.config_hash) + ", this configuration " +
                           std::to_string(ConfigHash()) + ")");
  }
  // What was added at run time first, checked as AddAsset / AddMarket check
  // it: the sections below count those assets and markets too.
  for (const AssetAdded& a : img.added_assets) {
    if (Raw(a.asset) != cfg_.assets.size()) return InvalidArgument("snapshot asset ids skip");
    MB_RETURN_IF_ERROR(ValidateNewAsset(cfg_, SpecOf(a)));
    Evolve(a, 0);
  }
  for (const MarketAdded& m : img.added_markets) {
    if (Raw(m.market) != cfg_.markets.size()) return InvalidArgument("snapshot market ids skip");
    MarketSpec spec = SpecOf(m);
    if (!EnumInRange(m.status, MarketStatus::kCancelOnly)) {
      return InvalidArgument("snapshot market status out of range");
    }
    MB_RETURN_IF_ERROR(ValidateNewMarket(cfg_, &spec));
    Evolve(m, 0);
  }
  const std::size_t n_assets = accounts_.assets();
  if (img.market_status.size() != status_.size() || img.asset_totals.size() != n_assets) {
    return InvalidArgument("snapshot market/asset counts differ from the configuration");
  }
  // An image is checked against everything the engine itself could produce:
  // ids within the sequence, values within the market's limits, canonical
  // order, no duplicates. The caller then checks the invariants.
  const uint64_t last = Raw(img.last_sequence);
  auto bad = [](const std::string& what) { return InvalidArgument("snapshot " + what); };
  // An order's id is a sequence up to the last, or an order list's k-th
  // order's (that sequence + k x kListOrderStride, k = 1, 2).
  auto order_id_ok = [last](OrderId id) {
    const uint64_t seq = SequenceOfOrder(Raw(id));
    return seq >= 1 && seq <= last && Raw(id) / kListOrderStride <= 2;
  };
  if (Raw(img.next_trade_id) < 1 || Raw(img.next_trade_id) > last + 1) {
    return bad("next trade id is out of range");
  }
  last_seq_ = img.last_sequence;
  next_trade_ = img.next_trade_id;
  for (std::size_t m = 0; m < status_.size(); ++m) {
    if (!EnumInRange(img.market_status[m], MarketStatus::kClosed)) {
      return bad("market status out of range");
    }
    status_[m] = img.market_status[m];
  }
  for (std::size_t a = 0; a < n_assets; ++a) {
    const ImageAssetTotals& t = img.asset_totals[a];
    if (t.supply.value < 0) {
      return bad("supply of asset " + cfg_.assets[a].symbol + " is negative");
    }
    accounts_.SetSupply(AssetId{static_cast<uint16_t>(a)}, t.supply);
  }
  uint64_t prev_balance = 0;
  for (std::size_t k = 0; k < img.balances.size(); ++k) {
    const ImageBalance& b = img.balances[k];
    if (Raw(b.account) >= cfg_.max_accounts || Raw(b.asset) >= n_assets) {
      return bad("balance for an unknown account or asset");
    }
    const uint64_t pos = uint64_t{Raw(b.account)} * n_assets + Raw(b.asset);
    if ((k > 0 && pos <= prev_balance) || b.available.value < 0 || b.locked.value < 0) {
      return bad("balances are duplicated, out of order or negative");
    }
    prev_balance = pos;
    accounts_.SetBalance(b.account, b.asset, Balance{b.available, b.locked});
  }
  uint64_t prev_book = 0;  // (market, side) of the previous order
  int64_t prev_key = 0;
  for (std::size_t k = 0; k < img.orders.size(); ++k) {
    const ImageOrder& o = img.orders[k];
    const OrderTerms& t = o.terms;
    const std::string what = "order " + std::to_string(Raw(o.id));
    if (Raw(t.market) >= book_.markets() || Raw(t.account) >= cfg_.max_accounts ||
        t.account == cfg_.fee_account || !EnumInRange(t.side, Side::kSell) ||
        !EnumInRange(t.stp, StpMode::kExpireBoth) || t.tif != TimeInForce::kGtc ||
        !EnumInRange(t.type, OrderType::kTakeProfitLimit) || IsMarketLike(t.type)) {
      return bad(what + " cannot rest in a book");
    }
    const MarketSpec& m = cfg_.markets[Raw(t.market)];
    if (!order_id_ok(o.id) || book_.Lookup(o.id) != kNil) {
      return bad(what + " has an id outside the sequence or twice");
    }
    if (t.price.value < 1 || t.price > m.max_price || t.qty < m.min_qty || t.qty > m.max_qty ||
        o.remaining.value <= 0 || o.remaining > t.qty || o.locked.value < 0) {
      return bad(what + " is outside its market's limits");
    }
    const uint64_t book = uint64_t{Raw(t.market)} * 2 + Raw(t.side);
    const int64_t key = OrderBook::LevelKey(t.side, t.price);
    if (k > 0 && (book < prev_book || (book == prev_book && key < prev_key))) {
      return bad(what + " is not in priority order");
    }
    prev_book = book;
    prev_key = key;
    if (o.has_client_id && accounts_.FindClientId(t.account, o.client_id) != nullptr) {
      return bad(what + " reuses an open order's client id");
    }
    book_.InsertIntoBook(OpenImageOrder(o));
  }
  if (img.recent_client_ids.size() > accounts_.client_id_memory()) {
    return InvalidArgument("snapshot holds more reserved client ids than client_id_memory");
  }
  for (const auto& r : img.recent_client_ids) {
    // Binance's rule reserves nothing: the reservations of an image written
    // under the idempotent rule free their ids.
    if (cfg_.client_order_ids == ClientOrderIds::kBinance) break;
    if (Raw(r.account) >= cfg_.max_accounts || !order_id_ok(r.order_id)) {
      return InvalidArgument("snapshot reserves a client id for an impossible order");
    }
    if (accounts_.FindClientId(r.account, r.client_id) != nullptr) {
      return InvalidArgument("snapshot reserves a client id twice");
    }
    accounts_.HoldClientId(r.account, r.client_id, r.order_id);
    accounts_.ReserveClientId(r.account, r.client_id, r.order_id);
  }
  for (std::size_t k = 0; k < img.transfers.size(); ++k) {
    const ImageTransfer& t = img.transfers[k];
    if (Raw(t.id) < 1 || Raw(t.id) > last) {
      return InvalidArgument("snapshot holds a transfer id outside the sequence");
    }
    if (k > 0) {
      const Key128& p = img.transfers[k - 1].ref;
      if (p.lo > t.ref.lo || (p.lo == t.ref.lo && p.hi >= t.ref.hi)) {
        return InvalidArgument("snapshot transfers are duplicated or out of order");
      }
    }
    accounts_.RecordTransfer(t.ref, t.id);
  }
  // A pending transfer's reference is among the transfers', and what they
  // hold of an asset fits in int64 (it is part of the supply).
  std::vector<uint64_t> ids;
  ids.reserve(img.transfers.size());
  for (const ImageTransfer& t : img.transfers) ids.push_back(Raw(t.id));
  std::sort(ids.begin(), ids.end());
  std::vector<int64_t> held(n_assets, 0);
  for (std::size_t k = 0; k < img.pending_transfers.size(); ++k) {
    const PendingTransfer& p = img.pending_transfers[k];
    if (Raw(p.id) < 1 || Raw(p.id) > last || (k > 0 && img.pending_transfers[k - 1].id >= p.id)) {
      return InvalidArgument("snapshot pending transfers are outside the sequence or out of order");
    }
    if (Raw(p.account) >= cfg_.max_accounts || Raw(p.asset) >= n_assets || p.amount.value <= 0 ||
        p.fee.value < 0 || p.fee > p.amount) {
      return InvalidArgument("snapshot pending transfer " + std::to_string(Raw(p.id)) +
                             " is impossible");
    }
    if (!std::binary_search(ids.begin(), ids.end(), Raw(p.id))) {
      return InvalidArgument("snapshot pending transfer " + std::to_string(Raw(p.id)) +
                             " has no recorded reference");
    }
    if (!CheckedAdd(held[Raw(p.asset)], p.amount.value, &held[Raw(p.asset)])) {
      return InvalidArgument("snapshot pending transfers of asset " +
                             cfg_.assets[Raw(p.asset)].symbol + " hold more than int64");
    }
    accounts_.RestorePending(p);
  }
  if (!img.last_prices.empty() && img.last_prices.size() != last_price_.size()) {
    return bad("last prices do not match the markets");
  }
  for (std::size_t m = 0; m < img.last_prices.size(); ++m) {
    const Price p = img.last_prices[m];
    if (p.value < 0 || p > cfg_.markets[m].max_price) return bad("last price out of range");
    last_price_[m] = p;
  }
  for (std::size_t k = 0; k < img.stops.size(); ++k) {
    const ImageStop& s = img.stops[k];
    const ImageOrder& o = s.order;
    const OrderTerms& t = o.terms;
    const std::string what = "conditional order " + std::to_string(Raw(o.id));
    if (Raw(t.market) >= book_.markets() || Raw(t.account) >= cfg_.max_accounts ||
        t.account == cfg_.fee_account || !EnumInRange(t.side, Side::kSell) ||
        !EnumInRange(t.stp, StpMode::kExpireBoth) || !EnumInRange(t.tif, TimeInForce::kFok) ||
        !EnumInRange(t.type, OrderType::kTakeProfitLimit) || !IsConditional(t.type) ||
        (IsMarketLike(t.type) && t.tif != TimeInForce::kIoc)) {
      return bad(what + " is not a conditional order");
    }
    const MarketSpec& m = cfg_.markets[Raw(t.market)];
    if (!order_id_ok(o.id) || book_.Lookup(o.id) != kNil ||
        (k > 0 && img.stops[k - 1].order.id >= o.id)) {
      return bad(what + " has an id outside the sequence, twice or out of order");
    }
    const bool price_ok =
        IsMarketLike(t.type) ? t.price.value == 0 : t.price.value >= 1 && t.price <= m.max_price;
    const bool trailing = s.trailing_delta != 0;
    if (!price_ok || t.qty < m.min_qty || t.qty > m.max_qty || o.remaining != t.qty ||
        o.locked.value < 0 || s.stop_price.value < (trailing ? 0 : 1) ||
        s.stop_price > m.max_price || s.trailing_delta < 0 || s.trailing_delta > 9'999 ||
        s.extreme.value < 0 || s.extreme > m.max_price || (!trailing && s.active) ||
        (!trailing && s.extreme.value != 0) || (trailing && s.stop_price.value == 0 && !s.active)) {
      return bad(what + " is outside its market's limits");
    }
    if (o.has_client_id && accounts_.FindClientId(t.account, o.client_id) != nullptr) {
      return bad(what + " reuses an open order's client id");
    }
    OpenImageOrder(o);
    Stop st;
    st.id = o.id;
    st.market = t.market;
    st.side = t.side;
    st.rise = TriggersOnRise(t.type, t.side);
    st.stop = s.stop_price;
    st.delta = s.trailing_delta;
    st.active = s.active;
    st.extreme = s.extreme;
    Arm(st);
  }
  for (std::size_t k = 0; k < img.icebergs.size(); ++k) {
    const ImageIceberg& ice = img.icebergs[k];
    const std::string what = "iceberg " + std::to_string(Raw(ice.id));
    const uint32_t i = book_.Lookup(ice.id);
    if (i == kNil || book_.order(i).level == kNil || (k > 0 && img.icebergs[k - 1].id >= ice.id)) {
      return bad(what + " does not rest, or is out of order or twice");
    }
    const Order& o = book_.order(i);
    const MarketSpec& m = cfg_.markets[Raw(o.market)];
    if ((o.type != OrderType::kLimit && o.type != OrderType::kLimitMaker) ||
        ice.slice < m.min_qty || ice.slice >= o.qty() || ice.hidden.value < 0 ||
        o.remaining > ice.slice || o.remaining.value + ice.hidden.value > o.qty().value) {
      return bad(what + " is outside its order's limits");
    }
    icebergs_.emplace(Raw(ice.id), Iceberg{ice.slice, ice.hidden});
    book_.CountIceberg(o.level, 1);
  }
  for (std::size_t k = 0; k < img.lists.size(); ++k) {
    const ImageList& il = img.lists[k];
    const std::string what = "order list " + std::to_string(il.id);
    if (il.id < 1 || il.id > last || (k > 0 && img.lists[k - 1].id >= il.id) ||
        Raw(il.account) >= cfg_.max_accounts || Raw(il.market) >= book_.markets() ||
        !EnumInRange(il.type, ListType::kOtoco)) {
      return bad(what + " is impossible or out of order");
    }
    const int n = il.type == ListType::kOtoco ? 3 : 2;
    OrderList l;
    l.id = il.id;
    l.account = il.account;
    l.market = il.market;
    l.type = il.type;
    l.has_client_id = il.has_client_id;
    l.client_id = il.client_id;
    for (int j = 0; j < 3; ++j) {
      const uint64_t expected = j < n ? il.id + static_cast<uint64_t>(j) * kListOrderStride : 0;
      if (Raw(il.orders[j]) != expected) return bad(what + " names orders it cannot have");
      l.orders[j] = il.orders[j];
      if (expected == 0) continue;
      const uint32_t i = book_.Lookup(il.orders[j]);
      if (i != kNil &&
          (book_.order(i).account != il.account || book_.order(i).market != il.market)) {
        return bad(what + " holds another account's or market's order");
      }
      list_of_[expected] = il.id;
    }
    if (l.has_client_id) {
      const auto key = std::make_tuple(Raw(l.account), l.client_id.lo, l.client_id.hi);
      if (!list_client_ids_.emplace(key, l.id).second) return bad(what + " reuses a client id");
    }
    lists_.emplace(l.id, l);
  }
  for (std::size_t k = 0; k < img.pending.size(); ++k) {
    const OrderPending& p = img.pending[k];
    const OrderTerms& t = p.terms;
    const std::string what = "pending order " + std::to_string(Raw(p.order_id));
    auto li = list_of_.find(Raw(p.order_id));
    if ((k > 0 && img.pending[k - 1].order_id >= p.order_id) || li == list_of_.end() ||
        li->second != p.list_id || book_.Lookup(p.order_id) != kNil ||
        Raw(p.order_id) / kListOrderStride == 0) {
      return bad(what + " belongs to no list, or is out of order");
    }
    const OrderList& l = lists_.find(p.list_id)->second;
    if (l.type == ListType::kOco || t.account != l.account || t.market != l.market ||
        !EnumInRange(t.side, Side::kSell) || !EnumInRange(t.type, OrderType::kTakeProfitLimit) ||
        !EnumInRange(t.tif, TimeInForce::kFok) || !EnumInRange(t.stp, StpMode::kExpireBoth) ||
        t.qty.value < 1 || t.price.value < 0 || p.stop_price.value < 0 || p.trailing_delta < 0 ||
        p.iceberg_qty.value < 0) {
      return bad(what + " is impossible");
    }
    pending_.emplace(Raw(p.order_id), p);
  }
  // Every list has an order still open or pending.
  for (const auto& [id, l] : lists_) {
    bool live = false;
    for (const OrderId o : l.orders) {
      live = live || (Raw(o) != 0 && (book_.Lookup(o) != kNil || pending_.count(Raw(o)) != 0));
    }
    if (!live) return bad("order list " + std::to_string(id) + " is over");
  }
  return auth_.Load(img);
}

uint64_t Engine::StateHash() const { return impl_->StateHash(); }
uint64_t Engine::ConfigHash() const { return impl_->ConfigHash(); }
EngineImage Engine::ExportImage() const {
  EngineImage img;
  impl_->ExportImage(&img);
  return img;
}
void Engine::ExportImage(EngineImage* image) const { impl_->ExportImage(image); }

Status Engine::Restore(const EngineImage& image) {
  auto fresh = std::make_unique<Impl>(impl_->start_config());
  MB_RETURN_IF_ERROR(fresh->Load(image));
  Status s = fresh->CheckInvariants();
  if (!s.ok()) return InvalidArgument("snapshot breaks an invariant: " + s.message());
  impl_ = std::move(fresh);
  return Status::Ok();
}

}  // namespace mb::engine
