// A leadership lease in a NATS JetStream key-value bucket: how a primary and
// its hot standby decide which of them may write.
//
// One key ("primary") in a bucket of its own ("MATCHBOOK_<venue>_LEADER")
// whose value names the holder; every write conditions on a revision, so no
// two processes can both succeed in taking it:
//
//   take      kvStore_Create(key, holder): only while the key is absent
//             (never written, or removed by the bucket's TTL); a key whose
//             value is empty (released) is taken with
//             kvStore_Update(key, holder, last = its revision)
//   renew     kvStore_Update(key, holder, last = our revision), every
//             renew_every, on mb-lease
//   release   kvStore_Update(key, "", last = our revision)
//   expiry    the bucket's TTL (the stream's max age) removes a key its
//             holder stopped renewing; a standby's create succeeds after that
//
// The local deadline. The server counts a key's age from when it stored the
// write; this process counts from when it sent it, which is earlier, and
// stops a tenth of the TTL short:
//
//   deadline = (steady time the last successful create/update was sent) + ttl - ttl/10
//
// so Valid() turns false before the server can remove the key and let
// another process take it, as long as the two clocks run at about the same
// rate (the tenth is the margin for that and for the server's expiry timer).
// A process frozen past its deadline (a long pause, SIGSTOP, a VM stall) sees
// Valid() false the moment it runs again, before it can write anything.
//
// A renewal refused because the key's revision moved (someone else took it
// after it expired, or it was released), or no successful renewal before the
// deadline (NATS unreachable), loses the lease: on_lost(reason) once, from
// mb-lease, and the thread ends. Losing does not write to the bucket.
//
// Limits: a lone nats-server that crashes (rather than stops) may forget the
// writes it had not flushed to disk, the last renewal among them; a cluster
// bucket (replicas = 3) keeps them. In a cluster, the crash of the node that
// leads the bucket's stream refuses every write to the key ("no responders")
// until the other two elect a new leader: 5 to 8 s with nats-server 2.9.10
// (SIGKILL of that node, three nodes on loopback). A ttl shorter than that
// turns such a crash into a lost lease (safe: no other process can take the
// key meanwhile, but the primary steps down); a longer one rides it out.
//
// No call is sent while the client is reconnecting (it would wait in the
// client's buffer), but one that times out may still reach the server: a
// take that reports failure can then leave the key naming this process,
// which a later TryAcquire takes back (same holder) or the TTL removes.
//
// Thread safety: Connect, TryAcquire, Acquire, CurrentHolder, StartRenewing,
// Release, Stop and PauseRenewingForTest from the owning thread; Valid() and
// stats() from any thread; renewals and on_lost run on mb-lease (on_lost must
// not destroy the Lease; it may call Stop or Release). KV calls of the owner
// and of mb-lease take turns (call_mu_).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bus/nats_security.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace mb::bus {

// "MATCHBOOK_<venue>_LEADER".
std::string DefaultLeaseBucket(std::string_view venue);

struct LeaseOptions {
  std::vector<std::string> servers;  // nats://host:port, one or a cluster's
  NatsSecurity security;             // TLS and credential
  std::string venue = "matchbook";
  std::string bucket;  // "" = DefaultLeaseBucket(venue)
  std::string key = "primary";
  // Who this process is, e.g. "host:8080 pid 123": unique per process (a
  // value naming us at a revision we did not see is taken for our own write).
  // Required.
  std::string holder;
  int replicas = 1;                           // of a bucket Connect creates (3 in a cluster)
  std::chrono::milliseconds ttl{2000};        // the bucket's TTL; at least 100 ms
  std::chrono::milliseconds renew_every{0};   // 0: ttl / 4; below ttl - ttl/10
  std::chrono::milliseconds timeout{1000};    // connect, and each KV call
  std::function<void(std::string_view)> log;  // null: stderr
};

struct LeaseStats {
  bool held = false;            // Valid() when read
  std::string holder;           // the key's value as last read or written ("": free)
  uint64_t revision = 0;        // of our last write (0: none, or released)
  uint64_t acquisitions = 0;    // takes that succeeded
  uint64_t renewals = 0;        // renewals that succeeded
  uint64_t renew_failures = 0;  // renewals that failed and were retried
  std::string last_error;       // "" once a renewal succeeds again
  int64_t remaining_ms = 0;     // until the local deadline; 0 when not held
};

class Lease {
 public:
  explicit Lease(LeaseOptions options);
  // Stop()s; does not release (the key stays until its TTL removes it).
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // Connects, creates the bucket when missing (TTL = ttl, history 1, file
  // storage, `replicas`) or binds the existing one. kInvalidArgument for bad
  // options (an empty holder, say) and for a bucket whose TTL is not ttl
  // (the message gives both); kUnavailable when NATS cannot be reached.
  Status Connect();

  // One attempt to take the lease (connecting first when Connect has not
  // succeeded yet, with its errors). OK when taken now, or ours already;
  // kUnavailable naming the current holder when another process holds it,
  // or when NATS cannot be asked.
  Status TryAcquire();
  // TryAcquire every ttl/8 until taken or `wait` passed; returns the last
  // attempt's status (at once when it is not kUnavailable).
  Status Acquire(std::chrono::milliseconds wait);
  // The holder the bucket names now ("" when free: never taken, expired or
  // released); kUnavailable when NATS cannot be asked. Connects as
  // TryAcquire does.
  Result<std::string> CurrentHolder();

  // Starts mb-lease, which renews every renew_every until Stop, Release or
  // the lease is lost; on_lost(reason) is called once, from mb-lease, when
  // it is lost. Called again, it resumes a paused mb-lease (or restarts an
  // ended one) with the new on_lost; a round that is due by then runs at
  // once. REQUIRES: the lease was taken.
  void StartRenewing(std::function<void(std::string_view reason)> on_lost);

  // True while held and before the local deadline. Lock-free, any thread,
  // a clock read and an atomic load: the order path asks it before every
  // write.
  bool Valid() const noexcept;

  // Stops renewing, stops counting the lease as held (Valid() false) and then
  // marks the key free (an empty value, conditioned on our revision) so a
  // standby can take it at once. OK when nothing was held; kUnavailable when
  // the revision moved (it was not ours any more, the message says whose it
  // is) or NATS cannot be asked.
  Status Release();

  // Stops mb-lease without calling on_lost or writing anything; Valid()
  // stays true until the deadline. Idempotent.
  void Stop();

  LeaseStats stats() const;
  const std::string& bucket() const noexcept { return bucket_; }

  // Test hook: mb-lease stops renewing without telling anyone (what a frozen
  // process does), after the round in progress; StartRenewing resumes it.
  void PauseRenewingForTest();

 private:
  struct Entry;  // the key as read
  enum class Round : uint8_t { kRenewed, kRetry, kLost };

  void Run();
  Round Renew(std::string* reason, int64_t* next_ns);
  Status TakeFree(uint64_t last) MB_REQUIRES(call_mu_);
  bool Connected() const;
  Status Disconnected(std::string_view what) const;
  Entry Read() MB_REQUIRES(call_mu_);
  // Why the lease is not ours any more, from the key as read.
  std::string LostReason(const Entry& e) const MB_REQUIRES(call_mu_);
  void Held(uint64_t revision, int64_t sent_ns) MB_REQUIRES(call_mu_);
  // A take that succeeded: held, counted, logged.
  void Taken(uint64_t revision, int64_t sent_ns) MB_REQUIRES(call_mu_);
  void SetHolder(std::string_view holder);
  void RenewFailed(const std::string& error);
  void Log(std::string_view line) const;

  const LeaseOptions options_;
  const std::string bucket_;
  const int64_t ttl_ns_;
  const int64_t margin_ns_;  // ttl/10: the deadline is this much short of the server's expiry
  const int64_t renew_ns_;
  const int64_t retry_ns_;  // after a renewal that failed for want of an answer

  // The connection and the bound bucket: set by Connect (owning thread)
  // before any other call uses them, gone with the Lease.
  struct Bucket;
  std::unique_ptr<Bucket> nats_;

  // One KV call at a time, and the lease's state with it.
  Mutex call_mu_;
  uint64_t revision_ MB_GUARDED_BY(call_mu_) = 0;  // of our last write; 0: none
  int64_t sent_ns_ MB_GUARDED_BY(call_mu_) = 0;    // when it was sent (steady clock)

  // Invariants:
  //  1. deadline_ns_ is 0 or (sent_ns_ of a write that succeeded) + ttl - ttl/10;
  //     it is written under call_mu_ only, and set to 0 before a release is
  //     sent, so a released lease is never Valid() while the key says free.
  //  2. Nothing else is published through it: Valid() reads it relaxed.
  std::atomic<int64_t> deadline_ns_{0};  // steady clock, ns; 0: not held

  mutable Mutex mu_;
  LeaseStats stats_ MB_GUARDED_BY(mu_);  // held and remaining_ms filled in by stats()
  std::string last_logged_ MB_GUARDED_BY(mu_);

  // mb-lease's control: the owning thread writes, mb-lease waits on thread_cv_.
  Mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ MB_GUARDED_BY(thread_mu_) = false;
  bool paused_ MB_GUARDED_BY(thread_mu_) = false;
  bool in_round_ MB_GUARDED_BY(thread_mu_) = false;  // mb-lease is renewing now
  bool ended_ MB_GUARDED_BY(thread_mu_) = false;     // mb-lease left its loop
  std::function<void(std::string_view)> on_lost_ MB_GUARDED_BY(thread_mu_);
  std::thread thread_;  // owning thread only
};

}  // namespace mb::bus
