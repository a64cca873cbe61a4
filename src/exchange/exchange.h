// Exchange: the in-process pipeline and the one way in for the gateway, the
// tests and the benchmarks.
//
//   any thread ── Submit() ──▶ inbound ring (MPSC, fail fast when full)
//        ──▶ engine thread: Process() each command of a batch, stamp time,
//            optional OnSequenced ──▶ batch queue (SPSC, bounded pool)
//        ──▶ journal thread: one record per command, one write per group,
//            fsync policy ──▶ durable sequence advances ──▶ OnDone, then the
//            durable-batch listener (the read side)
//   journal files ──▶ snapshot thread: the follower engine applies every
//            durable record (exchange/snapshot_follower.h); snapshots are its
//            image, compressed and written there — the engine thread never
//            stops for one
//
// Open() recovers the state from the data directory (newest valid snapshot +
// journal replay, a torn tail cut) before any command is taken.
//
// Refusals are immediate and change nothing: a full inbound ring (kFull), a
// journal that cannot write (kRefusing: disk full, EIO — commands already
// sequenced are kept and written when the disk recovers; nothing acknowledged
// is lost), or a closing exchange (kClosed).
//
// Stage times and metrics: with ExchangeOptions::metrics (or stage_times) set,
// every command carries steady-clock stamps of its way through the pipeline
// (StageTimes, handed back in its Outcome) and the exchange records the
// latency of each stage into the registry's histograms (docs/metrics.md).
// Clock reads: one per Submit(), one per engine batch plus one per command
// (chained: a command's end is the next one's start), three per journal
// write group. Without either option no clock is read for them.
//
// Thread safety: Submit, RequestSnapshot and the gauges from any thread.
// Completion callbacks run on the engine thread (OnSequenced, and OnDone for
// commands refused after intake) or the journal thread (OnDone for durable
// commands): they must be quick and must not block or call Close().
// Close() from one thread, not from a callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "common/status.h"
#include "concurrency/thread.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"
#include "journal/writer.h"

namespace mb::metrics {
class Registry;
}  // namespace mb::metrics

namespace mb::exchange {

// When a command passed each stage, in steady_clock nanoseconds (0: not
// reached, or stage times are off). submitted <= sequenced <= matched <=
// journaled <= durable.
struct StageTimes {
  int64_t submitted_ns = 0;  // Submit() took it (caller's thread)
  int64_t sequenced_ns = 0;  // the engine took its batch from the inbound ring
  int64_t matched_ns = 0;    // the engine finished processing it
  int64_t journaled_ns = 0;  // the write() holding its record returned
  int64_t durable_ns = 0;    // the durable sequence covered it (after the fsync
                             // under `fsync`/`interval`; = journaled under `none`)
};

// What happened to one submitted command.
struct Outcome {
  // kDurable: sequenced and durable. Otherwise refused before the engine saw it
  // (kRefusing: the journal is failing; kClosed: shut down); seq is 0 then.
  enum class State : uint8_t { kDurable, kRefusing, kClosed, kNotDurable } state = State::kDurable;
  Sequence seq{};
  std::span<const engine::Event> events;  // valid during the callback only
  StageTimes times;                       // the stages it reached (all 0 when stage times are off)
};

class Completion {
 public:
  virtual ~Completion() = default;
  // Engine thread, once sequenced (events decided, not yet durable). Called
  // only for submissions that asked for it.
  virtual void OnSequenced(uint64_t /*tag*/, Sequence /*seq*/,
                           std::span<const engine::Event> /*events*/) noexcept {}
  // Exactly once per accepted Submit(): durable, or refused after intake.
  virtual void OnDone(uint64_t tag, const Outcome& outcome) noexcept = 0;
};

enum class SubmitResult : uint8_t {
  kOk,        // taken; OnDone will follow
  kFull,      // the inbound ring is full: retry later (HTTP 503 + Retry-After)
  kRefusing,  // the journal cannot write: RefusalReason() says why
  kClosed,    // the exchange is shutting down
};
std::string_view ToString(SubmitResult r) noexcept;

struct SnapshotOptions {
  uint64_t every_events = 10'000'000;  // 0: never by count
  uint32_t every_seconds = 3600;       // 0: never by time
  uint32_t keep = 3;
  int zstd_level = 1;
  bool on_shutdown = true;
};

struct ExchangeOptions {
  engine::EngineConfig engine;  // REQUIRES: Validate() passed
  std::filesystem::path data_dir = "data";
  // The calls that change files in data_dir (null: the real system calls;
  // tests pass one that fails some). Must outlive the exchange.
  FileSystem* file_system = nullptr;
  journal::JournalOptions journal;
  SnapshotOptions snapshots;
  uint32_t inbound_capacity = 1u << 16;  // power of two
  uint32_t max_batch = 4096;             // commands per engine batch
  // Batches in flight to the journal (power of two). Few: the journal then
  // reads events the engine wrote while they are still in cache, and an engine
  // that runs ahead parks instead of taking the CPU the journal needs (64:
  // ~1.6 M commands/s on 2 cores, 8: ~3 M; docs/benchmarks.md, "Pipeline").
  uint32_t batch_pool = 8;
  concurrency::StageConfig engine_stage{"mb-engine", {}, -1, false, 10};
  concurrency::StageConfig journal_stage{"mb-journal", {}, -1, false, 10};
  // Close() waits this long for a failing disk to recover before it reports
  // the commands still in memory as not durable.
  uint32_t close_timeout_ms = 10'000;
  // Start-up decisions, recovery, refusals, snapshots: one line each.
  // Default: stderr.
  std::function<void(std::string_view)> log;
  // Open(), once the state is recovered and before any command is taken: the
  // read side's starting point (engine.ExportImage()). The engine must not be
  // kept: the engine thread owns it from then on.
  std::function<void(const engine::Engine&)> on_recovered;
  // Journal thread, after each durable group: every event of it, in order.
  std::function<void(std::span<const engine::Event>)> on_durable;
  // Snapshot thread, after a snapshot file is durable.
  std::function<void(const journal::SnapshotMeta&)> on_snapshot;
  // Where the exchange registers its metrics (docs/metrics.md): stage latency
  // histograms, ring and journal gauges, command counters. Null: none, and no
  // clock reads for them. Must outlive the exchange's use of it: the
  // registry's gauges read the exchange only while it exists.
  metrics::Registry* metrics = nullptr;
  // Stamps StageTimes into every Outcome even without `metrics` (a flight
  // recorder needs them); implied by `metrics`.
  bool stage_times = false;
  // Leadership (docs/failover.md): while this returns a reason (a sentence
  // that lives as long as the exchange), Submit() refuses with kRefusing and
  // IntakeRefusal() gives it; null, or a null answer: intake open. Called on
  // every Submit(), from any thread: it must be cheap.
  std::function<const char*()> intake_refusal;
};

struct ExchangeStats {
  uint64_t submitted = 0;
  uint64_t refused_full = 0;
  uint64_t refused_journal = 0;
  uint64_t batches = 0;
  uint64_t write_groups = 0;
  uint64_t write_errors = 0;
  uint64_t snapshots = 0;
  uint64_t snapshot_failures = 0;  // the previous snapshots stay
};

class Exchange {
 public:
  static Result<std::unique_ptr<Exchange>> Open(ExchangeOptions options);
  ~Exchange();  // Close()s if still open
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Takes a command. REQUIRES: completion outlives its OnDone. tag is passed
  // back. The command's timestamp_ns, when 0, is stamped at sequencing.
  SubmitResult Submit(const engine::Command& command, Completion* completion, uint64_t tag,
                      bool notify_sequenced = false) noexcept;
  // Why Submit() returns kRefusing (empty when it does not).
  std::string RefusalReason() const;
  // The leadership's part of it (ExchangeOptions::intake_refusal; empty
  // while intake is open).
  std::string IntakeRefusal() const;

  // A snapshot covering at least every command durable now (taken by the
  // snapshot thread once its follower engine has applied them).
  void RequestSnapshot() noexcept;

  // Stops intake, drains everything taken into the journal, takes the
  // shutdown snapshot, stops the threads. Idempotent. An error says what
  // could not be made durable (those completions got kNotDurable).
  Status Close();

  uint64_t durable_seq() const noexcept;
  std::size_t inbound_remaining() const noexcept;
  const journal::RecoveryReport& recovery() const noexcept;
  const engine::EngineConfig& config() const noexcept;
  ExchangeStats stats() const noexcept;
  // State hash of the engine; only after Close() (the engine thread owns it).
  uint64_t ClosedStateHash() const;

 private:
  class Impl;
  explicit Exchange(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::exchange
