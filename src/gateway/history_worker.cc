// The history worker (thread mb-history): allOrders, myTrades, a closed order,
// allOrderList, a list that is not open and the ledger, answered from the
// history once it has applied what the read side had when the request
// arrived. Defer() runs on the io threads.
#include "gateway/gateway_impl.h"

namespace mb::gateway {

// Queues a request for the history thread, which waits until the
// history shows what the read side shows now, then runs it.
void Gateway::Impl::Defer(Ctx& c, std::function<void(HistoryJob&)> run) {
  HistoryJob job;
  job.respond = std::move(c.respond);
  job.version = c.version;
  job.keep_alive = c.keep_alive;
  job.meta = c.meta;
  job.wait_seq = read_side_.applied_seq();
  job.deadline = std::chrono::steady_clock::now() + kHistoryWait;
  job.run = std::move(run);
  bool queued = false;
  {
    MutexLock lock(history_mu_);
    if (history_queue_.size() < kHistoryQueue) {
      history_queue_.push_back(std::move(job));
      history_depth_.store(history_queue_.size(), std::memory_order_relaxed);
      queued = true;
    }
  }
  if (queued) {
    history_runner_.Wake();
    return;
  }
  Response res = MakeResponse(
      job.version, job.keep_alive, 503,
      ApiError::ServerBusy(
          "Server is currently overloaded with other requests. Please try again in a few "
          "seconds.")
          .Json(),
      job.meta);
  res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
  job.respond(std::move(res));
}

void Gateway::Impl::JobReply(HistoryJob& j, int status, std::string body) {
  if (status == 200) history_last_error_.clear();
  j.respond(MakeResponse(j.version, j.keep_alive, status, std::move(body), j.meta));
}

void Gateway::Impl::JobReply(HistoryJob& j, const ApiError& e) {
  JobReply(j, e.http_status, e.Json());
}

// The history is behind or its database fails: Binance's answer to a
// backend that did not answer in time.
void Gateway::Impl::HistoryUnavailable(HistoryJob& j, const Status& why) {
  if (why.message() != history_last_error_) {
    history_last_error_ = why.message();
    log::Warn("gateway", "history unavailable (503): " + why.message());
  }
  Response res =
      MakeResponse(j.version, j.keep_alive, 503, ApiError::Disconnected("").Json(), j.meta);
  res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
  j.respond(std::move(res));
}

// Until the history has applied j.wait_seq (true), the deadline, or Stop().
bool Gateway::Impl::WaitApplied(const HistoryJob& j) {
  for (;;) {
    if (history_->applied_seq() >= j.wait_seq) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= j.deadline || history_stop_.load(std::memory_order_relaxed)) return false;
    const auto slice = std::min<std::chrono::milliseconds>(
        std::chrono::ceil<std::chrono::milliseconds>(j.deadline - now),
        std::chrono::milliseconds(50));
    if (history_->WaitApplied(j.wait_seq, slice)) return true;
  }
}

// The history thread's rounds (mb-history): one request each; none once
// stopping (what is left is dropped with the connections).
int Gateway::Impl::HistoryRound() {
  if (history_stop_.load(std::memory_order_acquire)) return 0;
  HistoryJob job;
  {
    MutexLock lock(history_mu_);
    if (history_queue_.empty()) return 0;
    job = std::move(history_queue_.front());
    history_queue_.pop_front();
    history_depth_.store(history_queue_.size(), std::memory_order_relaxed);
  }
  if (!WaitApplied(job)) {
    HistoryUnavailable(job, Status(StatusCode::kUnavailable,
                                   fmt::format("the projection did not catch up with the "
                                               "read side within {} ms",
                                               kHistoryWait.count())));
    return 1;
  }
  try {
    job.run(job);
  } catch (const std::exception& e) {
    JobReply(job, ApiError::Unknown(std::string("Internal error: ") + e.what()));
  }
  return 1;
}

bool Gateway::Impl::HistoryWaiting() {
  MutexLock lock(history_mu_);
  return !history_queue_.empty();
}

}  // namespace mb::gateway
