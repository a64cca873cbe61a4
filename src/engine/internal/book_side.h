// The price levels of one side of one book, ordered best first by a key
// (asks: price, bids: -price, so a smaller key is always the better price).
//
// Most activity happens within a few thousand ticks of the spread, so levels
// whose key falls in a window of `window` ticks live in a direct-indexed
// ladder: finding, adding and removing a level is O(1), and the best or next
// level is found with a two-level occupancy bitmap. Keys outside the window go
// to an ordered map whose nodes come from a pool (O(log n), no malloc). When
// the ladder is empty, the window re-centres on the next key added and takes
// over the spilled levels that fall inside it, so a market whose price drifts
// comes back to the fast path.
//
// Thread safety: none; owned by the engine thread.
#pragma once

#include <bit>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/internal/node_pool.h"

namespace mb::engine::internal {

class BookSide {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // REQUIRES: window is a power of two >= 64.
  BookSide(NodePool* pool, uint32_t window)
      : window_(window),
        slots_(window, kNone),
        bits_(window / 64, 0),
        summary_((window / 64 + 63) / 64, 0),
        spill_(PoolAllocator<Spill::value_type>(pool)) {}

  bool empty() const noexcept { return ladder_count_ == 0 && spill_.empty(); }
  std::size_t size() const noexcept { return ladder_count_ + spill_.size(); }

  // The level stored under key, or kNone.
  uint32_t Find(int64_t key) const noexcept {
    uint64_t off = 0;
    if (InWindow(key, &off)) return slots_[off];
    auto it = spill_.find(key);
    return it == spill_.end() ? kNone : it->second;
  }

  // REQUIRES: key is not present.
  void Insert(int64_t key, uint32_t level) {
    if (ladder_count_ == 0) Recentre(key);
    uint64_t off = 0;
    if (InWindow(key, &off)) {
      SetSlot(off, level);
    } else {
      spill_.emplace(key, level);
    }
  }

  // REQUIRES: key is present.
  void Erase(int64_t key) noexcept {
    uint64_t off = 0;
    if (InWindow(key, &off)) {
      ClearSlot(off);
    } else {
      spill_.erase(key);
    }
  }

  // The best level, or kNone.
  uint32_t Best() const noexcept { return After(false, 0); }

  // The first level with a key greater than `key`, or kNone.
  uint32_t Next(int64_t key) const noexcept { return After(true, key); }

 private:
  using Spill =
      std::map<int64_t, uint32_t, std::less<>, PoolAllocator<std::pair<const int64_t, uint32_t>>>;
  static constexpr uint64_t kNoBit = UINT64_MAX;

  // Keys of one side share a sign, so the unsigned difference is exact.
  bool InWindow(int64_t key, uint64_t* off) const noexcept {
    *off = static_cast<uint64_t>(key) - static_cast<uint64_t>(base_);
    return *off < window_;
  }

  // Re-anchors the empty ladder so that `key` sits a quarter into it (room for
  // better prices, more room for worse ones) and pulls in spilled levels.
  void Recentre(int64_t key) {
    int64_t quarter = static_cast<int64_t>(window_ / 4);
    base_ = key >= INT64_MIN + quarter ? key - quarter : INT64_MIN;
    auto it = spill_.lower_bound(base_);
    while (it != spill_.end()) {
      uint64_t off = 0;
      if (!InWindow(it->first, &off)) break;
      SetSlot(off, it->second);
      it = spill_.erase(it);
    }
  }

  void SetSlot(uint64_t off, uint32_t level) noexcept {
    slots_[off] = level;
    bits_[off >> 6] |= uint64_t{1} << (off & 63);
    summary_[off >> 12] |= uint64_t{1} << ((off >> 6) & 63);
    ++ladder_count_;
  }

  void ClearSlot(uint64_t off) noexcept {
    slots_[off] = kNone;
    uint64_t& word = bits_[off >> 6];
    word &= ~(uint64_t{1} << (off & 63));
    if (word == 0) summary_[off >> 12] &= ~(uint64_t{1} << ((off >> 6) & 63));
    --ladder_count_;
  }

  // First occupied ladder offset >= from, or kNoBit.
  uint64_t FirstBitFrom(uint64_t from) const noexcept {
    if (from >= window_) return kNoBit;
    uint64_t w = from >> 6;
    uint64_t m = bits_[w] & (~uint64_t{0} << (from & 63));
    if (m != 0) return (w << 6) + static_cast<uint64_t>(std::countr_zero(m));
    uint64_t next_word = w + 1;
    for (uint64_t s = next_word >> 6; s < summary_.size(); ++s) {
      uint64_t sm = summary_[s];
      if (s == (next_word >> 6)) sm &= ~uint64_t{0} << (next_word & 63);
      if (sm != 0) {
        uint64_t word = (s << 6) + static_cast<uint64_t>(std::countr_zero(sm));
        return (word << 6) + static_cast<uint64_t>(std::countr_zero(bits_[word]));
      }
    }
    return kNoBit;
  }

  // The first level with key > `key` (or the first of all when !strict).
  uint32_t After(bool strict, int64_t key) const noexcept {
    // Ladder candidate.
    uint64_t from = 0;
    if (strict) {
      uint64_t off = 0;
      if (InWindow(key, &off)) {
        from = off + 1;
      } else if (key >= base_) {
        from = window_;  // beyond the window: no ladder level is greater
      }
    }
    uint64_t bit = ladder_count_ == 0 ? kNoBit : FirstBitFrom(from);
    // Spill candidate.
    auto it = strict ? spill_.upper_bound(key) : spill_.begin();
    if (it == spill_.end()) return bit == kNoBit ? kNone : slots_[bit];
    if (bit == kNoBit) return it->second;
    int64_t ladder_key = static_cast<int64_t>(static_cast<uint64_t>(base_) + bit);
    return it->first < ladder_key ? it->second : slots_[bit];
  }

  uint64_t window_;
  int64_t base_ = 0;
  std::size_t ladder_count_ = 0;
  std::vector<uint32_t> slots_;    // level index per key offset, kNone if empty
  std::vector<uint64_t> bits_;     // occupancy, one bit per slot
  std::vector<uint64_t> summary_;  // one bit per non-zero word of bits_
  Spill spill_;
};

}  // namespace mb::engine::internal
