// The dispatcher: the consumer of the journal's outbox. Every durable
// TransferHeld (a withdrawal to another venue) is delivered to the venue its
// address names, and the destination's answer goes back through the engine
// as a ResolveTransfer: completed when the destination credited it, refunded
// when it refused it. docs/transfers.md tells the whole story.
//
//   journal ─ durable batch ─▶ mb-fanout: OnBatch() ─▶ per-venue queue
//   mb-xfer-<venue>-N (sequential: 1 thread, 1 transfer per call;
//                     pipelined: window/batch threads, `batch` per call)
//        ─ POST /venue/v1/transfers, signed ─▶ destination
//        ◀ CREDITED / REJECTED / RETRY ─ Exchange::Submit(ResolveTransfer)
//   the resolution's events (OnBatch) end the transfer here.
//
// Exactly once in effect: a transfer is delivered until its resolution is
// durable; the destination credits (source venue, id) once and answers a
// repeated delivery with the first credit. After a restart of either side
// the pending transfers come from the recovered engine (on_recovered), so
// nothing unresolved is forgotten. While a destination cannot be reached,
// its link retries with back-off (100 ms doubling, at most retry_max_ms);
// trading never waits: the dispatcher only submits commands, which fail fast
// when the ring is full (then they are retried).
//
// A venue with several URLs (a primary and its standbys): its link sends to
// the current one, found by probing each URL's GET /api/v3/ping in order
// for "X-MB-Role: primary" before the first call and whenever a call cannot
// connect or is answered 503; the call then goes again at once to the new
// primary (deliveries are idempotent). No URL saying primary keeps the
// current one, and the call's failure counts as usual.
//
// Thread safety: Wire/Start/Stop from the owner's thread; OnBatch on
// mb-fanout; OnDone on the engine or journal thread; HealthJson and the
// gauges from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/market.h"
#include "exchange/exchange.h"
#include "fanout/stage.h"
#include "transfer/protocol.h"

namespace mb::metrics {
class Histogram;
class Registry;
}  // namespace mb::metrics

namespace mb::transfer {

// One other venue ([[venues]] in the configuration).
struct VenueLink {
  std::string name;  // that venue's `venue`
  // Its API: http://HOST:PORT or https://HOST:PORT, or several separated by commas (the venue's
  // primary and its standbys): calls go to the first whose GET /api/v3/ping
  // says "X-MB-Role: primary" (transfer/protocol.h).
  std::string url;
  std::string secret;  // shared by the pair; signs every call, never sent
  // https:// URLs: the CA that checks the venue's certificate ("": the
  // system's CAs); the certificate must name the URL's host.
  std::string ca_file;
};

enum class DispatchMode : uint8_t {
  kSequential,  // one transfer in flight per venue
  kPipelined,   // up to `window` in flight, `batch` per call
};

struct DispatchOptions {
  std::string venue;  // this venue's name
  std::vector<VenueLink> venues;
  DispatchMode mode = DispatchMode::kPipelined;
  uint32_t window = 1024;
  uint32_t batch = 128;
  uint32_t retry_max_ms = 5000;  // the longest wait between attempts
  uint32_t timeout_ms = 5000;    // one call, connection included
  // Where the dispatcher registers its metrics (docs/metrics.md); null: none.
  metrics::Registry* metrics = nullptr;
};

class Dispatcher final : public fanout::Handler, public exchange::Completion {
 public:
  // Error: a venue URL (or an element of a list of them) that is not
  // http://HOST:PORT, a venue named twice or named like this one, an empty
  // secret.
  static Result<std::unique_ptr<Dispatcher>> Create(const engine::EngineConfig& config,
                                                    DispatchOptions options);
  ~Dispatcher() override;  // Stop()s
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Chains itself onto the exchange's on_recovered listener (the pending
  // transfers at start) and adds itself to the stage's handlers.
  // REQUIRES: before Exchange::Open() and stage->Start().
  void Wire(exchange::ExchangeOptions* options, fanout::Stage* stage);
  // Starts the links' threads. REQUIRES: `exchange` outlives Stop().
  void Start(exchange::Exchange* exchange);
  // Stops the threads (calls in flight finish or time out). Idempotent.
  // Unresolved transfers stay held: the next start delivers them.
  void Stop();

  // mb-fanout.
  void OnBatch(const fanout::Batch& batch, bool end_of_batch) override;
  // A ResolveTransfer's outcome (tag: the transfer id).
  void OnDone(uint64_t tag, const exchange::Outcome& outcome) noexcept override;

  bool Linked(std::string_view venue) const noexcept;
  // Per venue: url (as configured), primary (the URL its calls go to),
  // pending, inFlight, calls, credited, rejected, retried, errors,
  // lastError, lastSuccessMs, backoffMs; and the transfers whose venue has
  // no link ("unroutable"). A JSON object's text.
  std::string HealthJson() const;

 private:
  struct Item;
  struct Link;
  struct Conn;
  Dispatcher(const engine::EngineConfig& config, DispatchOptions options);

  void Add(uint64_t id, const engine::PendingTransfer& t, int64_t held_ns);
  void Resolved(uint64_t id, int64_t resolved_ns, bool completed);
  void Work(Link* link);
  Result<std::vector<DeliveryResult>> Call(Link* link, Conn* conn,
                                           const std::vector<Delivery>& deliveries);
  // Several URLs: GET /api/v3/ping of each in order on `conn` (closed
  // after), until one says primary; that one becomes the link's current.
  // Returns the link's current (unchanged when none says primary).
  std::size_t Probe(Link* link, Conn* conn);
  void Requeue(uint64_t id, bool front);
  void Pause(Link* link);
  void Failed(Link* link, const std::string& why);

  const engine::EngineConfig& config_;
  const DispatchOptions options_;
  exchange::Exchange* exchange_ = nullptr;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Item>> items_;  // pending here, by id
  std::vector<std::unique_ptr<Link>> links_;
  uint64_t unroutable_ = 0;     // pending transfers naming a venue with no link
  uint64_t local_retries_ = 0;  // resolutions this venue's exchange did not take
  std::vector<Conn*> conns_;    // the workers' connections, closed by Stop()
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  metrics::Histogram* completion_ = nullptr;  // held → completed, from the events' times
};

}  // namespace mb::transfer
