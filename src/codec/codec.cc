// One field list per record type (VisitFields) drives three visitors: Sizer
// (compile-time sizes), Writer and Reader. The size tables in codec.h are
// checked against Sizer, so encode, decode and the documented sizes can only
// change together. The field lists destructure each struct with a structured
// binding: adding a member to a command, event or image struct stops this file
// from compiling until the codec (and docs/journal_format.md) says where the
// new field goes.

#include "codec/codec.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace mb::codec {
namespace {

using engine::Command;
using engine::CommandBody;
using engine::CommandType;
using engine::EngineImage;
using engine::Event;
using engine::EventBody;
using engine::EventType;

// ---------------------------------------------------------------------------
// Validated enums: the largest value each may hold. Appending a value to one
// of these enums means raising its maximum here (and in journal_format.md).
// Id enums (OrderId, AccountId, ...) are not listed: every value is valid.
// ---------------------------------------------------------------------------

template <class E>
inline constexpr int kEnumMax = -1;  // not a validated enum
template <>
inline constexpr int kEnumMax<engine::Side> = Raw(engine::Side::kSell);
template <>
inline constexpr int kEnumMax<engine::OrderType> = Raw(engine::OrderType::kTakeProfitLimit);
template <>
inline constexpr int kEnumMax<engine::TimeInForce> = Raw(engine::TimeInForce::kFok);
template <>
inline constexpr int kEnumMax<engine::StpMode> = Raw(engine::StpMode::kExpireBoth);
template <>
inline constexpr int kEnumMax<engine::MarketStatus> = Raw(engine::MarketStatus::kClosed);
template <>
inline constexpr int kEnumMax<engine::CommandType> = Raw(engine::CommandType::kAddMarket);
template <>
inline constexpr int kEnumMax<engine::RejectReason> = Raw(engine::RejectReason::kInvalidListing);
template <>
inline constexpr int kEnumMax<engine::ListType> = Raw(engine::ListType::kOtoco);
template <>
inline constexpr int kEnumMax<engine::RefundReason> = Raw(engine::RefundReason::kRefused);
template <>
inline constexpr int kEnumMax<engine::ExpireReason> =
    Raw(engine::ExpireReason::kInsufficientBalance);
template <>
inline constexpr int kEnumMax<engine::CancelRestriction> =
    Raw(engine::CancelRestriction::kOnlyPartiallyFilled);
template <>
inline constexpr int kEnumMax<engine::CancelReplaceMode> =
    Raw(engine::CancelReplaceMode::kAllowFailure);
template <>
inline constexpr int kEnumMax<engine::AuthChangeKind> = Raw(engine::AuthChangeKind::kRevokeKey);

static_assert(kEnumMax<CommandType> + 1 == std::variant_size_v<CommandBody>);
static_assert(Raw(EventType::kMarketAdded) + 1 == std::variant_size_v<EventBody>);

template <class T>
struct IsFixed : std::false_type {};
template <class Tag>
struct IsFixed<Fixed<Tag>> : std::true_type {};

template <class T>
struct IsFixedString : std::false_type {};
template <std::size_t N>
struct IsFixedString<FixedString<N>> : std::true_type {};

template <class>
struct AlwaysFalse : std::false_type {};

// Bytes one field takes on the wire.
template <class F>
constexpr std::size_t WireSize() {
  if constexpr (std::is_same_v<F, bool>) {
    return 1;
  } else if constexpr (std::is_integral_v<F>) {
    return sizeof(F);
  } else if constexpr (std::is_enum_v<F>) {
    static_assert(kEnumMax<F> < 0 || sizeof(F) == 1, "validated enums are u8 on the wire");
    return sizeof(std::underlying_type_t<F>);
  } else if constexpr (IsFixed<F>::value) {
    return sizeof(int64_t);
  } else if constexpr (IsFixedString<F>::value) {
    return 1 + F::kCapacity;
  } else if constexpr (std::is_same_v<F, engine::Key128>) {
    return 2 * sizeof(uint64_t);
  } else {
    static_assert(AlwaysFalse<F>::value, "no wire encoding for this field type");
    return 0;
  }
}

// ---------------------------------------------------------------------------
// The field lists: wire order == declaration order, an embedded OrderTerms
// listed field by field in its place.
// ---------------------------------------------------------------------------

template <class T, class U>
inline constexpr bool kIs = std::is_same_v<std::remove_const_t<T>, U>;

template <class V, class T>
constexpr void VisitFields(V& v, T& x) {
  using namespace engine;  // NOLINT(google-build-using-namespace): local to the field lists
  // Commands.
  if constexpr (kIs<T, PlaceOrder>) {
    auto& [account, market, side, type, tif, stp, price, qty, quote_qty, client_order_id,
           stop_price, trailing_delta, iceberg_qty] = x;
    v(account, market, side, type, tif, stp, price, qty, quote_qty, client_order_id, stop_price,
      trailing_delta, iceberg_qty);
  } else if constexpr (kIs<T, CancelOrder>) {
    auto& [account, market, order_id, orig_client_order_id, restriction] = x;
    v(account, market, order_id, orig_client_order_id, restriction);
  } else if constexpr (kIs<T, CancelAll>) {
    auto& [account, market] = x;
    v(account, market);
  } else if constexpr (kIs<T, AmendOrder>) {
    auto& [account, market, order_id, orig_client_order_id, new_price, new_qty, keep_priority,
           new_client_order_id] = x;
    v(account, market, order_id, orig_client_order_id, new_price, new_qty, keep_priority,
      new_client_order_id);
  } else if constexpr (kIs<T, engine::Deposit> || kIs<T, Withdraw>) {
    auto& [account, asset, amount, ref] = x;
    v(account, asset, amount, ref);
  } else if constexpr (kIs<T, SetMarketStatus>) {
    auto& [market, status] = x;
    v(market, status);
  } else if constexpr (kIs<T, CancelReplace>) {
    // The cancel's fields, then the new order's, then the mode.
    auto& [cancel, place, mode] = x;
    auto& [c_account, c_market, order_id, orig_client_order_id, restriction] = cancel;
    auto& [account, market, side, type, tif, stp, price, qty, quote_qty, client_order_id,
           stop_price, trailing_delta, iceberg_qty] = place;
    v(c_account, c_market, order_id, orig_client_order_id, restriction, account, market, side, type,
      tif, stp, price, qty, quote_qty, client_order_id, stop_price, trailing_delta, iceberg_qty,
      mode);
  } else if constexpr (kIs<T, TransferOut>) {
    auto& [account, asset, amount, fee, ref, address] = x;
    v(account, asset, amount, fee, ref, address);
  } else if constexpr (kIs<T, ResolveTransfer>) {
    auto& [transfer_id, completed, reason] = x;
    v(transfer_id, completed, reason);
  } else if constexpr (kIs<T, PlaceOrderList>) {
    // The list's fields, then its three orders' fields, order after order.
    auto& [account, market, type, stp, list_client_order_id, orders] = x;
    v(account, market, type, stp, list_client_order_id);
    for (auto& o : orders) VisitFields(v, o);
  } else if constexpr (kIs<T, ListOrder>) {
    auto& [side, type, tif, trailing_delta, price, qty, stop_price, iceberg_qty, client_order_id] =
        x;
    v(side, type, tif, trailing_delta, price, qty, stop_price, iceberg_qty, client_order_id);
  } else if constexpr (kIs<T, CancelOrderList>) {
    auto& [account, market, list_id, list_client_order_id] = x;
    v(account, market, list_id, list_client_order_id);
  } else if constexpr (kIs<T, AuthChange> || kIs<T, AuthChanged>) {
    // The command and its event carry the same fields.
    auto& [kind, account, permissions, ed25519, created_ms, subject, secret] = x;
    v(kind, account, permissions, ed25519, created_ms, subject, secret);
  } else if constexpr (kIs<T, AddAsset>) {
    auto& [symbol, scale] = x;
    v(symbol, scale);
  } else if constexpr (kIs<T, AddMarket>) {
    auto& [symbol, base, quote, tick_units, lot_units, min_qty, max_qty, max_price, min_notional,
           maker_fee_bps, taker_fee_bps, status] = x;
    v(symbol, base, quote, tick_units, lot_units, min_qty, max_qty, max_price, min_notional,
      maker_fee_bps, taker_fee_bps, status);
    // Events.
  } else if constexpr (kIs<T, AssetAdded>) {
    auto& [asset, symbol, scale] = x;
    v(asset, symbol, scale);
  } else if constexpr (kIs<T, MarketAdded>) {
    auto& [market, symbol, base, quote, tick_units, lot_units, min_qty, max_qty, max_price,
           min_notional, maker_fee_bps, taker_fee_bps, status] = x;
    v(market, symbol, base, quote, tick_units, lot_units, min_qty, max_qty, max_price, min_notional,
      maker_fee_bps, taker_fee_bps, status);
  } else if constexpr (kIs<T, OrderAccepted>) {
    auto& [order_id, terms, quote_qty, locked, client_order_id] = x;
    auto& [account, market, side, type, tif, stp, price, qty] = terms;
    v(order_id, account, market, side, type, tif, stp, price, qty, quote_qty, locked,
      client_order_id);
  } else if constexpr (kIs<T, Rejected>) {
    auto& [command, reason, account, market, order_id, existing_id, client_order_id] = x;
    v(command, reason, account, market, order_id, existing_id, client_order_id);
  } else if constexpr (kIs<T, Trade>) {
    auto& [trade_id, market, taker_side, maker_order_id, taker_order_id, maker_account,
           taker_account, price, qty, base_qty, notional, maker_fee, taker_fee, taker_released,
           maker_filled, taker_filled] = x;
    v(trade_id, market, taker_side, maker_order_id, taker_order_id, maker_account, taker_account,
      price, qty, base_qty, notional, maker_fee, taker_fee, taker_released, maker_filled,
      taker_filled);
  } else if constexpr (kIs<T, OrderRested>) {
    auto& [order_id, account, market, side, remaining, released] = x;
    v(order_id, account, market, side, remaining, released);
  } else if constexpr (kIs<T, OrderCanceled>) {
    auto& [order_id, account, market, side, remaining, released] = x;
    v(order_id, account, market, side, remaining, released);
  } else if constexpr (kIs<T, OrderExpired>) {
    auto& [order_id, account, market, side, reason, remaining, released] = x;
    v(order_id, account, market, side, reason, remaining, released);
  } else if constexpr (kIs<T, OrderAmended>) {
    auto& [order_id, account, market, side, new_price, new_qty, new_remaining, lock_delta,
           keeps_priority] = x;
    v(order_id, account, market, side, new_price, new_qty, new_remaining, lock_delta,
      keeps_priority);
  } else if constexpr (kIs<T, Deposited> || kIs<T, Withdrawn>) {
    auto& [transfer_id, account, asset, amount, ref] = x;
    v(transfer_id, account, asset, amount, ref);
  } else if constexpr (kIs<T, MarketStatusChanged>) {
    auto& [market, status] = x;
    v(market, status);
  } else if constexpr (kIs<T, ClientOrderIdChanged>) {
    auto& [order_id, account, market, client_order_id] = x;
    v(order_id, account, market, client_order_id);
  } else if constexpr (kIs<T, TransferHeld>) {
    auto& [transfer_id, account, asset, amount, fee, ref, address] = x;
    v(transfer_id, account, asset, amount, fee, ref, address);
  } else if constexpr (kIs<T, TransferCompleted>) {
    auto& [transfer_id, account, asset, amount, fee] = x;
    v(transfer_id, account, asset, amount, fee);
  } else if constexpr (kIs<T, TransferRefunded>) {
    auto& [transfer_id, account, asset, amount, reason] = x;
    v(transfer_id, account, asset, amount, reason);
  } else if constexpr (kIs<T, OrderArmed>) {
    auto& [order_id, account, market, side, stop_price, trailing_delta] = x;
    v(order_id, account, market, side, stop_price, trailing_delta);
  } else if constexpr (kIs<T, OrderTriggered>) {
    auto& [order_id, account, market, side, last_price, lock_delta] = x;
    v(order_id, account, market, side, last_price, lock_delta);
  } else if constexpr (kIs<T, IcebergAccepted>) {
    auto& [order_id, account, market, side, slice] = x;
    v(order_id, account, market, side, slice);
  } else if constexpr (kIs<T, IcebergRefilled>) {
    auto& [order_id, account, market, side, price, visible, hidden] = x;
    v(order_id, account, market, side, price, visible, hidden);
  } else if constexpr (kIs<T, ListAccepted>) {
    auto& [list_id, account, market, type, list_client_order_id, order_ids] = x;
    v(list_id, account, market, type, list_client_order_id, order_ids[0], order_ids[1],
      order_ids[2]);
  } else if constexpr (kIs<T, OrderPending>) {
    auto& [order_id, list_id, terms, stop_price, trailing_delta, iceberg_qty, client_order_id] = x;
    auto& [account, market, side, type, tif, stp, price, qty] = terms;
    v(order_id, list_id, account, market, side, type, tif, stp, price, qty, stop_price,
      trailing_delta, iceberg_qty, client_order_id);
  } else if constexpr (kIs<T, ListDone>) {
    auto& [list_id, account, market] = x;
    v(list_id, account, market);
    // Snapshot records.
  } else if constexpr (kIs<T, ImageOrder>) {
    auto& [id, terms, remaining, locked, created_ns, has_client_id, client_id] = x;
    auto& [account, market, side, type, tif, stp, price, qty] = terms;
    v(id, account, market, side, type, tif, stp, price, qty, remaining, locked, created_ns,
      has_client_id, client_id);
  } else if constexpr (kIs<T, ImageStop>) {
    auto& [order, stop_price, trailing_delta, active, extreme] = x;
    auto& [id, terms, remaining, locked, created_ns, has_client_id, client_id] = order;
    auto& [account, market, side, type, tif, stp, price, qty] = terms;
    v(id, account, market, side, type, tif, stp, price, qty, remaining, locked, created_ns,
      has_client_id, client_id, stop_price, trailing_delta, active, extreme);
  } else if constexpr (kIs<T, ImageList>) {
    auto& [id, account, market, type, has_client_id, client_id, orders] = x;
    v(id, account, market, type, has_client_id, client_id, orders[0], orders[1], orders[2]);
  } else if constexpr (kIs<T, ImageIceberg>) {
    auto& [id, slice, hidden] = x;
    v(id, slice, hidden);
  } else if constexpr (kIs<T, Price> || kIs<T, MarketStatus>) {
    v(x);  // last_prices entries are bare prices, market_status entries bare enums
  } else if constexpr (kIs<T, ImageBalance>) {
    auto& [account, asset, available, locked] = x;
    v(account, asset, available, locked);
  } else if constexpr (kIs<T, ImageClientId>) {
    auto& [account, client_id, order_id] = x;
    v(account, client_id, order_id);
  } else if constexpr (kIs<T, ImageTransfer>) {
    auto& [ref, id] = x;
    v(ref, id);
  } else if constexpr (kIs<T, PendingTransfer>) {
    auto& [id, account, asset, amount, fee, address] = x;
    v(id, account, asset, amount, fee, address);
  } else if constexpr (kIs<T, ImageAccount>) {
    auto& [id, created_ms, name] = x;
    v(id, created_ms, name);
  } else if constexpr (kIs<T, ImageApiKey>) {
    auto& [account, created_ms, permissions, ed25519, revoked, key, secret] = x;
    v(account, created_ms, permissions, ed25519, revoked, key, secret);
  } else if constexpr (kIs<T, ImageAssetTotals>) {
    auto& [supply] = x;
    v(supply);
  } else {
    static_assert(AlwaysFalse<T>::value, "no field list for this type");
  }
}

// ---------------------------------------------------------------------------
// Visitors
// ---------------------------------------------------------------------------

struct Sizer {
  std::size_t n = 0;
  template <class... F>
  constexpr void operator()(const F&... /*fields*/) {
    ((n += WireSize<F>()), ...);
  }
};

template <class T>
constexpr std::size_t RecordSize() {
  T x{};
  Sizer s;
  VisitFields(s, x);
  return s.n;
}

// Little-endian writes through a cursor. REQUIRES: the caller checked that the
// whole record fits.
class Writer {
 public:
  explicit Writer(std::byte* p) noexcept : p_(p) {}

  template <class... F>
  void operator()(const F&... f) noexcept {
    (Put(f), ...);
  }

  template <class U>
  void PutUint(U v) noexcept {
    static_assert(std::is_unsigned_v<U>);
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      p_[i] = static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i));
    }
    p_ += sizeof(U);
  }

  void PutBytes(const void* src, std::size_t n) noexcept {
    if (n != 0) std::memcpy(p_, src, n);
    p_ += n;
  }

  std::byte* pos() const noexcept { return p_; }

 private:
  template <class F>
  void Put(const F& f) noexcept {
    if constexpr (std::is_same_v<F, bool>) {
      PutUint(static_cast<uint8_t>(f ? 1 : 0));
    } else if constexpr (std::is_integral_v<F>) {
      PutUint(static_cast<std::make_unsigned_t<F>>(f));
    } else if constexpr (std::is_enum_v<F>) {
      PutUint(static_cast<std::make_unsigned_t<std::underlying_type_t<F>>>(Raw(f)));
    } else if constexpr (IsFixed<F>::value) {
      PutUint(static_cast<uint64_t>(f.value));
    } else if constexpr (IsFixedString<F>::value) {
      // A len above capacity is a bug upstream; clamp so that the record stays
      // decodable and nothing is read past `data`.
      assert(f.len <= F::kCapacity);
      const std::size_t len = std::min<std::size_t>(f.len, F::kCapacity);
      PutUint(static_cast<uint8_t>(len));
      PutBytes(f.data, len);
      std::memset(p_, 0, F::kCapacity - len);  // padding is always zero
      p_ += F::kCapacity - len;
    } else if constexpr (std::is_same_v<F, engine::Key128>) {
      PutUint(f.lo);
      PutUint(f.hi);
    } else {
      static_assert(AlwaysFalse<F>::value);
    }
  }

  std::byte* p_;
};

// Little-endian, validating reads through a cursor. The first invalid field
// sets error; later fields are still read (in bounds) but ignored by callers.
// REQUIRES: the caller checked that the whole record is present.
class Reader {
 public:
  explicit Reader(const std::byte* p) noexcept : p_(p) {}

  template <class... F>
  void operator()(F&... f) noexcept {
    (Get(f), ...);
  }

  template <class U>
  U GetUint() noexcept {
    static_assert(std::is_unsigned_v<U>);
    uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      v |= std::to_integer<uint64_t>(p_[i]) << (8 * i);
    }
    p_ += sizeof(U);
    return static_cast<U>(v);
  }

  const std::byte* pos() const noexcept { return p_; }
  DecodeError error() const noexcept { return error_; }

 private:
  void Fail(DecodeError e) noexcept {
    if (error_ == DecodeError::kOk) error_ = e;
  }

  template <class F>
  void Get(F& f) noexcept {
    if constexpr (std::is_same_v<F, bool>) {
      const uint8_t b = GetUint<uint8_t>();
      if (b > 1) Fail(DecodeError::kBadBool);
      f = b == 1;
    } else if constexpr (std::is_integral_v<F>) {
      f = static_cast<F>(GetUint<std::make_unsigned_t<F>>());
    } else if constexpr (std::is_enum_v<F>) {
      using Under = std::underlying_type_t<F>;
      const auto raw = GetUint<std::make_unsigned_t<Under>>();
      if constexpr (kEnumMax<F> >= 0) {
        if (raw > kEnumMax<F>) Fail(DecodeError::kBadEnum);
      }
      f = static_cast<F>(static_cast<Under>(raw));
    } else if constexpr (IsFixed<F>::value) {
      f.value = static_cast<int64_t>(GetUint<uint64_t>());
    } else if constexpr (IsFixedString<F>::value) {
      const uint8_t len = GetUint<uint8_t>();
      f = F{};
      if (len > F::kCapacity) {
        Fail(DecodeError::kBadString);
      } else {
        f.len = len;
        std::memcpy(f.data, p_, len);
        for (std::size_t i = len; i < F::kCapacity; ++i) {
          if (p_[i] != std::byte{0}) Fail(DecodeError::kBadString);
        }
      }
      p_ += F::kCapacity;
    } else if constexpr (std::is_same_v<F, engine::Key128>) {
      f.lo = GetUint<uint64_t>();
      f.hi = GetUint<uint64_t>();
    } else {
      static_assert(AlwaysFalse<F>::value);
    }
  }

  const std::byte* p_;
  DecodeError error_ = DecodeError::kOk;
};

// ---------------------------------------------------------------------------
// Size tables, checked against the documented ones in codec.h.
// ---------------------------------------------------------------------------

constexpr std::size_t kCommandHeader = 1;        // type
constexpr std::size_t kCommandTrailer = 8;       // timestamp
constexpr std::size_t kEventHeader = 1 + 8 + 8;  // type, seq, timestamp

template <class Variant, std::size_t... I>
constexpr std::array<std::size_t, sizeof...(I)> BodySizes(std::index_sequence<I...>) {
  return {RecordSize<std::variant_alternative_t<I, Variant>>()...};
}

constexpr auto kCommandBodySize =
    BodySizes<CommandBody>(std::make_index_sequence<std::variant_size_v<CommandBody>>());
constexpr auto kEventBodySize =
    BodySizes<EventBody>(std::make_index_sequence<std::variant_size_v<EventBody>>());

constexpr bool CommandSizesMatch() {
  std::size_t max = 0;
  for (std::size_t i = 0; i < kCommandSize.size(); ++i) {
    if (kCommandSize[i] != kCommandHeader + kCommandBodySize[i] + kCommandTrailer) return false;
    max = std::max(max, kCommandSize[i]);
  }
  return max == kMaxCommandSize;
}
constexpr bool EventSizesMatch() {
  std::size_t max = 0;
  for (std::size_t i = 0; i < kEventSize.size(); ++i) {
    if (kEventSize[i] != kEventHeader + kEventBodySize[i]) return false;
    max = std::max(max, kEventSize[i]);
  }
  return max == kMaxEventSize;
}
static_assert(CommandSizesMatch(), "codec.h kCommandSize disagrees with the field lists");
static_assert(EventSizesMatch(), "codec.h kEventSize disagrees with the field lists");

// Emplaces alternative `index` of *body and reads its fields.
// REQUIRES: index < variant_size.
template <class Variant, std::size_t... I>
void ReadBody(std::size_t index, Reader& r, Variant* body, std::index_sequence<I...>) noexcept {
  (void)((index == I ? (VisitFields(r, body->template emplace<I>()), true) : false) || ...);
}

DecodeResult Exact(DecodeResult r, std::size_t in_size) noexcept {
  if (r.ok() && r.consumed != in_size) return {DecodeError::kTrailingBytes, 0};
  return r;
}

// ---------------------------------------------------------------------------
// Image helpers
// ---------------------------------------------------------------------------

template <class T>
constexpr std::size_t kImageRecordSize = RecordSize<T>();

static_assert(kImageRecordSize<engine::MarketStatus> == 1);
static_assert(kImageRecordSize<engine::ImageAssetTotals> == 8);
static_assert(kImageRecordSize<engine::ImageBalance> == 22);
static_assert(kImageRecordSize<engine::ImageOrder> == 75);
static_assert(kImageRecordSize<engine::ImageClientId> == 28);
static_assert(kImageRecordSize<engine::ImageTransfer> == 24);
static_assert(kImageRecordSize<engine::PendingTransfer> == 95);
static_assert(kImageRecordSize<Price> == 8);
static_assert(kImageRecordSize<engine::ImageStop> == 96);
static_assert(kImageRecordSize<engine::ImageIceberg> == 24);
static_assert(kImageRecordSize<engine::ImageList> == 56);
static_assert(kImageRecordSize<engine::OrderPending> == 99);
static_assert(kImageRecordSize<engine::ImageAccount> == 77);
static_assert(kImageRecordSize<engine::ImageApiKey> == 145);
static_assert(kImageRecordSize<engine::AssetAdded> == 39);
static_assert(kImageRecordSize<engine::MarketAdded> == 96);

constexpr std::size_t kImageHeaderSize = 8 + 2 + 3 * 8;  // magic, version, three u64
constexpr std::size_t kChecksumSize = 8;
// Vectors indexed by a u16 id can't be longer than the id space.
constexpr uint64_t kMaxById = uint64_t{std::numeric_limits<uint16_t>::max()} + 1;

template <class CountT, class T>
std::size_t SectionSize(const std::vector<T>& v) {
  return sizeof(CountT) + v.size() * kImageRecordSize<T>;
}

// REQUIRES (checked): the section fits the count DecodeImage accepts.
template <class CountT, class T>
void WriteSection(Writer& w, const std::vector<T>& v,
                  uint64_t max_count = std::numeric_limits<CountT>::max()) {
  MB_CHECK(v.size() <= max_count && v.size() <= std::numeric_limits<CountT>::max());
  w.PutUint(static_cast<CountT>(v.size()));
  for (const T& x : v) VisitFields(w, x);
}

// A bounded read position over the image body (checksum excluded).
struct Cursor {
  const std::byte* base;  // start of the image, for offsets in messages
  const std::byte* pos;
  const std::byte* end;

  std::size_t left() const noexcept { return static_cast<std::size_t>(end - pos); }
  std::size_t offset() const noexcept { return static_cast<std::size_t>(pos - base); }
};

// Reads one counted section: a CountT count, then count fixed-size records.
template <class CountT, class T>
Status ReadSection(const char* name, uint64_t max_count, Cursor* c, std::vector<T>* out) {
  if (c->left() < sizeof(CountT)) {
    return Corruption(std::string("snapshot: truncated before the ") + name + " count at byte " +
                      std::to_string(c->offset()));
  }
  const std::size_t count_offset = c->offset();
  Reader count_reader(c->pos);
  const uint64_t count = count_reader.GetUint<CountT>();
  c->pos = count_reader.pos();
  constexpr std::size_t kRec = kImageRecordSize<T>;
  // Bound the count by the bytes left before allocating anything: a garbage
  // count must not turn into a huge allocation.
  if (count > max_count) {
    return Corruption(std::string("snapshot: ") + name + " count " + std::to_string(count) +
                      " at byte " + std::to_string(count_offset) + " exceeds the id space (" +
                      std::to_string(max_count) + ")");
  }
  if (count > c->left() / kRec) {
    return Corruption(std::string("snapshot: ") + name + " count " + std::to_string(count) +
                      " at byte " + std::to_string(count_offset) + " exceeds the " +
                      std::to_string(c->left()) + " bytes left (" + std::to_string(kRec) +
                      " bytes per record)");
  }
  out->clear();
  out->resize(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out->size(); ++i) {
    const std::size_t record_offset = c->offset();
    Reader r(c->pos);
    VisitFields(r, (*out)[i]);
    c->pos = r.pos();
    if (r.error() != DecodeError::kOk) {
      return Corruption(std::string("snapshot: ") + name + "[" + std::to_string(i) + "] at byte " +
                        std::to_string(record_offset) + ": " + std::string(ToString(r.error())));
    }
  }
  return Status::Ok();
}

std::string Hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 60; shift >= 0; shift -= 4) {
    s += kDigits[(v >> shift) & 0xf];
  }
  return s;
}

uint64_t LoadLe64(const std::byte* p) noexcept {
  Reader r(p);
  return r.GetUint<uint64_t>();
}

}  // namespace

// ---------------------------------------------------------------------------
// Commands and events
// ---------------------------------------------------------------------------

std::string_view ToString(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kUnknownType:
      return "unknown record type";
    case DecodeError::kBadEnum:
      return "enum value out of range";
    case DecodeError::kBadString:
      return "bad string length or padding";
    case DecodeError::kBadBool:
      return "bool byte not 0 or 1";
    case DecodeError::kTrailingBytes:
      return "trailing bytes after the record";
  }
  return "unknown decode error";
}

std::size_t EncodedSize(CommandType type) noexcept {
  const auto t = static_cast<std::size_t>(Raw(type));
  return t < kCommandSize.size() ? kCommandSize[t] : 0;
}

std::size_t EncodedSize(EventType type) noexcept {
  const auto t = static_cast<std::size_t>(Raw(type));
  return t < kEventSize.size() ? kEventSize[t] : 0;
}

std::size_t EncodedSize(const Command& command) noexcept { return EncodedSize(command.type()); }

std::size_t EncodedSize(const Event& event) noexcept { return EncodedSize(event.type()); }

std::size_t Encode(const Command& command, std::span<std::byte> out) noexcept {
  const std::size_t n = EncodedSize(command);
  if (n == 0 || out.size() < n) return 0;
  Writer w(out.data());
  w.PutUint(static_cast<uint8_t>(command.body.index()));
  std::visit([&w](const auto& body) { VisitFields(w, body); }, command.body);
  w(command.timestamp_ns);
  assert(w.pos() == out.data() + n);
  return n;
}

std::size_t Encode(const Event& event, std::span<std::byte> out) noexcept {
  const std::size_t n = EncodedSize(event);
  if (n == 0 || out.size() < n) return 0;
  Writer w(out.data());
  w.PutUint(static_cast<uint8_t>(event.body.index()));
  w(event.seq, event.timestamp_ns);
  std::visit([&w](const auto& body) { VisitFields(w, body); }, event.body);
  assert(w.pos() == out.data() + n);
  return n;
}

DecodeResult Decode(std::span<const std::byte> in, Command* out) noexcept {
  if (in.empty()) return {DecodeError::kTruncated, 0};
  const auto type = std::to_integer<std::size_t>(in[0]);
  if (type >= kCommandSize.size()) return {DecodeError::kUnknownType, 0};
  const std::size_t n = kCommandSize[type];
  if (in.size() < n) return {DecodeError::kTruncated, 0};
  Command c;
  Reader r(in.data() + kCommandHeader);
  ReadBody(type, r, &c.body, std::make_index_sequence<std::variant_size_v<CommandBody>>());
  r(c.timestamp_ns);
  assert(r.pos() == in.data() + n);
  if (r.error() != DecodeError::kOk) return {r.error(), 0};
  *out = c;
  return {DecodeError::kOk, n};
}

DecodeResult Decode(std::span<const std::byte> in, Event* out) noexcept {
  if (in.empty()) return {DecodeError::kTruncated, 0};
  const auto type = std::to_integer<std::size_t>(in[0]);
  if (type >= kEventSize.size()) return {DecodeError::kUnknownType, 0};
  const std::size_t n = kEventSize[type];
  if (in.size() < n) return {DecodeError::kTruncated, 0};
  Event e;
  Reader r(in.data() + 1);
  r(e.seq, e.timestamp_ns);
  ReadBody(type, r, &e.body, std::make_index_sequence<std::variant_size_v<EventBody>>());
  assert(r.pos() == in.data() + n);
  if (r.error() != DecodeError::kOk) return {r.error(), 0};
  *out = e;
  return {DecodeError::kOk, n};
}

DecodeResult DecodeExact(std::span<const std::byte> in, Command* out) noexcept {
  Command c;
  const DecodeResult r = Exact(Decode(in, &c), in.size());
  if (r.ok()) *out = c;
  return r;
}

DecodeResult DecodeExact(std::span<const std::byte> in, Event* out) noexcept {
  Event e;
  const DecodeResult r = Exact(Decode(in, &e), in.size());
  if (r.ok()) *out = e;
  return r;
}

std::vector<std::byte> EncodeToVector(const Command& command) {
  std::vector<std::byte> v(EncodedSize(command));
  v.resize(Encode(command, v));
  return v;
}

std::vector<std::byte> EncodeToVector(const Event& event) {
  std::vector<std::byte> v(EncodedSize(event));
  v.resize(Encode(event, v));
  return v;
}

// ---------------------------------------------------------------------------
// Snapshot images
// ---------------------------------------------------------------------------

std::vector<std::byte> EncodeImage(const EngineImage& image) {
  const std::size_t size =
      kImageHeaderSize + SectionSize<uint32_t>(image.market_status) +
      SectionSize<uint32_t>(image.asset_totals) + SectionSize<uint64_t>(image.balances) +
      SectionSize<uint64_t>(image.orders) + SectionSize<uint64_t>(image.recent_client_ids) +
      SectionSize<uint64_t>(image.transfers) + SectionSize<uint64_t>(image.pending_transfers) +
      SectionSize<uint32_t>(image.last_prices) + SectionSize<uint64_t>(image.stops) +
      SectionSize<uint64_t>(image.icebergs) + SectionSize<uint64_t>(image.lists) +
      SectionSize<uint64_t>(image.pending) + SectionSize<uint64_t>(image.accounts) +
      SectionSize<uint64_t>(image.api_keys) + SectionSize<uint32_t>(image.added_assets) +
      SectionSize<uint32_t>(image.added_markets) + kChecksumSize;
  std::vector<std::byte> out(size);
  Writer w(out.data());
  w.PutBytes(kImageMagic.data(), kImageMagic.size());
  w.PutUint(kImageFormatVersion);
  w(image.config_hash, image.last_sequence, image.next_trade_id);
  WriteSection<uint32_t>(w, image.market_status, kMaxById);
  WriteSection<uint32_t>(w, image.asset_totals, kMaxById);
  WriteSection<uint64_t>(w, image.balances);
  WriteSection<uint64_t>(w, image.orders);
  WriteSection<uint64_t>(w, image.recent_client_ids);
  WriteSection<uint64_t>(w, image.transfers);
  WriteSection<uint64_t>(w, image.pending_transfers);
  WriteSection<uint32_t>(w, image.last_prices, kMaxById);
  WriteSection<uint64_t>(w, image.stops);
  WriteSection<uint64_t>(w, image.icebergs);
  WriteSection<uint64_t>(w, image.lists);
  WriteSection<uint64_t>(w, image.pending);
  WriteSection<uint64_t>(w, image.accounts);
  WriteSection<uint64_t>(w, image.api_keys);
  WriteSection<uint32_t>(w, image.added_assets, kMaxById);
  WriteSection<uint32_t>(w, image.added_markets, kMaxById);
  const std::size_t body = size - kChecksumSize;
  MB_CHECK(w.pos() == out.data() + body);
  w.PutUint(static_cast<uint64_t>(XXH3_64bits(out.data(), body)));
  return out;
}

Result<EngineImage> DecodeImage(std::span<const std::byte> in) {
  if (in.size() < kMinImageSize) {
    return Corruption("snapshot: " + std::to_string(in.size()) +
                      " bytes is shorter than the smallest image (" +
                      std::to_string(kMinImageSize) + ")");
  }
  if (std::memcmp(in.data(), kImageMagic.data(), kImageMagic.size()) != 0) {
    return Corruption("snapshot: bad magic (not an MBSNAP01 image)");
  }
  const std::size_t body = in.size() - kChecksumSize;
  const uint64_t stored = LoadLe64(in.data() + body);
  const auto computed = static_cast<uint64_t>(XXH3_64bits(in.data(), body));
  if (stored != computed) {
    return Corruption("snapshot: checksum mismatch (stored " + Hex64(stored) + ", computed " +
                      Hex64(computed) + " over " + std::to_string(body) + " bytes)");
  }
  Reader header(in.data() + kImageMagic.size());
  const auto version = header.GetUint<uint16_t>();
  if (version < kOldestImageFormatVersion || version > kImageFormatVersion) {
    return Corruption("snapshot: format version " + std::to_string(version) +
                      " is not supported (this build reads " +
                      std::to_string(kOldestImageFormatVersion) + " to " +
                      std::to_string(kImageFormatVersion) + ")");
  }
  EngineImage image;
  header(image.config_hash, image.last_sequence, image.next_trade_id);

  Cursor c{in.data(), header.pos(), in.data() + body};
  constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
  MB_RETURN_IF_ERROR(ReadSection<uint32_t>("market_status", kMaxById, &c, &image.market_status));
  MB_RETURN_IF_ERROR(ReadSection<uint32_t>("asset_totals", kMaxById, &c, &image.asset_totals));
  MB_RETURN_IF_ERROR(ReadSection<uint64_t>("balances", kUnbounded, &c, &image.balances));
  MB_RETURN_IF_ERROR(ReadSection<uint64_t>("orders", kUnbounded, &c, &image.orders));
  MB_RETURN_IF_ERROR(
      ReadSection<uint64_t>("recent_client_ids", kUnbounded, &c, &image.recent_client_ids));
  MB_RETURN_IF_ERROR(ReadSection<uint64_t>("transfers", kUnbounded, &c, &image.transfers));
  // Version 1 images end there: no transfer to another venue was pending.
  if (version >= 2) {
    MB_RETURN_IF_ERROR(
        ReadSection<uint64_t>("pending_transfers", kUnbounded, &c, &image.pending_transfers));
  }
  // Version 2 images end there: no last price, no conditional order, no
  // iceberg, no order list.
  if (version >= 3) {
    MB_RETURN_IF_ERROR(ReadSection<uint32_t>("last_prices", kMaxById, &c, &image.last_prices));
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("stops", kUnbounded, &c, &image.stops));
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("icebergs", kUnbounded, &c, &image.icebergs));
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("lists", kUnbounded, &c, &image.lists));
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("pending", kUnbounded, &c, &image.pending));
  }
  // Version 3 images end there: no account, no API key, no asset or market
  // added at run time.
  if (version >= 4) {
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("accounts", kUnbounded, &c, &image.accounts));
    MB_RETURN_IF_ERROR(ReadSection<uint64_t>("api_keys", kUnbounded, &c, &image.api_keys));
    MB_RETURN_IF_ERROR(ReadSection<uint32_t>("added_assets", kMaxById, &c, &image.added_assets));
    MB_RETURN_IF_ERROR(ReadSection<uint32_t>("added_markets", kMaxById, &c, &image.added_markets));
  }
  if (c.left() != 0) {
    return Corruption("snapshot: " + std::to_string(c.left()) + " unexpected bytes at byte " +
                      std::to_string(c.offset()) + ", after the last section");
  }
  return image;
}

}  // namespace mb::codec
