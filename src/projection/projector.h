// The projector: a journal tailer that applies batches of records to a Store,
// exactly once.
//
//   journal (durable records) ──JournalTail──▶ RowBuilder ──▶ Store::Commit
//                                              (rows + applied sequence in
//                                               one transaction)
//
// Exactly once: the store's applied sequence is committed with the rows, and
// the projector resumes from applied_seq + 1. On any store error the batch is
// rolled back, the projector waits, reloads its state from the store and
// tries again: nothing is skipped and nothing applied twice.
//
// The engine never waits for it: the projector reads the journal, not the
// engine's queues. It wakes when the exchange reports new durable records
// (NotifyDurable) — no polling loop over the disk. If it is down or
// behind, trading goes on and it catches up from the journal afterwards.
//
// The journal identity is checked at start: the record at applied_seq must
// exist and carry the stored checksum, or the projection belongs to another
// data directory (or the journal was replaced) and is refused.
//
// The live thread is an agent (concurrency/agent.h): one round applies one
// batch (or opens the store, or waits out a retry after a store error).
//
// Thread safety: Init/RunOnce/CatchUp from one thread (offline use), or
// Start/Stop and the live thread; NotifyDurable, WaitApplied and stats() from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"
#include "engine/event.h"
#include "engine/market.h"
#include "journal/tail.h"
#include "projection/rows.h"
#include "projection/store.h"

namespace mb::projection {

struct ProjectorOptions {
  std::size_t batch_events = 1000;  // events per transaction, at most, when keeping up
  // When a batch fills up and more is already waiting (a catch-up after an
  // outage, a rebuild), it grows to this many events: fewer, larger
  // transactions write each hot page once instead of once per small batch.
  std::size_t catchup_batch_events = 20000;
  // A partial batch waits this long for more: at low rates one commit (and
  // its write-ahead log pages) serves every record that became durable
  // meanwhile. It commits sooner when it could be full, and while a reader
  // waits for the projection (WaitApplied) it waits at most reader_batch_wait,
  // so history answers never wait for a batch to fill; readers asking in a
  // closed loop still share commits instead of forcing one per question.
  std::chrono::milliseconds batch_wait{50};
  std::chrono::milliseconds reader_batch_wait{5};
  std::chrono::milliseconds retry{500};  // after a store error
  // The live thread (Start): its name, placement and wait. It parks when
  // there is nothing durable to apply; NotifyDurable wakes it, and the park
  // never lasts longer than park_us (so it also looks without a notification).
  concurrency::StageConfig stage{"mb-projector", {concurrency::WaitKind::kBackOff, 0, 0, 200'000}};
  std::function<void(std::string_view)> log;  // default: stderr
  // What an error that asks for a rebuild names.
  std::string rebuild_command = "matchbook project --rebuild";
  // A store that lives inside the data directory (the history store) is
  // this journal's by construction: when it does not match the journal (the
  // journal's unacknowledged suffix was discarded, or the configuration
  // changed) Init() empties it and the projector builds it again from the
  // journal, instead of refusing it.
  bool rebuild_when_diverged = false;
  // Under journal fsync=none the records the projector reads may still be
  // only in the page cache: with sync_journal it fdatasyncs them before each
  // commit, so after a power cut the projection is never ahead of the
  // journal. file_system: what the journal reader opens and syncs with (null:
  // the system calls; tests pass one that fails).
  bool sync_journal = false;
  FileSystem* file_system = nullptr;
  std::size_t lag_samples = 0;  // keep up to this many per-batch lags (benchmarks)
  // What lag is measured with: steady readings for lag_seconds, wall readings
  // for the lag samples (against the records' event times). Null: the system
  // clock. Outlives the projector. Batch waits and retries stay on the real
  // steady clock.
  const Clock* clock = nullptr;
};

struct ProjectorStats {
  uint64_t applied_seq = 0;
  uint64_t durable_seq = 0;  // as last notified (0: not live)
  uint64_t lag_events = 0;   // records durable, not yet applied
  double lag_seconds = 0;    // since the oldest of them became durable
  uint64_t batches = 0;
  uint64_t events = 0;
  uint64_t errors = 0;
  // The last commit succeeded and the store's log is within its ceiling.
  bool healthy = true;
  std::string last_error;
  std::optional<StorageStats> storage;  // the store's disk use (SQLite)
};

class Projector final : private concurrency::Agent {
 public:
  Projector(std::filesystem::path data_dir, const engine::EngineConfig& config,
            uint64_t config_hash, Store* store, ProjectorOptions options = {});
  ~Projector();
  Projector(const Projector&) = delete;
  Projector& operator=(const Projector&) = delete;

  // The assets and markets added at run time that the journal holds before
  // the projection's next record (the recovered engine's configuration;
  // those after it are learned from the records). Before Init() or Start().
  void Adopt(const engine::EngineConfig& grown);
  // Loads the store's state, checks it against the journal, seeds the open
  // orders. Called by Start() unless the caller did first; offline callers
  // call it first.
  Status Init();
  // The open orders as Init() seeded them (and batches since kept them):
  // before Start() only.
  std::vector<OrderRow> OpenOrders() const;
  // Applies one batch of the records in (applied, limit_seq]; returns how many
  // records it applied (0: nothing to do).
  Result<std::size_t> RunOnce(uint64_t limit_seq = journal::JournalTail::kEverything);
  // RunOnce until nothing is left below the limit.
  Status CatchUp(uint64_t limit_seq = journal::JournalTail::kEverything);

  // The live thread. durable_seq: what the journal had made durable when the
  // exchange opened (records up to it are applied without waiting for a
  // notification). Returns the thread's start-up line (name, placement, wait).
  std::string Start(uint64_t durable_seq);
  void Stop();

  // Journal thread: records up to seq are durable.
  void NotifyDurable(uint64_t seq);
  // Waits until applied_seq >= seq; false on timeout. While it waits, the
  // live thread's batches wait at most reader_batch_wait to fill.
  bool WaitApplied(uint64_t seq, std::chrono::milliseconds timeout);

  uint64_t applied_seq() const noexcept { return applied_.load(std::memory_order_acquire); }
  ProjectorStats stats() const;
  // Per-batch lag samples (ns from the first record's event time to its
  // commit); cleared by the call.
  std::vector<int64_t> TakeLagSamples();

 private:
  // concurrency::Agent, on the live thread.
  int DoWork() override;
  bool HasWork() const override;
  Result<std::size_t> RunBatch(uint64_t limit_seq, bool wait);
  Status CheckJournal();
  void Log(std::string_view line) const;
  void Fail(const Status& st);

  Status journal_sync_error_;  // sync_journal: a failed sync, kept until restart
  const std::filesystem::path data_dir_;
  const uint64_t config_hash_;
  Store* const store_;
  const ProjectorOptions options_;
  const Clock& clock_;  // options_.clock or the system's

  // The configuration, grown by the records' AssetAdded and MarketAdded
  // events (the live thread only).
  engine::EngineConfig config_;
  RowBuilder builder_;
  RowBatch batch_;
  engine::EventBuffer events_;
  std::unique_ptr<journal::JournalTail> tail_;
  ProjectorState state_;

  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> durable_{0};
  std::atomic<uint64_t> batches_{0}, events_applied_{0}, errors_{0};
  std::atomic<bool> healthy_{true};

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::condition_variable applied_cv_;
  bool stop_ MB_GUARDED_BY(mu_) = false;
  // A partial batch waiting to fill is woken when the durable sequence reaches
  // this (0: no batch waiting), not at every durable record.
  uint64_t fill_seq_ MB_GUARDED_BY(mu_) = 0;
  int readers_waiting_ MB_GUARDED_BY(mu_) = 0;  // WaitApplied calls under way
  std::string last_error_ MB_GUARDED_BY(mu_);
  std::vector<int64_t> lag_samples_ MB_GUARDED_BY(mu_);
  // (durable sequence, steady ns when notified), oldest first: how long the
  // oldest unapplied record has been durable.
  std::deque<std::pair<uint64_t, int64_t>> notes_ MB_GUARDED_BY(mu_);
  // The catch-up batch as the store allows it: halved (down to batch_events)
  // while one batch's commit takes more than a quarter of the store's log
  // ceiling. Projector thread only.
  std::size_t catchup_cap_ = 0;
  // The live thread's own state.
  bool ready_ = false;  // Init() succeeded since the last store error
  // Init() ran before Start() (offline callers, or a caller that caught up
  // first): the live thread starts from that state.
  bool initialized_ = false;
  int64_t retry_at_ns_ = 0;  // steady time before which a failed store is not tried again
  concurrency::AgentRunner runner_{this, options_.stage};  // Wake() before Start() is harmless
};

}  // namespace mb::projection
