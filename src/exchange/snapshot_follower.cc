#include "exchange/snapshot_follower.h"

#include <fmt/format.h>

#include <utility>

#include "journal/reader.h"

namespace mb::exchange {

Result<std::unique_ptr<SnapshotFollower>> SnapshotFollower::Start(
    const engine::Engine& leader, const std::filesystem::path& data_dir, uint64_t last_checksum,
    FileSystem* file_system) {
  engine::Engine copy(leader.start_config());
  MB_RETURN_IF_ERROR(copy.Restore(leader.ExportImage()));
  return std::unique_ptr<SnapshotFollower>(
      new SnapshotFollower(std::move(copy), data_dir, last_checksum, file_system));
}

SnapshotFollower::SnapshotFollower(engine::Engine engine, const std::filesystem::path& data_dir,
                                   uint64_t last_checksum, FileSystem* file_system)
    : engine_(std::move(engine)),
      tail_(data_dir, engine_.ConfigHash(), Raw(engine_.last_sequence()) + 1, file_system),
      applied_seq_(Raw(engine_.last_sequence())),
      last_checksum_(last_checksum) {
  events_.reserve(64);
}

Result<uint64_t> SnapshotFollower::CatchUp(uint64_t limit_seq, std::size_t max_records) {
  if (limit_seq <= applied_seq_) return uint64_t{0};
  uint64_t events = 0;
  auto n = tail_.Read(limit_seq, max_records, [&](const journal::JournalRecord& r) -> Status {
    events_.clear();
    MB_RETURN_IF_ERROR(journal::DecodeOutcome(r, &events_));
    for (const engine::Event& e : events_) engine_.Apply(e);
    events += events_.size();
    applied_seq_ = r.seq;
    last_checksum_ = r.checksum;
    return Status::Ok();
  });
  if (!n.ok()) {
    return Status(n.status().code(), fmt::format("the snapshot follower stopped at sequence {}: {}",
                                                 applied_seq_, n.status().message()));
  }
  return events;
}

}  // namespace mb::exchange
