#include "app/standby.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "app/bus.h"
#include "app/replica.h"
#include "bus/follower.h"
#include "bus/publisher.h"
#include "bus/snapshots.h"
#include "common/file.h"
#include "common/json_escape.h"
#include "engine/engine.h"
#include "engine/image.h"
#include "exchange/snapshot_follower.h"
#include "gateway/auth.h"
#include "gateway/gateway.h"
#include "gateway/sealed_secret.h"
#include "journal/data_dir.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"
#include "journal/truncate.h"
#include "journal/writer.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "metrics/process.h"

namespace mb::app {
namespace {

using namespace std::chrono_literals;

// The stream's records into the local journal (durable first), then into
// the read side. Runs on the follower's thread.
class StandbySink final : public bus::FollowerSink {
 public:
  StandbySink(journal::JournalWriter* writer, gateway::Gateway* gw) : writer_(writer), gw_(gw) {}

  void Bootstrap(const engine::EngineImage& image) override { gw_->ReplicaBootstrap(image); }
  Status Record(uint64_t seq, std::span<const std::byte> frame) override {
    if (seq != writer_->next_seq()) {
      return OutOfRange(fmt::format("the local journal's next record is {}, the stream gave {}",
                                    writer_->next_seq(), seq));
    }
    auto appended = writer_->AppendFramed(frame);
    return appended.ok() ? Status::Ok() : appended.status();
  }
  Status Commit() override {
    MB_RETURN_IF_ERROR(writer_->Write());
    if (writer_->options().policy != journal::FsyncPolicy::kNone)
      MB_RETURN_IF_ERROR(writer_->Sync());
    durable_.store(writer_->options().policy == journal::FsyncPolicy::kNone
                       ? writer_->written_seq()
                       : writer_->durable_seq(),
                   std::memory_order_release);
    return Status::Ok();
  }
  void Apply(std::span<const engine::Event> events) override { gw_->ReplicaApply(events); }
  void Tick() override { gw_->ReplicaTick(); }

  uint64_t durable_seq() const noexcept { return durable_.load(std::memory_order_acquire); }
  void set_durable(uint64_t seq) noexcept { durable_.store(seq, std::memory_order_release); }

 private:
  journal::JournalWriter* const writer_;
  gateway::Gateway* const gw_;
  std::atomic<uint64_t> durable_{0};
};

// The order ids a discarded record accepted (for the log).
std::string AcceptedOrders(const journal::JournalRecord& r) {
  engine::EventBuffer events;
  if (!journal::DecodeOutcome(r, &events).ok()) return "(undecodable)";
  std::string ids;
  for (const engine::Event& e : events) {
    if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
      ids += fmt::format("{}{}", ids.empty() ? "" : ",", Raw(a->order_id));
    }
  }
  return ids.empty() ? "none" : ids;
}

// The checksums of local records [from, to] (to <= the journal's last).
Result<std::vector<uint64_t>> LocalChecksums(const journal::DataDir& dir, uint64_t from,
                                             uint64_t to) {
  std::vector<uint64_t> sums;
  sums.reserve(to - from + 1);
  journal::ScanOptions so;
  so.deliver_from = from;
  so.check_all = false;
  auto scan = journal::ScanJournal(dir, so, [&](const journal::JournalRecord& rec) {
    if (rec.seq <= to) sums.push_back(rec.checksum);
    return Status::Ok();
  });
  if (!scan.ok()) return scan.status();
  if (sums.size() != to - from + 1) {
    return Status(StatusCode::kInternal,
                  fmt::format("the local journal has {} of records {}..{}", sums.size(), from, to));
  }
  return sums;
}

// Whether the stream's record `seq` is the local one with checksum `ours`;
// refused when the stream no longer holds it (not a wait: it will not again).
Result<bool> StreamHolds(bus::Follower& follower, uint64_t seq, uint64_t ours) {
  auto point = follower.Probe(seq);
  if (!point.ok()) return point.status();
  if (point->frame.empty()) {
    return InvalidArgument(fmt::format(
        "the stream no longer holds record {} to compare this data directory's with: start the "
        "standby on an empty data directory",
        seq));
  }
  return journal::ParseRecord(point->frame).header.checksum == ours;
}

// The local journal against the stream: Ok when the stream holds every
// local record (the same ones) — after cutting the records the stream does
// not have. A primary's records enter the stream in order, each published
// with the sequence expected before it, so the stream holds a prefix of a
// former primary's journal, followed by what the primary after it wrote:
// the last record both hold alike is found (doubling back from the end,
// then a binary search), the local records after it were never replicated
// and are cut, each logged with the order ids it accepted. No common record
// among those the stream still holds: refused, nothing changed. The search
// stays within the local journal (local_first: its first record; a standby
// started from a bus snapshot has none before it).
Status Reconcile(bus::Follower& follower, const journal::DataDir& dir, uint64_t local_first,
                 uint64_t local_last, uint64_t local_checksum, bool* cut) {
  *cut = false;
  auto point = follower.Probe(local_last);
  if (!point.ok()) return point.status();
  if (local_last == 0) return Status::Ok();
  const uint64_t stream_last = point->last_seq;
  if (stream_last == 0) {
    return InvalidArgument(fmt::format(
        "the stream holds no record and this data directory's journal ends at {}: refusing to "
        "discard it (an empty or purged stream is not a primary's history)",
        local_last));
  }
  if (stream_last >= local_last && !point->frame.empty() &&
      journal::ParseRecord(point->frame).header.checksum == local_checksum) {
    return Status::Ok();  // the stream holds the whole local journal
  }
  // The last record both hold alike: at most `high`; `from` (once found) is
  // one both hold, and every record after `limit` differs.
  const uint64_t high = std::min(local_last, stream_last);
  const uint64_t low = std::max<uint64_t>(local_first, 1);
  if (high < low) {
    return InvalidArgument(fmt::format(
        "the stream ends at record {}, before this data directory's journal starts (record {}): "
        "it cannot follow this primary: start the standby on an empty data directory",
        high, low));
  }
  uint64_t span = 1;
  uint64_t from = high;
  std::vector<uint64_t> sums;  // local checksums of records from..high
  for (;;) {
    from = high - low + 1 > span ? high - span + 1 : low;
    auto local = LocalChecksums(dir, from, high);
    if (!local.ok()) return local.status();
    sums = std::move(*local);
    auto same = StreamHolds(follower, from, sums.front());
    if (!same.ok()) return same.status();
    if (*same) break;
    if (from == low) {
      return InvalidArgument(fmt::format(
          "history diverges: this data directory's journal shares no record with the stream "
          "(record {} differs); it cannot follow this primary: start the standby on an empty "
          "data directory",
          low));
    }
    span *= 4;
  }
  uint64_t keep = from;       // held alike
  uint64_t limit = high + 1;  // the first known to differ, or past high
  while (limit - keep > 1) {
    const uint64_t mid = keep + (limit - keep) / 2;
    auto same = StreamHolds(follower, mid, sums[mid - from]);
    if (!same.ok()) return same.status();
    (*same ? keep : limit) = mid;
  }
  if (keep == local_last) return Status::Ok();
  log::Warn("standby",
            fmt::format("the local journal ends at record {}, the stream at {}; they hold the same "
                        "records up to {}: records {}..{} were never replicated and are discarded",
                        local_last, stream_last, keep, keep + 1, local_last));
  auto cut_report = journal::TruncateAfter(dir, keep, [](const journal::JournalRecord& r) {
    log::Warn("standby",
              fmt::format("discarded record {}: accepted order ids {}", r.seq, AcceptedOrders(r)));
    return Status::Ok();
  });
  if (!cut_report.ok()) return cut_report.status();
  log::Warn("standby", journal::Describe(*cut_report));
  *cut = true;
  return Status::Ok();
}

// Marks a data directory while a start from a bus snapshot is written.
constexpr const char* kBootMarker = "standby.boot";

// Removes every segment and snapshot file: they hold no record (an empty
// data directory's header-only segments) or an interrupted boot's start.
Status ClearJournalAndSnapshots(const journal::DataDir& dir) {
  for (const std::filesystem::path& d : {dir.journal_dir(), dir.snapshot_dir()}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      std::filesystem::remove(e.path(), ec);
      if (ec) return IoError(fmt::format("cannot remove {}: {}", e.path().string(), ec.message()));
    }
    if (ec) return IoError(fmt::format("cannot list {}: {}", d.string(), ec.message()));
  }
  return Status::Ok();
}

// Undoes a start from a bus snapshot: its files, then its marker.
Status ForgetBoot(const journal::DataDir& dir, const std::filesystem::path& marker) {
  MB_RETURN_IF_ERROR(ClearJournalAndSnapshots(dir));
  std::error_code ec;
  std::filesystem::remove(marker, ec);
  return Status::Ok();
}

Status UndoInterruptedBoot(const journal::DataDir& dir, const std::filesystem::path& data_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(data_dir / kBootMarker, ec)) return Status::Ok();
  log::Warn("standby",
            "a start from a bus snapshot was interrupted: its files are removed and "
            "the start begins again");
  return ForgetBoot(dir, data_dir / kBootMarker);
}

// A standby on an empty data directory whose stream no longer starts at
// record 1 (limits expired the start): its journal starts from the newest
// snapshot on the bus instead. The snapshot goes to <data_dir>/snapshots,
// and the stream's copy of the record it follows becomes the first record
// of the local journal, so recovery finds the snapshot's record as it
// would after retention. kNotFound (waited for): no snapshot on the bus
// yet, or the stream no longer holds the record of the newest one (checked
// before the download). *booted: the data directory now holds that start.
// While it is written, kBootMarker marks the directory: a start
// interrupted by a crash is undone at the next one (UndoInterruptedBoot).
Status BootFromBusSnapshot(bus::Follower& probe, const Config& cfg,
                           const std::vector<std::string>& servers, const journal::DataDir& dir,
                           uint64_t config_hash, bool* booted) {
  *booted = false;
  auto first = probe.Probe(1);
  if (!first.ok()) return first.status();
  if (first->last_seq == 0 || !first->frame.empty()) return Status::Ok();  // from record 1
  const bus::FollowerStats names = probe.stats();
  const bus::SnapshotSource source{servers,
                                   names.stream,
                                   names.subject,
                                   std::chrono::milliseconds(cfg.runtime.bus.timeout_ms),
                                   cfg.runtime.bus.security,
                                   probe.verifier()};
  auto newest = bus::NewestManifest(source);
  if (!newest.ok()) return newest.status();
  if (!*newest) {
    return NotFound(
        "the stream no longer holds record 1 and the bus holds no snapshot yet: a new standby "
        "starts from the primary's next snapshot (SIGUSR1 or POST /admin/v1/snapshot on it)");
  }
  const uint64_t seq = (*newest)->seq;
  auto at = probe.Probe(seq);
  if (!at.ok()) return at.status();
  if (at->frame.empty()) {
    return NotFound(fmt::format(
        "the stream no longer holds record {}, the one the newest snapshot on the bus follows: "
        "waiting for a newer snapshot",
        seq));
  }
  const std::filesystem::path data_dir(cfg.runtime.data_dir);
  const std::filesystem::path marker = data_dir / kBootMarker;
  {
    // Snapshot files without any journal record are nobody's this boot may
    // remove; header-only segments (an earlier run's) hold nothing.
    std::error_code ec;
    if (!std::filesystem::is_empty(dir.snapshot_dir(), ec) && !ec) {
      return InvalidArgument(fmt::format(
          "{} holds snapshot files but the journal holds no record: start the standby on an "
          "empty data directory",
          dir.snapshot_dir().string()));
    }
  }
  MB_RETURN_IF_ERROR(ClearJournalAndSnapshots(dir));
  MB_RETURN_IF_ERROR(WriteFileAtomically(marker, "a start from a bus snapshot\n"));
  auto undo = [&](Status s) {
    (void)ForgetBoot(dir, marker);
    return s;
  };
  auto meta = bus::FetchNewestSnapshot(source, data_dir);
  if (!meta.ok()) return undo(meta.status());
  if (meta->seq != seq) {
    return undo(
        Unavailable(fmt::format("a newer snapshot ({}) reached the bus meanwhile", meta->seq)));
  }
  if (meta->config_hash != config_hash) {
    return undo(InvalidArgument(
        fmt::format("snapshot {} on the bus was taken under configuration {:016x}, this standby "
                    "runs {:016x}: start it with the primary's configuration",
                    seq, meta->config_hash, config_hash)));
  }
  if (journal::ParseRecord(at->frame).header.checksum != meta->record_checksum) {
    return undo(InvalidArgument(fmt::format(
        "snapshot {} on the bus does not belong to the stream's history (record {} differs)", seq,
        seq)));
  }
  journal::ScanResult empty;
  empty.last_seq = seq - 1;
  {
    auto writer = journal::JournalWriter::Open(dir, cfg.runtime.journal, config_hash, empty);
    if (!writer.ok()) return undo(writer.status());
    Status s = (*writer)->AppendFramed(at->frame).status();
    if (s.ok()) s = (*writer)->Write();
    if (s.ok()) s = (*writer)->SyncAll();
    if (!s.ok()) return undo(s);
  }
  std::error_code ec;
  if (!std::filesystem::remove(marker, ec) || ec) {
    return undo(IoError(fmt::format("cannot remove {}: {}", marker.string(), ec.message())));
  }
  log::Info("standby", fmt::format("a new standby: starts from snapshot {} on the bus (the stream "
                                   "holds records from after record 1 only)",
                                   seq));
  *booted = true;
  return Status::Ok();
}

// Calls `step` until it succeeds, fails for good, or stopping(): NATS not
// answering (a cluster electing its leaders, a stream being created, NATS
// down) and a primary that has not published yet are waited for, each new
// reason logged once.
Status WhileUnavailable(const std::function<bool()>& stopping,
                        const std::function<Status()>& step) {
  Status st = step();
  std::string waiting;
  while (!st.ok() &&
         (st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kNotFound) &&
         !stopping()) {
    if (st.message() != waiting) log::Warn("standby", "waiting: " + st.message());
    waiting = st.message();
    std::this_thread::sleep_for(1s);
    st = step();
  }
  return st;
}

// A fault a test build injects (MATCHBOOK_TEST_FAULT=standby-hash): the
// standby's hash is taken as different from the primary's.
bool InjectHashFault() {
#ifdef MB_FAULT_INJECTION
  const char* f = std::getenv("MATCHBOOK_TEST_FAULT");
  return f != nullptr && std::string_view(f) == "standby-hash";
#else
  return false;
#endif
}

}  // namespace

bool PublishHeldByTestFault(const std::filesystem::path& data_dir) {
#ifdef MB_FAULT_INJECTION
  static const bool armed = [] {
    const char* f = std::getenv("MATCHBOOK_TEST_FAULT");
    return f != nullptr && std::string_view(f) == "publish-hold";
  }();
  std::error_code ec;
  return armed && std::filesystem::exists(data_dir / "publish.hold", ec);
#else
  (void)data_dir;
  return false;
#endif
}

std::string LeaseHolderName(const Config& cfg) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("{}:{} pid {}", host, cfg.runtime.gateway.server.port, ::getpid());
}

bus::LeaseOptions LeaseOptionsFrom(const Config& cfg, std::vector<std::string> servers,
                                   std::string holder) {
  bus::LeaseOptions lo;
  lo.servers = std::move(servers);
  lo.security = cfg.runtime.bus.security;
  lo.venue = cfg.runtime.venue;
  lo.holder = std::move(holder);
  lo.replicas = static_cast<int>(cfg.runtime.bus.replicas);
  lo.ttl = std::chrono::milliseconds(cfg.runtime.replication.lease_ttl_ms);
  lo.timeout = std::chrono::milliseconds(
      std::min<uint32_t>(cfg.runtime.bus.timeout_ms, cfg.runtime.replication.lease_ttl_ms / 2));
  lo.log = log::Sink("lease");
  return lo;
}

StandbyEnd RunStandby(const Config& cfg, const std::string& source,
                      const std::filesystem::path& archive_dir,
                      const std::function<bool()>& stopping, bool was_primary) {
  StandbyEnd end;
  auto fail = [&end](const Status& s) {
    log::Error("standby", s.message());
    end.rc = 1;
    return std::move(end);
  };
  const std::string& nats = cfg.runtime.bus.nats;
  if (nats.empty()) {
    return fail(InvalidArgument("--standby: --nats URL (the primary's NATS) is required"));
  }
  auto servers = bus::ParseServers(nats);
  if (!servers.ok()) return fail(servers.status());
  // The primary's bus key: verifies what the standby copies, and signs once
  // it takes over.
  auto signer = LoadBusSigner(cfg, /*create=*/false);
  if (!signer.ok()) return fail(signer.status());
  auto verifier = LoadBusVerifier(cfg, signer->get());
  if (!verifier.ok()) return fail(verifier.status());
  if (Status s = bus::CheckNatsSecurity(cfg.runtime.bus.security); !s.ok()) return fail(s);
  // The primary's master key: the standby serves API keys once it takes over.
  const std::filesystem::path master_file = MasterKeyFile(cfg);
  auto master = gateway::LoadMasterKey(master_file);
  if (!master.ok()) {
    if (master.status().code() != StatusCode::kNotFound) return fail(master.status());
    return fail(NotFound(fmt::format(
        "{}: a standby serves the API keys once it takes over, so it needs the primary's master "
        "key: copy <primary data_dir>/master.key to {} (mode 0600) or name it with --master-key "
        "/ [security] master_key_file",
        master.status().message(), master_file.string())));
  }
  log::Info("app", fmt::format("matchbook 0.1.0 standby: configuration {} ({} assets, {} markets)",
                               source, cfg.engine.assets.size(), cfg.engine.markets.size()));
  const uint64_t config_hash = engine::HashConfig(cfg.engine);

  // The local state, and the local journal made a prefix of the stream.
  auto dir = journal::DataDir::Open(cfg.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return fail(dir.status());
  if (Status s = UndoInterruptedBoot(*dir, cfg.runtime.data_dir); !s.ok()) return fail(s);
  journal::RecoveryOptions ro;
  ro.repair = true;
  ro.archive_dir = archive_dir;
  auto engine = std::make_unique<engine::Engine>(cfg.engine);
  auto rep = journal::Recover(*dir, engine.get(), ro);
  if (!rep.ok()) return fail(rep.status());
  if (Status s = gateway::CheckMasterKey(*master, engine->ExportImage(), master_file); !s.ok()) {
    return fail(s);
  }
  log::Info("standby", journal::Describe(*rep));

  bus::FollowerOptions fo = FollowerOptionsFrom(cfg, *servers, *verifier, "standby");
  {
    // Started before the primary has published: wait for its stream.
    bus::Follower probe(cfg.runtime.data_dir, cfg.engine, fo, nullptr);
    // The data directory changed under the engine: recovered again.
    auto recover_again = [&]() -> Status {
      engine = std::make_unique<engine::Engine>(cfg.engine);
      rep = journal::Recover(*dir, engine.get(), ro);
      if (!rep.ok()) return rep.status();
      log::Info("standby", journal::Describe(*rep));
      return Status::Ok();
    };
    bool changed = false;
    Status st = Status::Ok();
    if (rep->journal.last_seq == 0 && rep->snapshot_seq == 0) {
      st = WhileUnavailable(stopping, [&] {
        return BootFromBusSnapshot(probe, cfg, *servers, *dir, config_hash, &changed);
      });
      if (st.ok() && changed) st = recover_again();
    }
    if (st.ok()) {
      st = WhileUnavailable(stopping, [&] {
        return Reconcile(probe, *dir, rep->journal.first_seq, rep->journal.last_seq,
                         rep->journal.last_checksum, &changed);
      });
      if (st.ok() && changed) st = recover_again();
    }
    if (stopping()) return end;
    if (!st.ok()) return fail(st);
  }
  const uint64_t start_seq = rep->journal.last_seq;

  // The leadership lease: who may write; the standby takes it when free.
  auto lease = std::make_unique<bus::Lease>(LeaseOptionsFrom(cfg, *servers, LeaseHolderName(cfg)));
  if (Status s = WhileUnavailable(stopping, [&] { return lease->Connect(); }); !s.ok()) {
    return stopping() ? std::move(end) : fail(s);
  }
  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  auto gw = gateway::Gateway::Create(cfg.engine, cfg.runtime.data_dir,
                                     ReplicaGatewayOptions(cfg, &registry));
  if (!gw.ok()) return fail(gw.status());
  (*gw)->ReplicaBootstrap(engine->ExportImage());

  auto writer = journal::JournalWriter::Open(*dir, cfg.runtime.journal, config_hash, rep->journal);
  if (!writer.ok()) return fail(writer.status());
  // Snapshots and the determinism check: a second engine over the local journal.
  auto checker =
      exchange::SnapshotFollower::Start(*engine, cfg.runtime.data_dir, rep->journal.last_checksum);
  if (!checker.ok()) return fail(checker.status());
  engine.reset();

  StandbySink sink(writer->get(), gw->get());
  sink.set_durable(start_seq);
  fo.resume_after = start_seq;
  auto follower = std::make_unique<bus::Follower>(cfg.runtime.data_dir, cfg.engine, fo, &sink);
  AddReplicaMetrics(registry, *follower);
  registry.AddGauge("matchbook_standby_following",
                    "1 while this standby follows the primary's stream, 0 once it has stopped", {},
                    [&follower] { return follower->stats().halted ? 0.0 : 1.0; });
  std::atomic<uint64_t> checked_seq{0};
  std::atomic<uint64_t> checks{0};
  (*gw)->AddHealthSection("standby", [&] {
    const bus::LeaseStats ls = lease->stats();
    return fmt::format(
        R"({{"follower":{},"durableSequence":{},"hashChecks":{},"lastCheckedSequence":{},)"
        R"("leaseHolder":{}}})",
        ReplicaHealthJson(follower->stats(), nats), sink.durable_seq(),
        checks.load(std::memory_order_relaxed), checked_seq.load(std::memory_order_relaxed),
        JsonString(ls.holder));
  });
  // Started before its primary has published (kNotFound), or NATS not
  // answering: it waits and says for what.
  Status started = WhileUnavailable(stopping, [&] { return follower->Start(); });
  if (stopping()) return end;
  if (!started.ok()) return fail(started);
  gateway::ReplicaOptions rop;
  rop.role = "standby";
  rop.ready = [] { return false; };  // ready means: takes orders
  if (Status s = (*gw)->StartReplica(rop); !s.ok()) {
    follower->Stop();
    return fail(s);
  }
  const gateway::ServerOptions& so = cfg.runtime.gateway.server;
  const std::string api = ApiBase(so, (*gw)->port());
  log::Info("standby", fmt::format("standby at {} (read-only), following NATS {} from "
                                   "record {}; takes over when the primary's lease expires",
                                   api, nats, start_seq + 1));
  fmt::print("api: {}/api/v3\nrole: standby\nadmin token: {}\nstandby\n", api,
             (*gw)->admin_token_path().string());
  std::fflush(stdout);

  const bus::SnapshotSource snapshots{*servers,
                                      follower->stats().stream,
                                      follower->stats().subject,
                                      std::chrono::milliseconds(cfg.runtime.bus.timeout_ms),
                                      cfg.runtime.bus.security,
                                      *verifier};
  const std::filesystem::path scratch = std::filesystem::path(cfg.runtime.data_dir) / "standby";
  uint64_t pending_seq = 0;  // a primary snapshot to check at
  uint64_t pending_hash = 0;
  uint64_t seen_manifest = 0;
  auto next_manifest = std::chrono::steady_clock::now();
  auto next_lease = std::chrono::steady_clock::now();
  const auto lease_every = std::chrono::milliseconds(cfg.runtime.replication.lease_ttl_ms / 8);
  std::string lease_note;
  // A holder of the lease seen since this standby started (or this process
  // held it itself): only then may the lease be free because a primary died.
  bool seen_primary = was_primary;
  Status halted = Status::Ok();

  // Takes a snapshot at exactly `seq` (every record to it is durable here);
  // with `expect`, checks the state hash first.
  auto snapshot_at = [&](uint64_t seq, const uint64_t* expect) -> Status {
    while ((*checker)->applied_seq() < seq) {
      auto n = (*checker)->CatchUp(seq, 1 << 16);
      if (!n.ok()) return n.status();
    }
    engine::EngineImage image = (*checker)->engine().ExportImage();
    const uint64_t hash = engine::HashImage(image) ^ (InjectHashFault() ? 1 : 0);
    if (expect != nullptr && hash != *expect) {
      return Status(
          StatusCode::kInternal,
          fmt::format("determinism error: the state hash at record {} is {:016x} on this standby "
                      "and {:016x} "
                      "on the primary; the same records gave a different state — the standby stops",
                      seq, hash, *expect));
    }
    journal::SnapshotMeta meta;
    // The record the snapshot follows: recovery checks the journal has it.
    meta.record_checksum = (*checker)->last_checksum();
    auto path = journal::WriteSnapshot(*dir, image, &meta, cfg.runtime.snapshots.zstd_level,
                                       cfg.runtime.snapshots.keep);
    if (!path.ok()) return path.status();
    if (expect != nullptr) {
      checks.fetch_add(1, std::memory_order_relaxed);
      checked_seq.store(seq, std::memory_order_relaxed);
      log::Info("standby", fmt::format("state hash at record {} equals the primary's ({:016x}); "
                                       "snapshot {}",
                                       seq, hash, path->string()));
    }
    return Status::Ok();
  };

  while (!stopping()) {
    std::this_thread::sleep_for(50ms);
    const auto now = std::chrono::steady_clock::now();
    const bus::FollowerStats fs = follower->stats();
    if (fs.halted) {
      halted = Unavailable(fs.last_error);
      break;
    }
    // The primary's newest snapshot: its hash is this standby's check.
    if (now >= next_manifest) {
      next_manifest = now + 2s;
      auto m = bus::NewestManifest(snapshots);
      if (m.ok() && *m && (*m)->seq > seen_manifest) {
        seen_manifest = (*m)->seq;
        if ((*m)->seq > (*checker)->applied_seq()) {
          auto meta = bus::FetchNewestSnapshot(snapshots, scratch);
          std::error_code ec;
          std::filesystem::remove_all(scratch, ec);
          if (meta.ok() && meta->seq > (*checker)->applied_seq()) {
            pending_seq = meta->seq;
            pending_hash = meta->state_hash;
          }
        }
      }
    }
    if (pending_seq != 0 && sink.durable_seq() >= pending_seq) {
      const uint64_t seq = pending_seq;
      pending_seq = 0;
      if (Status s = snapshot_at(seq, &pending_hash); !s.ok()) {
        halted = s;
        break;
      }
    }
    // Leadership: take the lease once it is free and everything is applied.
    if (now < next_lease) continue;
    next_lease = now + lease_every;
    if (!fs.caught_up || !fs.connected) continue;
    auto holder = lease->CurrentHolder();
    if (!holder.ok()) {
      if (lease_note != holder.status().message()) log::Warn("standby", holder.status().message());
      lease_note = holder.status().message();
      continue;
    }
    if (!holder->empty()) {
      if (lease_note != *holder) log::Info("standby", "the primary is " + *holder);
      lease_note = *holder;
      seen_primary = true;
      continue;
    }
    if (!seen_primary) {
      // A primary without [replication] (or --ack) holds no lease: taking
      // it would make two primaries.
      const std::string note =
          "no primary holds the leadership lease: this standby takes over only from a primary it "
          "has seen hold it (start the primary with [replication] or --ack)";
      if (lease_note != note) log::Warn("standby", note);
      lease_note = note;
      continue;
    }
    if (Status s = lease->TryAcquire(); !s.ok()) continue;
    const auto promote_start = std::chrono::steady_clock::now();
    log::Warn("standby", fmt::format("the leadership lease was free: taking over at record {}",
                                     fs.applied_seq));
    lease->StartRenewing([](std::string_view reason) {
      log::Error("standby", fmt::format("lost the lease while taking over: {}", reason));
    });
    // The read-only API closes first: its health and metrics read the
    // follower, which is replaced below. Then whatever the stream still
    // holds is applied before the first order.
    (*gw)->StopServer();
    follower->Stop();
    auto last = follower->Probe(0);
    uint64_t applied = follower->stats().applied_seq;
    if (last.ok() && last->last_seq > applied) {
      fo.resume_after = applied;
      follower = std::make_unique<bus::Follower>(cfg.runtime.data_dir, cfg.engine, fo, &sink);
      if (Status s = follower->Start(); !s.ok()) {
        halted = s;
        break;
      }
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (follower->stats().applied_seq < last->last_seq && !follower->stats().halted &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
      }
      follower->Stop();
      applied = follower->stats().applied_seq;
      if (applied < last->last_seq) {
        halted = Unavailable(
            fmt::format("could not apply the stream's last records ({} of {}) while taking over",
                        applied, last->last_seq));
        break;
      }
    } else if (!last.ok()) {
      halted = last.status();
      break;
    }
    log::Warn(
        "standby",
        fmt::format("promoted: the local journal ends at record {} (the stream's last); "
                    "{:.3f} s since the lease was taken; starting the primary",
                    applied,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - promote_start)
                        .count()));
    end.promoted = true;
    break;
  }
  (*gw)->StopServer();
  follower->Stop();
  (*gw)->Stop();
  if (Status s = (*writer)->SyncAll(); !s.ok() && halted.ok()) halted = s;
  writer->reset();
  if (!halted.ok()) {
    lease->Stop();
    return fail(halted);
  }
  if (end.promoted) {
    end.lease = std::move(lease);
    return end;
  }
  lease->Stop();
  log::Info("standby", fmt::format("stopped at record {}", sink.durable_seq()));
  return end;
}

}  // namespace mb::app
