// Snapshots on the bus: the newest engine snapshot file of the primary's
// data directory, published to a JetStream stream of its own in chunks, so a
// replica or a standby boots from it without touching the primary's disk and
// without any credential of the primary (docs/bus.md, "Snapshots").
//
//   stream   <journal stream>_SNAPSHOTS, subjects <journal subject>.snapshot.>
//   <journal subject>.snapshot.<seq>       the snapshot file's bytes, in order,
//                                          one chunk per message (header
//                                          Mb-Chunk: "<i>/<n>")
//   <journal subject>.snapshot.manifest    after the last chunk: which snapshot,
//                                          its size, its chunks and the stream
//                                          sequence of its first chunk
//
// The file travels as the journal wrote it: its own header carries the
// sequence, the state hash and checksums, so a fetched copy is checked by
// reading it back exactly as recovery does. The stream keeps the newest two
// snapshots and the newest manifest (the rest is purged once a newer
// snapshot is in).
//
// Thread safety: plain functions; a NatsConnection is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/nats_security.h"
#include "bus/signing.h"
#include "common/status.h"
#include "journal/snapshot.h"

namespace mb::bus {

struct NatsConnection;  // bus/nats.h

struct SnapshotNames {
  std::string stream;    // <journal stream>_SNAPSHOTS
  std::string chunks;    // <journal subject>.snapshot (+ ".<seq>")
  std::string manifest;  // <journal subject>.snapshot.manifest
  std::string filter;    // <journal subject>.snapshot.>
};
SnapshotNames SnapshotNamesFor(std::string_view journal_stream, std::string_view journal_subject);

struct SnapshotManifest {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t first = 0;  // stream sequence of chunk 0
  std::string sha256;  // of the snapshot file, lower-case hex ("": an unsigned manifest's)
};
// "seq=S bytes=B chunks=N first=F[ sha256=H]"
std::string FormatManifest(const SnapshotManifest& m);
Result<SnapshotManifest> ParseManifest(std::string_view text);

// The newest snapshot file in <data_dir>/snapshots (nullopt: none).
Result<std::optional<std::pair<uint64_t, std::filesystem::path>>> NewestSnapshotFile(
    const std::filesystem::path& data_dir);

// The newest manifest in the stream (nullopt: none yet). With a verifier, a
// manifest that does not carry the bus key's signature, or names no SHA-256,
// is refused (kCorruption).
Result<std::optional<SnapshotManifest>> ReadManifest(NatsConnection& nats,
                                                     const SnapshotNames& names,
                                                     const BusVerifier* verifier = nullptr);

// One snapshot file on its way to the bus, a chunk per Step(), so the
// publisher's thread interleaves it with journal messages and can stop
// between two chunks. The file is read through a descriptor opened at the
// start: rotation may remove the file meanwhile.
class SnapshotUpload {
 public:
  // kNotFound: the file is gone already (rotated away: list again).
  // `attempt` makes the message ids of a new try differ from an earlier
  // one's, so no chunk of this upload is taken for a duplicate. signer
  // (null: unsigned): the manifest names the file's SHA-256 and is signed.
  static Result<std::unique_ptr<SnapshotUpload>> Open(const SnapshotNames& names, uint64_t seq,
                                                      const std::filesystem::path& file,
                                                      std::size_t chunk_bytes, uint64_t attempt,
                                                      const BusSigner* signer = nullptr);
  ~SnapshotUpload();
  SnapshotUpload(const SnapshotUpload&) = delete;
  SnapshotUpload& operator=(const SnapshotUpload&) = delete;

  // Publishes the next chunk; after the last, the manifest, then purges
  // every manifest but it and every chunk but this snapshot's and the
  // `previous_chunks` newest before them (the snapshot before this one).
  // Returns true once the manifest is in.
  Result<bool> Step(NatsConnection& nats, uint64_t previous_chunks);

  const SnapshotManifest& manifest() const noexcept { return m_; }

 private:
  SnapshotUpload(const SnapshotNames& names, int fd, SnapshotManifest m, std::size_t chunk_bytes,
                 uint64_t attempt, const BusSigner* signer);

  const SnapshotNames names_;
  const int fd_;
  SnapshotManifest m_;  // first: set by chunk 0's acknowledgement
  const std::size_t chunk_bytes_;
  const uint64_t attempt_;
  const BusSigner* const signer_;
  Sha256 sha_;         // of the chunks published so far
  uint64_t next_ = 0;  // the next chunk
  std::vector<std::byte> buf_;
};

struct SnapshotSource {
  std::vector<std::string> servers;
  std::string stream;   // the journal stream's name
  std::string subject;  // the journal subject
  std::chrono::milliseconds timeout{2000};
  NatsSecurity security;  // TLS and credential
  // Null: manifests are taken unsigned. Otherwise only a manifest signed
  // with the bus key is read, and the fetched file must have its SHA-256.
  std::shared_ptr<const BusVerifier> verifier;
};

// The newest snapshot's manifest on the bus (nullopt: none yet); connects
// for the call.
Result<std::optional<SnapshotManifest>> NewestManifest(const SnapshotSource& source);

// Downloads the newest snapshot on the bus into <data_dir>/snapshots/<seq>.mbs
// (a temporary file, fsync, rename) and checks it by reading it back
// (journal::ReadSnapshot); a file that does not check is removed. kNotFound
// when the bus holds no snapshot yet; kCorruption names what does not fit.
Result<journal::SnapshotMeta> FetchNewestSnapshot(const SnapshotSource& source,
                                                  const std::filesystem::path& data_dir);

}  // namespace mb::bus
