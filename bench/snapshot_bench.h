// The snapshot benchmark: `matchbook-bench snapshot`.
//
// An engine is built with --open-orders N resting orders (--markets books,
// --accounts funded accounts, orders spread over --levels price levels a side,
// denser near the touch, each with a client order id), then a snapshot is
// taken --repeat R times, each step timed on its own:
//
//   export  Engine::ExportImage(): the copy of the engine state a snapshot
//           starts with. The exchange makes it on the snapshot thread, from
//           its follower engine (exchange/snapshot_follower.h); made on the
//           engine thread, it would be that thread's stall.
//   encode  codec::EncodeImage(), hash  engine::HashImage(): parts of write.
//   write   journal::WriteSnapshot() into a scratch data directory (encode,
//           hash, zstd at --zstd-level, temporary file, fsync, rename): the
//           snapshot thread's work, off the engine thread.
//   free    the image's destruction (on the snapshot thread, after the write).
//
// The same accounts and deposits without a single order are exported R times
// first: that baseline is the accounts' and transfers' share of the export,
// the rest is the books'. Printed: p50/p99/p99.9/max of each step, orders
// exported per second, the image's size in memory, encoded and compressed,
// and the process's resident memory. `--json` makes the last line one JSON
// object.
//
// Then (--live-repeat R, default 5; 0 skips it) the same state is built
// through a running Exchange and a probe submits one deposit at a time,
// timing submitted -> matched (the engine's share) and submitted -> durable,
// first while R snapshots are requested one after the other, then for as long
// again with none: an engine thread that stalled for a snapshot would show in
// the first window's tail.
//
// Thread safety: single-threaded program.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

// Adds the `snapshot` subcommand to `app`. The returned runner runs the
// benchmark with the options parsed; call it after app->parse(), when
// `snapshot` was given. It returns the exit code.
std::function<int()> AddSnapshotBench(CLI::App* app);

}  // namespace mb::bench
