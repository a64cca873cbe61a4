#include "projection/projector.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "common/clock.h"
#include "engine/listing.h"
#include "journal/reader.h"

namespace mb::projection {
namespace {

constexpr std::size_t kMaxNotes = 4096;

}  // namespace

Projector::Projector(std::filesystem::path data_dir, const engine::EngineConfig& config,
                     uint64_t config_hash, Store* store, ProjectorOptions options)
    : data_dir_(std::move(data_dir)),
      config_hash_(config_hash),
      store_(store),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : DefaultClock()),
      config_(config),
      builder_(config_),
      catchup_cap_(options_.catchup_batch_events) {}

Projector::~Projector() { Stop(); }

void Projector::Adopt(const engine::EngineConfig& grown) { engine::AdoptListings(&config_, grown); }

void Projector::Log(std::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
}

// The store's state against this journal and configuration: kInvalidArgument
// (with the reason) when the store is of another journal or configuration.
Status Projector::CheckJournal() {
  auto state = store_->State();
  if (!state.ok()) return state.status();
  if (state->applied_seq > 0) {
    if (state->config_hash != config_hash_) {
      return InvalidArgument(fmt::format(
          "projection ({}): built for another configuration (config hash {:016x}, this one is "
          "{:016x}); rebuild it with `{}`",
          store_->backend(), state->config_hash, config_hash_, options_.rebuild_command));
    }
    // The record the projection ends with must be this journal's.
    journal::JournalTail probe(data_dir_, config_hash_, state->applied_seq);
    uint64_t checksum = 0;
    auto got =
        probe.Read(journal::JournalTail::kEverything, 1, [&](const journal::JournalRecord& r) {
          checksum = r.checksum;
          return Status::Ok();
        });
    if (!got.ok()) return got.status();
    if (*got == 0) {
      return InvalidArgument(fmt::format(
          "projection ({}): applied up to sequence {}, but the journal in {} ends before it: the "
          "projection belongs to another data directory (rebuild it with `{}`, or point it at its "
          "own data directory)",
          store_->backend(), state->applied_seq, data_dir_.string(), options_.rebuild_command));
    }
    if (checksum != state->applied_checksum) {
      return InvalidArgument(fmt::format(
          "projection ({}): the journal's record {} is not the one it applied (checksum {:016x}, "
          "projection has {:016x}): it belongs to another data directory",
          store_->backend(), state->applied_seq, checksum, state->applied_checksum));
    }
  }
  return Status::Ok();
}

Status Projector::Init() {
  Status matched = CheckJournal();
  if (!matched.ok() && options_.rebuild_when_diverged &&
      matched.code() == StatusCode::kInvalidArgument) {
    Log(fmt::format("{}; building it again from the journal", matched.message()));
    MB_RETURN_IF_ERROR(store_->Reset());
    matched = CheckJournal();
  }
  MB_RETURN_IF_ERROR(matched);
  auto state = store_->State();
  if (!state.ok()) return state.status();
  auto open = store_->OpenOrders();
  if (!open.ok()) return open.status();
  auto lists = store_->OpenOrderLists();
  if (!lists.ok()) return lists.status();
  builder_.Seed(*open, *lists);
  auto candles = store_->OpenCandles();
  if (!candles.ok()) return candles.status();
  builder_.SeedCandles(*candles);
  state_ = *state;
  tail_ = std::make_unique<journal::JournalTail>(data_dir_, config_hash_, state_.applied_seq + 1,
                                                 options_.file_system);
  applied_.store(state_.applied_seq, std::memory_order_release);
  initialized_ = true;
  return Status::Ok();
}

std::vector<OrderRow> Projector::OpenOrders() const { return builder_.OpenOrders(); }

Result<std::size_t> Projector::RunOnce(uint64_t limit_seq) { return RunBatch(limit_seq, false); }

Status Projector::CatchUp(uint64_t limit_seq) {
  for (;;) {
    auto n = RunOnce(limit_seq);
    if (!n.ok()) return n.status();
    if (*n == 0) return Status::Ok();
  }
}

Result<std::size_t> Projector::RunBatch(uint64_t limit_seq, bool wait) {
  if (!tail_) return Status(StatusCode::kInternal, "projector: Init() first");
  if (!journal_sync_error_.ok()) return journal_sync_error_;
  batch_.Clear();
  std::size_t records = 0;
  int64_t first_time_ns = 0;
  const auto started = std::chrono::steady_clock::now();
  const journal::RecordFn on_record = [&](const journal::JournalRecord& r) -> Status {
    events_.clear();
    MB_RETURN_IF_ERROR(journal::DecodeOutcome(r, &events_));
    engine::LearnListings(&config_, events_);
    if (records == 0 && !events_.empty()) first_time_ns = events_.front().timestamp_ns;
    builder_.AddRecord(r.seq, r.checksum, events_, &batch_);
    ++records;
    return Status::Ok();
  };
  std::size_t cap = options_.batch_events;
  while (batch_.events < cap) {
    const uint64_t limit = wait ? durable_.load(std::memory_order_acquire) : limit_seq;
    auto got = tail_->Read(limit, 64, on_record);
    if (!got.ok()) return got.status();
    if (*got > 0) {
      // Full and still more waiting: behind, so a catch-up batch.
      if (batch_.events >= options_.batch_events) {
        cap = std::max(cap, catchup_cap_);
      }
      continue;
    }
    if (!wait || records == 0) break;
    // A partial batch waits for more: until it could be full (every record
    // holds at least one event) or batch_wait is up, and no longer than
    // reader_batch_wait while a reader waits for the projection. Durable
    // records that leave it short of full do not wake it: one wake-up and
    // one commit per batch, not per record.
    MutexLock lock(mu_);
    const bool readers = readers_waiting_ > 0;
    const auto deadline =
        started +
        (readers ? std::min(options_.batch_wait, options_.reader_batch_wait) : options_.batch_wait);
    if (stop_ || std::chrono::steady_clock::now() >= deadline) break;
    fill_seq_ = tail_->next_seq() + (cap - batch_.events) - 1;
    cv_.wait_until(lock.native(), deadline, [&]() MB_REQUIRES(mu_) {
      // A reader arriving during the wait shortens it (the loop comes back here).
      return stop_ || (!readers && readers_waiting_ > 0) ||
             durable_.load(std::memory_order_acquire) >= fill_seq_;
    });
    fill_seq_ = 0;
  }
  if (records == 0) return std::size_t{0};
  builder_.Finish(&batch_);
  const ProjectorState next{batch_.last_seq, batch_.last_checksum, config_hash_,
                            batch_.last_time_ns};
  if (options_.sync_journal) {
    if (Status s = tail_->SyncDelivered(); !s.ok()) {
      // The kernel reports a lost writeback once: a later sync through a
      // new descriptor could succeed over pages it dropped. So it stays failed.
      journal_sync_error_ =
          Status(s.code(), s.message() +
                               "; the projection stops until a restart (records the kernel "
                               "failed to write cannot be told from the rest)");
      return journal_sync_error_;
    }
  }
  MB_RETURN_IF_ERROR(store_->Commit(batch_, next));
  state_ = next;
  if (const auto storage = store_->Storage();
      storage && storage->last_commit_bytes > storage->wal_max_bytes / 4) {
    catchup_cap_ = std::max(options_.batch_events, catchup_cap_ / 2);
  }
  batches_.fetch_add(1, std::memory_order_relaxed);
  events_applied_.fetch_add(batch_.events, std::memory_order_relaxed);
  healthy_.store(true, std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    applied_.store(next.applied_seq, std::memory_order_release);
    while (!notes_.empty() && notes_.front().first <= next.applied_seq) notes_.pop_front();
    if (lag_samples_.size() < options_.lag_samples) {
      lag_samples_.push_back(clock_.wall_ns() - first_time_ns);
    }
  }
  applied_cv_.notify_all();
  return records;
}

void Projector::Fail(const Status& st) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  const bool was_healthy = healthy_.exchange(false, std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    if (!was_healthy && last_error_ == st.message()) return;  // logged already
    last_error_ = st.message();
  }
  Log(fmt::format("projection: {} (retrying every {} ms; trading is not affected)", st.message(),
                  options_.retry.count()));
}

std::string Projector::Start(uint64_t durable_seq) {
  durable_.store(durable_seq, std::memory_order_release);
  {
    MutexLock lock(mu_);
    stop_ = false;
    if (durable_seq > applied_seq()) notes_.emplace_back(durable_seq, clock_.steady_ns());
  }
  // Init() already run by the caller (and nothing applied since) stands: the
  // thread goes on from it instead of reading the store's open orders again.
  ready_ = initialized_;
  retry_at_ns_ = 0;
  return runner_.Start();
}

void Projector::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();  // a batch waiting to fill stops waiting
  runner_.Stop();
}

int Projector::DoWork() {
  {
    MutexLock lock(mu_);
    if (stop_) return 0;  // the runner then leaves its loop
  }
  if (retry_at_ns_ != 0 && SteadyNs() < retry_at_ns_) return 0;
  retry_at_ns_ = 0;
  Status st;
  if (!ready_) {
    st = Init();
    ready_ = st.ok();
    if (ready_ && !healthy_.load()) Log("projection: store reachable again, catching up");
  }
  if (ready_) {
    auto n = RunBatch(journal::JournalTail::kEverything, true);
    if (n.ok()) return static_cast<int>(std::min<std::size_t>(*n, 1 << 30));
    st = n.status();
    ready_ = false;  // reload the state: the failed batch changed nothing in the store
  }
  Fail(st);
  retry_at_ns_ = SteadyNs() + std::chrono::nanoseconds(options_.retry).count();
  return 0;
}

bool Projector::HasWork() const {
  return retry_at_ns_ == 0 && durable_.load(std::memory_order_acquire) > applied_seq();
}

void Projector::NotifyDurable(uint64_t seq) {
  bool filled = false;
  {
    MutexLock lock(mu_);
    if (seq <= durable_.load(std::memory_order_relaxed)) return;
    durable_.store(seq, std::memory_order_release);
    if (notes_.size() >= kMaxNotes) notes_.pop_back();  // keeps the oldest: lag never understated
    notes_.emplace_back(seq, clock_.steady_ns());
    filled = fill_seq_ != 0 && seq >= fill_seq_;
  }
  if (filled) cv_.notify_one();  // the batch waiting to fill can be full now
  runner_.Wake();                // a fence and a load unless the thread is parked
}

bool Projector::WaitApplied(uint64_t seq, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  if (applied_seq() >= seq) return true;
  ++readers_waiting_;
  cv_.notify_one();  // a batch waiting to fill waits no longer than reader_batch_wait
  const bool applied =
      applied_cv_.wait_for(lock.native(), timeout, [&] { return applied_seq() >= seq; });
  --readers_waiting_;
  return applied;
}

ProjectorStats Projector::stats() const {
  ProjectorStats s;
  s.applied_seq = applied_seq();
  s.durable_seq = durable_.load(std::memory_order_acquire);
  s.lag_events = s.durable_seq > s.applied_seq ? s.durable_seq - s.applied_seq : 0;
  s.batches = batches_.load(std::memory_order_relaxed);
  s.events = events_applied_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.healthy = healthy_.load(std::memory_order_relaxed);
  s.storage = store_->Storage();
  if (s.storage && (s.storage->over_ceiling || s.storage->wal_bytes > s.storage->wal_max_bytes)) {
    s.healthy = false;
  }
  MutexLock lock(mu_);
  s.last_error = last_error_;
  if (s.lag_events > 0 && !notes_.empty()) {
    s.lag_seconds = static_cast<double>(clock_.steady_ns() - notes_.front().second) / 1e9;
  }
  return s;
}

std::vector<int64_t> Projector::TakeLagSamples() {
  MutexLock lock(mu_);
  std::vector<int64_t> out;
  out.swap(lag_samples_);
  return out;
}

}  // namespace mb::projection
