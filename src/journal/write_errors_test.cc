// Tests of write errors from the kernel (RLIMIT_FSIZE): a failed write or
// roll leaves the journal at a record boundary and is retried.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// A journal writer on a new data directory, tmp_/data, appending the records
// of one engine session.
class JournalWriteErrors : public JournalTest {
 protected:
  // Opens the writer of a new journal for the session MakeHistory(seed,
  // commands).
  void OpenWriter(uint64_t seed, std::size_t commands, const JournalOptions& options) {
    h_ = MakeHistory(seed, commands);
    auto dir = DataDir::Open(root_, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    dir_.emplace(std::move(*dir));
    auto scan = ScanJournal(*dir_, {}, nullptr);
    ASSERT_TRUE(scan.ok());
    auto w = JournalWriter::Open(*dir_, options, h_.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    w_ = std::move(*w);
  }

  // Appends records first..last of the session; their checksums go to sums_.
  void Append(uint64_t first, uint64_t last) {
    for (uint64_t s = first; s <= last; ++s) sums_.push_back(w_->Append(h_.records[s - 1]));
  }

  const fs::path root_ = tmp_ / "data";
  History h_;
  std::vector<uint64_t> sums_;  // sums_[s - 1]: the checksum Append gave record s
  std::optional<DataDir> dir_;
  std::unique_ptr<JournalWriter> w_;
};

TEST_F(JournalWriteErrors, FailedWritesLeaveARecordBoundaryAndAreRetried) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(21, 40, Options()));
  Append(1, 10);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  const fs::path seg = Segments(root_).at(0);
  const uint64_t good = fs::file_size(seg);
  ASSERT_EQ(w_->bytes_on_disk(), good);

  {
    FileSizeLimit limit;
    // Room for part of the next group: the first write() is short, the next
    // fails with EFBIG.
    ASSERT_TRUE(limit.Set(good + 100));
    Append(11, 30);
    Status s = w_->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), seg.string());
    EXPECT_HAS(s.message(), "File too large");
    EXPECT_EQ(w_->written_seq(), 10u);
    EXPECT_EQ(w_->durable_seq(), 10u);
    EXPECT_EQ(w_->next_seq(), 31u);
    EXPECT_EQ(fs::file_size(seg), good) << "not cut back to the record boundary";
    EXPECT_EQ(w_->bytes_on_disk(), good);
    // Sync has nothing to make durable.
    ASSERT_OK(w_->Sync());
    EXPECT_EQ(w_->durable_seq(), 10u);

    // Still failing: the same again; more records queue behind.
    Append(31, 35);
    s = w_->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_EQ(w_->durable_seq(), 10u);
    EXPECT_EQ(fs::file_size(seg), good);

    // Meanwhile the journal on disk is whole: ten records, no tail.
    ScanResult mid;
    auto recs = ReadAll(root_, {}, &mid);
    ASSERT_TRUE(recs.ok()) << recs.status().message();
    EXPECT_EQ(mid.last_seq, 10u);
    EXPECT_FALSE(mid.tail.has_value());
  }
  // The limit is lifted: the retry writes everything, once.
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 35u);
  EXPECT_EQ(w_->bytes_on_disk(), fs::file_size(seg));
  Append(36, 40);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 40u);

  ScanResult end;
  auto recs = ReadAll(root_, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h_, sums_, 40));
  EXPECT_EQ(end.bytes, fs::file_size(seg));
}

TEST_F(JournalWriteErrors, FailedRollIsRetried) {
  ASSERT_NO_FATAL_FAILURE(OpenWriter(22, 20, Options(256)));
  Append(1, 5);
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  ASSERT_EQ(Segments(root_).size(), 1u);
  ASSERT_GE(fs::file_size(Segments(root_)[0]), 256u);  // the next Write rolls

  {
    FileSizeLimit limit;
    ASSERT_TRUE(limit.Set(20));  // not even a whole segment header fits
    Append(6, 8);
    const Status s = w_->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), SegmentFileName(6));
    EXPECT_EQ(w_->durable_seq(), 5u);
    EXPECT_EQ(Segments(root_).size(), 1u) << "the half-made segment was left behind";
  }
  ASSERT_OK(w_->Write());
  ASSERT_OK(w_->Sync());
  EXPECT_EQ(w_->durable_seq(), 8u);
  ASSERT_EQ(Segments(root_).size(), 2u);
  EXPECT_EQ(Segments(root_)[1].filename(), SegmentFileName(6));
  ScanResult end;
  auto recs = ReadAll(root_, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h_, sums_, 8));
}

}  // namespace
}  // namespace mb::journal
