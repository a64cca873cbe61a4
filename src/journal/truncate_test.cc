// Tests of cutting the journal back to a sequence (TruncateAfter): in the
// middle of a segment, at segment boundaries, at the last record, at 0; what
// is refused (beyond the end, into archived history, without a snapshot to
// recover from, a read-only directory, the caller's error); a cut stopped by
// an I/O error at each step leaves a journal that recovers and a cut that
// finishes when run again; and after each cut, recovery and a new writer
// carry on from the kept record.
#include "journal/truncate.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/fault_file_system.h"
#include "journal/archive.h"
#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

constexpr uint64_t kRecords = 300;
constexpr std::size_t kGroup = 7;
constexpr uint64_t kSnapshotSeqs[] = {40, 100, 160, 220, 280};

// One journal over many small segments with snapshots along it, written once
// per test in tmp_/"orig"; each case cuts a copy of it.
class JournalTruncate : public JournalTest {
 protected:
  void SetUp() override {
    h_ = MakeHistory(21, kRecords);
    auto sums = WriteHistory(orig(), h_, kRecords, Options(2048), kGroup);
    ASSERT_TRUE(sums.ok()) << sums.status().message();
    sums_ = std::move(*sums);
    for (const uint64_t s : kSnapshotSeqs) {
      auto path = Snapshot(orig(), h_, s, sums_[s - 1]);
      ASSERT_TRUE(path.ok()) << path.status().message();
    }
    for (const fs::path& p : Segments(orig())) {
      uint64_t first = 0;
      ASSERT_TRUE(ParseSegmentFileName(p.filename().string(), &first));
      firsts_.push_back(first);
    }
    ASSERT_GE(firsts_.size(), 6u);
  }

  fs::path orig() const { return tmp_ / "orig"; }

  // A copy of the original journal at tmp_/name.
  fs::path Copy(const std::string& name) const {
    const fs::path root = tmp_ / name;
    CopyTree(orig(), root);
    return root;
  }

  // Cuts the journal at root after keep, checking that on_removed sees
  // records keep+1..last in order while nothing on disk has changed.
  Result<TruncateReport> Cut(const fs::path& root, uint64_t keep) {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    if (!dir.ok()) return dir.status();
    const auto before = Tree(root);
    uint64_t next = keep + 1;
    auto r = TruncateAfter(*dir, keep, [&](const JournalRecord& rec) -> Status {
      EXPECT_EQ(rec.seq, next);
      EXPECT_EQ(Bytes(rec.payload.begin(), rec.payload.end()), Encoded(h_.records[rec.seq - 1]));
      EXPECT_EQ(rec.checksum, sums_[rec.seq - 1]);
      if (rec.seq == keep + 1 || rec.seq == kRecords) {
        EXPECT_EQ(Tree(root), before);
      }
      ++next;
      return Status::Ok();
    });
    EXPECT_EQ(next, r.ok() ? r->old_last_seq + 1 : keep + 1) << "records given to on_removed";
    return r;
  }

  // After a cut at keep: recovery (with and without snapshots) gives the
  // state of a journal written only up to keep, whose segments the cut
  // journal's equal byte for byte; the snapshots at or below keep are there,
  // the others gone; a writer continues at keep + 1 and the whole session
  // appended again recovers to its end.
  void ExpectCutAt(const fs::path& root, uint64_t keep) {
    const uint64_t want = EngineAt(h_, keep).StateHash();
    for (const bool use_snapshots : {true, false}) {
      SCOPED_TRACE(use_snapshots ? "with snapshots" : "without snapshots");
      engine::Engine eng(h_.config);
      RecoveryReport report;
      ASSERT_OK(RecoverInto(root, &eng, Quiet(use_snapshots), &report));
      EXPECT_EQ(report.recovered_seq, keep);
      EXPECT_EQ(report.state_hash, want);
      EXPECT_FALSE(report.journal.tail.has_value());
      if (use_snapshots) {
        uint64_t newest = 0;
        for (const uint64_t s : kSnapshotSeqs) newest = s <= keep ? s : newest;
        EXPECT_EQ(report.snapshot_seq, newest);
      }
    }

    const fs::path ref = root.string() + ".ref";
    auto ref_sums = WriteHistory(ref, h_, keep, Options(2048), kGroup);
    ASSERT_TRUE(ref_sums.ok()) << ref_sums.status().message();
    if (keep > 0) {
      EXPECT_EQ(Tree(root / "journal"), Tree(ref / "journal"));
    } else {
      EXPECT_TRUE(Segments(root).empty());
    }
    engine::Engine ref_eng(h_.config);
    RecoveryReport ref_report;
    ASSERT_OK(RecoverInto(ref, &ref_eng, Quiet(false), &ref_report));
    EXPECT_EQ(ref_report.state_hash, want);

    std::vector<uint64_t> snaps;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / "snapshots", ec)) {
      uint64_t seq = 0;
      ASSERT_TRUE(ParseSnapshotFileName(e.path().filename().string(), &seq)) << e.path();
      snaps.push_back(seq);
    }
    std::sort(snaps.begin(), snaps.end());
    std::vector<uint64_t> kept;
    for (const uint64_t s : kSnapshotSeqs) {
      if (s <= keep) kept.push_back(s);
    }
    EXPECT_EQ(snaps, kept);

    {
      auto dir = DataDir::Open(root, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok()) << dir.status().message();
      ScanOptions so;
      so.config_hash = h_.config_hash;
      so.repair = true;
      auto scan = ScanJournal(*dir, so, nullptr);
      ASSERT_TRUE(scan.ok()) << scan.status().message();
      EXPECT_EQ(scan->last_seq, keep);
      auto w = JournalWriter::Open(*dir, Options(2048), h_.config_hash, *scan);
      ASSERT_TRUE(w.ok()) << w.status().message();
      EXPECT_EQ((*w)->next_seq(), keep + 1);
    }
    if (keep < kRecords) {
      auto again = AppendHistory(root, h_, keep + 1, kRecords, Options(2048), kGroup);
      ASSERT_TRUE(again.ok()) << again.status().message();
      std::vector<uint64_t> sums(sums_.begin(), sums_.begin() + static_cast<std::ptrdiff_t>(keep));
      sums.insert(sums.end(), again->begin(), again->end());
      EXPECT_EQ(sums, sums_);
      auto recs = ReadAll(root);
      ASSERT_TRUE(recs.ok()) << recs.status().message();
      EXPECT_TRUE(HoldsRecords(*recs, h_, sums_, kRecords));
      engine::Engine eng(h_.config);
      RecoveryReport report;
      ASSERT_OK(RecoverInto(root, &eng, Quiet(), &report));
      EXPECT_EQ(report.state_hash, h_.hashes.back());
    }
  }

  std::vector<std::string> Names(const std::vector<fs::path>& paths) const {
    std::vector<std::string> out;
    for (const fs::path& p : paths) out.push_back(p.filename().string());
    return out;
  }

  // The names of the original segments with first sequence in [from, to].
  std::vector<std::string> SegmentNames(uint64_t from, uint64_t to = UINT64_MAX) const {
    std::vector<std::string> out;
    for (const uint64_t f : firsts_) {
      if (f >= from && f <= to) out.push_back(SegmentFileName(f));
    }
    return out;
  }

  std::vector<std::string> SnapshotNamesAbove(uint64_t keep) const {
    std::vector<std::string> out;
    for (const uint64_t s : kSnapshotSeqs) {
      if (s > keep) out.push_back(SnapshotFileName(s));
    }
    return out;
  }

  History h_;
  std::vector<uint64_t> sums_;
  std::vector<uint64_t> firsts_;  // of the original segments
};

TEST_F(JournalTruncate, InTheMiddleOfASegment) {
  // A segment holding at least three records, cut after its second.
  std::size_t i = 1;
  while (i + 1 < firsts_.size() && firsts_[i + 1] - firsts_[i] < 3) ++i;
  ASSERT_LT(i + 1, firsts_.size());
  const uint64_t keep = firsts_[i] + 1;
  const fs::path root = Copy("mid");
  const uint64_t size = fs::file_size(root / "journal" / SegmentFileName(firsts_[i]));
  auto r = Cut(root, keep);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->keep_seq, keep);
  EXPECT_EQ(r->old_last_seq, kRecords);
  EXPECT_EQ(r->records_removed, kRecords - keep);
  EXPECT_EQ(Names(r->segments_removed), SegmentNames(firsts_[i] + 1));
  EXPECT_EQ(r->segment_cut.filename(), SegmentFileName(firsts_[i]));
  EXPECT_GT(r->cut_offset, kSegmentHeaderSize);
  EXPECT_LT(r->cut_offset, size);
  EXPECT_EQ(fs::file_size(r->segment_cut), r->cut_offset);
  EXPECT_EQ(Names(r->snapshots_removed), SnapshotNamesAbove(keep));
  EXPECT_HAS(Describe(*r), fmt::format("records {}..300 removed", keep + 1));
  ExpectCutAt(root, keep);
}

TEST_F(JournalTruncate, AtSegmentBoundaries) {
  // Record keep + 1 is a segment's first: that segment goes whole.
  for (const std::size_t i : {std::size_t{1}, std::size_t{3}, firsts_.size() - 1}) {
    const uint64_t keep = firsts_[i] - 1;
    SCOPED_TRACE(fmt::format("after {}", keep));
    const fs::path root = Copy(fmt::format("boundary{}", i));
    auto r = Cut(root, keep);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->records_removed, kRecords - keep);
    EXPECT_EQ(Names(r->segments_removed), SegmentNames(firsts_[i]));
    EXPECT_TRUE(r->segment_cut.empty());
    EXPECT_EQ(Names(r->snapshots_removed), SnapshotNamesAbove(keep));
    EXPECT_EQ(Names(Segments(root)), SegmentNames(1, firsts_[i] - 1));
    ExpectCutAt(root, keep);
  }
}

TEST_F(JournalTruncate, AtTheLastRecordChangesNothing) {
  const fs::path root = Copy("last");
  const auto before = Tree(root);
  auto r = Cut(root, kRecords);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->records_removed, 0u);
  EXPECT_EQ(r->old_last_seq, kRecords);
  EXPECT_TRUE(r->segments_removed.empty());
  EXPECT_TRUE(r->segment_cut.empty());
  EXPECT_TRUE(r->snapshots_removed.empty());
  EXPECT_EQ(r->bytes_removed, 0u);
  EXPECT_EQ(Tree(root), before);
  EXPECT_HAS(Describe(*r), "no record removed");
  ExpectCutAt(root, kRecords);
}

TEST_F(JournalTruncate, AtZeroRemovesEverything) {
  const fs::path root = Copy("zero");
  uint64_t bytes = 0;
  for (const fs::path& p : Segments(root)) bytes += fs::file_size(p);
  auto r = Cut(root, 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->records_removed, kRecords);
  EXPECT_EQ(Names(r->segments_removed), SegmentNames(1));
  EXPECT_TRUE(r->segment_cut.empty());
  EXPECT_EQ(r->bytes_removed, bytes);
  EXPECT_EQ(Names(r->snapshots_removed), SnapshotNamesAbove(0));
  EXPECT_TRUE(Segments(root).empty());
  ExpectCutAt(root, 0);
}

TEST_F(JournalTruncate, TakesATornTailWithTheCut) {
  const fs::path root = Copy("torn");
  const fs::path last = Segments(root).back();
  Bytes bytes = Load(last);
  const uint64_t whole = bytes.size();
  bytes.insert(bytes.end(), 37, std::byte{0x5a});
  Store(last, bytes);
  const uint64_t keep = kRecords - 1;
  ASSERT_LT(firsts_.back(), keep);
  auto r = Cut(root, keep);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->segment_cut, last);
  EXPECT_EQ(r->bytes_removed, whole + 37 - r->cut_offset);
  ExpectCutAt(root, keep);
}

TEST_F(JournalTruncate, RefusesWithNothingChanged) {
  const fs::path root = Copy("refused");
  const auto before = Tree(root);
  // Beyond the last record.
  for (const uint64_t keep : {kRecords + 1, kRecords + 1000, UINT64_MAX}) {
    auto r = Cut(root, keep);
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
    EXPECT_EQ(Tree(root), before);
  }
  EXPECT_HAS(Cut(root, kRecords + 1).status().message(), "it ends at 300");

  // The caller's error from on_removed stops the cut.
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    uint64_t calls = 0;
    auto r = TruncateAfter(*dir, 100, [&](const JournalRecord& rec) -> Status {
      ++calls;
      if (rec.seq == 150) return IoError("the log of removed records is full");
      return Status::Ok();
    });
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_HAS(r.status().message(), "log of removed records is full");
    EXPECT_EQ(calls, 50u);
    EXPECT_EQ(Tree(root), before);
  }

  // A read-only directory.
  {
    auto dir = DataDir::Open(root, OpenMode::kReadOnly);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto r = TruncateAfter(*dir, 100);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInternal);
    EXPECT_EQ(Tree(root), before);
  }

  // Damage inside the journal: the scan's error, nothing cut.
  {
    const fs::path damaged = Copy("damaged");
    const fs::path seg = Segments(damaged)[2];
    Bytes bytes = Load(seg);
    bytes[kSegmentHeaderSize + kRecordHeaderSize + 2] ^= std::byte{0x40};
    Store(seg, bytes);
    const auto damaged_before = Tree(damaged);
    auto dir = DataDir::Open(damaged, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto r = TruncateAfter(*dir, 10);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_EQ(Tree(damaged), damaged_before);
  }
}

TEST_F(JournalTruncate, NeverReachesIntoArchivedHistory) {
  const fs::path root = Copy("archived");
  uint64_t first_live = 0;
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto r = Retain(*dir, 160, Retention::kArchive, tmp_ / "archive");
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_GT(r->segments, 0u);
    first_live = r->first_live_seq;
  }
  // Snapshot 160 is the only one whose record is still live.
  ASSERT_GT(first_live, 100u);
  ASSERT_LE(first_live, 160u);
  const auto before = Tree(root);
  for (const uint64_t keep :
       {uint64_t{0}, first_live - 2, first_live - 1, first_live, uint64_t{159}}) {
    auto r = Cut(root, keep);
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange) << keep;
    EXPECT_HAS(r.status().message(), fmt::format("it starts at {}", first_live));
    EXPECT_EQ(Tree(root), before);
  }

  // A damaged snapshot does not count.
  const fs::path snap160 = root / "snapshots" / SnapshotFileName(160);
  const Bytes good = Load(snap160);
  Bytes bad = good;
  bad.back() ^= std::byte{0x01};
  Store(snap160, bad);
  auto refused = Cut(root, 170);
  ASSERT_FALSE(refused.ok());
  EXPECT_HAS(refused.status().message(), "no readable snapshot");
  Store(snap160, good);

  // At the snapshot: its record stays, recovery restores it and replays on.
  auto r = Cut(root, 160);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Names(r->snapshots_removed), SnapshotNamesAbove(160));
  engine::Engine eng(h_.config);
  RecoveryReport report;
  ASSERT_OK(RecoverInto(root, &eng, Quiet(), &report));
  EXPECT_EQ(report.snapshot_seq, 160u);
  EXPECT_EQ(report.recovered_seq, 160u);
  EXPECT_EQ(report.state_hash, h_.hashes[159]);
  // The archive and the live journal together still read from sequence 1.
  RecoveryOptions from_one = Quiet(false);
  from_one.archive_dir = tmp_ / "archive";
  engine::Engine all(h_.config);
  ASSERT_OK(RecoverInto(root, &all, from_one, &report));
  EXPECT_EQ(report.recovered_seq, 160u);
  EXPECT_EQ(report.state_hash, h_.hashes[159]);
  auto again = AppendHistory(root, h_, 161, kRecords, Options(2048), kGroup);
  ASSERT_TRUE(again.ok()) << again.status().message();
}

TEST_F(JournalTruncate, StoppedByAnIoErrorAnywhereItRecoversAndFinishesWhenRunAgain) {
  std::size_t i = 1;
  while (i + 1 < firsts_.size() && firsts_[i + 1] - firsts_[i] < 3) ++i;
  ASSERT_LT(i + 3, firsts_.size()) << "at least two segments after the cut one";
  const uint64_t keep = firsts_[i] + 1;
  ASSERT_GE(SnapshotNamesAbove(keep).size(), 2u);
  struct Case {
    const char* name;
    FileFault fault;
  };
  // SyncDir opens and fsyncs the snapshot directory first, then the journal
  // directory after each segment removed.
  const std::vector<Case> cases = {
      {"first snapshot unlink", Fault(FileOp::kUnlink, EIO, ".mbs")},
      {"second snapshot unlink", Fault(FileOp::kUnlink, EIO, ".mbs").Skip(1)},
      {"snapshot directory fsync", Fault(FileOp::kSyncDirectory, EIO)},
      {"first segment unlink", Fault(FileOp::kUnlink, EIO, ".mbj")},
      {"second segment unlink", Fault(FileOp::kUnlink, EIO, ".mbj").Skip(1)},
      {"journal directory fsync", Fault(FileOp::kSyncDirectory, EIO).Skip(2)},
      {"open to cut", Fault(FileOp::kOpen, EIO, ".mbj")},
      {"ftruncate", Fault(FileOp::kTruncate, EIO, ".mbj")},
      {"fdatasync", Fault(FileOp::kDataSync, EIO, ".mbj")},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].name);
    const fs::path root = Copy(fmt::format("fault{}", c));
    {
      FaultFileSystem fsys;
      auto dir = DataDir::Open(root, OpenMode::kReadWrite, &fsys);
      ASSERT_TRUE(dir.ok()) << dir.status().message();
      fsys.Inject(cases[c].fault);
      auto r = TruncateAfter(*dir, keep);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kIoError);
      EXPECT_HAS(r.status().message(), "running it again finishes it");
      int failed = 0;
      for (std::size_t op = 0; op < kFileOps; ++op) failed += fsys.failed(static_cast<FileOp>(op));
      EXPECT_EQ(failed, 1);
    }
    // A prefix of the journal that still recovers, from a snapshot not ahead
    // of it.
    engine::Engine eng(h_.config);
    RecoveryReport report;
    ASSERT_OK(RecoverInto(root, &eng, Quiet(), &report));
    EXPECT_GE(report.recovered_seq, keep);
    EXPECT_EQ(report.state_hash, h_.hashes[report.recovered_seq - 1]);

    auto again = Cut(root, keep);
    ASSERT_TRUE(again.ok()) << again.status().message();
    ExpectCutAt(root, keep);
  }
}

}  // namespace
}  // namespace mb::journal
