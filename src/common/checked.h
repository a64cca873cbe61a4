// Overflow-checked integer arithmetic for money. Every product of a price and a
// quantity is computed in 128 bits and narrowed back to int64 only when it fits;
// nothing wraps.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>

namespace mb {

__extension__ typedef __int128 int128;  // NOLINT(modernize-use-using): pedantic-clean spelling

// Returns false (and leaves *out alone) when a + b does not fit in int64.
[[nodiscard]] constexpr bool CheckedAdd(int64_t a, int64_t b, int64_t* out) noexcept {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

[[nodiscard]] constexpr bool CheckedSub(int64_t a, int64_t b, int64_t* out) noexcept {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

[[nodiscard]] constexpr bool FitsInt64(int128 v) noexcept {
  return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
}

// a * b * c without wrapping; false (leaving *out alone) when the product does
// not fit in int64. Two 64-bit overflow-checked multiplications: for c >= 0, if
// a * b already overflows, so does a * b * c unless c == 0, so the answer is
// exact. REQUIRES: c >= 0 (a negative c may report a fitting product as an
// overflow: it errs only toward refusing). Every caller passes c >= 1.
[[nodiscard]] constexpr bool CheckedMul3(int64_t a, int64_t b, int64_t c, int64_t* out) noexcept {
  int64_t ab = 0;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &ab)) {
    if (c != 0) return false;
    *out = 0;
    return true;
  }
  if (__builtin_mul_overflow(ab, c, &r)) return false;
  *out = r;
  return true;
}

// ceil(a * bps / 10000) for a >= 0, 0 <= bps <= 10000: never overflows, since the
// result is at most a.
[[nodiscard]] constexpr int64_t FeeCeil(int64_t a, int32_t bps) noexcept {
  int128 num = static_cast<int128>(a) * bps;
  return static_cast<int64_t>((num + 9999) / 10000);
}

}  // namespace mb
