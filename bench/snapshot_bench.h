// The snapshot benchmark: `matchbook-bench snapshot`.
//
// An engine is built with --open-orders N resting orders (--markets books,
// --accounts funded accounts, orders spread over --levels price levels a side,
// denser near the touch, each with a client order id), then a snapshot is
// taken --repeat R times, each step timed on its own:
//
//   export  Engine::ExportImage(): the copy of the engine state the exchange's
//           engine thread makes when a snapshot is due. It is the whole of the
//           engine-thread stall a snapshot costs; nothing else a snapshot does
//           runs there.
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
