#include "journal/reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "codec/codec.h"
#include "common/file.h"
#include "common/progress.h"
#include "journal/archive.h"
#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

namespace {

// The offset of the first whole, valid record with a sequence >= expected in
// [from, end), or npos. A cheap filter (plausible sequence) before the checksum.
std::size_t NextValidRecord(std::span<const std::byte> seg, std::size_t from, uint64_t expected) {
  if (seg.size() < kRecordHeaderSize) return std::string::npos;
  const uint64_t window = seg.size() / kRecordHeaderSize + 1;
  for (std::size_t y = from; y + kRecordHeaderSize <= seg.size(); ++y) {
    const uint64_t seq = GetU64(seg.data() + y + 8);
    if (seq < expected || seq - expected > window) continue;
    const ParsedRecord r = ParseRecord(seg.subspan(y));
    if (r.error == RecordError::kOk) return y;
  }
  return std::string::npos;
}

bool AllZero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

// Frames that start in a torn region, following plausible length fields.
uint64_t CountPartialRecords(std::span<const std::byte> tail) {
  uint64_t n = 0;
  std::size_t off = 0;
  while (off < tail.size()) {
    ++n;
    if (tail.size() - off < kRecordHeaderSize) break;
    const uint32_t len = GetU32(tail.data() + off);
    if (len > kMaxRecordPayload) break;
    off += kRecordHeaderSize + len;
  }
  return n;
}

Status Truncate(FileSystem& fsys, const fs::path& path, uint64_t size) {
  const int fd = fsys.Open(path.c_str(), O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(path, "open for repair", errno);
  Status s;
  if (fsys.Truncate(fd, static_cast<off_t>(size)) != 0) s = ErrnoStatus(path, "truncate", errno);
  if (s.ok() && fsys.Sync(fd) != 0) s = ErrnoStatus(path, "fsync", errno);
  fsys.Close(fd);
  return s;
}

}  // namespace

Result<ScanResult> ScanJournal(const DataDir& dir, const ScanOptions& options,
                               const RecordFn& on_record) {
  if (options.repair && dir.mode() != OpenMode::kReadWrite) {
    return Status(StatusCode::kInternal, "journal repair needs a read-write data directory");
  }
  auto listed = dir.ListSegments();
  if (!listed.ok()) return listed.status();
  // Archived segments (older than the first live one) come first.
  std::vector<FileEntry> segments;
  std::size_t archived = 0;
  if (!options.archive_dir.empty()) {
    auto archive = ListArchive(options.archive_dir);
    if (!archive.ok()) return archive.status();
    const uint64_t first_live = listed->empty() ? UINT64_MAX : listed->front().seq;
    for (const ArchivedSegment& a : *archive) {
      if (a.first_seq < first_live) segments.push_back(FileEntry{a.first_seq, a.path});
    }
    archived = segments.size();
  }
  segments.insert(segments.end(), listed->begin(), listed->end());

  ScanResult result;
  uint64_t total_bytes = 0;
  for (const FileEntry& f : segments) {
    std::error_code ec;
    total_bytes += fs::file_size(f.path, ec);
  }
  Progress progress(options.progress_label, total_bytes, "bytes", options.progress && isatty(2));
  uint64_t bytes_done = 0;

  uint64_t expected = 0;  // next sequence; 0 before the first segment
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const FileEntry& f = segments[i];
    const bool is_archived = i < archived;
    const bool last = i + 1 == segments.size() && !is_archived;
    const std::string name = f.path.string();
    MappedFile map;
    std::vector<std::byte> inflated;
    std::span<const std::byte> seg;
    if (is_archived) {
      auto bytes = ReadArchivedSegment(f.path);
      if (!bytes.ok()) return bytes.status();
      inflated = std::move(bytes).value();
      seg = inflated;
    } else {
      MB_RETURN_IF_ERROR(map.Open(f.path));
      seg = map.bytes();
    }

    if (last && (seg.size() < kSegmentHeaderSize || AllZero(seg))) {
      // A roll interrupted before its header was whole (or on disk: some
      // filesystems show the new size before the data): the segment holds no
      // record. It is the tail.
      TailDamage t{f.path,
                   0,
                   seg.size(),
                   0,
                   seg.size() < kSegmentHeaderSize ? "segment header incomplete"
                                                   : "segment holds only zero bytes",
                   false};
      if (options.repair) {
        if (dir.file_system().Unlink(f.path.c_str()) != 0) {
          return ErrnoStatus(f.path, "remove the empty last segment", errno);
        }
        MB_RETURN_IF_ERROR(SyncDir(dir.journal_dir(), dir.file_system()));
        t.repaired = true;
      }
      result.tail = t;
      break;
    }
    auto header = DecodeSegmentHeader(seg, name);
    if (!header.ok()) return header.status();
    if (header->first_seq != f.seq) {
      return Corruption(fmt::format("{}: header says first sequence {}, the file name says {}",
                                    name, header->first_seq, f.seq));
    }
    if (options.config_hash != 0 && header->config_hash != options.config_hash) {
      return Corruption(fmt::format(
          "{}: written with another configuration (config hash {:016x}, this one is {:016x}); "
          "the markets and assets must not change under an existing journal (add one while "
          "the server runs: POST /admin/v1/assets, POST /admin/v1/markets)",
          name, header->config_hash, options.config_hash));
    }
    if (i == 0) {
      result.first_seq = header->first_seq;
      if (header->first_seq == 0) {
        return Corruption(fmt::format("{}: first sequence 0 (sequences start at 1)", name));
      }
    } else if (header->first_seq != expected) {
      return Corruption(fmt::format(
          "{}: starts at sequence {} but the previous segment ends at {} (records missing or "
          "duplicated)",
          name, header->first_seq, expected - 1));
    }
    expected = header->first_seq;
    ++result.segments;

    // Skip the records of a segment that ends before deliver_from.
    const bool skip = !options.check_all && !last && segments[i + 1].seq <= options.deliver_from;
    std::size_t off = kSegmentHeaderSize;
    if (skip) {
      expected = segments[i + 1].seq;
      off = seg.size();
    }
    while (off < seg.size()) {
      const ParsedRecord r = ParseRecord(seg.subspan(off));
      if (r.error == RecordError::kOk && r.header.seq == expected) {
        ++result.records_checked;
        result.last_checksum = r.header.checksum;
        if (expected >= options.deliver_from && on_record) {
          JournalRecord rec{expected, r.header.checksum, r.payload, &f.path, off};
          MB_RETURN_IF_ERROR(on_record(rec));
          ++result.records_delivered;
        }
        off += r.size;
        ++expected;
        if ((expected & 4095) == 0) progress.Update(bytes_done + off);
        continue;
      }
      const std::string what =
          r.error == RecordError::kOk
              ? fmt::format("record has sequence {}, expected {}", r.header.seq, expected)
              : std::string(ToString(r.error));
      // A valid record after the bad one means damage inside the journal —
      // unless the bad bytes up to it are zeros: pages written back out of
      // order when the machine stopped (a hole no fdatasync ever covered, so
      // nothing after it was acknowledged as durable). That is a torn tail too.
      const std::size_t next_valid =
          last && r.error != RecordError::kOk && r.error != RecordError::kUnknownType
              ? NextValidRecord(seg, off + 1, expected)
              : std::string::npos;
      const bool hole =
          next_valid != std::string::npos && AllZero(seg.subspan(off, next_valid - off));
      if (!last || r.error == RecordError::kOk || r.error == RecordError::kUnknownType ||
          (next_valid != std::string::npos && !hole)) {
        return Corruption(fmt::format(
            "{}: corrupt record at offset {} (sequence {}): {}; valid records follow it, so "
            "this is damage inside the journal, not a torn tail — refusing to skip it. "
            "Restore the data directory from a copy, or move this segment and everything "
            "after it away if losing those records is acceptable",
            name, off, expected, what));
      }
      TailDamage t{f.path,
                   off,
                   seg.size() - off,
                   CountPartialRecords(seg.subspan(off)),
                   hole ? fmt::format("{} zero bytes (a hole left by out-of-order writeback), "
                                      "then records that were never made durable",
                                      next_valid - off)
                        : what,
                   false};
      if (options.repair) {
        if (Status cut = Truncate(dir.file_system(), f.path, off); !cut.ok()) {
          return IoError(
              fmt::format("cannot cut the torn tail of the journal ({} bytes after "
                          "offset {}); the next open finds it again: {}",
                          t.bytes, off, cut.message()));
        }
        t.repaired = true;
      }
      result.tail = t;
      break;
    }
    bytes_done += seg.size();
    const uint64_t kept =
        result.tail && result.tail->segment == f.path ? result.tail->offset : seg.size();
    result.bytes += kept;
    result.last_segment = f.path;
    result.last_segment_first_seq = header->first_seq;
    result.last_segment_size = kept;
  }
  progress.Finish(bytes_done);
  result.last_seq = expected == 0 ? 0 : expected - 1;
  return result;
}

Status DecodeOutcome(const JournalRecord& record, engine::EventBuffer* out) {
  std::span<const std::byte> in = record.payload;
  if (in.empty()) {
    return Corruption(
        fmt::format("record {}: no events (every command has at least one)", record.seq));
  }
  while (!in.empty()) {
    engine::Event ev;
    const codec::DecodeResult r = codec::Decode(in, &ev);
    if (!r.ok()) {
      return Corruption(fmt::format("record {}: event {} does not decode: {}", record.seq,
                                    out->size(), codec::ToString(r.error)));
    }
    if (Raw(ev.seq) != record.seq) {
      return Corruption(
          fmt::format("record {}: holds an event of sequence {}", record.seq, Raw(ev.seq)));
    }
    out->push_back(ev);
    in = in.subspan(r.consumed);
  }
  return Status::Ok();
}

}  // namespace mb::journal
