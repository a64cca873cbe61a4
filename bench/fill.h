// `matchbook-bench fill`: grows a data directory's journal to a given number
// of events through the same Exchange `matchbook serve` runs (its
// configuration file, its journal and snapshot settings), without the API in
// front. What it is for: recovery measured at a journal size the API would
// take an hour to reach on a small machine (scripts/power_cut.sh
// --prefill-events). serve must not be running on the directory (the
// Exchange locks it).
//
// The order flow, on one market: --accounts accounts at the top of the
// account range (the gateway gives out ids densely from 1, so they do not
// meet the accounts an operator creates later) each get a deposit of both
// assets, then round-robin each account either places a resting GTC limit
// order within --band ticks of the centre, cancels its oldest order by
// client id once it holds --orders-per-account, or (one command in five)
// sends an IOC limit order priced into the other side's band, which trades
// with what rests there. The book so stays near accounts x
// orders-per-account open orders, as a venue's does. Client ids and deposit
// references carry the sequence the run starts from, so fills can be
// repeated on one directory. It stops at the first durable batch that
// brings the events to --events (so it may pass it by up to --window
// commands' events).
//
// Refused: a market the configuration lacks, a fee account among the fill's
// accounts, an order too valuable for the accounts to hold (exit 2). A fill
// whose deposits the engine refused, or more than 1 % of its orders, fails
// (exit 1) after printing the counts; so does a journal that refuses writes
// (a full disk): it stops and Close() reports what was not durable.
//
// Printed: the records and events written, commands/s and events/s, the
// Submit -> durable latency p50/p99/p99.9/max, trades and refusals;
// `--json` makes the last line one JSON object.
//
// Thread safety: single-threaded program (the Exchange's own threads aside).
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace mb::bench {

// Adds the `fill` subcommand to `app`; the returned runner runs it after
// app->parse() and returns the exit code.
std::function<int()> AddFillCommand(CLI::App* app);

}  // namespace mb::bench
