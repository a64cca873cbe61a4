// Backup and restore of a data directory, while `serve` runs or not.
//
//   Backup(D, TO):  a consistent point S (a fresh snapshot when a server holds
//                   D: it is asked for one with SIGUSR1, the pid from D/LOCK;
//                   else the newest snapshot, or the journal's end), then
//                     TO/snapshots/<S>.mbs   that snapshot (none when D has none)
//                     TO/journal/*.mbj       every segment up to S, the last
//                                            cut after record S
//                     TO/admin.token         operator state the journal does
//                                            not hold (and an auth.json of an
//                                            earlier version, not yet imported)
//                     TO/manifest.json       written last: format, S, the state
//                                            hash at S (from a recovery of TO
//                                            itself), every file's size and SHA-256
//   Restore(FROM, NEW): every file checked against the manifest (a missing,
//                   short or changed one is refused, named), copied into the
//                   new directory NEW (which must not exist or be empty),
//                   synced, and recovered once (read-only) to prove the
//                   sequence and state hash are the manifest's. A backup
//                   never holds the master key (gateway/sealed_secret.h):
//                   restore is given it, checks that it opens the secrets,
//                   and puts it in NEW.
//
// The history projection is not copied: `serve` on the restored directory
// projects the journal again. The configuration file is not either: restore
// with the configuration the source ran (segments and snapshots carry its
// hash, and a different one is refused when the journal is read).
//
// Thread safety: plain functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/market.h"

namespace mb::app {

struct BackupFile {
  std::string path;  // relative to the backup's root, '/'-separated
  uint64_t bytes = 0;
  std::string sha256;  // lower-case hex
};

struct BackupManifest {
  int format = 1;
  uint64_t seq = 0;         // the consistent point
  uint64_t state_hash = 0;  // the engine's state hash at seq
  uint64_t config_hash = 0;
  uint64_t snapshot_seq = 0;  // the snapshot included (0: none)
  int64_t created_ms = 0;
  bool live = false;  // taken while a server held the directory
  std::vector<BackupFile> files;
};

struct BackupOptions {
  std::filesystem::path data_dir;
  std::filesystem::path to;  // must not exist, or be empty
  // How long a running server may take to write the requested snapshot.
  std::chrono::milliseconds snapshot_wait{60'000};
};

// REQUIRES: config is the configuration the data directory was written with.
Result<BackupManifest> Backup(const BackupOptions& options, const engine::EngineConfig& config);

// master_key: the venue's master key file, which must open the backup's
// sealed secrets and is copied to <data_dir>/master.key (empty: none; then
// a backup with a sealed secret is refused).
Result<BackupManifest> Restore(const std::filesystem::path& from,
                               const std::filesystem::path& data_dir,
                               const engine::EngineConfig& config,
                               const std::filesystem::path& master_key = {});

// Reads and checks <dir>/manifest.json (not the files it lists).
Result<BackupManifest> ReadManifest(const std::filesystem::path& dir);

}  // namespace mb::app
