#include "journal/tail.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file.h"
#include "journal/archive.h"
#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

JournalTail::JournalTail(const fs::path& data_dir, uint64_t config_hash, uint64_t from_seq,
                         FileSystem* file_system, fs::path archive_dir)
    : journal_dir_(data_dir / "journal"),
      archive_dir_(archive_dir.empty() ? data_dir / "archive" : std::move(archive_dir)),
      config_hash_(config_hash),
      fsys_(file_system != nullptr ? file_system : &RealFileSystem()),
      next_seq_(from_seq == 0 ? 1 : from_seq) {}

Status JournalTail::SyncDelivered() {
  if (fd_ < 0) return Status::Ok();  // nothing read since the last segment was closed
  if (fsys_->DataSync(fd_) != 0) return ErrnoStatus(segment_, "fdatasync", errno);
  return Status::Ok();
}

JournalTail::~JournalTail() { CloseSegment(); }

void JournalTail::CloseSegment() {
  if (fd_ >= 0) fsys_->Close(fd_);
  fd_ = -1;
  buf_pos_ = buf_end_ = 0;
  buf_file_off_ = 0;
}

// Opens the segment holding `seq`: the one with the largest first sequence
// <= seq. *found is false when the journal has no such segment yet.
Status JournalTail::OpenSegmentFor(uint64_t seq, bool* found) {
  *found = false;
  std::error_code ec;
  uint64_t best = 0;
  uint64_t first = 0;
  fs::path best_path;
  for (const fs::directory_entry& e : fs::directory_iterator(journal_dir_, ec)) {
    uint64_t s = 0;
    if (!ParseSegmentFileName(e.path().filename().string(), &s)) continue;
    if (first == 0 || s < first) first = s;
    if (s <= seq && s >= best) {
      best = s;
      best_path = e.path();
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IoError(fmt::format("{}: cannot list: {}", journal_dir_.string(), ec.message()));
  }
  if (best == 0) {
    if (first != 0) {
      MB_RETURN_IF_ERROR(OpenArchivedFor(seq, found));
      if (*found) return Status::Ok();
      return NotFound(fmt::format(
          "{}: the journal starts at sequence {}, but sequence {} is needed (its segments were "
          "removed); rebuild from a snapshot-less journal is impossible",
          journal_dir_.string(), first, seq));
    }
    return Status::Ok();  // no journal yet
  }
  CloseSegment();
  fd_ = fsys_->Open(best_path.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus(best_path, "open", errno);
  segment_ = best_path;
  segment_first_ = best;
  MB_RETURN_IF_ERROR(Fill(kSegmentHeaderSize));
  if (buf_end_ - buf_pos_ < kSegmentHeaderSize) {
    CloseSegment();  // being created: its header is not whole yet
    return Status::Ok();
  }
  auto header =
      DecodeSegmentHeader(std::span(buf_.data() + buf_pos_, kSegmentHeaderSize), segment_.string());
  if (!header.ok()) return header.status();
  if (header->first_seq != best) {
    return Corruption(fmt::format("{}: header says first sequence {}, the file name says {}",
                                  segment_.string(), header->first_seq, best));
  }
  if (config_hash_ != 0 && header->config_hash != config_hash_) {
    return Corruption(
        fmt::format("{}: written with another configuration (config hash {:016x}, "
                    "expected {:016x})",
                    segment_.string(), header->config_hash, config_hash_));
  }
  buf_pos_ += kSegmentHeaderSize;
  file_seq_ = best;
  *found = true;
  return Status::Ok();
}

Status JournalTail::OpenArchivedFor(uint64_t seq, bool* found) {
  *found = false;
  auto archive = ListArchive(archive_dir_);
  if (!archive.ok()) return archive.status();
  const ArchivedSegment* best = nullptr;
  for (const ArchivedSegment& a : *archive) {
    if (a.first_seq <= seq) best = &a;
  }
  if (best == nullptr) return Status::Ok();
  auto bytes = ReadArchivedSegment(best->path);
  if (!bytes.ok()) return bytes.status();
  CloseSegment();
  const int fd = ::memfd_create("mb-archived-segment", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus(best->path, "memfd_create", errno);
  if (Status st = WriteAll(fd, *bytes, best->path); !st.ok()) {
    ::close(fd);
    return st;
  }
  fd_ = fd;
  segment_ = best->path;
  segment_first_ = best->first_seq;
  MB_RETURN_IF_ERROR(Fill(kSegmentHeaderSize));
  auto header =
      DecodeSegmentHeader(std::span(buf_.data() + buf_pos_, kSegmentHeaderSize), segment_.string());
  if (!header.ok()) return header.status();
  if (header->first_seq != best->first_seq) {
    return Corruption(fmt::format("{}: header says first sequence {}, the file name says {}",
                                  segment_.string(), header->first_seq, best->first_seq));
  }
  if (config_hash_ != 0 && header->config_hash != config_hash_) {
    return Corruption(fmt::format("{}: written with another configuration", segment_.string()));
  }
  buf_pos_ += kSegmentHeaderSize;
  file_seq_ = best->first_seq;
  *found = true;
  return Status::Ok();
}

bool JournalTail::SegmentStarts(uint64_t seq) const {
  std::error_code ec;
  return fs::exists(journal_dir_ / SegmentFileName(seq), ec) ||
         fs::exists(archive_dir_ / (SegmentFileName(seq) + ".zst"), ec);
}

Status JournalTail::Fill(std::size_t n) {
  if (buf_end_ - buf_pos_ >= n) return Status::Ok();
  // Move the unread bytes to the front, then grow if the record is larger.
  if (buf_pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + buf_pos_, buf_end_ - buf_pos_);
    buf_file_off_ += buf_pos_;
    buf_end_ -= buf_pos_;
    buf_pos_ = 0;
  }
  constexpr std::size_t kChunk = 1u << 20;
  if (buf_.size() < std::max(n, kChunk)) buf_.resize(std::max(n, kChunk));
  while (buf_end_ < n) {
    const ssize_t got = ::pread(fd_, buf_.data() + buf_end_, buf_.size() - buf_end_,
                                static_cast<off_t>(buf_file_off_ + buf_end_));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(segment_, "read", errno);
    }
    if (got == 0) break;  // the end of what is written
    buf_end_ += static_cast<std::size_t>(got);
  }
  return Status::Ok();
}

Result<std::size_t> JournalTail::Read(uint64_t limit_seq, std::size_t max_records,
                                      const RecordFn& fn) {
  std::size_t delivered = 0;
  while (delivered < max_records && next_seq_ <= limit_seq) {
    if (fd_ < 0) {
      bool found = false;
      MB_RETURN_IF_ERROR(OpenSegmentFor(next_seq_, &found));
      if (!found) break;
    }
    MB_RETURN_IF_ERROR(Fill(kRecordHeaderSize));
    std::span<const std::byte> avail(buf_.data() + buf_pos_, buf_end_ - buf_pos_);
    ParsedRecord r = ParseRecord(avail);
    if (r.error == RecordError::kShortPayload) {
      MB_RETURN_IF_ERROR(Fill(kRecordHeaderSize + r.header.payload_len));
      avail = std::span(buf_.data() + buf_pos_, buf_end_ - buf_pos_);
      r = ParseRecord(avail);
    }
    const uint64_t offset = buf_file_off_ + buf_pos_;
    if (r.error == RecordError::kShortHeader && avail.empty()) {
      // The end of this segment's bytes: the writer may have rolled (it
      // finishes a segment before it creates the next).
      if (segment_first_ != file_seq_ && SegmentStarts(file_seq_)) {
        CloseSegment();
        continue;
      }
      break;
    }
    if (r.error == RecordError::kShortHeader || r.error == RecordError::kShortPayload) {
      break;  // a torn tail, or a record still being written: the end for now
    }
    if (r.error != RecordError::kOk || r.header.seq != file_seq_) {
      if (limit_seq == kEverything) {
        break;  // a torn tail (offline): the end of what was written whole
      }
      const std::string what =
          r.error == RecordError::kOk
              ? fmt::format("record has sequence {}, expected {}", r.header.seq, file_seq_)
              : std::string(ToString(r.error));
      return Corruption(fmt::format("{}: record at offset {} (sequence {}): {}", segment_.string(),
                                    offset, file_seq_, what));
    }
    buf_pos_ += r.size;
    ++file_seq_;
    if (file_seq_ - 1 < next_seq_) continue;  // before the starting point
    JournalRecord rec{next_seq_, r.header.checksum, r.payload, &segment_, offset};
    MB_RETURN_IF_ERROR(fn(rec));
    ++next_seq_;
    ++delivered;
  }
  return delivered;
}

}  // namespace mb::journal
