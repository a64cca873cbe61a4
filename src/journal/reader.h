// Reading the journal: every segment in order, every record checked (frame,
// checksum, dense sequence), the torn tail of the last segment found — and,
// when asked, cut off.
//
// What counts as a torn tail: the bytes from the first bad record of the LAST
// segment to its end, when no valid record follows them (a crash during a
// write leaves a prefix of what was written, or zeroes). A bad record with a
// valid record after it is damage in the middle: an error, never skipped.
// In any other segment, any bad record is an error.
//
// Thread safety: plain functions; one scan per DataDir at a time when repairing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "engine/engine.h"
#include "journal/data_dir.h"

namespace mb::journal {

struct JournalRecord {
  uint64_t seq = 0;
  uint64_t checksum = 0;
  std::span<const std::byte> payload;  // valid during the callback only
  const std::filesystem::path* segment = nullptr;
  uint64_t offset = 0;  // of the record header in the segment
};

struct TailDamage {
  std::filesystem::path segment;
  uint64_t offset = 0;    // where the last whole record ends
  uint64_t bytes = 0;     // dropped
  uint64_t records = 0;   // partial records in those bytes (at least 1)
  std::string reason;     // what the first bad record looked like
  bool repaired = false;  // the segment was truncated (or an empty one removed)
};

struct ScanOptions {
  uint64_t config_hash = 0;  // segments must carry it; 0 skips the check
  // Records with a smaller sequence are checked but not delivered.
  uint64_t deliver_from = 1;
  // false: segments that end before deliver_from get only their header read
  // (fast start-up); true (verify): every record of every segment.
  bool check_all = true;
  bool repair = false;    // truncate a torn tail; REQUIRES a read-write DataDir
  bool progress = false;  // a progress line on a terminal
  std::string progress_label = "journal";
  // Non-empty: the archive of retained segments (journal/archive.h); its
  // segments before the first live one are read first (verify, a
  // projection rebuild). Never repaired.
  std::filesystem::path archive_dir;
};

struct ScanResult {
  uint64_t segments = 0;
  uint64_t bytes = 0;          // segment bytes (after any repair)
  uint64_t first_seq = 0;      // of the first segment; 0 when there is none
  uint64_t last_seq = 0;       // of the last whole record; first_seq - 1 when none
  uint64_t last_checksum = 0;  // of that record
  uint64_t records_checked = 0;
  uint64_t records_delivered = 0;
  std::optional<TailDamage> tail;
  // Where the writer continues.
  std::filesystem::path last_segment;  // empty when there is none
  uint64_t last_segment_first_seq = 0;
  uint64_t last_segment_size = 0;
};

using RecordFn = std::function<Status(const JournalRecord&)>;

// Reads the journal of `dir`, calling on_record (if set) for each record with
// seq >= deliver_from, in order. Stops at the first error (its own or the
// callback's). Corruption errors name the segment, offset and sequence.
Result<ScanResult> ScanJournal(const DataDir& dir, const ScanOptions& options,
                               const RecordFn& on_record);

// Decodes a record's events into *out (appending), checking that each one
// carries the record's sequence and that the bytes are exactly whole events.
Status DecodeOutcome(const JournalRecord& record, engine::EventBuffer* out);

}  // namespace mb::journal
