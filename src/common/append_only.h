// AppendOnlyVector<T>: a vector whose elements never move, so that one thread
// may append while others read. The storage is a list of chunks of doubling
// size (256, 512, 1024, ...): an element, once appended, keeps its address for
// the container's life, and size() is published after the element (release
// store, acquire load), so a reader that sees size() == n may read elements
// [0, n) without a lock while the writer appends the next one.
//
// It holds the definitions that grow at run time (the markets and assets of
// engine::EngineConfig): the engine thread, the fan-out thread and the
// io threads each read them without locks, and nothing is ever removed.
//
// Thread safety: push_back, emplace_back and a growing resize() from one
// thread at a time, concurrently with any number of const readers (size,
// empty, operator[], at, front, back, iteration over [0, size())). Everything
// else (clear, a shrinking resize, assignment, changing an element through a
// non-const reference, destruction) only while no other thread reads.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <compare>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>

namespace mb {

template <typename T>
class AppendOnlyVector {
  static constexpr std::size_t kFirstBits = 8;  // the first chunk holds 256
  static constexpr std::size_t kChunks = 40;    // 256 * (2^40 - 1) elements in all

  template <bool kConst>
  class Iter {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using Owner = std::conditional_t<kConst, const AppendOnlyVector, AppendOnlyVector>;
    using reference = std::conditional_t<kConst, const T&, T&>;
    using pointer = std::conditional_t<kConst, const T*, T*>;

    Iter() = default;
    Iter(Owner* v, std::size_t i) : v_(v), i_(i) {}
    operator Iter<true>() const { return Iter<true>(v_, i_); }  // NOLINT: as vector's

    reference operator*() const { return (*v_)[i_]; }
    pointer operator->() const { return &(*v_)[i_]; }
    reference operator[](difference_type n) const { return (*v_)[i_ + n]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) { return Iter(v_, i_++); }
    Iter& operator--() {
      --i_;
      return *this;
    }
    Iter operator--(int) { return Iter(v_, i_--); }
    Iter& operator+=(difference_type n) {
      i_ += n;
      return *this;
    }
    Iter& operator-=(difference_type n) {
      i_ -= n;
      return *this;
    }
    friend Iter operator+(Iter a, difference_type n) { return a += n; }
    friend Iter operator+(difference_type n, Iter a) { return a += n; }
    friend Iter operator-(Iter a, difference_type n) { return a -= n; }
    friend difference_type operator-(const Iter& a, const Iter& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const Iter& a, const Iter& b) { return a.i_ <=> b.i_; }

   private:
    Owner* v_ = nullptr;
    std::size_t i_ = 0;
  };

 public:
  using value_type = T;
  using size_type = std::size_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  AppendOnlyVector() = default;
  AppendOnlyVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  AppendOnlyVector(const AppendOnlyVector& other) {
    for (const T& t : other) push_back(t);
  }
  AppendOnlyVector(AppendOnlyVector&& other) noexcept { Take(other); }
  AppendOnlyVector& operator=(const AppendOnlyVector& other) {
    if (this != &other) {
      AppendOnlyVector copy(other);
      Free();
      Take(copy);
    }
    return *this;
  }
  AppendOnlyVector& operator=(AppendOnlyVector&& other) noexcept {
    if (this != &other) {
      Free();
      Take(other);
    }
    return *this;
  }
  AppendOnlyVector& operator=(std::initializer_list<T> items) {
    clear();
    for (const T& t : items) push_back(t);
    return *this;
  }
  ~AppendOnlyVector() { Free(); }

  std::size_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  bool empty() const noexcept { return size() == 0; }

  const T& operator[](std::size_t i) const noexcept { return *Slot(i); }
  T& operator[](std::size_t i) noexcept { return *Slot(i); }
  const T& at(std::size_t i) const {
    if (i >= size()) throw std::out_of_range("AppendOnlyVector::at");
    return *Slot(i);
  }
  T& at(std::size_t i) {
    if (i >= size()) throw std::out_of_range("AppendOnlyVector::at");
    return *Slot(i);
  }
  const T& front() const noexcept { return *Slot(0); }
  T& front() noexcept { return *Slot(0); }
  const T& back() const noexcept { return *Slot(size() - 1); }
  T& back() noexcept { return *Slot(size() - 1); }

  const_iterator begin() const noexcept { return const_iterator(this, 0); }
  const_iterator end() const noexcept { return const_iterator(this, size()); }
  iterator begin() noexcept { return iterator(this, 0); }
  iterator end() noexcept { return iterator(this, size()); }

  void push_back(const T& t) { emplace_back(t); }
  void push_back(T&& t) { emplace_back(std::move(t)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    const std::size_t n = size_.load(std::memory_order_relaxed);
    const auto [chunk, offset] = Locate(n);
    T* base = chunks_[chunk].load(std::memory_order_relaxed);
    if (base == nullptr) {
      base = std::allocator<T>().allocate(ChunkSize(chunk));
      chunks_[chunk].store(base, std::memory_order_release);
    }
    T* slot = std::construct_at(base + offset, std::forward<Args>(args)...);
    size_.store(n + 1, std::memory_order_release);
    return *slot;
  }
  void resize(std::size_t n) { resize(n, T{}); }
  void resize(std::size_t n, const T& value) {
    while (size() > n) PopBack();
    while (size() < n) push_back(value);
  }
  void clear() noexcept {
    while (!empty()) PopBack();
  }

  friend bool operator==(const AppendOnlyVector& a, const AppendOnlyVector& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  static constexpr std::size_t ChunkSize(std::size_t chunk) noexcept {
    return std::size_t{1} << (kFirstBits + chunk);
  }
  // Chunk k holds elements [256 * (2^k - 1), 256 * (2^(k+1) - 1)).
  static std::pair<std::size_t, std::size_t> Locate(std::size_t i) noexcept {
    const std::size_t j = (i >> kFirstBits) + 1;
    const std::size_t chunk = static_cast<std::size_t>(std::bit_width(j)) - 1;
    return {chunk, i - ((std::size_t{1} << chunk) - 1) * (std::size_t{1} << kFirstBits)};
  }
  // Relaxed: a reader that saw size() > i (acquire) already sees the chunk
  // the writer stored before it published that size. The first chunk, which
  // holds every list a configuration has in practice, costs one compare.
  T* Slot(std::size_t i) const noexcept {
    if (i < (std::size_t{1} << kFirstBits)) [[likely]] {
      return chunks_[0].load(std::memory_order_relaxed) + i;
    }
    const auto [chunk, offset] = Locate(i);
    return chunks_[chunk].load(std::memory_order_relaxed) + offset;
  }
  void PopBack() noexcept {
    const std::size_t n = size_.load(std::memory_order_relaxed) - 1;
    size_.store(n, std::memory_order_release);
    std::destroy_at(Slot(n));
  }
  void Free() noexcept {
    clear();
    for (std::size_t k = 0; k < kChunks; ++k) {
      if (T* p = chunks_[k].exchange(nullptr, std::memory_order_relaxed)) {
        std::allocator<T>().deallocate(p, ChunkSize(k));
      }
    }
  }
  // Takes other's chunks; other is left empty.
  void Take(AppendOnlyVector& other) noexcept {
    for (std::size_t k = 0; k < kChunks; ++k) {
      chunks_[k].store(other.chunks_[k].exchange(nullptr, std::memory_order_relaxed),
                       std::memory_order_relaxed);
    }
    size_.store(other.size_.exchange(0, std::memory_order_relaxed), std::memory_order_release);
  }

  std::array<std::atomic<T*>, kChunks> chunks_{};
  std::atomic<std::size_t> size_{0};
};

}  // namespace mb
