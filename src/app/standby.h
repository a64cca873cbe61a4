// `matchbook serve --standby`: a hot standby of a primary that publishes its
// journal on NATS JetStream (docs/failover.md).
//
//   start: recover the local data directory; compare its journal with the
//     stream — records the stream never received (this directory was a
//     primary that lost its lease) are cut, each discarded order id logged;
//     a record that differs from the stream's is refused (diverged history)
//   follow: every record of the stream, from the one after the local
//     journal's last, is appended to the local journal exactly as framed
//     (byte-identical to the primary's), made durable, then applied to the
//     read side, which serves the public market data like a replica
//   check: at each snapshot the primary puts on the bus, a second engine
//     that replays the local journal (exchange/snapshot_follower.h) stops
//     at exactly that record, its state hash is compared with the
//     primary's — a difference is a determinism bug and stops the standby —
//     and the standby writes its own snapshot there
//   take over: when the leadership lease (bus/lease.h) has expired or was
//     released and every record of the stream is applied, take the lease,
//     apply whatever the stream still holds, and hand the data directory and
//     the lease to `serve` (the caller), which recovers and accepts orders
//     from the next sequence on
//
// Thread safety: RunStandby runs on the main thread; the follower's thread
// writes the journal and feeds the read side.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "app/config.h"
#include "bus/lease.h"

namespace mb::app {

struct StandbyEnd {
  int rc = 0;             // 0: stopped or promoted; 1: could not follow (logged)
  bool promoted = false;  // the lease is taken: serve as the primary now
  std::unique_ptr<bus::Lease> lease;
};

// The lease's settings for this venue ([bus], [replication]); `holder`
// names this process.
bus::LeaseOptions LeaseOptionsFrom(const Config& config, std::vector<std::string> servers,
                                   std::string holder);

// A name for this process in the lease: "<host>:<port> pid <pid>".
std::string LeaseHolderName(const Config& config);

// A fault test builds inject (MATCHBOOK_TEST_FAULT=publish-hold): while the
// file <data_dir>/publish.hold exists the primary publishes nothing, as if
// NATS lost every message, and goes on answering orders (ack = local) — the
// records an ack = local failover loses. Always false in other builds.
bool PublishHeldByTestFault(const std::filesystem::path& data_dir);

// Follows until stopping() (checked every 50 ms), the standby cannot go on,
// or it takes over. was_primary: this process was the primary until now (it
// lost its lease, or handed over); it may take the lease back once it is
// free, as a standby may from a primary it has seen hold it.
StandbyEnd RunStandby(const Config& config, const std::string& source,
                      const std::filesystem::path& archive_dir,
                      const std::function<bool()>& stopping, bool was_primary = false);

}  // namespace mb::app
