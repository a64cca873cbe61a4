// Open-addressing hash tables for the engine: no allocation per insert once
// sized, linear probing with backward-shift deletion (no tombstones, so lookups
// stay short however long the engine runs).
//
// Thread safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace mb::engine::internal {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t Mix64(uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

inline std::size_t CapacityFor(std::size_t n) noexcept {
  std::size_t cap = 16;
  while (cap * 3 / 4 < n + 1) cap <<= 1;
  return cap;
}

// Key -> Value. Hash is a functor returning uint64_t.
template <class Key, class Value, class Hash>
class FlatMap {
 public:
  explicit FlatMap(std::size_t expected = 16) { Rehash(CapacityFor(expected)); }

  std::size_t size() const noexcept { return size_; }

  const Value* Find(const Key& key) const noexcept {
    std::size_t i = Home(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) return &slots_[i].value;
      i = (i + 1) & mask_;
    }
    return nullptr;
  }

  // Inserts or overwrites.
  void Put(const Key& key, const Value& value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Rehash(slots_.size() * 2);
    std::size_t i = Home(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        slots_[i].value = value;
        return;
      }
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, value, true};
    ++size_;
  }

  bool Erase(const Key& key) noexcept {
    std::size_t i = Home(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        ShiftBack(i);
        --size_;
        return true;
      }
      i = (i + 1) & mask_;
    }
    return false;
  }

  template <class F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

  void Clear() {
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  std::size_t Home(const Key& key) const noexcept {
    return static_cast<std::size_t>(Mix64(Hash{}(key))) & mask_;
  }

  void ShiftBack(std::size_t hole) noexcept {
    std::size_t j = hole;
    for (;;) {
      j = (j + 1) & mask_;
      if (!slots_[j].used) break;
      std::size_t k = Home(slots_[j].key);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = false;
  }

  void Rehash(std::size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) Put(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// OrderId -> pool index, storing only the 4-byte index per slot; the key is read
// from the pool through KeyOf(index). Keeps the per-order index cost ~8 bytes.
template <class KeyOf>
class IndexTable {
 public:
  static constexpr uint32_t kEmpty = UINT32_MAX;

  explicit IndexTable(std::size_t expected = 16) { Rehash(CapacityFor(expected), KeyOf{}); }

  std::size_t size() const noexcept { return size_; }

  uint32_t Find(uint64_t key, const KeyOf& key_of) const noexcept {
    std::size_t i = Home(key);
    for (;;) {
      uint32_t v = slots_[i];
      if (v == kEmpty || key_of(v) == key) return v;
      i = (i + 1) & mask_;
    }
  }

  // REQUIRES: key_of(index) is not present.
  void Insert(uint32_t index, const KeyOf& key_of) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Rehash(slots_.size() * 2, key_of);
    std::size_t i = Home(key_of(index));
    while (slots_[i] != kEmpty) i = (i + 1) & mask_;
    slots_[i] = index;
    ++size_;
  }

  bool Erase(uint64_t key, const KeyOf& key_of) noexcept {
    std::size_t hole = Home(key);
    for (;;) {
      uint32_t v = slots_[hole];
      if (v == kEmpty) return false;
      if (key_of(v) == key) break;
      hole = (hole + 1) & mask_;
    }
    std::size_t j = hole;
    for (;;) {
      j = (j + 1) & mask_;
      if (slots_[j] == kEmpty) break;
      std::size_t k = Home(key_of(slots_[j]));
      bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = kEmpty;
    --size_;
    return true;
  }

  std::size_t capacity() const noexcept { return slots_.size(); }

 private:
  std::size_t Home(uint64_t key) const noexcept {
    return static_cast<std::size_t>((key * kGolden) >> shift_);
  }

  void Rehash(std::size_t cap, const KeyOf& key_of) {
    std::vector<uint32_t> old = std::move(slots_);
    slots_.assign(cap, kEmpty);
    mask_ = cap - 1;
    shift_ = 64;
    for (std::size_t c = cap; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (uint32_t v : old) {
      if (v != kEmpty) Insert(v, key_of);
    }
  }

  std::vector<uint32_t> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 60;
  std::size_t size_ = 0;
};

}  // namespace mb::engine::internal
