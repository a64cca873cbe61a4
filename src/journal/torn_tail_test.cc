// Tests of torn tails: a journal cut at every byte of its last records,
// zero-filled tails and holes, partial segment headers; a read-write open
// repairs them and the writer continues the journal.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// The journal of `bytes` (one segment) cut at `cut`: a read-write open repairs
// it to the last whole record, a writer continues it with the next record, and
// the result is the original journal's prefix up to that record.
::testing::AssertionResult RepairsTornCut(const fs::path& root, const Bytes& bytes, uint64_t cut,
                                          const std::vector<Rec>& recs, const History& h) {
  const std::string name = SegmentFileName(1);
  fs::remove_all(root);
  fs::create_directories(root / "journal");
  const fs::path seg = root / "journal" / name;
  Store(seg, std::span(bytes).first(cut));

  // k: the records wholly before the cut.
  uint64_t k = 0;
  while (k < recs.size() && recs[k].end() <= cut) ++k;
  const uint64_t keep = k == 0 ? kSegmentHeaderSize : recs[k - 1].end();

  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  if (!dir.ok()) return ::testing::AssertionFailure() << dir.status().message();
  ScanOptions so;
  so.repair = true;
  so.config_hash = h.config_hash;
  ScanResult scan;
  auto got = ReadAll(*dir, so, &scan);
  if (!got.ok()) return ::testing::AssertionFailure() << got.status().message();
  if (got->size() != k || scan.last_seq != k) {
    return ::testing::AssertionFailure()
           << got->size() << " records, last_seq " << scan.last_seq << ", expected " << k;
  }
  for (uint64_t s = 1; s <= k; ++s) {
    if ((*got)[s - 1].checksum != recs[s - 1].checksum) {
      return ::testing::AssertionFailure() << "record " << s << " differs";
    }
  }
  if (cut == keep) {
    if (scan.tail) return ::testing::AssertionFailure() << "damage reported at a record boundary";
  } else {
    if (!scan.tail) return ::testing::AssertionFailure() << "no tail damage reported";
    const TailDamage& t = *scan.tail;
    if (t.segment != seg || t.offset != keep || t.bytes != cut - keep || t.records < 1 ||
        !t.repaired || t.reason.empty()) {
      return ::testing::AssertionFailure() << "tail: " << Describe(t) << " (expected " << cut - keep
                                           << " bytes after " << keep << ")";
    }
  }
  if (fs::file_size(seg) != keep) {
    return ::testing::AssertionFailure()
           << "file is " << fs::file_size(seg) << " bytes, not " << keep;
  }
  if (scan.last_segment_size != keep || scan.bytes != keep) {
    return ::testing::AssertionFailure() << "scan sizes " << scan.last_segment_size;
  }
  // Continue with the next record.
  auto w = JournalWriter::Open(*dir, Options(1 << 20, FsyncPolicy::kNone), h.config_hash, scan);
  if (!w.ok()) return ::testing::AssertionFailure() << w.status().message();
  if ((*w)->next_seq() != k + 1) return ::testing::AssertionFailure() << "next_seq";
  const uint64_t sum = (*w)->Append(h.records[k]);
  Status s = (*w)->Write();
  if (s.ok()) s = (*w)->Sync();
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  w->reset();
  if (k < recs.size() && sum != recs[k].checksum) {
    return ::testing::AssertionFailure() << "appended record's checksum differs";
  }
  ScanResult again;
  ScanOptions plain;
  plain.config_hash = h.config_hash;
  auto all = ReadAll(root, plain, &again);
  if (!all.ok()) return ::testing::AssertionFailure() << all.status().message();
  if (again.tail || again.last_seq != k + 1 || all->size() != k + 1) {
    return ::testing::AssertionFailure() << "re-scan: last_seq " << again.last_seq;
  }
  const Bytes now = Load(seg);
  if (now != Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(recs[k].end()))) {
    return ::testing::AssertionFailure() << "the repaired and continued file is not the original "
                                            "journal's prefix";
  }
  return ::testing::AssertionSuccess();
}

// Journals of one engine session, written in the test's directory, to cut
// and repair.
class JournalTornTail : public JournalTest {
 protected:
  // Writes records 1..records of the session MakeHistory(seed, commands) to a
  // new journal at root; h_ and sums_ describe it.
  void WriteJournal(const fs::path& root, uint64_t seed, std::size_t commands, uint64_t records,
                    const JournalOptions& options = Options()) {
    h_ = MakeHistory(seed, commands);
    auto sums = WriteHistory(root, h_, records, options);
    ASSERT_TRUE(sums.ok()) << sums.status().message();
    sums_ = std::move(*sums);
  }

  History h_;
  std::vector<uint64_t> sums_;  // sums_[s - 1]: the checksum of record s
};

TEST_F(JournalTornTail, EveryCutInTheLastThreeRecords) {
  const fs::path src = tmp_ / "src";
  // Records 1..31 are written for the expected bytes; the journal under test
  // is records 1..30 (31 is what the writer appends after the deepest cut).
  ASSERT_NO_FATAL_FAILURE(WriteJournal(src, 4, 31, 31, Options(1 << 20)));
  ASSERT_EQ(Segments(src).size(), 1u);
  auto recs = ReadAll(src);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  ASSERT_EQ(recs->size(), 31u);
  const Bytes full = Load(Segments(src)[0]);
  const uint64_t end30 = (*recs)[29].end();
  const uint64_t from = (*recs)[27].offset;  // the 3rd-last record of 30
  ASSERT_GT(end30 - from, 3 * kRecordHeaderSize);

  uint64_t cuts = 0;
  for (uint64_t cut = from; cut <= end30; ++cut, ++cuts) {
    const ::testing::AssertionResult r = RepairsTornCut(tmp_ / "cut", full, cut, *recs, h_);
    if (!r) {
      ADD_FAILURE() << "cut at offset " << cut << " (records 28..30 span " << from << ".." << end30
                    << "): " << r.message();
      break;
    }
  }
  EXPECT_EQ(cuts, end30 - from + 1);
}

TEST_F(JournalTornTail, ZeroFilledTail) {
  const fs::path src = tmp_ / "src";
  ASSERT_NO_FATAL_FAILURE(WriteJournal(src, 5, 11, 11));
  auto recs = ReadAll(src);
  ASSERT_TRUE(recs.ok());
  const Bytes full = Load(Segments(src)[0]);
  const uint64_t end10 = (*recs)[9].end();

  for (uint64_t zeros : {1u, 10u, 24u, 25u, 4096u}) {
    SCOPED_TRACE(fmt::format("{} zero bytes", zeros));
    const fs::path root = tmp_ / "z";
    fs::remove_all(root);
    fs::create_directories(root / "journal");
    const fs::path seg = root / "journal" / SegmentFileName(1);
    Bytes bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(end10));
    bytes.resize(end10 + zeros);
    Store(seg, bytes);

    // Found, not cut, by a read-only scan.
    ScanResult scan;
    auto ro = ReadAll(root, {}, &scan);
    ASSERT_TRUE(ro.ok()) << ro.status().message();
    EXPECT_EQ(scan.last_seq, 10u);
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_FALSE(scan.tail->repaired);
    EXPECT_EQ(fs::file_size(seg), end10 + zeros);

    // Cut by a repairing one, and the journal continues.
    {
      auto dir = DataDir::Open(root, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok());
      ScanOptions so;
      so.repair = true;
      auto rw = ReadAll(*dir, so, &scan);
      ASSERT_TRUE(rw.ok()) << rw.status().message();
      ASSERT_TRUE(scan.tail.has_value());
      EXPECT_EQ(scan.tail->offset, end10);
      EXPECT_EQ(scan.tail->bytes, zeros);
      EXPECT_GE(scan.tail->records, 1u);
      EXPECT_TRUE(scan.tail->repaired);
      EXPECT_EQ(scan.last_seq, 10u);
      EXPECT_EQ(fs::file_size(seg), end10);
      auto w = JournalWriter::Open(*dir, Options(), h_.config_hash, scan);
      ASSERT_TRUE(w.ok()) << w.status().message();
      EXPECT_EQ((*w)->Append(h_.records[10]), sums_[10]);
      ASSERT_OK((*w)->Write());
      ASSERT_OK((*w)->Sync());
    }
    auto again = ReadAll(root, {}, &scan);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_FALSE(scan.tail.has_value());
    EXPECT_TRUE(HoldsRecords(*again, h_, sums_, 11));
    EXPECT_EQ(Load(seg), full);
  }
}

// Pages written back out of order when the machine stopped: a zero-filled
// hole with whole records after it. Nothing after the hole was ever covered
// by an fdatasync, so it is a torn tail too (cut at the hole); the same bytes
// non-zero are damage (JournalDamage tests).
TEST_F(JournalTornTail, ZeroHoleBeforeLaterRecordsIsATornTail) {
  const fs::path root = tmp_ / "hole";
  ASSERT_NO_FATAL_FAILURE(WriteJournal(root, 9, 30, 30));
  auto recs = ReadAll(root);
  ASSERT_TRUE(recs.ok());
  const fs::path seg = Segments(root)[0];
  Bytes bytes = Load(seg);
  const Rec& r20 = (*recs)[19];  // sequence 20
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(r20.offset),
            bytes.begin() + static_cast<std::ptrdiff_t>(r20.end()), std::byte{0});
  Store(seg, bytes);

  ScanResult scan;
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_TRUE(Has(scan.tail->reason, "a hole left by out-of-order writeback"))
        << scan.tail->reason;
    EXPECT_EQ(scan.tail->offset, r20.offset);
    EXPECT_EQ(scan.last_seq, 19u);
    EXPECT_EQ(fs::file_size(seg), r20.offset);
  }
  // One non-zero byte in the hole makes it damage: refused, file unchanged.
  const fs::path root2 = tmp_ / "hole2";
  auto sums2 = WriteHistory(root2, h_, 30);
  ASSERT_TRUE(sums2.ok());
  const fs::path seg2 = Segments(root2)[0];
  Bytes bytes2 = Load(seg2);
  std::fill(bytes2.begin() + static_cast<std::ptrdiff_t>(r20.offset),
            bytes2.begin() + static_cast<std::ptrdiff_t>(r20.end()), std::byte{0});
  bytes2[r20.offset + 30] = std::byte{7};
  Store(seg2, bytes2);
  auto dir2 = DataDir::Open(root2, OpenMode::kReadWrite);
  ASSERT_TRUE(dir2.ok());
  ScanOptions so2;
  so2.repair = true;
  auto bad = ReadAll(*dir2, so2, &scan);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "refusing to skip it")) << bad.status().message();
  EXPECT_EQ(Load(seg2), bytes2);
}

TEST_F(JournalTornTail, PartialSegmentHeaderIsRemoved) {
  const fs::path root = tmp_ / "multi";
  ASSERT_NO_FATAL_FAILURE(WriteJournal(root, 6, 45, 40, Options(1024)));
  const std::vector<fs::path> segs = Segments(root);
  ASSERT_GE(segs.size(), 2u);

  std::array<std::byte, kSegmentHeaderSize> header{};
  EncodeSegmentHeader({kSegmentFormatVersion, 41, h_.config_hash}, header);
  const fs::path partial = root / "journal" / SegmentFileName(41);
  Store(partial, std::span(header).first(10));

  ScanResult scan;
  auto ro = ReadAll(root, {}, &scan);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  ASSERT_TRUE(scan.tail.has_value());
  EXPECT_EQ(scan.tail->segment, partial);
  EXPECT_EQ(scan.tail->bytes, 10u);
  EXPECT_FALSE(scan.tail->repaired);
  EXPECT_TRUE(fs::exists(partial));
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    so.config_hash = h_.config_hash;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_TRUE(scan.tail->repaired);
    EXPECT_FALSE(fs::exists(partial));
    EXPECT_EQ(scan.last_seq, 40u);
    EXPECT_EQ(scan.last_checksum, sums_.back());
    EXPECT_EQ(scan.last_segment, segs.back());
    EXPECT_EQ(scan.last_segment_size, fs::file_size(segs.back()));
  }
  auto more = AppendHistory(root, h_, 41, 45, Options(1024));
  ASSERT_TRUE(more.ok()) << more.status().message();
  sums_.insert(sums_.end(), more->begin(), more->end());
  auto all = ReadAll(root, {}, &scan);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_FALSE(scan.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*all, h_, sums_, 45));

  // A last segment of zero bytes only (a filesystem that showed the new size
  // before the data after a crash) holds nothing: the tail, removed likewise.
  {
    const std::vector<std::byte> zeros(4096, std::byte{0});
    const fs::path zeroed = root / "journal" / SegmentFileName(46);
    Store(zeroed, zeros);
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_EQ(scan.tail->reason, "segment holds only zero bytes");
    EXPECT_FALSE(fs::exists(zeroed));
    EXPECT_EQ(scan.last_seq, 45u);
  }

  // The only segment, empty or with a partial header: removed; the journal
  // starts again at sequence 1.
  for (uint64_t size : {0u, 10u, 39u}) {
    SCOPED_TRACE(fmt::format("{} header bytes", size));
    const fs::path only = tmp_ / "only";
    fs::remove_all(only);
    fs::create_directories(only / "journal");
    EncodeSegmentHeader({kSegmentFormatVersion, 1, h_.config_hash}, header);
    Store(only / "journal" / SegmentFileName(1), std::span(header).first(size));
    {
      auto dir = DataDir::Open(only, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok());
      ScanOptions so;
      so.repair = true;
      auto s = ScanJournal(*dir, so, nullptr);
      ASSERT_TRUE(s.ok()) << s.status().message();
      ASSERT_TRUE(s->tail.has_value());
      EXPECT_TRUE(s->tail->repaired);
      EXPECT_EQ(s->last_seq, 0u);
      EXPECT_EQ(s->segments, 0u);
      EXPECT_TRUE(s->last_segment.empty());
      EXPECT_TRUE(Segments(only).empty());
    }
    auto first = WriteHistory(only, h_, 3);
    ASSERT_TRUE(first.ok()) << first.status().message();
    auto recs = ReadAll(only);
    ASSERT_TRUE(recs.ok()) << recs.status().message();
    EXPECT_TRUE(HoldsRecords(*recs, h_, *first, 3));
  }
}

}  // namespace
}  // namespace mb::journal
