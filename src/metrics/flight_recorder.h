// FlightRecorder: the stage timestamps of every recent command, kept for the
// last few seconds in a fixed ring, and written to a file when a command is
// slow, so that a latency spike can be explained after the fact (what else was
// in flight, which stage the time went to).
//
//   writer (one thread):  Record(trace) per finished command
//   dumper (own thread):  on a slow command, waits window_ms/2 for what
//                         follows, copies [trigger ingress - window_ms, now]
//                         from the ring and writes one JSON file
//   readers (any thread): Recent(), Dumps(), ReadDump(), stats()
//
// Dump files are named `flight-<UTC yyyymmddThhmmss.mmm>-seq<N>.json` and
// written atomically (temporary file, rename; not synced: a diagnostic must not compete with the
// journal's fdatasync). A dump holds one JSON object:
//   {"triggerSeq":N,"triggerLatencyNs":N,"traceCount":N,"thresholdMs":x,
//    "windowMs":N,"writtenAtMs":N,"trigger":{trace},"traces":[{trace},...]}
// and a trace is
//   {"seq":N,"account":N,"kind":"new_order","httpStatus":N,"ingress":ms,
//    "submittedUs":x,"sequencedUs":x,"matchedUs":x,"journaledUs":x,
//    "durableUs":x,"respondedUs":x}
// where ingress is milliseconds since the Unix epoch (a fraction; converted
// from the monotonic clock by an offset taken once, at construction) and each
// stage is microseconds after ingress, or null when the stage was not reached.
// The first 4 KiB of a file hold every field but "trigger" and "traces", which
// is how dumps left by an earlier run are listed at Start().
//
// Invariants (the memory orders in flight_recorder.cc name the one they serve):
//   I1  slot s & mask holds trace number s (0-based, in Record order) exactly
//       when its version is 2 * (s + 1); the writer makes the version odd
//       before it touches the fields and even after (a seqlock), so a reader
//       that sees the same even version before and after reading the fields
//       has read one whole trace.
//   I2  recorded_ is the number of traces written; every slot below it has
//       been published (release in Record / acquire in Recent).
//   I3  trigger_ is written by the writer only while pending_ is false, and
//       read by the dumper only while pending_ is true (release/acquire on
//       pending_ hand it over in both directions).
//
// Thread safety: Record() from one writer thread at a time (several threads
// may take turns if they synchronise the handover themselves). Recent(),
// Dumps(), ReadDump() and stats() from any thread, concurrently with Record().
// Start() and Stop() from one owner thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"

namespace mb::metrics {

// One command's journey through the exchange.
struct CommandTrace {
  uint64_t seq = 0;  // the command's sequence (0: refused before the engine)
  uint32_t account = 0;
  const char* kind = "";  // a string literal naming the command ("new_order", "cancel", ...)
  uint16_t http_status = 0;
  // CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock); 0: the stage was not reached
  int64_t ingress_ns = 0;    // the gateway took the request
  int64_t submitted_ns = 0;  // put on the inbound ring
  int64_t sequenced_ns = 0;  // the engine took it from the ring
  int64_t matched_ns = 0;    // the engine finished it
  int64_t journaled_ns = 0;  // its journal write returned
  int64_t durable_ns = 0;    // the fsync that covers it returned
  int64_t responded_ns = 0;  // the answer was handed to the connection
};
static_assert(std::is_trivially_copyable_v<CommandTrace>);

struct FlightRecorderOptions {
  std::filesystem::path dir;        // dumps go here (created by Start)
  uint32_t capacity = 1 << 16;      // traces kept; rounded up to a power of two (>= 2)
  uint32_t window_ms = 5000;        // history a dump covers before the slow command (and
                                    // window_ms/2 after)
  uint64_t threshold_ns = 0;        // 0: never dump; else responded - ingress > threshold dumps
  uint32_t min_interval_ms = 1000;  // at most one dump per interval (others are suppressed)
  uint32_t keep = 20;               // newest dump files kept, older ones deleted; 0: keep all
  // Dump files last modified longer ago are deleted (0: no age limit), at
  // Start() and whenever a dump is written, like those beyond `keep`: a
  // server that dumps rarely keeps no months-old files about an incident
  // long dealt with.
  uint32_t max_age_hours = 0;
  // Where a dump that cannot be written is reported (the dumper's thread;
  // empty: stderr). The server passes its log.
  std::function<void(std::string_view)> log;
};

class FlightRecorder final : private concurrency::Agent {
 public:
  explicit FlightRecorder(FlightRecorderOptions options);
  ~FlightRecorder();  // Stop()s
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Creates the directory, lists the dumps already in it (deleting the
  // oldest beyond `keep`, those older than `max_age_hours` and any temporary
  // file a crash left) and starts the dumper thread. An error names the
  // path. REQUIRES: called once.
  Status Start();
  // Stops the dumper; a pending dump is written first (without waiting for
  // the rest of its window). Idempotent. The recorder is not restarted.
  void Stop();

  // Keeps a finished command's trace and, when it is slower than the
  // threshold, asks for a dump (counted as suppressed while a dump is pending
  // or within min_interval_ms of the previous trigger taken). No allocation,
  // no lock and no system call, except a mutex and a wake-up on a trigger
  // taken. One writer thread at a time.
  void Record(const CommandTrace& trace) noexcept;

  // A copy of the kept traces with ingress_ns >= since_ns, in Record order.
  // Any thread.
  std::vector<CommandTrace> Recent(int64_t since_ns) const;

  struct DumpInfo {
    std::string file;     // the name within the directory
    int64_t wall_ms = 0;  // when it was written, ms since the Unix epoch
    uint64_t trigger_seq = 0;
    uint64_t trigger_latency_ns = 0;
    uint32_t traces = 0;
    uint64_t bytes = 0;
  };
  // Newest first, including the dumps found in the directory at Start. Any thread.
  std::vector<DumpInfo> Dumps() const;
  // The contents of one listed dump. NotFound for a name not listed (so
  // nothing outside the directory can be read); IoError if it cannot be read.
  Result<std::string> ReadDump(std::string_view file) const;

  struct Stats {
    uint64_t recorded;     // traces recorded
    uint64_t triggers;     // commands slower than the threshold
    uint64_t dumps;        // dump files written
    uint64_t suppressed;   // triggers not dumped (pending dump or min interval)
    uint64_t dump_errors;  // dumps that could not be written (each one logged)
  };
  Stats stats() const noexcept;

 private:
  struct Slot;

  // concurrency::Agent, on the dumper thread (mb-flight).
  int DoWork() override;
  bool HasWork() const override;
  Status WriteDump(const CommandTrace& trigger);
  void Prune() MB_REQUIRES(dumps_mu_);

  const FlightRecorderOptions options_;
  const uint64_t mask_;
  const int64_t wall_minus_mono_ns_;  // system_clock - steady_clock, taken once
  std::unique_ptr<Slot[]> slots_;

  std::atomic<uint64_t> recorded_{0};  // I2; written by the writer only
  std::atomic<uint64_t> triggers_{0};
  std::atomic<uint64_t> suppressed_{0};
  std::atomic<uint64_t> dumps_written_{0};
  std::atomic<uint64_t> dump_errors_{0};
  int64_t last_trigger_ns_ = 0;  // responded_ns of the last trigger taken; writer only

  CommandTrace trigger_{};            // I3
  std::atomic<bool> pending_{false};  // I3

  std::atomic<bool> stopping_{false};
  int64_t dump_due_ns_ = 0;  // the dumper's: steady time to write the pending dump (0: not set)
  // The dumper: parks between rounds; a trigger wakes it; a park never lasts
  // more than 50 ms, the step at which it looks whether the dump is due.
  concurrency::AgentRunner dumper_{this,
                                   {"mb-flight", {concurrency::WaitKind::kBackOff, 0, 0, 50'000}}};

  mutable Mutex dumps_mu_;
  std::vector<DumpInfo> dumps_ MB_GUARDED_BY(dumps_mu_);  // newest first
};

}  // namespace mb::metrics
