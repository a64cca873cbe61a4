// Tests of snapshot files: layout, round trip and pruning, and damaged files.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// Each test in a fresh directory (tmp_).
class JournalSnapshot : public JournalTest {};

TEST_F(JournalSnapshot, RoundTripAndPruning) {
  const History h = MakeHistory(12, 120);
  const fs::path root = tmp_ / "data";
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    const engine::Engine e = EngineAt(h, 100);
    const engine::EngineImage image = e.ExportImage();
    SnapshotMeta meta;
    meta.record_checksum = 0xfeedface12345678;
    auto path = WriteSnapshot(*dir, image, &meta, 3, 5);
    ASSERT_TRUE(path.ok()) << path.status().message();
    EXPECT_EQ(*path, root / "snapshots" / SnapshotFileName(100));
    EXPECT_EQ(meta.seq, 100u);
    EXPECT_EQ(meta.state_hash, e.StateHash());
    EXPECT_EQ(meta.state_hash, h.hashes[99]);
    EXPECT_EQ(meta.config_hash, h.config_hash);
    EXPECT_EQ(meta.record_checksum, 0xfeedface12345678u);
    const Bytes raw = codec::EncodeImage(image);
    EXPECT_EQ(meta.raw_size, raw.size());
    const Bytes file = Load(*path);
    ASSERT_EQ(file.size(), kSnapshotHeaderSize + meta.compressed_size);
    EXPECT_LT(meta.compressed_size, meta.raw_size);
    const std::byte* p = file.data();
    EXPECT_EQ(std::memcmp(p, "MBSNAPZ1", 8), 0);
    EXPECT_EQ(GetU16(p + 8), 1u);
    EXPECT_EQ(p[10], std::byte{1});  // zstd
    EXPECT_EQ(p[11], std::byte{0});
    EXPECT_EQ(GetU32(p + 12), 0u);
    EXPECT_EQ(GetU64(p + 16), 100u);
    EXPECT_EQ(GetU64(p + 24), meta.state_hash);
    EXPECT_EQ(GetU64(p + 32), meta.config_hash);
    EXPECT_EQ(GetU64(p + 40), meta.record_checksum);
    EXPECT_EQ(GetU64(p + 48), meta.raw_size);
    EXPECT_EQ(GetU64(p + 56), meta.compressed_size);
    EXPECT_EQ(GetU64(p + 64), XXH3_64bits(p + 80, meta.compressed_size));
    EXPECT_EQ(GetU64(p + 72), XXH3_64bits(p, 72));
    EXPECT_FALSE(fs::exists(root / "snapshots" / (SnapshotFileName(100) + ".tmp")));

    auto loaded = ReadSnapshot(*path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->meta.seq, meta.seq);
    EXPECT_EQ(loaded->meta.state_hash, meta.state_hash);
    EXPECT_EQ(loaded->meta.config_hash, meta.config_hash);
    EXPECT_EQ(loaded->meta.record_checksum, meta.record_checksum);
    EXPECT_EQ(loaded->meta.raw_size, meta.raw_size);
    EXPECT_EQ(loaded->meta.compressed_size, meta.compressed_size);
    EXPECT_EQ(engine::HashImage(loaded->image), meta.state_hash);
    EXPECT_EQ(codec::EncodeImage(loaded->image), raw);
    engine::Engine restored(h.config);
    ASSERT_OK(restored.Restore(loaded->image));
    EXPECT_EQ(restored.StateHash(), h.hashes[99]);
  }

  // keep = 3: the newest three stay, whatever order they were written in.
  const fs::path pr = tmp_ / "prune";
  for (uint64_t seq : {20u, 60u, 40u, 80u, 10u, 100u}) {
    auto path = Snapshot(pr, h, seq, 0, 3);
    ASSERT_TRUE(path.ok()) << path.status().message();
  }
  // An interrupted write's leftover is not a snapshot.
  std::ofstream(pr / "snapshots" / (SnapshotFileName(120) + ".tmp")) << "partial";
  auto dir = DataDir::Open(pr, OpenMode::kReadOnly);
  ASSERT_TRUE(dir.ok());
  auto listed = dir->ListSnapshots();
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  std::vector<uint64_t> seqs;
  for (const FileEntry& f : *listed) seqs.push_back(f.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{60, 80, 100}));
  ASSERT_TRUE(Snapshot(pr, h, 110, 0, 1).ok());
  listed = dir->ListSnapshots();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].seq, 110u);
}

TEST_F(JournalSnapshot, DamagedFilesAreRefused) {
  const History h = MakeHistory(13, 80);
  auto path = Snapshot(tmp_ / "data", h, 80, 1);
  ASSERT_TRUE(path.ok()) << path.status().message();
  const Bytes clean = Load(*path);
  ASSERT_TRUE(ReadSnapshot(*path).ok());

  struct Case {
    std::string name;
    Bytes bytes;
    std::string needle;
  };
  std::vector<Case> cases;
  cases.push_back({"one byte short", Bytes(clean.begin(), clean.end() - 1), "truncated"});
  cases.push_back({"cut inside the header", Bytes(clean.begin(), clean.begin() + 50),
                   "shorter than a snapshot header"});
  cases.push_back({"empty", Bytes{}, "shorter than a snapshot header"});
  Bytes b = clean;
  b.push_back(std::byte{0});
  cases.push_back({"one byte too many", b, "truncated"});
  b = clean;
  b[kSnapshotHeaderSize + (clean.size() - kSnapshotHeaderSize) / 2] ^= std::byte{0x08};
  cases.push_back({"a flipped payload byte", b, "payload checksum"});
  b = clean;
  b[0] = std::byte{'X'};
  cases.push_back({"bad magic", b, "bad magic"});
  b = clean;
  b[17] ^= std::byte{0x01};
  cases.push_back({"a flipped header byte", b, "header checksum"});
  b = clean;
  PutU16(b.data() + 8, 2);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"version 2", b, "version 2"});
  b = clean;
  b[10] = std::byte{2};
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"unknown compression", b, "compression 2"});
  // Damage behind valid checksums: each deeper check still catches it.
  b = clean;
  b[kSnapshotHeaderSize + (clean.size() - kSnapshotHeaderSize) / 2] ^= std::byte{0x08};
  PutU64(b.data() + 64, XXH3_64bits(b.data() + 80, b.size() - 80));
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"a flipped payload byte, checksums redone", b, ""});
  b = clean;
  PutU64(b.data() + 24, GetU64(b.data() + 24) + 1);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another state hash, checksum redone", b, "state hash"});
  b = clean;
  PutU64(b.data() + 16, 79);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another sequence, checksum redone", b, "sequence"});
  b = clean;
  PutU64(b.data() + 48, GetU64(b.data() + 48) + 1);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another raw size, checksum redone", b, "size"});

  const fs::path file = tmp_ / "data" / "snapshots" / SnapshotFileName(80);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Store(file, c.bytes);
    auto loaded = ReadSnapshot(file);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption) << loaded.status().message();
    EXPECT_HAS(loaded.status().message(), file.string());
    EXPECT_HAS(loaded.status().message(), c.needle);
    EXPECT_EQ(Load(file), c.bytes);
  }
  EXPECT_EQ(ReadSnapshot(tmp_ / "data" / "snapshots" / SnapshotFileName(7)).status().code(),
            StatusCode::kIoError);
}

}  // namespace
}  // namespace mb::journal
