#include "app/secrets.h"

#include <fmt/format.h>
#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bus/nats.h"
#include "bus/publisher.h"
#include "bus/snapshots.h"
#include "codec/codec.h"
#include "common/file.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "gateway/sealed_secret.h"
#include "journal/archive.h"
#include "journal/data_dir.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"

namespace mb::app {

namespace fs = std::filesystem;

namespace {

// Stored secret → what replaces it, the same length: the records' sizes and
// offsets never change.
using Replacements = std::map<std::string, std::string, std::less<>>;
using Checksums = std::map<uint64_t, uint64_t>;  // seq → the record's new checksum

// Replaces, in a segment's bytes, every secret an AuthChanged event of a
// record holds that `with` names; the records changed, their new checksums
// in *changed. `what` names the segment in errors.
Result<uint64_t> RewriteSegment(std::vector<std::byte>* bytes, const Replacements& with,
                                const std::string& what, Checksums* changed) {
  std::span<std::byte> all(*bytes);
  if (all.size() < journal::kSegmentHeaderSize) return uint64_t{0};
  std::size_t at = journal::kSegmentHeaderSize;
  uint64_t records = 0;
  while (at < all.size()) {
    const journal::ParsedRecord r = journal::ParseRecord(all.subspan(at));
    if (r.error != journal::RecordError::kOk) break;  // a torn tail: recovery's business
    engine::EventBuffer events;
    const journal::JournalRecord record{r.header.seq, r.header.checksum, r.payload};
    MB_RETURN_IF_ERROR(journal::DecodeOutcome(record, &events));
    bool hit = false;
    std::span<std::byte> payload = all.subspan(at + journal::kRecordHeaderSize, r.payload.size());
    for (const engine::Event& e : events) {
      const auto* a = std::get_if<engine::AuthChanged>(&e.body);
      if (a == nullptr || a->kind != engine::AuthChangeKind::kCreateKey || a->ed25519) continue;
      const std::string_view secret = a->secret.view();
      const auto to = with.find(secret);
      if (to == with.end()) continue;
      MB_CHECK(to->second.size() == secret.size());
      // The codec writes a FixedString's bytes as they are: replace them there.
      auto* p = reinterpret_cast<char*>(payload.data());
      const std::string_view text(p, payload.size());
      const std::size_t pos = text.find(secret);
      if (pos == std::string_view::npos) {
        return Corruption(fmt::format(
            "{}: record {} holds a key's secret the codec did not write verbatim: cannot "
            "rewrite it",
            what, r.header.seq));
      }
      std::memcpy(p + pos, to->second.data(), secret.size());
      hit = true;
    }
    if (hit) {
      journal::EncodeRecordHeader(r.header.type, r.header.seq, payload,
                                  all.subspan(at).first<journal::kRecordHeaderSize>());
      const journal::ParsedRecord again = journal::ParseRecord(all.subspan(at));
      if (again.error != journal::RecordError::kOk) {
        return Corruption(
            fmt::format("{}: record {} does not parse once rewritten", what, r.header.seq));
      }
      (*changed)[r.header.seq] = again.header.checksum;
      ++records;
    }
    at += r.size;
  }
  return records;
}

// The state the data directory recovers to (read-only).
Result<engine::EngineImage> RecoveredImage(const journal::DataDir& dir, const Config& config) {
  engine::Engine engine(config.engine);
  journal::RecoveryOptions ro;
  ro.progress = false;
  auto rec = journal::Recover(dir, &engine, ro);
  if (!rec.ok()) return rec.status();
  return engine.ExportImage();
}

// Every live and archived segment, then every snapshot (its image's secrets
// replaced, its state hash and the checksum of the record it stands on
// recomputed), with `with` applied.
Status RewriteEverywhere(const journal::DataDir& dir, const Config& config,
                         const fs::path& archive_dir, const Replacements& with,
                         ScrubReport* report) {
  Checksums changed;
  if (!with.empty()) {
    auto segments = dir.ListSegments();
    if (!segments.ok()) return segments.status();
    for (const journal::FileEntry& s : *segments) {
      auto bytes = ReadFile(s.path);
      if (!bytes.ok()) return bytes.status();
      auto n = RewriteSegment(&*bytes, with, s.path.string(), &changed);
      if (!n.ok()) return n.status();
      if (*n == 0) continue;
      MB_RETURN_IF_ERROR(WriteFileAtomically(s.path, *bytes, 0600));
      report->records += *n;
      ++report->segments;
    }
    auto archived = journal::ListArchive(archive_dir);
    if (!archived.ok()) return archived.status();
    for (const journal::ArchivedSegment& a : *archived) {
      auto bytes = journal::ReadArchivedSegment(a.path);
      if (!bytes.ok()) return bytes.status();
      auto n = RewriteSegment(&*bytes, with, a.path.string(), &changed);
      if (!n.ok()) return n.status();
      if (*n == 0) continue;
      auto written = journal::WriteArchivedSegment(a.path, *bytes);
      if (!written.ok()) return written.status();
      report->records += *n;
      ++report->archived_segments;
    }
  }
  auto snapshots = dir.ListSnapshots();
  if (!snapshots.ok()) return snapshots.status();
  for (const journal::FileEntry& s : *snapshots) {
    auto loaded = journal::ReadSnapshot(s.path);
    if (!loaded.ok()) return loaded.status();
    bool hit = false;
    for (engine::ImageApiKey& k : loaded->image.api_keys) {
      if (k.ed25519) continue;
      if (const auto to = with.find(k.secret.view()); to != with.end()) {
        MB_CHECK(k.secret.Assign(to->second));
        hit = true;
      }
    }
    const auto moved = changed.find(loaded->meta.seq);
    if (!hit && moved == changed.end()) continue;
    journal::SnapshotMeta meta;
    meta.record_checksum = moved != changed.end() ? moved->second : loaded->meta.record_checksum;
    auto written =
        journal::WriteSnapshot(dir, loaded->image, &meta, config.runtime.snapshots.zstd_level,
                               static_cast<uint32_t>(snapshots->size()));
    if (!written.ok()) return written.status();
    ++report->snapshots;
  }
  return Status::Ok();
}

Status PurgeBus(const Config& config) {
  const BusConfig& b = config.runtime.bus;
  auto servers = bus::ParseServers(b.nats);
  if (!servers.ok()) return servers.status();
  MB_RETURN_IF_ERROR(bus::CheckNatsSecurity(b.security));
  auto nats =
      bus::ConnectNats(*servers, "matchbook secrets", std::chrono::milliseconds(b.timeout_ms),
                       std::chrono::milliseconds(500), b.security);
  if (!nats.ok()) return nats.status();
  const std::string stream = b.stream.empty() ? bus::DefaultStream(config.runtime.venue) : b.stream;
  const std::string subject =
      b.subject.empty() ? bus::DefaultSubject(config.runtime.venue) : b.subject;
  for (const std::string& name : {stream, bus::SnapshotNamesFor(stream, subject).stream}) {
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_PurgeStream((*nats)->js, name.c_str(), nullptr, &code);
    if (s != NATS_OK && code != JSStreamNotFoundErr) {
      return Unavailable(
          bus::NatsError(fmt::format("purging stream {}", name), s, static_cast<int>(code)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ScrubReport> ScrubSecrets(const Config& config, const fs::path& archive_dir) {
  auto dir = journal::DataDir::Open(config.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();

  // 1. Which secrets: the revoked keys' plain ones; a live one refuses.
  auto image = RecoveredImage(*dir, config);
  if (!image.ok()) return image.status();
  Replacements with;
  std::vector<std::string> live;
  for (const engine::ImageApiKey& k : image->api_keys) {
    if (k.ed25519 || gateway::FormOf(k.secret.view()) != gateway::SecretForm::kPlain) continue;
    if (k.revoked) {
      with.emplace(k.secret.view(), gateway::Scrubbed(k.secret.view()));
    } else {
      live.push_back(fmt::format("{}... (account {})", k.key.view().substr(0, 8), Raw(k.account)));
    }
  }
  if (!live.empty()) {
    std::string names;
    for (const std::string& n : live) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument(fmt::format(
        "{} API key(s) in use hold a secret in plain text: {}. Give their owners new keys "
        "(POST /admin/v1/accounts/{{id}}/apiKeys), revoke these (DELETE "
        "/admin/v1/apiKeys/{{key}}), then scrub",
        live.size(), names));
  }
  ScrubReport report;
  report.secrets = with.size();

  // 2, 3. The journal (live segments, then the archive) and the snapshots.
  MB_RETURN_IF_ERROR(RewriteEverywhere(*dir, config, archive_dir, with, &report));

  // An earlier version's auth.json, kept after its import, holds the same
  // plain secrets.
  {
    const fs::path imported = fs::path(config.runtime.data_dir) / "auth.json.imported";
    std::error_code ec;
    if (!with.empty() && fs::remove(imported, ec)) report.removed_files = 1;
    if (ec) return ErrnoStatus(imported, "remove", ec.value());
  }

  // 4. The bus: what it carried of the old bytes goes.
  // Again on a second run (the first may have found NATS down).
  const gateway::SecretCensus census = gateway::CountSecrets(*image);
  if (!config.runtime.bus.nats.empty() && (report.secrets > 0 || census.scrubbed > 0)) {
    MB_RETURN_IF_ERROR(PurgeBus(config));
    report.stream_purged = true;
  }
  return report;
}

Result<ScrubReport> RotateMasterKey(const Config& config, const fs::path& archive_dir,
                                    const fs::path& new_key_file) {
  const fs::path key_file = MasterKeyFile(config);
  auto old_key = gateway::LoadMasterKey(key_file);
  if (!old_key.ok()) return old_key.status();
  auto new_key = gateway::LoadMasterKey(new_key_file);
  if (!new_key.ok()) {
    return Status(new_key.status().code(), "--new-master-key: " + new_key.status().message());
  }
  if (old_key->ToHex() == new_key->ToHex()) {
    return InvalidArgument("--new-master-key: " + new_key_file.string() +
                           " is the master key in use already");
  }
  auto dir = journal::DataDir::Open(config.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  auto image = RecoveredImage(*dir, config);
  if (!image.ok()) return image.status();

  // Every sealed secret the old key opens is sealed again with the new one;
  // one the new key opens already was (a rotation cut short and run again).
  Replacements with;
  for (const engine::ImageApiKey& k : image->api_keys) {
    if (k.ed25519 || gateway::FormOf(k.secret.view()) != gateway::SecretForm::kSealed) continue;
    if (auto raw = old_key->Open(k.key.view(), k.secret.view()); raw.ok()) {
      with.emplace(k.secret.view(), new_key->Seal(k.key.view(), *raw));
    } else if (!new_key->Open(k.key.view(), k.secret.view()).ok()) {
      return InvalidArgument(fmt::format(
          "the secret of API key {}... opens with neither {} nor {}: not this venue's keys",
          k.key.view().substr(0, 8), key_file.string(), new_key_file.string()));
    }
  }
  ScrubReport report;
  report.secrets = with.size();
  MB_RETURN_IF_ERROR(RewriteEverywhere(*dir, config, archive_dir, with, &report));
  // Last: until here the old key still opens what was not rewritten yet.
  MB_RETURN_IF_ERROR(WriteFileAtomically(key_file, new_key->ToHex() + "\n", 0600));
  if (!config.runtime.bus.nats.empty()) {
    MB_RETURN_IF_ERROR(PurgeBus(config));
    report.stream_purged = true;
  }
  return report;
}

}  // namespace mb::app
