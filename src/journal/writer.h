// Appending to the journal: records are encoded into a memory buffer, written
// in one write() per group (group commit), and made durable by the fsync
// policy; segments roll at a size limit.
//
//   fsync            fdatasync after every group (the default)
//   interval:<ms>    fdatasync when the oldest unsynced record is <ms> old
//   none             no fdatasync: written to the OS == durable (a process
//                    crash loses nothing, a power cut may)
//
// Failure handling: a failed write() or fdatasync() leaves the file cut back
// to its last good length and keeps every unacknowledged record in memory;
// the caller retries later (Write() again) and nothing is lost or written
// twice. After a failed fdatasync the written-but-unsynced bytes are written
// again, because the kernel may have dropped them.
//
// Thread safety: one thread (the journal thread) owns a JournalWriter.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/event.h"
#include "journal/data_dir.h"
#include "journal/reader.h"

namespace mb::journal {

enum class FsyncPolicy : uint8_t { kFsync, kInterval, kNone };

struct JournalOptions {
  FsyncPolicy policy = FsyncPolicy::kFsync;
  uint32_t interval_ms = 10;            // kInterval only
  uint64_t segment_bytes = 128u << 20;  // roll after this many bytes
};

// "fsync" | "interval:<ms>" (1..60000) | "none"
Status ParseFsyncPolicy(std::string_view text, JournalOptions* options);
std::string DescribeFsyncPolicy(const JournalOptions& options);

class JournalWriter {
 public:
  // Continues the journal that `scan` (with repair) described: appends to its
  // last segment, or starts the first one at scan.last_seq + 1.
  static Result<std::unique_ptr<JournalWriter>> Open(const DataDir& dir,
                                                     const JournalOptions& options,
                                                     uint64_t config_hash, const ScanResult& scan);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Encodes one command's events as one record into the buffer.
  // REQUIRES: events non-empty, all of sequence next_seq(). Returns the
  // record's checksum.
  uint64_t Append(std::span<const engine::Event> events);

  // Appends one record exactly as another journal framed it (a standby
  // copying the primary's journal): the bytes written are `record`'s, so the
  // two journals hold the same records byte for byte. It joins the same
  // buffer as Append(): Write(), Sync() and a roll treat it the same.
  // REQUIRES (checked): `record` is exactly one whole record (ParseRecord:
  // length, checksum, a record type this journal writes) of sequence
  // next_seq(), holding at least one event's bytes. Returns the record's
  // checksum. On error nothing is appended and next_seq() is unchanged:
  //   kCorruption      the bytes are not a whole, valid record (what is
  //                    wrong is named), or its payload is empty
  //   kInvalidArgument a valid record of another sequence (a duplicate or a
  //                    gap), or bytes after the record
  Result<uint64_t> AppendFramed(std::span<const std::byte> record);

  // Writes all appended records. On error: nothing of this call counts, the
  // file is restored, the records stay buffered for the next call.
  Status Write();
  // Makes written records durable (no-op under `none`). On error the unsynced
  // records go back to the buffer, to be written again.
  Status Sync();
  // fdatasync of everything written, whatever the policy: a snapshot is only
  // written once the journal records it covers are on disk, and a segment is
  // rolled only once it is, even under `none`.
  Status SyncAll();
  // True when the policy wants a Sync() now (interval elapsed, or kFsync with
  // anything unsynced).
  bool SyncDue(std::chrono::steady_clock::time_point now) const noexcept;
  // When the interval policy's next sync falls due (for the journal thread's
  // sleep); time_point::max() when nothing is waiting.
  std::chrono::steady_clock::time_point NextSyncDeadline() const noexcept;

  uint64_t next_seq() const noexcept { return next_seq_; }
  uint64_t written_seq() const noexcept { return written_seq_; }
  // The last sequence the policy has made durable.
  uint64_t durable_seq() const noexcept { return durable_seq_; }
  uint64_t bytes_on_disk() const noexcept { return total_bytes_; }
  const JournalOptions& options() const noexcept { return options_; }

 private:
  JournalWriter(const DataDir& dir, const JournalOptions& options, uint64_t config_hash);
  Status OpenSegment(const std::filesystem::path& path, uint64_t size);
  Status CreateSegment(uint64_t first_seq);
  Status Roll();

  // A growable byte buffer that does not zero what it grows into.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
    std::size_t capacity = 0;
    std::byte* Grow(std::size_t n);
    void Clear() { size = 0; }
    std::span<const std::byte> bytes() const { return {data.get(), size}; }
  };

  std::filesystem::path journal_dir_;
  FileSystem* fsys_;  // the data directory's
  JournalOptions options_;
  uint64_t config_hash_;

  static constexpr uint64_t kWritebackBytes = 8u << 20;

  int fd_ = -1;
  Status sync_error_;  // `none`: a failed SyncAll() stays failed
  uint64_t written_since_writeback_ = 0;
  std::filesystem::path path_;
  uint64_t file_size_ = 0;  // bytes written to the current segment
  // The segment opened at start-up has an older format version: the first
  // write starts a new segment, so that a segment's records are all of its
  // header's version.
  bool roll_before_write_ = false;
  uint64_t synced_size_ = 0;  // of those, durable
  uint64_t total_bytes_ = 0;  // all segments

  Buffer pending_;   // appended, not written
  Buffer unsynced_;  // written to the current segment, not yet synced
  uint64_t pending_first_seq_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t written_seq_ = 0;
  uint64_t durable_seq_ = 0;
  std::chrono::steady_clock::time_point unsynced_since_{};
};

}  // namespace mb::journal
