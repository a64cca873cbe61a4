#include "exchange/exchange.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <latch>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"
#include "concurrency/ring.h"
#include "concurrency/wait.h"
#include "exchange/snapshot_follower.h"
#include "metrics/metrics.h"
#include "metrics/owner_link.h"

namespace mb::exchange {

namespace {

using Clock = std::chrono::steady_clock;

// The follower applies at most this many records a round, and parks at most
// this long when it is level with the journal.
constexpr std::size_t kFollowerChunk = 4096;
constexpr int64_t kFollowerParkUs = 100'000;
// The snapshot thread yields the CPU to the engine and journal threads when
// it is short (a snapshot of a large state is seconds of CPU).
constexpr int kBackgroundNice = 10;

bool IsPowerOfTwo(uint32_t v) { return v >= 2 && (v & (v - 1)) == 0; }

struct InboundSlot {
  engine::Command command;
  Completion* completion = nullptr;
  uint64_t tag = 0;
  int64_t submitted_ns = 0;  // 0 when stage times are off
  bool notify_sequenced = false;
};

struct CommandEntry {
  Completion* completion = nullptr;
  uint64_t tag = 0;
  uint32_t begin = 0;  // events [begin, end) of the batch
  uint32_t end = 0;
  int64_t submitted_ns = 0;  // stage times (0 when off)
  int64_t matched_ns = 0;
};

struct SnapshotJob {
  engine::EngineImage image;
  uint64_t record_checksum = 0;
};

// One engine batch on its way to the journal. Reused through the pool.
struct Batch {
  engine::EventBuffer events;
  std::vector<CommandEntry> commands;
  uint64_t last_seq = 0;
  // Stage times shared by the batch's commands (0 when off or not reached).
  int64_t sequenced_ns = 0;
  int64_t journaled_ns = 0;

  void Clear() {
    events.clear();
    commands.clear();
    last_seq = 0;
    sequenced_ns = 0;
    journaled_ns = 0;
  }
};

// The stage latency histograms the exchange records into (docs/metrics.md).
struct StageHistograms {
  metrics::Histogram* ring_wait = nullptr;
  metrics::Histogram* match = nullptr;
  metrics::Histogram* journal_write = nullptr;
  metrics::Histogram* fsync = nullptr;
  metrics::Histogram* submit_to_durable = nullptr;
};

using metrics::kStageLatency;
using metrics::kStageLatencyHelp;

}  // namespace

std::string_view ToString(SubmitResult r) noexcept {
  switch (r) {
    case SubmitResult::kOk:
      return "ok";
    case SubmitResult::kFull:
      return "inbound queue full";
    case SubmitResult::kRefusing:
      return "journal not writable";
    case SubmitResult::kClosed:
      return "shutting down";
  }
  return "?";
}

class Exchange::Impl final : private concurrency::Agent {
 public:
  explicit Impl(ExchangeOptions options)
      : opt_(std::move(options)),
        timing_(opt_.metrics != nullptr || opt_.stage_times),
        inbound_(opt_.inbound_capacity),
        to_journal_(opt_.batch_pool),
        free_(opt_.batch_pool),
        engine_wait_(opt_.engine_stage.wait),
        journal_wait_(opt_.journal_stage.wait),
        free_wait_(opt_.engine_stage.wait) {
    if (!opt_.log) {
      opt_.log = [](std::string_view line) {
        std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      };
    }
  }

  ~Impl() {
    (void)Close();
    if (link_) link_->Clear();
  }

  Status Start() {
    auto dir =
        journal::DataDir::Open(opt_.data_dir, journal::OpenMode::kReadWrite, opt_.file_system);
    if (!dir.ok()) return dir.status();
    dir_.emplace(std::move(dir).value());

    engine_ = std::make_unique<engine::Engine>(opt_.engine);
    journal::RecoveryOptions ro;
    ro.repair = true;
    auto report = journal::Recover(*dir_, engine_.get(), ro);
    if (!report.ok()) return report.status();
    recovery_ = std::move(report).value();
    for (const std::string& line : recovery_.removed) opt_.log(line);
    for (const std::string& note : recovery_.notes) opt_.log(note);
    if (recovery_.journal.tail) opt_.log(journal::Describe(*recovery_.journal.tail));
    opt_.log(journal::Describe(recovery_));
    if (opt_.on_recovered) opt_.on_recovered(*engine_);

    auto writer =
        journal::JournalWriter::Open(*dir_, opt_.journal, engine_->ConfigHash(), recovery_.journal);
    if (!writer.ok()) return writer.status();
    writer_ = std::move(writer).value();
    durable_seq_.store(recovery_.recovered_seq, std::memory_order_relaxed);
    last_checksum_ = recovery_.journal.last_checksum;
    snapshot_written_seq_.store(recovery_.snapshot_seq, std::memory_order_relaxed);
    // JournalWriter::Open made the recovered records durable.
    synced_seq_.store(recovery_.recovered_seq, std::memory_order_relaxed);
    auto follower =
        SnapshotFollower::Start(*engine_, opt_.data_dir, last_checksum_, opt_.file_system);
    if (!follower.ok()) return follower.status();
    follower_ = std::move(follower).value();
    written_seq_ = recovery_.snapshot_seq;
    last_attempt_ = Clock::now();

    for (uint32_t i = 0; i < opt_.batch_pool; ++i) {
      auto b = std::make_unique<Batch>();
      b->events.reserve(static_cast<std::size_t>(opt_.max_batch) * 4);
      b->commands.reserve(opt_.max_batch);
      MB_CHECK(free_.TryPush(b.get()));
      pool_.push_back(std::move(b));
    }

    opt_.log(fmt::format("data directory {}; journal fsync policy {}, segments of {} MiB",
                         opt_.data_dir.string(), journal::DescribeFsyncPolicy(opt_.journal),
                         opt_.journal.segment_bytes >> 20));
    opt_.log(fmt::format("numa: {}", concurrency::DescribeNumaTopology()));
    journal_bytes_.store(writer_->bytes_on_disk(), std::memory_order_relaxed);
    // Before the threads start: they read hist_ without synchronisation.
    if (opt_.metrics != nullptr) RegisterMetrics(*opt_.metrics);
    std::latch started(2);
    opt_.log(fmt::format("thread {}", snapshot_runner_.Start()));
    journal_thread_ = std::thread([this, &started] {
      Announce(concurrency::ApplyToCurrentThread(opt_.journal_stage) + "; " +
                   concurrency::Describe(opt_.journal_stage.wait),
               started);
      JournalLoop();
    });
    engine_thread_ = std::thread([this, &started] {
      Announce(concurrency::ApplyToCurrentThread(opt_.engine_stage) + "; " +
                   concurrency::Describe(opt_.engine_stage.wait),
               started);
      EngineLoop();
    });
    started.wait();
    running_ = true;
    return Status::Ok();
  }

  void RegisterMetrics(metrics::Registry& r) {
    hist_.ring_wait = &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "ring_wait"}});
    hist_.match = &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "match"}});
    hist_.journal_write =
        &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "journal_write"}});
    hist_.fsync = &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "fsync"}});
    hist_.submit_to_durable =
        &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "submit_to_durable"}});
    // The registry's callbacks read the exchange through link_, which ~Impl()
    // clears: a scrape after the exchange is gone reads 0.
    link_.emplace(this);
    auto read = [this](double (*f)(const Impl&)) { return link_->Read(f); };
    r.AddGauge("matchbook_ring_remaining_capacity",
               "Free slots in the inbound ring (commands Submit() can still take)", {},
               read([](const Impl& x) { return static_cast<double>(x.inbound_.remaining()); }));
    r.AddGauge("matchbook_ring_capacity", "Slots in the inbound ring", {},
               read([](const Impl& x) { return static_cast<double>(x.inbound_.capacity()); }));
    r.AddGauge("matchbook_journal_batches_in_flight",
               "Engine batches handed to the journal thread and not yet durable", {},
               read([](const Impl& x) { return static_cast<double>(x.batches_in_flight()); }));
    r.AddGauge("matchbook_journal_durable_sequence", "The last sequence the journal made durable",
               {}, read([](const Impl& x) { return static_cast<double>(x.durable_seq()); }));
    r.AddGauge("matchbook_journal_bytes", "Bytes of journal segments on disk", {},
               read([](const Impl& x) {
                 return static_cast<double>(x.journal_bytes_.load(std::memory_order_relaxed));
               }));
    r.AddCounterFn("matchbook_commands_submitted_total", "Commands Submit() took", {},
                   read([](const Impl& x) {
                     return static_cast<double>(x.submitted_.load(std::memory_order_relaxed));
                   }));
    constexpr std::string_view kRefusedHelp =
        "Commands Submit() refused: the inbound ring was full (HTTP 503) or the journal could "
        "not write";
    r.AddCounterFn("matchbook_commands_refused_total", kRefusedHelp, {{"reason", "ring_full"}},
                   read([](const Impl& x) {
                     return static_cast<double>(x.refused_full_.load(std::memory_order_relaxed));
                   }));
    r.AddCounterFn("matchbook_commands_refused_total", kRefusedHelp, {{"reason", "journal"}},
                   read([](const Impl& x) {
                     return static_cast<double>(x.refused_journal_.load(std::memory_order_relaxed));
                   }));
    r.AddCounterFn("matchbook_journal_write_groups_total",
                   "Journal write groups (one write() for every batch that arrived together)", {},
                   read([](const Impl& x) {
                     return static_cast<double>(x.write_groups_.load(std::memory_order_relaxed));
                   }));
    r.AddCounterFn("matchbook_journal_write_errors_total", "Failed journal writes or fsyncs", {},
                   read([](const Impl& x) {
                     return static_cast<double>(x.write_errors_.load(std::memory_order_relaxed));
                   }));
    r.AddCounterFn("matchbook_snapshots_total", "Snapshots written", {}, read([](const Impl& x) {
                     return static_cast<double>(x.snapshots_.load(std::memory_order_relaxed));
                   }));
    r.AddCounterFn(
        "matchbook_snapshot_failures_total",
        "Snapshots not written (a write error, or the journal could not be synced first); the "
        "previous snapshots stay",
        {}, read([](const Impl& x) {
          return static_cast<double>(x.snapshot_failures_.load(std::memory_order_relaxed));
        }));
  }

  uint64_t batches_in_flight() const noexcept {
    const uint64_t done = batches_done_.load(std::memory_order_relaxed);
    const uint64_t pushed = batches_.load(std::memory_order_relaxed);
    return pushed > done ? pushed - done : 0;
  }

  // ---------------------------------------------------------------- intake

  SubmitResult Submit(const engine::Command& command, Completion* completion, uint64_t tag,
                      bool notify) noexcept {
    // Close() sets closed_ and then waits for in_submit_ to drain; a Submit
    // either sees closed_ or is counted before Close() looks (both seq_cst).
    in_submit_.fetch_add(1, std::memory_order_seq_cst);
    SubmitResult r = SubmitResult::kOk;
    if (closed_.load(std::memory_order_seq_cst)) {
      r = SubmitResult::kClosed;
    } else if (refusing_.load(std::memory_order_acquire)) {
      r = SubmitResult::kRefusing;
      refused_journal_.fetch_add(1, std::memory_order_relaxed);
    } else if (opt_.intake_refusal && opt_.intake_refusal() != nullptr) {
      r = SubmitResult::kRefusing;
    } else {
      const int64_t submitted_ns = timing_ ? SteadyNs() : 0;
      const int64_t s = inbound_.TryClaim();
      if (s < 0) {
        r = SubmitResult::kFull;
        refused_full_.fetch_add(1, std::memory_order_relaxed);
      } else {
        InboundSlot& slot = inbound_.Slot(s);
        slot.command = command;
        slot.completion = completion;
        slot.tag = tag;
        slot.submitted_ns = submitted_ns;
        slot.notify_sequenced = notify;
        inbound_.Publish(s);
        submitted_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    // Wake before leaving: once in_submit_ drops, Close() may finish and the
    // exchange may be gone.
    if (r == SubmitResult::kOk) engine_wait_.Wake();
    in_submit_.fetch_sub(1, std::memory_order_seq_cst);
    return r;
  }

  std::string RefusalReason() const {
    std::string intake = IntakeRefusal();
    if (!intake.empty()) return intake;
    MutexLock lock(refusal_mu_);
    return refusal_;
  }

  std::string IntakeRefusal() const {
    const char* why = opt_.intake_refusal ? opt_.intake_refusal() : nullptr;
    return why != nullptr ? std::string(why) : std::string();
  }

  void RequestSnapshot() noexcept {
    snapshot_requested_.store(true, std::memory_order_release);
    snapshot_runner_.Wake();
  }

  // ---------------------------------------------------------------- engine

  void EngineLoop() {
    EngineBatches();
    engine_done_.store(true, std::memory_order_release);
    journal_wait_.WakeAlways();
  }

  void EngineBatches() {
    int64_t last_ts = 0;
    for (;;) {
      const int64_t begin = inbound_.next();
      const int64_t end = inbound_.Available(opt_.max_batch);
      if (end == begin) {
        if (engine_stop_.load(std::memory_order_acquire)) break;
        engine_wait_.Idle([this] {
          return inbound_.HasAvailable() || engine_stop_.load(std::memory_order_acquire);
        });
        continue;
      }
      engine_wait_.Reset();
      if (refusing_.load(std::memory_order_acquire)) {
        RefuseSlots(begin, end, Outcome::State::kRefusing);
        continue;
      }
      Batch* b = AcquireBatch();
      int64_t now = WallNs();
      if (now < last_ts) now = last_ts;  // timestamps never go back in sequence order
      last_ts = now;
      // Stage times: one clock read for the batch, then one per command; a
      // command's end is the next one's start.
      int64_t t = timing_ ? SteadyNs() : 0;
      b->sequenced_ns = t;
      for (int64_t s = begin; s < end; ++s) {
        InboundSlot& slot = inbound_.Slot(s);
        if (slot.command.timestamp_ns == 0) slot.command.timestamp_ns = now;
        const auto first = static_cast<uint32_t>(b->events.size());
        engine_->Process(slot.command, &b->events);
        const auto last = static_cast<uint32_t>(b->events.size());
        if (timing_) {
          const int64_t start = t;
          t = SteadyNs();
          if (hist_.match != nullptr) {
            hist_.ring_wait->RecordDelta(b->sequenced_ns - slot.submitted_ns);
            hist_.match->RecordDelta(t - start);
          }
        }
        b->commands.push_back({slot.completion, slot.tag, first, last, slot.submitted_ns, t});
        if (slot.notify_sequenced && slot.completion != nullptr) {
          slot.completion->OnSequenced(slot.tag, b->events[first].seq,
                                       {b->events.data() + first, last - first});
        }
      }
      inbound_.Release(end);
      b->last_seq = Raw(engine_->last_sequence());
      PushBatch(b);
    }
  }

  Batch* AcquireBatch() {
    for (;;) {
      if (Batch** pb = free_.Front()) {
        Batch* b = *pb;
        free_.Pop();
        free_wait_.Reset();
        return b;
      }
      free_wait_.Idle([this] { return !free_.Empty(); });
    }
  }

  void PushBatch(Batch* b) {
    MB_CHECK(to_journal_.TryPush(b));  // the pool is no larger than the queue
    batches_.fetch_add(1, std::memory_order_relaxed);
    journal_wait_.Wake();
  }

  void RefuseSlots(int64_t begin, int64_t end, Outcome::State state) {
    for (int64_t s = begin; s < end; ++s) {
      const InboundSlot& slot = inbound_.Slot(s);
      if (slot.completion != nullptr) {
        Outcome o;
        o.state = state;
        o.times.submitted_ns = slot.submitted_ns;
        slot.completion->OnDone(slot.tag, o);
      }
    }
    inbound_.Release(end);
  }

  // ---------------------------------------------------------------- journal

  void JournalLoop() {
    JournalBatches();
    journal_done_.store(true, std::memory_order_release);
  }

  void JournalBatches() {
    std::deque<Batch*> written;  // appended, not yet durable
    auto backoff = std::chrono::milliseconds(10);
    bool abandoned = false;  // Close() gave up on a failing disk: fail what is left
    for (;;) {
      bool appended = false;
      if (!abandoned) ServeSync();
      while (Batch** pb = to_journal_.Front()) {
        Batch* b = *pb;
        to_journal_.Pop();
        if (!abandoned) {
          for (const CommandEntry& c : b->commands) {
            last_checksum_ = writer_->Append(
                std::span<const engine::Event>(b->events.data() + c.begin, c.end - c.begin));
          }
        }
        written.push_back(b);
        appended = true;
      }
      if (abandoned) {
        FailWritten(&written);
      } else if (!written.empty()) {
        const int64_t write_start = timing_ && appended ? SteadyNs() : 0;
        Status s = writer_->Write();
        // When the durable sequence last moved: after the write (`none`), or
        // after the fsync below.
        int64_t durable_ns = 0;
        if (s.ok()) {
          if (timing_) {
            durable_ns = SteadyNs();
            for (Batch* w : written) {
              if (w->journaled_ns == 0) w->journaled_ns = durable_ns;
            }
            if (appended && hist_.journal_write != nullptr) {
              hist_.journal_write->RecordDelta(durable_ns - write_start);
            }
          }
          journal_bytes_.store(writer_->bytes_on_disk(), std::memory_order_relaxed);
        }
        if (s.ok() &&
            (writer_->SyncDue(Clock::now()) || journal_stop_.load(std::memory_order_acquire))) {
          s = writer_->Sync();
          if (s.ok() && timing_ && opt_.journal.policy != journal::FsyncPolicy::kNone) {
            const int64_t synced = SteadyNs();
            if (hist_.fsync != nullptr) hist_.fsync->RecordDelta(synced - durable_ns);
            durable_ns = synced;
          }
        }
        if (appended || !s.ok()) write_groups_.fetch_add(1, std::memory_order_relaxed);
        if (!s.ok()) {
          write_errors_.fetch_add(1, std::memory_order_relaxed);
          EnterRefusing(s);
          if (give_up_.load(std::memory_order_acquire)) {
            abandoned = true;
            continue;
          }
          std::this_thread::sleep_for(backoff);
          backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
          continue;
        }
        backoff = std::chrono::milliseconds(10);
        if (refusing_.load(std::memory_order_relaxed)) LeaveRefusing();
        CompleteDurable(&written, durable_ns);
      }
      if (appended) journal_wait_.Reset();
      if (!written.empty()) {
        // Interval policy: wait for the sync to fall due (or for new work);
        // the back-off parks, so the wait costs no CPU.
        if (to_journal_.Empty() && writer_->NextSyncDeadline() > Clock::now()) {
          journal_wait_.Idle([this] { return !to_journal_.Empty() || SyncWanted(); });
        }
        continue;
      }
      if (appended) continue;
      if (journal_stop_.load(std::memory_order_acquire) &&
          engine_done_.load(std::memory_order_acquire) && to_journal_.Empty()) {
        break;
      }
      journal_wait_.Idle([this] {
        return !to_journal_.Empty() || SyncWanted() ||
               journal_stop_.load(std::memory_order_acquire);
      });
    }
  }

  // durable_ns: when the durable sequence last advanced (0: stage times off).
  void CompleteDurable(std::deque<Batch*>* written, int64_t durable_ns) {
    const uint64_t durable = writer_->durable_seq();
    while (!written->empty() && written->front()->last_seq <= durable) {
      Batch* b = written->front();
      written->pop_front();
      durable_seq_.store(b->last_seq, std::memory_order_release);
      for (const CommandEntry& c : b->commands) {
        if (c.completion == nullptr) continue;
        Outcome o;
        o.state = Outcome::State::kDurable;
        o.seq = b->events[c.begin].seq;
        o.events = {b->events.data() + c.begin, c.end - c.begin};
        o.times = {c.submitted_ns, b->sequenced_ns, c.matched_ns, b->journaled_ns, durable_ns};
        c.completion->OnDone(c.tag, o);
      }
      if (hist_.submit_to_durable != nullptr) {
        for (const CommandEntry& c : b->commands) {
          hist_.submit_to_durable->RecordDelta(durable_ns - c.submitted_ns);
        }
      }
      if (opt_.on_durable && !b->events.empty()) opt_.on_durable(b->events);
      b->Clear();
      batches_done_.fetch_add(1, std::memory_order_relaxed);
      MB_CHECK(free_.TryPush(b));
      free_wait_.Wake();
    }
  }

  // Close() with a journal that never recovered: the commands still in
  // memory were never durable; their submitters learn it.
  void FailWritten(std::deque<Batch*>* written) {
    for (Batch* b : *written) {
      for (const CommandEntry& c : b->commands) {
        if (c.completion == nullptr) continue;
        Outcome o;
        o.state = Outcome::State::kNotDurable;
        o.seq = b->events[c.begin].seq;
        o.times = {c.submitted_ns, b->sequenced_ns, c.matched_ns, b->journaled_ns, 0};
        c.completion->OnDone(c.tag, o);
      }
      not_durable_ += b->commands.size();
      b->Clear();
      batches_done_.fetch_add(1, std::memory_order_relaxed);
      MB_CHECK(free_.TryPush(b));
    }
    written->clear();
    free_wait_.Wake();
  }

  void EnterRefusing(const Status& s) {
    {
      MutexLock lock(refusal_mu_);
      const bool first = refusal_.empty();
      refusal_ = fmt::format("journal write failing, new commands refused until it recovers: {}",
                             s.message());
      if (first) opt_.log(refusal_);
    }
    refusing_.store(true, std::memory_order_release);
  }

  void LeaveRefusing() {
    refusing_.store(false, std::memory_order_release);
    MutexLock lock(refusal_mu_);
    refusal_.clear();
    opt_.log("journal writes succeed again; taking commands");
  }

  // ---------------------------------------------------------------- snapshots

  // The snapshot thread's rounds (mb-snapshot): the follower engine applies
  // what the journal has written since the last round, in chunks; a snapshot
  // falls due between two chunks (by events, by time, or on request) and is
  // exported from the follower and written here. The engine thread takes no
  // part. A round with nothing new parks the thread (kFollowerParkUs at most).
  int DoWork() override {
    if (follower_ == nullptr) {
      if (snapshot_requested_.exchange(false, std::memory_order_acq_rel)) {
        opt_.log("snapshot request ignored: snapshots stopped (see the earlier error); restart");
      }
      return 0;
    }
    if (sync_wait_seq_ != 0) return AwaitSync();
    // Closing: the shutdown snapshot (Close()) covers what is left to apply.
    if (closed_.load(std::memory_order_acquire)) return 0;
    // A request covers whatever was durable when it was made: the flag is
    // taken before the durable sequence is read.
    const bool request = snapshot_requested_.exchange(false, std::memory_order_acq_rel);
    const uint64_t limit = durable_seq_.load(std::memory_order_acquire);
    if (request) {
      requested_ = true;
      request_seq_ = limit;
    }
    auto events = follower_->CatchUp(limit, kFollowerChunk);
    if (!events.ok()) {
      opt_.log(fmt::format("snapshots stopped: {}", events.status().message()));
      snapshot_failures_.fetch_add(1, std::memory_order_release);  // after its log line
      follower_.reset();
      return 0;
    }
    events_since_snapshot_ += *events;
    if (!FollowerSnapshotDue()) return *events > 0 ? 1 : 0;
    requested_ = false;
    if (follower_->applied_seq() == written_seq_) return *events > 0 ? 1 : 0;  // nothing new
    if (opt_.journal.policy == journal::FsyncPolicy::kNone) {
      // Under `none` the records the snapshot covers may not be on disk yet
      // (a snapshot must never be ahead of the journal after a power cut):
      // the journal thread syncs them first.
      sync_wait_seq_ = follower_->applied_seq();
      sync_wanted_.store(sync_wait_seq_, std::memory_order_release);
      journal_wait_.WakeAlways();
      return 1;
    }
    SnapshotFromFollower();
    return 1;
  }
  bool HasWork() const override {
    if (sync_wait_seq_ != 0) return SyncAnswered();
    return snapshot_requested_.load(std::memory_order_acquire);
  }

  bool FollowerSnapshotDue() const {
    if (requested_) return follower_->applied_seq() >= request_seq_;
    if (opt_.snapshots.every_events != 0 && events_since_snapshot_ >= opt_.snapshots.every_events) {
      return true;
    }
    return opt_.snapshots.every_seconds != 0 &&
           Clock::now() - last_attempt_ >= std::chrono::seconds(opt_.snapshots.every_seconds);
  }

  bool SyncAnswered() const {
    return synced_seq_.load(std::memory_order_acquire) >= sync_wait_seq_ ||
           sync_failed_seq_.load(std::memory_order_acquire) >= sync_wait_seq_;
  }

  // Under `none`: the snapshot waits, at its sequence, for the journal
  // thread's sync; a failed sync fails the snapshot (retried when the next
  // one falls due).
  int AwaitSync() {
    if (!SyncAnswered()) return 0;
    if (synced_seq_.load(std::memory_order_acquire) >= sync_wait_seq_) {
      SnapshotFromFollower();
    } else {
      // The journal thread logged the sync's error.
      opt_.log(fmt::format("snapshot at sequence {} skipped: the journal could not be synced",
                           sync_wait_seq_));
      snapshot_failures_.fetch_add(1, std::memory_order_release);  // after its log line
      AttemptDone();
    }
    sync_wait_seq_ = 0;
    return 1;
  }

  void SnapshotFromFollower() {
    follower_->engine().ExportImage(&follower_job_.image);
    follower_job_.record_checksum = follower_->last_checksum();
    if (WriteSnapshotJob(follower_job_)) written_seq_ = follower_->applied_seq();
    AttemptDone();
  }

  void AttemptDone() {
    events_since_snapshot_ = 0;
    last_attempt_ = Clock::now();
  }

  // Journal thread: a sync the snapshot thread waits for (fsync=none only).
  bool SyncWanted() const {
    const uint64_t want = sync_wanted_.load(std::memory_order_acquire);
    return want > synced_seq_.load(std::memory_order_relaxed) &&
           want > sync_failed_seq_.load(std::memory_order_relaxed);
  }
  void ServeSync() {
    if (!SyncWanted()) return;
    const uint64_t want = sync_wanted_.load(std::memory_order_acquire);
    if (Status s = writer_->SyncAll(); s.ok()) {
      synced_seq_.store(writer_->durable_seq(), std::memory_order_release);
    } else {
      opt_.log(fmt::format("journal sync for the snapshot at sequence {} failed: {}", want,
                           s.message()));
      sync_failed_seq_.store(want, std::memory_order_release);
    }
    snapshot_runner_.Wake();
  }

  // Returns whether the snapshot was written.
  bool WriteSnapshotJob(const SnapshotJob& job) {
    const auto start = Clock::now();
    journal::SnapshotMeta meta;
    meta.record_checksum = job.record_checksum;
    auto path = journal::WriteSnapshot(*dir_, job.image, &meta, opt_.snapshots.zstd_level,
                                       opt_.snapshots.keep);
    if (!path.ok()) {
      // Counted after its log line: whoever sees the count can read why.
      opt_.log(
          fmt::format("snapshot at sequence {} failed: {}", meta.seq, path.status().message()));
      snapshot_failures_.fetch_add(1, std::memory_order_release);
      return false;
    }
    snapshot_written_seq_.store(meta.seq, std::memory_order_relaxed);
    opt_.log(
        fmt::format("snapshot at sequence {}: {} ({} bytes, {} raw) state hash {:016x} in "
                    "{:.3f} s",
                    meta.seq, path->string(), meta.compressed_size, meta.raw_size, meta.state_hash,
                    std::chrono::duration<double>(Clock::now() - start).count()));
    if (opt_.on_snapshot) opt_.on_snapshot(meta);
    snapshots_.fetch_add(1, std::memory_order_release);  // after its log line and handler
    return true;
  }

  // ---------------------------------------------------------------- shutdown

  Status Close() {
    if (!running_) return close_status_;
    running_ = false;
    closed_.store(true, std::memory_order_seq_cst);
    while (in_submit_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    // Every claimed slot is now published; the engine drains them, then stops;
    // the journal writes everything the engine produced, then stops. A disk
    // that keeps failing gets a bounded time before the rest is given up.
    engine_stop_.store(true, std::memory_order_release);
    journal_stop_.store(true, std::memory_order_release);
    const auto deadline = Clock::now() + std::chrono::milliseconds(opt_.close_timeout_ms);
    while (!journal_done_.load(std::memory_order_acquire)) {
      // give_up_ matters only to a journal whose writes fail: a healthy one
      // finishes its drain whatever the time.
      if (Clock::now() > deadline) give_up_.store(true, std::memory_order_release);
      engine_wait_.WakeAlways();
      journal_wait_.WakeAlways();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    engine_wait_.WakeAlways();
    engine_thread_.join();
    journal_wait_.WakeAlways();
    journal_thread_.join();

    // The snapshot writer finishes the snapshots already queued first (its
    // runner drains): one writer in the snapshot directory at a time.
    snapshot_runner_.Stop();
    Status result;
    if (not_durable_ > 0) {
      result = IoError(
          fmt::format("{} commands could not be made durable: {}", not_durable_, RefusalReason()));
    } else if (opt_.snapshots.on_shutdown &&
               Raw(engine_->last_sequence()) != snapshot_written_seq_.load() &&
               Raw(engine_->last_sequence()) != 0 && writer_->SyncAll().ok()) {
      SnapshotJob job;
      job.image = engine_->ExportImage();
      job.record_checksum = last_checksum_;
      WriteSnapshotJob(job);
    }
    writer_.reset();
    dir_.reset();  // releases the data directory's lock
    close_status_ = result;
    opt_.log(fmt::format("closed at sequence {}, state hash {:016x}", Raw(engine_->last_sequence()),
                         engine_->StateHash()));
    return result;
  }

  // ---------------------------------------------------------------- gauges

  uint64_t durable_seq() const noexcept { return durable_seq_.load(std::memory_order_acquire); }
  std::size_t inbound_remaining() const noexcept { return inbound_.remaining(); }
  const journal::RecoveryReport& recovery() const noexcept { return recovery_; }
  const engine::EngineConfig& config() const noexcept { return opt_.engine; }
  ExchangeStats stats() const noexcept {
    ExchangeStats s;
    s.submitted = submitted_.load(std::memory_order_relaxed);
    s.refused_full = refused_full_.load(std::memory_order_relaxed);
    s.refused_journal = refused_journal_.load(std::memory_order_relaxed);
    s.batches = batches_.load(std::memory_order_relaxed);
    s.write_groups = write_groups_.load(std::memory_order_relaxed);
    s.write_errors = write_errors_.load(std::memory_order_relaxed);
    s.snapshots = snapshots_.load(std::memory_order_acquire);
    s.snapshot_failures = snapshot_failures_.load(std::memory_order_acquire);
    return s;
  }
  uint64_t ClosedStateHash() const {
    MB_CHECK(!running_);
    return engine_->StateHash();
  }

 private:
  void Announce(const std::string& line, std::latch& started) {
    opt_.log(fmt::format("thread {}", line));
    started.count_down();
  }

  ExchangeOptions opt_;
  const bool timing_;     // stamp StageTimes (metrics or stage_times)
  StageHistograms hist_;  // all null without metrics; set before the threads read them
  std::optional<metrics::OwnerLink<Impl>> link_;
  std::optional<journal::DataDir> dir_;
  std::unique_ptr<engine::Engine> engine_;          // engine thread only, while running
  std::unique_ptr<journal::JournalWriter> writer_;  // journal thread only, while running
  journal::RecoveryReport recovery_;

  concurrency::MpscRing<InboundSlot> inbound_;
  concurrency::SpscRing<Batch*> to_journal_;  // engine -> journal
  concurrency::SpscRing<Batch*> free_;        // journal -> engine
  std::vector<std::unique_ptr<Batch>> pool_;
  concurrency::Waiter engine_wait_;   // the engine parks here; producers wake it
  concurrency::Waiter journal_wait_;  // the journal parks here; the engine wakes it
  concurrency::Waiter free_wait_;     // the engine waits for a free batch here

  // Snapshot thread only (set up by Start()).
  std::unique_ptr<SnapshotFollower> follower_;  // null once it failed
  SnapshotJob follower_job_;                    // reused: no allocation per snapshot once grown
  uint64_t events_since_snapshot_ = 0;          // applied by the follower
  uint64_t written_seq_ = 0;                    // of the newest snapshot written
  uint64_t sync_wait_seq_ = 0;                  // a snapshot waiting for a sync (`none`)
  bool requested_ = false;
  uint64_t request_seq_ = 0;  // what a request covers
  Clock::time_point last_attempt_;
  // Journal thread only (read by Close() after the join).
  uint64_t last_checksum_ = 0;
  uint64_t not_durable_ = 0;

  std::atomic<uint64_t> durable_seq_{0};
  std::atomic<bool> refusing_{false};
  mutable Mutex refusal_mu_;
  std::string refusal_ MB_GUARDED_BY(refusal_mu_);

  std::atomic<bool> snapshot_requested_{false};
  // The snapshot thread: the follower engine and the snapshot writer.
  concurrency::AgentRunner snapshot_runner_{
      this,
      {"mb-snapshot",
       {concurrency::WaitKind::kBackOff, 0, 0, kFollowerParkUs},
       -1,
       false,
       10,
       kBackgroundNice}};

  std::atomic<int64_t> in_submit_{0};
  std::atomic<bool> closed_{false};
  std::atomic<bool> engine_stop_{false};
  std::atomic<bool> journal_stop_{false};
  std::atomic<bool> give_up_{false};
  std::atomic<bool> engine_done_{false};
  std::atomic<bool> journal_done_{false};
  std::atomic<uint64_t> snapshot_written_seq_{0};  // the newest snapshot on disk
  // fsync=none: the snapshot thread asks the journal thread for a sync up to
  // sync_wanted_; the journal thread answers in synced_seq_ (what is on
  // disk) or sync_failed_seq_.
  std::atomic<uint64_t> sync_wanted_{0};
  std::atomic<uint64_t> synced_seq_{0};
  std::atomic<uint64_t> sync_failed_seq_{0};
  bool running_ = false;
  Status close_status_;

  std::atomic<uint64_t> submitted_{0}, refused_full_{0}, refused_journal_{0}, batches_{0},
      write_groups_{0}, write_errors_{0}, snapshots_{0}, snapshot_failures_{0};
  std::atomic<uint64_t> batches_done_{0};   // batches back in the pool (durable or failed)
  std::atomic<uint64_t> journal_bytes_{0};  // the writer's bytes_on_disk() after each write

  std::thread engine_thread_, journal_thread_;
};

Exchange::Exchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Exchange::~Exchange() = default;

Result<std::unique_ptr<Exchange>> Exchange::Open(ExchangeOptions options) {
  if (!IsPowerOfTwo(options.inbound_capacity) || !IsPowerOfTwo(options.batch_pool)) {
    return InvalidArgument(
        fmt::format("inbound_capacity ({}) and batch_pool ({}) must be powers of two >= 2",
                    options.inbound_capacity, options.batch_pool));
  }
  if (options.max_batch == 0) return InvalidArgument("max_batch must be at least 1");
  auto impl = std::make_unique<Impl>(std::move(options));
  MB_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Exchange>(new Exchange(std::move(impl)));
}

SubmitResult Exchange::Submit(const engine::Command& command, Completion* completion, uint64_t tag,
                              bool notify_sequenced) noexcept {
  return impl_->Submit(command, completion, tag, notify_sequenced);
}
std::string Exchange::RefusalReason() const { return impl_->RefusalReason(); }
std::string Exchange::IntakeRefusal() const { return impl_->IntakeRefusal(); }
void Exchange::RequestSnapshot() noexcept { impl_->RequestSnapshot(); }
Status Exchange::Close() { return impl_->Close(); }
uint64_t Exchange::durable_seq() const noexcept { return impl_->durable_seq(); }
std::size_t Exchange::inbound_remaining() const noexcept { return impl_->inbound_remaining(); }
const journal::RecoveryReport& Exchange::recovery() const noexcept { return impl_->recovery(); }
const engine::EngineConfig& Exchange::config() const noexcept { return impl_->config(); }
ExchangeStats Exchange::stats() const noexcept { return impl_->stats(); }
uint64_t Exchange::ClosedStateHash() const { return impl_->ClosedStateHash(); }

}  // namespace mb::exchange
