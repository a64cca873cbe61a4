// Start-up: the newest valid snapshot, then every later journal record replayed
// through Engine::Apply (evolve) — the same code the live engine changes its
// state with.
//
// A damaged snapshot (checksum, decode, hash) is skipped with a note and the
// previous one is tried; with none usable the journal is replayed from its
// start. A snapshot that disagrees with the journal (ahead of it, or made from
// another journal: the checksum of record S differs) is an error, as is a
// journal with a gap. Nothing on disk is changed except the cut of a torn tail
// (repair, read-write opens only).
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "journal/data_dir.h"
#include "journal/reader.h"

namespace mb::journal {

struct RecoveryOptions {
  bool repair = false;        // cut a torn tail (REQUIRES a read-write DataDir)
  bool use_snapshots = true;  // false: replay everything from sequence 1
  bool progress = true;       // progress line when stderr is a terminal
  // Non-empty: archived segments (journal/archive.h) are read before the
  // live ones (verify replays from sequence 1).
  std::filesystem::path archive_dir;
  // Called with the engine after each replayed record (verify uses it to
  // check invariants and snapshot hashes); may return an error to stop.
  std::function<Status(const engine::Engine&, uint64_t seq)> after_record;
};

struct RecoveryReport {
  uint64_t snapshot_seq = 0;  // 0: none used
  std::string snapshot_file;
  std::vector<std::string> notes;    // snapshots skipped and why
  std::vector<std::string> removed;  // leftovers of a crash removed (repair only)
  uint64_t recovered_seq = 0;
  uint64_t state_hash = 0;
  uint64_t replayed_records = 0;
  uint64_t replayed_events = 0;
  double seconds = 0;
  ScanResult journal;  // includes the tail damage, if any
};

// REQUIRES: *engine is freshly constructed from the configuration the data
// directory was written with.
Result<RecoveryReport> Recover(const DataDir& dir, engine::Engine* engine,
                               const RecoveryOptions& options);

// One line: "recovered sequence 1234 (snapshot 1000 + 234 records, 812 events)
// state hash 0x... in 0.012 s".
std::string Describe(const RecoveryReport& report);
// "journal tail: dropped 57 bytes (1 partial record) at offset ... of ...: <reason>"
std::string Describe(const TailDamage& tail);

}  // namespace mb::journal
