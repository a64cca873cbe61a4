// Strong numeric types for the domain: prices in ticks, quantities in lots,
// amounts in an asset's smallest unit, and the identities derived from the
// global sequence. A bare integer never crosses a module boundary.
//
// Thread safety: plain values; no shared state.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace mb {

// An int64 with a unit. Arithmetic is the caller's responsibility: the engine
// checks overflow with common/checked.h before it adds or multiplies.
template <class Tag>
struct Fixed {
  int64_t value = 0;

  constexpr Fixed() = default;
  constexpr explicit Fixed(int64_t v) : value(v) {}
  constexpr auto operator<=>(const Fixed&) const = default;
  constexpr Fixed operator+(Fixed o) const { return Fixed(value + o.value); }
  constexpr Fixed operator-(Fixed o) const { return Fixed(value - o.value); }
  constexpr Fixed& operator+=(Fixed o) {
    value += o.value;
    return *this;
  }
  constexpr Fixed& operator-=(Fixed o) {
    value -= o.value;
    return *this;
  }
};

struct PriceTag {};
struct QtyTag {};
struct AmountTag {};

using Price = Fixed<PriceTag>;    // ticks of the market's tick size
using Qty = Fixed<QtyTag>;        // lots of the market's lot (step) size
using Amount = Fixed<AmountTag>;  // smallest units of one asset (10^-scale)

enum class Sequence : uint64_t {};    // global command sequence, starts at 1
enum class OrderId : uint64_t {};     // == the Sequence of the command that placed it
enum class TradeId : uint64_t {};     // dense counter, starts at 1
enum class TransferId : uint64_t {};  // == the Sequence of the deposit/withdrawal
enum class AccountId : uint32_t {};
enum class MarketId : uint16_t {};
enum class AssetId : uint16_t {};

template <class E>
constexpr auto Raw(E e) noexcept {
  return static_cast<std::underlying_type_t<E>>(e);
}

}  // namespace mb
