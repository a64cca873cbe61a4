#include "fanout/stage.h"

#include <algorithm>
#include <thread>

#include "common/clock.h"

namespace mb::fanout {

std::span<const engine::Event> Batch::EventsOf(Sequence seq) const noexcept {
  const auto first = std::partition_point(events.begin(), events.end(),
                                          [seq](const engine::Event& e) { return e.seq < seq; });
  const auto last = std::partition_point(first, events.end(),
                                         [seq](const engine::Event& e) { return e.seq == seq; });
  return {first, last};
}

void SequenceHandler::OnBatch(const Batch& batch, bool end_of_batch) {
  if (!batch.events.empty()) last_ = static_cast<uint64_t>(batch.events.back().seq);
  if (end_of_batch && last_ != 0) {
    notify_(last_);
    last_ = 0;
  }
}

Stage::Stage(StageOptions options) : options_(std::move(options)), ring_(options_.capacity) {}

Stage::~Stage() { Stop(); }

void Stage::Add(Handler* handler) { handlers_.push_back(handler); }

std::string Stage::Start() { return runner_.Start(); }

void Stage::Stop() { runner_.Stop(); }

std::size_t Stage::depth() const noexcept { return ring_.capacity() - ring_.remaining(); }

int64_t Stage::Claim() {
  for (int64_t seq = ring_.TryClaim();; seq = ring_.TryClaim()) {
    if (seq >= 0) return seq;
    // Full: the fan-out is a whole ring behind. Waiting here holds the
    // journal (and behind it the engine) back rather than lose a batch.
    full_waits_.fetch_add(1, std::memory_order_relaxed);
    runner_.Wake();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Stage::Hold(Answer* answer, Sequence seq) {
  waiting_.fetch_add(1, std::memory_order_relaxed);
  held_.push_back({answer, seq});
}

void Stage::PublishDurable(std::span<const engine::Event> events) {
  const int64_t seq = Claim();
  Batch& b = ring_.Slot(seq);
  b.events.assign(events.begin(), events.end());
  b.answers.swap(held_);  // the slot's emptied vector becomes the next group's
  b.published_ns = options_.timing ? SteadyNs() : 0;
  ring_.Publish(seq);
  runner_.Wake();
}

void Stage::PublishAnswer(Answer* answer) {
  waiting_.fetch_add(1, std::memory_order_relaxed);
  const int64_t seq = Claim();
  Batch& b = ring_.Slot(seq);
  b.answers.push_back({answer, Sequence{0}});
  b.published_ns = options_.timing ? SteadyNs() : 0;
  ring_.Publish(seq);
  runner_.Wake();
}

std::function<void(std::span<const engine::Event>)> Stage::DurableListener() {
  return [this](std::span<const engine::Event> events) { PublishDurable(events); };
}

int Stage::DoWork() {
  const int64_t begin = ring_.next();
  const int64_t end = ring_.Available();
  for (int64_t s = begin; s < end; ++s) {
    Batch& b = ring_.Slot(s);
    const bool last = s + 1 == end;
    for (Handler* h : handlers_) h->OnBatch(b, last);
    for (const Batch::Waiting& w : b.answers) {
      if (w.seq == Sequence{0}) {
        w.answer->OnApplied({});
      } else {
        w.answer->OnApplied(b.EventsOf(w.seq));
      }
    }
    waiting_.fetch_sub(b.answers.size(), std::memory_order_relaxed);
    b.events.clear();
    b.answers.clear();
    if (b.events.capacity() > kKeptEvents) std::vector<engine::Event>().swap(b.events);
    if (b.answers.capacity() > kKeptEvents) std::vector<Batch::Waiting>().swap(b.answers);
    ring_.Release(s + 1);
  }
  delivered_.fetch_add(static_cast<uint64_t>(end - begin), std::memory_order_relaxed);
  for (Handler* h : handlers_) h->OnRound();
  return static_cast<int>(end - begin);
}

}  // namespace mb::fanout
