// The fan-out stage (thread mb-fanout): where a durable batch goes once the
// journal has made it durable.
//
//   journal thread ── PublishDurable(events) ──┐
//                     (with the answers Hold() │  MpscRing<Batch>, bounded;
//                      collected for the group)├─▶ a full ring makes the
//   engine thread ─── PublishAnswer(answer) ───┘  producer wait (counted)
//        ──▶ mb-fanout, one round per wake-up:
//              for each batch, in sequence order:
//                every Handler's OnBatch(batch, end_of_batch), in the order added
//                then each of its answers: OnApplied(the command's events)
//              every Handler's OnRound() (at least every park_us: a clock)
//
// The consumers of durable batches are handlers of one shape (the
// Disruptor's event handler with end-of-batch): the gateway's read side,
// streams and counts, and the projector's wake-up. An answer (a request
// waiting for its command) travels in the batch that holds its command's
// events, so it is delivered after every handler has seen them: the read side
// already shows the command when the client hears of it. Its events are
// found by sequence in the batch, not by a search through other answers.
//
// Events are copied once, from the journal's batch into a ring slot whose
// vectors keep their capacity (up to kKeptEvents), so a warm stage does not
// allocate.
//
// A handler must not block: the engine waits for the journal, which waits
// for a free slot. One whose work can stall (the projector's database) takes
// what it needs here — a sequence — and works on its own thread.
//
// Thread safety: Add/Start/Stop from the owning thread; Hold/PublishDurable
// from the journal thread only (one producer of held answers);
// PublishAnswer and the gauges from any thread; handlers and answers run on
// mb-fanout only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/strong.h"
#include "concurrency/agent.h"
#include "concurrency/ring.h"
#include "engine/event.h"

namespace mb::fanout {

// A request waiting for its command to be durable and applied.
class Answer {
 public:
  // mb-fanout, once every handler has seen the batch holding the command.
  // `events`: the command's events; empty for an answer published with
  // PublishAnswer (the command was refused or is not durable).
  virtual void OnApplied(std::span<const engine::Event> events) noexcept = 0;

 protected:
  ~Answer() = default;
};

struct Batch {
  struct Waiting {
    Answer* answer = nullptr;
    Sequence seq{};  // the command's sequence (0 for PublishAnswer)
  };
  std::vector<engine::Event> events;  // in sequence order; empty for answers only
  std::vector<Waiting> answers;
  int64_t published_ns = 0;  // steady ns at publication (0: StageOptions::timing off)

  // The events of command `seq` (each event carries its command's sequence).
  std::span<const engine::Event> EventsOf(Sequence seq) const noexcept;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // mb-fanout: one batch, in sequence order. end_of_batch: the last batch
  // this round has (flush what was gathered). A batch may hold only answers
  // (no events).
  virtual void OnBatch(const Batch& batch, bool end_of_batch) = 0;
  // mb-fanout: after each round's batches, and at least every park_us.
  virtual void OnRound() {}
};

// Tells `notify` the last durable sequence once per round that had events:
// the projector's wake-up (it reads the journal itself).
class SequenceHandler final : public Handler {
 public:
  explicit SequenceHandler(std::function<void(uint64_t)> notify) : notify_(std::move(notify)) {}
  void OnBatch(const Batch& batch, bool end_of_batch) override;

 private:
  const std::function<void(uint64_t)> notify_;
  uint64_t last_ = 0;  // newest sequence not yet told
};

struct StageOptions {
  std::size_t capacity = 1024;  // batches in flight; a power of two
  // No spinning: a wake per batch costs less than polling at low rates; the
  // park's bound is the handlers' OnRound period (the throttled streams' step).
  concurrency::StageConfig thread{"mb-fanout", {concurrency::WaitKind::kBackOff, 0, 0, 10'000}};
  bool timing = false;  // stamp Batch::published_ns
};

class Stage final : private concurrency::Agent {
 public:
  // A slot's vectors keep at most this many events' room between uses.
  static constexpr std::size_t kKeptEvents = 1 << 14;

  explicit Stage(StageOptions options = {});
  ~Stage() override;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  // REQUIRES: before Start(); `handler` outlives Stop().
  void Add(Handler* handler);
  // Starts mb-fanout; returns its start-up line.
  std::string Start();
  // Delivers everything published so far, then stops. REQUIRES: the
  // producers have stopped (Exchange::Close() returned). Idempotent.
  void Stop();

  // Journal thread, from Completion::OnDone of a durable command: `answer`
  // goes out with the next PublishDurable (its group's events).
  void Hold(Answer* answer, Sequence seq);
  // Journal thread (ExchangeOptions::on_durable): one durable group.
  void PublishDurable(std::span<const engine::Event> events);
  // Any thread: an answer with no events to wait for.
  void PublishAnswer(Answer* answer);
  // A listener for ExchangeOptions::on_durable.
  std::function<void(std::span<const engine::Event>)> DurableListener();

  // Gauges (any thread).
  std::size_t depth() const noexcept;  // batches published, not yet delivered
  uint64_t answers_waiting() const noexcept { return waiting_.load(std::memory_order_relaxed); }
  uint64_t full_waits() const noexcept { return full_waits_.load(std::memory_order_relaxed); }
  uint64_t batches() const noexcept { return delivered_.load(std::memory_order_relaxed); }

 private:
  int DoWork() override;
  bool HasWork() const override { return ring_.HasAvailable(); }
  int64_t Claim();  // waits while the ring is full

  const StageOptions options_;
  concurrency::MpscRing<Batch> ring_;
  std::vector<Handler*> handlers_;    // fixed once started
  std::vector<Batch::Waiting> held_;  // journal thread only
  std::atomic<uint64_t> waiting_{0};  // answers held or published, not yet delivered
  std::atomic<uint64_t> full_waits_{0};
  std::atomic<uint64_t> delivered_{0};
  concurrency::AgentRunner runner_{this, options_.thread};
};

}  // namespace mb::fanout
