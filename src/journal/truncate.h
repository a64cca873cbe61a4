// Cutting the journal back to a sequence: a former primary that rejoins as a
// standby discards the records the bus stream never received, so that its
// journal is a prefix of the stream's and it can follow from the next record.
//
// TruncateAfter(dir, keep_seq) leaves the journal ending at record keep_seq:
//
//   1. the removed records keep_seq+1..last go to `on_removed`, in order,
//      while nothing has been changed (the caller logs them; an error from it
//      stops the cut)
//   2. every snapshot above keep_seq is removed, the snapshot directory
//      fsynced
//   3. every segment after the one holding keep_seq+1 is removed, the last
//      first, the journal directory fsynced after each
//   4. the segment holding keep_seq+1 is cut at that record's offset
//      (ftruncate, fdatasync) — or removed (directory fsynced) when that
//      record is its first
//
// The order makes a crash at any step harmless: the journal on disk is always
// a dense prefix of the old one ending at or after keep_seq, with no snapshot
// ahead of it (a snapshot above the journal's end would stop recovery), and
// running the cut again finishes it.
//
// Thread safety: a plain function; the caller holds the data directory's lock
// and has no JournalWriter open on it (a writer keeps its file offset: it
// would write past the cut). Afterwards a new scan and JournalWriter::Open
// continue the journal at keep_seq + 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "journal/data_dir.h"
#include "journal/reader.h"

namespace mb::journal {

struct TruncateReport {
  uint64_t keep_seq = 0;
  uint64_t old_last_seq = 0;     // the journal's last record before the cut
  uint64_t records_removed = 0;  // keep_seq+1..old_last_seq; 0: the journal already ended there
  std::vector<std::filesystem::path> segments_removed;  // in sequence order
  std::filesystem::path segment_cut;                    // empty: no segment was shortened
  uint64_t cut_offset = 0;                              // segment_cut's length afterwards
  uint64_t bytes_removed = 0;  // segment bytes removed or cut off (a torn tail's included)
  std::vector<std::filesystem::path> snapshots_removed;  // in sequence order
};

// Cuts the journal of `dir` after record keep_seq (steps above). on_removed
// (if set) is called with each record keep_seq+1..last, in order, before
// anything changes; its JournalRecord is valid during the call only. A torn
// tail after the last whole record goes with the cut; when keep_seq is the
// last record, the segments are left as they are (recovery's repair cuts
// such a tail) and only snapshots above keep_seq are removed.
//
// REQUIRES: dir opened read-write (kInternal otherwise). Refused, with
// nothing changed and on_removed not called:
//   kOutOfRange  keep_seq is beyond the journal's last record; or below the
//                first live record minus one (the records before it are
//                archived or deleted: the cut cannot reach into them); or,
//                when the live journal does not start at sequence 1, no
//                readable snapshot in [first live record, keep_seq] would
//                remain (start-up recovery restores the state from one)
//   kCorruption  the journal does not read (damage, a gap), as ScanJournal
// An error from on_removed is returned with nothing changed. An I/O error
// during steps 2-4 leaves a journal cut part of the way (see above).
Result<TruncateReport> TruncateAfter(const DataDir& dir, uint64_t keep_seq,
                                     const RecordFn& on_removed = nullptr);

// One line for the log: "journal cut after sequence 120: records 121..300
// removed (180), 3 segments removed, ... cut at offset 1234, 2 snapshots
// removed".
std::string Describe(const TruncateReport& report);

}  // namespace mb::journal
