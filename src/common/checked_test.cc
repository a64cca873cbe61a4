#include "common/checked.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace mb {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kSentinel = 12345;

TEST(CheckedAdd, AddsInRange) {
  int64_t out = kSentinel;
  EXPECT_TRUE(CheckedAdd(2, 3, &out));
  EXPECT_EQ(out, 5);
  EXPECT_TRUE(CheckedAdd(kMax - 1, 1, &out));
  EXPECT_EQ(out, kMax);
  EXPECT_TRUE(CheckedAdd(kMin + 1, -1, &out));
  EXPECT_EQ(out, kMin);
  EXPECT_TRUE(CheckedAdd(kMax, kMin, &out));
  EXPECT_EQ(out, -1);
  EXPECT_TRUE(CheckedAdd(kMax, 0, &out));
  EXPECT_EQ(out, kMax);
}

TEST(CheckedAdd, DetectsOverflowAtTheBoundaries) {
  int64_t out = kSentinel;
  EXPECT_FALSE(CheckedAdd(kMax, 1, &out));
  EXPECT_FALSE(CheckedAdd(1, kMax, &out));
  EXPECT_FALSE(CheckedAdd(kMax, kMax, &out));
  EXPECT_FALSE(CheckedAdd(kMin, -1, &out));
  EXPECT_FALSE(CheckedAdd(kMin, kMin, &out));
}

TEST(CheckedSub, SubtractsInRange) {
  int64_t out = kSentinel;
  EXPECT_TRUE(CheckedSub(5, 3, &out));
  EXPECT_EQ(out, 2);
  EXPECT_TRUE(CheckedSub(kMin + 1, 1, &out));
  EXPECT_EQ(out, kMin);
  EXPECT_TRUE(CheckedSub(-1, kMax, &out));
  EXPECT_EQ(out, kMin);
  EXPECT_TRUE(CheckedSub(kMax - 1, -1, &out));
  EXPECT_EQ(out, kMax);
  EXPECT_TRUE(CheckedSub(0, kMax, &out));
  EXPECT_EQ(out, -kMax);
}

TEST(CheckedSub, DetectsOverflowAtTheBoundaries) {
  int64_t out = kSentinel;
  EXPECT_FALSE(CheckedSub(kMin, 1, &out));
  EXPECT_FALSE(CheckedSub(kMax, -1, &out));
  EXPECT_FALSE(CheckedSub(0, kMin, &out));  // -INT64_MIN does not fit
  EXPECT_FALSE(CheckedSub(kMax, kMin, &out));
  EXPECT_FALSE(CheckedSub(-2, kMax, &out));
}

// The contract in checked.h: on overflow *out is left alone, so that
// `if (!CheckedAdd(balance, x, &balance)) reject;` keeps the balance intact.
TEST(CheckedAddSub, LeaveOutAloneOnOverflow) {
  int64_t out = kSentinel;
  EXPECT_FALSE(CheckedAdd(kMax, 1, &out));
  EXPECT_EQ(out, kSentinel) << "CheckedAdd stored the wrapped sum";
  out = kSentinel;
  EXPECT_FALSE(CheckedSub(kMin, 1, &out));
  EXPECT_EQ(out, kSentinel) << "CheckedSub stored the wrapped difference";
  int64_t balance = kMax - 5;
  EXPECT_FALSE(CheckedAdd(balance, 10, &balance));
  EXPECT_EQ(balance, kMax - 5);
}

TEST(FitsInt64, Boundaries) {
  EXPECT_TRUE(FitsInt64(0));
  EXPECT_TRUE(FitsInt64(static_cast<int128>(kMax)));
  EXPECT_TRUE(FitsInt64(static_cast<int128>(kMin)));
  EXPECT_FALSE(FitsInt64(static_cast<int128>(kMax) + 1));
  EXPECT_FALSE(FitsInt64(static_cast<int128>(kMin) - 1));
}

TEST(CheckedMul3, MultipliesInRange) {
  int64_t out = kSentinel;
  EXPECT_TRUE(CheckedMul3(2, 3, 7, &out));
  EXPECT_EQ(out, 42);
  EXPECT_TRUE(CheckedMul3(-2, 3, 7, &out));
  EXPECT_EQ(out, -42);
  EXPECT_TRUE(CheckedMul3(kMax, 1, 1, &out));
  EXPECT_EQ(out, kMax);
  EXPECT_TRUE(CheckedMul3(kMin, 1, 1, &out));
  EXPECT_EQ(out, kMin);
  EXPECT_TRUE(CheckedMul3(kMax, -1, 1, &out));
  EXPECT_EQ(out, -kMax);
  EXPECT_TRUE(CheckedMul3(0, kMax, kMax, &out));
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(CheckedMul3(kMax, kMax, 0, &out));
  EXPECT_EQ(out, 0);
  // The largest square that fits.
  EXPECT_TRUE(CheckedMul3(3037000499, 3037000499, 1, &out));  // floor(sqrt(2^63 - 1))
  EXPECT_EQ(out, int64_t{3037000499} * 3037000499);
  // 2^62 * 2 = 2^63 does not fit, but -2^62 * 2 = -2^63 does.
  EXPECT_TRUE(CheckedMul3(-(int64_t{1} << 62), 2, 1, &out));
  EXPECT_EQ(out, kMin);
  // A typical notional: price ticks x lots x notional per tick-lot.
  EXPECT_TRUE(CheckedMul3(100'000'000, 900'000'000, 10, &out));
  EXPECT_EQ(out, 900'000'000'000'000'000);
}

TEST(CheckedMul3, DetectsOverflowAtTheBoundaries) {
  int64_t out = kSentinel;
  EXPECT_FALSE(CheckedMul3(kMax, 2, 1, &out));
  EXPECT_FALSE(CheckedMul3(kMax, 1, 2, &out));
  EXPECT_FALSE(CheckedMul3(kMin, -1, 1, &out));  // 2^63
  EXPECT_FALSE(CheckedMul3(kMin, 1, -1, &out));
  EXPECT_FALSE(CheckedMul3(int64_t{1} << 62, 2, 1, &out));
  EXPECT_FALSE(CheckedMul3(3037000500, 3037000500, 1, &out));
  // a*b fits in 128 bits but not in 64; the third factor overflows even 128.
  EXPECT_FALSE(CheckedMul3(kMax, kMax, 1, &out));
  EXPECT_FALSE(CheckedMul3(kMax, kMax, kMax, &out));
  EXPECT_FALSE(CheckedMul3(kMin, kMin, kMin, &out));
  EXPECT_FALSE(CheckedMul3(kMax, kMax, -1, &out));
  EXPECT_FALSE(CheckedMul3(100'000'000, 900'000'000, 1000, &out));
  EXPECT_EQ(out, kSentinel) << "a failed multiply must leave *out alone";
}

TEST(FeeCeil, RoundsUp) {
  EXPECT_EQ(FeeCeil(1, 1), 1);
  EXPECT_EQ(FeeCeil(10000, 10), 10);
  EXPECT_EQ(FeeCeil(10001, 10), 11);
  EXPECT_EQ(FeeCeil(9999, 1), 1);
  EXPECT_EQ(FeeCeil(10000, 1), 1);
  EXPECT_EQ(FeeCeil(10001, 1), 2);
  EXPECT_EQ(FeeCeil(12345, 10000), 12345);
  EXPECT_EQ(FeeCeil(1, 10000), 1);
}

TEST(FeeCeil, ZeroInZeroOut) {
  for (int32_t bps : {0, 1, 10, 9999, 10000}) EXPECT_EQ(FeeCeil(0, bps), 0) << bps;
  for (int64_t a : {int64_t{1}, int64_t{10001}, kMax}) EXPECT_EQ(FeeCeil(a, 0), 0) << a;
}

TEST(FeeCeil, NeverOverflowsNearInt64Max) {
  EXPECT_EQ(FeeCeil(kMax, 10000), kMax);
  // kMax = 922337203685477 * 10000 + 5807.
  EXPECT_EQ(FeeCeil(kMax, 1), 922337203685478);
  EXPECT_EQ(FeeCeil(kMax, 10), 9223372036854776);
  EXPECT_EQ(FeeCeil(kMax, 9999), kMax - 922337203685477);
  EXPECT_EQ(FeeCeil(kMax - 1, 10000), kMax - 1);
}

TEST(FeeCeil, IsNeverLessThanTheExactFeeNorMoreThanOneUnitAbove) {
  for (int64_t a = 0; a < 3000; a += 7) {
    for (int32_t bps : {1, 7, 10, 25, 333, 9999, 10000}) {
      const int64_t fee = FeeCeil(a, bps);
      EXPECT_GE(fee * 10000, a * bps) << a << " " << bps;
      EXPECT_LT((fee - 1) * 10000, a * bps) << a << " " << bps;
      EXPECT_LE(fee, a);
    }
  }
}

}  // namespace
}  // namespace mb
