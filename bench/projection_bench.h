// The projection benchmark: `matchbook-bench projection`.
//
//   throughput  a journal of --events N events is written first (the engine
//               benchmark's order mix through a real Engine and JournalWriter),
//               then projected from scratch into a fresh store: events/s, and
//               the per-batch commit time percentiles.
//   lag         (--rate R) a live Exchange takes R orders/s, open loop, for
//               --duration-ms while the Projector follows its journal: the
//               time from a command's timestamp to the commit of its rows
//               (per batch, the batch's oldest command), percentiles.
//
// --backend sqlite (a file in a scratch directory) or postgres (the URL in
// MATCHBOOK_PG_URL, or a throw-away cluster started with scripts/pg_cluster.sh
// and removed afterwards). `--json` makes the last line one JSON object with
// events, events_per_s and backend (and the lag figures with --rate).
//
// Thread safety: single-threaded driver (plus the exchange's and projector's
// threads in the lag phase).
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

// Adds the `projection` subcommand to `app`. The returned runner runs the
// benchmark with the options parsed; call it after app->parse(), when
// `projection` was given. It returns the exit code.
std::function<int()> AddProjectionBench(CLI::App* app);
// `history`: the same with the history store (RocksDB).
std::function<int()> AddHistoryBench(CLI::App* app);

}  // namespace mb::bench
