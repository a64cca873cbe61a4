#include "journal/truncate.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "common/file.h"
#include "journal/format.h"
#include "journal/snapshot.h"

namespace mb::journal {

namespace fs = std::filesystem;

namespace {

Status CutSegment(FileSystem& fsys, const fs::path& path, uint64_t size) {
  const int fd = fsys.Open(path.c_str(), O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(path, "open to cut", errno);
  Status s;
  if (fsys.Truncate(fd, static_cast<off_t>(size)) != 0) s = ErrnoStatus(path, "truncate", errno);
  if (s.ok() && fsys.DataSync(fd) != 0) s = ErrnoStatus(path, "fdatasync", errno);
  fsys.Close(fd);
  return s;
}

Status RemoveSegment(const DataDir& dir, const fs::path& path) {
  if (dir.file_system().Unlink(path.c_str()) != 0) return ErrnoStatus(path, "remove", errno);
  return SyncDir(dir.journal_dir(), dir.file_system());
}

}  // namespace

Result<TruncateReport> TruncateAfter(const DataDir& dir, uint64_t keep_seq,
                                     const RecordFn& on_removed) {
  if (dir.mode() != OpenMode::kReadWrite) {
    return Status(StatusCode::kInternal, "cutting the journal needs a read-write data directory");
  }
  auto segments = dir.ListSegments();
  if (!segments.ok()) return segments.status();
  auto snapshots = dir.ListSnapshots();
  if (!snapshots.ok()) return snapshots.status();

  const uint64_t first_live = segments->empty() ? 1 : segments->front().seq;
  if (keep_seq < first_live - 1) {
    return OutOfRange(
        fmt::format("cannot cut the journal after sequence {}: it starts at {}, and the records "
                    "before that are archived or deleted",
                    keep_seq, first_live));
  }
  if (first_live > 1) {
    // Without records 1..first_live-1, start-up recovery needs a snapshot
    // whose record is still in the journal; every one above keep_seq goes.
    bool restorable = false;
    for (auto it = snapshots->rbegin(); it != snapshots->rend() && !restorable; ++it) {
      if (it->seq > keep_seq) continue;
      if (it->seq < first_live) break;
      restorable = ReadSnapshot(it->path).ok();
    }
    if (!restorable) {
      return OutOfRange(fmt::format(
          "cannot cut the journal after sequence {}: it starts at {} and no readable snapshot "
          "in {}..{} would remain, so the state at {} could not be recovered",
          keep_seq, first_live, first_live, keep_seq, keep_seq));
    }
  }
  if (keep_seq == UINT64_MAX) {
    return OutOfRange(fmt::format("cannot cut the journal after sequence {}", keep_seq));
  }

  ScanOptions so;
  so.deliver_from = keep_seq + 1;
  so.check_all = false;
  so.progress = false;
  fs::path cut_path;
  uint64_t cut_offset = 0;
  auto scan = ScanJournal(dir, so, [&](const JournalRecord& rec) -> Status {
    if (rec.seq == keep_seq + 1) {
      cut_path = *rec.segment;
      cut_offset = rec.offset;
    }
    return on_removed ? on_removed(rec) : Status::Ok();
  });
  if (!scan.ok()) return scan.status();
  if (keep_seq > scan->last_seq) {
    return OutOfRange(fmt::format("cannot cut the journal after sequence {}: it ends at {}",
                                  keep_seq, scan->last_seq));
  }

  // The segment holding keep_seq + 1 (none when nothing is removed).
  const auto cut = std::find_if(segments->begin(), segments->end(),
                                [&](const FileEntry& f) { return f.path == cut_path; });
  if (keep_seq < scan->last_seq && cut == segments->end()) {
    return Status(StatusCode::kInternal,
                  fmt::format("record {} is in {}, which the journal's listing does not hold",
                              keep_seq + 1, cut_path.string()));
  }

  TruncateReport report;
  report.keep_seq = keep_seq;
  report.old_last_seq = scan->last_seq;
  report.records_removed = scan->last_seq - keep_seq;
  // From here on the directory changes; an error leaves the cut part done.
  const auto partial = [&](const Status& s) {
    return Status(s.code(), fmt::format("cutting the journal after sequence {} (from {}): {}; the "
                                        "cut is incomplete, running it again finishes it",
                                        keep_seq, scan->last_seq, s.message()));
  };

  std::vector<const FileEntry*> drop_snapshots;
  for (const FileEntry& f : *snapshots) {
    if (f.seq > keep_seq) drop_snapshots.push_back(&f);
  }
  for (auto it = drop_snapshots.rbegin(); it != drop_snapshots.rend(); ++it) {
    if (dir.file_system().Unlink((*it)->path.c_str()) != 0) {
      return partial(ErrnoStatus((*it)->path, "remove snapshot", errno));
    }
  }
  if (!drop_snapshots.empty()) {
    if (Status s = SyncDir(dir.snapshot_dir(), dir.file_system()); !s.ok()) return partial(s);
  }
  for (const FileEntry* f : drop_snapshots) report.snapshots_removed.push_back(f->path);

  if (report.records_removed == 0) return report;

  for (auto it = segments->end(); it != cut + 1;) {
    --it;
    std::error_code ec;
    const uint64_t size = fs::file_size(it->path, ec);
    if (Status s = RemoveSegment(dir, it->path); !s.ok()) return partial(s);
    report.bytes_removed += ec ? 0 : size;
  }
  for (auto it = cut + 1; it != segments->end(); ++it) report.segments_removed.push_back(it->path);

  std::error_code ec;
  const uint64_t cut_size = fs::file_size(cut->path, ec);
  if (ec) return partial(ErrnoStatus(cut->path, "stat", ec.value()));
  if (cut_offset <= kSegmentHeaderSize) {
    // Record keep_seq + 1 is the segment's first: no record of it stays.
    if (Status s = RemoveSegment(dir, cut->path); !s.ok()) return partial(s);
    report.segments_removed.insert(report.segments_removed.begin(), cut->path);
    report.bytes_removed += cut_size;
  } else {
    if (Status s = CutSegment(dir.file_system(), cut->path, cut_offset); !s.ok()) {
      return partial(s);
    }
    report.segment_cut = cut->path;
    report.cut_offset = cut_offset;
    report.bytes_removed += cut_size - cut_offset;
  }
  return report;
}

std::string Describe(const TruncateReport& r) {
  std::string out =
      r.records_removed == 0
          ? fmt::format("journal cut after sequence {}: it ended there, no record removed",
                        r.keep_seq)
          : fmt::format("journal cut after sequence {}: records {}..{} removed ({}), {} bytes",
                        r.keep_seq, r.keep_seq + 1, r.old_last_seq, r.records_removed,
                        r.bytes_removed);
  if (!r.segments_removed.empty()) {
    out += fmt::format(", {} segment{} removed ({}..{})", r.segments_removed.size(),
                       r.segments_removed.size() == 1 ? "" : "s",
                       r.segments_removed.front().filename().string(),
                       r.segments_removed.back().filename().string());
  }
  if (!r.segment_cut.empty()) {
    out += fmt::format(", {} cut at offset {}", r.segment_cut.string(), r.cut_offset);
  }
  if (!r.snapshots_removed.empty()) {
    out += fmt::format(", {} snapshot{} removed", r.snapshots_removed.size(),
                       r.snapshots_removed.size() == 1 ? "" : "s");
  }
  return out;
}

}  // namespace mb::journal
