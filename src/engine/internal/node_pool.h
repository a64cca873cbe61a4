// A fixed-size block pool and an allocator over it, for the node-based
// containers the engine keeps per price level: after warm-up, adding and
// removing a level reuses freed blocks and never calls malloc.
//
// Thread safety: none; one pool per engine, used by the engine thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "common/status.h"

namespace mb::engine::internal {

class NodePool {
 public:
  // `reserve` blocks are carved out on first use; growth after that comes in
  // chunks of the same size.
  explicit NodePool(std::size_t reserve = 1024) : chunk_blocks_(reserve < 64 ? 64 : reserve) {}
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  void* Allocate(std::size_t size) {
    if (block_size_ == 0) block_size_ = (size + kAlign - 1) / kAlign * kAlign;
    MB_CHECK(size <= block_size_);
    if (free_ == nullptr) Grow();
    Free* f = free_;
    free_ = f->next;
    return f;
  }

  void Deallocate(void* p) noexcept {
    auto* f = static_cast<Free*>(p);
    f->next = free_;
    free_ = f;
  }

 private:
  static constexpr std::size_t kAlign = alignof(std::max_align_t);
  struct Free {
    Free* next;
  };

  void Grow() {
    chunks_.push_back(std::make_unique<std::byte[]>(block_size_ * chunk_blocks_));
    std::byte* base = chunks_.back().get();
    for (std::size_t i = chunk_blocks_; i-- > 0;) {
      auto* f = reinterpret_cast<Free*>(base + i * block_size_);
      f->next = free_;
      free_ = f;
    }
  }

  std::size_t chunk_blocks_;
  std::size_t block_size_ = 0;
  Free* free_ = nullptr;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
};

// Single-object allocations come from the pool; anything else (never used by
// node containers) falls back to the global allocator.
template <class T>
struct PoolAllocator {
  using value_type = T;

  NodePool* pool = nullptr;

  explicit PoolAllocator(NodePool* p) noexcept : pool(p) {}
  template <class U>
  PoolAllocator(const PoolAllocator<U>& o) noexcept : pool(o.pool) {}  // NOLINT: rebind

  T* allocate(std::size_t n) {
    if (n == 1) return static_cast<T*>(pool->Allocate(sizeof(T)));
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) {
      pool->Deallocate(p);
    } else {
      std::allocator<T>{}.deallocate(p, n);
    }
  }
  template <class U>
  bool operator==(const PoolAllocator<U>& o) const noexcept {
    return pool == o.pool;
  }
};

}  // namespace mb::engine::internal
