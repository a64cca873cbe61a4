// A replica's side of the bus: boots from the newest snapshot on the bus,
// then applies every journal record the stream holds after it, in order,
// exactly once (docs/bus.md, "Replicas").
//
//   Start() (caller's thread): connect, check the stream is this venue's and
//     configuration's, boot: the newest snapshot (bus/snapshots.h) → the
//     sink's Bootstrap; without one, the empty state at sequence 0 when the
//     stream still holds record 1
//   mb-follower: an ordered JetStream consumer from the message holding the
//     next record; each message's records checked (frame, checksum, dense
//     sequence) and decoded, their events to the sink's Apply in one batch;
//     Tick at least every `tick`
//
// Never applied twice or out of order: a record at or below the applied
// sequence is skipped (counted as a duplicate); a record past the next one
// (a gap: the stream lost or expired what this replica needs) or one that
// does not decode starts a resynchronisation — boot again from the newest
// snapshot once one is past the last record applied (until then the replica
// keeps what it has, is not ready, and says why), then follow from there. Behind the stream with
// nothing arriving for `stall` (the consumer lost with a NATS restart), it subscribes again from
// the next record. NATS down: it retries every `retry`, its lag grows, and it catches up when NATS
// is back.
//
// A standby (FollowerOptions::resume_after) follows from the record after its
// own journal's last, never from a snapshot: the sink sees every record's
// frame (Record, then Commit) before its events, and a gap or a record that
// cannot be applied halts following (stats().halted) instead of a boot.
//
// Thread safety: Start/Stop from the owning thread; stats() from any thread;
// the sink is called from the thread that runs Start() (Bootstrap) and then
// from mb-follower only — one writer, never two at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bus/nats_security.h"
#include "bus/signing.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"

namespace mb::bus {

struct NatsConnection;  // bus/nats.h

class FollowerSink {
 public:
  // The state at image.last_sequence; whatever was applied before is gone.
  virtual void Bootstrap(const engine::EngineImage& image) = 0;
  // The events of the next records, in sequence order.
  virtual void Apply(std::span<const engine::Event> events) = 0;
  // At least every FollowerOptions::tick.
  virtual void Tick() = 0;
  // Each new record of a message, exactly as the journal framed it, in
  // order, before Commit and Apply; an error halts following.
  virtual Status Record(uint64_t /*seq*/, std::span<const std::byte> /*frame*/) {
    return Status::Ok();
  }
  // After a message's records, before their events go to Apply; an error
  // halts following (the records are not applied).
  virtual Status Commit() { return Status::Ok(); }

 protected:
  ~FollowerSink() = default;
};

struct FollowerOptions {
  std::vector<std::string> servers;  // nats://host:port, one or a cluster's
  NatsSecurity security;             // TLS and credential
  // Null: messages are taken unsigned. Otherwise a journal message or
  // snapshot manifest that the bus key did not sign is never applied
  // (stats().refused, last_error; the follower keeps its state and is not
  // caught up until a signed message applies).
  std::shared_ptr<const BusVerifier> verifier;
  std::string venue = "matchbook";
  std::string stream;                       // "" = DefaultStream(venue)
  std::string subject;                      // "" = DefaultSubject(venue)
  std::chrono::milliseconds timeout{2000};  // connect, and each JetStream call
  std::chrono::milliseconds retry{500};     // after a failure
  std::chrono::milliseconds tick{10};
  std::chrono::milliseconds stall{3000};
  std::function<void(std::string_view)> log;  // null: stderr
  // A standby's own journal ends at this record, and the sink holds its
  // state (the caller bootstrapped it): follow from the next record, which
  // the stream must still hold; never boot from a snapshot.
  std::optional<uint64_t> resume_after;
};

// What the stream holds around one record (Follower::Probe).
struct StreamPoint {
  uint64_t last_seq = 0;         // the stream's last record (0: none)
  std::vector<std::byte> frame;  // the record asked for, framed; empty: not held
};

struct FollowerStats {
  uint64_t applied_seq = 0;  // the last record applied (the primary's numbering)
  uint64_t stream_seq = 0;   // the last record the stream holds, as last seen
  uint64_t lag_events = 0;   // stream_seq - applied_seq (0 when ahead of what was seen)
  uint64_t messages = 0;
  uint64_t records = 0;
  uint64_t duplicates = 0;    // records skipped: already applied
  uint64_t refused = 0;       // messages whose signature did not verify: never applied
  uint64_t resyncs = 0;       // boots after the first
  uint64_t snapshot_seq = 0;  // the snapshot the last boot started from (0: none)
  double boot_seconds = 0;    // the last boot: connect, snapshot, bootstrap
  bool connected = false;
  bool caught_up = false;  // applied everything the stream held, since the last boot
  bool halted = false;     // a standby stopped following (last_error says why)
  std::string last_error;  // "" once records flow again
  std::string stream;
  std::string subject;
};

class Follower {
 public:
  // config: the replica's configuration, which must be the primary's (the
  // stream's description and the snapshot carry its hash).
  Follower(std::filesystem::path data_dir, const engine::EngineConfig& config,
           FollowerOptions options, FollowerSink* sink);
  ~Follower();  // Stop()s
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Connects and boots on this thread (an error says why the replica cannot
  // start: NATS unreachable, no such stream, another venue or configuration,
  // nothing to boot from), then starts mb-follower.
  Status Start();
  void Stop();

  // Before Start(): the stream's last record, and record `seq`'s frame when
  // the stream still holds it (connects first).
  Result<StreamPoint> Probe(uint64_t seq);

  FollowerStats stats() const;
  const std::shared_ptr<const BusVerifier>& verifier() const noexcept { return options_.verifier; }

 private:
  struct Subscription;
  // past == 0: the first boot (the empty state when the bus has no
  // snapshot yet); otherwise a resynchronisation, which needs a snapshot past
  // record `past` — an older one would take the state back and send what
  // subscribers already had again — and waits for one (kNotFound).
  Status Boot(uint64_t past);
  Status Connect();
  Status Subscribe();  // from the message holding record applied + 1
  // Locates the stream message holding record `seq`: its stream sequence,
  // or one past the stream's last message when the stream ends before it.
  Result<uint64_t> Locate(uint64_t seq);
  void Run();
  // One message: true when it applied, skipped or ignored it; an error
  // means a resynchronisation.
  Status Take(std::span<const std::byte> data, uint64_t stream_seq);
  void CheckStream();  // the stream's last record (lag), every second
  void Unsubscribe();
  void Halt(const Status& st);  // a standby's end of following
  void Fail(const Status& st);
  void Log(std::string_view line) const;

  const std::filesystem::path data_dir_;
  const engine::EngineConfig config_;
  const uint64_t config_hash_;
  const FollowerOptions options_;
  const std::string stream_;
  const std::string subject_;
  FollowerSink* const sink_;

  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> stream_seq_{0};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> resyncs_{0};
  std::atomic<uint64_t> snapshot_seq_{0};
  std::atomic<int64_t> boot_us_{0};
  std::atomic<bool> connected_{false};
  std::atomic<bool> caught_up_{false};
  std::atomic<bool> halted_{false};
  std::atomic<bool> stop_{false};
  mutable Mutex mu_;
  std::string last_error_ MB_GUARDED_BY(mu_);

  // The booting thread, then mb-follower only.
  std::unique_ptr<NatsConnection> nats_;
  std::unique_ptr<Subscription> sub_;
  engine::EventBuffer events_;
  int64_t last_message_ns_ = 0;
  uint64_t booted_at_ = 0;  // the last boot's sequence
  int64_t next_check_ns_ = 0;
  std::thread thread_;
};

}  // namespace mb::bus
