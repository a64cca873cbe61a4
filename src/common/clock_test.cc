#include "common/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace mb {
namespace {

using std::chrono::milliseconds;

TEST(Clock, ReadingsAreNowAndConsistent) {
  const int64_t ms = WallMs();
  const int64_t ns = WallNs();
  // After 2023 and within a second of each other (ms read first).
  EXPECT_GT(ms, int64_t{1'700'000'000'000});
  EXPECT_LE(ms, ns / 1'000'000);
  EXPECT_LT(ns / 1'000'000 - ms, 1000);
  const auto chrono_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_LT(chrono_ns - ns, int64_t{1'000'000'000});
}

TEST(Clock, SteadyNeverGoesBack) {
  int64_t last = SteadyNs();
  for (int i = 0; i < 1000; ++i) {
    const int64_t now = SteadyNs();
    EXPECT_GE(now, last);
    last = now;
  }
  const int64_t before = SteadyNs();
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GE(SteadyNs() - before, 5'000'000);
}

TEST(Clock, SystemClockReadsTheFunctions) {
  const Clock& c = DefaultClock();
  const int64_t wall = WallNs();
  const int64_t steady = SteadyNs();
  EXPECT_GE(c.wall_ns(), wall);
  EXPECT_GE(c.steady_ns(), steady);
  EXPECT_LT(c.wall_ns() - wall, int64_t{1'000'000'000});
  EXPECT_EQ(&DefaultClock(), &c);
  SystemClock own;
  EXPECT_GE(own.wall_ms(), wall / 1'000'000);
}

TEST(Clock, ManualClockStandsStillUntilMoved) {
  ManualClock c;
  EXPECT_EQ(c.wall_ns(), ManualClock::kDefaultWallNs);
  EXPECT_EQ(c.wall_ms(), ManualClock::kDefaultWallNs / 1'000'000);
  EXPECT_EQ(c.steady_ns(), 0);
  std::this_thread::sleep_for(milliseconds(2));
  EXPECT_EQ(c.steady_ns(), 0);

  c.Advance(milliseconds(1500));
  EXPECT_EQ(c.steady_ns(), 1'500'000'000);
  EXPECT_EQ(c.wall_ms(), ManualClock::kDefaultWallNs / 1'000'000 + 1500);

  // A wall step leaves the steady clock where it was.
  c.SetWallMs(42);
  EXPECT_EQ(c.wall_ns(), 42'000'000);
  EXPECT_EQ(c.wall_ms(), 42);
  EXPECT_EQ(c.steady_ns(), 1'500'000'000);

  ManualClock at(7'000'000, 3);
  EXPECT_EQ(at.wall_ms(), 7);
  EXPECT_EQ(at.steady_ns(), 3);
  const Clock& as_clock = at;
  EXPECT_EQ(as_clock.wall_ns(), 7'000'000);
}

}  // namespace
}  // namespace mb
