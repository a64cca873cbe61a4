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
#include "projection/store.h"

namespace mb::app {

namespace fs = std::filesystem;

namespace {

// Stored secret → what replaces it, the same length: the records' sizes and
// offsets never change.
using Replacements = std::map<std::string, std::string, std::less<>>;
using Checksums = std::map<uint64_t, uint64_t>;  // seq → the record's checksum

// Replaces, in a segment's bytes, every secret an AuthChanged event of a
// record holds that `with` names. Returns the records changed; *checksums
// gets the checksum (new or unchanged) of every record `wanted` names.
// `what` names the segment in errors.
Result<uint64_t> RewriteSegment(std::vector<std::byte>* bytes, const Replacements& with,
                                const std::set<uint64_t>& wanted, const std::string& what,
                                Checksums* checksums) {
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
    uint64_t checksum = r.header.checksum;
    if (hit) {
      journal::EncodeRecordHeader(r.header.type, r.header.seq, payload,
                                  all.subspan(at).first<journal::kRecordHeaderSize>());
      const journal::ParsedRecord again = journal::ParseRecord(all.subspan(at));
      if (again.error != journal::RecordError::kOk) {
        return Corruption(
            fmt::format("{}: record {} does not parse once rewritten", what, r.header.seq));
      }
      checksum = again.header.checksum;
      ++records;
    }
    if (wanted.count(r.header.seq) != 0) (*checksums)[r.header.seq] = checksum;
    at += r.size;
  }
  return records;
}

// Every form in which the data directory holds each HMAC key's secret — in
// any snapshot, any live or archived record — and whether the key is
// revoked. Read without recovering the state: a rewrite cut short leaves
// snapshots that recovery refuses until the rewrite is run again.
struct StoredKey {
  std::set<std::string, std::less<>> forms;
  bool revoked = false;
  uint32_t account = 0;
};
using StoredKeys = std::map<std::string, StoredKey, std::less<>>;

Result<StoredKeys> ReadStoredKeys(const journal::DataDir& dir, const fs::path& archive_dir) {
  StoredKeys keys;
  auto snapshots = dir.ListSnapshots();
  if (!snapshots.ok()) return snapshots.status();
  for (const journal::FileEntry& s : *snapshots) {
    auto loaded = journal::ReadSnapshot(s.path);
    if (!loaded.ok()) return loaded.status();
    for (const engine::ImageApiKey& k : loaded->image.api_keys) {
      if (k.ed25519) continue;
      StoredKey& e = keys[std::string(k.key.view())];
      e.forms.emplace(k.secret.view());
      e.revoked = e.revoked || k.revoked;
      e.account = Raw(k.account);
    }
  }
  journal::ScanOptions so;
  so.archive_dir = archive_dir;
  auto scanned = journal::ScanJournal(dir, so, [&](const journal::JournalRecord& r) {
    engine::EventBuffer events;
    MB_RETURN_IF_ERROR(journal::DecodeOutcome(r, &events));
    for (const engine::Event& e : events) {
      const auto* a = std::get_if<engine::AuthChanged>(&e.body);
      if (a == nullptr || a->ed25519) continue;
      if (a->kind == engine::AuthChangeKind::kCreateKey) {
        StoredKey& k = keys[std::string(a->subject.view())];
        k.forms.emplace(a->secret.view());
        k.account = Raw(a->account);
      } else if (a->kind == engine::AuthChangeKind::kRevokeKey) {
        keys[std::string(a->subject.view())].revoked = true;
      }
    }
    return Status::Ok();
  });
  if (!scanned.ok()) return scanned.status();
  return keys;
}

// Every live and archived segment, then every snapshot (its image's secrets
// replaced, its state hash and the checksum of the record it stands on made
// the journal's), with `with` applied; then the history projection told the
// checksum of the record it last applied, if that record changed.
Status RewriteEverywhere(const journal::DataDir& dir, const Config& config,
                         const fs::path& archive_dir,
                         std::span<const projection::StoreOptions> store_options,
                         const Replacements& with, ScrubReport* report) {
  // The stores first: a database that cannot be reached changes nothing.
  std::vector<std::unique_ptr<projection::Store>> stores;
  std::vector<projection::ProjectorState> projected;
  for (const projection::StoreOptions& so : store_options) {
    auto store = projection::OpenStore(so, config.engine);
    if (!store.ok()) {
      return Status(store.status().code(),
                    "the history store and projection must learn the rewritten records' "
                    "checksums, and one cannot be opened: " +
                        store.status().message());
    }
    auto state = (*store)->State();
    if (!state.ok()) return state.status();
    stores.push_back(std::move(*store));
    projected.push_back(*state);
  }
  auto snapshots = dir.ListSnapshots();
  if (!snapshots.ok()) return snapshots.status();
  std::set<uint64_t> wanted;
  for (const journal::FileEntry& s : *snapshots) wanted.insert(s.seq);
  for (const projection::ProjectorState& p : projected) {
    if (p.applied_seq > 0) wanted.insert(p.applied_seq);
  }

  Checksums checksums;
  auto segments = dir.ListSegments();
  if (!segments.ok()) return segments.status();
  for (const journal::FileEntry& s : *segments) {
    auto bytes = ReadFile(s.path);
    if (!bytes.ok()) return bytes.status();
    auto n = RewriteSegment(&*bytes, with, wanted, s.path.string(), &checksums);
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
    auto n = RewriteSegment(&*bytes, with, wanted, a.path.string(), &checksums);
    if (!n.ok()) return n.status();
    if (*n == 0) continue;
    auto written = journal::WriteArchivedSegment(a.path, *bytes);
    if (!written.ok()) return written.status();
    report->records += *n;
    ++report->archived_segments;
  }

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
    const auto record = checksums.find(loaded->meta.seq);
    const bool moved = record != checksums.end() && record->second != loaded->meta.record_checksum;
    if (!hit && !moved) continue;
    journal::SnapshotMeta meta;
    meta.record_checksum = moved ? record->second : loaded->meta.record_checksum;
    auto written =
        journal::WriteSnapshot(dir, loaded->image, &meta, config.runtime.snapshots.zstd_level,
                               static_cast<uint32_t>(snapshots->size()));
    if (!written.ok()) return written.status();
    ++report->snapshots;
  }

  for (std::size_t i = 0; i < stores.size(); ++i) {
    const auto record = checksums.find(projected[i].applied_seq);
    if (record == checksums.end() || record->second == projected[i].applied_checksum) continue;
    projection::ProjectorState state = projected[i];
    state.applied_checksum = record->second;
    projection::RowBatch none;
    MB_RETURN_IF_ERROR(stores[i]->Commit(none, state));
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

Result<ScrubReport> ScrubSecrets(const Config& config, const fs::path& archive_dir,
                                 std::span<const projection::StoreOptions> store_options) {
  auto dir = journal::DataDir::Open(config.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();

  // 1. Which secrets: the revoked keys' plain ones; a live one refuses.
  auto keys = ReadStoredKeys(*dir, archive_dir);
  if (!keys.ok()) return keys.status();
  Replacements with;
  std::vector<std::string> live;
  bool scrubbed_before = false;
  for (const auto& [key, k] : *keys) {
    for (const std::string& form : k.forms) {
      const gateway::SecretForm f = gateway::FormOf(form);
      scrubbed_before = scrubbed_before || f == gateway::SecretForm::kScrubbed;
      if (f != gateway::SecretForm::kPlain) continue;
      if (k.revoked) {
        with.emplace(form, gateway::Scrubbed(form));
      } else {
        live.push_back(fmt::format("{}... (account {})", key.substr(0, 8), k.account));
      }
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
  MB_RETURN_IF_ERROR(RewriteEverywhere(*dir, config, archive_dir, store_options, with, &report));

  // An earlier version's auth.json, kept after its import, holds the same
  // plain secrets; no key in use has one any more.
  {
    const fs::path imported = fs::path(config.runtime.data_dir) / "auth.json.imported";
    std::error_code ec;
    if (fs::remove(imported, ec)) report.removed_files = 1;
    if (ec) return ErrnoStatus(imported, "remove", ec.value());
  }

  // 4. The bus: what it carried of the old bytes goes.
  // Again on a second run (the first may have found NATS down).
  if (!config.runtime.bus.nats.empty() && (report.secrets > 0 || scrubbed_before)) {
    MB_RETURN_IF_ERROR(PurgeBus(config));
    report.stream_purged = true;
  }
  return report;
}

Result<ScrubReport> RotateMasterKey(const Config& config, const fs::path& archive_dir,
                                    std::span<const projection::StoreOptions> store_options,
                                    const fs::path& new_key_file) {
  const fs::path key_file = MasterKeyFile(config);
  auto old_key = gateway::LoadMasterKey(key_file);
  if (!old_key.ok()) return old_key.status();
  auto new_key = gateway::LoadMasterKey(new_key_file);
  if (!new_key.ok()) {
    return Status(new_key.status().code(), "--new-master-key: " + new_key.status().message());
  }
  auto dir = journal::DataDir::Open(config.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  auto keys = ReadStoredKeys(*dir, archive_dir);
  if (!keys.ok()) return keys.status();
  if (old_key->ToHex() == new_key->ToHex()) {
    return InvalidArgument("--new-master-key: " + new_key_file.string() +
                           " is the master key in use already");
  }

  // Every sealed secret the old key opens is sealed again with the new one;
  // one the new key opens already was (a rotation cut short and run again,
  // even one that installed the key and then failed to purge the bus).
  Replacements with;
  for (const auto& [key, k] : *keys) {
    for (const std::string& form : k.forms) {
      if (gateway::FormOf(form) != gateway::SecretForm::kSealed) continue;
      if (new_key->Open(key, form).ok()) continue;
      auto raw = old_key->Open(key, form);
      if (!raw.ok()) {
        return InvalidArgument(fmt::format(
            "the secret of API key {}... opens with neither {} nor {}: not this venue's keys",
            key.substr(0, 8), key_file.string(), new_key_file.string()));
      }
      with.emplace(form, new_key->Seal(key, *raw));
    }
  }
  ScrubReport report;
  report.secrets = with.size();
  MB_RETURN_IF_ERROR(RewriteEverywhere(*dir, config, archive_dir, store_options, with, &report));
  // The bus before the key: a purge that fails leaves the old key in place,
  // and running again finds every secret sealed with the new one already.
  if (!config.runtime.bus.nats.empty()) {
    MB_RETURN_IF_ERROR(PurgeBus(config));
    report.stream_purged = true;
  }
  // Last: until here the old key still opens what was not rewritten yet.
  MB_RETURN_IF_ERROR(WriteFileAtomically(key_file, new_key->ToHex() + "\n", 0600));
  return report;
}

}  // namespace mb::app
