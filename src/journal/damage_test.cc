// Tests of damage that is not a torn tail: flipped bytes, damaged or missing
// segments, wrong versions, foreign files, another configuration. Scans and
// recovery refuse it and change nothing on disk.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// Scans root read-only and read-write with repair; both must fail with
// kCorruption mentioning every needle, and the files must be unchanged.
::testing::AssertionResult RefusedUnchanged(const fs::path& root, uint64_t config_hash,
                                            const std::vector<std::string>& needles) {
  const auto before = Tree(root);
  for (const bool repair : {false, true}) {
    auto dir = DataDir::Open(root, repair ? OpenMode::kReadWrite : OpenMode::kReadOnly);
    if (!dir.ok()) return ::testing::AssertionFailure() << dir.status().message();
    ScanOptions so;
    so.repair = repair;
    so.config_hash = config_hash;
    auto scan = ScanJournal(*dir, so, nullptr);
    if (scan.ok()) {
      return ::testing::AssertionFailure()
             << "scan (repair " << repair << ") succeeded"
             << (scan->tail ? ", with a tail: " + Describe(*scan->tail) : std::string());
    }
    if (scan.status().code() != StatusCode::kCorruption) {
      return ::testing::AssertionFailure() << "not kCorruption: " << scan.status().message();
    }
    for (const std::string& n : needles) {
      if (!Has(scan.status().message(), n)) {
        return ::testing::AssertionFailure()
               << "\"" << scan.status().message() << "\" does not mention \"" << n << "\"";
      }
    }
  }
  if (Tree(root) != before) return ::testing::AssertionFailure() << "the files changed";
  return ::testing::AssertionSuccess();
}

// A journal of one engine session to damage: written at src_ and damaged in
// copies at root_ (or written and damaged in place).
class JournalDamage : public JournalTest {
 protected:
  // Writes every record of the session MakeHistory(seed, commands) to a new
  // journal at root; h_ describes it.
  void WriteJournal(const fs::path& root, uint64_t seed, std::size_t commands,
                    const JournalOptions& options = Options()) {
    h_ = MakeHistory(seed, commands);
    auto sums = WriteHistory(root, h_, commands, options);
    ASSERT_TRUE(sums.ok()) << sums.status().message();
  }

  // Recovers the data directory at root into a new engine of the session's
  // configuration.
  Status RecoverFresh(const fs::path& root, const RecoveryOptions& options,
                      OpenMode mode = OpenMode::kReadOnly) {
    engine::Engine eng(h_.config);
    RecoveryReport report;
    return RecoverInto(root, &eng, options, &report, mode);
  }

  const fs::path src_ = tmp_ / "src";
  const fs::path root_ = tmp_ / "case";
  History h_;
};

TEST_F(JournalDamage, FlippedByteInTheMiddleOfTheLastSegment) {
  const fs::path root = tmp_ / "j";
  ASSERT_NO_FATAL_FAILURE(WriteJournal(root, 7, 30));
  auto recs = ReadAll(root);
  ASSERT_TRUE(recs.ok());
  const fs::path seg = Segments(root).at(0);
  const Bytes clean = Load(seg);

  // Every byte of record 10, and a few of record 28 (two valid records after it).
  std::vector<uint64_t> where;
  for (uint64_t i = (*recs)[9].offset; i < (*recs)[9].end(); ++i) where.push_back(i);
  for (uint64_t i : {0u, 4u, 9u, 20u, 30u}) where.push_back((*recs)[27].offset + i);
  for (uint64_t at : where) {
    const Rec& hit = (*recs)[at < (*recs)[27].offset ? 9u : 27u];
    Bytes damaged = clean;
    damaged[at] ^= std::byte{0x20};
    Store(seg, damaged);
    const ::testing::AssertionResult r =
        RefusedUnchanged(root, h_.config_hash,
                         {seg.filename().string(), fmt::format("offset {}", hit.offset),
                          fmt::format("sequence {}", hit.seq), "not a torn tail"});
    if (!r) {
      ADD_FAILURE() << "byte " << at << " flipped: " << r.message();
      break;
    }
  }

  // Recover refuses it too, and changes nothing.
  Bytes damaged = clean;
  damaged[(*recs)[9].offset + 30] ^= std::byte{0x01};
  Store(seg, damaged);
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  const Status s = RecoverFresh(root, ro, OpenMode::kReadWrite);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
  EXPECT_EQ(Load(seg), damaged);
}

TEST_F(JournalDamage, DamageInANonLastSegmentIsNeverATornTail) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(src_, 8, 60, Options(1024)));
  ASSERT_GE(Segments(src_).size(), 3u);
  auto recs = ReadAll(src_);
  ASSERT_TRUE(recs.ok());
  const std::string seg0 = Segments(src_)[0].filename().string();
  const std::string seg1 = Segments(src_)[1].filename().string();
  const Rec* last0 = nullptr;  // the last record of the first segment
  for (const Rec& r : *recs) {
    if (r.segment == seg0) last0 = &r;
  }
  ASSERT_NE(last0, nullptr);

  {
    SCOPED_TRACE("a flipped byte in the last record of the first segment");
    CopyTree(src_, root_);
    Bytes b = Load(root_ / "journal" / seg0);
    b[last0->offset + kRecordHeaderSize + 5] ^= std::byte{0x10};
    Store(root_ / "journal" / seg0, b);
    EXPECT_TRUE(
        RefusedUnchanged(root_, h_.config_hash, {seg0, fmt::format("offset {}", last0->offset)}));
  }
  {
    SCOPED_TRACE("the first segment cut inside its last record");
    CopyTree(src_, root_);
    fs::resize_file(root_ / "journal" / seg0, last0->end() - 5);
    EXPECT_TRUE(
        RefusedUnchanged(root_, h_.config_hash, {seg0, fmt::format("offset {}", last0->offset)}));
  }
  {
    SCOPED_TRACE("the first segment cut at a record boundary (a whole record lost)");
    CopyTree(src_, root_);
    fs::resize_file(root_ / "journal" / seg0, last0->offset);
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {seg1, "missing"}));
  }
  {
    SCOPED_TRACE("a flipped byte in the header of the second segment");
    CopyTree(src_, root_);
    Bytes b = Load(root_ / "journal" / seg1);
    b[20] ^= std::byte{0x01};
    Store(root_ / "journal" / seg1, b);
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {seg1, "checksum"}));
  }
  {
    SCOPED_TRACE("the second segment cut to a partial header");
    CopyTree(src_, root_);
    fs::resize_file(root_ / "journal" / seg1, 10);
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {seg1, "shorter than a segment header"}));
  }
}

TEST_F(JournalDamage, WrongVersionBadMagicAndForeignFiles) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(src_, 9, 40, Options(1024)));
  const std::vector<fs::path> segs = Segments(src_);
  ASSERT_GE(segs.size(), 2u);
  const std::string last = segs.back().filename().string();

  // Rewrites bytes [at, at + 2) of a segment header as `value`, checksum redone.
  auto rewrite_u16 = [&](const fs::path& seg, std::size_t at, uint16_t value) {
    Bytes b = Load(seg);
    PutU16(b.data() + at, value);
    PutU64(b.data() + 32, XXH3_64bits(b.data(), 32));
    Store(seg, b);
  };
  {
    SCOPED_TRACE("format version 6");  // a version newer than this build's
    CopyTree(src_, root_);
    rewrite_u16(root_ / "journal" / last, 8, static_cast<uint16_t>(kSegmentFormatVersion + 1));
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {last, "version 6"}));
  }
  {
    SCOPED_TRACE("header size 48");
    CopyTree(src_, root_);
    rewrite_u16(root_ / "journal" / last, 10, 48);
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {last, "segment header size 48"}));
  }
  {
    SCOPED_TRACE("a foreign file with a segment name, after the journal");
    CopyTree(src_, root_);
    const std::string text = "This is not a journal segment, it is someone's notes.\n";
    const fs::path foreign = root_ / "journal" / SegmentFileName(41);
    std::ofstream(foreign) << text << text;
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {SegmentFileName(41), "bad magic"}));
  }
  {
    SCOPED_TRACE("a foreign file with a segment name, alone");
    fs::remove_all(root_);
    fs::create_directories(root_ / "journal");
    std::ofstream(root_ / "journal" / SegmentFileName(1)) << std::string(100, 'x');
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {"bad magic"}));
  }
  {
    SCOPED_TRACE("a segment whose name and header disagree");
    CopyTree(src_, root_);
    fs::rename(root_ / "journal" / last, root_ / "journal" / SegmentFileName(1000));
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {"the file name says 1000"}));
  }
  {
    SCOPED_TRACE("notes.txt in journal/");
    CopyTree(src_, root_);
    std::ofstream(root_ / "journal" / "notes.txt") << "hello\n";
    EXPECT_TRUE(RefusedUnchanged(root_, h_.config_hash, {"unexpected file notes.txt"}));
    const Status s = RecoverFresh(root_, Quiet());
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "notes.txt");
  }
  {
    SCOPED_TRACE("notes.txt in snapshots/");
    CopyTree(src_, root_);
    std::ofstream(root_ / "snapshots" / "notes.txt") << "hello\n";
    const auto before = Tree(root_);
    const Status s = RecoverFresh(root_, Quiet());
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "unexpected file notes.txt");
    EXPECT_EQ(Tree(root_), before);
  }
}

TEST_F(JournalDamage, MissingSegments) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(src_, 10, 60, Options(1024)));
  const std::vector<fs::path> segs = Segments(src_);
  ASSERT_GE(segs.size(), 3u);
  {
    SCOPED_TRACE("a middle segment deleted");
    CopyTree(src_, root_);
    fs::remove(root_ / "journal" / segs[1].filename());
    EXPECT_TRUE(
        RefusedUnchanged(root_, h_.config_hash, {segs[2].filename().string(), "records missing"}));
    const Status s = RecoverFresh(root_, Quiet(false));
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
    EXPECT_HAS(s.message(), "records missing");
  }
  {
    SCOPED_TRACE("the first segment deleted");
    CopyTree(src_, root_);
    fs::remove(root_ / "journal" / segs[0].filename());
    const auto before = Tree(root_);
    const Status s = RecoverFresh(root_, Quiet());
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
    EXPECT_HAS(s.message(), "segments are missing");
    EXPECT_EQ(Tree(root_), before);
  }
}

TEST_F(JournalDamage, ConfigHashMismatch) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal(tmp_.path(), 11, 30, Options(1024)));
  const engine::Engine other(TestConfig(/*maker_fee_bps=*/3));
  ASSERT_NE(other.ConfigHash(), h_.config_hash);
  EXPECT_TRUE(
      RefusedUnchanged(tmp_.path(), other.ConfigHash(),
                       {Segments(tmp_.path())[0].filename().string(), "another configuration"}));
  // 0 skips the check; the right hash passes.
  EXPECT_TRUE(ReadAll(tmp_.path()).ok());
  ScanOptions so;
  so.config_hash = h_.config_hash;
  EXPECT_TRUE(ReadAll(tmp_.path(), so).ok());

  const auto before = Tree(tmp_.path());
  engine::Engine eng(TestConfig(3));
  RecoveryReport report;
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  const Status s = RecoverInto(tmp_.path(), &eng, ro, &report, OpenMode::kReadWrite);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_HAS(s.message(), "another configuration");
  EXPECT_EQ(Tree(tmp_.path()), before);
}

}  // namespace
}  // namespace mb::journal
