// The pipeline benchmark: `matchbook-bench pipeline`. The whole in-process
// pipeline (exchange/exchange.h: inbound ring -> engine thread -> journal
// thread -> durable completion) driven by the engine benchmark's command mix
// (workload/engine_workload.h), plus journal replay and restart timings.
//
//   open-loop cells   for each fsync policy (none, fsync) and each offered rate
//                     (10 k, 100 k, 1 M commands/s): producer threads send
//                     command i at its intended time t0 + i / rate and never
//                     skip ahead; submit -> durable latency is counted from the
//                     intended time (OnDone on the journal thread), so a stall
//                     anywhere, the producer's included, shows in the tail.
//   max-throughput    per policy: producers submit as fast as the inbound ring
//                     takes commands (retrying kFull); durable commands / time.
//   fsync probe       write 4 KiB + fdatasync in the data directory, to judge
//                     "p99 submit->durable <= 2 x median fsync at 10 k/s".
//   replay            journal::Recover over a journal written by JournalWriter
//                     from the same stream, snapshots off: events per second.
//   restart           (--restart-events N) a journal of N events with a
//                     snapshot at 90%: the time of Exchange::Open.
//
// `--json` makes the last line printed one JSON object; `--duration-ms`
// shortens every cell (and scales the replay journal down with it).
//
// Thread safety: single-threaded driver; it starts producer threads per cell
// and joins them before the cell ends.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

// Adds the `pipeline` subcommand to `app`. The returned runner runs the
// benchmark with the options parsed; call it after app->parse(), when
// `pipeline` was given. It returns the exit code.
std::function<int()> AddPipelineBench(CLI::App* app);

}  // namespace mb::bench
