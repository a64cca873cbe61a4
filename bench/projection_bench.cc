// `matchbook-bench projection`: see projection_bench.h.
#include "projection_bench.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "engine/engine.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/reader.h"
#include "journal/writer.h"
#include "projection/projector.h"
#include "projection/store.h"
#include "stats.h"
#include "thread_cpu.h"
#include "workload/engine_workload.h"

namespace mb::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string backend = "sqlite";
  uint64_t events = 1'000'000;
  std::size_t batch_events = 1000;
  std::size_t catchup_batch_events = 20000;
  uint64_t rate = 0;  // orders/s for the lag phase; 0 = none
  uint64_t duration_ms = 10'000;
  bool json = false;
};

std::string Ms(int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }

// A throw-away PostgreSQL cluster (scripts/pg_cluster.sh), stopped and removed
// when the benchmark ends.
class PgCluster {
 public:
  ~PgCluster() {
    if (!dir_.empty()) {
      const std::string cmd = "bash " + Script() + " stop " + dir_ + " >/dev/null 2>&1";
      (void)std::system(cmd.c_str());
    }
  }
  // The URL to benchmark against: MATCHBOOK_PG_URL, else a new cluster.
  bool Start(std::string* url) {
    if (const char* env = std::getenv("MATCHBOOK_PG_URL"); env != nullptr && *env != '\0') {
      *url = env;
      return true;
    }
    dir_ = (fs::temp_directory_path() / fmt::format("mb-bench-pg-{}", getpid())).string();
    const std::string cmd = "bash " + Script() + " start " + dir_;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return false;
    char line[512];
    std::string last;
    while (std::fgets(line, sizeof line, p) != nullptr) last = line;
    if (pclose(p) != 0) return false;
    while (!last.empty() && (last.back() == '\n' || last.back() == '\r')) last.pop_back();
    *url = last;
    return !last.empty();
  }

 private:
  static std::string Script() { return std::string(MB_SOURCE_DIR) + "/scripts/pg_cluster.sh"; }
  std::string dir_;
};

Result<std::unique_ptr<projection::Store>> OpenFresh(const Options& o, const std::string& url,
                                                     const fs::path& file,
                                                     const engine::EngineConfig& config) {
  projection::StoreOptions so;
  so.backend = o.backend;
  so.path = file.string();
  so.url = url;
  auto store = projection::OpenStore(so, config);
  if (!store.ok()) return store.status();
  MB_RETURN_IF_ERROR((*store)->Reset());
  return store;
}

// Writes a journal of at least `events` events; returns how many.
Result<uint64_t> WriteJournal(const fs::path& dir_path, const Workload& w, uint64_t events) {
  auto dir = journal::DataDir::Open(dir_path, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  const uint64_t hash = engine::HashConfig(w.config);
  journal::ScanOptions so;
  so.config_hash = hash;
  auto scan = journal::ScanJournal(*dir, so, nullptr);
  if (!scan.ok()) return scan.status();
  journal::JournalOptions jo;
  jo.policy = journal::FsyncPolicy::kNone;
  auto writer = journal::JournalWriter::Open(*dir, jo, hash, *scan);
  if (!writer.ok()) return writer.status();
  engine::Engine engine(w.config);
  engine::EventBuffer ev;
  uint64_t written = 0;
  auto feed = [&](const engine::Command& c) -> Status {
    ev.clear();
    engine.Process(c, &ev);
    (*writer)->Append(ev);
    written += ev.size();
    if (((*writer)->next_seq() & 1023) == 0) MB_RETURN_IF_ERROR((*writer)->Write());
    return Status::Ok();
  };
  for (const engine::Command& c : w.setup) MB_RETURN_IF_ERROR(feed(c));
  for (const engine::Command& c : w.commands) {
    if (written >= events) break;
    MB_RETURN_IF_ERROR(feed(c));
  }
  MB_RETURN_IF_ERROR((*writer)->Write());
  MB_RETURN_IF_ERROR((*writer)->SyncAll());
  return written;
}

class Counting final : public exchange::Completion {
 public:
  void OnDone(uint64_t, const exchange::Outcome&) noexcept override {
    done_.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t done() const { return done_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> done_{0};
};

uint64_t FileBytes(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The largest size a file reaches, sampled every millisecond.
class LargestSize {
 public:
  explicit LargestSize(fs::path file) : file_(std::move(file)) {
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
        largest_ = std::max(largest_, FileBytes(file_));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~LargestSize() { Stop(); }
  uint64_t Stop() {
    if (thread_.joinable()) {
      stop_.store(true, std::memory_order_relaxed);
      thread_.join();
    }
    return largest_;
  }

 private:
  const fs::path file_;
  std::atomic<bool> stop_{false};
  uint64_t largest_ = 0;  // the sampling thread's until Stop() joins it
  std::thread thread_;
};

double ThisThreadCpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The CPU seconds of the store's own background threads: SQLite's
// checkpointer, RocksDB's flush and compaction pools.
double BackgroundCpu(const std::map<std::string, double>& cpu) {
  return CpuOf(cpu, "mb-checkpoint") + CpuOf(cpu, "rocksdb:low") + CpuOf(cpu, "rocksdb:high");
}

// Bytes this process has caused to be written to storage (/proc/self/io).
uint64_t ProcWriteBytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return 0;
  char line[128];
  uint64_t v = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long n = 0;
    if (std::sscanf(line, "write_bytes: %llu", &n) == 1) v = n;
  }
  std::fclose(f);
  return v;
}

uint64_t DirBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

// What a phase left on disk and how its WAL went, per event (or order).
struct DiskFigures {
  double wal_bytes_per_event = 0;  // appended to the WAL
  uint64_t largest_wal = 0;        // the -wal file at its largest
  uint64_t wal_max = 0;            // its ceiling
  double db_bytes_per_event = 0;   // the database file after a last checkpoint
  uint64_t checkpoints = 0, completed = 0, ceiling_waits = 0;

  std::string Text() const {
    return fmt::format(
        "WAL {:.0f} B written per event, largest WAL file {:.1f} MiB (ceiling {} MiB), {} "
        "checkpoints ({} complete, {} commits held at the ceiling), database {:.0f} B per event",
        wal_bytes_per_event, static_cast<double>(largest_wal) / (1 << 20), wal_max >> 20,
        checkpoints, completed, ceiling_waits, db_bytes_per_event);
  }
  std::string Json(std::string_view prefix) const {
    return fmt::format(
        ",\"{0}wal_bytes_per_event\":{1:.1f},\"{0}largest_wal_bytes\":{2},\"{0}checkpoints\":{3},"
        "\"{0}checkpoints_completed\":{4},\"{0}ceiling_waits\":{5},\"{0}db_bytes_per_event\":{6:."
        "1f}",
        prefix, wal_bytes_per_event, largest_wal, checkpoints, completed, ceiling_waits,
        db_bytes_per_event);
  }
};

// Closes the store (its last checkpoint empties the WAL into the database)
// and reads the figures. nullopt for a backend that does not report them.
std::optional<DiskFigures> CloseAndMeasure(std::unique_ptr<projection::Store>* store,
                                           const fs::path& db, LargestSize* wal, uint64_t events) {
  const auto s = (*store)->Storage();
  store->reset();
  const uint64_t largest = wal->Stop();
  if (!s || events == 0) return std::nullopt;
  DiskFigures d;
  const double n = static_cast<double>(events);
  d.wal_bytes_per_event = static_cast<double>(s->frames_written * s->frame_bytes) / n;
  d.largest_wal = largest;
  d.wal_max = s->wal_max_bytes;
  d.db_bytes_per_event = static_cast<double>(FileBytes(db)) / n;
  d.checkpoints = s->checkpoints;
  d.completed = s->checkpoints_completed;
  d.ceiling_waits = s->ceiling_waits;
  return d;
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int RunProjection(const Options& o) {
  const fs::path scratch = fs::temp_directory_path() / fmt::format("mb-bench-proj-{}", getpid());
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{scratch};

  PgCluster cluster;
  std::string url;
  if (o.backend == "postgres" && !cluster.Start(&url)) {
    std::fprintf(stderr,
                 "matchbook-bench projection: no PostgreSQL (set MATCHBOOK_PG_URL, or "
                 "install postgresql-15 for scripts/pg_cluster.sh)\n");
    return 1;
  }

  // ---- throughput ----
  MixSpec spec;
  spec.commands = static_cast<std::size_t>(o.events * 10 / 14 + 1000);  // ~1.4 events/command
  spec.accounts = 1000;
  const Workload w = GenerateExchangeCoreMix(spec);
  const fs::path journal_dir = scratch / "data";
  auto written = WriteJournal(journal_dir, w, o.events);
  if (!written.ok()) {
    std::fprintf(stderr, "journal: %s\n", written.status().message().c_str());
    return 1;
  }
  const bool rocks = o.backend == "rocksdb";
  const fs::path db_file = scratch / (rocks ? "history" : "projection.sqlite");
  auto store = OpenFresh(o, url, db_file, w.config);
  if (!store.ok()) {
    std::fprintf(stderr, "store: %s\n", store.status().message().c_str());
    return 1;
  }
  LargestSize catchup_wal(fs::path(db_file.string() + "-wal"));
  const double cpu0 = ThisThreadCpuSeconds();
  const std::map<std::string, double> threads0 = ThreadCpuSeconds();
  const uint64_t write0 = ProcWriteBytes();
  projection::ProjectorOptions po;
  po.batch_events = o.batch_events;
  po.catchup_batch_events = o.catchup_batch_events;
  const uint64_t hash = engine::HashConfig(w.config);
  std::vector<int64_t> commit_ns;
  double secs = 0;
  uint64_t projected = 0;
  {
    projection::Projector p(journal_dir, w.config, hash, store->get(), po);
    if (Status s = p.Init(); !s.ok()) {
      std::fprintf(stderr, "projector: %s\n", s.message().c_str());
      return 1;
    }
    const auto t0 = Clock::now();
    for (;;) {
      const auto b0 = Clock::now();
      auto n = p.RunOnce();
      if (!n.ok()) {
        std::fprintf(stderr, "projector: %s\n", n.status().message().c_str());
        return 1;
      }
      if (*n == 0) break;
      commit_ns.push_back((Clock::now() - b0).count());
    }
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
    projected = p.stats().events;
  }
  const double writer_cpu = ThisThreadCpuSeconds() - cpu0;
  const std::map<std::string, double> threads1 = ThreadCpuSeconds();
  // SQLite's checkpointer, or RocksDB's flush and compaction threads.
  const double checkpoint_cpu = BackgroundCpu(threads1) - BackgroundCpu(threads0);
  const uint64_t written_bytes = ProcWriteBytes() - write0;
  const double eps = static_cast<double>(projected) / secs;
  uint64_t rows = 0;
  if (auto t = (*store)->Totals(); t.ok()) {
    rows =
        t->orders + t->order_events + t->trades + t->ledger_entries + t->deposits + t->withdrawals;
    fmt::print(
        "rows: {} orders, {} order events, {} trades, {} ledger entries, {} deposits, {} "
        "withdrawals\n",
        t->orders, t->order_events, t->trades, t->ledger_entries, t->deposits, t->withdrawals);
  }
  const Percentiles bp = Summarize(&commit_ns);
  fmt::print(
      "projection {}: {} events ({} records) in {:.3f} s = {:.0f} events/s; per catch-up batch "
      "of <= {} events: p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms ({} batches)\n",
      o.backend, projected, store->get() != nullptr ? (*store)->State()->applied_seq : 0, secs, eps,
      o.catchup_batch_events, Ms(bp.p50), Ms(bp.p99), Ms(bp.p999), Ms(bp.max), commit_ns.size());
  const double per_event_us = 1e6 / static_cast<double>(std::max<uint64_t>(projected, 1));
  fmt::print(
      "cpu: projector {:.2f} us per event, {} {:.2f} us per event; disk: {:.0f} bytes written "
      "per event (/proc/self/io)\n",
      writer_cpu * per_event_us, rocks ? "flush and compaction" : "checkpointer",
      checkpoint_cpu * per_event_us,
      static_cast<double>(written_bytes) / static_cast<double>(std::max<uint64_t>(projected, 1)));
  std::string disk_json = fmt::format(
      ",\"cpu_us_per_event\":{:.3f},\"checkpoint_cpu_us_per_event\":{:.3f},\"written_bytes_per_"
      "event\":{:.1f}",
      writer_cpu * per_event_us, checkpoint_cpu * per_event_us,
      static_cast<double>(written_bytes) / static_cast<double>(std::max<uint64_t>(projected, 1)));
  if (rocks) {
    store->reset();
    const double on_disk = static_cast<double>(DirBytes(db_file));
    fmt::print("storage: the store holds {:.0f} bytes per event on disk\n",
               on_disk / static_cast<double>(std::max<uint64_t>(projected, 1)));
    disk_json += fmt::format(",\"db_bytes_per_event\":{:.1f}",
                             on_disk / static_cast<double>(std::max<uint64_t>(projected, 1)));
  }
  if (auto d = rocks ? std::nullopt : CloseAndMeasure(&*store, db_file, &catchup_wal, projected)) {
    fmt::print("storage: {}\n", d->Text());
    disk_json += d->Json("");
  }

  // ---- lag at a rate ----
  std::string lag_json;
  if (o.rate > 0) {
    const fs::path live_file = scratch / (rocks ? "live-history" : "live.sqlite");
    auto live_store = OpenFresh(o, url, live_file, w.config);
    if (!live_store.ok()) {
      std::fprintf(stderr, "store: %s\n", live_store.status().message().c_str());
      return 1;
    }
    const fs::path live_dir = scratch / "live";
    projection::ProjectorOptions lpo;
    lpo.batch_events = o.batch_events;
    lpo.catchup_batch_events = o.catchup_batch_events;
    lpo.lag_samples = 10'000'000;
    projection::Projector proj(live_dir, w.config, hash, live_store->get(), lpo);
    exchange::ExchangeOptions eo;
    eo.engine = w.config;
    eo.data_dir = live_dir;
    eo.log = [](std::string_view) {};
    eo.on_durable = [&proj](std::span<const engine::Event> ev) {
      if (!ev.empty()) proj.NotifyDurable(static_cast<uint64_t>(ev.back().seq));
    };
    auto ex = exchange::Exchange::Open(std::move(eo));
    if (!ex.ok()) {
      std::fprintf(stderr, "exchange: %s\n", ex.status().message().c_str());
      return 1;
    }
    LargestSize live_wal(fs::path(live_file.string() + "-wal"));
    proj.Start((*ex)->durable_seq());
    Counting done;
    uint64_t sent = 0;
    for (const engine::Command& c : w.setup) {
      while ((*ex)->Submit(c, &done, sent, false) == exchange::SubmitResult::kFull) {
        std::this_thread::yield();
      }
      ++sent;
    }
    while (done.done() < sent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    proj.WaitApplied((*ex)->durable_seq(), std::chrono::seconds(60));
    (void)proj.TakeLagSamples();  // the setup is not measured
    const std::map<std::string, double> live0 = ThreadCpuSeconds();
    const uint64_t events0 = proj.stats().events;
    const uint64_t total = o.rate * o.duration_ms / 1000;
    const auto t0 = Clock::now();
    uint64_t dropped = 0;
    for (uint64_t i = 0; i < total && i < w.commands.size(); ++i) {
      const auto due = t0 + std::chrono::nanoseconds(i * 1'000'000'000ull / o.rate);
      std::this_thread::sleep_until(due);
      engine::Command c = w.commands[i];
      c.timestamp_ns = WallNs();
      if ((*ex)->Submit(c, &done, sent, false) != exchange::SubmitResult::kOk) {
        ++dropped;
        continue;
      }
      ++sent;
    }
    const bool caught_up = proj.WaitApplied((*ex)->durable_seq(), std::chrono::seconds(60));
    std::vector<int64_t> lags = proj.TakeLagSamples();
    const Percentiles lag = Summarize(&lags);
    const projection::ProjectorStats st = proj.stats();
    const std::map<std::string, double> live1 = ThreadCpuSeconds();
    proj.Stop();
    (void)(*ex)->Close();
    const double orders = static_cast<double>(std::max<uint64_t>(sent - w.setup.size(), 1));
    const double projector_us =
        (CpuOf(live1, "mb-projector") - CpuOf(live0, "mb-projector")) * 1e6 / orders;
    const double checkpoint_us = (BackgroundCpu(live1) - BackgroundCpu(live0)) * 1e6 / orders;
    fmt::print("live cpu: projector {:.2f} us per order, {} {:.2f} us per order\n", projector_us,
               rocks ? "flush and compaction" : "checkpointer", checkpoint_us);
    std::string live_disk = fmt::format(
        ",\"live_projector_cpu_us_per_order\":{:.3f},\"live_checkpoint_cpu_us_per_order\":{:.3f}",
        projector_us, checkpoint_us);
    if (auto d = rocks ? std::nullopt
                       : CloseAndMeasure(&*live_store, live_file, &live_wal, st.events - events0)) {
      fmt::print("live storage (per event): {}\n", d->Text());
      live_disk += d->Json("live_");
    }
    fmt::print(
        "projection lag at {} orders/s for {} ms ({}): commit - command time per batch: "
        "p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms; {} batches, {} refused, caught up: "
        "{}\n",
        o.rate, o.duration_ms, o.backend, Ms(lag.p50), Ms(lag.p99), Ms(lag.p999), Ms(lag.max),
        st.batches, dropped, caught_up ? "yes" : "NO");
    lag_json = fmt::format(
                   ",\"rate_per_s\":{},\"lag_p50_ms\":{},\"lag_p99_ms\":{},\"lag_p999_ms\":{},"
                   "\"lag_max_ms\":{},\"refused\":{},\"caught_up\":{}",
                   o.rate, Ms(lag.p50), Ms(lag.p99), Ms(lag.p999), Ms(lag.max), dropped,
                   caught_up ? "true" : "false") +
               live_disk;
  }
  if (o.json) {
    fmt::print(
        "{{\"bench\":\"projection\",\"backend\":\"{}\",\"events\":{},\"events_per_s\":{:.0f},"
        "\"rows\":{},\"seconds\":{:.3f},\"batch_events\":{},\"catchup_batch_events\":{},\"batch_"
        "p50_ms\":{},\"batch_p99_ms\":{},"
        "\"batch_p999_ms\":{},\"batch_max_ms\":{}{}{}}}\n",
        o.backend, projected, eps, rows, secs, o.batch_events, o.catchup_batch_events, Ms(bp.p50),
        Ms(bp.p99), Ms(bp.p999), Ms(bp.max), disk_json, lag_json);
  }
  return 0;
}

void AddProjectionOptions(CLI::App* sub, Options* o) {
  AddCount(sub, "--events", &o->events, 1, UINT64_MAX,
           "events in the pre-built journal (default 1000000)");
  AddCount(sub, "--batch-events", &o->batch_events, 1, UINT64_MAX,
           "events per transaction, at most, when keeping up (default 1000)");
  AddCount(sub, "--catchup-batch-events", &o->catchup_batch_events, 1, UINT64_MAX,
           "events per transaction, at most, when catching up (default 20000)");
  AddCount(sub, "--rate", &o->rate, 1, UINT64_MAX,
           "orders/s offered to a live exchange in the lag phase (default: no lag phase)")
      ->type_name("ORDERS_PER_S");
  AddCount(sub, "--duration-ms", &o->duration_ms, 1, UINT64_MAX,
           "length of the lag phase (default 10000)");
  sub->add_flag("--json", o->json, "print one JSON object as the last line");
}

}  // namespace

std::function<int()> AddProjectionBench(CLI::App* app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app->add_subcommand(
      "projection",
      "Projecting a pre-built journal of --events events into a fresh store (events/s, "
      "per-batch commit percentiles, CPU and bytes written per event) and, with --rate, the "
      "projection's lag behind a live exchange taking that many orders/s for --duration-ms "
      "(bench/projection_bench.h). PostgreSQL: $MATCHBOOK_PG_URL, or a throw-away cluster "
      "(scripts/pg_cluster.sh).");
  sub->add_option("--backend", o->backend,
                  "sqlite (default), postgres or rocksdb (the history store)")
      ->check(CLI::IsMember({"sqlite", "postgres", "rocksdb"}));
  AddProjectionOptions(sub, o.get());
  return [o]() -> int { return RunProjection(*o); };
}

std::function<int()> AddHistoryBench(CLI::App* app) {
  auto o = std::make_shared<Options>();
  o->backend = "rocksdb";
  CLI::App* sub = app->add_subcommand(
      "history",
      "The history store (RocksDB): `projection --backend rocksdb` — catch-up from a pre-built "
      "journal and, with --rate, its lag and CPU behind a live exchange");
  AddProjectionOptions(sub, o.get());
  return [o]() -> int { return RunProjection(*o); };
}

}  // namespace mb::bench
