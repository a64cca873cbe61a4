#include "journal/writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "codec/codec.h"
#include "common/file.h"
#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

Status ParseFsyncPolicy(std::string_view text, JournalOptions* options) {
  if (text == "fsync") {
    options->policy = FsyncPolicy::kFsync;
    return Status::Ok();
  }
  if (text == "none") {
    options->policy = FsyncPolicy::kNone;
    return Status::Ok();
  }
  constexpr std::string_view kInterval = "interval:";
  if (text.starts_with(kInterval)) {
    const std::string_view ms = text.substr(kInterval.size());
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(ms.data(), ms.data() + ms.size(), v);
    if (ec == std::errc() && p == ms.data() + ms.size() && v >= 1 && v <= 60000) {
      options->policy = FsyncPolicy::kInterval;
      options->interval_ms = v;
      return Status::Ok();
    }
  }
  return InvalidArgument(fmt::format(
      "fsync policy \"{}\": expected \"fsync\", \"interval:<ms>\" (1..60000) or \"none\"", text));
}

std::string DescribeFsyncPolicy(const JournalOptions& options) {
  switch (options.policy) {
    case FsyncPolicy::kFsync:
      return "fsync";
    case FsyncPolicy::kInterval:
      return fmt::format("interval:{}", options.interval_ms);
    case FsyncPolicy::kNone:
      return "none";
  }
  return "?";
}

std::byte* JournalWriter::Buffer::Grow(std::size_t n) {
  if (size + n > capacity) {
    std::size_t cap = capacity == 0 ? (1u << 20) : capacity;
    while (cap < size + n) cap *= 2;
    auto bigger = std::make_unique_for_overwrite<std::byte[]>(cap);
    if (size > 0) std::memcpy(bigger.get(), data.get(), size);
    data = std::move(bigger);
    capacity = cap;
  }
  std::byte* p = data.get() + size;
  size += n;
  return p;
}

JournalWriter::JournalWriter(const DataDir& dir, const JournalOptions& options,
                             uint64_t config_hash)
    : journal_dir_(dir.journal_dir()),
      fsys_(&dir.file_system()),
      options_(options),
      config_hash_(config_hash) {}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) fsys_->Close(fd_);
}

Result<std::unique_ptr<JournalWriter>> JournalWriter::Open(const DataDir& dir,
                                                           const JournalOptions& options,
                                                           uint64_t config_hash,
                                                           const ScanResult& scan) {
  if (dir.mode() != OpenMode::kReadWrite) {
    return Status(StatusCode::kInternal, "the journal writer needs a read-write data directory");
  }
  std::unique_ptr<JournalWriter> w(new JournalWriter(dir, options, config_hash));
  w->next_seq_ = scan.last_seq + 1;
  w->written_seq_ = w->durable_seq_ = scan.last_seq;
  w->total_bytes_ = scan.bytes;
  if (!scan.last_segment.empty()) {
    MB_RETURN_IF_ERROR(w->OpenSegment(scan.last_segment, scan.last_segment_size));
  } else {
    MB_RETURN_IF_ERROR(w->CreateSegment(w->next_seq_));
  }
  return w;
}

Status JournalWriter::OpenSegment(const fs::path& path, uint64_t size) {
  fd_ = fsys_->Open(path.c_str(), O_WRONLY | O_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus(path, "open for append", errno);
  path_ = path;
  // The records recovered from it may be only in the page cache (the last
  // process wrote them and died before its fdatasync): they become the state
  // everything else builds on (answers, snapshots, the projection), so they
  // are made durable before anything is.
  if (fsys_->DataSync(fd_) != 0) {
    return ErrnoStatus(path, "fdatasync of the recovered journal tail", errno);
  }
  file_size_ = synced_size_ = size;
  // The scan checked the header; only its version matters here.
  std::array<std::byte, kSegmentHeaderSize> header{};
  const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (rd < 0) return ErrnoStatus(path, "open to read the header", errno);
  const ssize_t n = ::pread(rd, header.data(), header.size(), 0);
  ::close(rd);
  if (n == static_cast<ssize_t>(header.size())) {
    roll_before_write_ = GetU16(header.data() + 8) < kSegmentFormatVersion;
  }
  return Status::Ok();
}

Status JournalWriter::CreateSegment(uint64_t first_seq) {
  const fs::path path = journal_dir_ / SegmentFileName(first_seq);
  // 0600: records hold API keys' secrets (AuthChanged).
  const int fd = fsys_->Open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(path, "create segment", errno);
  std::array<std::byte, kSegmentHeaderSize> header{};
  EncodeSegmentHeader({kSegmentFormatVersion, first_seq, config_hash_}, header);
  Status s = WriteAll(fd, header, path, *fsys_);
  if (s.ok() && fsys_->DataSync(fd) != 0) s = ErrnoStatus(path, "fdatasync", errno);
  if (s.ok()) s = SyncDir(journal_dir_, *fsys_);
  if (!s.ok()) {
    fsys_->Close(fd);
    fsys_->Unlink(path.c_str());
    return s;
  }
  if (fd_ >= 0) fsys_->Close(fd_);
  fd_ = fd;
  written_since_writeback_ = 0;
  path_ = path;
  file_size_ = synced_size_ = kSegmentHeaderSize;
  total_bytes_ += kSegmentHeaderSize;
  return Status::Ok();
}

uint64_t JournalWriter::Append(std::span<const engine::Event> events) {
  if (pending_.size == 0) pending_first_seq_ = next_seq_;
  std::size_t payload = 0;
  for (const engine::Event& e : events) payload += codec::EncodedSize(e);
  std::byte* rec = pending_.Grow(kRecordHeaderSize + payload);
  std::byte* p = rec + kRecordHeaderSize;
  for (const engine::Event& e : events) {
    p += codec::Encode(e, std::span<std::byte>(p, codec::kMaxEventSize));
  }
  const std::span<const std::byte> body(rec + kRecordHeaderSize, payload);
  EncodeRecordHeader(RecordType::kCommandOutcome, next_seq_, body,
                     std::span<std::byte, kRecordHeaderSize>(rec, kRecordHeaderSize));
  ++next_seq_;
  return GetU64(rec + 16);
}

Result<uint64_t> JournalWriter::AppendFramed(std::span<const std::byte> record) {
  const ParsedRecord r = ParseRecord(record);
  if (r.error != RecordError::kOk) {
    return Corruption(fmt::format("framed record ({} bytes) offered as sequence {}: {}",
                                  record.size(), next_seq_, ToString(r.error)));
  }
  if (r.header.seq != next_seq_) {
    return InvalidArgument(fmt::format("framed record has sequence {}, the journal's next is {}",
                                       r.header.seq, next_seq_));
  }
  if (r.size != record.size()) {
    return InvalidArgument(fmt::format("framed record {}: {} bytes given, the record is {}",
                                       r.header.seq, record.size(), r.size));
  }
  // Recovery refuses a record without events (DecodeOutcome); refusing it
  // here keeps it out of the journal.
  if (r.payload.empty()) {
    return Corruption(fmt::format("framed record {}: no events", r.header.seq));
  }
  if (pending_.size == 0) pending_first_seq_ = next_seq_;
  std::memcpy(pending_.Grow(record.size()), record.data(), record.size());
  ++next_seq_;
  return r.header.checksum;
}

Status JournalWriter::Roll() {
  // Every segment but the last is durable, whatever the policy: the next
  // segment's records must never reach the disk before this one's (after a
  // power cut that would be a hole inside the journal, not a torn tail).
  // Under `none` writeback has been running as the segment filled, so little
  // is left for this fdatasync.
  MB_RETURN_IF_ERROR(SyncAll());
  return CreateSegment(pending_first_seq_);
}

Status JournalWriter::SyncAll() {
  if (options_.policy != FsyncPolicy::kNone) return Sync();
  if (!sync_error_.ok()) return sync_error_;
  if (fsys_->DataSync(fd_) != 0) {
    // The kernel reports a lost writeback once; what was lost cannot be told
    // from what was not, so every later SyncAll() fails too (no snapshot, no
    // roll: the exchange refuses commands) until a restart re-reads the disk.
    sync_error_ = ErrnoStatus(path_,
                              "fdatasync (records written under fsync=none may be lost; "
                              "restart to recover from what is on disk)",
                              errno);
    return sync_error_;
  }
  return Status::Ok();
}

Status JournalWriter::Write() {
  if (pending_.size == 0) return Status::Ok();
  if (roll_before_write_ || file_size_ >= options_.segment_bytes) {
    MB_RETURN_IF_ERROR(Roll());
    roll_before_write_ = false;
  }
  std::size_t done = 0;
  while (done < pending_.size) {
    const ssize_t n = fsys_->PWrite(fd_, pending_.data.get() + done, pending_.size - done,
                                    static_cast<off_t>(file_size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      // Cut off what this call wrote, so the retry starts at a record boundary.
      if (fsys_->Truncate(fd_, static_cast<off_t>(file_size_)) != 0) {
        // The file may now end in a partial record; recovery treats it as a
        // torn tail. Nothing acknowledged is in it.
      }
      return ErrnoStatus(path_, "write", err);
    }
    done += static_cast<std::size_t>(n);
  }
  file_size_ += pending_.size;
  total_bytes_ += pending_.size;
  written_seq_ = next_seq_ - 1;
  if (options_.policy == FsyncPolicy::kNone) {
    durable_seq_ = written_seq_;
    // Start writeback every few MiB so dirty pages never pile up into one
    // long stall (at a roll, a snapshot, or the kernel's own flush).
    written_since_writeback_ += pending_.size;
    if (written_since_writeback_ >= kWritebackBytes) {
      ::sync_file_range(fd_, static_cast<off_t>(file_size_ - written_since_writeback_),
                        static_cast<off_t>(written_since_writeback_), SYNC_FILE_RANGE_WRITE);
      written_since_writeback_ = 0;
    }
  } else {
    if (unsynced_.size == 0) unsynced_since_ = std::chrono::steady_clock::now();
    std::memcpy(unsynced_.Grow(pending_.size), pending_.data.get(), pending_.size);
  }
  pending_.Clear();
  return Status::Ok();
}

Status JournalWriter::Sync() {
  if (unsynced_.size == 0) return Status::Ok();
  if (fsys_->DataSync(fd_) != 0) {
    const int err = errno;
    // The kernel may have dropped the dirty pages it failed to write: write
    // them again from memory, from the last durable length.
    const uint64_t lost = file_size_ - synced_size_;
    if (fsys_->Truncate(fd_, static_cast<off_t>(synced_size_)) != 0) {
      // As in Write(): a partial tail is a torn tail to recovery.
    }
    total_bytes_ -= lost;
    file_size_ = synced_size_;
    Buffer requeue;
    std::memcpy(requeue.Grow(unsynced_.size + pending_.size), unsynced_.data.get(), unsynced_.size);
    if (pending_.size > 0) {
      std::memcpy(requeue.data.get() + unsynced_.size, pending_.data.get(), pending_.size);
    }
    pending_ = std::move(requeue);
    pending_first_seq_ = durable_seq_ + 1;
    unsynced_.Clear();
    written_seq_ = durable_seq_;
    return ErrnoStatus(path_, "fdatasync", err);
  }
  synced_size_ = file_size_;
  durable_seq_ = written_seq_;
  unsynced_.Clear();
  return Status::Ok();
}

bool JournalWriter::SyncDue(std::chrono::steady_clock::time_point now) const noexcept {
  if (unsynced_.size == 0) return false;
  if (options_.policy == FsyncPolicy::kFsync) return true;
  return now >= NextSyncDeadline();
}

std::chrono::steady_clock::time_point JournalWriter::NextSyncDeadline() const noexcept {
  if (unsynced_.size == 0 || options_.policy != FsyncPolicy::kInterval) {
    return std::chrono::steady_clock::time_point::max();
  }
  return unsynced_since_ + std::chrono::milliseconds(options_.interval_ms);
}

}  // namespace mb::journal
