// Failures a real kernel reports only on a failing or full disk, injected
// through the data directory's FileSystem (common/fault_file_system.h): a
// lost writeback reported by fdatasync, ENOSPC in the middle of a group, a
// segment roll that fails at each of its steps, snapshot writes that fail at
// each of theirs, and a torn tail that cannot be cut or an empty last
// segment that cannot be removed at recovery.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/fault_file_system.h"
#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

class JournalIoFaults : public JournalTest {
 protected:
  // A new journal at root_ for the session MakeHistory(seed, commands), its
  // writer making every call through fsys_.
  void OpenWriter(uint64_t seed, std::size_t commands, const JournalOptions& options) {
    h_ = MakeHistory(seed, commands);
    ReopenWriter(options);
  }
  // A writer continuing the journal at root_ (as after a restart).
  void ReopenWriter(const JournalOptions& options) {
    w_.reset();
    dir_.reset();
    auto dir = DataDir::Open(root_, OpenMode::kReadWrite, &fsys_);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    dir_.emplace(std::move(*dir));
    ScanOptions so;
    so.repair = true;
    auto scan = ScanJournal(*dir_, so, nullptr);
    ASSERT_TRUE(scan.ok()) << scan.status().message();
    auto w = JournalWriter::Open(*dir_, options, h_.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    w_ = std::move(*w);
  }

  void Append(uint64_t first, uint64_t last) {
    for (uint64_t s = first; s <= last; ++s) sums_.push_back(w_->Append(h_.records[s - 1]));
  }

  // The journal on disk holds exactly records 1..n, whole, once.
  ::testing::AssertionResult JournalHolds(uint64_t n) {
    ScanResult end;
    auto recs = ReadAll(root_, {}, &end);
    if (!recs.ok()) return ::testing::AssertionFailure() << recs.status().message();
    if (end.tail) return ::testing::AssertionFailure() << Describe(*end.tail);
    return HoldsRecords(*recs, h_, sums_, n);
  }

  const fs::path root_ = tmp_ / "data";
  FaultFileSystem fsys_;
  History h_;
  std::vector<uint64_t> sums_;
  std::optional<DataDir> dir_;
  std::unique_ptr<JournalWriter> w_;
};

// ---------------------------------------------------------------------------
// Group commit

TEST_F(JournalIoFaults, FailedFdatasyncIsNeverDurableAndIsWrittenAgain) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(31, 30, Options()));
  Append(1, 10);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  const fs::path seg = Segments(root_).at(0);
  const uint64_t good = fs::file_size(seg);

  Append(11, 20);
  ASSERT_OK(w_->Write());
  EXPECT_EQ(w_->written_seq(), 20u);
  fsys_.Inject(Fault(FileOp::kDataSync, EIO));
  const Status s = w_->Sync();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_HAS(s.message(), "fdatasync");
  EXPECT_HAS(s.message(), "Input/output error");
  EXPECT_EQ(w_->durable_seq(), 10u) << "a failed fdatasync made something durable";
  EXPECT_EQ(w_->written_seq(), 10u) << "the unsynced records must be written again";
  EXPECT_EQ(fs::file_size(seg), good) << "the unsynced bytes were not cut off";
  EXPECT_EQ(w_->bytes_on_disk(), good);
  EXPECT_FALSE(w_->SyncDue(std::chrono::steady_clock::now()));

  // The retry writes records 11..20 (and those appended meanwhile) again.
  Append(21, 25);
  const int writes = fsys_.calls(FileOp::kWrite);
  ASSERT_OK(w_->Write());
  EXPECT_GT(fsys_.calls(FileOp::kWrite), writes);
  EXPECT_EQ(w_->written_seq(), 25u);
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 25u);
  EXPECT_EQ(w_->bytes_on_disk(), fs::file_size(seg));
  EXPECT_TRUE(JournalHolds(25));
}

// After a lost writeback the kernel may have dropped the pages and the cut
// back may fail as well: the rewrite goes to the same offsets, so whatever the
// disk kept there is replaced by the records from memory.
TEST_F(JournalIoFaults, FailedFdatasyncAndFailedCutStillRewriteFromMemory) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(32, 20, Options()));
  Append(1, 5);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  const fs::path seg = Segments(root_).at(0);
  const uint64_t good = fs::file_size(seg);
  Append(6, 12);
  ASSERT_OK(w_->Write());
  const uint64_t written = fs::file_size(seg);
  fsys_.Inject(Fault(FileOp::kDataSync, EIO));
  fsys_.Inject(Fault(FileOp::kTruncate, EIO));
  EXPECT_FALSE(w_->Sync().ok());
  EXPECT_EQ(w_->durable_seq(), 5u);
  ASSERT_EQ(fs::file_size(seg), written) << "the cut was expected to fail";
  // What the lost writeback left on disk: zeros where records 6..12 were.
  Bytes bytes = Load(seg);
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(good), bytes.end(), std::byte{0});
  Store(seg, bytes);

  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 12u);
  EXPECT_TRUE(JournalHolds(12));
}

TEST_F(JournalIoFaults, FailedFdatasyncUnderIntervalIsNeverDurable) {
  JournalOptions o = Options();
  o.policy = FsyncPolicy::kInterval;
  o.interval_ms = 1;
  ASSERT_NO_FATAL_FAILURE(OpenWriter(33, 20, o));
  Append(1, 8);
  ASSERT_OK(w_->Write());
  fsys_.Inject(Fault(FileOp::kDataSync, EIO).Times(2));
  EXPECT_FALSE(w_->Sync().ok());
  EXPECT_EQ(w_->durable_seq(), 0u);
  ASSERT_OK(w_->Write());
  EXPECT_FALSE(w_->Sync().ok());
  EXPECT_EQ(w_->durable_seq(), 0u);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 8u);
  EXPECT_TRUE(JournalHolds(8));
}

// The disk fills in the middle of a group: a short write, then ENOSPC.
TEST_F(JournalIoFaults, DiskFullMidGroupLeavesARecordBoundary) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(34, 30, Options()));
  Append(1, 10);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  const fs::path seg = Segments(root_).at(0);
  const uint64_t good = fs::file_size(seg);
  fsys_.Inject(Fault(FileOp::kWrite, ENOSPC, ".mbj").Times(-1).ShortFirst());
  Append(11, 20);
  const Status s = w_->Write();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_HAS(s.message(), "No space left on device");
  EXPECT_EQ(fsys_.failed(FileOp::kWrite), 2) << "a short write, then ENOSPC";
  EXPECT_EQ(fs::file_size(seg), good);
  EXPECT_EQ(w_->written_seq(), 10u);
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 10u);
  EXPECT_TRUE(JournalHolds(10));

  fsys_.Clear();  // space freed
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 20u);
  EXPECT_TRUE(JournalHolds(20));
}

// ---------------------------------------------------------------------------
// Segment roll

struct RollFault {
  const char* name;
  FileFault fault;
  const char* says;
};

class JournalRollFaults : public JournalIoFaults,
                          public ::testing::WithParamInterface<RollFault> {};

TEST_P(JournalRollFaults, FailedRollLeavesNoSegmentAndIsRetried) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(35, 20, Options(256)));
  Append(1, 5);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  ASSERT_EQ(Segments(root_).size(), 1u);
  ASSERT_GE(fs::file_size(Segments(root_)[0]), 256u);  // the next Write rolls

  FileFault f = GetParam().fault;
  f.times = -1;
  fsys_.Inject(f);
  Append(6, 8);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status s = w_->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), GetParam().says);
    EXPECT_EQ(w_->durable_seq(), 5u);
    EXPECT_EQ(w_->written_seq(), 5u);
    EXPECT_EQ(Segments(root_).size(), 1u) << "a half-made segment was left behind";
    EXPECT_TRUE(JournalHolds(5));
  }
  fsys_.Clear();
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 8u);
  ASSERT_EQ(Segments(root_).size(), 2u);
  EXPECT_EQ(Segments(root_)[1].filename(), SegmentFileName(6));
  EXPECT_TRUE(JournalHolds(8));
}

INSTANTIATE_TEST_SUITE_P(
    EachStep, JournalRollFaults,
    ::testing::Values(RollFault{"Create", Fault(FileOp::kOpen, ENOSPC, ".mbj"), "create segment"},
                      RollFault{"Header", Fault(FileOp::kWrite, ENOSPC, ".mbj"),
                                "No space left on device"},
                      RollFault{"HeaderSync", Fault(FileOp::kDataSync, EIO, ".mbj"), "fdatasync"},
                      RollFault{"DirectorySync", Fault(FileOp::kSyncDirectory, EIO, "data/journal"),
                                "fsync directory"}),
    [](const ::testing::TestParamInfo<RollFault>& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------------------
// Snapshots

struct SnapshotFault {
  const char* name;
  FileFault fault;
  const char* says;
};

class SnapshotFaults : public JournalIoFaults,
                       public ::testing::WithParamInterface<SnapshotFault> {};

// A snapshot that fails at any step before its rename leaves the snapshots
// as they were (even with keep = 1 the good one stays), no temporary file,
// and recovery starts from the good one.
TEST_P(SnapshotFaults, FailedSnapshotNeverReplacesTheGoodOne) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(36, 40, Options()));
  Append(1, 40);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  const engine::Engine at20 = EngineAt(h_, 20);
  const engine::Engine at30 = EngineAt(h_, 30);
  SnapshotMeta meta;
  meta.record_checksum = sums_[19];
  auto good = WriteSnapshot(*dir_, at20.ExportImage(), &meta, 3, 1);
  ASSERT_TRUE(good.ok()) << good.status().message();
  const Bytes good_bytes = Load(*good);

  fsys_.Inject(GetParam().fault);
  SnapshotMeta failed_meta;
  failed_meta.record_checksum = sums_[29];
  auto failed = WriteSnapshot(*dir_, at30.ExportImage(), &failed_meta, 3, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError);
  EXPECT_HAS(failed.status().message(), GetParam().says);
  fsys_.Clear();

  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root_ / "snapshots")) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{SnapshotFileName(20)});
  EXPECT_EQ(Load(*good), good_bytes);

  w_.reset();
  dir_.reset();
  engine::Engine e(TestConfig());
  RecoveryReport report;
  ASSERT_OK(RecoverInto(root_, &e, Quiet(), &report));
  EXPECT_EQ(report.snapshot_seq, 20u);
  EXPECT_EQ(report.recovered_seq, 40u);
  EXPECT_EQ(e.StateHash(), EngineAt(h_, 40).StateHash());
}

INSTANTIATE_TEST_SUITE_P(
    EachStep, SnapshotFaults,
    ::testing::Values(SnapshotFault{"Create", Fault(FileOp::kOpen, ENOSPC, ".mbs.tmp"), "create"},
                      SnapshotFault{
                          "Write", Fault(FileOp::kWrite, ENOSPC, ".mbs.tmp").Times(-1).ShortFirst(),
                          "No space left on device"},
                      SnapshotFault{"Fsync", Fault(FileOp::kSync, EIO, ".mbs.tmp"), "fsync"},
                      SnapshotFault{"Rename", Fault(FileOp::kRename, EIO, ".mbs"), "rename"}),
    [](const ::testing::TestParamInfo<SnapshotFault>& i) { return std::string(i.param.name); });

// The directory fsync after the rename fails: the new snapshot is whole (its
// data was fsynced), but a power cut may undo the rename, so the older ones
// are all kept (none pruned) and the error is reported.
TEST_F(JournalIoFaults, FailedSnapshotDirectorySyncKeepsTheOlderSnapshots) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(37, 40, Options()));
  Append(1, 40);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  SnapshotMeta meta;
  meta.record_checksum = sums_[19];
  ASSERT_TRUE(WriteSnapshot(*dir_, EngineAt(h_, 20).ExportImage(), &meta, 3, 1).ok());

  fsys_.Inject(Fault(FileOp::kSyncDirectory, EIO, "data/snapshots"));
  meta = {};
  meta.record_checksum = sums_[29];
  auto failed = WriteSnapshot(*dir_, EngineAt(h_, 30).ExportImage(), &meta, 3, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_HAS(failed.status().message(), "fsync directory");
  auto listed = dir_->ListSnapshots();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u) << "the older snapshot was pruned before the new one was durable";
  EXPECT_TRUE(ReadSnapshot((*listed)[1].path).ok());

  // The next snapshot that succeeds prunes as usual.
  meta = {};
  meta.record_checksum = sums_[39];
  ASSERT_TRUE(WriteSnapshot(*dir_, EngineAt(h_, 40).ExportImage(), &meta, 3, 1).ok());
  listed = dir_->ListSnapshots();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].seq, 40u);
}

// ---------------------------------------------------------------------------
// Recovery

// A torn tail that cannot be cut (ftruncate or its fsync fails): the start
// fails, saying why, and nothing is lost; the next start cuts it.
TEST_F(JournalIoFaults, FailedCutOfATornTailFailsTheStartAndIsRetried) {
  for (const FileOp op : {FileOp::kTruncate, FileOp::kSync}) {
    SCOPED_TRACE(static_cast<int>(op));
    fs::remove_all(root_);
    sums_.clear();
    ASSERT_NO_FATAL_FAILURE(OpenWriter(38, 12, Options()));
    Append(1, 12);
    ASSERT_OK(w_->Write());
    ASSERT_OK(w_->Sync());
    w_.reset();
    dir_.reset();
    const fs::path seg = Segments(root_).at(0);
    const uint64_t good = fs::file_size(seg);
    Bytes bytes = Load(seg);
    bytes.resize(bytes.size() + 40, std::byte{0x5a});  // half a record
    Store(seg, bytes);

    fsys_.Inject(Fault(op, EIO, ".mbj"));
    {
      auto dir = DataDir::Open(root_, OpenMode::kReadWrite, &fsys_);
      ASSERT_TRUE(dir.ok());
      engine::Engine e(TestConfig());
      RecoveryOptions ro = Quiet();
      ro.repair = true;
      auto r = Recover(*dir, &e, ro);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kIoError);
      EXPECT_HAS(r.status().message(), "cannot cut the torn tail");
      EXPECT_HAS(r.status().message(), seg.string());
      EXPECT_HAS(r.status().message(), "Input/output error");
    }
    if (op == FileOp::kTruncate) {
      EXPECT_EQ(fs::file_size(seg), good + 40);
    }
    fsys_.Clear();

    auto dir = DataDir::Open(root_, OpenMode::kReadWrite, &fsys_);
    ASSERT_TRUE(dir.ok());
    engine::Engine e(TestConfig());
    RecoveryOptions ro = Quiet();
    ro.repair = true;
    auto r = Recover(*dir, &e, ro);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->recovered_seq, 12u);
    EXPECT_EQ(fs::file_size(seg), good);
    EXPECT_TRUE(JournalHolds(12));
  }
}

// A roll cut short leaves a last segment without a whole header; start-up
// removes it. When the removal fails, start-up stops and says so; the next
// start removes it.
TEST_F(JournalIoFaults, FailedRemovalOfAnEmptyLastSegmentFailsTheStart) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(40, 12, Options()));
  Append(1, 12);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  w_.reset();
  dir_.reset();
  const fs::path empty = root_ / "journal" / SegmentFileName(13);
  Store(empty, Bytes(kSegmentHeaderSize - 1, std::byte{0}));

  fsys_.Inject(Fault(FileOp::kUnlink, EIO, SegmentFileName(13)));
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  {
    auto dir = DataDir::Open(root_, OpenMode::kReadWrite, &fsys_);
    ASSERT_TRUE(dir.ok());
    engine::Engine e(TestConfig());
    auto r = Recover(*dir, &e, ro);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_HAS(r.status().message(), "remove the empty last segment");
    EXPECT_HAS(r.status().message(), empty.string());
  }
  EXPECT_TRUE(fs::exists(empty));
  fsys_.Clear();
  auto dir = DataDir::Open(root_, OpenMode::kReadWrite, &fsys_);
  ASSERT_TRUE(dir.ok());
  engine::Engine e(TestConfig());
  auto r = Recover(*dir, &e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->recovered_seq, 12u);
  EXPECT_FALSE(fs::exists(empty));
  EXPECT_TRUE(JournalHolds(12));
}

// Under `none` a failed fdatasync (at a roll) cannot tell what the kernel
// lost: every later one fails too, until a restart reads what is on disk.
TEST_F(JournalIoFaults, FailedFdatasyncUnderNoneStaysFailedUntilRestart) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(39, 20, Options(256, FsyncPolicy::kNone)));
  Append(1, 5);
  ASSERT_OK(w_->Write());
  ASSERT_GE(fs::file_size(Segments(root_)[0]), 256u);
  fsys_.Inject(Fault(FileOp::kDataSync, EIO));
  Append(6, 8);
  EXPECT_FALSE(w_->Write().ok());
  fsys_.Clear();
  const Status again = w_->Write();
  EXPECT_FALSE(again.ok());
  EXPECT_HAS(again.message(), "restart to recover");
  EXPECT_FALSE(w_->SyncAll().ok());

  ASSERT_NO_FATAL_FAILURE(ReopenWriter(Options(256, FsyncPolicy::kNone)));
  EXPECT_EQ(w_->next_seq(), 6u);
  sums_.resize(5);
  Append(6, 8);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->SyncAll());
  EXPECT_TRUE(JournalHolds(8));
}

}  // namespace
}  // namespace mb::journal
