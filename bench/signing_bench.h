// The bus key's cost: `matchbook-bench signing`.
//
// What the publisher adds to every journal message it puts on NATS (one
// Ed25519 signature over SHA-256 of the message, bus/signing.h) and what a
// replica or a standby adds to every message it reads (one verification),
// for messages of --records journal records of --record-bytes each: a
// message at low rates holds one record, under load up to the publisher's
// message_kb. Each message is signed and verified --repeat times, every
// call timed on its own; printed: p50/p99/p99.9/max per message, messages
// and records per second on one core, and the CPU time per record (the
// process's own, getrusage). `--json` makes the last line one JSON object.
//
// Thread safety: single-threaded program.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

std::function<int()> AddSigningBench(CLI::App* app);

}  // namespace mb::bench
