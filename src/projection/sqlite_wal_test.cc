// The SQLite store's write-ahead log stays under its ceiling: while batches
// are committed back to back and the history queries run beside them, the
// checkpoints complete, the WAL starts over and its file is cut back; a reader
// that holds an old snapshot stops the commits at the ceiling (the projector
// waits) instead of letting the file grow; the database grows with its rows.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "engine/engine.h"
#include "projection/rows.h"
#include "projection/store.h"
#include "workload/random_commands.h"

namespace mb::projection {
namespace {

namespace fs = std::filesystem;

uint64_t FileBytes(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

fs::path TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path p = fs::temp_directory_path() /
               ("mb_sqlite_wal_" + std::string(info->name()) + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Batches of real rows: the mixed command stream through an engine, each
// record's events through the projection's RowBuilder, as the projector builds
// them.
class Batches {
 public:
  explicit Batches(uint64_t seed) : gen_(seed, &engine_) {
    for (const engine::Command& c : gen_.Funding()) Add(c);
  }

  // The next batch of `commands` records (the funding goes into the first).
  const RowBatch& Next(std::size_t commands) {
    for (std::size_t i = 0; i < commands; ++i) Add(gen_.Next());
    builder_.Finish(&batch_);
    state_ = ProjectorState{batch_.last_seq, batch_.last_checksum, 1, batch_.last_time_ns};
    return batch_;
  }
  const ProjectorState& state() const { return state_; }
  const RowBatch& current() const { return batch_; }
  void Clear() { batch_.Clear(); }
  const engine::EngineConfig& config() const { return config_; }

 private:
  void Add(const engine::Command& c) {
    events_.clear();
    engine_.Process(c, &events_);
    ++seq_;
    builder_.AddRecord(seq_, seq_ * 7919, events_, &batch_);
  }

  engine::EngineConfig config_ = workload::MixedConfig();
  engine::Engine engine_{config_};
  workload::MixedCommands gen_;
  RowBuilder builder_{config_};
  RowBatch batch_;
  engine::EventBuffer events_;
  ProjectorState state_;
  uint64_t seq_ = 0;
};

// Samples the WAL file's size every millisecond; the largest seen.
class WalWatch {
 public:
  explicit WalWatch(fs::path wal) : wal_(std::move(wal)) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        const uint64_t now = FileBytes(wal_);
        if (now > largest_.load()) largest_.store(now);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~WalWatch() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t largest() const { return largest_.load(); }

 private:
  const fs::path wal_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> largest_{0};
  std::thread thread_;
};

constexpr uint64_t kCeiling = uint64_t{8} << 20;

std::unique_ptr<Store> OpenWithCeiling(const fs::path& db, const engine::EngineConfig& config) {
  StoreOptions o;
  o.path = db.string();
  o.wal_max_bytes = kCeiling;
  auto s = OpenSqliteStore(o, config);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

// Commits back to back (as a projector does when it is behind or the rate is
// high) with two threads running the history queries: the WAL never passes
// its ceiling, and what was written ends up in the database.
TEST(SqliteWalTest, StaysUnderItsCeilingWhileCommittingWithReaders) {
  const fs::path dir = TestDir();
  const fs::path db = dir / "projection.sqlite";
  Batches batches(11);
  auto store = OpenWithCeiling(db, batches.config());
  ASSERT_NE(store, nullptr);
  WalWatch watch(fs::path(db.string() + "-wal"));

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> queries{0};
  auto reader = [&](uint32_t account) {
    while (!stop.load()) {
      HistoryQuery q;
      q.account = account;
      q.market = 1;
      q.limit = 50;
      auto orders = store->AllOrders(q);
      EXPECT_TRUE(orders.ok()) << orders.status().message();
      auto trades = store->MyTrades(q);
      EXPECT_TRUE(trades.ok()) << trades.status().message();
      auto state = store->CommittedState();
      EXPECT_TRUE(state.ok()) << state.status().message();
      queries.fetch_add(1);
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);

  uint64_t commits = 0;
  for (int i = 0; i < 1000; ++i) {
    const RowBatch& b = batches.Next(60);
    const Status st = store->Commit(b, batches.state());
    ASSERT_TRUE(st.ok()) << st.message();
    batches.Clear();
    ++commits;
  }
  stop.store(true);
  r1.join();
  r2.join();
  watch.Stop();

  const auto s = store->Storage();
  ASSERT_TRUE(s.has_value());
  // The run wrote many times the ceiling: without completed checkpoints the
  // WAL would have held all of it.
  ASSERT_GT(s->frames_written * s->frame_bytes, 6 * kCeiling)
      << "the test must write several ceilings' worth";
  EXPECT_LE(watch.largest(), kCeiling) << "the WAL file passed its ceiling";
  EXPECT_LE(FileBytes(db.string() + "-wal"), kCeiling);
  EXPECT_GT(FileBytes(db), kCeiling / 4) << "the rows reached the database file";
  EXPECT_GT(s->checkpoints_completed, 3u);
  EXPECT_GT(s->frames_checkpointed, s->frames_written / 2);
  EXPECT_EQ(s->ceiling_waits, 0u) << "no reader held a snapshot: no commit had to wait";
  EXPECT_FALSE(s->over_ceiling);
  EXPECT_GE(s->seconds_since_checkpoint, 0.0);
  EXPECT_GT(queries.load(), 10u);
  EXPECT_EQ(commits, 1000u);
  std::cout << s->frames_written << " frames written, " << s->frames_checkpointed
            << " checkpointed, " << s->checkpoints << " checkpoints (" << s->checkpoints_completed
            << " complete), largest WAL " << watch.largest() << " bytes, " << queries.load()
            << " queries\n";
  store.reset();
  fs::remove_all(dir);
}

// At a slow pace the checkpointer alone copies everything (the writer never
// has to): the database holds the rows within a moment of their commit.
TEST(SqliteWalTest, TheCheckpointerCopiesEveryFrameWhenTheWriterPauses) {
  const fs::path dir = TestDir();
  const fs::path db = dir / "projection.sqlite";
  Batches batches(12);
  auto store = OpenWithCeiling(db, batches.config());
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store->Commit(batches.Next(20), batches.state()).ok());
    batches.Clear();
  }
  const uint64_t db_before = FileBytes(db);
  std::optional<StorageStats> s;
  for (int i = 0; i < 300; ++i) {
    s = store->Storage();
    if (s && s->frames_checkpointed == s->frames_written && s->checkpoints_completed > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->frames_checkpointed, s->frames_written) << "checkpoints copied every frame";
  EXPECT_GT(s->checkpoints_completed, 0u);
  EXPECT_GT(FileBytes(db), db_before) << "the database file received the rows";
  store.reset();
  fs::remove_all(dir);
}

// A reader that keeps a read transaction open pins the WAL: commits go on
// while there is room and are then refused (kUnavailable, nothing written)
// rather than pass the ceiling. Once the reader lets go, the next commit
// succeeds, the WAL starts over and its file is cut back.
TEST(SqliteWalTest, AReaderHoldingASnapshotStopsCommitsAtTheCeiling) {
  const fs::path dir = TestDir();
  const fs::path db = dir / "projection.sqlite";
  Batches batches(13);
  auto store = OpenWithCeiling(db, batches.config());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit(batches.Next(10), batches.state()).ok());
  batches.Clear();

  sqlite3* pin = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &pin, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(pin, "BEGIN; SELECT COUNT(*) FROM orders;", nullptr, nullptr, nullptr),
            SQLITE_OK);

  Status refused;
  int committed = 0;
  for (int i = 0; i < 2000 && refused.ok(); ++i) {
    const RowBatch& b = batches.Next(60);
    const ProjectorState before = *store->State();
    refused = store->Commit(b, batches.state());
    if (refused.ok()) {
      batches.Clear();
      ++committed;
    } else {
      EXPECT_EQ(*store->State(), before) << "a refused commit wrote nothing";
    }
    ASSERT_LE(FileBytes(db.string() + "-wal"), kCeiling) << "after commit " << i;
  }
  ASSERT_FALSE(refused.ok()) << "the pinned WAL reached its ceiling";
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("ceiling"), std::string::npos) << refused.message();
  EXPECT_GT(committed, 5) << "commits went on while there was room";
  auto s = store->Storage();
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->over_ceiling);
  EXPECT_GT(s->ceiling_waits, 0u);

  ASSERT_EQ(sqlite3_exec(pin, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close_v2(pin);
  // The batch that was refused goes in now, and the WAL starts over.
  ASSERT_TRUE(store->Commit(batches.current(), batches.state()).ok());
  batches.Clear();
  ASSERT_TRUE(store->Commit(batches.Next(10), batches.state()).ok());
  batches.Clear();
  s = store->Storage();
  EXPECT_FALSE(s->over_ceiling);
  EXPECT_LE(FileBytes(db.string() + "-wal"), kCeiling / 4 + s->last_commit_bytes + 64)
      << "the WAL file was cut back when it started over";
  store.reset();
  fs::remove_all(dir);
}

TEST(SqliteWalTest, ACeilingBelowTheLeastIsRefused) {
  StoreOptions o;
  o.path = (TestDir() / "p.sqlite").string();
  o.wal_max_bytes = 1 << 20;
  const engine::EngineConfig config = workload::MixedConfig();
  auto s = OpenSqliteStore(o, config);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("ceiling"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace mb::projection
