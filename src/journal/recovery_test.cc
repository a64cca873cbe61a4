// Tests of recovery of a real engine session: from scratch, from snapshots
// (damaged ones skipped), snapshots that do not fit the journal, and torn
// tails found and repaired.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// A journal of one engine session written in the test's directory, to
// recover from.
class JournalRecovery : public JournalTest {
 protected:
  // Writes every record of the session MakeHistory(seed, commands) to a new
  // journal at root, syncing every `group` records; h_ and sums_ describe it.
  void WriteJournal(const fs::path& root, uint64_t seed, std::size_t commands,
                    const JournalOptions& options = Options(), std::size_t group = 5) {
    h_ = MakeHistory(seed, commands);
    auto sums = WriteHistory(root, h_, commands, options, group);
    ASSERT_TRUE(sums.ok()) << sums.status().message();
    sums_ = std::move(*sums);
  }

  History h_;
  std::vector<uint64_t> sums_;  // sums_[s - 1]: the checksum of record s
};

TEST_F(JournalRecovery, FromScratchMatchesTheLiveEngine) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(tmp_.path(), 14, 400, Options(8192), 9));
  ASSERT_GT(h_.trades, 30u);
  ASSERT_GT(h_.cancels, 10u);

  engine::Engine eng(h_.config);
  RecoveryOptions ro = Quiet(false);
  uint64_t calls = 0;
  ro.after_record = [&](const engine::Engine& e, uint64_t seq) -> Status {
    ++calls;
    if (seq != calls || Raw(e.last_sequence()) != seq || e.StateHash() != h_.hashes[seq - 1]) {
      return Status(StatusCode::kInternal, fmt::format("diverged at {}", seq));
    }
    return Status::Ok();
  };
  RecoveryReport report;
  ASSERT_OK(RecoverInto(tmp_.path(), &eng, ro, &report));
  EXPECT_EQ(calls, 400u);
  EXPECT_EQ(report.snapshot_seq, 0u);
  EXPECT_EQ(report.recovered_seq, 400u);
  EXPECT_EQ(report.replayed_records, 400u);
  EXPECT_EQ(report.replayed_events, h_.events);
  EXPECT_EQ(report.state_hash, h_.hashes.back());
  EXPECT_EQ(eng.StateHash(), h_.hashes.back());
  EXPECT_EQ(Raw(eng.last_sequence()), 400u);
  EXPECT_OK_INVARIANTS(eng);
  EXPECT_EQ(report.journal.last_checksum, sums_.back());
  EXPECT_FALSE(report.journal.tail.has_value());
  EXPECT_HAS(Describe(report), "recovered sequence 400");

  // The callback's error stops recovery.
  engine::Engine stopped(h_.config);
  ro.after_record = [](const engine::Engine&, uint64_t seq) {
    return seq == 17 ? Status(StatusCode::kInternal, "stop at 17") : Status::Ok();
  };
  const Status s = RecoverInto(tmp_.path(), &stopped, ro, &report);
  EXPECT_HAS(s.message(), "stop at 17");

  // An empty data directory recovers to the empty state.
  fs::create_directories(tmp_ / "empty");
  engine::Engine fresh(h_.config);
  ASSERT_OK(RecoverInto(tmp_ / "empty", &fresh, Quiet(), &report));
  EXPECT_EQ(report.recovered_seq, 0u);
  EXPECT_EQ(report.state_hash, engine::Engine(h_.config).StateHash());
}

TEST_F(JournalRecovery, FromASnapshotReplaysOnlyLaterRecords) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(tmp_.path(), 15, 300, Options(4096), 6));
  auto recs = ReadAll(tmp_.path());
  ASSERT_TRUE(recs.ok());
  // Snapshot points at segment edges (first and last record of a segment) as
  // well as inside segments and at both ends of the journal.
  std::vector<uint64_t> points = {1, 150, 299, 300};
  for (std::size_t i = 1; i < recs->size(); ++i) {
    if ((*recs)[i].segment != (*recs)[i - 1].segment && points.size() < 12) {
      points.push_back((*recs)[i - 1].seq);
      points.push_back((*recs)[i].seq);
    }
  }
  ASSERT_GE(points.size(), 8u);
  for (uint64_t s : points) {
    SCOPED_TRACE(fmt::format("snapshot at {}", s));
    auto path = Snapshot(tmp_.path(), h_, s, sums_[s - 1]);
    ASSERT_TRUE(path.ok()) << path.status().message();
    engine::Engine eng(h_.config);
    RecoveryOptions ro = Quiet();
    uint64_t first_replayed = 0;
    ro.after_record = [&](const engine::Engine&, uint64_t seq) {
      if (first_replayed == 0) first_replayed = seq;
      return Status::Ok();
    };
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp_.path(), &eng, ro, &report));
    EXPECT_EQ(report.snapshot_seq, s);
    EXPECT_EQ(report.snapshot_file, path->string());
    EXPECT_TRUE(report.notes.empty());
    EXPECT_EQ(report.replayed_records, 300 - s);
    EXPECT_EQ(first_replayed, s == 300 ? 0 : s + 1);
    EXPECT_EQ(report.recovered_seq, 300u);
    EXPECT_EQ(report.state_hash, h_.hashes.back());
    EXPECT_EQ(report.journal.last_seq, 300u);
    EXPECT_EQ(report.journal.last_checksum, sums_.back());
    EXPECT_OK_INVARIANTS(eng);
    fs::remove(*path);
  }
}

TEST_F(JournalRecovery, DamagedSnapshotsFallBack) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(tmp_.path(), 16, 400, Options(8192), 10));
  std::vector<fs::path> snaps;
  for (uint64_t s : {100u, 200u, 300u}) {
    auto path = Snapshot(tmp_.path(), h_, s, sums_[s - 1]);
    ASSERT_TRUE(path.ok()) << path.status().message();
    snaps.push_back(*path);
  }
  engine::Engine scratch(h_.config);
  RecoveryReport base;
  ASSERT_OK(RecoverInto(tmp_.path(), &scratch, Quiet(false), &base));
  EXPECT_EQ(base.snapshot_seq, 0u);
  EXPECT_EQ(base.state_hash, h_.hashes.back());

  struct Step {
    std::size_t damage;  // index into snaps
    void (*how)(const fs::path&);
    uint64_t expect_snapshot;
  };
  const Step steps[] = {
      {2,
       [](const fs::path& p) {
         Bytes b = Load(p);
         b[b.size() - 3] ^= std::byte{0x40};
         Store(p, b);
       },
       200},
      {1, [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 10); }, 100},
      {0,
       [](const fs::path& p) {
         Bytes b = Load(p);
         b[1] = std::byte{'X'};
         Store(p, b);
       },
       0},
  };
  std::size_t damaged = 0;
  for (const Step& step : steps) {
    SCOPED_TRACE(fmt::format("damaged {}", snaps[step.damage].filename().string()));
    step.how(snaps[step.damage]);
    ++damaged;
    const auto before = Tree(tmp_.path());
    engine::Engine eng(h_.config);
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp_.path(), &eng, Quiet(), &report));
    EXPECT_EQ(report.snapshot_seq, step.expect_snapshot);
    EXPECT_EQ(report.replayed_records, 400 - step.expect_snapshot);
    ASSERT_EQ(report.notes.size(), damaged);
    for (std::size_t i = 0; i < damaged; ++i) {
      EXPECT_HAS(report.notes[i], "skipped");
      EXPECT_HAS(report.notes[i], snaps[snaps.size() - 1 - i].filename().string());
    }
    EXPECT_EQ(report.recovered_seq, base.recovered_seq);
    EXPECT_EQ(report.state_hash, base.state_hash);
    EXPECT_OK_INVARIANTS(eng);
    EXPECT_EQ(Tree(tmp_.path()), before) << "recovery changed a file";
  }
}

TEST_F(JournalRecovery, SnapshotAheadOfTheJournal) {
  const fs::path full = tmp_ / "full";
  ASSERT_NO_FATAL_FAILURE(WriteJournal(full, 17, 150));
  {
    SCOPED_TRACE("journal of 100 records, snapshot at 150");
    const fs::path root = tmp_ / "short";
    ASSERT_TRUE(WriteHistory(root, h_, 100).ok());
    ASSERT_TRUE(Snapshot(root, h_, 150, sums_[149]).ok());
    engine::Engine eng(h_.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
    EXPECT_HAS(s.message(), "ends at 100");
  }
  {
    SCOPED_TRACE("no journal at all, a snapshot at 150");
    const fs::path root = tmp_ / "none";
    ASSERT_TRUE(Snapshot(root, h_, 150, sums_[149]).ok());
    engine::Engine eng(h_.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
  }
  {
    SCOPED_TRACE("the snapshot's record lost in a torn tail");
    const fs::path root = tmp_ / "torn";
    CopyTree(full, root);
    ASSERT_TRUE(Snapshot(root, h_, 150, sums_[149]).ok());
    const fs::path seg = Segments(root).back();
    fs::resize_file(seg, fs::file_size(seg) - 3);
    engine::Engine eng(h_.config);
    RecoveryReport report;
    RecoveryOptions ro = Quiet();
    ro.repair = true;
    const Status s = RecoverInto(root, &eng, ro, &report, OpenMode::kReadWrite);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
    EXPECT_HAS(s.message(), "ends at 149");
  }
}

TEST_F(JournalRecovery, SnapshotFromAnotherHistory) {
  const History a = MakeHistory(18, 200);
  const History b = MakeHistory(19, 200);
  ASSERT_EQ(a.config_hash, b.config_hash);
  ASSERT_NE(a.hashes[119], b.hashes[119]);
  auto sums_a = WriteHistory(tmp_ / "a", a, 200);
  auto sums_b = WriteHistory(tmp_ / "b", b, 200);
  ASSERT_TRUE(sums_a.ok() && sums_b.ok());
  ASSERT_NE((*sums_a)[119], (*sums_b)[119]);

  auto path = Snapshot(tmp_ / "a", b, 120, (*sums_b)[119]);
  ASSERT_TRUE(path.ok()) << path.status().message();
  const auto before = Tree(tmp_ / "a");
  engine::Engine eng(a.config);
  RecoveryReport report;
  const Status s = RecoverInto(tmp_ / "a", &eng, Quiet(), &report);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_HAS(s.message(), "does not belong to this journal");
  EXPECT_HAS(s.message(), path->filename().string());
  EXPECT_EQ(Tree(tmp_ / "a"), before);

  // Without snapshots the journal alone recovers.
  engine::Engine scratch(a.config);
  ASSERT_OK(RecoverInto(tmp_ / "a", &scratch, Quiet(false), &report));
  EXPECT_EQ(report.state_hash, a.hashes.back());
}

// testdata/v1 holds a journal written by the version-1 build (segment format
// 1, the codec before ClientOrderIdChanged, kQuoteBudgetSpent and
// CancelReplace): the session MakeHistory(21, 150). It still decodes, and
// replays to the state that build reported.
TEST_F(JournalRecovery, ReadsAVersion1Journal) {
  const fs::path golden = fs::path(MB_SOURCE_DIR) / "src/journal/testdata/v1";
  CopyTree(golden, tmp_ / "v1");
  const std::vector<fs::path> segs = Segments(tmp_ / "v1");
  ASSERT_EQ(segs.size(), 1u);
  {
    const Bytes head = Load(segs[0]);
    ASSERT_GE(head.size(), kSegmentHeaderSize);
    EXPECT_EQ(GetU16(head.data() + 8), 1u) << "the golden must stay a version-1 segment";
  }
  const engine::EngineConfig config = TestConfig();
  engine::Engine eng(config);
  ASSERT_EQ(eng.ConfigHash(), 0x8821480636e79e9cULL);
  RecoveryOptions ro = Quiet(false);
  RecoveryReport report;
  ASSERT_OK(RecoverInto(tmp_ / "v1", &eng, ro, &report));
  EXPECT_EQ(report.recovered_seq, 150u);
  EXPECT_EQ(report.replayed_events, 288u);
  EXPECT_EQ(eng.StateHash(), 0x444faaaeb41b15e1ULL);
  EXPECT_OK_INVARIANTS(eng);
  // The same session run by this build gives the same state.
  EXPECT_EQ(MakeHistory(21, 150).hashes.back(), 0x444faaaeb41b15e1ULL);

  // This build appends segments of its own version (kSegmentFormatVersion)
  // after it, and reads both.
  auto dir = DataDir::Open(tmp_ / "v1", OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  // (The large roll size: the new segment comes from the old one's version.)
  auto w = JournalWriter::Open(*dir, Options(), eng.ConfigHash(), report.journal);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::EventBuffer out;
  engine::Deposit d;
  d.account = AccountId{1};
  d.asset = kUsdt;
  d.amount = Amount{5};
  d.ref = TransferRef::From("after-v1");
  eng.Process(engine::Command{1'800'000'000'000'000'000, d}, &out);
  (void)(*w)->Append(out);
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  w->reset();
  const std::vector<fs::path> now = Segments(tmp_ / "v1");
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(GetU16(Load(now[1]).data() + 8), kSegmentFormatVersion);
  engine::Engine again(config);
  ASSERT_OK(RecoverInto(tmp_ / "v1", &again, Quiet(false), &report));
  EXPECT_EQ(report.recovered_seq, 151u);
  EXPECT_EQ(again.StateHash(), eng.StateHash());
}

TEST_F(JournalRecovery, TornTailIsFoundAndRepaired) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(tmp_.path(), 20, 200, Options(8192)));
  ASSERT_GE(Segments(tmp_.path()).size(), 2u);
  const fs::path seg = Segments(tmp_.path()).back();
  const uint64_t size = fs::file_size(seg);
  fs::resize_file(seg, size - 7);

  {
    SCOPED_TRACE("read-only: found, not cut");
    engine::Engine eng(h_.config);
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp_.path(), &eng, Quiet(), &report));
    EXPECT_EQ(report.recovered_seq, 199u);
    EXPECT_EQ(report.state_hash, h_.hashes[198]);
    ASSERT_TRUE(report.journal.tail.has_value());
    EXPECT_FALSE(report.journal.tail->repaired);
    EXPECT_EQ(fs::file_size(seg), size - 7);
  }
  auto dir = DataDir::Open(tmp_.path(), OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  engine::Engine eng(h_.config);
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  auto report = Recover(*dir, &eng, ro);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->recovered_seq, 199u);
  EXPECT_EQ(report->state_hash, h_.hashes[198]);
  ASSERT_TRUE(report->journal.tail.has_value());
  EXPECT_TRUE(report->journal.tail->repaired);
  EXPECT_HAS(Describe(*report->journal.tail), "dropped");
  EXPECT_EQ(report->journal.last_checksum, sums_[198]);
  // The writer continues from the recovery's scan, as the exchange does.
  // (A roll size the last segment has not reached: the record goes into it.)
  auto w = JournalWriter::Open(*dir, Options(1 << 20), eng.ConfigHash(), report->journal);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->Append(h_.records[199]), sums_[199]);
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ(fs::file_size(seg), size);
  w->reset();
  engine::Engine again(h_.config);
  RecoveryReport r2;
  ASSERT_OK(RecoverInto(tmp_.path(), &again, Quiet(), &r2));
  EXPECT_EQ(r2.recovered_seq, 200u);
  EXPECT_EQ(r2.state_hash, h_.hashes.back());
  EXPECT_FALSE(r2.journal.tail.has_value());
}

}  // namespace
}  // namespace mb::journal
