#include "concurrency/wait.h"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

#include "common/clock.h"

namespace mb::concurrency {

std::string_view ToString(WaitKind kind) noexcept {
  switch (kind) {
    case WaitKind::kBusySpin:
      return "busy-spin";
    case WaitKind::kYield:
      return "yield";
    case WaitKind::kBackOff:
      return "back-off";
  }
  return "?";
}

Result<WaitKind> ParseWaitKind(std::string_view text) {
  for (WaitKind k : {WaitKind::kBusySpin, WaitKind::kYield, WaitKind::kBackOff}) {
    if (text == ToString(k)) return k;
  }
  return InvalidArgument(
      fmt::format("unknown wait strategy \"{}\" (busy-spin, yield or back-off)", text));
}

std::string Describe(const WaitConfig& config) {
  if (config.kind != WaitKind::kBackOff) return std::string(ToString(config.kind));
  return fmt::format("back-off (spin {}, yield {}, park <= {} us)", config.spins, config.yields,
                     config.park_us);
}

void Waiter::Yield() noexcept { sched_yield(); }

void Waiter::Grow() noexcept {
  const uint64_t full = uint64_t{config_.spins} + config_.yields;
  budget_ = static_cast<uint32_t>(std::min<uint64_t>(full, uint64_t{budget_} * 2 + 1));
}

void Waiter::Park() noexcept {
  parks_.fetch_add(1, std::memory_order_relaxed);
  timespec timeout{};
  timeout.tv_sec = config_.park_us / 1'000'000;
  timeout.tv_nsec = static_cast<long>(config_.park_us % 1'000'000) * 1000;
  // Two clock reads (vDSO, tens of nanoseconds) against a futex round trip:
  // how long the park lasted is what tells whether spinning would have paid.
  const int64_t start = SteadyNs();
  // Sleeps only while the word is still 1: a Wake() between our announcement
  // and this call makes it return at once (EAGAIN).
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&parked_), FUTEX_WAIT_PRIVATE, 1u, &timeout,
          nullptr, 0);
  if (SteadyNs() - start < kShortParkNs) {
    Grow();
  } else {
    budget_ /= 2;
  }
}

void Waiter::WakeSlow() noexcept {
  parked_.store(0, std::memory_order_relaxed);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&parked_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace mb::concurrency
