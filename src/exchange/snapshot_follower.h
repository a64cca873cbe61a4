// The follower engine that snapshots are taken from: a second Engine that
// replays the durable journal through Apply (evolve), record by record, on
// the snapshot thread. A snapshot exports the follower's state, never the
// leader's, so the engine thread does nothing at all for a snapshot: its
// stall is zero however large the books (an export copies the whole state —
// ≈ 430 ms at 1,000,000 open orders — which no engine thread can afford).
//
// The cost is a second copy of the state in memory and the replay itself
// (≈ 0.1 µs an event, on a thread that is otherwise idle). The follower
// reads the journal files up to the durable sequence the exchange gives it:
// under fsync=none that is what was written, and the exchange has the
// journal synced before it writes a snapshot (exchange.cc), so no snapshot is
// ahead of the journal on disk.
//
// Thread safety: one thread owns a SnapshotFollower (the snapshot thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "common/status.h"
#include "engine/engine.h"
#include "journal/tail.h"

namespace mb::exchange {

class SnapshotFollower {
 public:
  // Starts as a copy of `leader` (at leader.last_sequence(), whose record has
  // checksum `last_checksum`) and follows the journal of `data_dir` from the
  // next sequence, opening segments through `file_system` (null: the system
  // calls). Called before the leader's engine thread starts.
  static Result<std::unique_ptr<SnapshotFollower>> Start(const engine::Engine& leader,
                                                         const std::filesystem::path& data_dir,
                                                         uint64_t last_checksum,
                                                         FileSystem* file_system = nullptr);

  // Applies the records with sequence <= limit_seq that are not applied yet,
  // at most max_records; returns how many events they held. A record that
  // does not decode, or that the journal does not hold although the limit
  // says it is written, is an error (the follower is then unusable).
  Result<uint64_t> CatchUp(uint64_t limit_seq, std::size_t max_records);

  const engine::Engine& engine() const noexcept { return engine_; }
  uint64_t applied_seq() const noexcept { return applied_seq_; }
  uint64_t last_checksum() const noexcept { return last_checksum_; }

 private:
  SnapshotFollower(engine::Engine engine, const std::filesystem::path& data_dir,
                   uint64_t last_checksum, FileSystem* file_system);

  engine::Engine engine_;
  journal::JournalTail tail_;
  engine::EventBuffer events_;  // one record's events, reused
  uint64_t applied_seq_;
  uint64_t last_checksum_;
};

}  // namespace mb::exchange
