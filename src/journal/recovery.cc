#include "journal/recovery.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "journal/snapshot.h"

namespace mb::journal {

Result<RecoveryReport> Recover(const DataDir& dir, engine::Engine* engine,
                               const RecoveryOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  RecoveryReport report;
  const uint64_t config_hash = engine->ConfigHash();

  if (options.repair) {
    // A snapshot write interrupted by a crash leaves its temporary file.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir.snapshot_dir(), ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".mbs.tmp")) continue;
      std::filesystem::remove(entry.path(), ec);
      report.removed.push_back(fmt::format("removed {}: a snapshot write interrupted by a crash",
                                           entry.path().string()));
    }
  }

  std::optional<SnapshotMeta> snap;
  if (options.use_snapshots) {
    auto listed = dir.ListSnapshots();
    if (!listed.ok()) return listed.status();
    for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
      auto loaded = ReadSnapshot(it->path);
      if (!loaded.ok()) {
        report.notes.push_back(fmt::format("snapshot skipped: {}", loaded.status().message()));
        continue;
      }
      if (loaded->meta.config_hash != config_hash) {
        report.notes.push_back(fmt::format(
            "snapshot skipped: {}: written with another configuration", it->path.string()));
        continue;
      }
      Status restored = engine->Restore(loaded->image);
      if (!restored.ok()) {
        report.notes.push_back(
            fmt::format("snapshot skipped: {}: {}", it->path.string(), restored.message()));
        continue;
      }
      snap = loaded->meta;
      report.snapshot_seq = loaded->meta.seq;
      report.snapshot_file = it->path.string();
      break;
    }
  }
  const uint64_t from = snap ? snap->seq : 0;

  ScanOptions scan;
  scan.config_hash = config_hash;
  scan.deliver_from = from == 0 ? 1 : from;
  scan.check_all = !options.use_snapshots;
  scan.repair = options.repair;
  scan.progress = options.progress;
  scan.progress_label = "replay";
  scan.archive_dir = options.archive_dir;
  engine::EventBuffer events;
  events.reserve(1024);
  bool saw_snapshot_record = from == 0;
  auto result = ScanJournal(dir, scan, [&](const JournalRecord& rec) -> Status {
    if (rec.seq == from) {
      if (rec.checksum != snap->record_checksum) {
        return Corruption(fmt::format(
            "snapshot {} does not belong to this journal: record {} has checksum {:016x}, the "
            "snapshot was taken after a record with checksum {:016x}",
            report.snapshot_file, rec.seq, rec.checksum, snap->record_checksum));
      }
      saw_snapshot_record = true;
      return Status::Ok();
    }
    // The scan checks that records are dense, but not that the first one it
    // delivers follows the state (journal segments before it may be gone).
    // Check before applying: Apply() aborts on events that do not fit.
    const uint64_t next = Raw(engine->last_sequence()) + 1;
    if (rec.seq != next) {
      return Corruption(fmt::format(
          "the journal continues at sequence {}, but records {}..{} are in neither a snapshot "
          "nor the journal (segments are missing)",
          rec.seq, next, rec.seq - 1));
    }
    events.clear();
    MB_RETURN_IF_ERROR(DecodeOutcome(rec, &events));
    for (const engine::Event& e : events) engine->Apply(e);
    ++report.replayed_records;
    report.replayed_events += events.size();
    if (options.after_record) return options.after_record(*engine, rec.seq);
    return Status::Ok();
  });
  if (!result.ok()) return result.status();
  report.journal = *result;

  if (result->segments > 0 && result->first_seq > from + 1) {
    return Corruption(fmt::format(
        "the journal starts at sequence {}, but records {}..{} are in neither a snapshot nor "
        "the journal (segments are missing)",
        result->first_seq, from + 1, result->first_seq - 1));
  }
  if (!saw_snapshot_record) {
    return Corruption(fmt::format(
        "snapshot {} is at sequence {} but the journal ends at {}: the snapshot is ahead of the "
        "journal (they come from different histories, or journal segments are missing)",
        report.snapshot_file, from, result->last_seq));
  }
  report.recovered_seq = Raw(engine->last_sequence());
  if (report.recovered_seq != std::max(from, result->last_seq)) {
    return Status(StatusCode::kInternal,
                  fmt::format("replay ended at sequence {}, the journal at {}",
                              report.recovered_seq, result->last_seq));
  }
  report.state_hash = engine->StateHash();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string Describe(const RecoveryReport& r) {
  const std::string base =
      r.snapshot_seq == 0 ? std::string("no snapshot") : fmt::format("snapshot {}", r.snapshot_seq);
  return fmt::format(
      "recovered sequence {} ({} + {} journal records, {} events) state hash {:016x} in {:.3f} s",
      r.recovered_seq, base, r.replayed_records, r.replayed_events, r.state_hash, r.seconds);
}

std::string Describe(const TailDamage& t) {
  return fmt::format("journal tail: {} {} bytes ({} partial record{}) after offset {} of {}: {}",
                     t.repaired ? "dropped" : "found", t.bytes, t.records,
                     t.records == 1 ? "" : "s", t.offset, t.segment.string(), t.reason);
}

}  // namespace mb::journal
