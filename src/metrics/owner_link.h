// What the exchange's and the gateway's metrics share: the stage-latency
// family both record into (stage times are SteadyNs(), common/clock.h), and
// OwnerLink — the way a registry callback reaches an object that may be
// destroyed before the registry (the owner clears the link in its destructor;
// a later scrape reads 0 or writes nothing).
//
// Thread safety: OwnerLink's callbacks run on scraping threads, Clear() on
// the owner's; a mutex orders them (scrapes only, never a hot path).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "common/thread_annotations.h"

namespace mb::metrics {

// The histogram family of every pipeline stage (label `stage`).
inline constexpr std::string_view kStageLatency = "matchbook_stage_latency_seconds";
inline constexpr std::string_view kStageLatencyHelp =
    "Latency of each pipeline stage (docs/metrics.md says where each starts and ends)";

template <class T>
class OwnerLink {
 public:
  explicit OwnerLink(const T* owner) : state_(std::make_shared<State>(owner)) {}

  // The owner is going away: callbacks made by Read()/With() stop reading it.
  void Clear() {
    MutexLock lock(state_->mu);
    state_->owner = nullptr;
  }

  // A gauge/counter callback: f(owner), or 0 once cleared.
  std::function<double()> Read(double (*f)(const T&)) const {
    return [state = state_, f]() -> double {
      MutexLock lock(state->mu);
      return state->owner != nullptr ? f(*state->owner) : 0.0;
    };
  }

  // A callback that runs f(owner, args...) while the owner lives.
  template <class F>
  auto With(F f) const {
    return [state = state_, f](auto&&... args) {
      MutexLock lock(state->mu);
      if (state->owner != nullptr) f(*state->owner, std::forward<decltype(args)>(args)...);
    };
  }

 private:
  struct State {
    explicit State(const T* o) : owner(o) {}
    Mutex mu;
    const T* owner MB_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

}  // namespace mb::metrics
