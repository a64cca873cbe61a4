#include "bus/snapshots.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bus/nats.h"
#include "common/file.h"
#include "journal/format.h"

namespace mb::bus {
namespace {

// header: "Mb-Chunk" or the manifest's signature header; value "": none.
Status Publish(jsCtx* js, const std::string& subject, std::span<const std::byte> data,
               const std::string& id, const char* header, const std::string& value,
               uint64_t* stored) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = id.c_str();
  const Published p = PublishMessage(js, subject, data, po, value.empty() ? nullptr : header,
                                     value.empty() ? nullptr : value.c_str());
  *stored = p.stored;
  if (p.status != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("publishing {} to {}", id, subject), p.status, p.code));
  }
  if (p.duplicate) return Unavailable(fmt::format("{} was taken for a duplicate", id));
  return Status::Ok();
}

}  // namespace

SnapshotNames SnapshotNamesFor(std::string_view journal_stream, std::string_view journal_subject) {
  SnapshotNames n;
  n.stream = fmt::format("{}_SNAPSHOTS", journal_stream);
  n.chunks = fmt::format("{}.snapshot", journal_subject);
  n.manifest = fmt::format("{}.snapshot.manifest", journal_subject);
  n.filter = fmt::format("{}.snapshot.>", journal_subject);
  return n;
}

std::string FormatManifest(const SnapshotManifest& m) {
  std::string text =
      fmt::format("seq={} bytes={} chunks={} first={}", m.seq, m.bytes, m.chunks, m.first);
  if (!m.sha256.empty()) text += " sha256=" + m.sha256;
  return text;
}

Result<SnapshotManifest> ParseManifest(std::string_view text) {
  SnapshotManifest m;
  uint64_t* fields[] = {&m.seq, &m.bytes, &m.chunks, &m.first};
  const std::string_view names[] = {"seq=", "bytes=", "chunks=", "first="};
  std::string_view rest = text;
  for (std::size_t i = 0; i < 4; ++i) {
    const std::size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view item = rest.substr(0, end);
    if (!item.starts_with(names[i]) || !ParseU64(item.substr(names[i].size()), fields[i])) {
      return Corruption(fmt::format("snapshot manifest \"{}\" is not \"{}\"", text,
                                    "seq=S bytes=B chunks=N first=F"));
    }
    rest = end < rest.size() ? rest.substr(end + 1) : std::string_view();
  }
  if (rest.starts_with("sha256=")) {
    m.sha256 = std::string(rest.substr(7));
    rest = {};
    const bool hex =
        m.sha256.size() == 64 && std::all_of(m.sha256.begin(), m.sha256.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        });
    if (!hex) return Corruption(fmt::format("snapshot manifest \"{}\": sha256 is not hex", text));
  }
  if (!rest.empty() || m.seq == 0 || m.chunks == 0 || m.first == 0) {
    return Corruption(fmt::format("snapshot manifest \"{}\" is not a snapshot's", text));
  }
  return m;
}

Result<std::optional<std::pair<uint64_t, std::filesystem::path>>> NewestSnapshotFile(
    const std::filesystem::path& data_dir) {
  std::optional<std::pair<uint64_t, std::filesystem::path>> newest;
  std::error_code ec;
  const std::filesystem::path dir = data_dir / "snapshots";
  if (!std::filesystem::exists(dir, ec)) return newest;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    uint64_t seq = 0;
    if (journal::ParseSnapshotFileName(it->path().filename().string(), &seq) &&
        (!newest || seq > newest->first)) {
      newest = std::make_pair(seq, it->path());
    }
  }
  if (ec) return IoError(fmt::format("listing {}: {}", dir.string(), ec.message()));
  return newest;
}

Result<std::optional<SnapshotManifest>> ReadManifest(NatsConnection& nats,
                                                     const SnapshotNames& names,
                                                     const BusVerifier* verifier) {
  natsMsg* m = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s =
      js_GetLastMsg(&m, nats.js, names.stream.c_str(), names.manifest.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr || code == JSStreamNotFoundErr) {
    return std::optional<SnapshotManifest>();
  }
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("snapshot manifest in {}", names.stream), s, static_cast<int>(code)));
  }
  const std::string text(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)));
  Status signed_ok = Status::Ok();
  if (verifier != nullptr) {
    const char* sig = nullptr;
    if (natsMsgHeader_Get(m, kSignatureHeader, &sig) != NATS_OK) sig = nullptr;
    signed_ok = verifier->Verify(SignedKind::kManifest, names.stream, kManifestId,
                                 std::as_bytes(std::span(text.data(), text.size())), sig);
  }
  natsMsg_Destroy(m);
  if (!signed_ok.ok()) {
    return Corruption(fmt::format("the snapshot manifest in {} is refused: {}", names.stream,
                                  signed_ok.message()));
  }
  auto parsed = ParseManifest(text);
  if (!parsed.ok()) return parsed.status();
  if (verifier != nullptr && parsed->sha256.empty()) {
    return Corruption(fmt::format("the snapshot manifest in {} names no sha256", names.stream));
  }
  return std::optional<SnapshotManifest>(*parsed);
}

Result<std::unique_ptr<SnapshotUpload>> SnapshotUpload::Open(
    const SnapshotNames& names, uint64_t seq, const std::filesystem::path& file,
    std::size_t chunk_bytes, uint64_t attempt, const BusSigner* signer) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{} is gone", file.string()));
    return IoError(fmt::format("opening {}: {}", file.string(), std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError(fmt::format("fstat {}: {}", file.string(), std::strerror(err)));
  }
  SnapshotManifest m;
  m.seq = seq;
  m.bytes = static_cast<uint64_t>(st.st_size);
  m.chunks = std::max<uint64_t>(1, (m.bytes + chunk_bytes - 1) / chunk_bytes);
  return std::unique_ptr<SnapshotUpload>(
      new SnapshotUpload(names, fd, m, chunk_bytes, attempt, signer));
}

SnapshotUpload::SnapshotUpload(const SnapshotNames& names, int fd, SnapshotManifest m,
                               std::size_t chunk_bytes, uint64_t attempt, const BusSigner* signer)
    : names_(names),
      fd_(fd),
      m_(m),
      chunk_bytes_(chunk_bytes),
      attempt_(attempt),
      signer_(signer) {}

SnapshotUpload::~SnapshotUpload() { ::close(fd_); }

Result<bool> SnapshotUpload::Step(NatsConnection& nats, uint64_t previous_chunks) {
  if (next_ < m_.chunks) {
    const uint64_t at = next_ * chunk_bytes_;
    const auto n = static_cast<std::size_t>(std::min<uint64_t>(chunk_bytes_, m_.bytes - at));
    buf_.resize(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, buf_.data() + got, n - got, static_cast<off_t>(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return IoError(
            fmt::format("reading snapshot {} at offset {}: {}", m_.seq, at + got,
                        r == 0 ? "the file is shorter than it was" : std::strerror(errno)));
      }
      got += static_cast<std::size_t>(r);
    }
    uint64_t stored = 0;
    MB_RETURN_IF_ERROR(Publish(nats.js, fmt::format("{}.{}", names_.chunks, m_.seq), buf_,
                               fmt::format("snapshot-{}-{}-{}", m_.seq, attempt_, next_),
                               "Mb-Chunk", fmt::format("{}/{}", next_, m_.chunks), &stored));
    if (signer_ != nullptr) sha_.Update(buf_);
    // Chunk i is at stream sequence first + i: nothing else is published
    // to this stream meanwhile (one publisher per venue).
    if (next_ == 0) {
      m_.first = stored;
    } else if (stored != m_.first + next_) {
      return Unavailable(fmt::format(
          "chunk {} of snapshot {} was stored at stream sequence {}, not {}: another writer on {}",
          next_, m_.seq, stored, m_.first + next_, names_.stream));
    }
    ++next_;
    return false;
  }
  std::string sig;
  if (signer_ != nullptr && m_.sha256.empty()) m_.sha256 = HexEncode(sha_.Finish());
  const std::string text = FormatManifest(m_);
  const auto body = std::as_bytes(std::span(text.data(), text.size()));
  if (signer_ != nullptr)
    sig = signer_->Sign(SignedKind::kManifest, names_.stream, kManifestId, body);
  uint64_t stored = 0;
  MB_RETURN_IF_ERROR(Publish(nats.js, names_.manifest, body,
                             fmt::format("snapshot-{}-{}-manifest", m_.seq, attempt_),
                             kSignatureHeader, sig, &stored));
  auto purge = [&](const std::string& filter, uint64_t keep) -> Status {
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Purge.Subject = filter.c_str();
    o.Stream.Purge.Keep = keep;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (natsStatus s = js_PurgeStream(nats.js, names_.stream.c_str(), &o, &code); s != NATS_OK) {
      return Unavailable(NatsError(fmt::format("purging {} from {}", filter, names_.stream), s,
                                   static_cast<int>(code)));
    }
    return Status::Ok();
  };
  // Newest first the stream then holds: this manifest, this snapshot's
  // chunks, the previous snapshot's chunks, then what goes.
  MB_RETURN_IF_ERROR(purge(names_.manifest, 1));
  MB_RETURN_IF_ERROR(purge(names_.filter, 1 + m_.chunks + previous_chunks));
  return true;
}

Result<std::optional<SnapshotManifest>> NewestManifest(const SnapshotSource& source) {
  auto nats = ConnectNats(source.servers, "matchbook snapshot manifest", source.timeout,
                          std::chrono::milliseconds(500), source.security);
  if (!nats.ok()) return nats.status();
  return ReadManifest(**nats, SnapshotNamesFor(source.stream, source.subject),
                      source.verifier.get());
}

Result<journal::SnapshotMeta> FetchNewestSnapshot(const SnapshotSource& source,
                                                  const std::filesystem::path& data_dir) {
  auto nats = ConnectNats(source.servers, "matchbook snapshot fetch", source.timeout,
                          std::chrono::milliseconds(500), source.security);
  if (!nats.ok()) return nats.status();
  const SnapshotNames names = SnapshotNamesFor(source.stream, source.subject);
  auto manifest = ReadManifest(**nats, names, source.verifier.get());
  if (!manifest.ok()) return manifest.status();
  if (!*manifest) {
    return NotFound(fmt::format("no snapshot on the bus yet (stream {}, subject {})", names.stream,
                                names.manifest));
  }
  const SnapshotManifest& m = **manifest;
  const std::string subject = fmt::format("{}.{}", names.chunks, m.seq);
  if (m.bytes > m.chunks * (uint64_t{64} << 20)) {
    return Corruption(fmt::format("snapshot manifest \"{}\": more bytes than {} messages carry",
                                  FormatManifest(m), m.chunks));
  }
  std::vector<std::byte> bytes;
  bytes.reserve(m.bytes);
  for (uint64_t i = 0; i < m.chunks; ++i) {
    natsMsg* msg = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s =
        js_GetMsg(&msg, (*nats)->js, names.stream.c_str(), m.first + i, nullptr, &code);
    if (s != NATS_OK) {
      return Unavailable(NatsError(fmt::format("chunk {} of snapshot {} (stream sequence {}) in {}",
                                               i, m.seq, m.first + i, names.stream),
                                   s, static_cast<int>(code)));
    }
    const char* chunk = nullptr;
    const bool has_chunk = natsMsgHeader_Get(msg, "Mb-Chunk", &chunk) == NATS_OK;
    const std::string want = fmt::format("{}/{}", i, m.chunks);
    const bool fits =
        natsMsg_GetSubject(msg) == subject && has_chunk && chunk != nullptr && want == chunk;
    if (fits) {
      const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(msg));
      bytes.insert(bytes.end(), data, data + natsMsg_GetDataLength(msg));
    }
    natsMsg_Destroy(msg);
    if (!fits) {
      return Corruption(
          fmt::format("stream {} sequence {} is not chunk {} of snapshot {} (its manifest says so)",
                      names.stream, m.first + i, want, m.seq));
    }
  }
  if (bytes.size() != m.bytes) {
    return Corruption(fmt::format("snapshot {} on the bus has {} bytes, its manifest says {}",
                                  m.seq, bytes.size(), m.bytes));
  }
  if (source.verifier != nullptr && Sha256::Hex(bytes) != m.sha256) {
    return Corruption(fmt::format(
        "snapshot {} on the bus is refused: its chunks' SHA-256 is not the one its signed "
        "manifest names",
        m.seq));
  }
  std::error_code ec;
  const std::filesystem::path dir = data_dir / "snapshots";
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("creating {}: {}", dir.string(), ec.message()));
  // Checked under a name of its own before it takes the snapshot's name: a
  // copy that does not check never replaces anything.
  const std::filesystem::path path = dir / journal::SnapshotFileName(m.seq);
  std::filesystem::path fetched = path;
  fetched += ".fetched";
  MB_RETURN_IF_ERROR(WriteFileAtomically(fetched, bytes, 0600));  // it holds API secrets
  auto loaded = journal::ReadSnapshot(fetched);
  Status bad;
  if (!loaded.ok()) {
    bad = Status(loaded.status().code(), fmt::format("snapshot {} fetched from the bus: {}", m.seq,
                                                     loaded.status().message()));
  } else if (loaded->meta.seq != m.seq) {
    bad = Corruption(fmt::format("the bus's snapshot {} holds the state at sequence {}", m.seq,
                                 loaded->meta.seq));
  }
  if (!bad.ok()) {
    std::filesystem::remove(fetched, ec);
    return bad;
  }
  std::filesystem::rename(fetched, path, ec);
  if (ec) return IoError(fmt::format("renaming {}: {}", fetched.string(), ec.message()));
  MB_RETURN_IF_ERROR(SyncDir(dir));
  return loaded->meta;
}

}  // namespace mb::bus
