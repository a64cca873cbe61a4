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
// Thread safety: a plain function; it holds the data directory's lock.
#pragma once

#include <cstdint>
#include <filesystem>

#include "app/config.h"
#include "common/status.h"

namespace mb::app {

struct ScrubReport {
  uint64_t secrets = 0;            // revoked keys' plain secrets blanked
  uint64_t records = 0;            // journal records rewritten
  uint64_t segments = 0;           // live segments rewritten
  uint64_t archived_segments = 0;  // archived segments rewritten
  uint64_t snapshots = 0;          // snapshot files rewritten
  uint64_t removed_files = 0;      // auth.json.imported
  bool stream_purged = false;      // the bus's journal and snapshot streams
};

Result<ScrubReport> ScrubSecrets(const Config& config, const std::filesystem::path& archive_dir);

}  // namespace mb::app
