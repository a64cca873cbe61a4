// The journal on a bus: every durable journal record published to a NATS
// JetStream stream, in order, exactly once (docs/bus.md).
//
//   mb-fanout ── NotifyDurable(seq) ──▶ mb-publisher (this thread):
//                                         reads the journal files (JournalTail)
//                                         from the stream's last record + 1,
//                                         frames records into messages,
//                                         js_PublishMsg, waits for the ack
//
// A message holds one or more whole journal records, each exactly as the
// journal frames it (24-byte header with sequence and XXH3 checksum, then
// the codec payload), back to back, in sequence order. Its Nats-Msg-Id is the
// sequence of its last record; it is published with the expectation that the
// stream's last message is the one this publisher stored before it
// (ExpectLastSeq; ExpectNoMessage into an empty stream), so two publishers
// can never interleave: the second one's publish is refused by the server,
// and on resuming it finds a record in the stream that its own journal does
// not have, and stops with that reason.
//
// Resuming (at start, after any failed publish, after NATS comes back): the
// stream is created when missing (its description names the venue and the
// configuration hash; a stream of another venue or configuration is
// refused); its last message says which record the stream ends with; that
// record must be this journal's (same checksum), and publishing goes on from
// the next one. A stream that lost its tail (a NATS restart before its files
// were flushed) is refilled from the journal the same way. With a bus key,
// a last message neither signed with it nor this journal's (an earlier
// version's unsigned messages are) is erased first, so that a NATS user
// with publish rights can neither stop publishing nor fence the primary.
//
// Never on the order path: the fan-out thread only stores a sequence and
// wakes this thread. NATS slow or down shows as lag (stats(), the metrics,
// /admin/v1/health, one log line per distinct error), nothing else.
//
// Thread safety: Start/Stop from the owning thread; NotifyDurable, stats()
// and WaitPublished from any thread; the rest runs on mb-publisher.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/nats_security.h"
#include "bus/signing.h"
#include "bus/snapshots.h"
#include "common/file_system.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"

namespace mb::journal {
class JournalTail;
}

namespace mb::bus {

struct NatsConnection;  // bus/nats.h

// "MATCHBOOK_<venue>" and "mb.<venue>.journal".
std::string DefaultStream(std::string_view venue);
std::string DefaultSubject(std::string_view venue);

// A venue name: 1-32 of [A-Za-z0-9_-] (it becomes part of stream and
// subject names, where '.', '*', '>' and spaces mean something else).
Status CheckVenue(std::string_view venue);

// "nats://a:4222,nats://b:4222" (or host:port without the scheme) → each URL
// with its scheme; an empty list or an element that is not host:port is an
// error naming it.
Result<std::vector<std::string>> ParseServers(std::string_view list);

// The stream's description: which venue and configuration it carries.
std::string StreamDescription(std::string_view venue, uint64_t config_hash);

struct PublisherOptions {
  std::vector<std::string> servers;  // nats://host:port, one or a cluster's
  NatsSecurity security;             // TLS and credential
  // Signs every journal message and snapshot manifest (bus/signing.h);
  // null: unsigned.
  std::shared_ptr<const BusSigner> signer;
  std::string venue = "matchbook";
  std::string stream;                                        // "" = DefaultStream(venue)
  std::string subject;                                       // "" = DefaultSubject(venue)
  int replicas = 1;                                          // created streams: 1 or 3 (a cluster)
  int64_t max_bytes = int64_t{32} << 30;                     // the stream's limit
  std::chrono::seconds max_age{std::chrono::hours(24 * 7)};  // the stream's limit
  // An existing stream with more replicas keeps them (replicas not asked
  // for explicitly: a primary started with ack = local must not shrink the
  // R3 stream of an ack = replicated venue).
  bool keep_more_replicas = false;
  // A message ends before the record that would take it past this (a
  // record alone may pass it, up to the server's max_payload).
  std::size_t message_bytes = 256 << 10;
  // A message not yet full waits this long for more durable records (0: it
  // leaves with what is durable).
  std::chrono::microseconds linger{2000};
  std::chrono::milliseconds timeout{2000};    // connect, and each publish's ack
  std::chrono::milliseconds retry{500};       // after a failure
  std::function<void(std::string_view)> log;  // null: stderr
  FileSystem* file_system = nullptr;          // the journal's (null: the system calls)
  // fsync = none: each message's records are fdatasync'ed first (the
  // journal does not), so the bus never holds what a power cut takes back.
  bool sync_journal = false;
  // The newest snapshot of <data_dir>/snapshots also goes to the bus
  // (bus/snapshots.h), checked for every `snapshot_check`; its stream keeps
  // at most snapshot_max_bytes.
  bool snapshots = true;
  std::chrono::milliseconds snapshot_check{1000};
  int64_t snapshot_max_bytes = int64_t{8} << 30;
  // Leadership (docs/failover.md): nothing is published while this returns
  // false (null: always true) — a primary whose lease has run out adds
  // nothing more to the stream.
  std::function<bool()> may_publish;
  // mb-publisher, when the stream holds a record this journal does not have
  // (another primary has written to it): this one is deposed.
  std::function<void(std::string_view)> on_fenced;
};

struct PublisherStats {
  uint64_t published_seq = 0;  // the last record the stream is known to hold
  uint64_t durable_seq = 0;
  uint64_t lag_events = 0;  // durable records not yet acknowledged by the stream
  uint64_t messages = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  // Messages at the stream's end neither signed with the bus key nor this
  // journal's, erased (a NATS user with publish rights wrote them).
  uint64_t forged_erased = 0;
  bool connected = false;  // the last call to NATS succeeded
  std::string last_error;  // "" once a publish succeeds again
  std::string stream;
  std::string subject;
  uint64_t snapshot_seq = 0;  // the newest snapshot on the bus (0: none yet)
};

class Publisher final : private concurrency::Agent {
 public:
  // config_hash: the journal's (segments and the stream's description carry it).
  Publisher(std::filesystem::path data_dir, uint64_t config_hash, PublisherOptions options);
  ~Publisher() override;
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Starts mb-publisher; durable_seq: what the journal holds now. Returns the
  // thread's start-up line.
  std::string Start(uint64_t durable_seq);
  // Ends the thread (a publish in flight finishes or times out first).
  void Stop();

  // Records up to seq are durable (fan-out thread; cheap, never blocks).
  void NotifyDurable(uint64_t seq);
  // True once the stream holds every record up to seq.
  bool WaitPublished(uint64_t seq, std::chrono::milliseconds timeout);

  PublisherStats stats() const;
  const std::string& stream() const noexcept { return stream_; }
  const std::string& subject() const noexcept { return subject_; }

 private:
  int DoWork() override;
  bool HasWork() const override;
  void OnClose() override;

  Status Connect();
  Status Resume();
  Result<std::size_t> PublishBatch();
  // Publishes the next chunk of the snapshot on its way, or starts one when
  // a newer snapshot is there (checked every snapshot_check); true when a
  // message went out.
  bool StepSnapshot();
  void Fail(const Status& st);
  void Log(std::string_view line) const;

  const std::filesystem::path data_dir_;
  const uint64_t config_hash_;
  const PublisherOptions options_;
  const std::string stream_;
  const std::string subject_;
  const SnapshotNames snapshot_names_;
  concurrency::AgentRunner runner_;

  std::atomic<uint64_t> durable_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<bool> connected_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> forged_erased_{0};
  uint64_t erased_total_ = 0;  // mb-publisher: forged messages erased since Start
  std::atomic<uint64_t> snapshot_seq_{0};

  mutable Mutex mu_;
  std::condition_variable published_cv_;
  std::string last_error_ MB_GUARDED_BY(mu_);

  // mb-publisher only.
  std::unique_ptr<NatsConnection> nats_;
  std::unique_ptr<journal::JournalTail> tail_;
  uint64_t next_ = 0;            // the next record to publish; 0: resume first
  uint64_t expect_message_ = 0;  // stream sequence of the stream's last message (0: none)
  int64_t retry_at_ns_ = 0;
  std::vector<std::byte> buf_;
  std::vector<std::byte> carry_;  // a framed record for the next message
  uint64_t carry_seq_ = 0;
  std::size_t max_message_ = 0;  // the server's max_payload less room for headers
  std::string last_resume_log_;
  int refusals_ = 0;              // refusals in a row (their retry backs off)
  bool snapshots_ready_ = false;  // the snapshot stream made sure of, its manifest read
  uint64_t snapshot_chunks_ = 0;  // chunks of the newest snapshot on the bus
  uint64_t snapshot_attempts_ = 0;
  std::unique_ptr<SnapshotUpload> upload_;  // the snapshot on its way
  int64_t snapshot_check_at_ns_ = 0;
  std::string snapshot_error_;  // the last one logged
};

// Releases the NATS library's process-wide threads and memory: once, at
// exit, after every Publisher is gone.
void ShutdownNats();

}  // namespace mb::bus
