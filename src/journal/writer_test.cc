// Tests of the journal writer and reader: round trips across segment rolls,
// reopening a journal to continue it, the fsync policies, and copying another
// journal's records as they were framed (AppendFramed).
#include <gtest/gtest.h>

#include <chrono>

#include "support/journal_test_support.h"

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

// The frames of every record of the journal at root (header and payload, as
// they are in the segment), read back with the reader.
std::vector<Bytes> Frames(const fs::path& root) {
  std::vector<Bytes> out;
  auto recs = ReadAll(root);
  EXPECT_TRUE(recs.ok()) << recs.status().message();
  if (!recs.ok()) return out;
  std::map<std::string, Bytes> segments;
  for (const Rec& r : *recs) {
    Bytes& seg = segments[r.segment];
    if (seg.empty()) seg = Load(root / "journal" / r.segment);
    out.emplace_back(seg.begin() + static_cast<std::ptrdiff_t>(r.offset),
                     seg.begin() + static_cast<std::ptrdiff_t>(r.end()));
  }
  return out;
}

uint64_t RecoveredHash(const fs::path& root, const History& h, uint64_t expected_seq) {
  engine::Engine eng(h.config);
  RecoveryReport report;
  const Status s = RecoverInto(root, &eng, Quiet(false), &report);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(report.recovered_seq, expected_seq);
  return report.state_hash;
}

TEST(JournalWriter, AppendFramedCopiesAnotherJournalByteForByte) {
  TempDir tmp;
  constexpr uint64_t kRecords = 200;
  constexpr std::size_t kGroup = 7;
  const History h = MakeHistory(3, kRecords);
  const JournalOptions options = Options(2048);
  auto sums = WriteHistory(tmp / "a", h, kRecords, options, kGroup);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_GE(Segments(tmp / "a").size(), 4u);
  const std::vector<Bytes> frames = Frames(tmp / "a");
  ASSERT_EQ(frames.size(), kRecords);
  const uint64_t hash_a = RecoveredHash(tmp / "a", h, kRecords);
  EXPECT_EQ(hash_a, h.hashes.back());

  // "framed": every record copied; "mixed": every other one, the rest
  // appended from their events — both share the pending buffer.
  for (const bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "mixed" : "framed");
    const fs::path root = tmp / (mixed ? "mixed" : "framed");
    {
      auto dir = DataDir::Open(root, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok()) << dir.status().message();
      auto scan = ScanJournal(*dir, {}, nullptr);
      ASSERT_TRUE(scan.ok()) << scan.status().message();
      auto w = JournalWriter::Open(*dir, options, h.config_hash, *scan);
      ASSERT_TRUE(w.ok()) << w.status().message();
      for (uint64_t s = 1; s <= kRecords; ++s) {
        if (mixed && s % 2 == 0) {
          EXPECT_EQ((*w)->Append(h.records[s - 1]), (*sums)[s - 1]) << s;
        } else {
          auto sum = (*w)->AppendFramed(frames[s - 1]);
          ASSERT_TRUE(sum.ok()) << s << ": " << sum.status().message();
          EXPECT_EQ(*sum, (*sums)[s - 1]) << s;
        }
        EXPECT_EQ((*w)->next_seq(), s + 1);
        if (s % kGroup == 0 || s == kRecords) {
          ASSERT_OK((*w)->Write());
          ASSERT_OK((*w)->Sync());
          EXPECT_EQ((*w)->durable_seq(), s);
        }
      }
    }
    // The same writes at the same places: the same segments, byte for byte
    // (headers included: same first sequences and configuration).
    EXPECT_EQ(Tree(root / "journal"), Tree(tmp / "a" / "journal"));
    EXPECT_EQ(Frames(root), frames);
    EXPECT_EQ(RecoveredHash(root, h, kRecords), hash_a);
  }
}

TEST(JournalWriter, AppendFramedRefusesWhatIsNotTheNextRecord) {
  TempDir tmp;
  const History h = MakeHistory(4, 12);
  auto sums = WriteHistory(tmp / "a", h, 12);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  const std::vector<Bytes> frames = Frames(tmp / "a");
  ASSERT_EQ(frames.size(), 12u);

  auto dir = DataDir::Open(tmp / "b", OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  auto scan = ScanJournal(*dir, {}, nullptr);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  auto opened = JournalWriter::Open(*dir, Options(), h.config_hash, *scan);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  JournalWriter& w = **opened;
  for (uint64_t s = 1; s <= 5; ++s) ASSERT_TRUE(w.AppendFramed(frames[s - 1]).ok()) << s;
  ASSERT_OK(w.Write());
  ASSERT_OK(w.Sync());
  ASSERT_TRUE(w.AppendFramed(frames[5]).ok());  // 6, pending
  ASSERT_EQ(w.next_seq(), 7u);

  const Bytes& next = frames[6];
  Bytes damaged = next;
  damaged.back() ^= std::byte{0x01};
  Bytes bad_sum = next;
  bad_sum[16] ^= std::byte{0x80};
  Bytes unknown_type = next;
  EncodeRecordHeader(
      static_cast<RecordType>(2), 7, std::span<const std::byte>(next).subspan(kRecordHeaderSize),
      std::span<std::byte, kRecordHeaderSize>(unknown_type.data(), kRecordHeaderSize));
  Bytes trailing = next;
  trailing.push_back(std::byte{0});
  Bytes two = next;
  two.insert(two.end(), frames[7].begin(), frames[7].end());
  // A valid record of sequence 7 with no events.
  Bytes empty(kRecordHeaderSize);
  EncodeRecordHeader(RecordType::kCommandOutcome, 7, {},
                     std::span<std::byte, kRecordHeaderSize>(empty.data(), kRecordHeaderSize));
  struct Case {
    const char* name;
    Bytes frame;
    StatusCode code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"duplicate", frames[5], StatusCode::kInvalidArgument, "sequence 6, the journal's next is 7"},
      {"gap", frames[7], StatusCode::kInvalidArgument, "sequence 8, the journal's next is 7"},
      {"stale", frames[0], StatusCode::kInvalidArgument, "sequence 1"},
      {"payload damaged", damaged, StatusCode::kCorruption, "checksum mismatch"},
      {"checksum damaged", bad_sum, StatusCode::kCorruption, "checksum mismatch"},
      {"unknown type", unknown_type, StatusCode::kCorruption, "unknown record type"},
      {"truncated payload", Bytes(next.begin(), next.end() - 1), StatusCode::kCorruption,
       "truncated record payload"},
      {"truncated header", Bytes(next.begin(), next.begin() + 10), StatusCode::kCorruption,
       "truncated record header"},
      {"nothing", Bytes{}, StatusCode::kCorruption, "truncated record header"},
      {"trailing byte", trailing, StatusCode::kInvalidArgument, "bytes given"},
      {"two records", two, StatusCode::kInvalidArgument, "bytes given"},
      {"no events", empty, StatusCode::kCorruption, "no events"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = w.AppendFramed(c.frame);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_HAS(r.status().message(), c.says);
    EXPECT_EQ(w.next_seq(), 7u);
  }
  // Nothing of the refused frames was buffered: the journal holds exactly
  // records 1..12 once the rest is copied.
  for (uint64_t s = 7; s <= 12; ++s) ASSERT_TRUE(w.AppendFramed(frames[s - 1]).ok()) << s;
  ASSERT_OK(w.Write());
  ASSERT_OK(w.Sync());
  EXPECT_EQ(w.durable_seq(), 12u);
  EXPECT_EQ(Tree(tmp / "b" / "journal"), Tree(tmp / "a" / "journal"));
  auto recs = ReadAll(tmp / "b");
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, *sums, 12));
}

}  // namespace
}  // namespace mb::journal
