// Clock readings, and the clock a component takes when a test wants to set
// its time.
//
//   SteadyNs()  monotonic ns since an arbitrary start (std::chrono::steady_clock,
//               CLOCK_MONOTONIC): intervals, deadlines, stage latencies
//   WallNs()    ns since the Unix epoch (std::chrono::system_clock,
//               CLOCK_REALTIME): event times, the API's times, file names
//   WallMs()    ms since the Unix epoch (WallNs() / 10^6)
//
// Clock holds the same two readings behind an interface, for the components
// whose behaviour depends on the time (the gateway's rate limits, recvWindow
// and serverTime; the projector's lag): SystemClock reads the functions
// above, ManualClock returns what a test set. Hot paths that only stamp
// latencies (the exchange's stage times) call SteadyNs() directly: a virtual
// call per command buys them nothing a test needs.
//
// Thread safety: the functions and both clocks may be used from any thread;
// ManualClock's readings are atomics, so a test may move it while the
// component reads it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mb {

inline int64_t SteadyNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t WallNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline int64_t WallMs() noexcept { return WallNs() / 1'000'000; }

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t steady_ns() const noexcept = 0;  // as SteadyNs()
  virtual int64_t wall_ns() const noexcept = 0;    // as WallNs()
  int64_t wall_ms() const noexcept { return wall_ns() / 1'000'000; }
};

// The real time.
class SystemClock final : public Clock {
 public:
  int64_t steady_ns() const noexcept override { return SteadyNs(); }
  int64_t wall_ns() const noexcept override { return WallNs(); }
};

// The clock components use when they are given none.
const Clock& DefaultClock() noexcept;

// A test's time: stands still until the test moves it.
class ManualClock final : public Clock {
 public:
  // 2023-11-14T22:13:20Z by default: a plausible wall time for API checks.
  static constexpr int64_t kDefaultWallNs = int64_t{1'700'000'000} * 1'000'000'000;

  explicit ManualClock(int64_t wall_ns = kDefaultWallNs, int64_t steady_ns = 0) noexcept
      : steady_ns_(steady_ns), wall_ns_(wall_ns) {}

  int64_t steady_ns() const noexcept override { return steady_ns_.load(std::memory_order_relaxed); }
  int64_t wall_ns() const noexcept override { return wall_ns_.load(std::memory_order_relaxed); }

  // Both readings move on by d (REQUIRES: d >= 0: a steady clock never goes back).
  void Advance(std::chrono::nanoseconds d) noexcept {
    steady_ns_.fetch_add(d.count(), std::memory_order_relaxed);
    wall_ns_.fetch_add(d.count(), std::memory_order_relaxed);
  }
  // The wall clock alone jumps (as an NTP step would); the steady one keeps going.
  void SetWallNs(int64_t wall_ns) noexcept { wall_ns_.store(wall_ns, std::memory_order_relaxed); }
  void SetWallMs(int64_t wall_ms) noexcept { SetWallNs(wall_ms * 1'000'000); }

 private:
  std::atomic<int64_t> steady_ns_;
  std::atomic<int64_t> wall_ns_;
};

}  // namespace mb
