// Tests of write errors from the kernel (RLIMIT_FSIZE): a failed write or
// roll leaves the journal at a record boundary and is retried.
#include <gtest/gtest.h>

#include "journal/journal_test_support.h"

namespace mb::journal {
namespace {

TEST(JournalWriteErrors, FailedWritesLeaveARecordBoundaryAndAreRetried) {
  TempDir tmp;
  const History h = MakeHistory(21, 40);
  const fs::path root = tmp / "data";
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  auto scan = ScanJournal(*dir, {}, nullptr);
  ASSERT_TRUE(scan.ok());
  auto w = JournalWriter::Open(*dir, Options(), h.config_hash, *scan);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint64_t> sums;
  for (uint64_t s = 1; s <= 10; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  const fs::path seg = Segments(root).at(0);
  const uint64_t good = fs::file_size(seg);
  ASSERT_EQ((*w)->bytes_on_disk(), good);

  {
    FileSizeLimit limit;
    // Room for part of the next group: the first write() is short, the next
    // fails with EFBIG.
    ASSERT_TRUE(limit.Set(good + 100));
    for (uint64_t s = 11; s <= 30; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    Status s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), seg.string());
    EXPECT_HAS(s.message(), "File too large");
    EXPECT_EQ((*w)->written_seq(), 10u);
    EXPECT_EQ((*w)->durable_seq(), 10u);
    EXPECT_EQ((*w)->next_seq(), 31u);
    EXPECT_EQ(fs::file_size(seg), good) << "not cut back to the record boundary";
    EXPECT_EQ((*w)->bytes_on_disk(), good);
    // Sync has nothing to make durable.
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 10u);

    // Still failing: the same again; more records queue behind.
    for (uint64_t q = 31; q <= 35; ++q) sums.push_back((*w)->Append(h.records[q - 1]));
    s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_EQ((*w)->durable_seq(), 10u);
    EXPECT_EQ(fs::file_size(seg), good);

    // Meanwhile the journal on disk is whole: ten records, no tail.
    ScanResult mid;
    auto recs = ReadAll(root, {}, &mid);
    ASSERT_TRUE(recs.ok()) << recs.status().message();
    EXPECT_EQ(mid.last_seq, 10u);
    EXPECT_FALSE(mid.tail.has_value());
  }
  // The limit is lifted: the retry writes everything, once.
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 35u);
  EXPECT_EQ((*w)->bytes_on_disk(), fs::file_size(seg));
  for (uint64_t s = 36; s <= 40; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 40u);

  ScanResult end;
  auto recs = ReadAll(root, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 40));
  EXPECT_EQ(end.bytes, fs::file_size(seg));
}

TEST(JournalWriteErrors, FailedRollIsRetried) {
  TempDir tmp;
  const History h = MakeHistory(22, 20);
  const fs::path root = tmp / "data";
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  auto scan = ScanJournal(*dir, {}, nullptr);
  ASSERT_TRUE(scan.ok());
  auto w = JournalWriter::Open(*dir, Options(256), h.config_hash, *scan);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint64_t> sums;
  for (uint64_t s = 1; s <= 5; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  ASSERT_EQ(Segments(root).size(), 1u);
  ASSERT_GE(fs::file_size(Segments(root)[0]), 256u);  // the next Write rolls

  {
    FileSizeLimit limit;
    ASSERT_TRUE(limit.Set(20));  // not even a whole segment header fits
    for (uint64_t s = 6; s <= 8; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    const Status s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), SegmentFileName(6));
    EXPECT_EQ((*w)->durable_seq(), 5u);
    EXPECT_EQ(Segments(root).size(), 1u) << "the half-made segment was left behind";
  }
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 8u);
  ASSERT_EQ(Segments(root).size(), 2u);
  EXPECT_EQ(Segments(root)[1].filename(), SegmentFileName(6));
  ScanResult end;
  auto recs = ReadAll(root, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 8));
}

}  // namespace
}  // namespace mb::journal
