// Crash recovery under load (docs/architecture.md, "Events, journal, recovery").
// tests/crash_child.cc runs the pipeline on a data directory under continuous load and is killed
// with SIGKILL at a random moment, then restarted on the same directory, again and again. After
// every kill this test checks the directory (read-only):
//
//  1. every command a child reported durable ("D seq hash", from OnDone) is in
//     the journal with the same outcome (the xxh3 of its encoded events),
//     whichever run reported it;
//  2. the journal holds exactly the outcomes of the submitted stream: record k
//     is, byte for byte, what a fresh reference engine emits for stream command
//     k - 1 — so nothing never submitted appears, nothing is doubled, reordered
//     or altered, and every outcome is the engine's decision;
//  3. a from-scratch replay (Recover without snapshots) reaches the journal's
//     end with the reference state hash and passes Engine::CheckInvariants();
//     so does a recovery from the newest snapshot, which must skip none;
//  4. every snapshot a child reported ("S seq hash") has the reference engine's
//     state hash at seq;
//  5. nothing durable is lost and the durable set only grows: the journal's
//     last whole record never moves back across kills; each restart recovers
//     (snapshot + journal, as the child reports it in "R") exactly to it, with
//     the reference state hash; within a run completions come exactly for
//     R+1, R+2, ... in order, and no sequence is ever reported durable twice.
//
// After the last kill the Exchange is opened in this process (newest snapshot
// + replay, as in production) and must recover the same sequence and state.
// Some iterations first kill a child within 20 ms of its start (in recovery,
// the tail repair, or before any load), then run the loaded child.
//
//   MB_CRASH_ITERATIONS=<n>  loaded kills (default 5: the smoke run in the suite)
//   MB_CRASH_SEED=<n>        seed of the kill times (default: from the clock; printed)
//   MB_CRASH_RATE=<n>        commands per second a child submits (default 30000; 0: flat out)
//   MB_CRASH_FSYNC=<policy>  one fsync policy for every run (default: fsync, interval:5 and
//                            none in turn; a process kill loses no written byte under any)
//   MB_CRASH_KEEP=1          keep the data directory and the children's log (path printed)
//
// The soak, 25 loaded kills (and about a quarter as many early ones; 40-70 s):
//   MB_CRASH_ITERATIONS=25 build/dev/bin/crash_test
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codec/codec.h"
#include "common/file.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "workload/engine_workload.h"

extern char** environ;

namespace mb {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  uint64_t out = 0;
  const std::string_view s(v);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || p != s.data() + s.size()) {
    ADD_FAILURE() << name << "=\"" << s << "\" is not a number";
    return fallback;
  }
  return out;
}

// Splits "X 12 00ab..." into its fields; numbers after the kind are decimal,
// except the ones `hex` marks.
bool ParseLine(std::string_view line, char* kind, std::vector<uint64_t>* fields,
               std::initializer_list<bool> hex) {
  if (line.empty()) return false;
  *kind = line[0];
  line.remove_prefix(1);
  fields->clear();
  auto is_hex = hex.begin();
  while (!line.empty()) {
    if (line[0] != ' ') return false;
    line.remove_prefix(1);
    const bool h = is_hex != hex.end() && *is_hex++;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v, h ? 16 : 10);
    if (ec != std::errc()) return false;
    fields->push_back(v);
    line.remove_prefix(static_cast<std::size_t>(p - line.data()));
  }
  return true;
}

// One crash_child: spawned with stdout on a pipe and stderr appended to a log
// file; killed with SIGKILL and reaped at the latest by the destructor, so a
// failing test leaves no process behind. (The child also asks the kernel to
// kill it if this process dies.)
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    (void)Kill();
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  Status Spawn(const std::vector<std::string>& args, const fs::path& log) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", "pipe2", errno);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int err = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (err != 0) {
      ::close(fds[0]);
      pid_ = -1;
      return ErrnoStatus(args[0], "posix_spawn", err);
    }
    out_fd_ = fds[0];
    return Status::Ok();
  }

  // Reads the pipe until `until`, appending whole lines to *lines (a line
  // without its '\n' is held back: it is complete only once the newline
  // arrives). Returns false at end of file: the child is gone.
  bool ReadUntil(Clock::time_point until, std::vector<std::string>* lines) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      pollfd p{out_fd_, POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;  // cannot happen with a valid fd; ends the caller's loop
      if (n == 0) return true;  // the deadline passed
      char buf[1 << 16];
      const ssize_t got = ::read(out_fd_, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      partial_.append(buf, static_cast<std::size_t>(got));
      std::size_t start = 0;
      for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
        lines->emplace_back(partial_, start, nl - start);
      }
      partial_.erase(0, start);
      if (Clock::now() >= until) return true;
    }
  }

  // SIGKILL and wait. Returns the wait status, or -1 when there is no child.
  int Kill() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

  // Bytes after the last newline: at end of file, a line that was cut.
  std::size_t partial_bytes() const { return partial_.size(); }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string partial_;
};

struct Stats {
  uint64_t loaded_kills = 0;
  uint64_t early_kills = 0;
  uint64_t durable_lines = 0;
  uint64_t snapshot_lines = 0;
  uint64_t recoveries_from_snapshot = 0;  // with journal records replayed after it
  uint64_t tails = 0;                     // kills that left a torn journal tail
  uint64_t snapshot_writes_cut = 0;       // kills that left a snapshot's .tmp file
  uint64_t exhausted = 0;                 // runs that submitted the whole stream
};

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    iterations_ = EnvU64("MB_CRASH_ITERATIONS", 5);
    rate_ = EnvU64("MB_CRASH_RATE", 30'000);
    seed_ = EnvU64("MB_CRASH_SEED", static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
    if (const char* p = std::getenv("MB_CRASH_FSYNC"); p != nullptr && *p != '\0') {
      policies_ = {p};
    }
    std::printf("crash test: MB_CRASH_SEED=%llu MB_CRASH_ITERATIONS=%llu MB_CRASH_RATE=%llu\n",
                static_cast<unsigned long long>(seed_),
                static_cast<unsigned long long>(iterations_),
                static_cast<unsigned long long>(rate_));
    root_ = fs::temp_directory_path() /
            fmt::format("mb_crash_{}_{:x}", ::getpid(), seed_ & 0xffffffffu);
    fs::remove_all(root_);
    fs::create_directories(root_);
    data_ = root_ / "data";
    log_ = root_ / "children.log";
  }

  void TearDown() override {
    child_.reset();  // kills and reaps a child a failed assertion left running
    if (std::getenv("MB_CRASH_KEEP") != nullptr) {
      std::printf("crash test: kept %s\n", root_.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // The stream: setup and commands of the exchange-core mix, long enough that
  // no paced run exhausts it, with every timestamp set so that the pipeline
  // does not stamp its own (the funding deposits come with none).
  void MakeStream() {
    bench::MixSpec spec;
    spec.seed = 11;
    spec.accounts = 200;
    spec.target_orders = 1000;
    // A run lasts at most 400 ms after "R" and submits chunks of <= 2048.
    spec.commands =
        rate_ == 0 ? iterations_ * 100'000 : iterations_ * (rate_ * 2 / 5 + 2048) + 10'000;
    workload_ = bench::GenerateExchangeCoreMix(spec);
    ASSERT_EQ(workload_.stats.rejected, 0u);
    stream_ = workload_.setup;
    stream_.insert(stream_.end(), workload_.commands.begin(), workload_.commands.end());
    std::vector<std::byte> bytes(stream_.size() * codec::kMaxCommandSize);
    std::size_t size = 0;
    for (engine::Command& c : stream_) {
      if (c.timestamp_ns == 0) c.timestamp_ns = 1;
      const std::size_t n =
          codec::Encode(c, std::span<std::byte>(bytes.data() + size, codec::kMaxCommandSize));
      ASSERT_GT(n, 0u);
      size += n;
    }
    stream_path_ = root_ / "stream.bin";
    ASSERT_TRUE(WriteFileAtomically(stream_path_, {bytes.data(), size}).ok());
    engine::Engine fresh(workload_.config);
    journal_hash_ = fresh.StateHash();
  }

  std::string LogTail() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    return all.size() > 8000 ? "..." + all.substr(all.size() - 8000) : all;
  }

  // What one run has reported so far.
  struct Run {
    bool ready = false;  // "R" seen
    uint64_t recovered = 0;
    uint64_t next_durable = 0;
    uint64_t durable = 0;
  };

  Status HandleLine(const std::string& line, Run* run) {
    char kind = 0;
    std::vector<uint64_t> f;
    // In every kind of line the second number, if any, is a hash.
    if (!ParseLine(line, &kind, &f, {false, true}) || f.size() != (kind == 'R'   ? 4u
                                                                   : kind == 'E' ? 1u
                                                                                 : 2u)) {
      return Corruption(fmt::format("unexpected line from the child: \"{}\"", line));
    }
    switch (kind) {
      case 'R':
        if (run->ready) return Corruption("two R lines in one run");
        run->ready = true;
        run->recovered = f[0];
        run->next_durable = f[0] + 1;
        if (f[0] != journal_seq_ || f[1] != journal_hash_) {
          return Corruption(fmt::format(
              "the child recovered sequence {} with state hash {:016x} (snapshot {}, {} records "
              "replayed); the journal ended at {} with reference state hash {:016x}",
              f[0], f[1], f[2], f[3], journal_seq_, journal_hash_));
        }
        if (f[2] > 0 && f[3] > 0) ++stats_.recoveries_from_snapshot;
        return Status::Ok();
      case 'D': {
        if (!run->ready) return Corruption(fmt::format("\"{}\" before the R line", line));
        if (f[0] != run->next_durable) {
          return Corruption(fmt::format(
              "completion for sequence {}, expected {}: durable completions of one producer "
              "come in sequence order, each once",
              f[0], run->next_durable));
        }
        ++run->next_durable;
        ++run->durable;
        ++stats_.durable_lines;
        auto [it, inserted] = durable_.emplace(f[0], f[1]);
        if (!inserted) {
          return Corruption(fmt::format(
              "sequence {} reported durable a second time (hash {:016x}, first {:016x}): an "
              "earlier run's durable command was lost and redone",
              f[0], f[1], it->second));
        }
        return Status::Ok();
      }
      case 'S': {
        ++stats_.snapshot_lines;
        auto [it, inserted] = snapshots_.emplace(f[0], f[1]);
        if (!inserted && it->second != f[1]) {
          return Corruption(
              fmt::format("two snapshots at sequence {} with state hashes {:016x} "
                          "and {:016x}",
                          f[0], it->second, f[1]));
        }
        return Status::Ok();
      }
      case 'E':
        ++stats_.exhausted;
        return Status::Ok();
      default:
        return Corruption(fmt::format("unexpected line from the child: \"{}\"", line));
    }
  }

  // Checks 1-5 on the data directory of a killed child; on success the
  // journal's end and its reference state become the expectation for the next
  // restart. *summary: one line for the log.
  Status VerifyDataDir(std::string* summary) {
    if (!fs::exists(data_)) {
      // Killed before its first Open got that far.
      if (journal_seq_ != 0 || !durable_.empty()) {
        return Corruption(fmt::format("the data directory {} is gone", data_.string()));
      }
      *summary = "no data directory yet";
      return Status::Ok();
    }
    auto dir = journal::DataDir::Open(data_, journal::OpenMode::kReadOnly);
    if (!dir.ok()) return dir.status();

    // 1, 2, 4: the journal against the reference engine and the reports.
    engine::Engine ref(workload_.config);
    engine::EventBuffer events;
    std::vector<std::byte> expected;
    uint64_t durable_found = 0;
    uint64_t snapshots_found = 0;
    journal::ScanOptions scan;
    scan.config_hash = ref.ConfigHash();
    scan.check_all = true;
    auto scanned = journal::ScanJournal(*dir, scan, [&](const journal::JournalRecord& r) -> Status {
      if (r.seq != Raw(ref.last_sequence()) + 1) {
        return Corruption(
            fmt::format("record {} follows record {}", r.seq, Raw(ref.last_sequence())));
      }
      if (r.seq > stream_.size()) {
        return Corruption(
            fmt::format("record {}, but the stream has {} commands: it was never "
                        "submitted",
                        r.seq, stream_.size()));
      }
      events.clear();
      ref.Process(stream_[r.seq - 1], &events);
      expected.resize(events.size() * codec::kMaxEventSize);
      std::size_t size = 0;
      for (const engine::Event& e : events) {
        size +=
            codec::Encode(e, std::span<std::byte>(expected.data() + size, codec::kMaxEventSize));
      }
      if (size != r.payload.size() || std::memcmp(expected.data(), r.payload.data(), size) != 0) {
        engine::EventBuffer got;
        const Status decoded = journal::DecodeOutcome(r, &got);
        return Corruption(fmt::format(
            "record {} ({} at offset {}) is not the outcome of stream command {}: {} events in "
            "{} bytes, the reference engine emits {} events in {} bytes{}",
            r.seq, r.segment->string(), r.offset, r.seq - 1, got.size(), r.payload.size(),
            events.size(), size, decoded.ok() ? "" : " (" + decoded.message() + ")"));
      }
      if (auto it = durable_.find(r.seq); it != durable_.end()) {
        const uint64_t hash = XXH3_64bits(r.payload.data(), r.payload.size());
        if (hash != it->second) {
          return Corruption(
              fmt::format("record {} hashes to {:016x}; the child reported it "
                          "durable with {:016x}",
                          r.seq, hash, it->second));
        }
        ++durable_found;
      }
      if (auto it = snapshots_.find(r.seq); it != snapshots_.end()) {
        if (ref.StateHash() != it->second) {
          return Corruption(
              fmt::format("the snapshot at sequence {} has state hash {:016x}; "
                          "the reference engine there has {:016x}",
                          r.seq, it->second, ref.StateHash()));
        }
        ++snapshots_found;
      }
      return Status::Ok();
    });
    if (!scanned.ok()) return scanned.status();
    const uint64_t last = scanned->last_seq;
    if (last < journal_seq_) {
      return Corruption(
          fmt::format("the journal ends at {}, but it held whole records up to {} "
                      "after the previous kill",
                      last, journal_seq_));
    }
    if (durable_found != durable_.size()) {
      uint64_t max_durable = 0;
      for (const auto& [seq, hash] : durable_) max_durable = std::max(max_durable, seq);
      return Corruption(
          fmt::format("{} commands reported durable are not in the journal (it "
                      "ends at {}; the highest reported is {})",
                      durable_.size() - durable_found, last, max_durable));
    }
    if (snapshots_found != snapshots_.size()) {
      return Corruption(
          fmt::format("a snapshot was reported at sequence {}, beyond the "
                      "journal's end {}",
                      snapshots_.rbegin()->first, last));
    }
    const uint64_t ref_hash = ref.StateHash();

    // 3: replayed from scratch, and from the newest snapshot.
    for (const bool use_snapshots : {false, true}) {
      engine::Engine replay(workload_.config);
      journal::RecoveryOptions ro;
      ro.use_snapshots = use_snapshots;
      ro.progress = false;
      auto rec = journal::Recover(*dir, &replay, ro);
      const char* how = use_snapshots ? "recovery from the newest snapshot" : "full replay";
      if (!rec.ok()) {
        return Status(rec.status().code(), fmt::format("{}: {}", how, rec.status().message()));
      }
      if (rec->recovered_seq != last || rec->state_hash != ref_hash) {
        return Corruption(
            fmt::format("{}: sequence {} state hash {:016x}; the reference: {} "
                        "{:016x}",
                        how, rec->recovered_seq, rec->state_hash, last, ref_hash));
      }
      if (!rec->notes.empty()) {
        return Corruption(
            fmt::format("{}: {} (snapshots are renamed into place whole; a kill "
                        "cannot damage one)",
                        how, rec->notes.front()));
      }
      if (Status s = replay.CheckInvariants(); !s.ok()) {
        return Status(s.code(), fmt::format("{}: invariant broken: {}", how, s.message()));
      }
      if (use_snapshots && !snapshots_.empty() && rec->snapshot_seq < snapshots_.rbegin()->first) {
        return Corruption(
            fmt::format("recovery used snapshot {}, but one at {} was reported "
                        "durable",
                        rec->snapshot_seq, snapshots_.rbegin()->first));
      }
    }

    *summary = fmt::format("journal {} -> {} records in {} segments", journal_seq_, last,
                           scanned->segments);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir->snapshot_dir(), ec)) {
      if (e.path().string().ends_with(".tmp") && cut_snapshots_.insert(e.path()).second) {
        ++stats_.snapshot_writes_cut;
        *summary += "; a snapshot write was cut";
      }
    }
    if (scanned->tail) {
      ++stats_.tails;
      *summary += "; " + journal::Describe(*scanned->tail);
    }
    journal_seq_ = last;
    journal_hash_ = ref_hash;
    return Status::Ok();
  }

  // Starts a child, lets it run for delay_ms (counted from its R line when
  // loaded, from the spawn otherwise), kills it, reads everything it wrote,
  // and verifies the directory.
  void RunOnce(uint64_t iteration, bool loaded, const std::string& policy, uint64_t delay_ms) {
    {
      std::ofstream(log_, std::ios::app)
          << fmt::format("=== iteration {} {} {} kill after {} ms\n", iteration,
                         loaded ? "loaded" : "early", policy, delay_ms);
    }
    child_ = std::make_unique<ChildProcess>();
    const std::vector<std::string> args = {MB_CRASH_CHILD,
                                           data_.string(),
                                           stream_path_.string(),
                                           std::to_string(workload_.config.max_accounts - 1),
                                           std::to_string(workload_.config.expected_open_orders),
                                           policy,
                                           std::to_string(rate_),
                                           std::to_string(rng_.Next())};
    const Status spawned = child_->Spawn(args, log_);
    ASSERT_TRUE(spawned.ok()) << spawned.message();

    Run run;
    std::vector<std::string> lines;
    bool alive = true;
    auto handle = [&]() -> Status {
      for (const std::string& l : lines) MB_RETURN_IF_ERROR(HandleLine(l, &run));
      lines.clear();
      return Status::Ok();
    };
    if (loaded) {
      const auto give_up = Clock::now() + std::chrono::seconds(120);
      while (alive && !run.ready && Clock::now() < give_up) {
        alive = child_->ReadUntil(std::min(give_up, Clock::now() + std::chrono::milliseconds(50)),
                                  &lines);
        const Status s = handle();
        ASSERT_TRUE(s.ok()) << s.message() << "\n" << LogTail();
      }
      ASSERT_TRUE(run.ready) << "the child did not start within 120 s\n" << LogTail();
    }
    const auto kill_at = Clock::now() + std::chrono::milliseconds(delay_ms);
    while (alive && Clock::now() < kill_at) {
      alive = child_->ReadUntil(kill_at, &lines);
      const Status s = handle();
      ASSERT_TRUE(s.ok()) << s.message() << "\n" << LogTail();
    }
    ASSERT_TRUE(alive) << "the child ended before it was killed\n" << LogTail();
    const int status = child_->Kill();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child ended on its own (wait status " << status << ")\n"
        << LogTail();
    const auto drain_until = Clock::now() + std::chrono::seconds(30);
    bool eof = false;
    while (!eof && Clock::now() < drain_until) eof = !child_->ReadUntil(drain_until, &lines);
    ASSERT_TRUE(eof) << "the pipe stays open after the child was reaped";
    // The child writes whole lines of at most PIPE_BUF bytes at once.
    ASSERT_EQ(child_->partial_bytes(), 0u) << "a line was cut: the protocol is not atomic";
    const Status handled = handle();
    ASSERT_TRUE(handled.ok()) << handled.message() << "\n" << LogTail();
    child_.reset();
    ++(loaded ? stats_.loaded_kills : stats_.early_kills);

    std::string summary;
    const Status verified = VerifyDataDir(&summary);
    ASSERT_TRUE(verified.ok()) << "after kill " << iteration << " (" << policy << ", " << delay_ms
                               << " ms): " << verified.message() << "\n"
                               << LogTail();
    const std::string started =
        run.ready ? fmt::format("recovered {}, {} durable completions", run.recovered, run.durable)
                  : std::string("killed before it reported its recovery");
    std::printf("kill %llu %-6s %-10s at %3llu ms: %s; %s\n",
                static_cast<unsigned long long>(iteration), loaded ? "loaded" : "early",
                policy.c_str(), static_cast<unsigned long long>(delay_ms), started.c_str(),
                summary.c_str());
    std::fflush(stdout);
  }

  uint64_t iterations_ = 0;
  uint64_t rate_ = 0;
  uint64_t seed_ = 0;
  std::vector<std::string> policies_ = {"fsync", "interval:5", "none"};
  bench::Rng rng_{0};
  fs::path root_, data_, log_, stream_path_;
  bench::Workload workload_;
  std::vector<engine::Command> stream_;
  std::unique_ptr<ChildProcess> child_;

  // Across all runs.
  std::unordered_map<uint64_t, uint64_t> durable_;  // seq -> xxh3 of its events
  std::map<uint64_t, uint64_t> snapshots_;          // seq -> state hash
  std::set<fs::path> cut_snapshots_;                // .tmp files seen
  uint64_t journal_seq_ = 0;                        // the journal's end after the last kill
  uint64_t journal_hash_ = 0;                       // the reference state hash there
  Stats stats_;
};

TEST_F(CrashTest, KilledUnderLoadRecoversEverythingDurable) {
  rng_ = bench::Rng(seed_);
  const auto start = Clock::now();
  ASSERT_NO_FATAL_FAILURE(MakeStream());
  std::printf("stream: %zu commands, generated in %.1f s\n", stream_.size(),
              std::chrono::duration<double>(Clock::now() - start).count());

  for (uint64_t i = 1; i <= iterations_; ++i) {
    const std::string& policy = policies_[(i - 1) % policies_.size()];
    if (rng_.Below(4) == 0) {
      ASSERT_NO_FATAL_FAILURE(
          RunOnce(i, false, policy, static_cast<uint64_t>(rng_.Between(0, 20))));
    }
    ASSERT_NO_FATAL_FAILURE(RunOnce(i, true, policy, static_cast<uint64_t>(rng_.Between(50, 400))));
  }

  // 6: the production start-up path on what the last kill left.
  exchange::ExchangeOptions o;
  o.engine = workload_.config;
  o.data_dir = data_;
  std::string log;
  std::mutex log_mu;
  o.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    log += std::string(line) + "\n";
  };
  auto ex = exchange::Exchange::Open(o);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  const journal::RecoveryReport& rec = (*ex)->recovery();
  EXPECT_EQ(rec.recovered_seq, journal_seq_) << log;
  EXPECT_EQ(rec.state_hash, journal_hash_) << log;
  EXPECT_TRUE(rec.notes.empty()) << log;
  if (!snapshots_.empty()) {
    EXPECT_GE(rec.snapshot_seq, snapshots_.rbegin()->first) << log;
  }
  ASSERT_TRUE((*ex)->Close().ok()) << log;
  EXPECT_EQ((*ex)->ClosedStateHash(), journal_hash_);

  std::printf(
      "%llu loaded kills, %llu early; %llu durable completions, %llu snapshots reported; "
      "%llu restarts replayed the journal after a snapshot; %llu torn tails; %llu "
      "snapshot writes cut; %llu runs exhausted the stream; journal %llu records; "
      "%.1f s\n",
      static_cast<unsigned long long>(stats_.loaded_kills),
      static_cast<unsigned long long>(stats_.early_kills),
      static_cast<unsigned long long>(stats_.durable_lines),
      static_cast<unsigned long long>(stats_.snapshot_lines),
      static_cast<unsigned long long>(stats_.recoveries_from_snapshot),
      static_cast<unsigned long long>(stats_.tails),
      static_cast<unsigned long long>(stats_.snapshot_writes_cut),
      static_cast<unsigned long long>(stats_.exhausted),
      static_cast<unsigned long long>(journal_seq_),
      std::chrono::duration<double>(Clock::now() - start).count());
  EXPECT_EQ(stats_.loaded_kills, iterations_);
  EXPECT_GT(stats_.durable_lines, 0u);
}

}  // namespace
}  // namespace mb
