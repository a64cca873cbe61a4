// matchbook — the exchange's server and operator command line.
//
//   matchbook serve  [--config FILE] [--data-dir DIR] [--fsync POLICY] [--host H] [--port P]
//                    [--io-threads N] [--weight-per-minute N] [--ip-weight-per-minute N]
//                    [--log-level L] [--log-format text|json] [--log-file F] [--recover-only]
//       recover the exchange from its data directory, then serve the Binance-compatible
//       REST + WebSocket API and the operator API on one port until SIGINT / SIGTERM
//       (then: stop intake, drain, snapshot)
//   matchbook serve --nats URL[,URL...] --standby [--ack local|replicated]
//       a hot standby: copy the primary's journal from the bus, take over when
//       its lease expires (app/standby.h, docs/failover.md)
//   matchbook replica --nats URL --bus-verify-key KEY [--primary URL]
//       a read replica: boot from a snapshot on the bus, follow the stream, serve
//       public market data, forward private calls (app/replica.h)
//   matchbook secrets scrub | rotate-master-key ...   rewrite sealed secrets offline
//       (app/secrets.h, docs/security.md)
//   matchbook demo   [--config FILE] [--data-dir DIR]
//       run a scripted trading session and print every event; with --data-dir also
//       through the pipeline into a new data directory
//   matchbook config check FILE        validate a configuration file
//   matchbook journal dump   [DIR] [--from SEQ] [--to SEQ]   print journal records and events
//   matchbook journal verify [DIR]     check every segment and record (read-only)
//   matchbook journal list [DIR]       live and archived segments with their sequence ranges
//   matchbook journal archive [DIR]    apply [journal] retention now (offline)
//   matchbook verify [DIR]             replay the journal from scratch, check invariants and
//                                      every snapshot against the replay (read-only)
//   matchbook verify --projection [DIR]   compare the SQL projection with a replay of the
//                                      journal (counts, balances, every row)
//   matchbook verify --history [DIR]   compare the history store with a replay of the journal
//   matchbook history rebuild [DIR]    empty the history store and build it from the journal
//   matchbook project [--rebuild] [DIR]   bring the SQL projection up to the journal
//                                      (--rebuild: empty it first and project everything again)
//   matchbook backup --data-dir D --to DIR     a consistent copy, while serve runs or not
//   matchbook restore --from DIR --data-dir NEW   check a backup and restore it (app/backup.h)
//
// Every command and flag: docs/cli.md.
// Without --config the demo configuration compiled into the binary is used
// (config/matchbook.toml at build time). DIR defaults to the configuration's
// server.data_dir ("data").
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "app/backup.h"
#include "app/bus.h"
#include "app/config.h"
#include "app/demo.h"
#include "app/demo_config.h"
#include "app/format.h"
#include "app/history.h"
#include "app/replica.h"
#include "app/secrets.h"
#include "app/standby.h"
#include "common/ed25519.h"
#include "common/json_escape.h"
#include "common/progress.h"
#include "engine/engine.h"
#include "engine/listing.h"
#include "exchange/exchange.h"
#include "fanout/stage.h"
#include "gateway/gateway.h"
#include "journal/data_dir.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"
#include "journal/writer.h"
#include "log/log.h"
#include "metrics/flight_recorder.h"
#include "metrics/metrics.h"
#include "metrics/process.h"
#include "projection/projector.h"
#include "projection/store.h"
#include "projection/verify.h"
#include "transfer/dispatcher.h"

namespace {

using mb::Status;

mb::Result<mb::app::Config> Load(const std::string& path) {
  if (path.empty()) {
    return mb::app::ParseFullConfig(mb::app::kDemoConfigToml, "<embedded demo config>");
  }
  return mb::app::LoadFullConfig(path);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "matchbook: %s\n", s.message().c_str());
  return 1;
}

std::atomic<int> g_signal{0};
std::atomic<bool> g_snapshot{false};
std::atomic<bool> g_reload_tls{false};
extern "C" void OnSignal(int sig) {
  if (sig == SIGUSR1) {
    g_snapshot.store(true);
  } else if (sig == SIGHUP) {
    g_reload_tls.store(true);
  } else {
    g_signal.store(sig);
  }
}

// SIGINT/SIGTERM stop, SIGUSR1 asks for a snapshot, SIGHUP reloads the TLS
// certificate; a closed socket is an error, not a signal.
void InstallSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// The projection's store options with the defaults filled in: the SQLite file
// in the data directory, the PostgreSQL URL from MATCHBOOK_PG_URL.
// With [projection] backend = "off" (the default), the commands that build
// and check the SQL read model on demand (project, verify --projection)
// use SQLite.
mb::projection::StoreOptions StoreOptionsFor(const mb::app::Config& cfg) {
  mb::projection::StoreOptions so = cfg.runtime.projection.store;
  if (so.backend == "off") so.backend = "sqlite";
  if (so.backend == "sqlite" && so.path.empty()) {
    so.path = (std::filesystem::path(cfg.runtime.data_dir) / "projection.sqlite").string();
  }
  if (so.backend == "postgres" && so.url.empty()) {
    if (const char* url = std::getenv("MATCHBOOK_PG_URL")) so.url = url;
  }
  return so;
}

mb::projection::ProjectorOptions ProjectorOptionsFor(const mb::app::Config& cfg) {
  mb::projection::ProjectorOptions po;
  po.batch_events = cfg.runtime.projection.batch_events;
  po.catchup_batch_events = cfg.runtime.projection.catchup_batch_events;
  po.batch_wait = std::chrono::milliseconds(cfg.runtime.projection.batch_wait_ms);
  po.log = mb::log::Sink("projection");
  po.sync_journal = cfg.runtime.journal.policy == mb::journal::FsyncPolicy::kNone;
  return po;
}

std::string Describe(const mb::projection::StoreOptions& so) {
  if (so.backend == "postgres") return "postgres";
  return so.backend + " " + so.path;
}

// True when serve keeps a SQL read model beside the history store.
bool SqlProjectionOn(const mb::app::Config& cfg) {
  return cfg.runtime.projection.store.backend != "off";
}

// The history store: RocksDB in <data_dir>/history (docs/history.md).
mb::projection::StoreOptions HistoryStoreOptions(const mb::app::Config& cfg) {
  mb::projection::StoreOptions so;
  so.backend = "rocksdb";
  so.path = (std::filesystem::path(cfg.runtime.data_dir) / "history").string();
  so.cache_bytes = uint64_t{cfg.runtime.history.cache_mb} << 20;
  so.write_buffer_bytes = uint64_t{cfg.runtime.history.write_buffer_kb} << 10;
  so.log = mb::log::Sink("history", mb::log::Level::kWarn);
  return so;
}

mb::projection::ProjectorOptions HistoryProjectorOptions(const mb::app::Config& cfg) {
  mb::projection::ProjectorOptions po = ProjectorOptionsFor(cfg);
  po.log = mb::log::Sink("history");
  po.rebuild_command = "matchbook history rebuild";
  po.stage.name = "mb-hist-writer";
  po.rebuild_when_diverged = true;
  // A commit to the store is a memtable insert (no log, no sync), so a
  // history reader waiting for it gets the batch at once instead of after
  // the SQL projection's grace for more rows.
  po.reader_batch_wait = std::chrono::milliseconds(0);
  return po;
}

// Every store derived from the journal: the history store, and the SQL
// projection when serve keeps one or its SQLite file exists.
std::vector<mb::projection::StoreOptions> DerivedStores(const mb::app::Config& cfg) {
  std::vector<mb::projection::StoreOptions> out{HistoryStoreOptions(cfg)};
  const mb::projection::StoreOptions sql = StoreOptionsFor(cfg);
  std::error_code ec;
  if (SqlProjectionOn(cfg) || std::filesystem::exists(sql.path, ec)) out.push_back(sql);
  return out;
}

// A projector's figures as gauges: prefix_applied_sequence, _lag_events,
// _lag_seconds, _healthy.
void AddProjectorMetrics(mb::metrics::Registry& registry, const std::string& prefix,
                         std::string_view what, const mb::projection::Projector& p) {
  registry.AddGauge(prefix + "_applied_sequence",
                    fmt::format("The last journal sequence {} has committed", what), {},
                    [&p] { return static_cast<double>(p.stats().applied_seq); });
  registry.AddGauge(prefix + "_lag_events",
                    fmt::format("Journal records durable but not yet in {}", what), {},
                    [&p] { return static_cast<double>(p.stats().lag_events); });
  registry.AddGauge(prefix + "_lag_seconds",
                    fmt::format("How long the oldest record not yet in {} has been durable", what),
                    {}, [&p] { return p.stats().lag_seconds; });
  registry.AddGauge(
      prefix + "_healthy",
      fmt::format("1 when the last commit of {} succeeded (and its log is within its ceiling)",
                  what),
      {}, [&p] { return p.stats().healthy ? 1.0 : 0.0; });
}

// Serve's errors, once the logger runs: logged, then the log is drained.
int ServeFail(const Status& s) {
  mb::log::Error("app", s.message());
  return 1;
}

// Where a data directory's archived journal segments are: always
// <data_dir>/archive, a link to [journal] archive_dir when one is set.
std::filesystem::path ArchivePath(const std::string& data_dir) {
  return std::filesystem::path(data_dir) / "archive";
}

// Makes <data_dir>/archive name [journal] archive_dir (a symbolic link)
// when one is configured; an existing directory of that name is refused.
Status LinkArchive(const mb::app::Config& cfg) {
  if (cfg.runtime.archive_dir.empty()) return Status::Ok();
  namespace fs = std::filesystem;
  const fs::path link = ArchivePath(cfg.runtime.data_dir);
  const fs::path target = fs::absolute(cfg.runtime.archive_dir);
  std::error_code ec;
  fs::create_directories(target, ec);
  if (ec) return mb::IoError(target.string() + ": create: " + ec.message());
  if (fs::is_symlink(link, ec)) {
    if (fs::read_symlink(link, ec) == target) return Status::Ok();
    fs::remove(link, ec);
  } else if (fs::exists(link, ec)) {
    return mb::InvalidArgument(fmt::format(
        "{} is a directory, but [journal] archive_dir is {}: move its files there and remove it",
        link.string(), target.string()));
  }
  fs::create_directory_symlink(target, link, ec);
  if (ec) return mb::IoError(link.string() + ": link to the archive: " + ec.message());
  return Status::Ok();
}

// The lowest sequence the server's consumers still need: the oldest snapshot
// kept (recovery starts at one, and reads its record), the projection's next
// record, the bus publisher's next one. 0: none yet (nothing may go).
uint64_t RetentionFloor(const mb::journal::DataDir& dir, uint64_t projection_applied,
                        const mb::bus::Publisher* publisher) {
  auto snapshots = dir.ListSnapshots();
  if (!snapshots.ok() || snapshots->empty()) return 0;
  uint64_t floor = std::min(snapshots->front().seq, projection_applied + 1);
  if (publisher != nullptr) floor = std::min(floor, publisher->stats().published_seq + 1);
  return floor;
}

// Why intake is closed (the exchange's intake_refusal; docs/failover.md).
constexpr const char* kLeaseLost =
    "This server is no longer the primary: it lost its leadership lease (a standby may have "
    "taken over). Send orders to the primary: GET /admin/v1/health says \"role\":\"primary\" "
    "there.";
constexpr const char* kFenced =
    "This server is no longer the primary: another primary has written to the journal stream.";
constexpr const char* kHandingOver =
    "This server is handing over to its standby (a planned failover): retry against the new "
    "primary.";

// Serves as the primary. With a bus it holds the leadership lease (taken
// here, or handed over by a promoted standby); *demoted says it stopped
// because it is the primary no more (lost lease, another writer, a planned
// failover): the caller goes on as a standby.
int Serve(const mb::app::Config& cfg, const std::string& source, bool recover_only,
          std::unique_ptr<mb::bus::Lease> lease, bool* demoted) {
  *demoted = false;
  mb::exchange::ExchangeOptions o = mb::app::ExchangeOptionsFrom(cfg);
  o.log = mb::log::Sink("exchange");
  mb::log::Info("app", fmt::format("matchbook 0.1.0: configuration {} ({} assets, {} markets)",
                                   source, cfg.engine.assets.size(), cfg.engine.markets.size()));
  // Metrics and the flight recorder outlive everything that records into them.
  const mb::app::MetricsConfig& mc = cfg.runtime.metrics;
  mb::metrics::Registry registry;
  mb::metrics::AddProcessMetrics(registry);
  // Journal retention's figures (the registry may be scraped after Serve's
  // locals are gone: shared).
  struct RetentionStats {
    std::atomic<uint64_t> first_seq{0};
    std::atomic<uint64_t> segments{0};
  };
  auto retention_stats = std::make_shared<RetentionStats>();
  registry.AddGauge("matchbook_journal_first_sequence",
                    "The first sequence of the live journal (0 until retention has run)", {},
                    [s = retention_stats] {
                      return static_cast<double>(s->first_seq.load(std::memory_order_relaxed));
                    });
  registry.AddCounterFn("matchbook_journal_segments_retired_total",
                        "Journal segments archived or deleted by retention", {},
                        [s = retention_stats] {
                          return static_cast<double>(s->segments.load(std::memory_order_relaxed));
                        });
  mb::metrics::FlightRecorderOptions fo;
  fo.dir = std::filesystem::path(cfg.runtime.data_dir) / "flight";
  fo.capacity = mc.flight_capacity;
  fo.window_ms = mc.flight_window_ms;
  fo.threshold_ns = uint64_t{mc.flight_threshold_ms} * 1'000'000;
  fo.keep = mc.flight_keep;
  fo.max_age_hours = mc.flight_max_age_hours;
  fo.log = mb::log::Sink("flight", mb::log::Level::kWarn);
  mb::metrics::FlightRecorder recorder(fo);
  o.metrics = &registry;
  // Leadership (docs/failover.md): why intake is closed (null: open), and
  // whether to stop and go on as a standby.
  std::atomic<const char*> intake_closed{nullptr};
  std::atomic<bool> demote{false};
  std::atomic<bool> planned{false};  // demoted by POST /admin/v1/failover
  std::atomic<mb::exchange::Exchange*> exchange{nullptr};
  std::function<mb::Result<std::string>()> failover;  // set once the bus is known
  mb::gateway::GatewayOptions go = cfg.runtime.gateway;
  if (!cfg.runtime.bus.nats.empty() && cfg.runtime.replication.leadership) {
    go.failover = [&failover] { return failover(); };
  }
  go.metrics = &registry;
  go.metrics_remote = mc.remote;
  go.metrics_port = mc.port;
  go.flight_recorder = &recorder;
  go.flight_threshold_ns = fo.threshold_ns;
  go.flight_window_ms = fo.window_ms;
  const mb::app::TransferConfig& tc = cfg.runtime.transfers;
  go.venue = cfg.runtime.venue;
  go.venues = tc.venues;
  go.venue_max_skew_ms = tc.max_clock_skew_ms;
  go.master_key_file = mb::app::MasterKeyFile(cfg);
  auto gw = mb::gateway::Gateway::Create(cfg.engine, cfg.runtime.data_dir, go);
  if (!gw.ok()) return ServeFail(gw.status());
  // Transfers to other venues: the journal's outbox, delivered by the
  // dispatcher's own threads (docs/transfers.md).
  mb::transfer::DispatchOptions dopt;
  dopt.venue = cfg.runtime.venue;
  dopt.venues = tc.venues;
  dopt.mode = tc.dispatch;
  dopt.window = tc.window;
  dopt.batch = tc.batch;
  dopt.retry_max_ms = tc.retry_max_ms;
  dopt.timeout_ms = tc.timeout_ms;
  dopt.metrics = &registry;
  // The gateway's configuration grows with the markets and assets added at
  // run time: whatever names them by id reads it.
  const mb::engine::EngineConfig& listed = (*gw)->config();
  auto dispatcher = mb::transfer::Dispatcher::Create(listed, std::move(dopt));
  if (!dispatcher.ok()) return ServeFail(dispatcher.status());
  (*gw)->SetDispatcher(dispatcher->get());
  (*gw)->AddHealthSection("transfers", [d = dispatcher->get()] { return d->HealthJson(); });

  // The history projection follows the journal on its own thread; a database
  // that cannot be reached is retried and never stops trading.
  std::error_code ec;
  std::filesystem::create_directories(cfg.runtime.data_dir, ec);
  if (Status s = LinkArchive(cfg); !s.ok()) return ServeFail(s);
  // The history store (RocksDB): what the history API and the markets'
  // trades and candles after a restart come from. A damaged store stops the
  // start with the way out (`matchbook history rebuild`).
  const mb::projection::StoreOptions history_options = HistoryStoreOptions(cfg);
  auto history_store = mb::projection::OpenStore(history_options, listed);
  if (!history_store.ok()) return ServeFail(history_store.status());
  mb::projection::Projector history_projector(cfg.runtime.data_dir, cfg.engine,
                                              mb::engine::HashConfig(cfg.engine),
                                              history_store->get(), HistoryProjectorOptions(cfg));
  // The SQL read model ([projection] backend), when on: a database that
  // cannot be reached is retried and never stops trading.
  const mb::projection::StoreOptions store_options = StoreOptionsFor(cfg);
  std::unique_ptr<mb::projection::Store> store;
  std::unique_ptr<mb::projection::Projector> projector;
  if (SqlProjectionOn(cfg)) {
    store = mb::projection::OpenStoreWhenReachable(store_options, listed, std::chrono::seconds(1));
    projector = std::make_unique<mb::projection::Projector>(cfg.runtime.data_dir, cfg.engine,
                                                            mb::engine::HashConfig(cfg.engine),
                                                            store.get(), ProjectorOptionsFor(cfg));
  }
  registry.AddCounterFn("matchbook_log_dropped_lines_total",
                        "Log lines overwritten because the log queue was full", {},
                        [] { return static_cast<double>(mb::log::dropped()); });
  AddProjectorMetrics(registry, "matchbook_history", "the history store", history_projector);
  if (projector)
    AddProjectorMetrics(registry, "matchbook_projection", "the SQL projection", *projector);
  registry.AddCollector([&projector](mb::metrics::SampleWriter& w) {
    if (!projector) return;
    const std::optional<mb::projection::StorageStats> s = projector->stats().storage;
    if (!s) return;  // a backend that manages its own log
    const auto one = [&w](std::string_view name, std::string_view help, std::string_view type,
                          double v) { mb::metrics::WriteSingle(w, name, help, type, v); };
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    one("matchbook_projection_db_bytes", "Size of the projection's SQLite database file", "gauge",
        d(s->db_bytes));
    one("matchbook_projection_wal_bytes", "Size of the projection's SQLite write-ahead log file",
        "gauge", d(s->wal_bytes));
    one("matchbook_projection_wal_max_bytes",
        "The write-ahead log's ceiling: the projector waits rather than pass it", "gauge",
        d(s->wal_max_bytes));
    one("matchbook_projection_wal_frames_written_total",
        "Pages appended to the projection's write-ahead log", "counter", d(s->frames_written));
    one("matchbook_projection_wal_frames_checkpointed_total",
        "Pages copied from the write-ahead log into the database", "counter",
        d(s->frames_checkpointed));
    one("matchbook_projection_checkpoints_total", "Checkpoint runs of the projection's database",
        "counter", d(s->checkpoints));
    one("matchbook_projection_checkpoints_completed_total",
        "Checkpoint runs that left nothing in the write-ahead log to copy", "counter",
        d(s->checkpoints_completed));
    one("matchbook_projection_wal_ceiling_waits_total",
        "Projection commits held back because the write-ahead log was at its ceiling", "counter",
        d(s->ceiling_waits));
    if (s->seconds_since_checkpoint >= 0) {
      one("matchbook_projection_seconds_since_checkpoint", "Time since a checkpoint last completed",
          "gauge", s->seconds_since_checkpoint);
    }
  });
  // Durable batches go through the fan-out stage to its handlers: the
  // gateway (read side, streams, then the answers) and the projector's
  // wake-up. Declared after what its handlers use, so it stops first.
  mb::fanout::SequenceHandler projector_feed([&projector, &history_projector](uint64_t seq) {
    history_projector.NotifyDurable(seq);
    if (projector) projector->NotifyDurable(seq);
  });
  // The journal on the bus ([bus] nats, --nats): its own thread, told the
  // durable sequence by the fan-out stage; without a NATS URL, nothing.
  std::unique_ptr<mb::bus::Publisher> publisher;
  std::unique_ptr<mb::fanout::SequenceHandler> publisher_feed;
  std::unique_ptr<mb::app::ReplicationGate> gate;
  const bool replicated = cfg.runtime.replication.ack == mb::app::AckPolicy::kReplicated;
  const std::string& nats = cfg.runtime.bus.nats;
  if (!nats.empty()) {
    auto servers = mb::bus::ParseServers(nats);
    if (!servers.ok()) return ServeFail(servers.status());
    // A wrong credential or certificate stops the start; NATS down does not.
    if (Status s =
            mb::bus::CheckNatsCredentials(*servers, cfg.runtime.bus.security,
                                          std::chrono::milliseconds(cfg.runtime.bus.timeout_ms));
        !s.ok()) {
      return ServeFail(s);
    }
    auto signer = mb::app::LoadBusSigner(cfg, /*create=*/true);
    if (!signer.ok()) return ServeFail(signer.status());
    mb::log::Info("bus", fmt::format("journal messages and snapshot manifests are signed with {} "
                                     "(public key {}: replicas' [bus] verify_key)",
                                     mb::app::SigningKeyFile(cfg).string(),
                                     mb::HexEncode((*signer)->public_key())));
    if (!recover_only && !lease && cfg.runtime.replication.leadership) {
      lease = std::make_unique<mb::bus::Lease>(
          mb::app::LeaseOptionsFrom(cfg, *servers, mb::app::LeaseHolderName(cfg)));
      if (Status s = lease->Connect(); !s.ok()) return ServeFail(s);
      // A primary restarted at once finds its own lease from before: it
      // expires within one TTL.
      Status a = lease->Acquire(std::chrono::milliseconds(cfg.runtime.replication.lease_ttl_ms) +
                                std::chrono::seconds(1));
      if (!a.ok()) {
        return ServeFail(
            Status(a.code(), a.message() +
                                 ": this venue has a primary; start this server with --standby to "
                                 "follow it (docs/failover.md)"));
      }
    }
    mb::bus::PublisherOptions bo = mb::app::BusOptionsFrom(cfg, std::move(*servers));
    bo.signer = std::move(*signer);
    bo.log = mb::log::Sink("bus");
    if (lease) {
      bo.may_publish = [l = lease.get(), dir = cfg.runtime.data_dir] {
        return l->Valid() && !mb::app::PublishHeldByTestFault(dir);
      };
      bo.on_fenced = [&intake_closed, &demote](std::string_view why) {
        intake_closed.store(kFenced, std::memory_order_release);
        demote.store(true, std::memory_order_release);
        mb::log::Error("lease", fmt::format("intake stopped: {}", why));
      };
    }
    publisher = std::make_unique<mb::bus::Publisher>(
        cfg.runtime.data_dir, mb::engine::HashConfig(cfg.engine), std::move(bo));
    if (replicated) {
      gate = std::make_unique<mb::app::ReplicationGate>(publisher.get(), [&exchange] {
        mb::exchange::Exchange* e = exchange.load(std::memory_order_acquire);
        return e != nullptr ? e->durable_seq() : 0;
      });
    } else {
      publisher_feed = std::make_unique<mb::fanout::SequenceHandler>(
          [p = publisher.get()](uint64_t seq) { p->NotifyDurable(seq); });
    }
    mb::app::AddBusMetrics(registry, *publisher);
    (*gw)->AddHealthSection(
        "bus", [p = publisher.get(), nats] { return mb::app::BusHealthJson(p->stats(), nats); });
  } else if (replicated) {
    return ServeFail(mb::InvalidArgument(
        "ack = replicated needs the journal on a JetStream cluster: --nats URL[,URL...]"));
  }
  o.intake_refusal = [&intake_closed, l = lease.get()]() -> const char* {
    if (const char* why = intake_closed.load(std::memory_order_acquire)) return why;
    if (l != nullptr && !l->Valid()) return kLeaseLost;
    return nullptr;
  };
  if (lease) {
    failover = [&]() -> mb::Result<std::string> {
      mb::exchange::Exchange* e = exchange.load(std::memory_order_acquire);
      if (e == nullptr || !publisher) return mb::Unavailable("the server is still starting");
      const char* open = nullptr;
      if (!intake_closed.compare_exchange_strong(open, kHandingOver)) {
        return mb::InvalidArgument(std::string("intake is closed already: ") + open);
      }
      mb::log::Warn("lease", "planned failover: intake closed, handing over to the standby");
      // What was taken before intake closed becomes durable, then replicated.
      uint64_t seq = e->durable_seq();
      for (int stable = 0; stable < 3;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const uint64_t now = e->durable_seq();
        stable = now == seq ? stable + 1 : 0;
        seq = now;
      }
      if (!publisher->WaitPublished(seq, std::chrono::seconds(10))) {
        intake_closed.store(nullptr, std::memory_order_release);
        return mb::Unavailable(fmt::format(
            "the stream has not acknowledged record {} within 10 s: intake is open again and "
            "this server stays the primary",
            seq));
      }
      Status released = lease->Release();
      planned.store(true, std::memory_order_release);
      demote.store(true, std::memory_order_release);
      if (!released.ok()) {
        // A renewal lost to a slow NATS while the stream took the last
        // records: the lease expired and a standby took it. Every record was
        // in the stream before, so it has handed over all the same.
        auto holder = lease->CurrentHolder();
        if (!holder.ok() || holder->empty() || *holder == mb::app::LeaseHolderName(cfg)) {
          return released;
        }
        mb::log::Warn("lease", fmt::format("planned failover: the stream holds every record up "
                                           "to {}; the lease expired before its release and "
                                           "\"{}\" took it; going on as a standby",
                                           seq, *holder));
        return fmt::format(
            R"({{"handedOver":true,"lastSequence":{},"note":{}}})", seq,
            mb::JsonString("the lease expired before its release; " + *holder + " took it"));
      }
      mb::log::Warn("lease", fmt::format("planned failover: the stream holds every record up to "
                                         "{}; lease released; going on as a standby",
                                         seq));
      return fmt::format(R"({{"handedOver":true,"lastSequence":{}}})", seq);
    };
    (*gw)->AddHealthSection("leadership", [l = lease.get(), replicated] {
      const mb::bus::LeaseStats ls = l->stats();
      return fmt::format(
          R"({{"held":{},"valid":{},"holder":{},"revision":{},"remainingMs":{},"renewals":{},)"
          R"("renewFailures":{},"lastError":{},"ack":"{}"}})",
          ls.held, l->Valid(), mb::JsonString(ls.holder), ls.revision, ls.remaining_ms, ls.renewals,
          ls.renew_failures, mb::JsonString(ls.last_error), replicated ? "replicated" : "local");
    });
  }
  mb::fanout::Stage fanout(mb::fanout::StageOptions{.timing = true});
  // Under ack = replicated nothing downstream sees a record before the stream holds it.
  if (gate) fanout.Add(gate.get());
  (*gw)->Wire(&o, &fanout);
  // Once the state is recovered, before any command: the history store
  // catches up with the journal, then the read side takes the markets'
  // trades and candles from it.
  o.on_recovered = [bootstrap = std::move(o.on_recovered), &history_projector, &history_store,
                    &gw](const mb::engine::Engine& engine) {
    bootstrap(engine);
    history_projector.Adopt(engine.config());
    Status st = history_projector.Init();
    if (st.ok()) st = history_projector.CatchUp(Raw(engine.last_sequence()));
    if (!st.ok()) {
      mb::log::Error("history", "catching up at start: " + st.message());
      return;
    }
    auto markets = mb::app::LoadMarketHistory(history_store->get(), engine.config(),
                                              (*gw)->read_side_options());
    if (!markets.ok()) {
      mb::log::Error("history", "the markets' history: " + markets.status().message());
      return;
    }
    std::vector<mb::marketdata::OrderRecord> orders;
    for (const mb::projection::OrderRow& r : history_projector.OpenOrders()) {
      orders.push_back(r.order);
    }
    (*gw)->SeedMarketHistory(*markets, orders);
    mb::log::Info("history", fmt::format("at sequence {}: {} markets' trades and candles",
                                         history_projector.applied_seq(), markets->size()));
  };
  (*dispatcher)->Wire(&o, &fanout);
  fanout.Add(&projector_feed);
  if (publisher_feed) fanout.Add(publisher_feed.get());
  auto ex = mb::exchange::Exchange::Open(std::move(o));
  if (!ex.ok()) return ServeFail(ex.status());
  exchange.store(ex->get(), std::memory_order_release);
  if (lease) {
    lease->Stop();  // a promoted standby's renewals: from here on, this one's
    lease->StartRenewing([&intake_closed, &demote](std::string_view reason) {
      intake_closed.store(kLeaseLost, std::memory_order_release);
      demote.store(true, std::memory_order_release);
      mb::log::Error("lease", fmt::format("intake stopped: {}", reason));
    });
  }
  mb::log::Info("gateway", "thread " + fanout.Start());
  // Started once the data directory is locked: its start-up tidies the dump
  // directory, which a second server refused by the lock must not touch.
  if (Status s = recorder.Start(); !s.ok()) {
    (void)(*ex)->Close();
    return ServeFail(s);
  }
  mb::log::Info("history", fmt::format("history projection: {} (the history store)",
                                       Describe(history_options)));
  history_projector.Adopt(listed);  // what the recovered journal added
  mb::log::Info("history", "thread " + history_projector.Start((*ex)->durable_seq()));
  if (projector) {
    mb::log::Info("projection",
                  fmt::format("history projection: {} (batches of up to {} events)",
                              Describe(store_options), cfg.runtime.projection.batch_events));
    projector->Adopt(listed);
    mb::log::Info("projection", "thread " + projector->Start((*ex)->durable_seq()));
  }
  if (publisher) {
    mb::log::Info("bus", fmt::format("publishing the journal to NATS {}: stream {}, subject {}",
                                     nats, publisher->stream(), publisher->subject()));
    mb::log::Info("bus", "thread " + publisher->Start((*ex)->durable_seq()));
  }
  mb::app::ProjectionHistory history(history_store->get(), &history_projector);
  (*gw)->SetHistory(&history);
  // Stopping: the projectors apply what the journal made durable, briefly;
  // the publisher sends it while NATS answers.
  auto stop_projector = [&] {
    history_projector.WaitApplied((*ex)->durable_seq(), std::chrono::seconds(5));
    history_projector.Stop();
    if (projector) {
      projector->WaitApplied((*ex)->durable_seq(), std::chrono::seconds(5));
      projector->Stop();
    }
    if (publisher) {
      if (publisher->stats().connected && !demote.load(std::memory_order_acquire)) {
        publisher->WaitPublished((*ex)->durable_seq(), std::chrono::seconds(5));
      }
      publisher->Stop();
      const mb::bus::PublisherStats bs = publisher->stats();
      mb::log::Info("bus",
                    fmt::format("stopped at record {} of {}", bs.published_seq, bs.durable_seq));
    }
  };
  if (recover_only) {
    Status s = (*ex)->Close();
    fanout.Stop();
    stop_projector();
    (*gw)->Stop();
    recorder.Stop();
    return s.ok() ? 0 : ServeFail(s);
  }
  InstallSignals();
  if (Status s = (*gw)->Start(ex->get()); !s.ok()) {
    (void)(*ex)->Close();
    return ServeFail(s);
  }
  (*dispatcher)->Start(ex->get());
  const mb::gateway::ServerOptions& so = cfg.runtime.gateway.server;
  const std::string host = so.host.find(':') != std::string::npos ? "[" + so.host + "]" : so.host;
  const uint16_t port = (*gw)->port();
  mb::log::Info("app", fmt::format("running at sequence {} with {} io threads. SIGUSR1 writes a "
                                   "snapshot; Ctrl-C (SIGINT) or SIGTERM stops intake, drains "
                                   "the journal and writes a snapshot.",
                                   (*ex)->durable_seq(), so.io_threads));
  {
    // Every thread by name: the names the per-thread CPU metric
    // (matchbook_thread_cpu_seconds_total) and `top -H` show.
    std::string names;
    for (const auto& [name, secs] : mb::metrics::ThreadCpuSeconds()) {
      names += names.empty() ? name : ", " + name;
    }
    mb::log::Info("app", "threads: " + names);
  }
  const mb::gateway::GatewayOptions& ga = cfg.runtime.gateway;
  const char* reach = !ga.admin_remote            ? "loopback only"
                      : (*gw)->tls()              ? "loopback, and remote clients over TLS"
                      : ga.admin_remote_plaintext ? "loopback, and remote clients in plain text"
                                                  : "loopback only: remote clients need TLS";
  mb::log::Info("gateway",
                fmt::format("operator API at {}/admin/v1/ ({}); send the token from {} "
                            "as the X-MB-ADMIN-TOKEN header",
                            mb::app::ApiBase(so, port), reach, (*gw)->admin_token_path().string()));
  if (ga.admin_remote && ga.admin_remote_plaintext && !(*gw)->tls()) {
    mb::log::Warn("gateway",
                  "gateway.admin_remote_plaintext: the operator API answers remote clients "
                  "without TLS, so the admin token crosses the network readable");
  }
  const auto limit = [](uint32_t weight) {
    return weight == 0 ? std::string("unlimited") : fmt::format("{} weight/min", weight);
  };
  mb::log::Info("gateway", fmt::format("rate limits: {} per API key, {} per IP address",
                                       limit(go.key_limit.weight_per_minute),
                                       limit(go.ip_limit.weight_per_minute)));
  mb::log::Info(
      "app", fmt::format(
                 "metrics at {}/metrics ({}){}; flight recorder: {}, window {} ms, "
                 "{} traces, dumps in {}",
                 mb::app::ApiBase(so, port), mc.remote ? "remote allowed" : "loopback only",
                 (*gw)->metrics_port() != 0
                     ? fmt::format(" and {}/metrics", mb::app::ApiBase(so, (*gw)->metrics_port()))
                     : std::string(),
                 mc.flight_threshold_ms == 0
                     ? std::string("no dumps (threshold 0)")
                     : fmt::format("dumps when a command takes over {} ms", mc.flight_threshold_ms),
                 mc.flight_window_ms, mc.flight_capacity, fo.dir.string()));
  if (const std::string w = mb::app::PlaintextWarning(so); !w.empty()) {
    mb::log::Warn("gateway", w);
  }
  fmt::print("api: {}/api/v3\nws: {}/ws\nadmin token: {}\nready\n", mb::app::ApiBase(so, port),
             mb::app::ApiBase(so, port, /*ws=*/true), (*gw)->admin_token_path().string());
  std::fflush(stdout);
  // [journal] retention: every 2 s, what no consumer needs any more.
  auto retention_dir =
      mb::journal::DataDir::Open(cfg.runtime.data_dir, mb::journal::OpenMode::kReadOnly);
  std::string retention_error;
  auto retain = [&] {
    if (cfg.runtime.retention == mb::journal::Retention::kKeep || !retention_dir.ok()) return;
    const uint64_t applied =
        projector ? std::min(projector->applied_seq(), history_projector.applied_seq())
                  : history_projector.applied_seq();
    const uint64_t floor = RetentionFloor(*retention_dir, applied, publisher.get());
    auto r = mb::journal::Retain(*retention_dir, floor, cfg.runtime.retention,
                                 ArchivePath(cfg.runtime.data_dir));
    if (!r.ok()) {
      if (r.status().message() != retention_error) {
        mb::log::Error("journal", "retention: " + r.status().message());
        retention_error = r.status().message();
      }
      return;
    }
    retention_error.clear();
    retention_stats->first_seq.store(r->first_live_seq, std::memory_order_relaxed);
    if (r->segments > 0) {
      retention_stats->segments.fetch_add(r->segments, std::memory_order_relaxed);
      mb::log::Info(
          "journal",
          fmt::format("retention {}: {} segments below sequence {} ({} bytes){}",
                      mb::journal::ToString(cfg.runtime.retention), r->segments, floor,
                      r->bytes_freed,
                      r->bytes_written != 0 ? fmt::format(", {} bytes archived", r->bytes_written)
                                            : std::string()));
    }
  };
  for (uint64_t tick = 0; g_signal.load() == 0 && !demote.load(std::memory_order_acquire); ++tick) {
    if (g_snapshot.exchange(false)) (*ex)->RequestSnapshot();
    if (g_reload_tls.exchange(false)) mb::app::ReloadTls(**gw);
    if (tick % 200 == 0) retain();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (demote.load(std::memory_order_acquire)) {
    *demoted = true;
    // The failover call's own answer leaves before the server stops.
    if (planned.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    mb::log::Warn("app",
                  "no longer the primary: stopping the primary's work, going on as a "
                  "standby");
  } else {
    mb::log::Info("app", fmt::format("signal {}: shutting down", g_signal.load()));
  }
  (*gw)->StopServer();
  if (gate) gate->Abandon();  // nothing more reaches a client
  (*dispatcher)->Stop();      // what is unresolved stays held: the next start delivers it
  Status s = (*ex)->Close();
  fanout.Stop();  // every durable batch and answer delivered
  stop_projector();
  (*gw)->Stop();
  recorder.Stop();
  if (lease) lease->Stop();
  return s.ok() ? 0 : ServeFail(s);
}

// The configuration with the assets and markets added at run time that the
// data directory's journal holds: its recovered state's (newest snapshot and
// replay, read only). The offline tools name markets by it. A journal that
// cannot be recovered (damage the tool is asked to show) gives the
// configuration file's, with a warning: the tool then learns what it reads.
mb::engine::EngineConfig ListedConfig(const mb::app::Config& cfg, const mb::journal::DataDir& dir,
                                      const std::string& dir_path) {
  mb::engine::Engine engine(cfg.engine);
  mb::journal::RecoveryOptions ro;
  ro.progress = false;
  ro.archive_dir = ArchivePath(dir_path);
  auto rep = mb::journal::Recover(dir, &engine, ro);
  if (!rep.ok()) {
    fmt::print(stderr,
               "warning: the journal's added markets and assets are not known ({}): those added "
               "before the first record read are shown by id\n",
               rep.status().message());
    return cfg.engine;
  }
  return engine.config();
}

// matchbook project [--rebuild]: the projection brought up to the journal,
// offline (the data directory's lock keeps a running server out meanwhile).
// matchbook history rebuild: the same for the history store (so, po: which
// store, and its projector's options).
int Project(const mb::app::Config& cfg, bool rebuild, const mb::projection::StoreOptions& so,
            const mb::projection::ProjectorOptions& po) {
  auto dir = mb::journal::DataDir::Open(cfg.runtime.data_dir, mb::journal::OpenMode::kReadWrite);
  if (!dir.ok()) return Fail(dir.status());
  const mb::engine::EngineConfig listed = ListedConfig(cfg, *dir, cfg.runtime.data_dir);
  auto store = mb::projection::OpenStore(so, listed);
  if (!store.ok()) return Fail(store.status());
  const auto started = std::chrono::steady_clock::now();
  if (rebuild) {
    if (Status s = (*store)->Reset(); !s.ok()) return Fail(s);
  }
  mb::projection::Projector projector(cfg.runtime.data_dir, cfg.engine,
                                      mb::engine::HashConfig(cfg.engine), store->get(), po);
  projector.Adopt(listed);
  if (Status s = projector.Init(); !s.ok()) return Fail(s);
  if (Status s = projector.CatchUp(); !s.ok()) return Fail(s);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto totals = (*store)->Totals();
  if (!totals.ok()) return Fail(totals.status());
  const mb::projection::ProjectorStats st = projector.stats();
  fmt::print(
      "projection {}: {} at sequence {} ({} events in {:.3f} s): {} orders, {} order events, {} "
      "trades, {} ledger entries, {} deposits, {} withdrawals, {} transfers out, {} resolved, {} "
      "order lists\n",
      Describe(so), rebuild ? "rebuilt" : "caught up", st.applied_seq, st.events, secs,
      totals->orders, totals->order_events, totals->trades, totals->ledger_entries,
      totals->deposits, totals->withdrawals, totals->transfers_out, totals->transfers_resolved,
      totals->order_lists);
  return 0;
}

// verify --projection and verify --history: the store `so` against a
// replay of the journal; `label` begins the verdict line.
int VerifyProjection(const mb::app::Config& cfg, const mb::projection::StoreOptions& so,
                     std::string_view label) {
  auto dir = mb::journal::DataDir::Open(cfg.runtime.data_dir, mb::journal::OpenMode::kReadOnly);
  if (!dir.ok()) return Fail(dir.status());
  const mb::engine::EngineConfig listed = ListedConfig(cfg, *dir, cfg.runtime.data_dir);
  if (so.backend == "rocksdb" &&
      !std::filesystem::exists(std::filesystem::path(so.path) / "CURRENT")) {
    return Fail(mb::NotFound(fmt::format(
        "{}: there is no history store here (serve makes it; `matchbook history rebuild` builds "
        "it from the journal)",
        so.path)));
  }
  auto store = mb::projection::OpenStore(so, listed);
  if (!store.ok()) return Fail(store.status());
  std::error_code ec;
  auto report = mb::projection::VerifyProjection(cfg.runtime.data_dir, cfg.engine, store->get(),
                                                 std::filesystem::temp_directory_path(ec));
  if (!report.ok()) return Fail(report.status());
  const auto& t = report->totals;
  fmt::print(
      "projection {}: applied sequence {}, journal ends at {}; {} orders, {} order events, {} "
      "trades, {} ledger entries, {} deposits, {} withdrawals, {} transfers out, {} resolved, {} "
      "order lists\n",
      Describe(so), report->applied_seq, report->journal_seq, t.orders, t.order_events, t.trades,
      t.ledger_entries, t.deposits, t.withdrawals, t.transfers_out, t.transfers_resolved,
      t.order_lists);
  for (const std::string& d : report->differences) fmt::print("DIFFERENCE: {}\n", d);
  fmt::print("{}: {}\n", label,
             report->ok() ? "ok (equals the journal)"
                          : fmt::format("{} difference(s)", report->differences.size()));
  return report->ok() ? 0 : 1;
}

// The scan every read-only tool makes: this configuration's segments, with a
// progress line on a terminal.
mb::journal::ScanOptions ToolScan(const mb::app::Config& cfg, std::string label) {
  mb::journal::ScanOptions so;
  so.config_hash = mb::engine::HashConfig(cfg.engine);
  so.progress = true;
  so.progress_label = std::move(label);
  return so;
}

// matchbook journal list: every segment, archived then live, with its range.
int JournalList(const mb::app::Config& cfg, const std::string& dir_path) {
  auto dir = mb::journal::DataDir::Open(dir_path, mb::journal::OpenMode::kReadOnly);
  if (!dir.ok()) return Fail(dir.status());
  auto archived = mb::journal::ListArchive(ArchivePath(dir_path));
  if (!archived.ok()) return Fail(archived.status());
  auto live = dir->ListSegments();
  if (!live.ok()) return Fail(live.status());
  const uint64_t first_live = live->empty() ? UINT64_MAX : live->front().seq;
  std::vector<std::pair<uint64_t, std::string>> rows;  // first sequence, line
  uint64_t archived_bytes = 0, live_bytes = 0;
  std::error_code ec;
  for (const auto& a : *archived) {
    if (a.first_seq >= first_live) continue;
    archived_bytes += a.bytes;
    rows.emplace_back(a.first_seq, fmt::format("archived  {}  {} bytes", a.path.string(), a.bytes));
  }
  for (const auto& s : *live) {
    const uint64_t bytes = std::filesystem::file_size(s.path, ec);
    live_bytes += bytes;
    rows.emplace_back(s.seq, fmt::format("live      {}  {} bytes", s.path.string(), bytes));
  }
  auto end = mb::journal::ScanJournal(*dir, ToolScan(cfg, "list journal"), nullptr);
  if (!end.ok()) return Fail(end.status());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const uint64_t last = i + 1 < rows.size() ? rows[i + 1].first - 1 : end->last_seq;
    fmt::print("{:>20}..{:<20} {}\n", rows[i].first, last, rows[i].second);
  }
  fmt::print("{} archived segments ({} bytes), {} live ({} bytes); records {}..{}\n",
             rows.size() - live->size(), archived_bytes, live->size(), live_bytes,
             rows.empty() ? 0 : rows.front().first, end->last_seq);
  return 0;
}

// matchbook journal archive: [journal] retention applied now, with a stopped
// server: below the oldest snapshot and the projection's next record. Not
// with a bus: only the running server knows what the stream acknowledged.
int JournalArchive(const mb::app::Config& cfg) {
  if (!cfg.runtime.bus.nats.empty()) {
    return Fail(mb::InvalidArgument(
        "[bus] is configured: only a running server knows what the stream has acknowledged, so "
        "retention runs there (serve applies [journal] retention every 2 s)"));
  }
  if (cfg.runtime.retention == mb::journal::Retention::kKeep) {
    fmt::print("[journal] retention is \"keep\": nothing to do\n");
    return 0;
  }
  if (Status s = LinkArchive(cfg); !s.ok()) return Fail(s);
  auto dir = mb::journal::DataDir::Open(cfg.runtime.data_dir, mb::journal::OpenMode::kReadWrite);
  if (!dir.ok()) return Fail(dir.status());
  // Below what every store derived from the journal has applied.
  uint64_t applied = UINT64_MAX;
  for (const mb::projection::StoreOptions& so : DerivedStores(cfg)) {
    auto store = mb::projection::OpenStore(so, cfg.engine);
    if (!store.ok()) return Fail(store.status());
    auto state = (*store)->State();
    if (!state.ok()) return Fail(state.status());
    applied = std::min(applied, state->applied_seq);
  }
  const uint64_t floor = RetentionFloor(*dir, applied, nullptr);
  auto r =
      mb::journal::Retain(*dir, floor, cfg.runtime.retention, ArchivePath(cfg.runtime.data_dir));
  if (!r.ok()) return Fail(r.status());
  fmt::print(
      "retention {}: below sequence {}: {} segments ({} bytes) {}, {} bytes written to {}; "
      "the journal starts at {}\n",
      mb::journal::ToString(cfg.runtime.retention), floor, r->segments, r->bytes_freed,
      cfg.runtime.retention == mb::journal::Retention::kArchive ? "archived" : "deleted",
      r->bytes_written, ArchivePath(cfg.runtime.data_dir).string(), r->first_live_seq);
  return 0;
}

int JournalVerify(const mb::app::Config& cfg, const std::string& dir_path) {
  auto dir = mb::journal::DataDir::Open(dir_path, mb::journal::OpenMode::kReadOnly);
  if (!dir.ok()) return Fail(dir.status());
  mb::journal::ScanOptions so = ToolScan(cfg, "verify journal");
  so.archive_dir = ArchivePath(dir_path);
  uint64_t events = 0;
  mb::engine::EventBuffer buf;
  auto scan = mb::journal::ScanJournal(*dir, so, [&](const mb::journal::JournalRecord& r) {
    buf.clear();
    MB_RETURN_IF_ERROR(mb::journal::DecodeOutcome(r, &buf));
    events += buf.size();
    return Status::Ok();
  });
  if (!scan.ok()) return Fail(scan.status());
  fmt::print("{}: {} segments, {} bytes, records {}..{} ({} records, {} events): ok\n", dir_path,
             scan->segments, scan->bytes, scan->first_seq, scan->last_seq, scan->records_checked,
             events);
  if (scan->tail) {
    fmt::print("{} (it is cut off when the exchange next starts)\n",
               mb::journal::Describe(*scan->tail));
  }
  return 0;
}

int JournalDump(const mb::app::Config& cfg, const std::string& dir_path, uint64_t from,
                uint64_t to) {
  auto dir = mb::journal::DataDir::Open(dir_path, mb::journal::OpenMode::kReadOnly);
  if (!dir.ok()) return Fail(dir.status());
  mb::engine::EngineConfig listed = ListedConfig(cfg, *dir, dir_path);
  mb::journal::ScanOptions so = ToolScan(cfg, "dump");
  so.deliver_from = from;
  so.check_all = false;
  mb::engine::EventBuffer buf;
  std::string segment;
  auto scan = mb::journal::ScanJournal(*dir, so, [&](const mb::journal::JournalRecord& r) {
    if (r.seq > to) return Status::Ok();
    if (segment != r.segment->string()) {
      segment = r.segment->string();
      fmt::print("# segment {}\n", segment);
    }
    buf.clear();
    MB_RETURN_IF_ERROR(mb::journal::DecodeOutcome(r, &buf));
    fmt::print("record {} offset {} bytes {} checksum {:016x} events {}\n", r.seq, r.offset,
               r.payload.size(), r.checksum, buf.size());
    mb::engine::LearnListings(&listed, buf);
    for (const auto& e : buf) fmt::print("  {}\n", mb::app::FormatEvent(listed, e));
    return Status::Ok();
  });
  if (!scan.ok()) return Fail(scan.status());
  if (scan->tail) fmt::print("# {}\n", mb::journal::Describe(*scan->tail));
  return 0;
}

int Verify(const mb::app::Config& cfg, const std::string& dir_path, uint64_t check_every) {
  auto dir = mb::journal::DataDir::Open(dir_path, mb::journal::OpenMode::kReadOnly);
  if (!dir.ok()) return Fail(dir.status());
  // Every snapshot is checked against the replay at its sequence.
  std::map<uint64_t, mb::journal::SnapshotMeta> snapshots;
  auto listed = dir->ListSnapshots();
  if (!listed.ok()) return Fail(listed.status());
  int bad = 0;
  for (const auto& f : *listed) {
    auto s = mb::journal::ReadSnapshot(f.path);
    if (!s.ok()) {
      fmt::print("snapshot {}: DAMAGED: {}\n", f.path.string(), s.status().message());
      ++bad;
      continue;
    }
    snapshots[s->meta.seq] = s->meta;
  }
  mb::engine::Engine engine(cfg.engine);
  mb::journal::RecoveryOptions ro;
  ro.use_snapshots = false;
  ro.archive_dir = ArchivePath(dir_path);
  uint64_t checks = 0;
  uint64_t snapshots_ok = 0;
  ro.after_record = [&](const mb::engine::Engine& e, uint64_t seq) -> Status {
    if (check_every != 0 && seq % check_every == 0) {
      ++checks;
      Status inv = e.CheckInvariants();
      if (!inv.ok()) {
        return Status(mb::StatusCode::kInternal,
                      fmt::format("invariant broken after record {}: {}", seq, inv.message()));
      }
    }
    if (auto it = snapshots.find(seq); it != snapshots.end()) {
      const uint64_t h = e.StateHash();
      if (h != it->second.state_hash) {
        return mb::Corruption(
            fmt::format("snapshot at sequence {} has state hash {:016x}, the replay {:016x}", seq,
                        it->second.state_hash, h));
      }
      ++snapshots_ok;
    }
    return Status::Ok();
  };
  auto report = mb::journal::Recover(*dir, &engine, ro);
  if (!report.ok()) return Fail(report.status());
  Status inv = engine.CheckInvariants();
  ++checks;
  fmt::print("{}\n", mb::journal::Describe(*report));
  fmt::print("invariants: {} ({} checks); snapshots matching the replay: {}/{}\n",
             inv.ok() ? "ok" : inv.message(), checks, snapshots_ok, listed->size());
  if (report->journal.tail) fmt::print("{}\n", mb::journal::Describe(*report->journal.tail));
  for (const auto& [seq, meta] : snapshots) {
    if (seq > report->recovered_seq) {
      fmt::print("snapshot at sequence {} is ahead of the journal (ends at {})\n", seq,
                 report->recovered_seq);
      ++bad;
    }
  }
  return inv.ok() && bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // libnats frees part of OpenSSL's state in its own exit handler once it
  // has used TLS; OpenSSL's exit handler would free it again. OpenSSL's is
  // not registered (the process's memory goes with it anyway).
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  CLI::App app{"Matchbook — a spot exchange core: matching engine, wallets, fees and ledger"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("matchbook 0.1.0"));

  std::string config_path;
  std::string data_dir;
  std::string fsync;
  bool recover_only = false;
  std::string host;
  int port = -1;
  int io_threads = 0;
  uint32_t ws_queue_messages = 0;
  std::optional<uint32_t> ws_write_interval_us;
  uint32_t ws_queue_bytes = 0;
  uint32_t ws_slow_grace_ms = 0;
  int64_t key_weight = -1;
  int64_t ip_weight = -1;
  int metrics_port = -1;
  int64_t flight_threshold_ms = -1;
  int64_t flight_max_age_hours = -1;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string log_file;
  uint64_t log_max_mb = 64;
  uint32_t log_keep = 5;
  uint32_t log_max_age_hours = 24;
  std::string nats;
  // [bus] security, as flags: {flag, [bus] key, help}; values by index.
  struct BusFlag {
    const char* flag;
    const char* env;
    const char* help;
  };
  static constexpr BusFlag kBusFlags[] = {
      {"--nats-ca", "MATCHBOOK_NATS_CA",
       "CA file that checks the NATS server's certificate; "
       "overrides bus.tls_ca_file"},
      {"--nats-cert", "MATCHBOOK_NATS_CERT",
       "Client certificate (PEM) for NATS mutual TLS; overrides bus.tls_cert_file"},
      {"--nats-key", "MATCHBOOK_NATS_KEY",
       "The client certificate's key (PEM); overrides bus.tls_key_file"},
      {"--nats-creds", "MATCHBOOK_NATS_CREDS", "NATS .creds file; overrides bus.creds_file"},
      {"--nats-nkey-seed", "MATCHBOOK_NATS_NKEY_SEED",
       "File with a NATS user nkey seed (SU...); overrides bus.nkey_seed_file"},
      {"--nats-user", "MATCHBOOK_NATS_USER", "NATS user name (with --nats-password-file)"},
      {"--nats-password-file", "MATCHBOOK_NATS_PASSWORD_FILE",
       "File with the NATS user's password; overrides bus.password_file"},
      {"--nats-token-file", "MATCHBOOK_NATS_TOKEN_FILE",
       "File with a NATS token; overrides bus.token_file"},
      {"--bus-signing-key", "MATCHBOOK_BUS_SIGNING_KEY",
       "The venue's Ed25519 bus key (PEM, 0600) that signs the journal on NATS; default "
       "<data_dir>/bus.key (made at a primary's first start; a standby needs the primary's)"},
      {"--bus-verify-key", "MATCHBOOK_BUS_VERIFY_KEY",
       "The primary's public bus key a replica verifies every record with: 64 hex characters "
       "or a file (<primary data_dir>/bus.key.pub); overrides bus.verify_key"},
  };
  std::string bus_flags[std::size(kBusFlags)];
  std::string master_key;
  std::string tls_cert;
  std::string tls_key;
  auto* serve = app.add_subcommand(
      "serve",
      "Recover the exchange and serve its REST, WebSocket and operator APIs until SIGINT/SIGTERM");
  auto* replica = app.add_subcommand(
      "replica",
      "Follow a primary's journal on NATS JetStream and serve its market data; forward private "
      "calls to it");
  std::string primary;
  replica
      ->add_option("--primary", primary,
                   "The primary's API (http://HOST:PORT or https://HOST:PORT, or several separated "
                   "by commas: a primary "
                   "and its standbys, of which the one whose ping says X-MB-Role: primary is "
                   "used): signed and API-key calls go there")
      ->envname("MATCHBOOK_PRIMARY");
  std::string primary_ca;
  replica
      ->add_option("--primary-ca", primary_ca,
                   "CA file (PEM) that checks an https:// primary's certificate (default: the "
                   "system's CAs)")
      ->envname("MATCHBOOK_PRIMARY_CA");
  bool standby = false;
  serve->add_flag("--standby", standby,
                  "Follow the primary's journal on NATS (--nats) as a hot standby and take over "
                  "when its lease expires; sets replication.standby");
  serve
      ->add_option("--master-key", master_key,
                   "The venue's master key (64 hex, 0600) that seals API keys' secrets; default "
                   "<data_dir>/master.key (made at the first start; a standby needs the "
                   "primary's); overrides security.master_key_file")
      ->envname("MATCHBOOK_MASTER_KEY");
  std::string ack;
  serve
      ->add_option("--ack", ack,
                   "When an order is answered: local (the journal on this machine holds it) or "
                   "replicated (also a quorum of the JetStream cluster; an R3 stream); overrides "
                   "replication.ack")
      ->envname("MATCHBOOK_ACK");
  std::string trusted_replicas;
  serve
      ->add_option("--trusted-replicas", trusted_replicas,
                   "Replica addresses (comma-separated) whose forwarded client address is "
                   "believed; overrides gateway.trusted_replicas")
      ->envname("MATCHBOOK_TRUSTED_REPLICAS");
  serve
      ->add_option("--fsync", fsync,
                   "Journal fsync policy: fsync | interval:<ms> | none; "
                   "overrides journal.fsync")
      ->envname("MATCHBOOK_FSYNC");
  serve->add_flag("--recover-only", recover_only,
                  "Recover, write the shutdown snapshot and exit (no intake)");
  serve
      ->add_option("--flight-threshold-ms", flight_threshold_ms,
                   "Dump the flight recorder when a command takes longer (0: never); "
                   "overrides metrics.flight_threshold_ms")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  serve
      ->add_option("--flight-max-age-hours", flight_max_age_hours,
                   "Delete flight recorder dumps older than this (0: no age limit); overrides "
                   "metrics.flight_max_age_hours")
      ->check(CLI::Range(int64_t{0}, int64_t{87'600}));
  // What a replica shares with serve.
  for (CLI::App* sub : {serve, replica}) {
    sub->add_option("-c,--config", config_path,
                    "Configuration file (TOML); default: the embedded demo configuration")
        ->envname("MATCHBOOK_CONFIG")
        ->check(CLI::ExistingFile);
    sub->add_option("--data-dir", data_dir,
                    "Data directory (journal, snapshots); overrides "
                    "server.data_dir")
        ->envname("MATCHBOOK_DATA_DIR");
    sub->add_option("--host", host, "Listen address; overrides gateway.host (127.0.0.1)")
        ->envname("MATCHBOOK_HOST");
    sub->add_option("--port", port,
                    "Listen port for HTTP and WebSocket (0: any free port); overrides "
                    "gateway.port (8080)")
        ->envname("MATCHBOOK_PORT")
        ->check(CLI::Range(0, 65535));
    sub->add_option("--io-threads", io_threads, "Network threads; overrides gateway.io_threads")
        ->envname("MATCHBOOK_IO_THREADS")
        ->check(CLI::Range(1, 256));
    sub->add_option("--ws-send-queue-messages", ws_queue_messages,
                    "Messages a WebSocket may have queued before it is disconnected as slow")
        ->check(CLI::Range(1, 10'000'000));
    sub->add_option("--ws-write-interval-us", ws_write_interval_us,
                    "WebSocket write rounds per io thread at least this far apart (µs; 0: a "
                    "round as soon as the io thread gets to it); overrides "
                    "gateway.ws_write_interval_us")
        ->check(CLI::Range(0, 1'000'000));
    sub->add_option("--ws-send-queue-bytes", ws_queue_bytes,
                    "Bytes a WebSocket may have queued before it is disconnected as slow")
        ->check(CLI::Range(1024, 2'000'000'000));
    sub->add_option("--ws-slow-close-grace-ms", ws_slow_grace_ms,
                    "How long a slow consumer's close frame may wait behind its unread data "
                    "before the connection is torn down (ms)")
        ->check(CLI::Range(100, 600'000));
    sub->add_option("--weight-per-minute", key_weight,
                    "Request weight an API key may use per minute (0: unlimited); overrides "
                    "gateway.weight_per_minute")
        ->check(CLI::Range(int64_t{0}, int64_t{4'294'967'295}));
    sub->add_option("--ip-weight-per-minute", ip_weight,
                    "Request weight an IP address may use per minute (0: unlimited); overrides "
                    "gateway.ip_weight_per_minute")
        ->check(CLI::Range(int64_t{0}, int64_t{4'294'967'295}));
    sub->add_option("--log-level", log_level, "debug | info | warn | error (default info)")
        ->envname("MATCHBOOK_LOG_LEVEL");
    sub->add_option("--log-format", log_format,
                    "text (one line per event) | json (one object per line); default text")
        ->envname("MATCHBOOK_LOG_FORMAT");
    sub->add_option("--log-file", log_file, "Write the log to this file (default: stderr)")
        ->envname("MATCHBOOK_LOG_FILE");
    sub->add_option("--log-max-mb", log_max_mb,
                    "Rotate the log file when it would pass this size (0: never; default 64)")
        ->envname("MATCHBOOK_LOG_MAX_MB");
    sub->add_option("--log-keep", log_keep, "Rotated log files kept (default 5)")
        ->envname("MATCHBOOK_LOG_KEEP");
    sub->add_option("--log-max-age-hours", log_max_age_hours,
                    "Rotate the log file once it has been written this long, and delete rotated "
                    "files older than --log-keep times this (0: no age limit; default 24)")
        ->envname("MATCHBOOK_LOG_MAX_AGE_HOURS")
        ->check(CLI::Range(0, 87'600));
    sub->add_option("--nats", nats,
                    "The NATS JetStream server of the journal's stream (nats://host:port, or a "
                    "comma-separated list of a cluster's): serve publishes to it, replica "
                    "follows it; overrides bus.nats")
        ->envname("MATCHBOOK_NATS");
    for (std::size_t i = 0; i < std::size(kBusFlags); ++i) {
      sub->add_option(kBusFlags[i].flag, bus_flags[i], kBusFlags[i].help)
          ->envname(kBusFlags[i].env);
    }
    sub->add_option("--tls-cert", tls_cert,
                    "PEM certificate (its chain may follow) for HTTPS and WSS on the API port "
                    "(with --tls-key; SIGHUP reloads both); overrides tls.cert_file")
        ->envname("MATCHBOOK_TLS_CERT");
    sub->add_option("--tls-key", tls_key,
                    "The certificate's PEM private key; overrides tls.key_file")
        ->envname("MATCHBOOK_TLS_KEY");
    sub->add_option("--metrics-port", metrics_port,
                    "Also serve /metrics alone on this port (0: off); overrides metrics.port")
        ->envname("MATCHBOOK_METRICS_PORT")
        ->check(CLI::Range(0, 65535));
  }

  auto* demo = app.add_subcommand("demo", "Run a scripted trading session and print every event");
  demo->add_option("-c,--config", config_path, "Configuration file (TOML)")
      ->check(CLI::ExistingFile);
  std::string demo_dir;
  demo->add_option("--data-dir", demo_dir,
                   "Also run the session through the full pipeline into this (new) data "
                   "directory and check the journal holds the same events");

  auto* config = app.add_subcommand("config", "Configuration tools");
  config->require_subcommand(1);
  std::string check_path;
  auto* check = config->add_subcommand("check", "Validate a configuration file");
  check->add_option("file", check_path, "Configuration file (TOML)")->required();

  auto* journal = app.add_subcommand("journal", "Journal tools");
  journal->require_subcommand(1);
  uint64_t from = 1;
  uint64_t to = UINT64_MAX;
  auto* dump = journal->add_subcommand("dump", "Print journal records and their events");
  auto* jverify =
      journal->add_subcommand("verify", "Check every segment header, record frame and checksum");
  auto* jlist = journal->add_subcommand(
      "list", "Live and archived segments with their sequence ranges (read-only)");
  auto* jarchive =
      journal->add_subcommand("archive", "Apply [journal] retention now, with the server stopped");
  for (CLI::App* sub : {dump, jverify, jlist, jarchive}) {
    sub->add_option("dir", data_dir, "Data directory (default: the configuration's)");
    sub->add_option("--data-dir", data_dir, "Data directory");
    sub->add_option("-c,--config", config_path, "Configuration the journal was written with")
        ->envname("MATCHBOOK_CONFIG")
        ->check(CLI::ExistingFile);
  }
  dump->add_option("--from", from, "First sequence to print");
  dump->add_option("--to", to, "Last sequence to print");

  auto* secrets = app.add_subcommand("secrets", "API key secrets at rest");
  secrets->require_subcommand(1);
  auto* scrub = secrets->add_subcommand(
      "scrub",
      "With the server stopped: blank the plain-text secrets of revoked API keys that an earlier "
      "version journaled, in the journal, the archive and the snapshots, and purge the bus's "
      "streams (docs/security.md)");
  std::string new_master_key;
  auto* rotate = secrets->add_subcommand(
      "rotate-master-key",
      "With the server stopped: seal every API key secret again with a new master key, in the "
      "journal, the archive and the snapshots, install the key and purge the bus's streams "
      "(docs/security.md)");
  for (CLI::App* sub : {scrub, rotate}) {
    sub->add_option("dir", data_dir, "Data directory (default: the configuration's)");
    sub->add_option("--data-dir", data_dir, "Data directory");
    sub->add_option("-c,--config", config_path, "Configuration the journal was written with")
        ->envname("MATCHBOOK_CONFIG")
        ->check(CLI::ExistingFile);
    sub->add_option("--nats", nats, "The bus's NATS server(s); overrides bus.nats")
        ->envname("MATCHBOOK_NATS");
  }
  rotate->add_option("--master-key", master_key,
                     "The master key in use; overrides security.master_key_file");
  rotate
      ->add_option("--new-master-key", new_master_key,
                   "The new key (64 hex characters, 0600; e.g. openssl rand -hex 32)")
      ->required();

  uint64_t check_every = 10'000;
  auto* verify = app.add_subcommand(
      "verify", "Replay the journal from scratch; check invariants and every snapshot");
  verify->add_option("dir", data_dir, "Data directory (default: the configuration's)");
  verify->add_option("--data-dir", data_dir, "Data directory");
  verify->add_option("-c,--config", config_path, "Configuration the journal was written with")
      ->envname("MATCHBOOK_CONFIG")
      ->check(CLI::ExistingFile);
  verify->add_option("--check-every", check_every,
                     "Check every invariant after every N records (0: only at the end)");
  bool verify_projection = false;
  verify->add_flag("--projection", verify_projection,
                   "Compare the history projection (configuration's [projection]) with a replay "
                   "of the journal instead");

  bool verify_history = false;
  verify->add_flag("--history", verify_history,
                   "Compare the history store (<data_dir>/history) with a replay of the journal "
                   "instead: every key");
  auto* history_cmd = app.add_subcommand("history", "The history store (<data_dir>/history)");
  history_cmd->require_subcommand(1);
  auto* history_rebuild = history_cmd->add_subcommand(
      "rebuild",
      "Empty the history store and build it again from the journal and the archive (offline; "
      "the server stopped)");
  history_rebuild->add_option("dir", data_dir, "Data directory (default: the configuration's)");
  history_rebuild->add_option("--data-dir", data_dir, "Data directory");
  history_rebuild
      ->add_option("-c,--config", config_path, "Configuration the journal was written with")
      ->envname("MATCHBOOK_CONFIG")
      ->check(CLI::ExistingFile);

  bool rebuild = false;
  auto* project = app.add_subcommand(
      "project", "Bring the history projection up to the journal (offline; the server stopped)");
  project->add_option("dir", data_dir, "Data directory (default: the configuration's)");
  project->add_option("--data-dir", data_dir, "Data directory");
  project->add_option("-c,--config", config_path, "Configuration the journal was written with")
      ->envname("MATCHBOOK_CONFIG")
      ->check(CLI::ExistingFile);
  project->add_flag("--rebuild", rebuild,
                    "Empty the projection first and project the whole journal again");

  std::string backup_to;
  std::string restore_from;
  uint32_t snapshot_wait_s = 60;
  auto* backup = app.add_subcommand(
      "backup",
      "Copy a data directory at a consistent point (a fresh snapshot from a running server, the "
      "journal up to it, accounts and API keys) with a manifest of checksums");
  backup->add_option("--data-dir", data_dir, "Data directory (default: the configuration's)");
  backup->add_option("--to", backup_to, "Backup directory (new, or empty)")->required();
  backup->add_option("-c,--config", config_path, "Configuration the journal was written with")
      ->envname("MATCHBOOK_CONFIG")
      ->check(CLI::ExistingFile);
  backup->add_option("--snapshot-wait", snapshot_wait_s,
                     "Seconds a running server may take to write the snapshot");
  auto* restore = app.add_subcommand(
      "restore", "Check a backup against its manifest and restore it into a new data directory");
  restore->add_option("--from", restore_from, "Backup directory")->required();
  restore->add_option("--data-dir", data_dir, "New data directory (absent, or empty)")->required();
  restore
      ->add_option("--master-key", master_key,
                   "The venue's master key file (a backup holds none): it must open the backup's "
                   "API key secrets, and is copied into the new directory")
      ->envname("MATCHBOOK_MASTER_KEY");
  restore->add_option("-c,--config", config_path, "Configuration the source ran")
      ->envname("MATCHBOOK_CONFIG")
      ->check(CLI::ExistingFile);

  CLI11_PARSE(app, argc, argv);

  if (check->parsed()) {
    auto cfg = mb::app::LoadFullConfig(check_path);
    if (!cfg.ok()) return Fail(cfg.status());
    fmt::print("{}: ok ({} assets, {} markets)\n", check_path, cfg->engine.assets.size(),
               cfg->engine.markets.size());
    return 0;
  }

  auto cfg = Load(config_path);
  if (!cfg.ok()) return Fail(cfg.status());
  if (!data_dir.empty()) cfg->runtime.data_dir = data_dir;
  if (!master_key.empty()) cfg->runtime.master_key_file = master_key;
  if (!fsync.empty()) {
    if (Status s = mb::journal::ParseFsyncPolicy(fsync, &cfg->runtime.journal); !s.ok()) {
      return Fail(s);
    }
  }
  mb::gateway::ServerOptions& so = cfg->runtime.gateway.server;
  if (!host.empty()) so.host = host;
  if (port >= 0) so.port = static_cast<uint16_t>(port);
  if (io_threads > 0) so.io_threads = io_threads;
  if (ws_queue_messages > 0) so.ws_send_queue_messages = ws_queue_messages;
  if (ws_write_interval_us) so.ws_write_interval_us = *ws_write_interval_us;
  if (ws_queue_bytes > 0) so.ws_send_queue_bytes = ws_queue_bytes;
  if (ws_slow_grace_ms > 0) so.ws_slow_close_grace_ms = ws_slow_grace_ms;
  if (!tls_cert.empty()) so.tls_cert_file = tls_cert;
  if (!tls_key.empty()) so.tls_key_file = tls_key;
  if (so.tls_cert_file.empty() != so.tls_key_file.empty()) {
    return Fail(
        mb::InvalidArgument("--tls-cert and --tls-key go together (tls.cert_file and "
                            "tls.key_file)"));
  }
  mb::gateway::GatewayOptions& go = cfg->runtime.gateway;
  if (key_weight >= 0)
    go.key_limit.weight_per_minute = go.key_limit.burst = static_cast<uint32_t>(key_weight);
  if (ip_weight >= 0)
    go.ip_limit.weight_per_minute = go.ip_limit.burst = static_cast<uint32_t>(ip_weight);
  if (metrics_port >= 0) cfg->runtime.metrics.port = static_cast<uint16_t>(metrics_port);
  if (!nats.empty()) {
    if (auto servers = mb::bus::ParseServers(nats); !servers.ok()) {
      return Fail(Status(servers.status().code(), "--nats: " + servers.status().message()));
    }
    cfg->runtime.bus.nats = nats;
  }
  {
    mb::app::BusConfig& b = cfg->runtime.bus;
    std::string* targets[] = {&b.security.tls_ca_file,    &b.security.tls_cert_file,
                              &b.security.tls_key_file,   &b.security.creds_file,
                              &b.security.nkey_seed_file, &b.security.user,
                              &b.security.password_file,  &b.security.token_file,
                              &b.signing_key_file,        &b.verify_key};
    static_assert(std::size(targets) == std::size(kBusFlags));
    for (std::size_t i = 0; i < std::size(kBusFlags); ++i) {
      if (!bus_flags[i].empty()) *targets[i] = bus_flags[i];
    }
  }
  if (standby) cfg->runtime.replication.standby = true;
  if (standby || !ack.empty()) cfg->runtime.replication.leadership = true;
  if (cfg->runtime.replication.standby) cfg->runtime.replication.leadership = true;
  if (!ack.empty()) {
    auto a = mb::app::ParseAckPolicy(ack);
    if (!a.ok()) return Fail(Status(a.status().code(), "--ack: " + a.status().message()));
    cfg->runtime.replication.ack = *a;
  }
  if (cfg->runtime.replication.ack == mb::app::AckPolicy::kReplicated &&
      cfg->runtime.bus.replicas < 3) {
    cfg->runtime.bus.replicas = 3;  // a quorum needs three copies
  }
  if (cfg->runtime.replication.standby && cfg->runtime.bus.nats.empty()) {
    return Fail(mb::InvalidArgument("--standby: the primary's NATS is needed (--nats URL)"));
  }
  if (!trusted_replicas.empty()) {
    auto list = mb::app::ParseAddressList(trusted_replicas);
    if (!list.ok()) {
      return Fail(Status(list.status().code(), "--trusted-replicas: " + list.status().message()));
    }
    go.trusted_replicas = std::move(*list);
  }
  if (flight_threshold_ms >= 0) {
    cfg->runtime.metrics.flight_threshold_ms = static_cast<uint32_t>(flight_threshold_ms);
  }
  if (flight_max_age_hours >= 0) {
    cfg->runtime.metrics.flight_max_age_hours = static_cast<uint32_t>(flight_max_age_hours);
  }
  const std::string source =
      config_path.empty() ? std::string("the embedded demo configuration") : config_path;

  if (demo->parsed()) {
    std::string out;
    Status s;
    if (demo_dir.empty()) {
      s = mb::app::RunDemo(cfg->engine, &out);
    } else {
      cfg->runtime.data_dir = demo_dir;
      mb::exchange::ExchangeOptions o = mb::app::ExchangeOptionsFrom(*cfg);
      o.log = [](std::string_view line) { fmt::print(stderr, "matchbook: {}\n", line); };
      s = mb::app::RunDemoThroughPipeline(cfg->engine, std::move(o), &out);
    }
    std::fputs(out.c_str(), stdout);
    return s.ok() ? 0 : Fail(s);
  }
  if (dump->parsed()) return JournalDump(*cfg, cfg->runtime.data_dir, from, to);
  if (jverify->parsed()) return JournalVerify(*cfg, cfg->runtime.data_dir);
  if (jlist->parsed()) return JournalList(*cfg, cfg->runtime.data_dir);
  if (jarchive->parsed()) return JournalArchive(*cfg);
  if (scrub->parsed()) {
    if (Status s = LinkArchive(*cfg); !s.ok()) return Fail(s);
    auto r = mb::app::ScrubSecrets(*cfg, ArchivePath(cfg->runtime.data_dir), DerivedStores(*cfg));
    if (!r.ok()) return Fail(r.status());
    fmt::print(
        "scrubbed {} plain secret(s) of revoked keys: {} records in {} live and {} archived "
        "segments, {} snapshots rewritten{}{}\n",
        r->secrets, r->records, r->segments, r->archived_segments, r->snapshots,
        r->removed_files > 0 ? "; auth.json.imported removed" : "",
        r->stream_purged ? "; the bus's journal and snapshot streams purged" : "");
    return 0;
  }
  if (rotate->parsed()) {
    if (Status s = LinkArchive(*cfg); !s.ok()) return Fail(s);
    auto r = mb::app::RotateMasterKey(*cfg, ArchivePath(cfg->runtime.data_dir), DerivedStores(*cfg),
                                      new_master_key);
    if (!r.ok()) return Fail(r.status());
    fmt::print(
        "sealed {} secret(s) again with {}: {} records in {} live and {} archived segments, {} "
        "snapshots rewritten; {} now holds the new key{}\n",
        r->secrets, new_master_key, r->records, r->segments, r->archived_segments, r->snapshots,
        mb::app::MasterKeyFile(*cfg).string(),
        r->stream_purged ? "; the bus's journal and snapshot streams purged" : "");
    return 0;
  }
  if (verify->parsed() && verify_projection) {
    return VerifyProjection(*cfg, StoreOptionsFor(*cfg), "projection");
  }
  if (verify->parsed() && verify_history) {
    return VerifyProjection(*cfg, HistoryStoreOptions(*cfg), "history");
  }
  if (history_rebuild->parsed()) {
    // Whatever is there goes, damaged or not: the journal rebuilds it.
    std::error_code ec;
    std::filesystem::remove_all(HistoryStoreOptions(*cfg).path, ec);
    if (ec) return Fail(mb::IoError(HistoryStoreOptions(*cfg).path + ": remove: " + ec.message()));
    return Project(*cfg, true, HistoryStoreOptions(*cfg), HistoryProjectorOptions(*cfg));
  }
  if (verify->parsed()) return Verify(*cfg, cfg->runtime.data_dir, check_every);
  if (project->parsed())
    return Project(*cfg, rebuild, StoreOptionsFor(*cfg), ProjectorOptionsFor(*cfg));
  if (backup->parsed() || restore->parsed()) {
    auto m = backup->parsed()
                 ? mb::app::Backup(
                       {cfg->runtime.data_dir, backup_to, std::chrono::seconds(snapshot_wait_s)},
                       cfg->engine)
                 : mb::app::Restore(restore_from, cfg->runtime.data_dir, cfg->engine, master_key);
    if (!m.ok()) return Fail(m.status());
    uint64_t bytes = 0;
    for (const auto& f : m->files) bytes += f.bytes;
    fmt::print("{} {}: sequence {} state hash {:016x} ({} files, {} bytes{})\n",
               backup->parsed() ? "backup" : "restored",
               backup->parsed() ? backup_to : cfg->runtime.data_dir, m->seq, m->state_hash,
               m->files.size(), bytes,
               m->snapshot_seq != 0 ? fmt::format(", snapshot {}", m->snapshot_seq) : "");
    return 0;
  }
  mb::log::Options log_options;
  auto level = mb::log::ParseLevel(log_level);
  if (!level.ok()) return Fail(level.status());
  auto format = mb::log::ParseFormat(log_format);
  if (!format.ok()) return Fail(format.status());
  log_options.level = *level;
  log_options.format = *format;
  log_options.file = log_file;
  log_options.max_file_bytes = log_max_mb << 20;
  log_options.max_files = log_keep;
  log_options.max_age_hours = log_max_age_hours;
  if (Status s = mb::log::Init(log_options); !s.ok()) return Fail(s);
  int rc = 0;
  if (replica->parsed()) {
    InstallSignals();
    rc = mb::app::RunReplica(
        *cfg, source, primary, primary_ca, [] { return g_signal.load() != 0; },
        [] { return g_reload_tls.exchange(false); });
  } else {
    // A primary, or a standby until it takes over; a primary that is the
    // primary no more goes on as a standby (docs/failover.md).
    InstallSignals();
    bool as_standby = cfg->runtime.replication.standby;
    bool was_primary = false;
    std::unique_ptr<mb::bus::Lease> lease;
    for (;;) {
      if (as_standby) {
        mb::app::StandbyEnd end = mb::app::RunStandby(
            *cfg, source, ArchivePath(cfg->runtime.data_dir), [] { return g_signal.load() != 0; },
            was_primary);
        if (!end.promoted) {
          rc = end.rc;
          break;
        }
        lease = std::move(end.lease);
      }
      bool demoted = false;
      rc = Serve(*cfg, source, recover_only, std::move(lease), &demoted);
      if (!demoted || g_signal.load() != 0) break;
      as_standby = true;
      was_primary = true;
    }
  }
  if (!cfg->runtime.bus.nats.empty()) mb::bus::ShutdownNats();
  mb::log::Shutdown();
  return rc;
}
