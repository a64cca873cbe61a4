// The pipeline end to end: submit -> engine -> journal -> completion, restart
// recovery (journal only, and snapshot + journal), back-pressure and refusal.
#include "exchange/exchange.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

#include "common/fault_file_system.h"
#include "journal/format.h"
#include "metrics/metrics.h"
#include "workload/engine_workload.h"

namespace mb::exchange {
namespace {

namespace fs = std::filesystem;

class Collector : public Completion {
 public:
  void OnSequenced(uint64_t tag, Sequence seq, std::span<const engine::Event>) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    sequenced_[tag] = Raw(seq);
  }
  void OnDone(uint64_t tag, const Outcome& o) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    done_[tag] = {o.state, Raw(o.seq), o.events.size()};
    ++count_;
  }
  struct Done {
    Outcome::State state;
    uint64_t seq;
    std::size_t events;
  };
  std::map<uint64_t, Done> done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  std::map<uint64_t, uint64_t> sequenced() {
    std::lock_guard<std::mutex> lock(mu_);
    return sequenced_;
  }
  uint64_t count() const { return count_.load(); }

 private:
  std::mutex mu_;
  std::map<uint64_t, Done> done_;
  std::map<uint64_t, uint64_t> sequenced_;
  std::atomic<uint64_t> count_{0};
};

class ExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("mb_exchange_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    bench::MixSpec spec;
    spec.seed = 7;
    spec.commands = 20000;
    spec.accounts = 50;
    spec.target_orders = 200;
    workload_ = bench::GenerateExchangeCoreMix(spec);
    all_ = workload_.setup;
    all_.insert(all_.end(), workload_.commands.begin(), workload_.commands.end());
  }
  void TearDown() override { fs::remove_all(root_); }

  ExchangeOptions Options() {
    ExchangeOptions o;
    o.engine = workload_.config;
    o.data_dir = root_;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    return o;
  }

  // Submits commands [from, to) in order, retrying while the ring is full.
  void SubmitRange(Exchange* ex, Collector* c, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      SubmitResult r;
      while ((r = ex->Submit(all_[i], c, i, i % 7 == 0)) == SubmitResult::kFull) {
        std::this_thread::yield();
      }
      ASSERT_EQ(r, SubmitResult::kOk) << i;
    }
  }

  // The same commands on a plain engine: the reference state.
  uint64_t ReferenceHash(std::size_t n) {
    engine::Engine e(workload_.config);
    engine::EventBuffer ev;
    for (std::size_t i = 0; i < n; ++i) {
      ev.clear();
      e.Process(all_[i], &ev);
    }
    return e.StateHash();
  }

  std::string log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  fs::path root_;
  bench::Workload workload_;
  std::vector<engine::Command> all_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(ExchangeTest, CompletesEveryCommandDurablyInOrder) {
  auto ex = Exchange::Open(Options());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  Collector c;
  const std::size_t n = 5000;
  SubmitRange(ex->get(), &c, 0, n);
  ASSERT_TRUE((*ex)->Close().ok());
  const auto done = c.done();
  ASSERT_EQ(done.size(), n);
  for (const auto& [tag, d] : done) {
    EXPECT_EQ(d.state, Outcome::State::kDurable);
    EXPECT_EQ(d.seq, tag + 1) << "one producer: sequence order is submission order";
    EXPECT_GE(d.events, 1u);
  }
  const auto seqd = c.sequenced();
  EXPECT_EQ(seqd.size(), (n + 6) / 7) << "OnSequenced only for those that asked";
  for (const auto& [tag, seq] : seqd) EXPECT_EQ(seq, tag + 1);
  EXPECT_EQ((*ex)->durable_seq(), n);
  EXPECT_EQ((*ex)->ClosedStateHash(), ReferenceHash(n));
  EXPECT_NE(log().find("thread mb-engine:"), std::string::npos) << log();
  EXPECT_NE(log().find("numa:"), std::string::npos);
}

TEST_F(ExchangeTest, RestartRecoversFromJournalAndSnapshot) {
  const std::size_t n1 = 3000, n2 = 6000;
  {
    auto o = Options();
    o.snapshots.on_shutdown = false;  // first restart: journal only
    auto ex = Exchange::Open(o);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    Collector c;
    SubmitRange(ex->get(), &c, 0, n1);
    ASSERT_TRUE((*ex)->Close().ok());
  }
  {
    auto ex = Exchange::Open(Options());
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    EXPECT_EQ((*ex)->recovery().recovered_seq, n1);
    EXPECT_EQ((*ex)->recovery().snapshot_seq, 0u);
    EXPECT_EQ((*ex)->recovery().state_hash, ReferenceHash(n1));
    Collector c;
    SubmitRange(ex->get(), &c, n1, n2);
    ASSERT_TRUE((*ex)->Close().ok());  // takes the shutdown snapshot
    EXPECT_EQ(c.done().begin()->second.seq, n1 + 1);
  }
  auto ex = Exchange::Open(Options());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ((*ex)->recovery().snapshot_seq, n2) << log();
  EXPECT_EQ((*ex)->recovery().replayed_records, 0u);
  EXPECT_EQ((*ex)->recovery().state_hash, ReferenceHash(n2));
  ASSERT_TRUE((*ex)->Close().ok());
}

// An asset and a market added at run time come back after a restart, from
// the journal and from a snapshot, and the snapshot follower starts on the
// grown engine.
TEST_F(ExchangeTest, RestartRecoversAddedAssetsAndMarkets) {
  engine::AddAsset asset;
  ASSERT_TRUE(asset.symbol.Assign("ZZZ"));
  asset.scale = 8;
  engine::AddMarket market;
  ASSERT_TRUE(market.symbol.Assign("ZZZQUOTE"));
  market.base = AssetId{static_cast<uint16_t>(workload_.config.assets.size())};
  market.quote = AssetId{0};
  market.tick_units = 1'000'000;
  market.lot_units = 1'000;
  market.min_qty = Qty{1};
  market.max_qty = Qty{1'000'000};
  market.max_price = Price{1'000'000};
  std::vector<engine::Command> added(all_.begin(), all_.begin() + 1000);
  added.push_back(engine::Command{all_[999].timestamp_ns, asset});
  added.push_back(engine::Command{all_[999].timestamp_ns, market});
  added.insert(added.end(), all_.begin() + 1000, all_.begin() + 2000);
  all_ = added;
  const std::size_t markets = workload_.config.markets.size();
  {
    auto o = Options();
    o.snapshots.on_shutdown = false;  // the first restart replays the journal
    auto ex = Exchange::Open(o);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    Collector c;
    SubmitRange(ex->get(), &c, 0, all_.size());
    ASSERT_TRUE((*ex)->Close().ok());
  }
  for (int restart = 0; restart < 2; ++restart) {
    auto ex = Exchange::Open(Options());  // the second: from the shutdown snapshot
    ASSERT_TRUE(ex.ok()) << ex.status().message() << log();
    EXPECT_EQ((*ex)->recovery().recovered_seq, all_.size());
    EXPECT_EQ((*ex)->recovery().snapshot_seq, restart == 0 ? 0u : all_.size());
    EXPECT_EQ((*ex)->recovery().state_hash, ReferenceHash(all_.size()));
    // The snapshot follower, started on the grown engine (Open fails when
    // it cannot start), writes one after the journal replay.
    if (restart == 0) {
      (*ex)->RequestSnapshot();
      while ((*ex)->stats().snapshots < 1 && (*ex)->stats().snapshot_failures == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ((*ex)->stats().snapshot_failures, 0u) << log();
    }
    ASSERT_TRUE((*ex)->Close().ok());
  }
  engine::Engine reference(workload_.config);
  engine::EventBuffer ev;
  for (const engine::Command& cmd : all_) {
    ev.clear();
    reference.Process(cmd, &ev);
  }
  EXPECT_EQ(reference.config().markets.size(), markets + 1);
}

TEST_F(ExchangeTest, PeriodicAndRequestedSnapshots) {
  auto o = Options();
  o.snapshots.every_events = 2000;
  o.snapshots.keep = 2;
  std::mutex mu;
  std::vector<journal::SnapshotMeta> snaps;
  o.on_snapshot = [&](const journal::SnapshotMeta& m) {
    std::lock_guard<std::mutex> lock(mu);
    snaps.push_back(m);
  };
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 8000);
  // The follower takes them as it applies the journal (Close() would not
  // wait for it to catch up: the shutdown snapshot covers the rest).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*ex)->stats().snapshots < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE((*ex)->Close().ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(snaps.size(), 2u);
  for (const auto& m : snaps) EXPECT_EQ(m.state_hash, ReferenceHash(m.seq)) << m.seq;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(root_ / "snapshots"))
    files += e.path().extension() == ".mbs";
  EXPECT_EQ(files, 2u) << "keep = 2";
}

TEST_F(ExchangeTest, SecondOpenOfTheSameDirectoryIsRefused) {
  auto a = Exchange::Open(Options());
  ASSERT_TRUE(a.ok());
  auto b = Exchange::Open(Options());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("in use by another process"), std::string::npos)
      << b.status().message();
}

// A stalled engine (a callback that blocks, which real callers must not do)
// fills the inbound ring: Submit fails fast with kFull instead of waiting.
TEST_F(ExchangeTest, FullRingFailsFast) {
  auto o = Options();
  o.inbound_capacity = 8;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  struct Blocker : Completion {
    std::latch release{1};
    std::atomic<bool> entered{false};
    void OnSequenced(uint64_t, Sequence, std::span<const engine::Event>) noexcept override {
      entered = true;
      release.wait();
    }
    void OnDone(uint64_t, const Outcome&) noexcept override {}
  } blocker;
  ASSERT_EQ((*ex)->Submit(all_[0], &blocker, 0, true), SubmitResult::kOk);
  while (!blocker.entered) std::this_thread::yield();
  Collector c;
  int ok = 0;
  SubmitResult r;
  while ((r = (*ex)->Submit(all_[static_cast<std::size_t>(1 + ok)], &c, 1, false)) ==
         SubmitResult::kOk)
    ++ok;
  EXPECT_EQ(r, SubmitResult::kFull);
  // The blocked command's slot is released with its batch, after it.
  EXPECT_EQ(ok, 7);
  EXPECT_EQ((*ex)->inbound_remaining(), 0u);
  EXPECT_GE((*ex)->stats().refused_full, 1u);
  blocker.release.count_down();
  ASSERT_TRUE((*ex)->Close().ok());
  EXPECT_EQ(c.count(), 7u);
}

// A real write error (the file-size limit makes write() fail with EFBIG):
// new commands are refused with the reason, nothing acknowledged is lost, and
// intake resumes once writes succeed again.
TEST_F(ExchangeTest, WriteErrorsRefuseThenRecover) {
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto o = Options();
  o.snapshots.on_shutdown = false;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 100);
  while ((*ex)->durable_seq() < 100) std::this_thread::yield();

  const auto seg = fs::directory_iterator(root_ / "journal")->path();
  rlimit small = old;
  small.rlim_cur = fs::file_size(seg) + 100;  // room for a record or two, not more
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::size_t i = 100;
  SubmitResult r = SubmitResult::kOk;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    r = (*ex)->Submit(all_[i], &c, i, false);
    if (r == SubmitResult::kRefusing) break;
    if (r == SubmitResult::kOk) ++i;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(r, SubmitResult::kRefusing);
  EXPECT_NE((*ex)->RefusalReason().find("File too large"), std::string::npos)
      << (*ex)->RefusalReason();
  const uint64_t taken = i;
  EXPECT_LT((*ex)->durable_seq(), taken) << "what could not be written is not durable";

  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  while ((r = (*ex)->Submit(all_[i], &c, i, false)) != SubmitResult::kOk) {
    ASSERT_NE(r, SubmitResult::kClosed);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ++i;
  ASSERT_TRUE((*ex)->Close().ok());
  EXPECT_NE(log().find("journal writes succeed again"), std::string::npos) << log();
  // Every command taken completed; those refused after intake changed nothing.
  uint64_t durable = 0;
  for (const auto& [tag, d] : c.done()) durable += d.state == Outcome::State::kDurable;
  EXPECT_EQ(c.done().size(), i);
  auto again = Exchange::Open(Options());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)->recovery().recovered_seq, durable) << "every durable command, once";
  ASSERT_TRUE((*again)->Close().ok());
}

// A failed fdatasync (a lost writeback): nothing written since the last good
// one is acknowledged, intake is refused with the reason, and once the disk
// works again the same records are written again and acknowledged, once each.
TEST_F(ExchangeTest, FailedFdatasyncIsNeverAcknowledged) {
  FaultFileSystem fsys;
  auto o = Options();
  o.file_system = &fsys;
  o.snapshots.on_shutdown = false;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 100);
  while ((*ex)->durable_seq() < 100) std::this_thread::yield();
  while (c.count() < 100) std::this_thread::yield();  // completions follow the durable sequence

  fsys.Inject(Fault(FileOp::kDataSync, EIO, ".mbj").Times(-1));
  std::size_t i = 100;
  SubmitResult r = SubmitResult::kOk;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    r = (*ex)->Submit(all_[i], &c, i, false);
    if (r == SubmitResult::kRefusing) break;
    if (r == SubmitResult::kOk) ++i;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(r, SubmitResult::kRefusing);
  ASSERT_GT(i, 100u);
  EXPECT_NE((*ex)->RefusalReason().find("fdatasync"), std::string::npos) << (*ex)->RefusalReason();
  // Some retries fail too; still nothing after 100 is acknowledged.
  while (fsys.failed(FileOp::kDataSync) < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ((*ex)->durable_seq(), 100u);
  const auto durable = [&c] {
    std::size_t n = 0;
    for (const auto& [tag, d] : c.done()) n += d.state == Outcome::State::kDurable;
    return n;
  };
  EXPECT_EQ(durable(), 100u) << "a command was acknowledged after a failed fdatasync";

  fsys.Clear();
  while ((r = (*ex)->Submit(all_[i], &c, i, false)) != SubmitResult::kOk) {
    ASSERT_NE(r, SubmitResult::kClosed);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ++i;
  ASSERT_TRUE((*ex)->Close().ok());
  // Every command taken completed once: durable, or refused without reaching
  // the engine (those already in the ring when the refusal began).
  const auto done = c.done();
  EXPECT_EQ(done.size(), i);
  std::map<uint64_t, std::size_t> by_seq;  // durable: sequence -> tag
  for (const auto& [tag, d] : done) {
    if (d.state == Outcome::State::kDurable) {
      by_seq[d.seq] = tag;
    } else {
      EXPECT_EQ(d.state, Outcome::State::kRefusing) << tag;
    }
  }
  engine::Engine reference(workload_.config);
  engine::EventBuffer events;
  uint64_t next = 1;
  for (const auto& [seq, tag] : by_seq) {
    EXPECT_EQ(seq, next++) << "durable sequences are dense";
    events.clear();
    reference.Process(all_[tag], &events);
  }
  auto again = Exchange::Open(Options());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)->recovery().recovered_seq, by_seq.size()) << "every durable command, once";
  EXPECT_FALSE((*again)->recovery().journal.tail.has_value());
  ASSERT_TRUE((*again)->Close().ok());
  EXPECT_EQ((*again)->ClosedStateHash(), reference.StateHash());
}

// A snapshot that cannot be written (here: its rename fails) is counted and
// logged, the previous snapshot stays, a new request at the same sequence
// writes it after all, and trading goes on throughout.
TEST_F(ExchangeTest, FailedSnapshotKeepsThePreviousOne) {
  FaultFileSystem fsys;
  auto o = Options();
  o.file_system = &fsys;
  o.snapshots.on_shutdown = false;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 1000);
  while ((*ex)->durable_seq() < 1000) std::this_thread::yield();
  (*ex)->RequestSnapshot();
  while ((*ex)->stats().snapshots < 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));

  fsys.Inject(Fault(FileOp::kRename, ENOSPC, ".mbs"));
  SubmitRange(ex->get(), &c, 1000, 2000);
  while ((*ex)->durable_seq() < 2000) std::this_thread::yield();
  (*ex)->RequestSnapshot();
  while ((*ex)->stats().snapshot_failures < 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_NE(log().find("snapshot at sequence 2000 failed"), std::string::npos) << log();
  EXPECT_NE(log().find("No space left on device"), std::string::npos) << log();
  const auto snapshot_files = [&] {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(root_ / "snapshots")) {
      files.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    return files;
  };
  EXPECT_EQ(snapshot_files(), std::vector<std::string>{journal::SnapshotFileName(1000)});

  // Nothing new since the failure: the request is not taken as already done.
  fsys.Clear();
  (*ex)->RequestSnapshot();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*ex)->stats().snapshots < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ((*ex)->stats().snapshots, 2u) << "the failed snapshot was not written again";
  EXPECT_EQ(snapshot_files(), (std::vector<std::string>{journal::SnapshotFileName(1000),
                                                        journal::SnapshotFileName(2000)}));
  SubmitRange(ex->get(), &c, 2000, 2500);
  ASSERT_TRUE((*ex)->Close().ok());
  EXPECT_EQ(c.done().size(), 2500u) << "trading stopped with the snapshot";

  auto again = Exchange::Open(Options());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)->recovery().snapshot_seq, 2000u);
  EXPECT_EQ((*again)->recovery().recovered_seq, 2500u);
  ASSERT_TRUE((*again)->Close().ok());
  EXPECT_EQ((*again)->ClosedStateHash(), ReferenceHash(2500));
}

// Snapshots come from the follower engine, which replays the journal: one
// requested while commands keep arriving covers at least everything durable
// when it was asked for, and holds exactly the state the commands up to its
// sequence give (the reference engine's).
TEST_F(ExchangeTest, RequestedSnapshotUnderLoadCoversWhatWasDurable) {
  auto o = Options();
  o.snapshots.on_shutdown = false;
  std::mutex mu;
  std::vector<journal::SnapshotMeta> snaps;
  o.on_snapshot = [&](const journal::SnapshotMeta& m) {
    std::lock_guard<std::mutex> lock(mu);
    snaps.push_back(m);
  };
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 3000);
  while ((*ex)->durable_seq() < 3000) std::this_thread::yield();
  (*ex)->RequestSnapshot();
  SubmitRange(ex->get(), &c, 3000, 12000);
  while ((*ex)->stats().snapshots < 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE((*ex)->Close().ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_GE(snaps[0].seq, 3000u);
  EXPECT_EQ(snaps[0].state_hash, ReferenceHash(snaps[0].seq));
  EXPECT_EQ(c.done().size(), 12000u);
}

// Under fsync=none the journal's records may still be only in the page
// cache: a snapshot waits for the journal thread to sync them, and when that
// sync fails there is no snapshot (one ahead of the journal on disk would
// outlive a power cut that the records did not).
TEST_F(ExchangeTest, SnapshotUnderFsyncNoneNeedsTheJournalSynced) {
  FaultFileSystem fsys;
  auto o = Options();
  o.file_system = &fsys;
  o.journal.policy = journal::FsyncPolicy::kNone;
  o.snapshots.on_shutdown = false;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  SubmitRange(ex->get(), &c, 0, 1000);
  while ((*ex)->durable_seq() < 1000) std::this_thread::yield();
  const int syncs = fsys.calls(FileOp::kDataSync);
  (*ex)->RequestSnapshot();
  while ((*ex)->stats().snapshots < 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GT(fsys.calls(FileOp::kDataSync), syncs) << "no journal sync before the snapshot";

  fsys.Inject(Fault(FileOp::kDataSync, EIO, ".mbj").Times(-1));
  SubmitRange(ex->get(), &c, 1000, 2000);
  while ((*ex)->durable_seq() < 2000) std::this_thread::yield();
  (*ex)->RequestSnapshot();
  while ((*ex)->stats().snapshot_failures < 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ((*ex)->stats().snapshots, 1u);
  EXPECT_NE(log().find("snapshot at sequence 2000 skipped"), std::string::npos) << log();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(root_ / "snapshots")) {
    files.push_back(e.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{journal::SnapshotFileName(1000)});
  fsys.Clear();
  SubmitRange(ex->get(), &c, 2000, 2100);
  (void)(*ex)->Close();
  EXPECT_EQ(c.done().size(), 2100u) << "trading stopped with the snapshot";
}

// A follower engine that cannot read the journal stops snapshots with one
// clear log line; a request is then refused in the log (the snapshot thread
// neither spins nor hangs), trading goes on, and the shutdown snapshot (from
// the engine itself) is still written.
TEST_F(ExchangeTest, AFollowerThatCannotReadStopsSnapshotsNotTrading) {
  FaultFileSystem fsys;
  auto o = Options();
  o.file_system = &fsys;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  fsys.Inject(Fault(FileOp::kOpen, EIO, ".mbj").Times(-1));  // no segment opens again
  Collector c;
  SubmitRange(ex->get(), &c, 0, 1000);
  (*ex)->RequestSnapshot();
  const auto logged = [&](std::string_view what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (log().find(what) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  };
  ASSERT_TRUE(logged("snapshots stopped: the snapshot follower stopped at sequence 0")) << log();
  (*ex)->RequestSnapshot();
  ASSERT_TRUE(logged("snapshot request ignored: snapshots stopped")) << log();
  // Counted after its log line, and before the snapshot thread's next line.
  EXPECT_GE((*ex)->stats().snapshot_failures, 1u);
  SubmitRange(ex->get(), &c, 1000, 2000);
  while ((*ex)->durable_seq() < 2000) std::this_thread::yield();
  fsys.Clear();
  ASSERT_TRUE((*ex)->Close().ok());
  EXPECT_EQ(c.done().size(), 2000u);
  EXPECT_EQ((*ex)->stats().snapshots, 1u) << "the shutdown snapshot";
  auto again = Exchange::Open(Options());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)->recovery().snapshot_seq, 2000u);
  ASSERT_TRUE((*again)->Close().ok());
  EXPECT_EQ((*again)->ClosedStateHash(), ReferenceHash(2000));
}

// Close() on a disk that never recovers: bounded, and every command still in
// memory is reported not durable (never silently dropped, never claimed durable).
TEST_F(ExchangeTest, CloseGivesUpOnAFailingDiskAndSaysSo) {
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto o = Options();
  o.close_timeout_ms = 300;
  auto ex = Exchange::Open(o);
  ASSERT_TRUE(ex.ok());
  Collector c;
  const auto seg = fs::directory_iterator(root_ / "journal")->path();
  rlimit small = old;
  small.rlim_cur = fs::file_size(seg);  // not one more byte
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::size_t taken = 0;
  for (std::size_t i = 0; i < 50; ++i) taken += (*ex)->Submit(all_[i], &c, i) == SubmitResult::kOk;
  while ((*ex)->stats().write_errors == 0) std::this_thread::yield();
  const Status closed = (*ex)->Close();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("could not be made durable"), std::string::npos)
      << closed.message();
  const auto done = c.done();
  EXPECT_EQ(done.size(), taken) << "every taken command completed exactly once";
  for (const auto& [tag, d] : done) EXPECT_NE(d.state, Outcome::State::kDurable) << tag;
  EXPECT_TRUE(fs::is_empty(root_ / "snapshots")) << "no snapshot of a state the journal lacks";
}

// A crash during a snapshot write leaves its temporary file; start-up removes
// it (holding the lock, so no other writer can own it) and says so.
TEST_F(ExchangeTest, StartUpRemovesAnInterruptedSnapshotWrite) {
  fs::create_directories(root_ / "snapshots");
  const fs::path tmp = root_ / "snapshots" / "00000000000000000005.mbs.tmp";
  { std::ofstream(tmp) << "half a snapshot"; }
  auto ex = Exchange::Open(Options());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_NE(log().find("a snapshot write interrupted by a crash"), std::string::npos) << log();
  EXPECT_EQ((*ex)->recovery().removed.size(), 1u);
  EXPECT_TRUE((*ex)->recovery().notes.empty()) << "no snapshot was skipped";
  ASSERT_TRUE((*ex)->Close().ok());
}

// Records every command's stage times.
class TimesCollector : public Completion {
 public:
  void OnDone(uint64_t tag, const Outcome& o) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    times_[tag] = o.times;
    states_[tag] = o.state;
  }
  std::map<uint64_t, StageTimes> times() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }
  std::map<uint64_t, Outcome::State> states() {
    std::lock_guard<std::mutex> lock(mu_);
    return states_;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, StageTimes> times_;
  std::map<uint64_t, Outcome::State> states_;
};

// The value of one sample line ("name{labels} value") in an exposition.
double SampleValue(const std::string& text, const std::string& series) {
  const std::string key = series + " ";
  std::size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + key.size()));
    pos += key.size();
  }
  ADD_FAILURE() << "no sample " << series << " in\n" << text;
  return -1;
}

TEST_F(ExchangeTest, StageTimesAreMonotoneAndHistogramsCountEveryCommand) {
  for (const journal::FsyncPolicy policy :
       {journal::FsyncPolicy::kFsync, journal::FsyncPolicy::kInterval,
        journal::FsyncPolicy::kNone}) {
    SCOPED_TRACE(static_cast<int>(policy));
    fs::remove_all(root_);
    metrics::Registry registry;
    ExchangeOptions o = Options();
    o.metrics = &registry;
    o.journal.policy = policy;
    o.journal.interval_ms = 2;
    const std::size_t n = 3000;
    TimesCollector c;
    {
      auto ex = Exchange::Open(o);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      for (std::size_t i = 0; i < n; ++i) {
        SubmitResult r;
        while ((r = (*ex)->Submit(all_[i], &c, i)) == SubmitResult::kFull) {
          std::this_thread::yield();
        }
        ASSERT_EQ(r, SubmitResult::kOk);
      }
      ASSERT_TRUE((*ex)->Close().ok());
      const std::string text = registry.Expose();
      EXPECT_EQ(SampleValue(text, "matchbook_commands_submitted_total"), static_cast<double>(n));
      EXPECT_EQ(SampleValue(text, "matchbook_journal_durable_sequence"), static_cast<double>(n));
      EXPECT_EQ(SampleValue(text, "matchbook_ring_capacity"),
                static_cast<double>(o.inbound_capacity));
      EXPECT_EQ(SampleValue(text, "matchbook_ring_remaining_capacity"),
                static_cast<double>(o.inbound_capacity));
      EXPECT_EQ(SampleValue(text, "matchbook_journal_batches_in_flight"), 0.0);
      EXPECT_GT(SampleValue(text, "matchbook_journal_bytes"), 0.0);
      for (const char* stage : {"ring_wait", "match", "submit_to_durable"}) {
        EXPECT_EQ(
            SampleValue(
                text, fmt::format("matchbook_stage_latency_seconds_count{{stage=\"{}\"}}", stage)),
            static_cast<double>(n))
            << stage;
      }
      EXPECT_EQ(SampleValue(text, "matchbook_stage_latency_seconds_count{stage=\"journal_write\"}"),
                SampleValue(text, "matchbook_journal_write_groups_total"));
      const double fsyncs =
          SampleValue(text, "matchbook_stage_latency_seconds_count{stage=\"fsync\"}");
      if (policy == journal::FsyncPolicy::kNone) {
        EXPECT_EQ(fsyncs, 0.0);
      } else {
        EXPECT_GT(fsyncs, 0.0);
      }
    }
    const auto times = c.times();
    ASSERT_EQ(times.size(), n);
    int64_t last_sequenced = 0;
    for (const auto& [tag, t] : times) {
      EXPECT_GT(t.submitted_ns, 0) << tag;
      EXPECT_LE(t.submitted_ns, t.sequenced_ns) << tag;
      EXPECT_LE(t.sequenced_ns, t.matched_ns) << tag;
      EXPECT_LE(t.matched_ns, t.journaled_ns) << tag;
      EXPECT_LE(t.journaled_ns, t.durable_ns) << tag;
      if (policy == journal::FsyncPolicy::kNone) {
        EXPECT_EQ(t.journaled_ns, t.durable_ns) << tag;
      }
      // Commands are sequenced in submission order (one producer).
      EXPECT_LE(last_sequenced, t.sequenced_ns) << tag;
      last_sequenced = t.sequenced_ns;
    }
  }
}

TEST_F(ExchangeTest, NoStageTimesWithoutMetrics) {
  TimesCollector c;
  {
    auto ex = Exchange::Open(Options());
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    for (std::size_t i = 0; i < 100; ++i)
      ASSERT_EQ((*ex)->Submit(all_[i], &c, i), SubmitResult::kOk);
    ASSERT_TRUE((*ex)->Close().ok());
  }
  const auto times = c.times();
  ASSERT_EQ(times.size(), 100u);
  for (const auto& [tag, t] : times) {
    EXPECT_EQ(t.submitted_ns, 0);
    EXPECT_EQ(t.durable_ns, 0);
  }
}

TEST_F(ExchangeTest, GaugesReadZeroOnceTheExchangeIsGone) {
  metrics::Registry registry;
  ExchangeOptions o = Options();
  o.metrics = &registry;
  {
    auto ex = Exchange::Open(o);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    EXPECT_EQ(SampleValue(registry.Expose(), "matchbook_ring_capacity"),
              static_cast<double>(o.inbound_capacity));
  }
  EXPECT_EQ(SampleValue(registry.Expose(), "matchbook_ring_capacity"), 0.0);
}

}  // namespace
}  // namespace mb::exchange
