// Wait strategies: what a consumer thread does while it has nothing to do.
//
//   busy-spin  poll continuously (lowest latency; burns its core: dedicated cores only)
//   yield      poll, sched_yield() between polls (gives the core to others, still 100% busy)
//   back-off   spin `spins` polls, then yield `yields` times, then park on a futex
//              for at most `park_us`; producers wake a parked consumer. The default:
//              an idle stage costs nothing, so it behaves on a 2-core machine.
//
// Back-off learns whether its spin and yield phases pay. They pay when work
// arrives within them; they are wasted when the consumer parks anyway, and at
// low rates (work every millisecond or so) every idle period would spin and
// yield for tens of microseconds and then park: the phases, not the work,
// would be the stage's CPU. So each park is timed: one that lasts longer than
// kShortParkNs halves the polls the next idle period makes before parking
// (yields go first, then spins), down to none; one that ends sooner (work came
// right after the consumer gave up), or work found at the last check before
// parking, doubles them again, up to spins + yields. A busy stage keeps its
// phases; a stage fed every millisecond parks as soon as it is idle.
//
// Usage (consumer):   Waiter w(config);
//                     for (;;) { if (work()) { w.Reset(); continue; }
//                                w.Idle([&] { return has_work(); }); }
//         (producers) publish, then w.Wake().
//
// Parking is race-free: the consumer announces it is parked (seq_cst), re-checks
// the predicate, then sleeps only if the announcement is still up; a producer
// publishes, then (after a seq_cst fence) checks the announcement and wakes the
// futex. Either the consumer sees the new work or the producer sees the parked
// consumer. The bounded park (park_us) only limits the damage of a stage that
// forgets to call Wake(); it is not what makes the wake-up correct.
//
// Thread safety: Idle/Reset from the one consumer thread; Wake from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mb::concurrency {

enum class WaitKind : uint8_t { kBusySpin, kYield, kBackOff };

struct WaitConfig {
  WaitKind kind = WaitKind::kBackOff;
  uint32_t spins = 200;     // back-off: polls before yielding
  uint32_t yields = 20;     // back-off: yields before parking
  uint32_t park_us = 1000;  // back-off: longest single park
};

// A park shorter than this means the work came about as soon as the spin and
// yield phases would have waited for it (200 polls and 20 yields take tens of
// microseconds): they would have paid, so back-off gives them more rounds.
inline constexpr int64_t kShortParkNs = 50'000;

std::string_view ToString(WaitKind kind) noexcept;
// "busy-spin" | "yield" | "back-off"
Result<WaitKind> ParseWaitKind(std::string_view text);
// e.g. "back-off (spin 200, yield 20, park <= 1000 us)"
std::string Describe(const WaitConfig& config);

class Waiter {
 public:
  explicit Waiter(WaitConfig config = {}) noexcept
      : config_(config), budget_(config.spins + config.yields) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  const WaitConfig& config() const noexcept { return config_; }

  // The consumer found work: the next idle period starts from the spin phase.
  void Reset() noexcept { idle_rounds_ = 0; }

  // The consumer found no work: wait a little, according to the strategy.
  // `ready` is re-checked before parking; it must be cheap and side-effect free.
  template <class Ready>
  void Idle(Ready&& ready) noexcept {
    switch (config_.kind) {
      case WaitKind::kBusySpin:
        CpuRelax();
        return;
      case WaitKind::kYield:
        Yield();
        return;
      case WaitKind::kBackOff:
        break;
    }
    const uint32_t round = idle_rounds_++;
    if (round < budget_) {
      // The budget is cut from the end: yields go before spins.
      if (round < config_.spins) {
        CpuRelax();
      } else {
        Yield();
      }
    } else {
      parked_.store(1, std::memory_order_seq_cst);
#if !defined(__SANITIZE_THREAD__)
      // The announcement must be visible before ready() reads the producers'
      // flags (a store-load order; acquire loads alone do not give it).
      std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
      if (ready()) {
        Grow();  // the work came just as the phases ran out
      } else {
        Park();
      }
      parked_.store(0, std::memory_order_relaxed);
    }
  }

  // Producers, after publishing: wakes the consumer if it is parked. A fence
  // and a load when it is not (nothing at all for busy-spin and yield).
  void Wake() noexcept {
    if (config_.kind != WaitKind::kBackOff) return;
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer does not model fences; a seq_cst read-modify-write
    // orders the same way (and is slower: producers would contend on it).
    if (parked_.fetch_add(0, std::memory_order_seq_cst) != 0) WakeSlow();
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_relaxed) != 0) WakeSlow();
#endif
  }

  // Wakes the consumer unconditionally (shutdown, timers).
  void WakeAlways() noexcept { WakeSlow(); }

  uint64_t parks() const noexcept { return parks_.load(std::memory_order_relaxed); }
  // Back-off: the polls (spins, then yields) the next idle period makes before
  // parking, as learned so far. Consumer thread only.
  uint32_t budget() const noexcept { return budget_; }

 private:
  static void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  static void Yield() noexcept;
  void Park() noexcept;
  void WakeSlow() noexcept;
  void Grow() noexcept;

  const WaitConfig config_;
  uint32_t idle_rounds_ = 0;         // consumer-private
  uint32_t budget_ = 0;              // consumer-private: polls before parking (back-off)
  std::atomic<uint32_t> parked_{0};  // the futex word: 1 while the consumer may sleep
  std::atomic<uint64_t> parks_{0};   // consumer writes; a gauge for tests and metrics
};

}  // namespace mb::concurrency
