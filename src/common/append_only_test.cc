#include "common/append_only.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace mb {
namespace {

TEST(AppendOnlyVectorTest, BehavesAsAVectorForTheOperationsItHas) {
  AppendOnlyVector<std::string> v{"a", "b"};
  EXPECT_EQ(v.size(), 2u);
  EXPECT_FALSE(v.empty());
  v.push_back("c");
  v.emplace_back(3, 'd');
  EXPECT_EQ(v.back(), "ddd");
  EXPECT_EQ(v.front(), "a");
  EXPECT_EQ(v.at(2), "c");
  EXPECT_THROW((void)v.at(4), std::out_of_range);
  EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](const std::string& s) { return s == "c"; }));
  std::vector<std::string> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "ddd"}));

  AppendOnlyVector<std::string> copy = v;
  EXPECT_EQ(copy, v);
  copy[0] = "z";
  EXPECT_NE(copy, v);
  EXPECT_EQ(v[0], "a");
  copy = v;
  EXPECT_EQ(copy, v);

  AppendOnlyVector<std::string> moved = std::move(copy);
  EXPECT_EQ(moved, v);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): left empty, as documented

  v.resize(2);
  EXPECT_EQ(v.size(), 2u);
  v.resize(5, "x");
  EXPECT_EQ(v[4], "x");
  v = {"q"};
  EXPECT_EQ(v.size(), 1u);
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(AppendOnlyVectorTest, ElementsKeepTheirAddressAcrossChunks) {
  AppendOnlyVector<int> v;
  std::vector<const int*> where;
  for (int i = 0; i < 5000; ++i) {
    v.push_back(i);
    where.push_back(&v[static_cast<std::size_t>(i)]);
  }
  for (int i = 0; i < 5000; ++i) {
    const auto k = static_cast<std::size_t>(i);
    ASSERT_EQ(&v[k], where[k]) << i;
    ASSERT_EQ(v[k], i);
  }
  EXPECT_EQ(v.end() - v.begin(), 5000);
}

// One writer appends while readers read every element they see counted:
// each must be complete (ThreadSanitizer runs this under the tsan preset).
TEST(AppendOnlyVectorTest, ReadersSeeEveryCountedElementWhileOneThreadAppends) {
  struct Spec {
    std::string symbol;
    int id = 0;
  };
  AppendOnlyVector<Spec> v;
  constexpr int kCount = 20'000;
  std::atomic<bool> done{false};
  std::atomic<long> checked{0};
  auto reader = [&] {
    while (!done.load(std::memory_order_acquire)) {
      const std::size_t n = v.size();
      for (std::size_t i = n > 64 ? n - 64 : 0; i < n; ++i) {
        const Spec& s = v[i];
        ASSERT_EQ(s.id, static_cast<int>(i));
        ASSERT_EQ(s.symbol, "SYM" + std::to_string(i));
        checked.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };
  std::thread r1(reader);
  std::thread r2(reader);
  for (int i = 0; i < kCount; ++i) v.push_back(Spec{"SYM" + std::to_string(i), i});
  done.store(true, std::memory_order_release);
  r1.join();
  r2.join();
  EXPECT_EQ(v.size(), static_cast<std::size_t>(kCount));
  EXPECT_GT(checked.load(), 0);
}

}  // namespace
}  // namespace mb
