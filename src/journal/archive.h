// Journal retention: segments no consumer needs any more are archived
// (compressed, checksummed, to another directory) or deleted.
//
//   floor   the lowest sequence anyone still needs: the caller's minimum of
//           the oldest snapshot kept, the projection's applied sequence + 1,
//           the bus publisher's acknowledged sequence + 1 (transfers need no
//           journal: the pending ones are in the engine's state).
//   Retain  every segment whose records all lie below the floor — a segment
//           ends where the next one starts, so the last segment is never one —
//           is archived (kArchive) or deleted (kDelete); kKeep keeps all.
//
// Archived segment: <archive_dir>/<segment file name>.zst, one zstd frame of
// the segment's bytes with zstd's content checksum and size, written
// atomically and durably (WriteFileAtomically), read back and compared, and
// only then is the live segment removed. ScanJournal (ScanOptions::archive_dir) reads
// archived segments before the live ones, so verify and a projection rebuild
// see the whole history.
//
// Thread safety: Retain from one thread per data directory; it only removes
// segments the writer has rolled past.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "journal/data_dir.h"

namespace mb::journal {

enum class Retention : uint8_t { kKeep, kDelete, kArchive };

// "keep" | "delete" | "archive".
Result<Retention> ParseRetention(std::string_view s);
std::string_view ToString(Retention r) noexcept;

struct ArchivedSegment {
  uint64_t first_seq = 0;
  std::filesystem::path path;
  uint64_t bytes = 0;  // compressed
};

// The archive's segments sorted by first sequence (none when the directory
// does not exist). A file that is not an archived segment (by name) is an error.
Result<std::vector<ArchivedSegment>> ListArchive(const std::filesystem::path& archive_dir);

// The bytes of an archived segment. kCorruption: not a whole zstd frame, a
// checksum mismatch, or not the size the frame says.
Result<std::vector<std::byte>> ReadArchivedSegment(const std::filesystem::path& path);

// Writes `raw` (a segment's bytes) to `path` as an archived segment (one
// zstd frame with checksum and size, 0600, atomically and durably) and reads
// it back; the compressed size. Error: a write, or a copy that does not
// read back equal (removed then).
Result<uint64_t> WriteArchivedSegment(const std::filesystem::path& path,
                                      std::span<const std::byte> raw, int zstd_level = 3);

struct RetentionReport {
  uint64_t floor = 0;
  uint64_t segments = 0;        // archived or deleted now
  uint64_t bytes_freed = 0;     // of live segments removed
  uint64_t bytes_written = 0;   // to the archive
  uint64_t first_live_seq = 0;  // the journal's first sequence afterwards (0: empty)
};

// REQUIRES: the caller holds the directory's lock (the server that writes
// the journal, or an offline tool with a read-write DataDir); `dir` itself
// may be opened read-only.
Result<RetentionReport> Retain(const DataDir& dir, uint64_t floor, Retention policy,
                               const std::filesystem::path& archive_dir, int zstd_level = 3);

}  // namespace mb::journal
