#include "bus/snapshots.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "bus/nats.h"
#include "common/file.h"
#include "journal/format.h"

namespace mb::bus {
namespace {

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

Status Publish(jsCtx* js, const std::string& subject, std::span<const std::byte> data,
               const std::string& id, const std::string& chunk, uint64_t* stored) {
  natsMsg* m = nullptr;
  natsStatus s =
      natsMsg_Create(&m, subject.c_str(), nullptr, reinterpret_cast<const char*>(data.data()),
                     static_cast<int>(data.size()));
  if (s == NATS_OK && !chunk.empty()) s = natsMsgHeader_Set(m, "Mb-Chunk", chunk.c_str());
  if (s != NATS_OK) {
    if (m != nullptr) natsMsg_Destroy(m);
    return Unavailable(NatsError("snapshot message", s, 0));
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = id.c_str();
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&ack, js, m, &po, &code);
  natsMsg_Destroy(m);
  if (ack != nullptr) {
    *stored = ack->Sequence;
    jsPubAck_Destroy(ack);
  }
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("publishing {} to {}", id, subject), s, static_cast<int>(code)));
  }
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
  return fmt::format("seq={} bytes={} chunks={} first={}", m.seq, m.bytes, m.chunks, m.first);
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
                                                     const SnapshotNames& names) {
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
  auto parsed = ParseManifest(
      std::string_view(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))));
  natsMsg_Destroy(m);
  if (!parsed.ok()) return parsed.status();
  return std::optional<SnapshotManifest>(*parsed);
}

Result<SnapshotManifest> PublishSnapshotFile(NatsConnection& nats, const SnapshotNames& names,
                                             uint64_t seq, const std::filesystem::path& file,
                                             std::size_t chunk_bytes, uint64_t drop) {
  auto bytes = ReadFile(file);
  if (!bytes.ok()) return bytes.status();
  SnapshotManifest m;
  m.seq = seq;
  m.bytes = bytes->size();
  m.chunks = std::max<uint64_t>(1, (bytes->size() + chunk_bytes - 1) / chunk_bytes);
  const std::string subject = fmt::format("{}.{}", names.chunks, seq);
  for (uint64_t i = 0; i < m.chunks; ++i) {
    const std::size_t at = i * chunk_bytes;
    const std::size_t n = std::min(chunk_bytes, bytes->size() - at);
    uint64_t stored = 0;
    MB_RETURN_IF_ERROR(Publish(nats.js, subject, std::span(*bytes).subspan(at, n),
                               fmt::format("snapshot-{}-{}", seq, i),
                               fmt::format("{}/{}", i, m.chunks), &stored));
    if (i == 0) m.first = stored;
  }
  const std::string text = FormatManifest(m);
  uint64_t stored = 0;
  MB_RETURN_IF_ERROR(Publish(nats.js, names.manifest,
                             std::as_bytes(std::span(text.data(), text.size())),
                             fmt::format("snapshot-{}-manifest", seq), "", &stored));
  auto purge = [&](const std::string& filter, uint64_t keep) -> Status {
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Purge.Subject = filter.c_str();
    o.Stream.Purge.Keep = keep;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (natsStatus s = js_PurgeStream(nats.js, names.stream.c_str(), &o, &code); s != NATS_OK) {
      return Unavailable(NatsError(fmt::format("purging {} from {}", filter, names.stream), s,
                                   static_cast<int>(code)));
    }
    return Status::Ok();
  };
  MB_RETURN_IF_ERROR(purge(names.manifest, 1));
  if (drop != 0 && drop != seq)
    MB_RETURN_IF_ERROR(purge(fmt::format("{}.{}", names.chunks, drop), 0));
  return m;
}

Result<journal::SnapshotMeta> FetchNewestSnapshot(const SnapshotSource& source,
                                                  const std::filesystem::path& data_dir) {
  auto nats = ConnectNats(source.servers, "matchbook snapshot fetch", source.timeout,
                          std::chrono::milliseconds(500));
  if (!nats.ok()) return nats.status();
  const SnapshotNames names = SnapshotNamesFor(source.stream, source.subject);
  auto manifest = ReadManifest(**nats, names);
  if (!manifest.ok()) return manifest.status();
  if (!*manifest) {
    return NotFound(fmt::format("no snapshot on the bus yet (stream {}, subject {})", names.stream,
                                names.manifest));
  }
  const SnapshotManifest& m = **manifest;
  const std::string subject = fmt::format("{}.{}", names.chunks, m.seq);
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
  std::error_code ec;
  const std::filesystem::path dir = data_dir / "snapshots";
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("creating {}: {}", dir.string(), ec.message()));
  const std::filesystem::path path = dir / journal::SnapshotFileName(m.seq);
  MB_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  auto loaded = journal::ReadSnapshot(path);
  if (!loaded.ok()) {
    std::filesystem::remove(path, ec);
    return Status(loaded.status().code(), fmt::format("snapshot {} fetched from the bus: {}", m.seq,
                                                      loaded.status().message()));
  }
  return loaded->meta;
}

}  // namespace mb::bus
