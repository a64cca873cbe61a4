// Ring and wait-strategy tests. The stress tests are the ones to run under the
// tsan preset: many producers racing for slots while the consumer releases them.
#include "concurrency/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "concurrency/thread.h"
#include "concurrency/wait.h"

namespace mb::concurrency {
namespace {

struct Item {
  uint32_t producer = 0;
  uint32_t n = 0;
};

TEST(MpscRing, FailsFastWhenFullAndReportsRemaining) {
  MpscRing<int> ring(4);
  EXPECT_EQ(ring.remaining(), 4u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.TryPublish(i));
  EXPECT_EQ(ring.remaining(), 0u);
  EXPECT_FALSE(ring.TryPublish(99)) << "a full ring refuses at once";
  EXPECT_EQ(ring.TryClaim(), -1);

  const int64_t end = ring.Available();
  ASSERT_EQ(end, 4);
  for (int64_t s = ring.next(); s < end; ++s) EXPECT_EQ(ring.Slot(s), s);
  ring.Release(2);  // consume half
  EXPECT_EQ(ring.remaining(), 2u);
  EXPECT_TRUE(ring.TryPublish(4));
  EXPECT_TRUE(ring.TryPublish(5));
  EXPECT_FALSE(ring.TryPublish(6));
  ring.Release(4);
  ASSERT_EQ(ring.Available(), 6);
  EXPECT_EQ(ring.Slot(4), 4);
  EXPECT_EQ(ring.Slot(5), 5);
}

TEST(MpscRing, ConsumerStopsAtTheFirstUnpublishedSlot) {
  MpscRing<int> ring(8);
  const int64_t a = ring.TryClaim();
  const int64_t b = ring.TryClaim();
  ring.Slot(b) = 2;
  ring.Publish(b);
  EXPECT_EQ(ring.Available(), 0) << "b is published but a, before it, is not";
  EXPECT_FALSE(ring.HasAvailable());
  ring.Slot(a) = 1;
  ring.Publish(a);
  EXPECT_EQ(ring.Available(), 2);
  EXPECT_EQ(ring.Available(1), 1) << "the batch limit is honoured";
}

// Every producer publishes 0..n-1 in order; the consumer must see each exactly
// once and, per producer, in order — with the ring small enough to wrap often
// and to be full much of the time.
void Stress(int producers, uint32_t per_producer, std::size_t capacity, WaitConfig wait) {
  MpscRing<Item> ring(capacity);
  Waiter waiter(wait);
  std::atomic<uint64_t> failures{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (uint32_t n = 0; n < per_producer;) {
        if (ring.TryPublish(Item{static_cast<uint32_t>(p), n})) {
          waiter.Wake();
          ++n;
        } else {
          failures.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::yield();
        }
      }
    });
  }
  std::vector<uint32_t> next(static_cast<std::size_t>(producers), 0);
  uint64_t total = 0;
  const uint64_t expected = static_cast<uint64_t>(producers) * per_producer;
  while (total < expected) {
    const int64_t end = ring.Available(64);
    if (end == ring.next()) {
      waiter.Idle([&] { return ring.HasAvailable(); });
      continue;
    }
    waiter.Reset();
    for (int64_t s = ring.next(); s < end; ++s) {
      const Item item = ring.Slot(s);
      ASSERT_LT(item.producer, next.size());
      ASSERT_EQ(item.n, next[item.producer]) << "producer " << item.producer;
      ++next[item.producer];
    }
    total += static_cast<uint64_t>(end - ring.next());
    ring.Release(end);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ring.Available(), ring.next()) << "nothing beyond what was published";
  EXPECT_EQ(ring.remaining(), capacity);
  for (uint32_t n : next) EXPECT_EQ(n, per_producer);
}

TEST(MpscRing, ManyProducersBusySpin) { Stress(8, 20000, 64, {WaitKind::kBusySpin}); }
TEST(MpscRing, ManyProducersBackOff) { Stress(16, 10000, 16, {}); }
TEST(MpscRing, HundredProducersYield) { Stress(100, 1000, 256, {WaitKind::kYield}); }

TEST(SpscRing, OrderAndCapacity) {
  SpscRing<int> ring(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.TryPush(i));
  EXPECT_FALSE(ring.TryPush(4));
  EXPECT_EQ(ring.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    int* v = ring.Front();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, i);
    ring.Pop();
  }
  EXPECT_EQ(ring.Front(), nullptr);
  EXPECT_TRUE(ring.Empty());
}

TEST(SpscRing, ThreadedTransfer) {
  SpscRing<uint64_t> ring(32);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount;) {
      if (ring.TryPush(i)) ++i;
    }
  });
  for (uint64_t expect = 0; expect < kCount;) {
    if (uint64_t* v = ring.Front()) {
      ASSERT_EQ(*v, expect);
      ring.Pop();
      ++expect;
    }
  }
  producer.join();
}

// A parked consumer is woken by Wake() long before its park bound expires.
TEST(Waiter, ParkedConsumerIsWokenPromptly) {
  Waiter waiter({WaitKind::kBackOff, 0, 0, 5'000'000});  // park up to 5 s
  std::atomic<bool> flag{false};
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag.store(true, std::memory_order_release);
    waiter.Wake();
  });
  const auto start = std::chrono::steady_clock::now();
  while (!flag.load(std::memory_order_acquire)) {
    waiter.Idle([&] { return flag.load(std::memory_order_acquire); });
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  producer.join();
  EXPECT_GE(waiter.parks(), 1u) << "the consumer parked instead of spinning";
  EXPECT_LT(waited, std::chrono::seconds(4)) << "woken by Wake(), not by the 5 s bound";
}

// The ready predicate is checked after announcing the park, so work published
// just before parking is never slept through.
TEST(Waiter, DoesNotParkWhenWorkIsAlreadyThere) {
  Waiter waiter({WaitKind::kBackOff, 0, 0, 5'000'000});
  const auto start = std::chrono::steady_clock::now();
  waiter.Idle([] { return true; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(waiter.parks(), 0u);
}

// Calls Idle (nothing ready) until the waiter parks once; returns the calls.
uint32_t IdleUntilParked(Waiter* waiter) {
  const uint64_t parks = waiter->parks();
  uint32_t calls = 0;
  while (waiter->parks() == parks) {
    waiter->Idle([] { return false; });
    ++calls;
  }
  waiter->Reset();
  return calls;
}

// Idle periods that end in long parks (work every few milliseconds) teach
// back-off that its spin and yield phases do not pay: it soon parks at the
// first idle round.
TEST(Waiter, BackOffStopsSpinningWhenItParksAnyway) {
  Waiter waiter({WaitKind::kBackOff, 200, 20, 2'000});  // each park times out after 2 ms
  EXPECT_EQ(waiter.budget(), 220u);
  EXPECT_EQ(IdleUntilParked(&waiter), 221u) << "the first idle period spins, yields, then parks";
  for (int i = 0; i < 10; ++i) IdleUntilParked(&waiter);
  EXPECT_EQ(waiter.budget(), 0u);
  EXPECT_EQ(IdleUntilParked(&waiter), 1u) << "parks at once";
}

// Work that shows up just as the phases run out (here: at the last check
// before parking) gives them their rounds back, up to spins + yields.
TEST(Waiter, BackOffSpinsAgainWhenWorkComesRightAfterIt) {
  Waiter waiter({WaitKind::kBackOff, 200, 20, 2'000});
  for (int i = 0; i < 12; ++i) IdleUntilParked(&waiter);
  ASSERT_EQ(waiter.budget(), 0u);
  for (int i = 0; i < 10; ++i) {
    // Through the spin and yield rounds to the parking round, where the work is.
    const uint32_t rounds = waiter.budget() + 1;
    for (uint32_t r = 0; r < rounds; ++r) waiter.Idle([] { return true; });
    waiter.Reset();
  }
  EXPECT_EQ(waiter.budget(), 220u);
  const uint64_t parks = waiter.parks();
  for (int i = 0; i < 220; ++i) waiter.Idle([] { return false; });
  EXPECT_EQ(waiter.parks(), parks) << "220 rounds of spinning and yielding before a park";
}

TEST(WaitConfig, ParsesNames) {
  EXPECT_EQ(*ParseWaitKind("busy-spin"), WaitKind::kBusySpin);
  EXPECT_EQ(*ParseWaitKind("back-off"), WaitKind::kBackOff);
  const auto bad = ParseWaitKind("spinny");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spinny"), std::string::npos);
}

TEST(StageConfig, ReportsPinningAndRefusals) {
  std::string line;
  std::thread t([&] { line = ApplyToCurrentThread({"test-stage", {}, 0, false, 10}); });
  t.join();
  EXPECT_NE(line.find("test-stage: cpu 0"), std::string::npos) << line;
  std::thread t2([&] { line = ApplyToCurrentThread({"bad-pin", {}, 100000, false, 10}); });
  t2.join();
  EXPECT_NE(line.find("WARNING: pinning to cpu 100000 refused"), std::string::npos) << line;
}

}  // namespace
}  // namespace mb::concurrency
