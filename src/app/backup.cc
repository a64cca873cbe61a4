#include "app/backup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <memory>
#include <optional>
#include <thread>

#include "common/file.h"
#include "engine/engine.h"
#include "gateway/sealed_secret.h"
#include "journal/data_dir.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"

namespace mb::app {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view kManifest = "manifest.json";
// Operator state kept beside the journal (gateway/auth.h): the admin token,
// and the accounts and keys of a version before they entered the journal.
constexpr std::string_view kOperatorFiles[] = {"auth.json", "admin.token"};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An open file descriptor, closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// SHA-256 of a stream of bytes, as lower-case hex.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Update(const void* data, std::size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// Reads the first `limit` bytes of `from` (all of it when nullopt), hashing
// them, and writes them to `to` (unless empty) with mode `mode`, synced.
// Fails when the file holds fewer than `limit` bytes.
Result<BackupFile> CopyAndHash(const fs::path& from, const fs::path& to,
                               std::optional<uint64_t> limit, mode_t mode) {
  Fd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.fd < 0) return ErrnoStatus(from, "open", errno);
  std::optional<Fd> out;
  if (!to.empty()) {
    out.emplace(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (out->fd < 0) return ErrnoStatus(to, "create", errno);
  }
  Sha256 sha;
  std::vector<std::byte> buf(1 << 20);
  uint64_t copied = 0;
  for (;;) {
    std::size_t want = buf.size();
    if (limit) want = static_cast<std::size_t>(std::min<uint64_t>(want, *limit - copied));
    if (want == 0) break;
    const ssize_t n = ::read(in.fd, buf.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(from, "read", errno);
    }
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<std::size_t>(n));
    if (out) {
      Status st = WriteAll(out->fd, std::span(buf.data(), static_cast<std::size_t>(n)), to);
      if (!st.ok()) return st;
    }
    copied += static_cast<uint64_t>(n);
  }
  if (limit && copied != *limit) {
    return Corruption(
        fmt::format("{}: {} bytes, expected at least {}", from.string(), copied, *limit));
  }
  if (out && ::fsync(out->fd) != 0) return ErrnoStatus(to, "fsync", errno);
  return BackupFile{"", copied, sha.Hex()};
}

uint64_t NewestSnapshot(const journal::DataDir& dir) {
  auto list = dir.ListSnapshots();
  return list.ok() && !list->empty() ? list->back().seq : 0;
}

// Where record `seq` ends: its segment and the offset just past it.
struct RecordEnd {
  fs::path segment;
  uint64_t end = 0;
};

Result<RecordEnd> FindRecordEnd(const journal::DataDir& dir, uint64_t config_hash, uint64_t seq) {
  journal::ScanOptions so;
  so.config_hash = config_hash;
  so.deliver_from = seq;
  so.check_all = false;
  so.progress = false;
  std::optional<RecordEnd> found;
  auto scanned = journal::ScanJournal(dir, so, [&](const journal::JournalRecord& r) -> Status {
    if (r.seq != seq) return Status::Ok();
    found = RecordEnd{*r.segment, r.offset + journal::kRecordHeaderSize + r.payload.size()};
    // Nothing after it is needed: stop reading a journal that may still grow.
    return Unavailable("found");
  });
  if (found) return *found;
  if (!scanned.ok()) return scanned.status();
  return Corruption(fmt::format("{}: no journal record {}", dir.journal_dir().string(), seq));
}

Result<uint64_t> JournalEnd(const journal::DataDir& dir, uint64_t config_hash) {
  journal::ScanOptions so;
  so.config_hash = config_hash;
  so.deliver_from = UINT64_MAX;
  so.check_all = false;
  so.progress = false;
  auto scanned = journal::ScanJournal(dir, so, nullptr);
  if (!scanned.ok()) return scanned.status();
  return scanned->segments == 0 ? 0 : scanned->last_seq;
}

// Replays the directory (snapshot + journal, read-only): its last sequence
// and state hash.
// and state hash (and the state, when `image` is given).
Result<journal::RecoveryReport> RecoverReadOnly(const fs::path& root,
                                                const engine::EngineConfig& config,
                                                engine::EngineImage* image = nullptr) {
  auto dir = journal::DataDir::Open(root, journal::OpenMode::kReadOnly);
  if (!dir.ok()) return dir.status();
  engine::Engine engine(config);
  journal::RecoveryOptions ro;
  ro.progress = false;
  auto rec = journal::Recover(*dir, &engine, ro);
  if (rec.ok() && image != nullptr) *image = engine.ExportImage();
  return rec;
}

// The restored directory's master key: `file` must open every sealed secret
// of `image`, and is copied to <data_dir>/master.key. None given: refused
// when a secret is sealed.
Status InstallMasterKey(const fs::path& file, const engine::EngineImage& image,
                        const fs::path& data_dir) {
  const gateway::SecretCensus census = gateway::CountSecrets(image);
  if (file.empty()) {
    if (census.sealed == 0) return Status::Ok();
    return InvalidArgument(fmt::format(
        "the backup's {} API key secrets are sealed with the venue's master key, which a backup "
        "never holds: give it with --master-key FILE",
        census.sealed));
  }
  auto key = gateway::LoadMasterKey(file);
  if (!key.ok()) return key.status();
  MB_RETURN_IF_ERROR(gateway::CheckMasterKey(*key, image, file));
  return WriteFileAtomically(data_dir / "master.key", key->ToHex() + "\n", 0600);
}

Status EmptyOrAbsent(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec)) {
    return InvalidArgument(
        fmt::format("{} {} exists and is not an empty directory", what, dir.string()));
  }
  return Status::Ok();
}

std::string ToJson(const BackupManifest& m) {
  json::array files;
  for (const BackupFile& f : m.files) {
    files.push_back(json::object{{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  }
  json::object o{{"format", m.format},
                 {"seq", m.seq},
                 {"stateHash", fmt::format("{:016x}", m.state_hash)},
                 {"configHash", fmt::format("{:016x}", m.config_hash)},
                 {"snapshotSeq", m.snapshot_seq},
                 {"createdTime", m.created_ms},
                 {"live", m.live},
                 {"files", std::move(files)}};
  return json::serialize(o) + "\n";
}

// A path a manifest may name: a snapshot, a segment or an operator file.
bool AllowedPath(std::string_view p) {
  uint64_t seq = 0;
  if (p.starts_with("snapshots/")) return journal::ParseSnapshotFileName(p.substr(10), &seq);
  if (p.starts_with("journal/")) return journal::ParseSegmentFileName(p.substr(8), &seq);
  for (std::string_view f : kOperatorFiles) {
    if (p == f) return true;
  }
  return false;
}

// Every file of a backup holds secrets: the admin token, and the API keys'
// secrets in the journal's records and the snapshot's image.
mode_t ModeOf(std::string_view) { return 0600; }

}  // namespace

Result<BackupManifest> ReadManifest(const fs::path& dir) {
  const fs::path path = dir / kManifest;
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto bad = [&](std::string_view why) {
    return Corruption(fmt::format("{}: {}", path.string(), why));
  };
  boost::system::error_code ec;
  json::value v = json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), ec);
  if (ec || !v.is_object()) return bad("not a JSON object");
  try {
    const json::object& o = v.as_object();
    BackupManifest m;
    m.format = static_cast<int>(o.at("format").to_number<int64_t>());
    if (m.format != 1) return bad(fmt::format("format {} is not one this build reads", m.format));
    m.seq = o.at("seq").to_number<uint64_t>();
    m.state_hash = std::stoull(std::string(o.at("stateHash").as_string()), nullptr, 16);
    m.config_hash = std::stoull(std::string(o.at("configHash").as_string()), nullptr, 16);
    m.snapshot_seq = o.at("snapshotSeq").to_number<uint64_t>();
    m.created_ms = o.at("createdTime").to_number<int64_t>();
    m.live = o.at("live").as_bool();
    for (const json::value& f : o.at("files").as_array()) {
      BackupFile file;
      file.path = std::string(f.at("path").as_string());
      file.bytes = f.at("bytes").to_number<uint64_t>();
      file.sha256 = std::string(f.at("sha256").as_string());
      if (!AllowedPath(file.path)) return bad("names a file a backup does not hold: " + file.path);
      if (file.sha256.size() != 64) return bad("bad sha256 for " + file.path);
      m.files.push_back(std::move(file));
    }
    return m;
  } catch (const std::exception& e) {
    return bad(std::string("missing or mistyped field: ") + e.what());
  }
}

Result<BackupManifest> Backup(const BackupOptions& options, const engine::EngineConfig& config) {
  if (Status st = EmptyOrAbsent(options.to, "backup directory"); !st.ok()) return st;
  auto dir = journal::DataDir::Open(options.data_dir, journal::OpenMode::kReadOnly);
  if (!dir.ok()) return dir.status();
  const uint64_t config_hash = engine::Engine(config).ConfigHash();
  BackupManifest m;
  m.config_hash = config_hash;
  m.created_ms = NowMs();

  // The consistent point.
  auto holder = journal::DataDir::LockHolder(options.data_dir);
  if (!holder.ok()) return holder.status();
  m.live = *holder != 0;
  if (m.live) {
    // A fresh snapshot from the running server (SIGUSR1, as an operator would).
    const uint64_t before = NewestSnapshot(*dir);
    if (::kill(*holder, SIGUSR1) != 0) {
      return ErrnoStatus(options.data_dir / "LOCK", fmt::format("signal pid {}", *holder), errno);
    }
    const auto deadline = std::chrono::steady_clock::now() + options.snapshot_wait;
    uint64_t newest = before;
    while (newest <= before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      newest = NewestSnapshot(*dir);
    }
    if (newest <= before) {
      // Nothing was written: fine only when nothing happened since `before`.
      auto end = JournalEnd(*dir, config_hash);
      if (!end.ok()) return end.status();
      if (*end != before) {
        return Unavailable(fmt::format(
            "the server (pid {}) wrote no snapshot within {} ms; is its snapshot directory "
            "writable?",
            *holder, options.snapshot_wait.count()));
      }
    }
    m.seq = newest;
    m.snapshot_seq = newest;
  } else {
    auto end = JournalEnd(*dir, config_hash);
    if (!end.ok()) return end.status();
    m.seq = *end;
    auto snaps = dir->ListSnapshots();
    if (!snaps.ok()) return snaps.status();
    for (const auto& s : *snaps) {
      if (s.seq <= m.seq) m.snapshot_seq = s.seq;
    }
  }

  std::error_code ec;
  fs::create_directories(options.to / "journal", ec);
  if (!ec) fs::create_directories(options.to / "snapshots", ec);
  if (ec) return ErrnoStatus(options.to, "create", ec.value());
  auto add = [&](const fs::path& from, const std::string& rel,
                 std::optional<uint64_t> limit) -> Status {
    auto f = CopyAndHash(from, options.to / rel, limit, ModeOf(rel));
    if (!f.ok()) return f.status();
    f->path = rel;
    m.files.push_back(*f);
    return Status::Ok();
  };
  if (m.snapshot_seq != 0) {
    const std::string name = journal::SnapshotFileName(m.snapshot_seq);
    if (Status st = add(dir->snapshot_dir() / name, "snapshots/" + name, std::nullopt); !st.ok()) {
      return st;
    }
  }
  if (m.seq != 0) {
    auto last = FindRecordEnd(*dir, config_hash, m.seq);
    if (!last.ok()) return last.status();
    auto segments = dir->ListSegments();
    if (!segments.ok()) return segments.status();
    for (const journal::FileEntry& s : *segments) {
      if (s.seq > m.seq) break;
      const bool cut = s.path == last->segment;
      const std::string rel = "journal/" + s.path.filename().string();
      Status st = add(s.path, rel, cut ? std::optional<uint64_t>(last->end) : std::nullopt);
      if (!st.ok()) return st;
      if (cut) break;
    }
  }
  for (std::string_view f : kOperatorFiles) {
    const fs::path from = options.data_dir / f;
    if (!fs::exists(from, ec)) continue;
    if (Status st = add(from, std::string(f), std::nullopt); !st.ok()) return st;
  }
  for (const char* d : {"journal", "snapshots", ""}) {
    if (Status st = SyncDir(options.to / d); !st.ok()) return st;
  }

  // The copy must recover to the point, with the snapshot's hash when it
  // ends there.
  auto rec = RecoverReadOnly(options.to, config);
  if (!rec.ok()) {
    return Status(rec.status().code(), "the backup does not recover: " + rec.status().message());
  }
  if (rec->recovered_seq != m.seq) {
    return Status(
        StatusCode::kInternal,
        fmt::format("the backup recovers to sequence {}, expected {}", rec->recovered_seq, m.seq));
  }
  m.state_hash = rec->state_hash;
  if (m.snapshot_seq == m.seq && m.seq != 0) {
    auto snap =
        journal::ReadSnapshot(options.to / "snapshots" / journal::SnapshotFileName(m.snapshot_seq));
    if (!snap.ok()) return snap.status();
    if (snap->meta.state_hash != m.state_hash) {
      return Status(
          StatusCode::kInternal,
          fmt::format("the backup's snapshot has state hash {:016x}, the recovery {:016x}",
                      snap->meta.state_hash, m.state_hash));
    }
  }
  if (Status st = WriteFileAtomically(options.to / kManifest, ToJson(m)); !st.ok()) return st;
  return m;
}

Result<BackupManifest> Restore(const fs::path& from, const fs::path& data_dir,
                               const engine::EngineConfig& config, const fs::path& master_key) {
  auto manifest = ReadManifest(from);
  if (!manifest.ok()) return manifest.status();
  const BackupManifest& m = *manifest;
  if (m.config_hash != engine::Engine(config).ConfigHash()) {
    return InvalidArgument(fmt::format(
        "the backup was taken under configuration hash {:016x}, this configuration's is {:016x}: "
        "restore with the configuration the source ran",
        m.config_hash, engine::Engine(config).ConfigHash()));
  }
  if (Status st = EmptyOrAbsent(data_dir, "data directory"); !st.ok()) return st;
  // Every file first: a damaged backup changes nothing.
  for (const BackupFile& f : m.files) {
    auto got = CopyAndHash(from / f.path, fs::path(), std::nullopt, 0);
    if (!got.ok()) {
      return Corruption(fmt::format("backup damaged: {}: {}", f.path, got.status().message()));
    }
    if (got->bytes != f.bytes || got->sha256 != f.sha256) {
      return Corruption(fmt::format(
          "backup damaged: {}: {} bytes with SHA-256 {}, the manifest says {} bytes, {}", f.path,
          got->bytes, got->sha256, f.bytes, f.sha256));
    }
  }
  std::error_code ec;
  const bool existed = fs::exists(data_dir, ec);
  auto undo = [&](Status st) {
    // Leave nothing half-restored behind.
    if (existed) {
      for (const auto& e : fs::directory_iterator(data_dir, ec)) fs::remove_all(e.path(), ec);
    } else {
      fs::remove_all(data_dir, ec);
    }
    return st;
  };
  fs::create_directories(data_dir / "journal", ec);
  if (!ec) fs::create_directories(data_dir / "snapshots", ec);
  if (ec) return undo(ErrnoStatus(data_dir, "create", ec.value()));
  for (const BackupFile& f : m.files) {
    auto got = CopyAndHash(from / f.path, data_dir / f.path, std::nullopt, ModeOf(f.path));
    if (!got.ok()) return undo(got.status());
    if (got->sha256 != f.sha256) {
      return undo(
          Corruption(fmt::format("backup damaged: {} changed while it was restored", f.path)));
    }
  }
  for (const char* d : {"journal", "snapshots", ""}) {
    if (Status st = SyncDir(data_dir / d); !st.ok()) return undo(st);
  }
  engine::EngineImage image;
  auto rec = RecoverReadOnly(data_dir, config, &image);
  if (!rec.ok()) return undo(rec.status());
  if (rec->recovered_seq != m.seq || rec->state_hash != m.state_hash) {
    return undo(Corruption(fmt::format(
        "the restored directory recovers to sequence {} with state hash {:016x}; the backup "
        "says sequence {}, {:016x}",
        rec->recovered_seq, rec->state_hash, m.seq, m.state_hash)));
  }
  if (Status st = InstallMasterKey(master_key, image, data_dir); !st.ok()) return undo(st);
  return m;
}

}  // namespace mb::app
