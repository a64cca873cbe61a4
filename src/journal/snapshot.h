// Snapshot files: the whole engine state at a sequence, zstd-compressed,
// written atomically (temporary file, fsync, rename, directory fsync); the
// newest `keep` are kept.
//
// A snapshot also records the checksum of the journal record at its sequence,
// so recovery can tell a snapshot of this journal from one of another (the
// "snapshot and journal disagree" case), and the state hash, so a restored
// image that hashes differently is refused.
//
// Thread safety: plain functions; one writer per data directory.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/status.h"
#include "engine/image.h"
#include "journal/data_dir.h"

namespace mb::journal {

inline constexpr std::array<char, 8> kSnapshotMagic = {'M', 'B', 'S', 'N', 'A', 'P', 'Z', '1'};
inline constexpr uint16_t kSnapshotFormatVersion = 1;
inline constexpr std::size_t kSnapshotHeaderSize = 80;

struct SnapshotMeta {
  uint64_t seq = 0;         // the image's last_sequence
  uint64_t state_hash = 0;  // engine::HashImage(image)
  uint64_t config_hash = 0;
  uint64_t record_checksum = 0;  // checksum of journal record `seq`
  uint64_t raw_size = 0;         // codec image bytes
  uint64_t compressed_size = 0;
};

// Encodes, compresses and writes the snapshot of `image`; then removes all but
// the newest `keep` snapshots. Fills *meta (sequence, hashes, sizes) except
// record_checksum, which the caller sets. Returns the file's path.
Result<std::filesystem::path> WriteSnapshot(const DataDir& dir, const engine::EngineImage& image,
                                            SnapshotMeta* meta, int zstd_level, uint32_t keep);

struct LoadedSnapshot {
  SnapshotMeta meta;
  engine::EngineImage image;
};

// Reads and checks one snapshot file (magic, version, checksums, sizes,
// decompression, image decode, sequence and hash). kCorruption says what is
// wrong; the file is never changed.
Result<LoadedSnapshot> ReadSnapshot(const std::filesystem::path& path);

}  // namespace mb::journal
