// `matchbook-bench pipeline`: see pipeline_bench.h.
//
// Clocks: steady_clock (CLOCK_MONOTONIC through the vDSO) everywhere; one read
// per command on the producer side is avoided in open-loop cells (the intended
// time is what counts) and one read per command is taken in OnDone on the
// journal thread. Max-throughput cells time 1 command in 64 (start on the
// producer, end in OnDone) so that the clock is not what limits them.
#include "pipeline_bench.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli.h"
#include "engine/engine.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"
#include "journal/writer.h"
#include "metrics/metrics.h"
#include "stats.h"
#include "thread_cpu.h"
#include "workload/engine_workload.h"

namespace mb::bench {
namespace {

namespace fs = std::filesystem;
using engine::Command;
using engine::EventType;
using exchange::Exchange;
using exchange::ExchangeOptions;
using exchange::Outcome;
using exchange::SubmitResult;
using journal::FsyncPolicy;
using SteadyClock = std::chrono::steady_clock;

constexpr long kTmpfsMagic = 0x01021994;
constexpr long kExt4Magic = 0xEF53;
constexpr long kXfsMagic = 0x58465342;
constexpr long kBtrfsMagic = 0x9123683E;
constexpr long kOverlayMagic = 0x794C7630;

inline int64_t NowNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

inline void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// ------------------------------------------------------------------ options

struct PipelineArgs {
  uint64_t duration_ms = 2000;
  std::vector<uint64_t> rates = {10'000, 100'000, 1'000'000};
  std::vector<FsyncPolicy> policies = {FsyncPolicy::kNone, FsyncPolicy::kFsync};
  uint32_t producers = 1;
  uint64_t commands = 0;        // 0: sized from the cells
  uint64_t replay_events = 0;   // 0: sized from duration
  uint64_t restart_events = 0;  // 0: off
  uint64_t seed = 1;
  uint32_t inbound_capacity = ExchangeOptions{}.inbound_capacity;
  uint32_t max_batch = ExchangeOptions{}.max_batch;
  uint32_t fsync_samples = 200;
  concurrency::WaitKind wait = concurrency::WaitKind::kBackOff;
  concurrency::WaitConfig wait_config;  // back-off: spins, yields, park_us
  std::string data_dir;                 // empty: chosen (not tmpfs)
  bool json = false;
  bool verbose = false;
  bool keep = false;
  bool max_cells = true;  // --no-max: open-loop cells only
  bool stages = false;    // --stages: split open-loop latency at OnSequenced
  bool metrics = false;   // --metrics: the exchange records its stage histograms, as in serve
  uint32_t full_yields = 0;
  uint32_t full_sleep_us = 50;
  uint32_t batch_pool = ExchangeOptions{}.batch_pool;
  uint64_t segment_mib = journal::JournalOptions{}.segment_bytes >> 20;
  uint64_t sleep_margin_ns = 150'000;
  uint64_t warmup_ms = UINT64_MAX;  // default: min(duration, 1000)
};

std::string_view PolicyName(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::kNone:
      return "none";
    case FsyncPolicy::kFsync:
      return "fsync";
    case FsyncPolicy::kInterval:
      return "interval";
  }
  return "?";
}

// ------------------------------------------------------------------ data directory

std::string FsName(long magic) {
  switch (magic) {
    case kTmpfsMagic:
      return "tmpfs";
    case kExt4Magic:
      return "ext2/3/4";
    case kXfsMagic:
      return "xfs";
    case kBtrfsMagic:
      return "btrfs";
    case kOverlayMagic:
      return "overlayfs";
    default:
      return fmt::format("fs magic 0x{:x}", static_cast<unsigned long>(magic));
  }
}

std::optional<long> FsMagic(const fs::path& p) {
  struct statfs st {};
  if (::statfs(p.c_str(), &st) != 0) return std::nullopt;
  return static_cast<long>(st.f_type);
}

// A directory on a real filesystem (fsync must reach a disk: tmpfs makes it
// free). Candidates: --data-dir, then $TMPDIR or /tmp, /var/tmp, and a
// directory beside the binary (the build tree).
fs::path ChooseDataRoot(const PipelineArgs& args, std::string* note) {
  if (!args.data_dir.empty()) {
    fs::path p = args.data_dir;
    std::error_code ec;
    fs::create_directories(p, ec);
    auto m = FsMagic(p);
    *note = fmt::format("{} ({})", p.string(), m ? FsName(*m) : "unknown fs");
    if (m && *m == kTmpfsMagic) {
      std::fprintf(stderr,
                   "warning: --data-dir %s is tmpfs: fdatasync costs nothing there, the fsync "
                   "figures mean nothing\n",
                   p.c_str());
    }
    return p;
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  candidates.push_back(fs::temp_directory_path(ec));
  candidates.emplace_back("/var/tmp");
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "pipeline-data");
  for (const fs::path& c : candidates) {
    if (c.empty()) continue;
    fs::create_directories(c, ec);
    auto m = FsMagic(c);
    if (!m) continue;
    if (*m == kTmpfsMagic) {
      std::fprintf(stderr, "warning: %s is tmpfs (fsync would be free); trying the next place\n",
                   c.c_str());
      continue;
    }
    *note = fmt::format("{} ({})", c.string(), FsName(*m));
    return c;
  }
  std::fprintf(stderr, "warning: no non-tmpfs directory found; using the current directory\n");
  *note = ". (unknown fs)";
  return fs::current_path();
}

// Flushes and drops from the page cache every file under `dir` (a cold read
// next time, as after a reboot; the pages of a mapped file are dropped too).
void DropCache(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// ------------------------------------------------------------------ statistics

std::string Us(int64_t ns) { return fmt::format("{:.1f}", static_cast<double>(ns) / 1e3); }

// Busy CPU time of the whole machine (/proc/stat, all CPUs: user, nice,
// system, irq, softirq, steal) and of this process (getrusage), in seconds:
// their difference over a cell is what other processes took meanwhile, the
// noise indicator printed with every cell.
struct CpuSample {
  double machine_busy = 0;
  double self = 0;
};

CpuSample SampleCpu() {
  CpuSample c;
  std::ifstream f("/proc/stat");
  std::string label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (f >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) {
    c.machine_busy = (user + nice + system + irq + softirq + steal) /
                     static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.self = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return c;
}

// ------------------------------------------------------------------ fsync probe

struct FsyncProbeResult {
  std::vector<int64_t> ns;   // one write + fdatasync each
  int64_t stall_max_ns = 0;  // the longest gap a clock-reading thread saw meanwhile
  uint64_t stalls_1ms = 0;   // its gaps >= 1 ms
};

// write 4 KiB (appending) + fdatasync, `samples` times, in `dir`. Meanwhile
// another thread does nothing but read the clock: its gaps are time this VM
// took from a runnable thread (on this VM fsyncs come with multi-millisecond
// stalls of every vCPU, which is what the pipeline's fsync tails are made of).
FsyncProbeResult ProbeFsync(const fs::path& dir, uint32_t samples) {
  const fs::path path = dir / "fsync-probe";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MB_CHECK(fd >= 0);
  std::vector<char> buf(4096, 'x');
  FsyncProbeResult r;
  r.ns.reserve(samples);
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    int64_t last = NowNs();
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t t = NowNs();
      const int64_t gap = t - last;
      last = t;
      r.stall_max_ns = std::max(r.stall_max_ns, gap);
      if (gap >= 1'000'000) ++r.stalls_1ms;
    }
  });
  for (uint32_t i = 0; i < samples; ++i) {
    const int64_t t = NowNs();
    const ssize_t w = ::pwrite(fd, buf.data(), buf.size(), static_cast<off_t>(i) * 4096);
    MB_CHECK(w == 4096);
    MB_CHECK(::fdatasync(fd) == 0);
    r.ns.push_back(NowNs() - t);
  }
  stop.store(true, std::memory_order_relaxed);
  spinner.join();
  ::close(fd);
  fs::remove(path);
  return r;
}

// ------------------------------------------------------------------ completions

// Counts the setup commands' completions (not timed).
class CountingCompletion final : public exchange::Completion {
 public:
  void OnDone(uint64_t /*tag*/, const Outcome& o) noexcept override {
    if (o.state != Outcome::State::kDurable) bad_.fetch_add(1, std::memory_order_relaxed);
    done_.fetch_add(1, std::memory_order_release);
  }
  uint64_t done() const noexcept { return done_.load(std::memory_order_acquire); }
  uint64_t bad() const noexcept { return bad_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> bad_{0};
};

// The measured commands' completions. OnDone runs on the journal thread only
// (one writer for every counter here); start_ns[tag] was written by the
// producer before its Submit, which happens-before OnDone through the rings.
class TimedCompletion final : public exchange::Completion {
 public:
  // sequenced_ns (may be null): where OnSequenced (engine thread) records its time.
  TimedCompletion(const int64_t* start_ns, int64_t* latency_ns, int64_t* sequenced_ns,
                  uint64_t sample_mask)
      : start_ns_(start_ns),
        latency_ns_(latency_ns),
        sequenced_ns_(sequenced_ns),
        sample_mask_(sample_mask) {}

  void OnSequenced(uint64_t tag, Sequence /*seq*/,
                   std::span<const engine::Event> /*events*/) noexcept override {
    if (sequenced_ns_ != nullptr) sequenced_ns_[tag] = NowNs();
  }

  void OnDone(uint64_t tag, const Outcome& o) noexcept override {
    if (o.state != Outcome::State::kDurable) {
      not_durable_.store(not_durable_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    } else if (!o.events.empty() && o.events.front().type() == EventType::kRejected) {
      rejected_.store(rejected_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    if ((tag & sample_mask_) == 0) {
      const int64_t now = NowNs();
      latency_ns_[tag] = now - start_ns_[tag];
      last_done_ns_.store(now, std::memory_order_relaxed);
    }
    done_.store(done_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  uint64_t done() const noexcept { return done_.load(std::memory_order_acquire); }
  uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  uint64_t not_durable() const noexcept { return not_durable_.load(std::memory_order_relaxed); }
  int64_t last_done_ns() const noexcept { return last_done_ns_.load(std::memory_order_relaxed); }

 private:
  const int64_t* start_ns_;
  int64_t* latency_ns_;
  int64_t* sequenced_ns_;
  const uint64_t sample_mask_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> not_durable_{0};
  std::atomic<int64_t> last_done_ns_{0};
};

// ------------------------------------------------------------------ producers

// Sleeps (timer slack 1 ns) until `margin` before the target (sleeps on this
// VM end 10-100 us late), yields while it is a few microseconds away, spins
// for the last ones. Never returns early.
void WaitUntil(int64_t target, int64_t margin) {
  for (;;) {
    const int64_t gap = target - NowNs();
    if (gap <= 0) return;
    if (gap > margin + 50'000) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(gap - margin));
    } else if (gap > 3'000) {
      sched_yield();
    } else {
      CpuRelax();
    }
  }
}

struct ProducerPlan {
  Exchange* ex = nullptr;
  const std::vector<Command>* commands = nullptr;
  uint64_t n = 0;  // commands [0, n) of the stream, split round-robin
  uint32_t producers = 1;
  TimedCompletion* completion = nullptr;
  bool stages = false;       // ask for OnSequenced
  uint32_t full_yields = 0;  // on kFull: yield this many times, then sleep
  uint32_t full_sleep_us = 50;
  int64_t sleep_margin_ns = 150'000;  // open loop: stop sleeping this long before a send
  int64_t* start_ns = nullptr;        // indexed by tag
  int64_t* late_ns = nullptr;         // open loop: send time - intended time, by tag
  int64_t t0 = 0;
  double period_ns = 0;      // > 0: open loop at 1 / period; 0: as fast as possible
  uint64_t sample_mask = 0;  // closed loop: time commands with (tag & mask) == 0
  int64_t soft_end = 0;      // closed loop: stop submitting after this
  int64_t hard_end = 0;      // open loop: give up after this (the rest is dropped)
};

struct ProducerResult {
  uint64_t sent = 0;
  uint64_t full_retries = 0;  // Submit() == kFull, retried
  uint64_t dropped = 0;       // open loop: not sent before hard_end
  uint64_t late_10us = 0;     // open loop: sent >= 10 us after the intended time
  int64_t max_late_ns = 0;
  double cpu_s = 0;   // this thread's CPU time
  double sys_s = 0;   // of which in the kernel
  double wait_s = 0;  // runnable, waiting for a CPU
};

double ThreadCpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ThreadSysNow() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6;
}

void Produce(const ProducerPlan& plan, uint32_t index, ProducerResult* out) {
  pthread_setname_np(pthread_self(), "mb-producer");
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const double cpu0 = ThreadCpuNow();
  const double sys0 = ThreadSysNow();
  const double wait0 = RunQueueWaitSeconds("/proc/thread-self/schedstat");
  ProducerResult r;
  const bool open_loop = plan.period_ns > 0;
  for (uint64_t i = index; i < plan.n; i += plan.producers) {
    int64_t now = 0;
    if (open_loop) {
      const int64_t intended =
          plan.t0 + static_cast<int64_t>(static_cast<double>(i) * plan.period_ns);
      plan.start_ns[i] = intended;
      WaitUntil(intended, plan.sleep_margin_ns);
      now = NowNs();
      if (now > plan.hard_end) {
        r.dropped += (plan.n - i + plan.producers - 1) / plan.producers;  // i, i + P, ... < n
        break;
      }
      const int64_t late = now - intended;
      plan.late_ns[i] = late;
      if (late >= 10'000) ++r.late_10us;
      r.max_late_ns = std::max(r.max_late_ns, late);
    } else {
      if ((i & 1023) < plan.producers && NowNs() > plan.soft_end) break;
      if ((i & plan.sample_mask) == 0) plan.start_ns[i] = NowNs();
    }
    uint32_t tries = 0;
    for (;;) {
      const SubmitResult s = plan.ex->Submit((*plan.commands)[i], plan.completion, i,
                                             plan.stages && (i & plan.sample_mask) == 0);
      if (s == SubmitResult::kOk) break;
      if (s != SubmitResult::kFull) {
        const std::string_view why = ToString(s);
        std::fprintf(stderr, "pipeline: Submit refused: %.*s (%s)\n", static_cast<int>(why.size()),
                     why.data(), plan.ex->RefusalReason().c_str());
        std::abort();
      }
      ++r.full_retries;
      // A full ring means the pipeline is behind by ~inbound_capacity commands
      // (tens of ms): sleep, as a client told "503, retry later" would, and
      // leave both CPUs to the engine and the journal. Spinning or yielding
      // here takes CPU from them on a 2-core machine.
      if (++tries <= plan.full_yields) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(plan.full_sleep_us));
      }
    }
    ++r.sent;
  }
  r.cpu_s = ThreadCpuNow() - cpu0;
  r.sys_s = ThreadSysNow() - sys0;
  r.wait_s = RunQueueWaitSeconds("/proc/thread-self/schedstat") - wait0;
  *out = r;
}

// ------------------------------------------------------------------ one cell

struct CellResult {
  FsyncPolicy policy = FsyncPolicy::kNone;
  uint64_t offered = 0;  // 0: max-throughput cell
  uint64_t sent = 0;
  uint64_t dropped = 0;
  uint64_t full_retries = 0;
  uint64_t late_10us = 0;
  int64_t max_late_ns = 0;
  uint64_t rejected = 0;
  double seconds = 0;  // t0 -> last durable
  double achieved = 0;
  Percentiles lat;
  Percentiles send_late;     // open loop: actual send - intended time (the producer's lag)
  Percentiles to_sequenced;  // --stages: intended time -> OnSequenced (engine thread)
  Percentiles to_durable;    // --stages: OnSequenced -> OnDone (journal thread)
  uint64_t batches = 0;
  uint64_t write_groups = 0;
  std::map<std::string, double> cpu;  // thread name -> CPU seconds during the cell
  double others_cores = 0;            // CPUs' worth taken by other processes meanwhile
};

class LogSink {
 public:
  explicit LogSink(bool verbose) : verbose_(verbose) {}
  void Add(std::string_view line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (verbose_) std::fprintf(stderr, "  | %.*s\n", static_cast<int>(line.size()), line.data());
    lines_.emplace_back(line);
  }
  void Dump() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& l : lines_) std::fprintf(stderr, "  | %s\n", l.c_str());
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.clear();
  }

 private:
  const bool verbose_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

ExchangeOptions CellOptions(const PipelineArgs& args, const Workload& w, const fs::path& dir,
                            FsyncPolicy policy, LogSink* log) {
  ExchangeOptions o;
  o.engine = w.config;
  o.data_dir = dir;
  o.journal.policy = policy;
  // The cells measure the journal pipeline; snapshots are timed in the restart part.
  o.snapshots.every_events = 0;
  o.snapshots.every_seconds = 0;
  o.snapshots.on_shutdown = false;
  o.inbound_capacity = args.inbound_capacity;
  o.max_batch = args.max_batch;
  o.batch_pool = args.batch_pool;
  o.journal.segment_bytes = args.segment_mib << 20;
  o.engine_stage.wait = args.wait_config;
  o.engine_stage.wait.kind = args.wait;
  o.journal_stage.wait = args.wait_config;
  o.journal_stage.wait.kind = args.wait;
  o.log = [log](std::string_view line) { log->Add(line); };
  return o;
}

std::map<std::string, double> CpuDelta(const std::map<std::string, double>& before,
                                       const std::map<std::string, double>& after) {
  std::map<std::string, double> d;
  for (const auto& [name, s] : after) {
    auto it = before.find(name);
    d[name] = s - (it == before.end() ? 0.0 : it->second);
  }
  return d;
}

CellResult RunCell(const PipelineArgs& args, const Workload& w, const fs::path& dir,
                   FsyncPolicy policy, uint64_t offered, uint64_t n, uint64_t duration_ms,
                   std::vector<int64_t>* start, std::vector<int64_t>* latency) {
  LogSink log(args.verbose);
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Declared before the exchange, which records into it until it closes.
  metrics::Registry registry;
  ExchangeOptions options = CellOptions(args, w, dir, policy, &log);
  if (args.metrics) options.metrics = &registry;
  auto opened = Exchange::Open(std::move(options));
  if (!opened.ok()) {
    log.Dump();
    std::fprintf(stderr, "pipeline: Exchange::Open(%s): %s\n", dir.c_str(),
                 std::string(opened.status().message()).c_str());
    std::exit(1);
  }
  std::unique_ptr<Exchange> ex = std::move(opened).value();

  // Setup (deposits, the initial book): closed loop, not timed.
  CountingCompletion setup_done;
  for (std::size_t i = 0; i < w.setup.size(); ++i) {
    while (ex->Submit(w.setup[i], &setup_done, i) == SubmitResult::kFull) sched_yield();
  }
  while (setup_done.done() < w.setup.size())
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  MB_CHECK(setup_done.bad() == 0);
  const exchange::ExchangeStats s0 = ex->stats();

  const bool open_loop = offered > 0;
  const uint64_t sample_mask = open_loop ? 0 : 63;
  std::vector<int64_t> late(open_loop ? n : 0, -1);
  const bool stages = args.stages && open_loop;
  std::vector<int64_t> sequenced(stages ? n : 0, -1);
  TimedCompletion done(start->data(), latency->data(), stages ? sequenced.data() : nullptr,
                       sample_mask);
  ProducerPlan plan;
  plan.ex = ex.get();
  plan.commands = &w.commands;
  plan.n = n;
  plan.producers = args.producers;
  plan.completion = &done;
  plan.start_ns = start->data();
  plan.sample_mask = sample_mask;
  plan.stages = stages;
  plan.full_yields = args.full_yields;
  plan.full_sleep_us = args.full_sleep_us;
  plan.sleep_margin_ns = static_cast<int64_t>(args.sleep_margin_ns);
  plan.late_ns = late.data();
  const int64_t duration_ns = static_cast<int64_t>(duration_ms) * 1'000'000;
  const auto cpu0 = ThreadCpuSeconds();
  const CpuSample machine0 = SampleCpu();
  plan.t0 = NowNs() + 2'000'000;  // the producers are running by then
  if (open_loop) {
    plan.period_ns = 1e9 / static_cast<double>(offered);
    plan.hard_end = plan.t0 + 2 * duration_ns + 1'000'000'000;
  } else {
    plan.soft_end = plan.t0 + duration_ns;
  }
  std::vector<ProducerResult> results(args.producers);
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < args.producers; ++p) {
    threads.emplace_back([&plan, &results, p] {
      if (plan.period_ns == 0) WaitUntil(plan.t0, plan.sleep_margin_ns);
      Produce(plan, p, &results[p]);
    });
  }
  for (std::thread& t : threads) t.join();
  CellResult r;
  r.policy = policy;
  r.offered = offered;
  for (const ProducerResult& pr : results) {
    r.sent += pr.sent;
    r.dropped += pr.dropped;
    r.full_retries += pr.full_retries;
    r.late_10us += pr.late_10us;
    r.max_late_ns = std::max(r.max_late_ns, pr.max_late_ns);
    r.cpu["mb-producer"] += pr.cpu_s;
    r.cpu["mb-producer/sys"] += pr.sys_s;
    r.cpu["mb-producer/wait"] += pr.wait_s;
  }
  const int64_t wait_limit = NowNs() + 120'000'000'000;
  while (done.done() < r.sent) {
    if (NowNs() > wait_limit) {
      log.Dump();
      std::fprintf(stderr, "pipeline: %llu of %llu commands durable after 120 s; giving up\n",
                   static_cast<unsigned long long>(done.done()),
                   static_cast<unsigned long long>(r.sent));
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const int64_t all_done = NowNs();
  const CpuSample machine1 = SampleCpu();
  for (const auto& [name, secs] : CpuDelta(cpu0, ThreadCpuSeconds())) {
    if (!name.starts_with("mb-producer")) r.cpu[name] = secs;
  }
  const exchange::ExchangeStats s1 = ex->stats();
  r.batches = s1.batches - s0.batches;
  r.write_groups = s1.write_groups - s0.write_groups;
  r.rejected = done.rejected();
  MB_CHECK(done.not_durable() == 0);
  // Open loop: up to the last completion (read in OnDone). Closed loop: the
  // main thread saw the count complete (<= 100 us late).
  const int64_t end = open_loop ? done.last_done_ns() : all_done;
  r.seconds = Seconds(end - plan.t0);
  r.achieved = r.seconds > 0 ? static_cast<double>(r.sent) / r.seconds : 0;
  r.others_cores = std::max(0.0, (machine1.machine_busy - machine0.machine_busy) -
                                     (machine1.self - machine0.self)) /
                   Seconds(all_done - plan.t0 + 2'000'000);

  std::vector<int64_t> v;
  v.reserve(open_loop ? r.sent : r.sent / 64 + 1);
  for (uint64_t i = 0; i < n; ++i) {
    if ((i & sample_mask) == 0 && (*latency)[i] >= 0) v.push_back((*latency)[i]);
  }
  r.lat = Summarize(&v);
  if (open_loop) {
    std::vector<int64_t> l;
    l.reserve(r.sent);
    for (int64_t x : late) {
      if (x >= 0) l.push_back(x);
    }
    r.send_late = Summarize(&l);
  }
  if (stages) {
    std::vector<int64_t> to_seq, to_durable;
    for (uint64_t i = 0; i < n; ++i) {
      if (sequenced[i] < 0 || (*latency)[i] < 0) continue;
      to_seq.push_back(sequenced[i] - (*start)[i]);
      to_durable.push_back((*start)[i] + (*latency)[i] - sequenced[i]);
    }
    r.to_sequenced = Summarize(&to_seq);
    r.to_durable = Summarize(&to_durable);
  }
  std::fill(latency->begin(), latency->begin() + static_cast<std::ptrdiff_t>(n), -1);

  Status closed = ex->Close();
  if (!closed.ok()) {
    log.Dump();
    std::fprintf(stderr, "pipeline: Close: %s\n", std::string(closed.message()).c_str());
    std::exit(1);
  }
  ex.reset();
  if (!args.keep) fs::remove_all(dir, ec);
  // Let the deletion reach the disk before the next cell starts, so that one
  // cell's leftovers do not land in the next one's fsyncs.
  const int root_fd = ::open(dir.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd >= 0) {
    (void)::syncfs(root_fd);
    ::close(root_fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return r;
}

// ------------------------------------------------------------------ journal building

struct BuiltJournal {
  uint64_t records = 0;
  uint64_t events = 0;
  uint64_t bytes = 0;
  uint64_t snapshot_seq = 0;     // 0: none
  uint64_t snapshot_events = 0;  // events up to and including the snapshot's record
  uint64_t state_hash = 0;
  double seconds = 0;
  double sys_seconds = 0;  // of which in the kernel
};

// Runs setup + commands through an Engine and appends each command's events
// to a fresh journal (policy none, default segment size) until `events` are
// written; with snapshot_at_events > 0, writes a snapshot after the record
// that reaches that many events.
BuiltJournal BuildJournal(const fs::path& root, const Workload& w, uint64_t events,
                          uint64_t snapshot_at_events) {
  std::error_code ec;
  fs::remove_all(root, ec);
  const int64_t t0 = NowNs();
  const double sys0 = ThreadSysNow();
  auto dir = journal::DataDir::Open(root, journal::OpenMode::kReadWrite);
  MB_CHECK(dir.ok());
  engine::Engine e(w.config);
  journal::JournalOptions jo;
  jo.policy = FsyncPolicy::kNone;
  auto writer = journal::JournalWriter::Open(*dir, jo, e.ConfigHash(), journal::ScanResult{});
  MB_CHECK(writer.ok());
  engine::EventBuffer buf;
  buf.reserve(4096);
  BuiltJournal b;
  auto one = [&](const Command& c) {
    buf.clear();
    e.Process(c, &buf);
    const uint64_t checksum = (*writer)->Append(buf);
    ++b.records;
    b.events += buf.size();
    if ((b.records & 4095) == 0) MB_CHECK((*writer)->Write().ok());
    if (snapshot_at_events != 0 && b.snapshot_seq == 0 && b.events >= snapshot_at_events) {
      MB_CHECK((*writer)->Write().ok());
      journal::SnapshotMeta meta;
      meta.record_checksum = checksum;
      auto path = journal::WriteSnapshot(*dir, e.ExportImage(), &meta, 1, 3);
      MB_CHECK(path.ok());
      b.snapshot_seq = meta.seq;
      b.snapshot_events = b.events;
    }
  };
  for (const Command& c : w.setup) one(c);
  for (const Command& c : w.commands) {
    if (b.events >= events) break;
    one(c);
  }
  MB_CHECK((*writer)->Write().ok());
  b.bytes = (*writer)->bytes_on_disk();
  b.state_hash = e.StateHash();
  writer->reset();
  b.seconds = Seconds(NowNs() - t0);
  b.sys_seconds = ThreadSysNow() - sys0;
  return b;
}

struct ReplayResult {
  uint64_t events = 0;
  uint64_t records = 0;
  double seconds = 0;
  double events_per_s = 0;
};

ReplayResult Replay(const fs::path& root, const Workload& w, const BuiltJournal& built) {
  auto dir = journal::DataDir::Open(root, journal::OpenMode::kReadOnly);
  MB_CHECK(dir.ok());
  engine::Engine e(w.config);
  journal::RecoveryOptions ro;
  ro.use_snapshots = false;
  ro.progress = false;
  auto rep = journal::Recover(*dir, &e, ro);
  if (!rep.ok()) {
    std::fprintf(stderr, "pipeline: replay: %s\n", std::string(rep.status().message()).c_str());
    std::exit(1);
  }
  MB_CHECK(rep->replayed_events == built.events);
  MB_CHECK(rep->state_hash == built.state_hash);
  ReplayResult r;
  r.events = rep->replayed_events;
  r.records = rep->replayed_records;
  r.seconds = rep->seconds;
  r.events_per_s = static_cast<double>(r.events) / r.seconds;
  return r;
}

struct RestartResult {
  double open_s = 0;      // Exchange::Open, wall
  double recovery_s = 0;  // of which journal::Recover
  uint64_t snapshot_seq = 0;
  uint64_t replayed_events = 0;
  uint64_t replayed_records = 0;
};

RestartResult Restart(const PipelineArgs& args, const Workload& w, const fs::path& root,
                      const BuiltJournal& built) {
  LogSink log(args.verbose);
  ExchangeOptions o = CellOptions(args, w, root, FsyncPolicy::kFsync, &log);
  const int64_t t0 = NowNs();
  auto opened = Exchange::Open(std::move(o));
  const int64_t t1 = NowNs();
  if (!opened.ok()) {
    log.Dump();
    std::fprintf(stderr, "pipeline: restart: %s\n", std::string(opened.status().message()).c_str());
    std::exit(1);
  }
  std::unique_ptr<Exchange> ex = std::move(opened).value();
  RestartResult r;
  r.open_s = Seconds(t1 - t0);
  r.recovery_s = ex->recovery().seconds;
  r.snapshot_seq = ex->recovery().snapshot_seq;
  r.replayed_events = ex->recovery().replayed_events;
  r.replayed_records = ex->recovery().replayed_records;
  MB_CHECK(ex->recovery().state_hash == built.state_hash);
  MB_CHECK(ex->recovery().recovered_seq == built.records);
  MB_CHECK(ex->Close().ok());
  return r;
}

// ------------------------------------------------------------------ CLI

std::string MetStr(bool met) { return met ? "met" : "NOT met"; }

int Run(const PipelineArgs& args) {
  // ---- the stream
  const uint64_t max_rate =
      args.rates.empty() ? 1'000'000 : *std::max_element(args.rates.begin(), args.rates.end());
  const uint64_t replay_events =
      args.replay_events != 0 ? args.replay_events
                              : std::clamp<uint64_t>(args.duration_ms * 1500, 50'000, 3'000'000);
  uint64_t commands = args.commands;
  if (commands == 0) {
    // Enough for the fastest open-loop cell and for a max-throughput cell
    // running at 2.5 M commands/s for the whole duration.
    commands =
        std::max<uint64_t>(max_rate, args.max_cells ? 2'500'000 : 0) * args.duration_ms / 1000;
    commands = std::max<uint64_t>(commands, 20'000);
    // ~1.96 events per command in this mix; 1.8 leaves a margin.
    commands = std::max<uint64_t>(commands, replay_events * 10 / 18);
  }
  if (args.restart_events != 0) {
    commands = std::max<uint64_t>(commands, args.restart_events * 10 / 18);
  }
  MixSpec spec;
  spec.seed = args.seed;
  spec.commands = commands;
  const int64_t g0 = NowNs();
  const Workload w = GenerateExchangeCoreMix(spec);
  const double gen_s = Seconds(NowNs() - g0);
  MB_CHECK(w.stats.rejected == 0);
  const double events_per_command =
      static_cast<double>(w.stats.events) / static_cast<double>(w.commands.size());

  std::string fs_note;
  const fs::path base = ChooseDataRoot(args, &fs_note);
  const fs::path root = base / fmt::format("mb-pipeline-{}", ::getpid());
  std::error_code ec;
  fs::create_directories(root, ec);
  MB_CHECK(!ec);

  fmt::print("matchbook-bench pipeline: exchange-core single-book mix, seed {}\n", args.seed);
  fmt::print(
      "  generated {} commands in {:.2f} s (+{} setup commands, submitted untimed in each "
      "cell); {:.3f} events/command\n",
      w.commands.size(), gen_s, w.setup.size(), events_per_command);
  fmt::print(
      "  data directories under {}; {} producer(s); inbound ring {}; max batch {}; wait {}; "
      "cells of {} ms; snapshots off in the cells\n",
      fs_note, args.producers, args.inbound_capacity, args.max_batch,
      [&] {
        concurrency::WaitConfig c = args.wait_config;
        c.kind = args.wait;
        return concurrency::Describe(c);
      }(),
      args.duration_ms);
  std::fflush(stdout);

  // ---- fsync probe (before)
  FsyncProbeResult probe_before = ProbeFsync(root, args.fsync_samples);
  std::vector<int64_t> fsync_before = probe_before.ns;

  // ---- cells
  std::vector<int64_t> start(w.commands.size(), 0);
  std::vector<int64_t> latency(w.commands.size(), -1);
  std::vector<CellResult> cells;
  int cell_no = 0;
  // Warm-up: this VM hands freed guest memory back to the host (virtio-balloon
  // free page reporting), so the first few hundred MB of page cache a process
  // writes cost a host page fault per 4 KiB; a long-running exchange recycles
  // its page cache instead. One untimed max cell (policy none) first.
  std::optional<CellResult> warmup;
  if (args.warmup_ms > 0) {
    warmup = RunCell(args, w, root / fmt::format("cell-{}", cell_no++), FsyncPolicy::kNone, 0,
                     w.commands.size(), args.warmup_ms, &start, &latency);
  }
  for (FsyncPolicy policy : args.policies) {
    for (uint64_t rate : args.rates) {
      const uint64_t n = std::min<uint64_t>(w.commands.size(),
                                            std::max<uint64_t>(rate * args.duration_ms / 1000, 1));
      cells.push_back(RunCell(args, w, root / fmt::format("cell-{}", cell_no++), policy, rate, n,
                              args.duration_ms, &start, &latency));
    }
    if (args.max_cells) {
      cells.push_back(RunCell(args, w, root / fmt::format("cell-{}", cell_no++), policy, 0,
                              w.commands.size(), args.duration_ms, &start, &latency));
    }
  }
  start = {};
  latency = {};

  // ---- fsync probe (after)
  FsyncProbeResult probe_after = ProbeFsync(root, args.fsync_samples);
  std::vector<int64_t> fsync_after = probe_after.ns;
  std::vector<int64_t> fsync_all = fsync_before;
  fsync_all.insert(fsync_all.end(), fsync_after.begin(), fsync_after.end());
  const Percentiles fs_b = Summarize(&fsync_before);
  const Percentiles fs_a = Summarize(&fsync_after);
  const Percentiles fs_all = Summarize(&fsync_all);

  // ---- replay
  const fs::path replay_dir = root / "replay";
  const BuiltJournal built = BuildJournal(replay_dir, w, replay_events, 0);
  std::vector<ReplayResult> warm;
  for (int k = 0; k < 3; ++k) warm.push_back(Replay(replay_dir, w, built));
  std::sort(warm.begin(), warm.end(),
            [](const ReplayResult& a, const ReplayResult& b) { return a.seconds < b.seconds; });
  const ReplayResult replay = warm[1];  // the median of 3
  DropCache(replay_dir);
  const ReplayResult replay_cold = Replay(replay_dir, w, built);
  if (!args.keep) fs::remove_all(replay_dir, ec);

  // ---- restart
  std::optional<BuiltJournal> rbuilt;
  std::vector<RestartResult> restarts;
  std::optional<RestartResult> restart_cold;
  if (args.restart_events != 0) {
    const fs::path restart_dir = root / "restart";
    rbuilt = BuildJournal(restart_dir, w, args.restart_events, args.restart_events * 9 / 10);
    for (int k = 0; k < 3; ++k) restarts.push_back(Restart(args, w, restart_dir, *rbuilt));
    std::sort(restarts.begin(), restarts.end(),
              [](const RestartResult& a, const RestartResult& b) { return a.open_s < b.open_s; });
    DropCache(restart_dir);
    restart_cold = Restart(args, w, restart_dir, *rbuilt);
    if (!args.keep) fs::remove_all(restart_dir, ec);
  }
  if (!args.keep) fs::remove_all(root, ec);

  // ---- report
  auto cpu_of = [](const CellResult& c, const char* name) {
    auto it = c.cpu.find(name);
    return it == c.cpu.end() ? 0.0 : it->second;
  };
  fmt::print(
      "\n  submit -> durable latency (us), open loop, from the intended send time; max "
      "cells: as fast as the ring takes commands, 1 in 64 timed from its Submit\n");
  fmt::print(
      "  {:<6} {:>9} {:>11} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>8} {:>7} {:>7} "
      "{:>16}\n",
      "policy", "offered/s", "achieved/s", "p50", "p90", "p99", "p99.9", "max", "ring-full",
      "dropped", "cmd/grp", "late10", "reject", "cpu eng/jrn/prod");
  for (const CellResult& c : cells) {
    const double secs = c.seconds > 0 ? c.seconds : 1;
    fmt::print(
        "  {:<6} {:>9} {:>11.0f} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>8.1f} {:>7} {:>7} "
        "{:>5.0f}/{:>3.0f}/{:>3.0f}%\n",
        PolicyName(c.policy), c.offered == 0 ? std::string("max") : fmt::format("{}", c.offered),
        c.achieved, Us(c.lat.p50), Us(c.lat.p90), Us(c.lat.p99), Us(c.lat.p999), Us(c.lat.max),
        c.full_retries, c.dropped,
        c.write_groups ? static_cast<double>(c.sent) / static_cast<double>(c.write_groups) : 0.0,
        c.late_10us, c.rejected, 100 * cpu_of(c, "mb-engine") / secs,
        100 * cpu_of(c, "mb-journal") / secs, 100 * cpu_of(c, "mb-producer") / secs);
  }
  if (args.stages) {
    fmt::print(
        "\n  --stages: intended -> sequenced | sequenced -> durable (us): p50 p90 p99 p99.9 max\n");
    for (const CellResult& c : cells) {
      if (c.offered == 0) continue;
      auto row = [](const Percentiles& p) {
        return fmt::format("{:>8} {:>8} {:>8} {:>8} {:>9}", Us(p.p50), Us(p.p90), Us(p.p99),
                           Us(p.p999), Us(p.max));
      };
      fmt::print("  {:<6} {:>9}  {} | {}\n", PolicyName(c.policy), c.offered, row(c.to_sequenced),
                 row(c.to_durable));
    }
  }
  fmt::print("\n  producer lag, open loop (send - intended time, us): p50 p90 p99 p99.9 max\n");
  for (const CellResult& c : cells) {
    if (c.offered == 0) continue;
    fmt::print("  {:<6} {:>9}  {:>8} {:>8} {:>8} {:>8} {:>9}\n", PolicyName(c.policy), c.offered,
               Us(c.send_late.p50), Us(c.send_late.p90), Us(c.send_late.p99), Us(c.send_late.p999),
               Us(c.send_late.max));
  }
  fmt::print(
      "\n  threads, % of the cell's time: CPU user+sys / of which sys, w: runnable but waiting "
      "for a CPU; vcsw/ms: voluntary context switches (parks) per ms; others: CPUs' worth "
      "taken by other processes meanwhile (noise)\n");
  for (const CellResult& c : cells) {
    const double secs = c.seconds > 0 ? c.seconds : 1;
    std::string line;
    for (const char* t : {"mb-engine", "mb-journal", "mb-producer"}) {
      const std::string n(t);
      line += fmt::format("  {} {:.0f}/{:.0f} w{:.0f}", n.substr(3), 100 * cpu_of(c, t) / secs,
                          100 * cpu_of(c, (n + "/sys").c_str()) / secs,
                          100 * cpu_of(c, (n + "/wait").c_str()) / secs);
      if (n != "mb-producer") {
        line += fmt::format(" vcsw/ms {:.1f}", cpu_of(c, (n + "/vcsw").c_str()) / secs / 1e3);
      }
    }
    fmt::print("  {:<6} {:>9}{}  others {:.0f}%\n", PolicyName(c.policy),
               c.offered == 0 ? std::string("max") : fmt::format("{}", c.offered), line,
               100 * c.others_cores);
  }
  if (warmup) {
    fmt::print(
        "  warm-up cell (none, max, untimed): {:.0f} commands/s, journal thread {:.0f}% CPU, "
        "{:.0f}% in the kernel\n",
        warmup->achieved, 100 * cpu_of(*warmup, "mb-journal") / warmup->seconds,
        100 * cpu_of(*warmup, "mb-journal/sys") / warmup->seconds);
  }
  fmt::print(
      "  (ring-full: Submit() == kFull, retried; dropped: not sent within 2 x duration + 1 s; "
      "cmd/grp: commands per journal write group = per fdatasync under fsync; late10: sent "
      ">= 10 us after the intended time; cpu: thread CPU time / cell time)\n");

  fmt::print("\n  fsync probe (4 KiB append + fdatasync, {} before and {} after the cells), us:\n",
             fs_b.n, fs_a.n);
  fmt::print("    before: p50 {}  p90 {}  p99 {}  max {}\n", Us(fs_b.p50), Us(fs_b.p90),
             Us(fs_b.p99), Us(fs_b.max));
  fmt::print("    after:  p50 {}  p90 {}  p99 {}  max {}\n", Us(fs_a.p50), Us(fs_a.p90),
             Us(fs_a.p99), Us(fs_a.max));
  fmt::print("    all:    p50 {}  p90 {}  p99 {}  max {}\n", Us(fs_all.p50), Us(fs_all.p90),
             Us(fs_all.p99), Us(fs_all.max));
  fmt::print(
      "    meanwhile a thread only reading the clock saw gaps up to {} / {} us ({} / {} gaps >= "
      "1 ms)\n",
      Us(probe_before.stall_max_ns), Us(probe_after.stall_max_ns), probe_before.stalls_1ms,
      probe_after.stalls_1ms);

  fmt::print(
      "\n  replay (journal::Recover, snapshots off, every record checked): {} events in {} "
      "records, {:.1f} MiB; written by one thread (engine + JournalWriter) in {:.2f} s, {:.2f} s "
      "of it in the kernel\n",
      built.events, built.records, static_cast<double>(built.bytes) / (1 << 20), built.seconds,
      built.sys_seconds);
  fmt::print("    warm page cache: {:.3f} / {:.3f} / {:.3f} s -> median {:.2f} M events/s\n",
             warm[0].seconds, warm[1].seconds, warm[2].seconds, replay.events_per_s / 1e6);
  fmt::print("    cold (fadvise DONTNEED first): {:.3f} s -> {:.2f} M events/s\n",
             replay_cold.seconds, replay_cold.events_per_s / 1e6);
  if (rbuilt) {
    fmt::print(
        "\n  restart (Exchange::Open): journal of {} events in {} records ({:.1f} MiB), "
        "snapshot at sequence {} ({} events); written in {:.1f} s\n",
        rbuilt->events, rbuilt->records, static_cast<double>(rbuilt->bytes) / (1 << 20),
        rbuilt->snapshot_seq, rbuilt->snapshot_events, rbuilt->seconds);
    for (const RestartResult& r : restarts) {
      fmt::print(
          "    warm: open {:.3f} s (recovery {:.3f} s: snapshot {} + {} records, {} events)\n",
          r.open_s, r.recovery_s, r.snapshot_seq, r.replayed_records, r.replayed_events);
    }
    fmt::print("    cold: open {:.3f} s (recovery {:.3f} s)\n", restart_cold->open_s,
               restart_cold->recovery_s);
  }

  // ---- targets
  std::map<std::string, double> max_tp;
  for (const CellResult& c : cells) {
    if (c.offered == 0) max_tp[std::string(PolicyName(c.policy))] = c.achieved;
  }
  const CellResult* fsync_10k = nullptr;
  for (const CellResult& c : cells) {
    if (c.policy == FsyncPolicy::kFsync && c.offered == 10'000) fsync_10k = &c;
  }
  fmt::print("\n  {:<58} {:>16} {:>16} {}\n", "target", "measured", "target", "");
  if (max_tp.count("none")) {
    fmt::print("  {:<58} {:>16.0f} {:>16} {}\n", "max sustained throughput, none (commands/s)",
               max_tp["none"], ">= 2000000", MetStr(max_tp["none"] >= 2e6));
  }
  if (max_tp.count("fsync")) {
    fmt::print("  {:<58} {:>16.0f} {:>16} {}\n", "max sustained throughput, fsync (commands/s)",
               max_tp["fsync"], ">= 500000", MetStr(max_tp["fsync"] >= 5e5));
  }
  if (fsync_10k != nullptr) {
    fmt::print("  {:<58} {:>16} {:>16} {}\n", "p99 submit->durable, fsync, 10 k/s (us)",
               Us(fsync_10k->lat.p99), "<= " + Us(2 * fs_all.p50),
               MetStr(fsync_10k->lat.p99 <= 2 * fs_all.p50));
  }
  fmt::print("  {:<58} {:>16.0f} {:>16} {}\n", "replay, warm (events/s)", replay.events_per_s,
             ">= 5000000", MetStr(replay.events_per_s >= 5e6));
  fmt::print("  {:<58} {:>16.0f} {:>16} {}\n", "replay, cold (events/s)", replay_cold.events_per_s,
             ">= 5000000", MetStr(replay_cold.events_per_s >= 5e6));
  if (rbuilt) {
    const RestartResult& med = restarts[1];
    fmt::print("  {:<58} {:>16.3f} {:>16} {}\n",
               fmt::format("restart over {} events, snapshot at 90%, warm (s)", rbuilt->events),
               med.open_s, "< 2", MetStr(med.open_s < 2.0));
    fmt::print("  {:<58} {:>16.3f} {:>16} {}\n", "restart, cold (s)", restart_cold->open_s, "< 2",
               MetStr(restart_cold->open_s < 2.0));
  }

  if (args.json) {
    std::string j = "{\"benchmark\":\"pipeline\"";
    j += fmt::format(",\"duration_ms\":{},\"producers\":{},\"seed\":{},\"commands\":{}",
                     args.duration_ms, args.producers, args.seed, w.commands.size());
    j += fmt::format(",\"events_per_command\":{:.4f}", events_per_command);
    j += ",\"max_throughput_per_s\":{";
    bool first = true;
    for (const auto& [name, v] : max_tp) {
      j += fmt::format("{}\"{}\":{:.0f}", first ? "" : ",", name, v);
      first = false;
    }
    // One object per cell: "rates" holds the open-loop cells (numeric
    // offered_per_s), "max_cells" the max-throughput ones (1 in 64 timed).
    auto cell_json = [](const CellResult& c) {
      return fmt::format(
          "{{\"policy\":\"{}\",{}\"achieved_per_s\":{:.0f},\"sent\":{},"
          "\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},"
          "\"samples\":{},\"dropped\":{},\"ring_full\":{},\"rejected\":{},"
          "\"commands_per_write_group\":{:.2f},\"late_10us\":{},\"others_cpu\":{:.2f}}}",
          PolicyName(c.policy),
          c.offered == 0 ? std::string() : fmt::format("\"offered_per_s\":{},", c.offered),
          c.achieved, c.sent, c.lat.p50, c.lat.p90, c.lat.p99, c.lat.p999, c.lat.max, c.lat.n,
          c.dropped, c.full_retries, c.rejected,
          c.write_groups ? static_cast<double>(c.sent) / static_cast<double>(c.write_groups) : 0.0,
          c.late_10us, c.others_cores);
    };
    for (const bool max_cell : {false, true}) {
      j += max_cell ? "],\"max_cells\":[" : "},\"rates\":[";
      first = true;
      for (const CellResult& c : cells) {
        if ((c.offered == 0) != max_cell) continue;
        j += (first ? "" : ",") + cell_json(c);
        first = false;
      }
    }
    j += "]";
    if (warmup) j += fmt::format(",\"warmup_throughput_per_s\":{:.0f}", warmup->achieved);
    j += fmt::format(",\"metrics\":{}", args.metrics ? "true" : "false");
    j += fmt::format(
        ",\"fsync_median_ns\":{},\"fsync_p99_ns\":{},\"fsync_max_ns\":{},"
        "\"fsync_probe_stall_max_ns\":{}",
        fs_all.p50, fs_all.p99, fs_all.max,
        std::max(probe_before.stall_max_ns, probe_after.stall_max_ns));
    if (fsync_10k != nullptr) {
      j += fmt::format(",\"fsync_10k_p99_target_met\":{}",
                       fsync_10k->lat.p99 <= 2 * fs_all.p50 ? "true" : "false");
    }
    j += fmt::format(
        ",\"replay_events\":{},\"replay_events_per_s\":{:.0f},\"replay_cold_events_per_s\":{:.0f}",
        built.events, replay.events_per_s, replay_cold.events_per_s);
    if (rbuilt) {
      const RestartResult& med = restarts[1];
      j += fmt::format(
          ",\"restart_events\":{},\"restart_snapshot_events\":{},\"restart_s\":{:.4f},"
          "\"restart_cold_s\":{:.4f},\"restart_replayed_events\":{}",
          rbuilt->events, rbuilt->snapshot_events, med.open_s, restart_cold->open_s,
          med.replayed_events);
      if (args.restart_events == 10'000'000)
        j += fmt::format(",\"restart_10m_s\":{:.4f}", med.open_s);
    }
    j += "}";
    fmt::print("{}\n", j);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::function<int()> AddPipelineBench(CLI::App* app) {
  auto a = std::make_shared<PipelineArgs>();
  CLI::App* sub = app->add_subcommand(
      "pipeline",
      "The whole pipeline (Submit -> inbound ring -> engine thread -> journal thread -> "
      "durable OnDone) driven by the engine benchmark's exchange-core mix. Per fsync policy: "
      "open-loop cells at each offered rate (latency from the intended send time to OnDone, "
      "p50/p90/p99/p99.9/max) and a max-throughput cell; an fsync probe (4 KiB write + "
      "fdatasync); journal replay speed; and, with --restart-events, the restart time over a "
      "journal with a snapshot at 90%.");
  AddCount(sub, "--duration-ms", &a->duration_ms, 1, UINT64_MAX,
           "length of every cell (default 2000); the generated stream is max(max rate, 2.5 "
           "M/s) x duration commands (a max cell ends early if it runs out), and the replay "
           "journal scales with it (1,500 events per ms, 50 k..3 M)");
  auto rates = std::make_shared<std::vector<std::string>>();
  sub->add_option("--rates", *rates,
                  "offered rates, commands/s (default 10000,100000,1000000; \"-\": none, "
                  "max-throughput cells only)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->transform((CLI::IsMember({"-"}) | (DecimalCount() & CLI::Range(uint64_t{1}, UINT64_MAX)))
                      .description(""))
      ->type_name("N,N,...|-");
  auto no_max = std::make_shared<bool>(false);
  sub->add_flag("--no-max", *no_max, "no max-throughput cells");
  sub->add_flag("--stages", a->stages,
                "open-loop cells also time OnSequenced (engine thread, one more clock read "
                "there) and split the latency into intended -> sequenced and sequenced -> "
                "durable");
  auto policies = std::make_shared<std::vector<std::string>>();
  AddWordList(sub, "--policies", policies.get(), {"none", "fsync"},
              "fsync policies (default none,fsync)");
  AddCount(sub, "--producers", &a->producers, 1, 64,
           "producer threads; the stream is split round-robin (default 1; with more, "
           "commands reach the engine in another order and some cancels/moves are rejected)");
  AddCount(sub, "--commands", &a->commands, 1, UINT64_MAX,
           "length of the generated measured stream (default: see --duration-ms)");
  AddCount(sub, "--replay-events", &a->replay_events, 1, UINT64_MAX,
           "events in the replay journal (default: see --duration-ms)");
  AddCount(sub, "--restart-events", &a->restart_events, 0, UINT64_MAX,
           "also time a restart over N journaled events with a snapshot at 90% (off by "
           "default; the recorded run uses 10000000)");
  AddCount(sub, "--seed", &a->seed, 0, UINT64_MAX, "workload seed (default 1)");
  AddCount(sub, "--inbound-capacity", &a->inbound_capacity, 2, (uint64_t{1} << 30) - 1,
           "Exchange inbound ring capacity, a power of two (default 65536)")
      ->check(PowerOfTwo(uint64_t{1} << 29));
  AddCount(sub, "--max-batch", &a->max_batch, 1, uint64_t{1} << 20,
           "Exchange max batch (default 4096)");
  auto wait = std::make_shared<std::string>();
  sub->add_option("--wait", *wait, "engine and journal wait strategy (default back-off)")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto k = concurrency::ParseWaitKind(v);
            return k.ok() ? std::string() : k.status().message();
          },
          "", "wait strategy"))
      ->type_name("back-off|yield|busy-spin");
  AddCount(sub, "--spins", &a->wait_config.spins, 0, 1'000'000, "back-off spins (default 200)");
  AddCount(sub, "--yields", &a->wait_config.yields, 0, 1'000'000, "back-off yields (default 20)");
  AddCount(sub, "--park-us", &a->wait_config.park_us, 1, 1'000'000,
           "back-off park, us (default 1000)");
  AddCount(sub, "--batch-pool", &a->batch_pool, 2, 4096,
           "engine batches in flight to the journal, a power of two (default: the "
           "Exchange's, 8)")
      ->check(PowerOfTwo(4096));
  AddCount(sub, "--segment-mib", &a->segment_mib, 1, 65536,
           "journal segment size, MiB (default 128)");
  auto margin_us = std::make_shared<uint64_t>(a->sleep_margin_ns / 1000);
  AddCount(sub, "--sleep-margin-us", margin_us.get(), 0, 10'000,
           "an open-loop producer sleeps until N us before a send time, then yields (default "
           "150; sleeps end late on a VM)");
  AddCount(sub, "--full-yields", &a->full_yields, 0, 1'000'000,
           "a producer finding the ring full yields N times, then sleeps (default 0)");
  AddCount(sub, "--full-sleep-us", &a->full_sleep_us, 1, 1'000'000,
           "... then sleeps this long, us (default 50)");
  AddCount(sub, "--warmup-ms", &a->warmup_ms, 0, UINT64_MAX,
           "an untimed max-throughput cell (policy none) before the cells; 0: none (default "
           "min(duration, 1000)). This VM returns freed memory to the host, so a process's "
           "first page-cache writes cost a host page fault per 4 KiB");
  AddCount(sub, "--fsync-samples", &a->fsync_samples, 1, 100'000,
           "fsync probe size, taken before and after the cells (default 200)");
  sub->add_option("--data-dir", a->data_dir,
                  "where the cells' data directories go (default: $TMPDIR or /tmp, else "
                  "/var/tmp, else beside the binary; never tmpfs)")
      ->check(
          CLI::Validator([](std::string& v) { return v.empty() ? std::string("empty path") : ""; },
                         "", "non-empty"))
      ->type_name("PATH");
  sub->add_flag("--keep", a->keep, "keep the data directories");
  sub->add_flag("--verbose", a->verbose, "print the exchange's log lines");
  sub->add_flag("--metrics", a->metrics,
                "the exchange records its per-stage latency histograms and gauges (as "
                "`matchbook serve` does), to measure their cost");
  sub->add_flag("--json", a->json, "the last line printed is one JSON object");
  return [a, rates, policies, wait, margin_us, no_max]() -> int {
    if (!rates->empty()) {
      if (rates->size() > 1 && std::find(rates->begin(), rates->end(), "-") != rates->end()) {
        std::fputs("--rates: \"-\" (no open-loop cells) stands alone\n", stderr);
        return 2;
      }
      a->rates.clear();
      for (const std::string& r : *rates) {
        if (r == "-") continue;
        uint64_t v = 0;
        MB_CHECK(CLI::detail::lexical_cast(r, v));
        a->rates.push_back(v);
      }
    }
    if (!policies->empty()) {
      a->policies.clear();
      for (const std::string& p : *policies) {
        a->policies.push_back(p == "none" ? FsyncPolicy::kNone : FsyncPolicy::kFsync);
      }
    }
    if (!wait->empty()) a->wait = *concurrency::ParseWaitKind(*wait);
    if (*no_max) a->max_cells = false;
    a->sleep_margin_ns = *margin_us * 1000;
    if (a->warmup_ms == UINT64_MAX) a->warmup_ms = std::min<uint64_t>(a->duration_ms, 1000);
    return Run(*a);
  };
}

}  // namespace mb::bench
