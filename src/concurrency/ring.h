// MpscRing<T>: the inbound ring. A bounded, preallocated, Disruptor-style ring
// with many producers and one consumer.
//
//   producers:  TryClaim() -> slot -> write it -> Publish()      (or TryPublish(value))
//   consumer:   Available() -> read slots [begin, end) -> Release(end)
//
// A producer claims the next sequence with one compare-and-swap on the claim
// cursor (failing fast, without waiting, when the ring is full), writes the slot
// and publishes that one slot. The consumer sees every contiguous published slot
// from its cursor in one call and consumes them as a batch; slots published out
// of order by racing producers become visible once the gap before them fills.
//
// Invariants (the memory orders below name the one they serve):
//   I1  consumed_ <= claimed_ <= consumed_ + capacity: a producer never claims a
//       slot the consumer has not released (TryClaim checks it before its CAS).
//   I2  published_[s & mask] == Round(s) exactly when sequence s is written and
//       published; the consumer reads slot s only after observing that
//       (release in Publish / acquire in Available).
//   I3  the consumer writes consumed_ only forward, after it has finished
//       reading every slot below it (release in Release / acquire in TryClaim),
//       so a producer reusing a slot never races the consumer's read of it.
//   I4  each cursor lives on its own cache line; the slots array and the
//       published flags are separate allocations.
//
// Thread safety: TryClaim/Publish/TryPublish/remaining from any thread;
// Available/Release/Slot(consumer side) from one consumer thread only.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace mb::concurrency {

inline constexpr std::size_t kCacheLine = 64;

// A value alone on its cache line (and the next one, against the adjacent-line
// prefetcher).
template <class T>
struct alignas(2 * kCacheLine) Padded {
  T value{};
};

template <class T>
class MpscRing {
  static_assert(std::is_default_constructible_v<T>);

 public:
  // REQUIRES: capacity is a power of two, >= 2 and < 2^31.
  explicit MpscRing(std::size_t capacity)
      : capacity_(static_cast<int64_t>(capacity)),
        mask_(capacity - 1),
        shift_(std::countr_zero(capacity)),
        slots_(new T[capacity]),
        published_(new std::atomic<int64_t>[capacity]) {
    for (std::size_t i = 0; i < capacity; ++i) {
      // Round(i) of a never-published sequence: -1 matches no round.
      published_[i].store(-1, std::memory_order_relaxed);
    }
  }

  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  std::size_t capacity() const noexcept { return static_cast<std::size_t>(capacity_); }

  // ---- producers ----

  // Claims the next sequence. Returns -1, changing nothing, when the ring is
  // full. Otherwise the caller owns Slot(seq) until it calls Publish(seq) —
  // it must publish every claimed sequence, promptly, or the consumer stalls.
  int64_t TryClaim() noexcept {
    int64_t seq = claimed_.value.load(std::memory_order_relaxed);
    for (;;) {
      // I1/I3: acquire pairs with Release()'s store: the consumer is done with
      // the slot we are about to overwrite.
      if (seq - consumed_.value.load(std::memory_order_acquire) >= capacity_) return -1;
      if (claimed_.value.compare_exchange_weak(seq, seq + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed)) {
        return seq;
      }
    }
  }

  T& Slot(int64_t seq) noexcept { return slots_[static_cast<std::size_t>(seq) & mask_]; }

  void Publish(int64_t seq) noexcept {
    // I2: release pairs with Available()'s acquire: the slot's contents are
    // visible before the flag says they are.
    published_[static_cast<std::size_t>(seq) & mask_].store(Round(seq), std::memory_order_release);
  }

  // Claim, copy, publish. False, changing nothing, when the ring is full.
  bool TryPublish(const T& value) noexcept {
    const int64_t seq = TryClaim();
    if (seq < 0) return false;
    Slot(seq) = value;
    Publish(seq);
    return true;
  }

  // Free slots right now (a gauge: stale as soon as it returns).
  std::size_t remaining() const noexcept {
    const int64_t used = claimed_.value.load(std::memory_order_relaxed) -
                         consumed_.value.load(std::memory_order_relaxed);
    return static_cast<std::size_t>(capacity_ - (used < 0 ? 0 : used));
  }

  // ---- the consumer ----

  // Sequences [next(), returned) are published and may be read with Slot().
  // At most `limit` of them. Returns next() when nothing is available.
  int64_t Available(int64_t limit = INT64_MAX) const noexcept {
    const int64_t begin = next_;
    int64_t end = begin;
    const int64_t stop = limit >= capacity_ ? begin + capacity_ : begin + limit;
    // I2: acquire pairs with Publish()'s release.
    while (end < stop && published_[static_cast<std::size_t>(end) & mask_].load(
                             std::memory_order_acquire) == Round(end)) {
      ++end;
    }
    return end;
  }

  // True when at least one slot is ready (the wait strategy's predicate).
  bool HasAvailable() const noexcept {
    return published_[static_cast<std::size_t>(next_) & mask_].load(std::memory_order_acquire) ==
           Round(next_);
  }

  int64_t next() const noexcept { return next_; }

  // Hands slots below `end` back to the producers.
  // REQUIRES: next() <= end <= the last Available() result.
  void Release(int64_t end) noexcept {
    next_ = end;
    // I3: release pairs with TryClaim()'s acquire.
    consumed_.value.store(end, std::memory_order_release);
  }

 private:
  int64_t Round(int64_t seq) const noexcept { return seq >> shift_; }

  const int64_t capacity_;
  const std::size_t mask_;
  const int shift_;
  std::unique_ptr<T[]> slots_;
  std::unique_ptr<std::atomic<int64_t>[]> published_;

  Padded<std::atomic<int64_t>> claimed_;      // written by producers (CAS)
  Padded<std::atomic<int64_t>> consumed_;     // written by the consumer only
  alignas(2 * kCacheLine) int64_t next_ = 0;  // consumer-private copy of consumed_
};

// SpscRing<T>: one producer, one consumer; each side caches the other's cursor
// so the common case touches no shared line (rigtorp/SPSCQueue's layout).
//
// Invariants:
//   I1  tail_ - head_ <= capacity; only the producer writes tail_, only the
//       consumer writes head_.
//   I2  a slot below tail_ is fully written (release on tail_ / acquire in the
//       consumer), and a slot below head_ is no longer read (release on head_ /
//       acquire in the producer).
//
// Thread safety: one producer thread, one consumer thread.
template <class T>
class SpscRing {
 public:
  // REQUIRES: capacity is a power of two >= 2.
  explicit SpscRing(std::size_t capacity) : mask_(capacity - 1), slots_(new T[capacity]) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const noexcept { return mask_ + 1; }

  bool TryPush(T value) noexcept {
    const uint64_t tail = tail_.value.load(std::memory_order_relaxed);
    if (tail - head_cache_ > mask_) {
      head_cache_ = head_.value.load(std::memory_order_acquire);  // I2
      if (tail - head_cache_ > mask_) return false;
    }
    slots_[tail & mask_] = std::move(value);
    tail_.value.store(tail + 1, std::memory_order_release);  // I2
    return true;
  }

  // The oldest value, or nullptr when empty. Stays valid until Pop().
  T* Front() noexcept {
    const uint64_t head = head_.value.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.value.load(std::memory_order_acquire);  // I2
      if (head == tail_cache_) return nullptr;
    }
    return &slots_[head & mask_];
  }

  void Pop() noexcept {
    head_.value.store(head_.value.load(std::memory_order_relaxed) + 1,
                      std::memory_order_release);  // I2
  }

  bool Empty() const noexcept {
    return head_.value.load(std::memory_order_acquire) ==
           tail_.value.load(std::memory_order_acquire);
  }

  std::size_t size() const noexcept {
    return static_cast<std::size_t>(tail_.value.load(std::memory_order_acquire) -
                                    head_.value.load(std::memory_order_acquire));
  }

 private:
  const uint64_t mask_;
  std::unique_ptr<T[]> slots_;
  Padded<std::atomic<uint64_t>> tail_;               // producer writes
  alignas(2 * kCacheLine) uint64_t head_cache_ = 0;  // producer-private
  Padded<std::atomic<uint64_t>> head_;               // consumer writes
  alignas(2 * kCacheLine) uint64_t tail_cache_ = 0;  // consumer-private
};

}  // namespace mb::concurrency
