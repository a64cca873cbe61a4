#include "projection/verify.h"

#include <fmt/format.h>
#include <unistd.h>

#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "engine/engine.h"
#include "journal/data_dir.h"
#include "journal/recovery.h"
#include "projection/projector.h"

namespace mb::projection {

namespace fs = std::filesystem;

void CompareDumps(const std::vector<TableDump>& expected, const std::vector<TableDump>& actual,
                  std::size_t max, std::vector<std::string>* differences) {
  for (const TableDump& e : expected) {
    const TableDump* a = nullptr;
    for (const TableDump& t : actual) {
      if (t.table == e.table) a = &t;
    }
    if (a == nullptr) {
      differences->push_back(fmt::format("{}: table missing", e.table));
      continue;
    }
    if (e.rows.size() != a->rows.size()) {
      differences->push_back(
          fmt::format("{}: {} rows, the journal gives {}", e.table, a->rows.size(), e.rows.size()));
    }
    std::size_t shown = 0;
    const std::size_t n = std::max(e.rows.size(), a->rows.size());
    for (std::size_t i = 0; i < n && shown < max; ++i) {
      const std::string_view want =
          i < e.rows.size() ? std::string_view(e.rows[i]) : std::string_view("(none)");
      const std::string_view have =
          i < a->rows.size() ? std::string_view(a->rows[i]) : std::string_view("(none)");
      if (want == have) continue;
      differences->push_back(fmt::format("{} row {}: projection has [{}], the journal gives [{}]",
                                         e.table, i, have, want));
      ++shown;
    }
  }
}

Status Rebuild(const fs::path& data_dir, const engine::EngineConfig& config, Store* store) {
  MB_RETURN_IF_ERROR(store->Reset());
  const uint64_t hash = engine::HashConfig(config);
  Projector projector(data_dir, config, hash, store);
  MB_RETURN_IF_ERROR(projector.Init());
  return projector.CatchUp();
}

Result<VerifyReport> VerifyProjection(const fs::path& data_dir, const engine::EngineConfig& config,
                                      Store* store, const fs::path& scratch_dir) {
  VerifyReport report;
  auto dir = journal::DataDir::Open(data_dir, journal::OpenMode::kReadOnly);
  if (!dir.ok()) return dir.status();

  // 3. The engine's balances after replaying everything (no snapshot: the
  // ledger covers the journal from its first record).
  engine::Engine engine(config);
  journal::RecoveryOptions ro;
  ro.use_snapshots = false;
  ro.archive_dir = data_dir / "archive";  // retained segments archived there
  auto rec = journal::Recover(*dir, &engine, ro);
  if (!rec.ok()) return rec.status();
  report.journal_seq = rec->recovered_seq;
  // With the assets and markets the journal added.
  const engine::EngineConfig& listed = engine.config();

  auto state = store->CommittedState();
  if (!state.ok()) return state.status();
  report.applied_seq = state->applied_seq;
  if (state->applied_seq != report.journal_seq) {
    report.differences.push_back(
        fmt::format("the projection has applied sequence {}, the journal ends at {}",
                    state->applied_seq, report.journal_seq));
  }

  auto totals = store->Totals();
  if (!totals.ok()) return totals.status();
  report.totals = *totals;
  std::map<std::tuple<uint32_t, uint16_t, uint8_t>, int64_t> sums;
  for (const ProjectionTotals::Balance& b : totals->balances) {
    sums[{b.account, b.asset, b.bucket}] = b.sum;
  }
  std::size_t balance_diffs = 0;
  const bool caught_up = state->applied_seq == report.journal_seq;
  for (uint32_t a = 0; caught_up && a < config.max_accounts && balance_diffs < 20; ++a) {
    for (std::size_t s = 0; s < listed.assets.size(); ++s) {
      const auto asset = static_cast<uint16_t>(s);
      const engine::Balance bal =
          engine.balance(static_cast<AccountId>(a), static_cast<AssetId>(asset));
      const int64_t want[2] = {bal.available.value, bal.locked.value};
      for (uint8_t bucket = 0; bucket < 2; ++bucket) {
        auto it = sums.find({a, asset, bucket});
        const int64_t have = it == sums.end() ? 0 : it->second;
        if (have != want[bucket]) {
          report.differences.push_back(fmt::format(
              "account {} {} {}: the ledger sums to {}, the replayed engine holds {}", a,
              listed.assets[s].symbol, bucket == 0 ? "available" : "locked", have, want[bucket]));
          ++balance_diffs;
        }
      }
    }
  }

  // What transfers to other venues hold: the held bucket of each account and
  // asset sums to its pending transfers, and the projection's pending
  // withdrawals are the replayed engine's.
  if (caught_up) {
    std::map<std::pair<uint32_t, uint16_t>, int64_t> held;
    for (const engine::PendingTransfer& t : engine.PendingTransfers()) {
      held[{Raw(t.account), Raw(t.asset)}] += t.amount.value;
    }
    for (const auto& [key, sum] : sums) {
      const auto [account, asset, bucket] = key;
      if (bucket == static_cast<uint8_t>(engine::Bucket::kHeld)) held.try_emplace({account, asset});
    }
    std::size_t held_diffs = 0;
    for (const auto& [key, want] : held) {
      auto it = sums.find({key.first, key.second, static_cast<uint8_t>(engine::Bucket::kHeld)});
      const int64_t have = it == sums.end() ? 0 : it->second;
      if (have != want && held_diffs++ < 20) {
        report.differences.push_back(fmt::format(
            "account {} asset {} held: the ledger sums to {}, the replayed engine's pending "
            "transfers hold {}",
            key.first, key.second, have, want));
      }
    }
    TransferQuery pending_q;
    pending_q.state = TransferState::kPending;
    pending_q.limit = std::numeric_limits<std::size_t>::max();
    auto pending = store->Withdrawals(pending_q);
    if (!pending.ok()) return pending.status();
    std::map<uint64_t, std::tuple<uint32_t, uint16_t, int64_t, int64_t>> want_pending, have_pending;
    for (const engine::PendingTransfer& t : engine.PendingTransfers()) {
      want_pending[Raw(t.id)] = {Raw(t.account), Raw(t.asset), t.amount.value, t.fee.value};
    }
    for (const WithdrawalRow& w : *pending) {
      const TransferOutRow& h = w.held;
      have_pending[h.transfer_id] = {h.account, h.asset, h.amount, h.fee};
    }
    if (want_pending != have_pending) {
      report.differences.push_back(fmt::format(
          "pending transfers to other venues: the projection has {}, the replayed engine {}",
          have_pending.size(), want_pending.size()));
    }
  }

  // 2. A reference projection built from the journal.
  // Of the store's kind when that is the history store, whose candles no
  // SQL store keeps.
  const bool rocks = store->backend() == "rocksdb";
  const fs::path scratch =
      scratch_dir / fmt::format("matchbook-verify-{}.{}", static_cast<long>(::getpid()),
                                rocks ? "history" : "sqlite");
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove_all(scratch.string() + suffix, ec);
  {
    StoreOptions reference_options;
    reference_options.backend = rocks ? "rocksdb" : "sqlite";
    reference_options.path = scratch.string();
    auto reference = OpenStore(reference_options, listed);
    if (!reference.ok()) return reference.status();
    Projector projector(data_dir, config, engine::HashConfig(config), reference->get());
    Status st = projector.Init();
    if (st.ok()) st = projector.CatchUp(state->applied_seq);
    if (!st.ok()) return st;
    auto want = (*reference)->Dump();
    if (!want.ok()) return want.status();
    auto have = store->Dump();
    if (!have.ok()) return have.status();
    CompareDumps(*want, *have, 10, &report.differences);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove_all(scratch.string() + suffix, ec);
  return report;
}

}  // namespace mb::projection
