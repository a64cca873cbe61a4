// Tests of the journal writer and reader: round trips across segment rolls,
// reopening a journal to continue it, and the fsync policies.
#include <gtest/gtest.h>

#include <chrono>

#include "journal/journal_test_support.h"

namespace mb::journal {
namespace {

TEST(JournalWriter, RoundTripAcrossSegmentRolls) {
  TempDir tmp;
  const History h = MakeHistory(1, 300);
  ASSERT_GT(h.trades, 20u);
  ASSERT_GT(h.cancels, 5u);
  auto sums = WriteHistory(tmp.path(), h, 300, Options(2048), 7);
  ASSERT_TRUE(sums.ok()) << sums.status().message();

  const std::vector<fs::path> segs = Segments(tmp.path());
  ASSERT_GE(segs.size(), 5u);
  ScanResult scan;
  ScanOptions so;
  so.config_hash = h.config_hash;
  auto recs = ReadAll(tmp.path(), so, &scan);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, *sums, 300));

  // DecodeOutcome gives back exactly the events appended.
  for (const Rec& r : *recs) {
    EventBuffer events;
    JournalRecord jr{r.seq, r.checksum, r.payload, nullptr, r.offset};
    ASSERT_OK(DecodeOutcome(jr, &events));
    ASSERT_EQ(events.size(), h.records[r.seq - 1].size()) << r.seq;
    ASSERT_EQ(Encoded(events), Encoded(h.records[r.seq - 1])) << r.seq;
  }

  EXPECT_EQ(scan.segments, segs.size());
  EXPECT_EQ(scan.first_seq, 1u);
  EXPECT_EQ(scan.last_seq, 300u);
  EXPECT_EQ(scan.last_checksum, sums->back());
  EXPECT_EQ(scan.records_checked, 300u);
  EXPECT_EQ(scan.records_delivered, 300u);
  EXPECT_FALSE(scan.tail.has_value());
  EXPECT_EQ(scan.last_segment, segs.back());
  EXPECT_EQ(scan.last_segment_size, fs::file_size(segs.back()));
  uint64_t total = 0;
  for (const fs::path& p : segs) total += fs::file_size(p);
  EXPECT_EQ(scan.bytes, total);

  // Each segment: named after its first record, a header saying the same,
  // records back to back from offset 40 to the end of the file; every segment
  // but the last reached the roll size.
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::string name = segs[i].filename().string();
    uint64_t first = 0;
    ASSERT_TRUE(ParseSegmentFileName(name, &first)) << name;
    const Bytes bytes = Load(segs[i]);
    auto header = DecodeSegmentHeader(bytes, name);
    ASSERT_TRUE(header.ok()) << header.status().message();
    EXPECT_EQ(header->first_seq, first);
    EXPECT_EQ(header->config_hash, h.config_hash);
    uint64_t expected_offset = kSegmentHeaderSize;
    uint64_t expected_seq = first;
    for (const Rec& r : *recs) {
      if (r.segment != name) continue;
      EXPECT_EQ(r.seq, expected_seq++) << name;
      EXPECT_EQ(r.offset, expected_offset) << name;
      expected_offset = r.end();
    }
    EXPECT_GT(expected_seq, first) << name << " holds no record";
    EXPECT_EQ(expected_offset, bytes.size()) << name;
    if (i + 1 < segs.size()) {
      EXPECT_GE(bytes.size(), 2048u) << name;
    }
  }

  // Delivery from a later sequence, skipping the records of earlier segments.
  so.deliver_from = 150;
  so.check_all = false;
  auto later = ReadAll(tmp.path(), so, &scan);
  ASSERT_TRUE(later.ok()) << later.status().message();
  ASSERT_EQ(later->size(), 151u);
  EXPECT_EQ(later->front().seq, 150u);
  EXPECT_EQ(later->back().seq, 300u);
  EXPECT_EQ(scan.last_seq, 300u);
  EXPECT_EQ(scan.last_checksum, sums->back());
}

TEST(JournalWriter, ReopenContinuesTheLastSegment) {
  TempDir tmp;
  const History h = MakeHistory(2, 60);
  auto first = WriteHistory(tmp.path(), h, 20, Options(1 << 20));
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::vector<fs::path> segs = Segments(tmp.path());
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].filename(), SegmentFileName(1));
  const uint64_t size20 = fs::file_size(segs[0]);

  std::vector<uint64_t> sums = *first;
  {
    auto dir = DataDir::Open(tmp.path(), OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    ScanOptions so;
    so.repair = true;
    so.config_hash = h.config_hash;
    auto scan = ScanJournal(*dir, so, nullptr);
    ASSERT_TRUE(scan.ok()) << scan.status().message();
    EXPECT_EQ(scan->last_seq, 20u);
    EXPECT_EQ(scan->last_checksum, sums.back());
    EXPECT_EQ(scan->last_segment, segs[0]);
    EXPECT_EQ(scan->last_segment_size, size20);
    auto w = JournalWriter::Open(*dir, Options(1 << 20), h.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ((*w)->next_seq(), 21u);
    EXPECT_EQ((*w)->written_seq(), 20u);
    EXPECT_EQ((*w)->durable_seq(), 20u);
    EXPECT_EQ((*w)->bytes_on_disk(), size20);
    for (uint64_t s = 21; s <= 40; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    ASSERT_OK((*w)->Write());
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 40u);
    EXPECT_EQ((*w)->bytes_on_disk(), fs::file_size(segs[0]));
  }
  segs = Segments(tmp.path());
  ASSERT_EQ(segs.size(), 1u) << "reopening must append to the last segment";
  EXPECT_GT(fs::file_size(segs[0]), size20);
  auto recs = ReadAll(tmp.path());
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 40));

  // A third session with a tiny roll size: every group starts a segment named
  // after its first record.
  auto third = AppendHistory(tmp.path(), h, 41, 60, Options(64), 5);
  ASSERT_TRUE(third.ok()) << third.status().message();
  sums.insert(sums.end(), third->begin(), third->end());
  segs = Segments(tmp.path());
  std::vector<std::string> names;
  for (const fs::path& p : segs) names.push_back(p.filename().string());
  EXPECT_EQ(names,
            (std::vector<std::string>{SegmentFileName(1), SegmentFileName(41), SegmentFileName(46),
                                      SegmentFileName(51), SegmentFileName(56)}));
  recs = ReadAll(tmp.path());
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 60));
}

TEST(JournalWriter, DurableSequenceFollowsThePolicy) {
  TempDir tmp;
  const History h = MakeHistory(2, 6);
  const auto now = std::chrono::steady_clock::now;
  struct Case {
    const char* policy;
    bool durable_on_write;
  };
  for (const Case& c : {Case{"fsync", false}, Case{"none", true}, Case{"interval:50", false}}) {
    SCOPED_TRACE(c.policy);
    const fs::path root = tmp / c.policy;
    JournalOptions o;
    ASSERT_OK(ParseFsyncPolicy(c.policy, &o));
    EXPECT_EQ(DescribeFsyncPolicy(o), c.policy);
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto scan = ScanJournal(*dir, {}, nullptr);
    ASSERT_TRUE(scan.ok());
    auto w = JournalWriter::Open(*dir, o, h.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_FALSE((*w)->SyncDue(now()));
    EXPECT_EQ((*w)->NextSyncDeadline(), std::chrono::steady_clock::time_point::max());
    for (uint64_t s = 1; s <= 3; ++s) (void)(*w)->Append(h.records[s - 1]);
    EXPECT_EQ((*w)->next_seq(), 4u);
    EXPECT_EQ((*w)->written_seq(), 0u);
    EXPECT_EQ((*w)->durable_seq(), 0u);
    const auto before = now();
    ASSERT_OK((*w)->Write());
    EXPECT_EQ((*w)->written_seq(), 3u);
    EXPECT_EQ((*w)->durable_seq(), c.durable_on_write ? 3u : 0u);
    EXPECT_EQ((*w)->SyncDue(now()), o.policy == FsyncPolicy::kFsync);
    if (o.policy == FsyncPolicy::kInterval) {
      const auto deadline = (*w)->NextSyncDeadline();
      EXPECT_GE(deadline, before + std::chrono::milliseconds(50));
      EXPECT_LE(deadline, now() + std::chrono::milliseconds(50));
      EXPECT_FALSE((*w)->SyncDue(deadline - std::chrono::milliseconds(1)));
      EXPECT_TRUE((*w)->SyncDue(deadline));
    }
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 3u);
    EXPECT_FALSE((*w)->SyncDue(now() + std::chrono::hours(1)));
  }
  JournalOptions o;
  for (const char* bad :
       {"interval:0", "interval:60001", "interval:", "interval:5ms", "always", "FSYNC", ""}) {
    const Status s = ParseFsyncPolicy(bad, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  ASSERT_OK(ParseFsyncPolicy("interval:60000", &o));
  EXPECT_EQ(o.interval_ms, 60000u);
}

}  // namespace
}  // namespace mb::journal
