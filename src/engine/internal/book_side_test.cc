#include "engine/internal/book_side.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace mb::engine::internal {
namespace {

// Drives a BookSide and a std::map with the same random inserts and erases and
// checks that Find, Best and Next agree, with keys inside and far outside the
// window, of both signs (bids use negative keys), so that levels spill and the
// window re-centres.
void CheckAgainstMap(int64_t centre, int64_t spread, uint32_t window, uint64_t seed) {
  NodePool pool(64);
  BookSide side(&pool, window);
  std::map<int64_t, uint32_t> model;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> near(centre - spread, centre + spread);
  std::uniform_int_distribution<int64_t> far(centre - 100 * spread, centre + 100 * spread);
  uint32_t next_level = 0;
  for (int step = 0; step < 20000; ++step) {
    const int64_t key = (rng() % 5 == 0) ? far(rng) : near(rng);
    auto it = model.find(key);
    if (it == model.end()) {
      ASSERT_EQ(side.Find(key), BookSide::kNone);
      side.Insert(key, next_level);
      model.emplace(key, next_level++);
    } else if (rng() % 3 != 0) {
      ASSERT_EQ(side.Find(key), it->second);
      side.Erase(key);
      model.erase(it);
    }
    ASSERT_EQ(side.size(), model.size());
    ASSERT_EQ(side.Best(), model.empty() ? BookSide::kNone : model.begin()->second) << step;
    if (step % 97 == 0) {
      // Walk the whole side in order.
      auto m = model.begin();
      for (uint32_t li = side.Best(); li != BookSide::kNone; ++m) {
        ASSERT_NE(m, model.end());
        ASSERT_EQ(li, m->second);
        li = side.Next(m->first);
      }
      ASSERT_EQ(m, model.end());
      // Next() from keys that are not present.
      const int64_t probe = far(rng);
      auto up = model.upper_bound(probe);
      ASSERT_EQ(side.Next(probe), up == model.end() ? BookSide::kNone : up->second);
    }
    // Drain now and then so the ladder empties and re-centres elsewhere.
    if (step % 5000 == 4999) {
      for (auto& [k, v] : model) side.Erase(k);
      model.clear();
      ASSERT_TRUE(side.empty());
      centre += 37 * spread;
      near = std::uniform_int_distribution<int64_t>(centre - spread, centre + spread);
    }
  }
}

TEST(BookSide, AsksAgreeWithAnOrderedMap) { CheckAgainstMap(1'000'000, 200, 64, 1); }
TEST(BookSide, BidsAgreeWithAnOrderedMap) { CheckAgainstMap(-1'000'000, 200, 64, 2); }
TEST(BookSide, WideWindowAgreesWithAnOrderedMap) { CheckAgainstMap(50'000, 3'000, 8192, 3); }

TEST(BookSide, KeysNearTheInt64EdgesStayOrdered) {
  NodePool pool(64);
  BookSide side(&pool, 64);
  const int64_t lo = INT64_MIN + 3;
  side.Insert(lo, 1);
  side.Insert(lo + 1, 2);
  side.Insert(-1, 3);
  side.Insert(INT64_MAX, 4);
  EXPECT_EQ(side.Best(), 1u);
  EXPECT_EQ(side.Next(lo), 2u);
  EXPECT_EQ(side.Next(lo + 1), 3u);
  EXPECT_EQ(side.Next(-1), 4u);
  EXPECT_EQ(side.Next(INT64_MAX), BookSide::kNone);
}

}  // namespace
}  // namespace mb::engine::internal
