// The API secrets at rest, offline tools (docs/security.md).
//
// `matchbook secrets scrub`: the last step of retiring API secrets that an
// earlier version journaled in plain text (docs/security.md, "Secrets from
// an earlier version"). With the server stopped, once every such key is
// revoked (its owner given a new, sealed one):
//
//   1. the state is recovered (read-only) and checked: a live key with a
//      plain secret refuses the scrub, naming it;
//   2. every journal record, live or archived, that holds a revoked key's
//      plain secret gets that secret blanked ('*' over the same bytes;
//      sizes and offsets unchanged) and its checksum recomputed; segments
//      are rewritten atomically;
//   3. every snapshot is rewritten with the same secrets blanked (its state
//      hash, and the record checksum it names, recomputed);
//      an earlier version's auth.json.imported, which holds them too, is
//      removed;
//   4. with a bus configured, the journal stream and the snapshot stream on
//      NATS are purged: the primary publishes its newest snapshot and goes on
//      from its journal's end at its next start.
//
// A scrubbed key stays revoked, with no secret; the state hash changes by
// exactly that, so the standby's data directory is scrubbed the same way
// (the same bytes come out) and replicas start again from the new snapshot.
// Running it again finds nothing to do.
//
// `matchbook secrets rotate-master-key --new-master-key FILE`: with the
// server stopped, every sealed secret is sealed again with the new master
// key, in the same places and the same way (same lengths, checksums and
// hashes recomputed), then the new key replaces the old one in
// [security] master_key_file, and the bus's streams are purged (they carry
// the old key's ciphertexts). Cut short, it is run again: what the new key
// opens already is left as it is.
//
// Thread safety: a plain function; it holds the data directory's lock.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "app/config.h"
#include "common/status.h"
#include "projection/store.h"

namespace mb::app {

struct ScrubReport {
  uint64_t secrets = 0;            // secrets rewritten (scrubbed, or sealed again)
  uint64_t records = 0;            // journal records rewritten
  uint64_t segments = 0;           // live segments rewritten
  uint64_t archived_segments = 0;  // archived segments rewritten
  uint64_t snapshots = 0;          // snapshot files rewritten
  uint64_t removed_files = 0;      // auth.json.imported
  bool stream_purged = false;      // the bus's journal and snapshot streams
};

// stores: the history store's and the SQL projection's (each is told the
// checksum of the record it last applied when that record is rewritten).
Result<ScrubReport> ScrubSecrets(const Config& config, const std::filesystem::path& archive_dir,
                                 std::span<const projection::StoreOptions> stores);
Result<ScrubReport> RotateMasterKey(const Config& config, const std::filesystem::path& archive_dir,
                                    std::span<const projection::StoreOptions> stores,
                                    const std::filesystem::path& new_key_file);

}  // namespace mb::app
