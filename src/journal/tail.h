// Following the journal as it grows: record by record from a sequence, across
// segment rolls, reading only what is already there. A reader of a live
// journal passes the durable sequence as the limit, so it never sees a record
// a crash could still take back; an offline reader passes kEverything and
// stops at the end of the last whole record.
//
// The tail keeps the current segment open and its read position, so each
// Read() costs only the new bytes (no rescan, no mmap of a growing file).
//
// Thread safety: one thread owns a JournalTail. The journal writer may append
// and roll concurrently (another thread or another process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

#include "common/file_system.h"
#include "common/status.h"
#include "journal/reader.h"

namespace mb::journal {

class JournalTail {
 public:
  static constexpr uint64_t kEverything = std::numeric_limits<uint64_t>::max();

  // Starts at from_seq (>= 1). config_hash 0 skips the segment check.
  // file_system: what opens, closes and syncs segments (null: the system
  // calls); reads are always direct.
  // Records before the first live segment are read from the archive
  // (journal/archive.h): archive_dir, or <data_dir>/archive when empty.
  JournalTail(const std::filesystem::path& data_dir, uint64_t config_hash, uint64_t from_seq,
              FileSystem* file_system = nullptr, std::filesystem::path archive_dir = {});
  ~JournalTail();
  JournalTail(const JournalTail&) = delete;
  JournalTail& operator=(const JournalTail&) = delete;

  // Delivers the records with sequence in [next_seq(), limit_seq], at most
  // max_records, in order; returns how many. Returns early (not an error) at
  // the end of what has been written. A record the limit says is durable but
  // which is not whole, a checksum mismatch, a sequence gap, a segment of
  // another configuration, or a journal that starts after next_seq() (its
  // first segments removed) is an error naming the segment and offset.
  Result<std::size_t> Read(uint64_t limit_seq, std::size_t max_records, const RecordFn& fn);

  uint64_t next_seq() const noexcept { return next_seq_; }

  // fdatasync of the segment being read: with every earlier segment already
  // synced by the writer when it rolled, every record delivered so far is
  // then on disk. Under fsync=none a reader that makes its own output durable
  // (the projection) calls it first, so that output is never on disk ahead of
  // the journal. An error names the segment.
  Status SyncDelivered();

 private:
  Status OpenSegmentFor(uint64_t seq, bool* found);
  // The archived segment holding `seq` (before the first live one), its bytes
  // in an anonymous in-memory file; *found false when the archive has none.
  Status OpenArchivedFor(uint64_t seq, bool* found);
  // Whether a segment (live or archived) starts at `seq`.
  bool SegmentStarts(uint64_t seq) const;
  // Makes at least `n` bytes available at buf_pos_ (fewer at the end of the file).
  Status Fill(std::size_t n);
  void CloseSegment();

  std::filesystem::path journal_dir_;
  std::filesystem::path archive_dir_;
  uint64_t config_hash_;
  FileSystem* fsys_;
  uint64_t next_seq_;

  int fd_ = -1;
  std::filesystem::path segment_;
  uint64_t segment_first_ = 0;
  uint64_t file_seq_ = 0;  // sequence of the next record in the segment
  std::vector<std::byte> buf_;
  std::size_t buf_pos_ = 0;    // next unread byte in buf_
  std::size_t buf_end_ = 0;    // end of valid bytes in buf_
  uint64_t buf_file_off_ = 0;  // file offset of buf_[0]
};

}  // namespace mb::journal
