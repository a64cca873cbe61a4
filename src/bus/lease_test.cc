// The leadership lease against a real nats-server (started and stopped here,
// on a loopback port, with its own store directory): one holder at a time,
// renewals past many TTLs, a frozen holder overtaken only after the server
// expired its key (and told so when it wakes), a release handed over at once,
// NATS going away, and bad configuration.
#include "bus/lease.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bus/publisher.h"
#include "support/journal_test_support.h"
#include "support/nats_test_support.h"

namespace mb::bus {
namespace {

using journal::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing::NatsServer;

constexpr auto kTtl = 1000ms;
constexpr auto kDeadline = kTtl - kTtl / 10;  // the local deadline after a write is sent

int64_t Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// What on_lost was told, and when.
class LostRecorder {
 public:
  std::function<void(std::string_view)> Callback() {
    return [this](std::string_view reason) {
      std::lock_guard<std::mutex> lock(mu_);
      reasons_.emplace_back(reason);
      at_ = Clock::now();
      cv_.notify_all();
    };
  }
  // The first reason, once there is one (false: none within `timeout`).
  bool Wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return !reasons_.empty(); });
  }
  std::vector<std::string> reasons() {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_;
  }
  Clock::time_point at() {
    std::lock_guard<std::mutex> lock(mu_);
    return at_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> reasons_;
  Clock::time_point at_{};
};

// Polls `done` every 5 ms for up to `timeout`; the time it first held.
template <class F>
std::optional<Clock::time_point> PollUntil(F done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (done()) return Clock::now();
    std::this_thread::sleep_for(5ms);
  }
  return std::nullopt;
}

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>(tmp_.path());
    nats_->Start();
  }

  LeaseOptions Options(std::string holder) {
    LeaseOptions o;
    o.servers = {nats_->url()};
    o.venue = "leasetest";
    o.holder = std::move(holder);
    o.ttl = kTtl;
    o.timeout = 500ms;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(line);
    };
    return o;
  }

  TempDir tmp_;
  std::unique_ptr<NatsServer> nats_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

// One holder; renewals keep it past several TTLs; frozen, it loses validity
// before the server expires its key, the standby takes the key only after
// that, and the frozen holder learns of it on waking.
TEST_F(LeaseTest, OneHolderRenewsAndAFrozenOneIsOvertakenAfterExpiry) {
  Lease a(Options("A host:1 pid 1"));
  Lease b(Options("B host:2 pid 2"));
  ASSERT_TRUE(a.Connect().ok());
  ASSERT_TRUE(b.Connect().ok());
  EXPECT_EQ(a.bucket(), "MATCHBOOK_leasetest_LEADER");
  EXPECT_FALSE(a.Valid());
  auto free = b.CurrentHolder();
  ASSERT_TRUE(free.ok()) << free.status().message();
  EXPECT_EQ(*free, "");

  const Status took = a.TryAcquire();
  ASSERT_TRUE(took.ok()) << took.message();
  EXPECT_TRUE(a.Valid());
  EXPECT_TRUE(a.TryAcquire().ok()) << "ours already";
  const Status refused = b.TryAcquire();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.message();
  EXPECT_NE(refused.message().find("\"A host:1 pid 1\""), std::string::npos) << refused.message();
  EXPECT_FALSE(b.Valid());
  auto holder = b.CurrentHolder();
  ASSERT_TRUE(holder.ok());
  EXPECT_EQ(*holder, "A host:1 pid 1");

  LostRecorder a_lost;
  a.StartRenewing(a_lost.Callback());
  // Three and a half TTLs: valid all along, the standby refused all along.
  const auto renew_end = Clock::now() + kTtl * 7 / 2;
  int checks = 0;
  while (Clock::now() < renew_end) {
    ASSERT_TRUE(a.Valid()) << "after " << checks << " checks; " << a.stats().last_error;
    if (++checks % 40 == 0) {
      const Status again = b.TryAcquire();
      EXPECT_EQ(again.code(), StatusCode::kUnavailable) << again.message();
    }
    std::this_thread::sleep_for(10ms);
  }
  const LeaseStats renewing = a.stats();
  EXPECT_GE(renewing.renewals, 10u);  // every ttl/4 for 3.5 ttl: 14
  EXPECT_EQ(renewing.renew_failures, 0u) << renewing.last_error;
  EXPECT_EQ(renewing.acquisitions, 1u);
  EXPECT_TRUE(renewing.held);
  EXPECT_GT(renewing.remaining_ms, 0);
  EXPECT_LE(renewing.remaining_ms, Ms(kDeadline));
  EXPECT_FALSE(b.Valid());

  // Frozen: no renewal after this one.
  a.PauseRenewingForTest();
  const LeaseStats frozen = a.stats();
  const uint64_t a_revision = frozen.revision;
  const auto last_sent = Clock::now() + std::chrono::milliseconds(frozen.remaining_ms) - kDeadline;
  const auto a_invalid = PollUntil([&] { return !a.Valid(); }, kTtl);
  ASSERT_TRUE(a_invalid.has_value()) << "still valid a ttl after the last renewal";
  EXPECT_LE(Ms(*a_invalid - last_sent), Ms(kDeadline) + 50);

  const Status b_took = b.Acquire(kTtl + 2s);
  const auto b_taken = Clock::now();
  ASSERT_TRUE(b_took.ok()) << b_took.message();
  EXPECT_TRUE(b.Valid());
  // Only once the server had removed the key: a ttl after it received the
  // last renewal (with the standby's polling, ttl/8, on top).
  EXPECT_GE(Ms(b_taken - last_sent), Ms(kTtl * 9 / 10));
  EXPECT_LE(Ms(b_taken - last_sent), Ms(kTtl + 2s));
  EXPECT_LT(*a_invalid, b_taken) << "the frozen holder was still valid when the standby took over";
  const uint64_t b_revision = b.stats().revision;
  EXPECT_GT(b_revision, a_revision);
  EXPECT_EQ(*a.CurrentHolder(), "B host:2 pid 2");

  // Awake again: its renewal finds the revision moved.
  a.StartRenewing(a_lost.Callback());
  ASSERT_TRUE(a_lost.Wait(2s)) << "on_lost not called";
  const auto reasons = a_lost.reasons();
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find(fmt::format("revision moved from {} to {}", a_revision, b_revision)),
            std::string::npos)
      << reasons[0];
  EXPECT_NE(reasons[0].find("B host:2 pid 2"), std::string::npos) << reasons[0];
  EXPECT_FALSE(a.Valid());
  EXPECT_FALSE(a.stats().held);
  EXPECT_TRUE(b.Valid());

  // Not ours to release any more.
  const Status release = a.Release();
  EXPECT_EQ(release.code(), StatusCode::kUnavailable) << release.message();
  EXPECT_NE(release.message().find("B host:2 pid 2"), std::string::npos) << release.message();
  EXPECT_EQ(*b.CurrentHolder(), "B host:2 pid 2");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(a_lost.reasons().size(), 1u) << "on_lost called more than once";
}

// A release marks the key free: the standby takes it at once, well before
// the TTL could have expired it.
TEST_F(LeaseTest, ReleaseHandsOverAtOnce) {
  Lease a(Options("A"));
  Lease b(Options("B"));
  ASSERT_TRUE(a.Connect().ok());
  ASSERT_TRUE(b.Connect().ok());
  ASSERT_TRUE(a.TryAcquire().ok());
  LostRecorder a_lost;
  a.StartRenewing(a_lost.Callback());
  std::this_thread::sleep_for(kTtl / 2);
  ASSERT_FALSE(b.TryAcquire().ok());

  const auto released_at = Clock::now();
  const Status released = a.Release();
  ASSERT_TRUE(released.ok()) << released.message();
  EXPECT_FALSE(a.Valid());
  EXPECT_EQ(*b.CurrentHolder(), "");  // released: an empty value
  const Status took = b.TryAcquire();
  const auto taken_at = Clock::now();
  ASSERT_TRUE(took.ok()) << took.message();
  EXPECT_LT(Ms(taken_at - released_at), Ms(kTtl / 4));
  EXPECT_TRUE(b.Valid());
  EXPECT_EQ(*a.CurrentHolder(), "B");

  const Status refused = a.TryAcquire();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("\"B\""), std::string::npos) << refused.message();
  EXPECT_TRUE(a.Release().ok()) << "nothing held: nothing to release";
  EXPECT_FALSE(a_lost.Wait(100ms)) << "a release is not a loss";

  // And back: B releases, A takes it at once.
  ASSERT_TRUE(b.Release().ok());
  ASSERT_TRUE(a.TryAcquire().ok());
  EXPECT_TRUE(a.Valid());
  EXPECT_EQ(a.stats().acquisitions, 2u);
}

// NATS gone: validity ends by the deadline (no renewal can land), on_lost
// follows; with NATS back, the lease can be taken again.
TEST_F(LeaseTest, NatsStoppedEndsTheLeaseByTheDeadline) {
  Lease a(Options("A"));
  ASSERT_TRUE(a.Connect().ok());
  ASSERT_TRUE(a.TryAcquire().ok());
  LostRecorder lost;
  a.StartRenewing(lost.Callback());
  std::this_thread::sleep_for(kTtl / 2);
  ASSERT_TRUE(a.Valid());
  ASSERT_GE(a.stats().renewals, 1u);

  // The deadline is at least this late (a renewal may still move it on
  // before the server is gone)...
  const auto earliest_deadline = Clock::now() + std::chrono::milliseconds(a.stats().remaining_ms);
  nats_->Stop();
  // ... and at most a deadline after this: no renewal can land any more.
  const auto stopped_at = Clock::now();
  const auto invalid = PollUntil([&] { return !a.Valid(); }, kTtl + 500ms);
  ASSERT_TRUE(invalid.has_value()) << "still valid with NATS stopped";
  EXPECT_LE(Ms(*invalid - stopped_at), Ms(kDeadline) + 50);
  EXPECT_GE(Ms(*invalid - earliest_deadline), 0);
  ASSERT_TRUE(lost.Wait(kTtl)) << "on_lost not called; " << a.stats().last_error;
  EXPECT_GE(Ms(lost.at() - earliest_deadline), 0) << "on_lost before the deadline";
  const auto reasons = lost.reasons();
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("deadline"), std::string::npos) << reasons[0];
  EXPECT_FALSE(a.stats().held);
  EXPECT_GE(a.stats().renew_failures, 1u);
  {
    // Each distinct failure is logged once, not once a retry.
    std::lock_guard<std::mutex> lock(log_mu_);
    EXPECT_EQ(std::count_if(log_.begin(), log_.end(),
                            [](const std::string& l) { return l.starts_with("cannot renew"); }),
              1);
  }

  nats_->Start();
  const Status again = a.Acquire(5s);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(a.Valid());
}

// Every process sharing a lease must agree on its TTL.
TEST_F(LeaseTest, ABucketWithAnotherTtlIsRefused) {
  Lease a(Options("A"));
  ASSERT_TRUE(a.Connect().ok());
  LeaseOptions o = Options("B");
  o.ttl = 3000ms;
  Lease b(o);
  const Status st = b.Connect();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("MATCHBOOK_leasetest_LEADER"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("1000 ms"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("3000 ms"), std::string::npos) << st.message();
  EXPECT_FALSE(b.TryAcquire().ok());
}

TEST_F(LeaseTest, BadOptionsAreRefused) {
  Lease nobody(Options(""));
  const Status st = nobody.Connect();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("holder"), std::string::npos) << st.message();

  LeaseOptions slow = Options("A");
  slow.renew_every = kTtl;
  EXPECT_EQ(Lease(slow).Connect().code(), StatusCode::kInvalidArgument);
  LeaseOptions venue = Options("A");
  venue.venue = "a.b";
  EXPECT_EQ(Lease(venue).Connect().code(), StatusCode::kInvalidArgument);

  LeaseOptions bucket = Options("A");
  bucket.bucket = "a.b";
  EXPECT_EQ(Lease(bucket).Connect().code(), StatusCode::kInvalidArgument);
  LeaseOptions key = Options("A");
  key.key = "a b";
  EXPECT_EQ(Lease(key).Connect().code(), StatusCode::kInvalidArgument);

  // Nothing listens there: no lease, and nothing to release.
  LeaseOptions nowhere = Options("A");
  nowhere.servers = {fmt::format("nats://127.0.0.1:{}", testing::FreePort())};
  Lease unconnected(nowhere);
  EXPECT_EQ(unconnected.TryAcquire().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(unconnected.CurrentHolder().ok());
  EXPECT_FALSE(unconnected.Valid());
  EXPECT_TRUE(unconnected.Release().ok());
}

// The NATS library's threads end with the test program.
class NatsLibrary : public ::testing::Environment {
 public:
  void TearDown() override { ShutdownNats(); }
};
const auto* const kNatsLibrary = ::testing::AddGlobalTestEnvironment(new NatsLibrary);

}  // namespace
}  // namespace mb::bus
