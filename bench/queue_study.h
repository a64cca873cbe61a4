// The queue study: `matchbook-bench queues`. A C++ reproduction of the MMMQ
// broker's ArrayBlockingQueue vs LinkedBlockingQueue study (background document
// 004), with the lock-free queues and Matchbook's inbound ring added.
//
// This header holds the two Java analogues, so that they can be read (and
// tested) on their own; everything else (the other queues' adapters, the
// threads, the counters, the tables) is in queue_study.cc.
//
//   ArrayOneLockQueue<T>   java.util.concurrent.ArrayBlockingQueue: one lock,
//                          a preallocated ring array, a plain count.
//   LinkedTwoLockQueue<T>  java.util.concurrent.LinkedBlockingQueue: a put
//                          lock, a take lock, an atomic count shared by both
//                          sides, one heap node per element.
//
// Both are used the way the study used them: offer(e) and poll() without a
// timeout, i.e. TryOffer()/TryPoll() that return false at once when the queue
// is full/empty. Nothing ever waits on a condition, so the condition variables
// of the Java classes are left out; where Java takes the *other* side's lock
// only to signal such a condition (LinkedBlockingQueue's signalNotEmpty() and
// signalNotFull()), the analogue still takes and releases that lock, because
// the study measured that cost ("Condition(notFull) wait").
//
// Lock waits: both queues lock an InstrumentedMutex, a std::mutex that counts
// the acquisitions that found it held (and the time spent getting it) into the
// calling thread's LockWaitCounters, if the thread installed one. This is the
// analogue of the study's JFR "Java Thread Park" events on ReentrantLock.lock().
// The uncontended path is std::mutex::try_lock() and nothing else.
//
// Thread safety: TryOffer/TryPoll from any number of threads. Construction and
// destruction with no concurrent calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

// Adds the `queues` subcommand to `app`. The returned runner runs the study
// with the options parsed; call it after app->parse(), when `queues` was given.
// It returns the exit code.
std::function<int()> AddQueueStudy(CLI::App* app);

// Lock waits of one thread. Written by its owner thread only (relaxed
// load + store, no read-modify-write); read by the study's main thread while
// the owner runs, hence atomics.
struct LockWaitCounters {
  std::atomic<uint64_t> waits{0};    // lock() calls that found the lock held
  std::atomic<uint64_t> wait_ns{0};  // steady_clock time inside those calls
};

// The calling thread's counters; nullptr (the default) records nothing.
inline thread_local LockWaitCounters* tls_lock_wait_counters = nullptr;

// A std::mutex (glibc: a futex, no spinning, not fair — like a non-fair
// ReentrantLock) that counts contended acquisitions. BasicLockable.
class InstrumentedMutex {
 public:
  void lock() {
    if (mu_.try_lock()) return;
    const auto t0 = std::chrono::steady_clock::now();
    mu_.lock();
    if (LockWaitCounters* c = tls_lock_wait_counters) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      c->waits.store(c->waits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      c->wait_ns.store(c->wait_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(ns),
                       std::memory_order_relaxed);
    }
  }
  void unlock() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// ArrayBlockingQueue analogue: every offer and poll takes the one lock, even
// to find the queue full or empty (Java's ABQ has no check before locking).
template <class T>
class ArrayOneLockQueue {
 public:
  // REQUIRES: capacity > 0. The array is value-initialised (its pages are
  // touched here, as the JVM zeroes a new array), not in the timed window.
  explicit ArrayOneLockQueue(std::size_t capacity)
      : capacity_(capacity), items_(std::make_unique<T[]>(capacity)) {}
  ArrayOneLockQueue(const ArrayOneLockQueue&) = delete;
  ArrayOneLockQueue& operator=(const ArrayOneLockQueue&) = delete;

  std::size_t capacity() const noexcept { return capacity_; }

  // offer(e): false, changing nothing, when full.
  bool TryOffer(const T& value) {
    std::lock_guard<InstrumentedMutex> g(lock_);
    if (count_ == capacity_) return false;
    items_[put_index_] = value;
    if (++put_index_ == capacity_) put_index_ = 0;
    ++count_;
    return true;
  }

  // poll(): false when empty.
  bool TryPoll(T* out) {
    std::lock_guard<InstrumentedMutex> g(lock_);
    if (count_ == 0) return false;
    *out = items_[take_index_];
    if (++take_index_ == capacity_) take_index_ = 0;
    --count_;
    return true;
  }

 private:
  const std::size_t capacity_;
  InstrumentedMutex lock_;
  std::unique_ptr<T[]> items_;  // guarded by lock_
  std::size_t put_index_ = 0;   // guarded by lock_
  std::size_t take_index_ = 0;  // guarded by lock_
  std::size_t count_ = 0;       // guarded by lock_ (a plain int in Java too)
};

// LinkedBlockingQueue analogue (JDK 17's offer/poll, line for line, less the
// conditions nobody waits on).
//
// Invariants:
//   I1  head_ is a dummy node; the elements are head_->next, ..., last_.
//       head_ is read and written under take_lock_ only, last_ under
//       put_lock_ only.
//   I2  count_ is the number of linked elements. A producer links the node
//       (release store of next) before its fetch_add; a consumer reads next
//       (acquire) only after it has seen count_ > 0 (acquire), so it never
//       reads a next that is still being written.
//   I3  when count_ == 1, head_->next == last_: the producer then writes
//       last_->next while the consumer reads head_->next, which are
//       different fields of different nodes.
template <class T>
class LinkedTwoLockQueue {
 public:
  // REQUIRES: 0 < capacity < 2^62.
  explicit LinkedTwoLockQueue(std::size_t capacity)
      : capacity_(static_cast<int64_t>(capacity)), head_(new Node{}), last_(head_) {}
  LinkedTwoLockQueue(const LinkedTwoLockQueue&) = delete;
  LinkedTwoLockQueue& operator=(const LinkedTwoLockQueue&) = delete;
  ~LinkedTwoLockQueue() {
    for (Node* n = head_; n != nullptr;) {
      Node* next = n->next.load(std::memory_order_relaxed);
      delete n;
      n = next;
    }
  }

  std::size_t capacity() const noexcept { return static_cast<std::size_t>(capacity_); }

  bool TryOffer(const T& value) {
    // Java's fast fail before allocating: a read of the shared count.
    if (count_.load(std::memory_order_acquire) == capacity_) return false;
    Node* node = new Node{value};
    int64_t c = -1;
    {
      std::lock_guard<InstrumentedMutex> g(put_lock_);
      if (count_.load(std::memory_order_acquire) != capacity_) {
        last_->next.store(node, std::memory_order_release);  // I2
        last_ = node;
        c = count_.fetch_add(1, std::memory_order_acq_rel);  // I2
      }
    }
    if (c < 0) {
      delete node;  // full after all; the JVM leaves the node to the GC
      return false;
    }
    if (c == 0) SignalNotEmpty();
    return true;
  }

  bool TryPoll(T* out) {
    if (count_.load(std::memory_order_acquire) == 0) return false;
    int64_t c = 0;
    {
      std::lock_guard<InstrumentedMutex> g(take_lock_);
      if (count_.load(std::memory_order_acquire) == 0) return false;  // I2
      Node* h = head_;
      Node* first = h->next.load(std::memory_order_acquire);  // I2, I3
      head_ = first;  // the first element's node becomes the dummy
      *out = first->item;
      delete h;
      c = count_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (c == capacity_) SignalNotFull();
    return true;
  }

 private:
  struct Node {
    T item{};
    std::atomic<Node*> next{nullptr};
  };

  // Java: takeLock.lock(); notEmpty.signal(); takeLock.unlock().
  void SignalNotEmpty() { std::lock_guard<InstrumentedMutex> g(take_lock_); }
  // Java: putLock.lock(); notFull.signal(); putLock.unlock().
  void SignalNotFull() { std::lock_guard<InstrumentedMutex> g(put_lock_); }

  const int64_t capacity_;
  std::atomic<int64_t> count_{0};  // written by both sides (fetch_add / fetch_sub)
  alignas(64) InstrumentedMutex take_lock_;
  Node* head_;  // guarded by take_lock_ (I1)
  alignas(64) InstrumentedMutex put_lock_;
  Node* last_;  // guarded by put_lock_ (I1)
};

}  // namespace mb::bench
