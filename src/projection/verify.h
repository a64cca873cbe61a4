// Checking a projection against the journal it came from.
//
//   1. caught up: the projection's applied sequence is the journal's last
//   2. rows: a reference projection is built from the journal with a fresh
//      RowBuilder into a scratch SQLite file and compared row for row (counts,
//      every order's state, every trade, ledger line and transfer)
//   3. balances: an engine replays the journal from sequence 1 (evolve, the
//      engine's own code, not the projector's) and every account's available
//      and locked balance must equal the sum of its ledger lines; the held
//      lines of each account and asset sum to what its pending transfers to
//      other venues hold, and the projection's pending withdrawals are the
//      engine's (id, account, asset, amount, fee)
//
// Building a projection from scratch (matchbook project --rebuild) uses the
// same Projector the live server runs, so a rebuilt projection is row-for-row
// the incremental one.
//
// Thread safety: plain functions; the store must not be written meanwhile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/market.h"
#include "projection/store.h"

namespace mb::projection {

struct VerifyReport {
  uint64_t journal_seq = 0;
  uint64_t applied_seq = 0;
  ProjectionTotals totals;
  std::vector<std::string> differences;  // empty: the projection equals the journal
  bool ok() const { return differences.empty(); }
};

// Compares `store` with a replay of the journal in data_dir.
Result<VerifyReport> VerifyProjection(const std::filesystem::path& data_dir,
                                      const engine::EngineConfig& config, Store* store,
                                      const std::filesystem::path& scratch_dir);

// Compares two dumps; appends up to `max` differences per table.
void CompareDumps(const std::vector<TableDump>& expected, const std::vector<TableDump>& actual,
                  std::size_t max, std::vector<std::string>* differences);

// Empties the store and projects the whole journal into it.
Status Rebuild(const std::filesystem::path& data_dir, const engine::EngineConfig& config,
               Store* store);

}  // namespace mb::projection
