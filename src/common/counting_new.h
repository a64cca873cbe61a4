// Test support: replaces the global operator new / delete of a test binary
// with ones that count every allocation and, while asked to, remember the
// largest — so a test can prove a hot path allocates nothing, or that a
// decoder refuses a garbage size before allocating it.
//
// Include in exactly ONE translation unit of a test binary (the operators
// are definitions). Every non-aligned form is replaced, so new/delete pairs
// stay matched (also under AddressSanitizer).
//
// Thread safety: the counters are atomics; any thread may allocate.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace mb::testing {

// Allocations made by operator new since the program started.
inline std::atomic<long> g_allocations{0};
// While g_track_largest is set, the largest single allocation.
inline std::atomic<bool> g_track_largest{false};
inline std::atomic<std::size_t> g_largest_allocation{0};

inline void* CountedAllocate(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_track_largest.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n)) {
    }
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

inline void* CountedAllocateNoThrow(std::size_t n) noexcept {
  try {
    return CountedAllocate(n);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace mb::testing

void* operator new(std::size_t n) { return mb::testing::CountedAllocate(n); }
void* operator new[](std::size_t n) { return mb::testing::CountedAllocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return mb::testing::CountedAllocateNoThrow(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return mb::testing::CountedAllocateNoThrow(n);
}
// g++ (-O1 and up) inlines these into code whose `new` it takes for the
// built-in one and reports a new/free mismatch that is not one: both sides
// are replaced here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
