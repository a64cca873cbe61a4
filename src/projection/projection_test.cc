// The projection against the journal: the tailer follows a growing journal;
// the projection built incrementally (with restarts and kills at random
// points) equals one rebuilt from scratch, row for row, on every backend; the
// history queries agree with the read side the gateway answered from live; a
// projection from another journal, a newer schema and bad databases are
// refused; a database outage never stops trading.
//
// Backends: SQLite always; PostgreSQL at MATCHBOOK_PG_URL (scripts/test.sh
// starts a throw-away cluster and sets it; without it those cases fail).
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <tuple>

#include "common/clock.h"
#include "common/fault_file_system.h"
#include "engine/engine.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/tail.h"
#include "journal/writer.h"
#include "marketdata/read_side.h"
#include "projection/projector.h"
#include "projection/schema.h"
#include "projection/store.h"
#include "projection/verify.h"
#include "workload/engine_workload.h"
#include "workload/random_commands.h"

// The kill test forks a child that projects while the parent is killed at
// random points. RocksDB's background thread pool lives for the process, so
// once a history-store case has run the parent has threads when it forks;
// ThreadSanitizer's default is to stop a child that starts threads after
// such a fork. The child here only projects and exits; it shares nothing
// with the parent's threads.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }

namespace mb::projection {
namespace {

namespace fs = std::filesystem;
using engine::Command;
using engine::EngineConfig;
using engine::Event;
using engine::EventBuffer;

fs::path TestDir(std::string_view tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  fs::path p = fs::temp_directory_path() /
               ("mb_projection_" + name + "_" + std::string(tag) + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A journal written by a real engine from the mixed command stream (every kind
// of command, order lists included, ~10% rejected), in small segments so that
// the tail crosses rolls.
struct JournalBuilder {
  EngineConfig config = workload::MixedConfig();
  uint64_t hash = engine::HashConfig(config);
  engine::Engine engine{config};
  workload::MixedCommands gen;
  std::unique_ptr<journal::JournalWriter> writer;
  std::optional<journal::DataDir> dir;
  std::vector<EventBuffer> records;  // every record's events, index = seq - 1

  JournalBuilder(const fs::path& root, uint64_t seed, uint64_t segment_bytes = 64 << 10)
      : gen(seed, &engine, workload::MixedOptions{.order_lists = true}) {
    auto d = journal::DataDir::Open(root, journal::OpenMode::kReadWrite);
    EXPECT_TRUE(d.ok()) << d.status().message();
    dir.emplace(std::move(*d));
    journal::ScanOptions so;
    so.config_hash = hash;
    so.repair = true;
    auto scan = journal::ScanJournal(*dir, so, nullptr);
    EXPECT_TRUE(scan.ok()) << scan.status().message();
    journal::JournalOptions jo;
    jo.policy = journal::FsyncPolicy::kNone;
    jo.segment_bytes = segment_bytes;
    auto w = journal::JournalWriter::Open(*dir, jo, hash, *scan);
    EXPECT_TRUE(w.ok()) << w.status().message();
    writer = std::move(*w);
    for (const Command& c : gen.Funding()) Process(c);
    Flush();
  }

  void Process(const Command& c) {
    EventBuffer ev;
    engine.Process(c, &ev);
    writer->Append(ev);
    records.push_back(std::move(ev));
  }
  void Flush() {
    ASSERT_TRUE(writer->Write().ok());
    ASSERT_TRUE(writer->Sync().ok());
  }
  void Run(std::size_t commands) {
    for (std::size_t i = 0; i < commands; ++i) Process(gen.Next());
    Flush();
  }
  uint64_t last_seq() const { return records.size(); }
};

// ---- backends ----------------------------------------------------------------

std::string PgUrl() {
  const char* url = std::getenv("MATCHBOOK_PG_URL");
  return url == nullptr ? std::string() : std::string(url);
}

// A fresh database on the test cluster; the URL to it.
std::string ScratchPgDatabase(std::string_view tag) {
  const std::string url = PgUrl();
  PGconn* c = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  const std::string db = "t_" + std::to_string(getpid()) + "_" + std::string(tag);
  PGresult* r = PQexec(c, ("CREATE DATABASE " + db).c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  return url.substr(0, url.rfind('/') + 1) + db;
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    root_ = TestDir("data");
    if (GetParam() == "postgres") {
      ASSERT_FALSE(PgUrl().empty())
          << "MATCHBOOK_PG_URL is not set: scripts/test.sh starts a throw-away PostgreSQL "
             "cluster (scripts/pg_cluster.sh) and sets it";
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  // A new, empty store of the backend under test.
  StoreOptions NewStoreOptions(std::string_view tag) {
    StoreOptions o;
    o.backend = GetParam();
    if (o.backend == "sqlite") {
      o.path = (root_ / ("p_" + std::string(tag) + ".sqlite")).string();
    } else if (o.backend == "rocksdb") {
      o.path = (root_ / ("h_" + std::string(tag))).string();
    } else {
      o.url = ScratchPgDatabase(tag);
    }
    return o;
  }
  std::unique_ptr<Store> Open(const StoreOptions& o, const EngineConfig& config) {
    auto s = OpenStore(o, config);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }

  fs::path root_;
};

std::vector<TableDump> DumpOf(Store* s) {
  auto d = s->Dump();
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : std::vector<TableDump>{};
}

std::size_t Rows(const std::vector<TableDump>& d, std::string_view table) {
  for (const TableDump& t : d) {
    if (t.table == table) return t.rows.size();
  }
  return 0;
}

// A read side started empty and given every record of the journal, one
// batch each, as the gateway is given them while they become durable.
void Feed(const JournalBuilder& j, marketdata::ReadSide* rs, marketdata::BatchOutput* out) {
  engine::Engine fresh(j.config);
  rs->Bootstrap(fresh.ExportImage());
  for (const EventBuffer& ev : j.records) rs->Apply(ev, out);
}

// ListRecord has no operator==: lists compare by their text.
std::string ListText(const ListRecord& l) {
  std::string s = std::to_string(l.id) + "|" + std::to_string(Raw(l.account)) + "|" +
                  std::to_string(Raw(l.market)) + "|" + std::to_string(Raw(l.type)) + "|" +
                  std::string(l.list_client_order_id.view());
  for (int k = 0; k < 3; ++k) {
    s += "|" + std::to_string(Raw(l.orders[k])) + ":" + std::string(l.client_ids[k].view());
  }
  return s + "|" + std::to_string(Raw(l.status)) + "|" + std::to_string(l.time_ns) + "|" +
         std::to_string(l.update_ns);
}

void ExpectSameRows(const std::vector<TableDump>& want, const std::vector<TableDump>& have) {
  std::vector<std::string> diffs;
  CompareDumps(want, have, 5, &diffs);
  EXPECT_TRUE(diffs.empty()) << [&] {
    std::string s;
    for (const auto& d : diffs) s += d + "\n";
    return s;
  }();
}

// ---- the tailer ------------------------------------------------------------

TEST(JournalTailTest, FollowsAGrowingJournalAcrossSegmentRolls) {
  const fs::path root = TestDir("tail");
  JournalBuilder j(root, 3, 16 << 10);
  journal::JournalTail tail(root, j.hash, 1);
  uint64_t expect = 1;
  auto check = [&](const journal::JournalRecord& r) -> Status {
    EXPECT_EQ(r.seq, expect);
    EventBuffer ev;
    MB_RETURN_IF_ERROR(journal::DecodeOutcome(r, &ev));
    EXPECT_EQ(ev.size(), j.records[r.seq - 1].size()) << r.seq;
    ++expect;
    return Status::Ok();
  };
  for (int round = 0; round < 20; ++round) {
    j.Run(150);
    // A limit below what is written: only up to it.
    const uint64_t limit = j.last_seq() - 10;
    for (;;) {
      auto n = tail.Read(limit, 37, check);
      ASSERT_TRUE(n.ok()) << n.status().message();
      if (*n == 0) break;
    }
    EXPECT_EQ(tail.next_seq(), limit + 1);
  }
  auto n = tail.Read(journal::JournalTail::kEverything, 1 << 20, check);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(tail.next_seq(), j.last_seq() + 1);
  auto segments = j.dir->ListSegments();
  ASSERT_TRUE(segments.ok());
  EXPECT_GT(segments->size(), 5u) << "the journal rolled several times";

  // Starting in the middle of a middle segment.
  journal::JournalTail mid(root, j.hash, 1234);
  expect = 1234;
  auto m = mid.Read(journal::JournalTail::kEverything, 10, check);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 10u);
  fs::remove_all(root);
}

TEST(JournalTailTest, TornTailEndsAnOfflineReadAndDamageInsideIsAnError) {
  const fs::path root = TestDir("torn");
  JournalBuilder j(root, 4, 1 << 20);
  j.Run(500);
  auto segments = j.dir->ListSegments();
  ASSERT_TRUE(segments.ok());
  const fs::path last = segments->back().path;
  {
    std::ofstream out(last, std::ios::binary | std::ios::app);
    out << "partial record bytes";
  }
  journal::JournalTail tail(root, j.hash, 1);
  auto all = tail.Read(journal::JournalTail::kEverything, 1 << 20,
                       [](const journal::JournalRecord&) { return Status::Ok(); });
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, j.last_seq());

  // Flip a payload byte of record ~100: within a durable limit, an error
  // naming the segment, never skipped.
  uint64_t offset = 0;
  journal::JournalTail find(root, j.hash, 100);
  ASSERT_TRUE(find.Read(100, 1,
                        [&](const journal::JournalRecord& r) {
                          offset = r.offset;
                          return Status::Ok();
                        })
                  .ok());
  {
    std::fstream f(last, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset + journal::kRecordHeaderSize + 2));
    f.put('\x7f');
  }
  journal::JournalTail again(root, j.hash, 1);
  auto bad =
      again.Read(j.last_seq(), 1 << 20, [](const journal::JournalRecord&) { return Status::Ok(); });
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find(last.filename().string()), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(again.next_seq(), 100u) << "everything before the damage was delivered";
  fs::remove_all(root);
}

// ---- projection on each backend --------------------------------------------

TEST_P(StoreTest, IncrementalWithRestartsEqualsRebuildAndVerifies) {
  JournalBuilder j(root_, 21);
  j.Run(3000);
  const StoreOptions inc = NewStoreOptions("inc");
  {
    // Batches of random sizes up to random limits, a new projector (a restart)
    // every few batches.
    bench::Rng rng(5);
    uint64_t limit = 0;
    while (limit < j.last_seq()) {
      auto store = Open(inc, j.config);
      ASSERT_NE(store, nullptr);
      ProjectorOptions po;
      po.batch_events = 1 + rng.Below(300);
      Projector p(root_, j.config, j.hash, store.get(), po);
      ASSERT_TRUE(p.Init().ok());
      limit = std::min(j.last_seq(), limit + 1 + rng.Below(700));
      const Status caught = p.CatchUp(limit);
      ASSERT_TRUE(caught.ok()) << static_cast<int>(caught.code()) << " [" << caught.message()
                               << "]";
      EXPECT_EQ(p.applied_seq(), limit);
    }
  }
  auto a = Open(inc, j.config);
  const StoreOptions full = NewStoreOptions("full");
  auto b = Open(full, j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, b.get()).ok());
  const auto da = DumpOf(a.get());
  ExpectSameRows(DumpOf(b.get()), da);
  EXPECT_GT(Rows(da, "trades"), 300u);
  EXPECT_GT(Rows(da, "orders"), 1000u);
  EXPECT_GT(Rows(da, "deposits"), 10u);
  EXPECT_GT(Rows(da, "withdrawals"), 10u);
  EXPECT_GT(Rows(da, "order_lists"), 50u);

  auto report = VerifyProjection(root_, j.config, a.get(), root_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->differences.front();
  EXPECT_EQ(report->applied_seq, j.last_seq());

  // A rebuild of the incremental store gives the same rows again.
  ASSERT_TRUE(Rebuild(root_, j.config, a.get()).ok());
  ExpectSameRows(da, DumpOf(a.get()));
}

TEST_P(StoreTest, VerifyFindsADifference) {
  JournalBuilder j(root_, 22);
  j.Run(800);
  const StoreOptions o = NewStoreOptions("v");
  auto s = Open(o, j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, s.get()).ok());
  // Another journal's batch committed on top: an extra trade row, the state unchanged.
  RowBatch extra;
  extra.trades.push_back(
      TradeRecord{999'999, 1, 0, engine::Side::kBuy, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0});
  auto state = s->State();
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE(s->Commit(extra, *state).ok());
  auto report = VerifyProjection(root_, j.config, s.get(), root_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_FALSE(report->ok());
  EXPECT_NE(report->differences.front().find("trades"), std::string::npos)
      << report->differences.front();

  // Behind the journal: a difference too.
  j.Run(10);
  report = VerifyProjection(root_, j.config, s.get(), root_);
  ASSERT_TRUE(report.ok());
  EXPECT_NE(report->differences.front().find("journal ends at"), std::string::npos);
}

TEST_P(StoreTest, HistoryAgreesWithTheReadSide) {
  JournalBuilder j(root_, 23);
  // The read side as the gateway ran it: every batch as it became durable.
  marketdata::ReadSideOptions ro;
  ro.history_orders = 1 << 20;
  ro.history_trades = 1 << 20;
  marketdata::ReadSide rs(j.config, ro);
  marketdata::BatchOutput out;
  Feed(j, &rs, &out);
  const std::size_t before = j.records.size();
  j.Run(4000);
  for (std::size_t i = before; i < j.records.size(); ++i) rs.Apply(j.records[i], &out);

  auto s = Open(NewStoreOptions("h"), j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, s.get()).ok());

  auto same_order = [](const OrderRecord& a, const OrderRecord& b) {
    return a.id == b.id && a.terms == b.terms && a.quote_qty == b.quote_qty &&
           a.executed == b.executed && a.cumulative_quote == b.cumulative_quote &&
           a.remaining == b.remaining && a.status == b.status &&
           a.expire_reason == b.expire_reason && a.client_order_id == b.client_order_id &&
           a.time_ns == b.time_ns && a.update_ns == b.update_ns && a.working == b.working &&
           a.stop_price == b.stop_price && a.trailing_delta == b.trailing_delta &&
           a.trailing_ns == b.trailing_ns && a.trigger_ns == b.trigger_ns &&
           a.iceberg_qty == b.iceberg_qty && a.list_id == b.list_id;
  };
  auto same_fill = [](const marketdata::Fill& a, const marketdata::Fill& b) {
    return a.trade_id == b.trade_id && a.order_id == b.order_id && a.account == b.account &&
           a.market == b.market && a.side == b.side && a.price == b.price && a.qty == b.qty &&
           a.base_qty == b.base_qty && a.notional == b.notional && a.commission == b.commission &&
           a.commission_asset == b.commission_asset && a.is_maker == b.is_maker &&
           a.time_ns == b.time_ns;
  };
  const int64_t mid_ms = j.records[j.records.size() / 2].front().timestamp_ns / 1'000'000;
  std::size_t orders_seen = 0;
  std::size_t fills_seen = 0;
  for (uint32_t a = 0; a <= workload::mixed::kTraders; ++a) {
    for (uint16_t m = 0; m < j.config.markets.size(); ++m) {
      const AccountId acc{a};
      const MarketId mkt{m};
      struct Filter {
        uint64_t from;
        int64_t start, end;
        std::size_t limit;
      };
      for (const Filter f :
           {Filter{0, 0, 0, 1 << 20}, Filter{0, 0, 0, 7},
            Filter{Raw(j.records[900].front().seq), 0, 0, 5}, Filter{0, mid_ms, 0, 9},
            Filter{0, 0, mid_ms, 4}, Filter{0, mid_ms - 600'000, mid_ms, 1000}}) {
        HistoryQuery q{a, m, 0, f.from, f.start, f.end, f.limit};
        const auto want = rs.AllOrders(acc, mkt, f.from, f.start, f.end, f.limit);
        auto have = s->AllOrders(q);
        ASSERT_TRUE(have.ok()) << have.status().message();
        ASSERT_EQ(have->size(), want.size()) << "account " << a << " market " << m;
        for (std::size_t i = 0; i < want.size(); ++i) {
          EXPECT_TRUE(same_order((*have)[i], want[i])) << "order " << Raw(want[i].id);
        }
        orders_seen += want.size();
        const auto want_fills = rs.MyTrades(acc, mkt, 0, f.from, f.start, f.end, f.limit);
        auto have_fills = s->MyTrades(q);
        ASSERT_TRUE(have_fills.ok()) << have_fills.status().message();
        ASSERT_EQ(have_fills->size(), want_fills.size()) << "account " << a << " market " << m;
        for (std::size_t i = 0; i < want_fills.size(); ++i) {
          EXPECT_TRUE(same_fill((*have_fills)[i], want_fills[i]))
              << "trade " << Raw(want_fills[i].trade_id);
        }
        fills_seen += want_fills.size();
      }
      // Every order by id and by client id; fills of one order.
      for (const OrderRecord& o : rs.AllOrders(acc, mkt, 0, 0, 0, 1 << 20)) {
        auto by_id = s->FindOrder(a, m, Raw(o.id));
        ASSERT_TRUE(by_id.ok() && by_id->has_value());
        EXPECT_TRUE(same_order(**by_id, o));
        if (!o.client_order_id.empty()) {
          const auto want = rs.FindOrderByClientId(acc, mkt, o.client_order_id.view());
          auto have = s->FindOrderByClientId(a, m, o.client_order_id.view());
          ASSERT_TRUE(have.ok());
          ASSERT_EQ(have->has_value(), want.has_value());
          if (want) {
            EXPECT_EQ((*have)->id, want->id);
          }
        }
        HistoryQuery q{a, m, Raw(o.id), 0, 0, 0, 1000};
        const auto want_fills = rs.MyTrades(acc, mkt, Raw(o.id), 0, 0, 0, 1000);
        auto have_fills = s->MyTrades(q);
        ASSERT_TRUE(have_fills.ok());
        EXPECT_EQ(have_fills->size(), want_fills.size());
      }
    }
  }
  EXPECT_GT(orders_seen, 1000u);
  EXPECT_GT(fills_seen, 300u);

  // Order lists, by the same filters (of every market at once), by id and by
  // list client id.
  const uint64_t mid_id = j.records.size() / 2;
  std::size_t lists_seen = 0, pending_seen = 0, iceberg_seen = 0;
  for (uint32_t a = 0; a <= workload::mixed::kTraders; ++a) {
    const AccountId acc{a};
    struct Filter {
      uint64_t from;
      int64_t start, end;
      std::size_t limit;
    };
    for (const Filter f : {Filter{0, 0, 0, 1 << 20}, Filter{0, 0, 0, 3}, Filter{mid_id, 0, 0, 4},
                           Filter{0, mid_ms, 0, 5}, Filter{0, 0, mid_ms, 2},
                           Filter{0, mid_ms - 6'000'000, mid_ms, 1000}}) {
      const auto want = rs.AllLists(acc, f.from, f.start, f.end, f.limit);
      auto have = s->AllOrderLists(HistoryQuery{a, 0, 0, f.from, f.start, f.end, f.limit});
      ASSERT_TRUE(have.ok()) << have.status().message();
      ASSERT_EQ(have->size(), want.size()) << "account " << a;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(ListText((*have)[i]), ListText(want[i]));
      }
      lists_seen += want.size();
    }
    for (const ListRecord& l : rs.AllLists(acc, 0, 0, 0, 1 << 20)) {
      auto by_id = s->FindOrderList(a, l.id);
      ASSERT_TRUE(by_id.ok() && by_id->has_value());
      EXPECT_EQ(ListText(**by_id), ListText(l));
      if (!l.list_client_order_id.empty()) {
        const auto want = rs.FindListByClientId(acc, l.list_client_order_id.view());
        auto have = s->FindOrderListByClientId(a, l.list_client_order_id.view());
        ASSERT_TRUE(want.has_value() && have.ok() && have->has_value());
        EXPECT_EQ(ListText(**have), ListText(*want));
      }
      auto other = s->FindOrderList(a + 1, l.id);  // another account's: none
      ASSERT_TRUE(other.ok());
      EXPECT_FALSE(other->has_value());
    }
    for (uint16_t m = 0; m < j.config.markets.size(); ++m) {
      for (const OrderRecord& o : rs.AllOrders(acc, MarketId{m}, 0, 0, 0, 1 << 20)) {
        if (o.list_id != 0 && Raw(o.id) >= engine::kListOrderStride) ++pending_seen;
        if (o.iceberg_qty.value != 0) ++iceberg_seen;
      }
    }
  }
  EXPECT_GT(lists_seen, 100u);
  EXPECT_GT(pending_seen, 20u);  // orders of lists after the first (OCO, OTO, OTOCO)
  EXPECT_GT(iceberg_seen, 5u);
  auto none = s->FindOrder(1, 0, 1ull << 40);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// A MARKET buy by quote amount that spent its budget is FILLED in the order
// row and its last report; an amend's new client order id is the order's.
TEST_P(StoreTest, BudgetSpentIsFilledAndAnAmendedIdIsTheOrders) {
  JournalBuilder j(root_, 29);
  using engine::OrderType;
  using engine::Side;
  using engine::TimeInForce;
  const MarketId btc = workload::mixed::kBtcUsdt;
  const int64_t t = j.records.back().front().timestamp_ns + 1'000'000;
  j.Process(workload::Place(t, AccountId{1}, btc, Side::kSell, OrderType::kLimit, TimeInForce::kGtc,
                            1000, 10));
  j.Process(workload::Place(t, AccountId{1}, btc, Side::kSell, OrderType::kLimit, TimeInForce::kGtc,
                            2000, 5));
  j.Process(workload::Place(t, AccountId{2}, btc, Side::kBuy, OrderType::kMarket, TimeInForce::kIoc,
                            0, 0, "q1", engine::StpMode::kNone, 10'500));
  const uint64_t q = j.last_seq();
  ASSERT_EQ(j.records.back().size(), 3u);
  const auto* x = std::get_if<engine::OrderExpired>(&j.records.back().back().body);
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->reason, engine::ExpireReason::kQuoteBudgetSpent);
  j.Process(workload::Place(t, AccountId{1}, btc, Side::kSell, OrderType::kLimit, TimeInForce::kGtc,
                            3000, 5, "old"));
  const uint64_t s_id = j.last_seq();
  j.Flush();
  // The order is stored by one batch, renamed by an amend in the next.
  auto s = Open(NewStoreOptions("f"), j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, s.get()).ok());
  Command am = workload::Amend(t, AccountId{1}, btc, OrderId{s_id}, 0, 3);
  std::get<engine::AmendOrder>(am.body).new_client_order_id = ClientOrderId::From("new");
  j.Process(am);
  j.Flush();
  {
    Projector p(root_, j.config, j.hash, s.get());
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
  }
  auto o = s->FindOrder(2, Raw(btc), q);
  ASSERT_TRUE(o.ok() && o->has_value());
  EXPECT_EQ((*o)->status, marketdata::OrderStatus::kFilled);
  EXPECT_EQ((*o)->executed, Qty{10});
  EXPECT_EQ((*o)->remaining, Qty{0});
  auto renamed = s->FindOrderByClientId(1, Raw(btc), "new");
  ASSERT_TRUE(renamed.ok() && renamed->has_value());
  EXPECT_EQ(Raw((*renamed)->id), s_id);
  EXPECT_EQ((*renamed)->client_order_id.view(), "new");
  EXPECT_EQ((*renamed)->terms.qty, Qty{3});
  auto old = s->FindOrderByClientId(1, Raw(btc), "old");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->has_value());
}

// Conditional orders: their stop price and trailing delta, when a trailing
// stop began tracking and when each was triggered are in the order rows, as
// the read side holds them; the trigger is reported NEW again; a projection
// resumed after a restart (seeded from the store's open orders) still sees a
// waiting trailing stop begin tracking, and equals a rebuild.
TEST_P(StoreTest, ConditionalOrdersKeepTheirStopAndTriggerTimes) {
  JournalBuilder j(root_, 31);
  using engine::OrderType;
  using engine::Side;
  using engine::TimeInForce;
  const MarketId btc = workload::mixed::kBtcUsdt;
  int64_t t = j.records.back().front().timestamp_ns + 1'000'000;
  auto place = [&](uint32_t account, Side side, OrderType type, int64_t price, int64_t qty,
                   int64_t stop = 0, int32_t delta = 0) {
    t += 1'000'000;
    Command c =
        workload::Place(t, AccountId{account}, btc, side, type, TimeInForce::kGtc, price, qty);
    auto& p = std::get<engine::PlaceOrder>(c.body);
    p.stop_price = Price{stop};
    p.trailing_delta = delta;
    j.Process(c);
    for (const Event& e : j.records.back()) {
      EXPECT_EQ(e.type() == engine::EventType::kRejected, false) << "record " << j.last_seq();
    }
    return j.last_seq();
  };
  place(1, Side::kSell, OrderType::kLimit, 1000, 1);
  place(2, Side::kBuy, OrderType::kLimit, 1000, 1);  // last price 1000
  const uint64_t stop = place(3, Side::kSell, OrderType::kStopLossLimit, 900, 2, 950);
  const uint64_t trail = place(3, Side::kSell, OrderType::kTakeProfitLimit, 1000, 1, 1100, 100);
  place(2, Side::kBuy, OrderType::kLimit, 900, 5);
  const uint64_t through = place(1, Side::kSell, OrderType::kLimit, 900, 1);  // 900: stop met
  const int64_t stop_ns = j.records.back().front().timestamp_ns;
  j.Flush();

  // Part of the journal projected, then the rest by a projector that starts
  // again from the store (Seed).
  auto s = Open(NewStoreOptions("c"), j.config);
  {
    Projector p(root_, j.config, j.hash, s.get());
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
  }
  auto waiting = s->FindOrder(3, Raw(btc), trail);
  ASSERT_TRUE(waiting.ok() && waiting->has_value());
  EXPECT_EQ((*waiting)->stop_price, Price{1100});
  EXPECT_EQ((*waiting)->trailing_delta, 100);
  EXPECT_EQ((*waiting)->trailing_ns, 0);
  EXPECT_EQ((*waiting)->trigger_ns, 0);
  EXPECT_TRUE(marketdata::Waiting(**waiting));

  place(1, Side::kSell, OrderType::kLimit, 1100, 1);
  const uint64_t activation = place(2, Side::kBuy, OrderType::kLimit, 1100, 1);  // tracks
  const int64_t activation_ns = j.records.back().front().timestamp_ns;
  place(1, Side::kSell, OrderType::kLimit, 1080, 1);
  place(2, Side::kBuy, OrderType::kLimit, 1080, 1);  // 1080 <= 1100 x 0.99: triggered
  const int64_t trail_ns = j.records.back().front().timestamp_ns;
  j.Flush();
  {
    Projector p(root_, j.config, j.hash, s.get());
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
  }

  auto o = s->FindOrder(3, Raw(btc), stop);
  ASSERT_TRUE(o.ok() && o->has_value());
  EXPECT_EQ((*o)->terms.type, OrderType::kStopLossLimit);
  EXPECT_EQ((*o)->stop_price, Price{950});
  EXPECT_EQ((*o)->trailing_delta, 0);
  EXPECT_EQ((*o)->trigger_ns, stop_ns);
  EXPECT_EQ((*o)->status, marketdata::OrderStatus::kFilled);
  EXPECT_EQ(marketdata::WorkingNs(**o), std::optional<int64_t>(stop_ns));
  auto tr = s->FindOrder(3, Raw(btc), trail);
  ASSERT_TRUE(tr.ok() && tr->has_value());
  EXPECT_EQ((*tr)->trailing_ns, activation_ns);
  EXPECT_EQ((*tr)->trigger_ns, trail_ns);
  EXPECT_EQ((*tr)->status, marketdata::OrderStatus::kNew);  // rests at 1000
  EXPECT_TRUE((*tr)->working);
  EXPECT_FALSE(marketdata::Waiting(**tr));
  EXPECT_GT(activation, through);

  // The read side agrees, field by field.
  marketdata::ReadSide rs(j.config);
  {
    engine::Engine fresh(j.config);
    rs.Bootstrap(fresh.ExportImage());
  }
  marketdata::BatchOutput out;
  for (const EventBuffer& ev : j.records) rs.Apply(ev, &out);
  for (const uint64_t id : {stop, trail}) {
    const auto want = rs.FindOrder(AccountId{3}, btc, OrderId{id});
    auto have = s->FindOrder(3, Raw(btc), id);
    ASSERT_TRUE(want.has_value() && have.ok() && have->has_value());
    EXPECT_EQ((*have)->stop_price, want->stop_price);
    EXPECT_EQ((*have)->trailing_delta, want->trailing_delta);
    EXPECT_EQ((*have)->trailing_ns, want->trailing_ns);
    EXPECT_EQ((*have)->trigger_ns, want->trigger_ns);
    EXPECT_EQ((*have)->update_ns, want->update_ns);
    EXPECT_EQ((*have)->status, want->status);
  }

  // A rebuild from the journal gives the same rows, with each trigger
  // reported NEW a second time.
  auto r = Open(NewStoreOptions("cr"), j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, r.get()).ok());
  ExpectSameRows(DumpOf(r.get()), DumpOf(s.get()));
  RowBuilder b(j.config);
  RowBatch batch;
  for (std::size_t i = 0; i < j.records.size(); ++i) {
    b.AddRecord(i + 1, 0, j.records[i], &batch);
  }
  b.Finish(&batch);
  std::size_t news = 0;
  for (const OrderEventRow& e : batch.order_events) {
    if (e.order_id == stop && e.exec_type == ExecType::kNew) ++news;
  }
  EXPECT_EQ(news, 2u);
}

TEST_P(StoreTest, RefusesAProjectionOfAnotherJournal) {
  const fs::path other = TestDir("other");
  JournalBuilder j(root_, 24);
  j.Run(600);
  JournalBuilder k(other, 25);  // same configuration, other history
  k.Run(900);
  const StoreOptions o = NewStoreOptions("x");
  auto s = Open(o, j.config);
  ASSERT_TRUE(Rebuild(other, k.config, s.get()).ok());
  // Ahead of this journal.
  Projector p(root_, j.config, j.hash, s.get());
  Status st = p.Init();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another data directory"), std::string::npos) << st.message();
  // Not ahead, but another journal's record at the applied sequence.
  j.Run(600);
  Projector q(root_, j.config, j.hash, s.get());
  st = q.Init();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another data directory"), std::string::npos) << st.message();
  // Another configuration.
  EngineConfig changed = j.config;
  changed.markets[0].maker_fee_bps += 1;
  ASSERT_TRUE(changed.Validate().ok());
  Projector r(other, changed, engine::HashConfig(changed), s.get());
  st = r.Init();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another configuration"), std::string::npos) << st.message();
  // Nothing was written by the refusals.
  auto state = s->State();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->applied_seq, k.last_seq());
  fs::remove_all(other);
}

// A store inside the data directory (rebuild_when_diverged, the history
// store's setting) that no longer matches its journal — the journal's
// unacknowledged suffix discarded and other records written after the
// divergence point, or the configuration changed — is built again from the
// journal, and ends equal to a rebuild; the refusal stays for the others.
TEST_P(StoreTest, AStoreOfADivergedJournalIsBuiltAgainWhenAsked) {
  const fs::path fork = TestDir("fork");
  JournalBuilder j(root_, 26);
  j.Run(900);
  const StoreOptions o = NewStoreOptions("d");
  auto s = Open(o, j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, s.get()).ok());
  // The same commands up to record 600, then others: a journal whose last
  // records were discarded and other ones written after the divergence point.
  JournalBuilder k(fork, 26);
  k.Run(600);
  workload::MixedCommands other(99, &k.engine, workload::MixedOptions{.order_lists = true});
  for (int i = 0; i < 500; ++i) k.Process(other.Next());
  k.Flush();
  ProjectorOptions refuse;
  Projector p(fork, k.config, k.hash, s.get(), refuse);
  Status st = p.Init();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another data directory"), std::string::npos) << st.message();

  ProjectorOptions rebuild;
  rebuild.rebuild_when_diverged = true;
  Projector q(fork, k.config, k.hash, s.get(), rebuild);
  ASSERT_TRUE(q.Init().ok());
  const Status caught = q.CatchUp();
  ASSERT_TRUE(caught.ok()) << caught.message();
  EXPECT_EQ(q.applied_seq(), k.last_seq());
  auto report = VerifyProjection(fork, k.config, s.get(), fork);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->differences.front();

  // Another configuration: built again for it too.
  EngineConfig changed = k.config;
  changed.markets[0].maker_fee_bps += 1;
  ASSERT_TRUE(changed.Validate().ok());
  Projector r(fork, changed, engine::HashConfig(changed), s.get(), rebuild);
  st = r.Init();
  EXPECT_TRUE(st.ok()) << st.message();
  auto state = s->State();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->applied_seq, 0u) << "emptied, to be built for the new configuration";
  fs::remove_all(fork);
}

// Kills the projector (a child process) at random points; each restart
// resumes from the committed sequence. The result equals a rebuild.
TEST_P(StoreTest, ExactlyOnceWhenTheProjectorIsKilledAtRandomPoints) {
#if defined(__SANITIZE_THREAD__)
  if (GetParam() == "rocksdb") {
    GTEST_SKIP() << "the child forked here starts RocksDB's threads while the parent's exist; "
                    "ThreadSanitizer cannot follow that (the ASan and release runs test it)";
  }
#endif
  JournalBuilder j(root_, 26);
  j.Run(6000);
  const StoreOptions o = NewStoreOptions("kill");
  { ASSERT_NE(Open(o, j.config), nullptr); }  // schema created once, before the kills
  bench::Rng rng(77);
  int killed = 0;
  for (int round = 0; round < 12; ++round) {
    const std::size_t batch = 1 + rng.Below(400);
    const auto delay = std::chrono::microseconds(rng.Below(40'000));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto s = OpenStore(o, j.config);
      if (!s.ok()) _exit(2);
      ProjectorOptions po;
      po.batch_events = batch;
      Projector p(root_, j.config, j.hash, s->get(), po);
      if (!p.Init().ok() || !p.CatchUp().ok()) _exit(3);
      _exit(0);
    }
    std::this_thread::sleep_for(delay);
    if (kill(pid, SIGKILL) == 0) ++killed;
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0);
    }
  }
  EXPECT_GT(killed, 3);
  auto s = Open(o, j.config);
  {
    auto state = s->State();
    ASSERT_TRUE(state.ok());
    Projector p(root_, j.config, j.hash, s.get());
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
  }
  auto report = VerifyProjection(root_, j.config, s.get(), root_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->differences.front();
}

// ---- transfers to other venues ------------------------------------------------

// Events of one record at `seconds` s, through a RowBuilder into *batch.
struct TransferRecords {
  EngineConfig config = workload::MixedConfig();
  RowBuilder builder{config};
  uint64_t seq = 0;

  template <class... Body>
  void Add(RowBatch* batch, int64_t seconds, const Body&... bodies) {
    ++seq;
    const int64_t ts = seconds * 1'000'000'000;
    std::vector<Event> events;
    (events.emplace_back(Sequence{seq}, ts, bodies), ...);
    builder.AddRecord(seq, seq * 11, events, batch);
  }
  Status Commit(Store* s, RowBatch* batch) {
    builder.Finish(batch);
    Status st = s->Commit(
        *batch, ProjectorState{batch->last_seq, batch->last_checksum, 1, batch->last_time_ns});
    batch->Clear();
    return st;
  }
  engine::TransferHeld Held(uint32_t account, uint16_t asset, int64_t amount, int64_t fee,
                            std::string_view ref, std::string_view address) const {
    return engine::TransferHeld{TransferId{seq + 1},
                                AccountId{account},
                                AssetId{asset},
                                Amount{amount},
                                Amount{fee},
                                TransferRef::From(ref),
                                TransferAddress::From(address)};
  }
  engine::Deposited Deposit(uint32_t account, uint16_t asset, int64_t amount,
                            std::string_view ref) const {
    return engine::Deposited{TransferId{seq + 1}, AccountId{account}, AssetId{asset},
                             Amount{amount}, TransferRef::From(ref)};
  }
};

std::vector<uint64_t> Ids(const Result<std::vector<WithdrawalRow>>& r) {
  std::vector<uint64_t> out;
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) {
    for (const WithdrawalRow& w : *r) out.push_back(w.held.transfer_id);
  }
  return out;
}
std::vector<uint64_t> Ids(const Result<std::vector<TransferRow>>& r) {
  std::vector<uint64_t> out;
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) {
    for (const TransferRow& t : *r) out.push_back(t.transfer_id);
  }
  return out;
}
using IdList = std::vector<uint64_t>;

// Held transfers are pending until a resolution row (in a later batch) says
// completed or refunded; the queries filter by account, asset, state and time
// (ms, both ends inclusive), newest first, with offset and limit.
TEST_P(StoreTest, WithdrawalsAndDepositsAnswerTheirFilters) {
  auto s = Open(NewStoreOptions("t"), workload::MixedConfig());
  ASSERT_NE(s, nullptr);
  TransferRecords r;
  RowBatch b;
  // Record n is at n seconds; a transfer's id is its record's sequence.
  r.Add(&b, 1, r.Deposit(1, 1, 9'000, "d1"));
  r.Add(&b, 2, r.Held(1, 1, 500, 5, "w2", "addr-2"));
  r.Add(&b, 3, r.Held(1, 0, 70, 0, "w|3\t\\x", "tab\taddr\nline"));
  r.Add(&b, 4, r.Held(2, 1, 40, 1, "w4", "addr-4"));
  ASSERT_TRUE(r.Commit(s.get(), &b).ok());
  auto pending = s->Withdrawals({});
  ASSERT_TRUE(pending.ok()) << pending.status().message();
  ASSERT_EQ(pending->size(), 3u);
  for (const WithdrawalRow& w : *pending) {
    EXPECT_EQ(w.state, TransferState::kPending) << w.held.transfer_id;
    EXPECT_EQ(w.resolved_ns, 0);
  }
  r.Add(&b, 5,
        engine::TransferCompleted{TransferId{2}, AccountId{1}, AssetId{1}, Amount{500}, Amount{5}});
  r.Add(&b, 6,
        engine::TransferRefunded{TransferId{4}, AccountId{2}, AssetId{1}, Amount{40},
                                 engine::RefundReason::kInvalidAddress});
  r.Add(&b, 7, r.Held(1, 1, 60, 2, "w7", "addr-7"));
  r.Add(&b, 8, r.Deposit(2, 1, 100, "d8"));
  r.Add(&b, 9, r.Deposit(1, 0, 3, "d9"));
  ASSERT_TRUE(r.Commit(s.get(), &b).ok());

  // Every field, newest first.
  auto all = s->Withdrawals({});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(Ids(all), (IdList{7, 4, 3, 2}));
  const WithdrawalRow& w7 = (*all)[0];
  EXPECT_EQ(w7.held, (TransferOutRow{7, 1, 1, 60, 2, "w7", "addr-7", 7'000'000'000}));
  EXPECT_EQ(w7.state, TransferState::kPending);
  const WithdrawalRow& w4 = (*all)[1];
  EXPECT_EQ(w4.held, (TransferOutRow{4, 2, 1, 40, 1, "w4", "addr-4", 4'000'000'000}));
  EXPECT_EQ(w4.state, TransferState::kRefunded);
  EXPECT_EQ(w4.reason, engine::RefundReason::kInvalidAddress);
  EXPECT_EQ(w4.resolved_ns, 6'000'000'000);
  const WithdrawalRow& w3 = (*all)[2];
  EXPECT_EQ(w3.held,
            (TransferOutRow{3, 1, 0, 70, 0, "w|3\t\\x", "tab\taddr\nline", 3'000'000'000}));
  EXPECT_EQ(w3.state, TransferState::kPending);
  EXPECT_EQ(w3.resolved_ns, 0);
  const WithdrawalRow& w2 = (*all)[3];
  EXPECT_EQ(w2.state, TransferState::kCompleted);
  EXPECT_EQ(w2.resolved_ns, 5'000'000'000);
  EXPECT_EQ(w2.held.fee, 5);

  // Filters.
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1})), (IdList{7, 3, 2}));
  EXPECT_EQ(Ids(s->Withdrawals({.account = 2})), (IdList{4}));
  EXPECT_EQ(Ids(s->Withdrawals({.account = 3})), IdList{});
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1, .asset = 1})), (IdList{7, 2}));
  EXPECT_EQ(Ids(s->Withdrawals({.asset = 1})), (IdList{7, 4, 2}));
  EXPECT_EQ(Ids(s->Withdrawals({.state = TransferState::kPending})), (IdList{7, 3}));
  EXPECT_EQ(Ids(s->Withdrawals({.state = TransferState::kCompleted})), (IdList{2}));
  EXPECT_EQ(Ids(s->Withdrawals({.state = TransferState::kRefunded})), (IdList{4}));
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1, .state = TransferState::kRefunded})), IdList{});
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1, .asset = 1, .state = TransferState::kPending})),
            (IdList{7}));
  EXPECT_EQ(Ids(s->Withdrawals({.start_ms = 3000, .end_ms = 4000})), (IdList{4, 3}));
  EXPECT_EQ(Ids(s->Withdrawals({.start_ms = 3001, .end_ms = 3999})), IdList{});
  EXPECT_EQ(Ids(s->Withdrawals({.start_ms = 4000})), (IdList{7, 4}));
  EXPECT_EQ(Ids(s->Withdrawals({.end_ms = 2000})), (IdList{2}));
  EXPECT_EQ(Ids(s->Withdrawals({.offset = 1, .limit = 2})), (IdList{4, 3}));
  EXPECT_EQ(Ids(s->Withdrawals({.limit = 1})), (IdList{7}));
  EXPECT_EQ(Ids(s->Withdrawals({.offset = 4})), IdList{});
  EXPECT_EQ(Ids(s->Withdrawals({.limit = 0})), IdList{});
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1, .offset = 1, .limit = 1})), (IdList{3}));

  // One by id or by reference, of that account only.
  auto by_id = s->FindWithdrawal(1, 2, "");
  ASSERT_TRUE(by_id.ok() && by_id->has_value());
  EXPECT_EQ(**by_id, w2);
  auto by_ref = s->FindWithdrawal(1, 0, "w|3\t\\x");
  ASSERT_TRUE(by_ref.ok() && by_ref->has_value());
  EXPECT_EQ(**by_ref, w3);
  auto refunded = s->FindWithdrawal(2, 0, "w4");
  ASSERT_TRUE(refunded.ok() && refunded->has_value());
  EXPECT_EQ(**refunded, w4);
  for (auto [account, id, ref] : {std::tuple<uint32_t, uint64_t, std::string_view>{2, 2, ""},
                                  {1, 4, ""},
                                  {1, 99, ""},
                                  {1, 1, ""},  // a deposit's id
                                  {2, 0, "w7"},
                                  {1, 0, "nope"},
                                  {1, 0, "d1"}}) {
    auto none = s->FindWithdrawal(account, id, ref);
    ASSERT_TRUE(none.ok()) << none.status().message();
    EXPECT_FALSE(none->has_value()) << account << " " << id << " " << ref;
  }

  // Deposits: the same filters (no state).
  auto deposits = s->Deposits({});
  ASSERT_TRUE(deposits.ok()) << deposits.status().message();
  ASSERT_EQ(Ids(deposits), (IdList{9, 8, 1}));
  EXPECT_EQ((*deposits)[2], (TransferRow{1, 1, 1, 9'000, "d1", 1'000'000'000}));
  EXPECT_EQ(Ids(s->Deposits({.account = 1})), (IdList{9, 1}));
  EXPECT_EQ(Ids(s->Deposits({.account = 1, .asset = 0})), (IdList{9}));
  EXPECT_EQ(Ids(s->Deposits({.asset = 1})), (IdList{8, 1}));
  EXPECT_EQ(Ids(s->Deposits({.state = TransferState::kPending})), (IdList{9, 8, 1}));
  EXPECT_EQ(Ids(s->Deposits({.start_ms = 1000, .end_ms = 8000})), (IdList{8, 1}));
  EXPECT_EQ(Ids(s->Deposits({.offset = 1, .limit = 1})), (IdList{8}));
  EXPECT_EQ(Ids(s->Deposits({.account = 5})), IdList{});

  // Counted and dumped like every table.
  auto totals = s->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status().message();
  EXPECT_EQ(totals->transfers_out, 4u);
  EXPECT_EQ(totals->transfers_resolved, 2u);
  EXPECT_EQ(totals->deposits, 3u);
  const std::vector<TableDump> dump = DumpOf(s.get());
  EXPECT_EQ(Rows(dump, "transfers_out"), 4u);
  EXPECT_EQ(Rows(dump, "transfers_resolved"), 2u);
  ASSERT_TRUE(s->Reset().ok());
  EXPECT_EQ(Ids(s->Withdrawals({})), IdList{});
  auto emptied = s->Totals();
  ASSERT_TRUE(emptied.ok());
  EXPECT_EQ(emptied->transfers_out + emptied->transfers_resolved, 0u);
}

// Transfers out of a real engine's journal: projected, rebuilt row for row,
// verified against a replay, and the held funds' ledger lines are there.
TEST_P(StoreTest, TransfersFromTheJournalVerify) {
  JournalBuilder j(root_, 31);
  j.Run(300);
  const int64_t t = j.records.back().front().timestamp_ns + 1'000'000;
  auto out = [&](uint32_t account, int64_t amount, std::string_view ref) {
    j.Process(Command{t, engine::TransferOut{AccountId{account}, workload::mixed::kUsdt,
                                             Amount{amount}, Amount{1}, TransferRef::From(ref),
                                             TransferAddress::From("venue-b:acct")}});
    EXPECT_TRUE(std::holds_alternative<engine::TransferHeld>(j.records.back().front().body)) << ref;
    return j.last_seq();
  };
  const uint64_t a = out(1, 100, "a");
  const uint64_t b = out(1, 200, "b");
  const uint64_t c = out(2, 300, "c");
  j.Process(Command{t + 1'000'000, engine::ResolveTransfer{TransferId{a}, true}});
  j.Process(Command{
      t + 2'000'000,
      engine::ResolveTransfer{TransferId{c}, false, engine::RefundReason::kAccountUnavailable}});
  j.Flush();

  const StoreOptions o = NewStoreOptions("j");
  auto s = Open(o, j.config);
  // Incrementally, in small batches, then compared with a rebuild.
  {
    ProjectorOptions po;
    po.batch_events = 7;
    Projector p(root_, j.config, j.hash, s.get(), po);
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
  }
  auto report = VerifyProjection(root_, j.config, s.get(), root_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->differences.front();
  EXPECT_EQ(report->totals.transfers_out, 3u);
  EXPECT_EQ(report->totals.transfers_resolved, 2u);

  EXPECT_EQ(Ids(s->Withdrawals({.account = 1})), (IdList{b, a}));
  auto wa = s->FindWithdrawal(1, 0, "a");
  ASSERT_TRUE(wa.ok() && wa->has_value());
  EXPECT_EQ((*wa)->state, TransferState::kCompleted);
  EXPECT_EQ((*wa)->held.amount, 100);
  EXPECT_EQ((*wa)->held.address, "venue-b:acct");
  EXPECT_EQ((*wa)->resolved_ns, t + 1'000'000);
  auto wb = s->FindWithdrawal(1, b, "");
  ASSERT_TRUE(wb.ok() && wb->has_value());
  EXPECT_EQ((*wb)->state, TransferState::kPending);
  auto wc = s->FindWithdrawal(2, c, "");
  ASSERT_TRUE(wc.ok() && wc->has_value());
  EXPECT_EQ((*wc)->state, TransferState::kRefunded);
  EXPECT_EQ((*wc)->reason, engine::RefundReason::kAccountUnavailable);
  auto held_lines = s->Ledger({.account = 1, .from_seq = b, .limit = 2});
  ASSERT_TRUE(held_lines.ok());
  ASSERT_EQ(held_lines->size(), 2u);  // available -> held
  EXPECT_EQ((*held_lines)[0].bucket, engine::Bucket::kAvailable);
  EXPECT_EQ((*held_lines)[0].delta, -200);
  EXPECT_EQ((*held_lines)[1].bucket, engine::Bucket::kHeld);
  EXPECT_EQ((*held_lines)[1].delta, 200);
  EXPECT_EQ((*held_lines)[1].ref, b);

  // A pending transfer the journal does not have is a difference.
  auto state = s->State();
  ASSERT_TRUE(state.ok());
  RowBatch extra;
  extra.transfers_out = {TransferOutRow{c + 100, 1, 0, 5, 0, "x", "y", t}};
  ASSERT_TRUE(s->Commit(extra, *state).ok());
  auto bad = VerifyProjection(root_, j.config, s.get(), root_);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_FALSE(bad->ok());
  EXPECT_TRUE(std::any_of(bad->differences.begin(), bad->differences.end(), [](const auto& d) {
    return d.find("pending transfers to other venues") != std::string::npos;
  }));
}

// A database a version-1 build wrote (its rows kept) is migrated to the
// current schema when opened, and then takes transfers; its orders read back
// with no stop price.
TEST_P(StoreTest, AVersionOneDatabaseMigrates) {
  static_assert(kSchemaVersion == 4);
  if (GetParam() == "rocksdb") GTEST_SKIP() << "SQL schema migrations";
  const StoreOptions o = NewStoreOptions("v1");
  const Migration& v1 = Migrations()[0];
  ASSERT_EQ(v1.version, 1);
  std::vector<std::string> sql = {
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL)"};
  for (std::string& st :
       Statements(v1, o.backend == "sqlite" ? Dialect::kSqlite : Dialect::kPostgres)) {
    sql.push_back(std::move(st));
  }
  sql.push_back("INSERT INTO schema_migrations VALUES (1, '" + std::string(v1.description) + "')");
  sql.push_back("INSERT INTO deposits VALUES (5, 1, 1, 700, 'old', 5000000000)");
  sql.push_back(
      "INSERT INTO orders VALUES (4, 1, 0, 1, 0, 0, 0, 650, 3, 0, 0, 0, 3, 0, 0, 1, 'old-order', "
      "4000000000, 4000000000, 4, 4)");
  sql.push_back("UPDATE projector_state SET applied_seq = 5, applied_time_ns = 5000000000");
  // The one value a query of this backend answers.
  std::function<std::string(const std::string&)> value;
  if (o.backend == "sqlite") {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    for (const std::string& st : sql) {
      ASSERT_EQ(sqlite3_exec(db, st.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
          << st << ": " << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
    value = [path = o.path](const std::string& q) {
      sqlite3* conn = nullptr;
      std::string out = "<error>";
      if (sqlite3_open(path.c_str(), &conn) == SQLITE_OK) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(conn, q.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
          out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        }
        sqlite3_finalize(stmt);
      }
      sqlite3_close(conn);
      return out;
    };
  } else {
    PGconn* c = PQconnectdb(o.url.c_str());
    ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    for (const std::string& st : sql) {
      PGresult* res = PQexec(c, st.c_str());
      EXPECT_EQ(PQresultStatus(res), PGRES_COMMAND_OK) << st << ": " << PQerrorMessage(c);
      PQclear(res);
    }
    PQfinish(c);
    value = [url = o.url](const std::string& q) {
      PGconn* conn = PQconnectdb(url.c_str());
      std::string out = "<error>";
      PGresult* res = PQexec(conn, q.c_str());
      if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        out = PQgetvalue(res, 0, 0);
      }
      PQclear(res);
      PQfinish(conn);
      return out;
    };
  }
  ASSERT_EQ(value("SELECT MAX(version) FROM schema_migrations"), "1");

  auto s = Open(o, workload::MixedConfig());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(value("SELECT MAX(version) FROM schema_migrations"), "4");
  EXPECT_EQ(value("SELECT description FROM schema_migrations WHERE version = 2"),
            std::string(Migrations()[1].description));
  EXPECT_EQ(value("SELECT description FROM schema_migrations WHERE version = 3"),
            std::string(Migrations()[2].description));
  auto old_order = s->FindOrder(1, 0, 4);
  ASSERT_TRUE(old_order.ok());
  ASSERT_TRUE(old_order->has_value());
  EXPECT_EQ((*old_order)->client_order_id.view(), "old-order");
  EXPECT_EQ((*old_order)->terms.price, Price{650});
  EXPECT_EQ((*old_order)->stop_price, Price{0});
  EXPECT_EQ((*old_order)->trailing_delta, 0);
  EXPECT_EQ((*old_order)->trigger_ns, 0);
  auto state = s->State();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->applied_seq, 5u);
  EXPECT_EQ(Ids(s->Deposits({.account = 1})), (IdList{5}));
  EXPECT_EQ(Ids(s->Withdrawals({})), IdList{});

  RowBatch b;
  b.first_seq = b.last_seq = 6;
  b.last_time_ns = 6'000'000'000;
  b.events = 1;
  b.transfers_out = {TransferOutRow{6, 1, 1, 50, 1, "new", "addr", 6'000'000'000}};
  ASSERT_TRUE(s->Commit(b, ProjectorState{6, 0, 0, b.last_time_ns}).ok());
  EXPECT_EQ(Ids(s->Withdrawals({.account = 1})), (IdList{6}));
  s.reset();
  // Opened again: nothing left to migrate.
  ASSERT_NE(Open(o, workload::MixedConfig()), nullptr);
  EXPECT_EQ(value("SELECT COUNT(*) FROM schema_migrations"), "4");
}

// ---- order lists ---------------------------------------------------------------

engine::ListOrder Leg(engine::Side side, engine::OrderType type, int64_t qty, int64_t price,
                      std::string_view cid, int64_t stop = 0, int64_t iceberg = 0) {
  engine::ListOrder o;
  o.side = side;
  o.type = type;
  o.tif = engine::IsMarketLike(type) ? engine::TimeInForce::kIoc : engine::TimeInForce::kGtc;
  o.qty = Qty{qty};
  o.price = Price{price};
  o.stop_price = Price{stop};
  o.iceberg_qty = Qty{iceberg};
  o.client_order_id = ClientOrderId::From(cid);
  return o;
}

// An OCO and three OTO lists through a real engine, projected in three runs
// (a restart after each: the builder is seeded from the store's open orders
// and lists): the lists' rows (ids, client ids, status, times), their
// orders' list id and iceberg slice, a pending order PENDING_NEW until its
// working order fills, then NEW (placed then), CANCELED when its working
// order is canceled and REJECTED when it can no longer be placed; the list
// queries by id, by list client id and by filter; and the whole equals a
// rebuild and the read side.
TEST_P(StoreTest, OrderListsAndTheirPendingOrders) {
  JournalBuilder j(root_, 41);
  using engine::OrderType;
  using engine::Side;
  using engine::TimeInForce;
  using marketdata::OrderStatus;
  const MarketId btc = workload::mixed::kBtcUsdt;
  constexpr uint64_t kStride = engine::kListOrderStride;
  int64_t t = j.records.back().front().timestamp_ns + 1'000'000'000;
  // Runs a command at the next second; its sequence.
  auto run = [&](const Command& c, bool refused = false) {
    j.Process(c);
    bool rejected = false;
    for (const Event& e : j.records.back()) {
      rejected = rejected || e.type() == engine::EventType::kRejected;
    }
    EXPECT_EQ(rejected, refused) << "record " << j.last_seq();
    return j.last_seq();
  };
  auto limit = [&](uint32_t account, Side side, int64_t price, int64_t qty) {
    t += 1'000'000'000;
    return run(workload::Place(t, AccountId{account}, btc, side, OrderType::kLimit,
                               TimeInForce::kGtc, price, qty));
  };
  auto list = [&](uint32_t account, engine::ListType type, std::string_view cid,
                  std::vector<engine::ListOrder> orders) {
    t += 1'000'000'000;
    engine::PlaceOrderList l;
    l.account = AccountId{account};
    l.market = btc;
    l.type = type;
    l.list_client_order_id = ClientOrderId::From(cid);
    for (std::size_t k = 0; k < orders.size(); ++k) l.orders[k] = orders[k];
    return run(Command{t, l});
  };
  auto time_of = [&](uint64_t seq) { return j.records[seq - 1].front().timestamp_ns; };
  auto project = [&](Store* s, std::size_t batch_events) {
    ProjectorOptions po;
    po.batch_events = batch_events;
    Projector p(root_, j.config, j.hash, s, po);
    ASSERT_TRUE(p.Init().ok());
    ASSERT_TRUE(p.CatchUp().ok());
    EXPECT_EQ(p.applied_seq(), j.last_seq());
  };
  auto order = [&](Store* s, uint32_t account, uint64_t id) {
    auto o = s->FindOrder(account, Raw(btc), id);
    EXPECT_TRUE(o.ok() && o->has_value()) << id;
    return o.ok() && o->has_value() ? **o : OrderRecord{};
  };
  auto find_list = [&](Store* s, uint32_t account, uint64_t id) {
    auto l = s->FindOrderList(account, id);
    EXPECT_TRUE(l.ok() && l->has_value()) << id;
    return l.ok() && l->has_value() ? **l : ListRecord{};
  };

  limit(1, Side::kSell, 1000, 1);
  limit(2, Side::kBuy, 1000, 1);  // last price 1000
  // A sell OCO: a limit maker above, a stop-loss limit below every later
  // trade's price.
  const uint64_t oco = list(3, engine::ListType::kOco, "oco-1",
                            {Leg(Side::kSell, OrderType::kLimitMaker, 2, 1100, "oco-a"),
                             Leg(Side::kSell, OrderType::kStopLossLimit, 2, 640, "oco-b", 650)});
  // OTOs: a working bid, a pending sell (an iceberg; one that account 5
  // cannot fund once it is placed).
  const uint64_t oto = list(3, engine::ListType::kOto, "oto-1",
                            {Leg(Side::kBuy, OrderType::kLimit, 2, 900, "oto-w"),
                             Leg(Side::kSell, OrderType::kLimit, 2, 1200, "oto-p", 0, 1)});
  const uint64_t oto2 = list(4, engine::ListType::kOto, "oto-2",
                             {Leg(Side::kBuy, OrderType::kLimit, 1, 800, "x-w"),
                              Leg(Side::kSell, OrderType::kLimit, 1, 1300, "x-p")});
  const uint64_t oto3 = list(5, engine::ListType::kOto, "",
                             {Leg(Side::kBuy, OrderType::kLimit, 1, 700, "r-w"),
                              Leg(Side::kSell, OrderType::kLimit, 5000, 1400, "r-p")});
  j.Flush();

  auto s = Open(NewStoreOptions("l"), j.config);
  ASSERT_NE(s, nullptr);
  project(s.get(), 4);
  {
    const ListRecord l = find_list(s.get(), 3, oco);
    EXPECT_EQ(l.id, oco);
    EXPECT_EQ(l.account, AccountId{3});
    EXPECT_EQ(l.market, btc);
    EXPECT_EQ(l.type, engine::ListType::kOco);
    EXPECT_EQ(l.list_client_order_id.view(), "oco-1");
    EXPECT_EQ(l.orders[0], OrderId{oco});
    EXPECT_EQ(l.orders[1], OrderId{oco + kStride});
    EXPECT_EQ(Raw(l.orders[2]), 0u);
    EXPECT_EQ(l.client_ids[0].view(), "oco-a");
    EXPECT_EQ(l.client_ids[1].view(), "oco-b");
    EXPECT_TRUE(l.client_ids[2].empty());
    EXPECT_EQ(l.status, ListStatus::kExecuting);
    EXPECT_EQ(l.time_ns, time_of(oco));
    EXPECT_EQ(l.update_ns, time_of(oco));
    EXPECT_EQ(l.size(), 2u);
    const OrderRecord below = order(s.get(), 3, oco + kStride);
    EXPECT_EQ(below.list_id, oco);
    EXPECT_EQ(below.stop_price, Price{650});
    EXPECT_EQ(order(s.get(), 3, oco).list_id, oco);

    const ListRecord o = find_list(s.get(), 3, oto);
    EXPECT_EQ(o.type, engine::ListType::kOto);
    EXPECT_EQ(o.client_ids[0].view(), "oto-w");
    EXPECT_EQ(o.client_ids[1].view(), "oto-p");
    const OrderRecord pending = order(s.get(), 3, oto + kStride);
    EXPECT_EQ(pending.status, OrderStatus::kPendingNew);
    EXPECT_EQ(pending.list_id, oto);
    EXPECT_EQ(pending.iceberg_qty, Qty{1});
    EXPECT_EQ(pending.remaining, Qty{2});
    EXPECT_EQ(pending.terms.side, Side::kSell);
    EXPECT_EQ(pending.terms.price, Price{1200});
    EXPECT_EQ(pending.client_order_id.view(), "oto-p");
    EXPECT_EQ(pending.time_ns, time_of(oto));
    EXPECT_FALSE(pending.working);
    EXPECT_EQ(order(s.get(), 3, oto).list_id, oto);
    EXPECT_EQ(order(s.get(), 3, oto).iceberg_qty, Qty{0});
  }
  auto open_lists = s->OpenOrderLists();
  ASSERT_TRUE(open_lists.ok()) << open_lists.status().message();
  ASSERT_EQ(open_lists->size(), 4u);
  EXPECT_EQ((*open_lists)[0].list.id, oco);
  EXPECT_EQ((*open_lists)[0].created_seq, oco);
  auto open_orders = s->OpenOrders();
  ASSERT_TRUE(open_orders.ok());
  std::size_t pending_open = 0;
  for (const OrderRow& r : *open_orders) {
    pending_open += r.order.status == OrderStatus::kPendingNew ? 1 : 0;
  }
  EXPECT_EQ(pending_open, 3u);

  // The OTO's working bid fills: its pending sell is placed, NEW now (and
  // placed now), an iceberg of the same list.
  const uint64_t fill = limit(1, Side::kSell, 900, 2);
  j.Flush();
  project(s.get(), 1000);  // a restart: seeded from the store
  {
    const OrderRecord placed = order(s.get(), 3, oto + kStride);
    EXPECT_EQ(placed.status, OrderStatus::kNew);
    EXPECT_TRUE(placed.working);
    EXPECT_EQ(placed.list_id, oto);
    EXPECT_EQ(placed.iceberg_qty, Qty{1});
    EXPECT_EQ(placed.time_ns, time_of(fill));
    EXPECT_EQ(placed.update_ns, time_of(fill));
    EXPECT_EQ(order(s.get(), 3, oto).status, OrderStatus::kFilled);
    EXPECT_EQ(find_list(s.get(), 3, oto).status, ListStatus::kExecuting);
  }

  // Account 4 cancels its working bid: the list is done and its pending
  // order CANCELED. Account 2 takes the OCO's limit maker: its stop goes,
  // the OCO is done. Account 5's working bid fills, its pending sell cannot
  // be funded: REJECTED, and the list is done.
  t += 1'000'000'000;
  const uint64_t cancel = run(workload::Cancel(t, AccountId{4}, btc, OrderId{oto2}));
  const uint64_t take = limit(2, Side::kBuy, 1100, 2);
  t += 1'000'000'000;
  const uint64_t refuse = run(workload::Place(t, AccountId{1}, btc, Side::kSell, OrderType::kLimit,
                                              TimeInForce::kGtc, 700, 1),
                              /*refused=*/true);  // the pending sell, not this order
  // The list client id of a list that is done, again: the newer one is found.
  const uint64_t again = list(4, engine::ListType::kOto, "oto-2",
                              {Leg(Side::kBuy, OrderType::kLimit, 1, 600, ""),
                               Leg(Side::kSell, OrderType::kLimit, 1, 1500, "")});
  j.Flush();
  project(s.get(), 3);
  {
    const ListRecord done2 = find_list(s.get(), 4, oto2);
    EXPECT_EQ(done2.status, ListStatus::kAllDone);
    EXPECT_EQ(done2.time_ns, time_of(oto2));
    EXPECT_EQ(done2.update_ns, time_of(cancel));
    const OrderRecord canceled = order(s.get(), 4, oto2 + kStride);
    EXPECT_EQ(canceled.status, OrderStatus::kCanceled);
    EXPECT_EQ(canceled.remaining, Qty{0});
    EXPECT_EQ(canceled.update_ns, time_of(cancel));
    EXPECT_EQ(canceled.time_ns, time_of(oto2));
    EXPECT_EQ(order(s.get(), 4, oto2).status, OrderStatus::kCanceled);

    const ListRecord done = find_list(s.get(), 3, oco);
    EXPECT_EQ(done.status, ListStatus::kAllDone);
    EXPECT_EQ(done.update_ns, time_of(take));
    EXPECT_EQ(order(s.get(), 3, oco).status, OrderStatus::kFilled);
    EXPECT_EQ(order(s.get(), 3, oco + kStride).status, OrderStatus::kCanceled);

    const ListRecord done3 = find_list(s.get(), 5, oto3);
    EXPECT_EQ(done3.status, ListStatus::kAllDone);
    EXPECT_TRUE(done3.list_client_order_id.empty());
    EXPECT_EQ(done3.update_ns, time_of(refuse));
    const OrderRecord refused = order(s.get(), 5, oto3 + kStride);
    EXPECT_EQ(refused.status, OrderStatus::kRejected);
    EXPECT_EQ(refused.remaining, Qty{0});
    EXPECT_EQ(refused.update_ns, time_of(refuse));

    auto newest = s->FindOrderListByClientId(4, "oto-2");
    ASSERT_TRUE(newest.ok() && newest->has_value());
    EXPECT_EQ((*newest)->id, again);
    auto none = s->FindOrderListByClientId(3, "oto-2");  // another account's
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    auto unknown = s->FindOrderList(3, again);
    ASSERT_TRUE(unknown.ok());
    EXPECT_FALSE(unknown->has_value());
  }
  auto still_open = s->OpenOrderLists();
  ASSERT_TRUE(still_open.ok());
  ASSERT_EQ(still_open->size(), 2u);  // the first OTO (its pending sell rests) and the last
  EXPECT_EQ((*still_open)[0].list.id, oto);
  EXPECT_EQ((*still_open)[1].list.id, again);

  // allOrderList's filters.
  auto ids = [&](const HistoryQuery& q) {
    std::vector<uint64_t> out;
    auto r = s->AllOrderLists(q);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) {
      for (const ListRecord& l : *r) out.push_back(l.id);
    }
    return out;
  };
  using Ids = std::vector<uint64_t>;
  const int64_t oco_ms = time_of(oco) / 1'000'000;
  const int64_t oto_ms = time_of(oto) / 1'000'000;
  EXPECT_EQ(ids({.account = 3}), (Ids{oco, oto}));
  EXPECT_EQ(ids({.account = 3, .limit = 1}), (Ids{oto}));  // the newest
  EXPECT_EQ(ids({.account = 3, .from_id = oco, .limit = 1}), (Ids{oco}));
  EXPECT_EQ(ids({.account = 3, .from_id = oco + 1}), (Ids{oto}));
  EXPECT_EQ(ids({.account = 3, .start_ms = oto_ms}), (Ids{oto}));
  EXPECT_EQ(ids({.account = 3, .start_ms = oco_ms + 1, .end_ms = oto_ms - 1}), Ids{});
  EXPECT_EQ(ids({.account = 3, .end_ms = oco_ms}), (Ids{oco}));
  EXPECT_EQ(ids({.account = 3, .start_ms = oco_ms, .end_ms = oto_ms, .limit = 1}), (Ids{oco}));
  EXPECT_EQ(ids({.account = 4}), (Ids{oto2, again}));
  EXPECT_EQ(ids({.account = 4, .market = 1}), (Ids{oto2, again}));  // every market
  EXPECT_EQ(ids({.account = 6}), Ids{});

  // The pending order's reports: NEW while pending, NEW again once placed.
  RowBuilder b(j.config);
  RowBatch batch;
  for (std::size_t i = 0; i < j.records.size(); ++i) b.AddRecord(i + 1, 0, j.records[i], &batch);
  b.Finish(&batch);
  std::vector<std::pair<ExecType, OrderStatus>> reports, refused_reports;
  for (const OrderEventRow& e : batch.order_events) {
    if (e.order_id == oto + kStride) reports.emplace_back(e.exec_type, e.status);
    if (e.order_id == oto3 + kStride) {
      refused_reports.emplace_back(e.exec_type, e.status);
      if (e.exec_type == ExecType::kRejected) {
        EXPECT_EQ(e.reject, engine::RejectReason::kInsufficientBalance);
      }
    }
  }
  EXPECT_EQ(reports,
            (std::vector<std::pair<ExecType, OrderStatus>>{
                {ExecType::kNew, OrderStatus::kPendingNew}, {ExecType::kNew, OrderStatus::kNew}}));
  EXPECT_EQ(refused_reports, (std::vector<std::pair<ExecType, OrderStatus>>{
                                 {ExecType::kNew, OrderStatus::kPendingNew},
                                 {ExecType::kRejected, OrderStatus::kRejected}}));
  EXPECT_EQ(b.open_lists(), 2u);

  // A rebuild gives the same rows; the read side holds the same lists and
  // orders, field for field.
  auto r = Open(NewStoreOptions("lr"), j.config);
  ASSERT_TRUE(Rebuild(root_, j.config, r.get()).ok());
  const auto rebuilt = DumpOf(r.get());
  ExpectSameRows(rebuilt, DumpOf(s.get()));
  EXPECT_EQ(Rows(rebuilt, "order_lists"), 5u);
  auto totals = s->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->order_lists, 5u);
  marketdata::ReadSide rs(j.config);
  {
    engine::Engine fresh(j.config);
    rs.Bootstrap(fresh.ExportImage());
  }
  marketdata::BatchOutput out;
  for (const EventBuffer& ev : j.records) rs.Apply(ev, &out);
  for (const uint32_t a : {3u, 4u, 5u}) {
    const auto want = rs.AllLists(AccountId{a}, 0, 0, 0, 100);
    auto have = s->AllOrderLists({.account = a});
    ASSERT_TRUE(have.ok());
    ASSERT_EQ(have->size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(ListText((*have)[i]), ListText(want[i]));
    }
    for (const OrderRecord& w : rs.AllOrders(AccountId{a}, btc, 0, 0, 0, 100)) {
      const OrderRecord h = order(s.get(), a, Raw(w.id));
      EXPECT_EQ(h.status, w.status) << Raw(w.id);
      EXPECT_EQ(h.list_id, w.list_id) << Raw(w.id);
      EXPECT_EQ(h.iceberg_qty, w.iceberg_qty) << Raw(w.id);
      EXPECT_EQ(h.time_ns, w.time_ns) << Raw(w.id);
      EXPECT_EQ(h.update_ns, w.update_ns) << Raw(w.id);
      EXPECT_EQ(h.remaining, w.remaining) << Raw(w.id);
      EXPECT_EQ(h.working, w.working) << Raw(w.id);
      EXPECT_EQ(h.client_order_id, w.client_order_id) << Raw(w.id);
    }
  }
}

// A database a version-3 build wrote (an order, no lists) is migrated to
// version 4 when opened: its order reads back with no iceberg and no list,
// and the store takes lists and pending orders from then on.
TEST_P(StoreTest, AVersionThreeDatabaseMigrates) {
  static_assert(kSchemaVersion == 4);
  if (GetParam() == "rocksdb") GTEST_SKIP() << "SQL schema migrations";
  const StoreOptions o = NewStoreOptions("v3");
  const Dialect dialect = o.backend == "sqlite" ? Dialect::kSqlite : Dialect::kPostgres;
  std::vector<std::string> sql = {
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL)"};
  for (const Migration& m : Migrations()) {
    if (m.version > 3) break;
    for (std::string& st : Statements(m, dialect)) sql.push_back(std::move(st));
    sql.push_back("INSERT INTO schema_migrations VALUES (" + std::to_string(m.version) + ", '" +
                  std::string(m.description) + "')");
  }
  // Order 4 (open, a stop) as version 3 wrote it.
  sql.push_back(
      "INSERT INTO orders VALUES (4, 1, 0, 1, 5, 0, 0, 650, 3, 0, 0, 0, 3, 0, 0, 0, 'old-order', "
      "4000000000, 4000000000, 4, 4, 660, 0, 0, 0)");
  sql.push_back("UPDATE projector_state SET applied_seq = 5, applied_time_ns = 5000000000");
  std::function<std::string(const std::string&)> value;
  if (o.backend == "sqlite") {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    for (const std::string& st : sql) {
      ASSERT_EQ(sqlite3_exec(db, st.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
          << st << ": " << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
    value = [path = o.path](const std::string& q) {
      sqlite3* conn = nullptr;
      std::string out = "<error>";
      if (sqlite3_open(path.c_str(), &conn) == SQLITE_OK) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(conn, q.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
          out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        }
        sqlite3_finalize(stmt);
      }
      sqlite3_close(conn);
      return out;
    };
  } else {
    PGconn* c = PQconnectdb(o.url.c_str());
    ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    for (const std::string& st : sql) {
      PGresult* res = PQexec(c, st.c_str());
      EXPECT_EQ(PQresultStatus(res), PGRES_COMMAND_OK) << st << ": " << PQerrorMessage(c);
      PQclear(res);
    }
    PQfinish(c);
    value = [url = o.url](const std::string& q) {
      PGconn* conn = PQconnectdb(url.c_str());
      std::string out = "<error>";
      PGresult* res = PQexec(conn, q.c_str());
      if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        out = PQgetvalue(res, 0, 0);
      }
      PQclear(res);
      PQfinish(conn);
      return out;
    };
  }
  ASSERT_EQ(value("SELECT MAX(version) FROM schema_migrations"), "3");

  auto s = Open(o, workload::MixedConfig());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(value("SELECT MAX(version) FROM schema_migrations"), "4");
  EXPECT_EQ(value("SELECT description FROM schema_migrations WHERE version = 4"),
            std::string(Migrations()[3].description));
  EXPECT_EQ(value("SELECT COUNT(*) FROM order_lists"), "0");
  auto old = s->FindOrder(1, 0, 4);
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_EQ((*old)->client_order_id.view(), "old-order");
  EXPECT_EQ((*old)->stop_price, Price{660});
  EXPECT_EQ((*old)->iceberg_qty, Qty{0});
  EXPECT_EQ((*old)->list_id, 0u);
  auto open = s->OpenOrders();
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ(Raw((*open)[0].order.id), 4u);

  // A list with a pending order, committed on top, read back.
  TransferRecords r;
  r.seq = 5;
  RowBatch b;
  engine::ListAccepted la;
  la.list_id = 6;
  la.account = AccountId{1};
  la.market = MarketId{0};
  la.type = engine::ListType::kOto;
  la.list_client_order_id = ClientOrderId::From("new-list");
  la.order_ids[0] = OrderId{6};
  la.order_ids[1] = OrderId{6 + engine::kListOrderStride};
  engine::OrderAccepted wa;
  wa.order_id = OrderId{6};
  wa.terms = engine::OrderTerms{AccountId{1},
                                MarketId{0},
                                engine::Side::kBuy,
                                engine::OrderType::kLimit,
                                engine::TimeInForce::kGtc,
                                engine::StpMode::kNone,
                                Price{500},
                                Qty{2}};
  wa.client_order_id = ClientOrderId::From("w");
  engine::OrderPending pa;
  pa.order_id = la.order_ids[1];
  pa.list_id = 6;
  pa.terms = wa.terms;
  pa.terms.side = engine::Side::kSell;
  pa.terms.price = Price{900};
  pa.iceberg_qty = Qty{1};
  pa.client_order_id = ClientOrderId::From("p");
  r.Add(&b, 6, la, wa, pa);
  ASSERT_TRUE(r.Commit(s.get(), &b).ok());
  auto l = s->FindOrderListByClientId(1, "new-list");
  ASSERT_TRUE(l.ok() && l->has_value()) << l.status().message();
  EXPECT_EQ((*l)->id, 6u);
  EXPECT_EQ((*l)->client_ids[0].view(), "w");
  EXPECT_EQ((*l)->client_ids[1].view(), "p");
  auto p = s->FindOrder(1, 0, 6 + engine::kListOrderStride);
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->status, marketdata::OrderStatus::kPendingNew);
  EXPECT_EQ((*p)->iceberg_qty, Qty{1});
  EXPECT_EQ((*p)->list_id, 6u);
  auto open_now = s->OpenOrders();
  ASSERT_TRUE(open_now.ok());
  EXPECT_EQ(open_now->size(), 3u);  // the old order, the working one, the pending one
  auto lists = s->OpenOrderLists();
  ASSERT_TRUE(lists.ok());
  ASSERT_EQ(lists->size(), 1u);
  EXPECT_EQ(lists->front().created_seq, 6u);
  s.reset();
  ASSERT_NE(Open(o, workload::MixedConfig()), nullptr);
  EXPECT_EQ(value("SELECT COUNT(*) FROM schema_migrations"), "4");
}

// ---- a database outage never stops trading --------------------------------

class Counting final : public exchange::Completion {
 public:
  void OnDone(uint64_t, const exchange::Outcome& o) noexcept override {
    if (o.state == exchange::Outcome::State::kDurable) durable_.fetch_add(1);
  }
  uint64_t durable() const { return durable_.load(); }

 private:
  std::atomic<uint64_t> durable_{0};
};

int Cluster(std::string_view action) {
  const char* dir = std::getenv("MATCHBOOK_PG_DIR");
  if (dir == nullptr) return -1;
  const std::string cmd = "bash " MB_SOURCE_DIR "/scripts/pg_cluster.sh " + std::string(action) +
                          " " + dir + " >/dev/null";
  return std::system(cmd.c_str());
}

TEST(OutageTest, PostgresStopsWhileTradingGoesOnThenTheProjectionCatchesUp) {
  ASSERT_FALSE(PgUrl().empty()) << "MATCHBOOK_PG_URL is not set (scripts/test.sh sets it)";
  ASSERT_NE(std::getenv("MATCHBOOK_PG_DIR"), nullptr)
      << "MATCHBOOK_PG_DIR (the throw-away cluster's directory) is not set";
  const fs::path root = TestDir("outage");
  bench::MixSpec spec;
  spec.seed = 9;
  spec.commands = 12'000;
  spec.accounts = 50;
  spec.target_orders = 200;
  const bench::Workload w = bench::GenerateExchangeCoreMix(spec);
  StoreOptions so;
  so.backend = "postgres";
  so.url = ScratchPgDatabase("outage");
  auto store = OpenStoreWhenReachable(so, w.config, std::chrono::milliseconds(100));
  std::mutex log_mu;
  std::string log;
  ProjectorOptions po;
  po.retry = std::chrono::milliseconds(100);
  po.log = [&](std::string_view line) {
    std::lock_guard lock(log_mu);
    log += std::string(line) + "\n";
  };
  Projector proj(root, w.config, engine::HashConfig(w.config), store.get(), po);
  exchange::ExchangeOptions eo;
  eo.engine = w.config;
  eo.data_dir = root;
  eo.log = [](std::string_view) {};
  eo.on_durable = [&proj](std::span<const Event> ev) {
    proj.NotifyDurable(static_cast<uint64_t>(ev.back().seq));
  };
  auto ex = exchange::Exchange::Open(std::move(eo));
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  proj.Start((*ex)->durable_seq());
  Counting done;
  uint64_t sent = 0;
  auto submit = [&](const Command& c) {
    while ((*ex)->Submit(c, &done, sent, false) == exchange::SubmitResult::kFull) {
      std::this_thread::yield();
    }
    ++sent;
  };
  auto all_durable = [&] {
    for (int i = 0; i < 3000 && done.durable() < sent; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done.durable() == sent;
  };
  for (const Command& c : w.setup) submit(c);
  for (std::size_t i = 0; i < 3000; ++i) submit(w.commands[i]);
  ASSERT_TRUE(all_durable());
  ASSERT_TRUE(proj.WaitApplied((*ex)->durable_seq(), std::chrono::seconds(30)));

  ASSERT_EQ(Cluster("stop-server"), 0);
  for (std::size_t i = 3000; i < 9000; ++i) submit(w.commands[i]);
  EXPECT_TRUE(all_durable()) << "the exchange acknowledges while the database is down";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const ProjectorStats down = proj.stats();
  EXPECT_FALSE(down.healthy);
  EXPECT_GT(down.errors, 0u);
  EXPECT_GE(down.lag_events, 5000u);
  EXPECT_GT(down.lag_seconds, 0.3);

  ASSERT_EQ(Cluster("start-server"), 0);
  for (std::size_t i = 9000; i < w.commands.size(); ++i) submit(w.commands[i]);
  ASSERT_TRUE(all_durable());
  ASSERT_TRUE(proj.WaitApplied((*ex)->durable_seq(), std::chrono::seconds(60)))
      << proj.stats().last_error;
  const ProjectorStats up = proj.stats();
  EXPECT_TRUE(up.healthy);
  EXPECT_EQ(up.lag_events, 0u);
  EXPECT_EQ(up.lag_seconds, 0.0);
  proj.Stop();
  ASSERT_TRUE((*ex)->Close().ok());
  {
    std::lock_guard lock(log_mu);
    EXPECT_NE(log.find("trading is not affected"), std::string::npos) << log;
  }
  auto report = VerifyProjection(root, w.config, store.get(), root);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->differences.front();
  EXPECT_EQ(report->applied_seq, sent);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "rocksdb", "postgres"),
                         [](const auto& param_info) { return param_info.param; });

// ---- the history store against an independent answer --------------------------

// Every query shape with random parameters, on a random journal (every order
// type, lists, deposits, withdrawals, amends, cancels): the history store
// (RocksDB: key scans) answers what the SQLite store (SQL over the same rows)
// answers, and each market's trades and candles are what the read side —
// fed the same journal — holds.
TEST(HistoryStoreTest, EveryQueryWithRandomParametersAgreesWithSqlAndTheReadSide) {
  const fs::path root = TestDir("data");
  JournalBuilder j(root, 31);
  j.Run(5000);
  StoreOptions so;
  so.backend = "sqlite";
  so.path = (root / "reference.sqlite").string();
  auto sql = OpenStore(so, j.config);
  ASSERT_TRUE(sql.ok()) << sql.status().message();
  StoreOptions ho;
  ho.backend = "rocksdb";
  ho.path = (root / "history").string();
  // Newest-first scans read windows of at most 8 rows: most windows are
  // halved and read again.
  ho.scan_window_rows = 8;
  auto rocks = OpenStore(ho, j.config);
  ASSERT_TRUE(rocks.ok()) << rocks.status().message();
  ASSERT_TRUE(Rebuild(root, j.config, sql->get()).ok());
  ASSERT_TRUE(Rebuild(root, j.config, rocks->get()).ok());
  Store& want = **sql;
  Store& have = **rocks;

  // What the journal holds, for picking parameters near real values.
  auto rows = want.AllOrderRows();
  ASSERT_TRUE(rows.ok());
  ASSERT_GT(rows->size(), 1000u);
  const int64_t t0 = j.records.front().front().timestamp_ns / 1'000'000;
  const int64_t t1 = j.records.back().front().timestamp_ns / 1'000'000;
  const uint64_t last_seq = j.last_seq();
  bench::Rng rng(77);
  auto pick_time = [&]() -> int64_t {
    switch (rng.Below(4)) {
      case 0:
        return 0;
      case 1:
        return rng.Between(t0 - 10, t1 + 10);
      case 2:
        return (*rows)[rng.Below(rows->size())].order.time_ns / 1'000'000;
      default:
        return t1 + 1'000;
    }
  };
  auto pick_limit = [&]() -> std::size_t {
    const std::size_t limits[] = {1, 2, 5, 17, 500, 1000, std::size_t{1} << 20};
    return limits[rng.Below(std::size(limits))];
  };
  auto pick_id = [&]() -> uint64_t {
    switch (rng.Below(3)) {
      case 0:
        return 0;
      case 1:
        return 1 + rng.Below(last_seq + 10);
      default:
        return Raw((*rows)[rng.Below(rows->size())].order.id);
    }
  };
  auto order_text = [](const OrderRecord& o) {
    return std::to_string(Raw(o.id)) + "|" + std::string(o.client_order_id.view()) + "|" +
           std::to_string(Raw(o.status)) + "|" + std::to_string(o.executed.value) + "|" +
           std::to_string(o.cumulative_quote.value) + "|" + std::to_string(o.time_ns) + "|" +
           std::to_string(o.update_ns) + "|" + std::to_string(o.terms.price.value) + "|" +
           std::to_string(o.list_id) + "|" + std::to_string(o.trigger_ns);
  };
  auto fill_text = [](const marketdata::Fill& f) {
    return std::to_string(Raw(f.trade_id)) + "|" + std::to_string(Raw(f.order_id)) + "|" +
           std::to_string(f.is_maker) + "|" + std::to_string(f.qty.value) + "|" +
           std::to_string(f.commission.value) + "|" + std::to_string(Raw(f.commission_asset)) +
           "|" + std::to_string(f.time_ns);
  };
  auto texts = [](const auto& v, auto text) {
    std::vector<std::string> out;
    for (const auto& x : v) out.push_back(text(x));
    return out;
  };
  std::size_t nonempty = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto account = static_cast<uint32_t>(rng.Below(workload::mixed::kTraders + 2));
    const auto market = static_cast<uint16_t>(rng.Below(j.config.markets.size()));
    HistoryQuery q{account, market, 0, pick_id(), pick_time(), pick_time(), pick_limit()};
    if (rng.Below(4) == 0) q.order_id = pick_id();
    const std::string what = "round " + std::to_string(round) + " account " +
                             std::to_string(account) + " market " + std::to_string(market) +
                             " from " + std::to_string(q.from_id) + " start " +
                             std::to_string(q.start_ms) + " end " + std::to_string(q.end_ms) +
                             " limit " + std::to_string(q.limit);
    switch (round % 8) {
      case 0: {
        auto a = want.AllOrders(q), b = have.AllOrders(q);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(texts(*b, order_text), texts(*a, order_text)) << "allOrders " << what;
        nonempty += !a->empty();
        break;
      }
      case 1: {
        auto a = want.MyTrades(q), b = have.MyTrades(q);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(texts(*b, fill_text), texts(*a, fill_text))
            << "myTrades order " << q.order_id << " " << what;
        nonempty += !a->empty();
        break;
      }
      case 2: {
        auto a = want.AllOrderLists(q), b = have.AllOrderLists(q);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(texts(*b, ListText), texts(*a, ListText)) << "allOrderList " << what;
        nonempty += !a->empty();
        break;
      }
      case 3: {
        const OrderRecord& o = (*rows)[rng.Below(rows->size())].order;
        const uint32_t acc = rng.Below(5) == 0 ? account : Raw(o.terms.account);
        auto a = want.FindOrder(acc, Raw(o.terms.market), Raw(o.id));
        auto b = have.FindOrder(acc, Raw(o.terms.market), Raw(o.id));
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(b->has_value(), a->has_value()) << what;
        if (*a) {
          ASSERT_EQ(order_text(**b), order_text(**a));
        }
        auto c = want.FindOrderByClientId(acc, Raw(o.terms.market), o.client_order_id.view());
        auto d = have.FindOrderByClientId(acc, Raw(o.terms.market), o.client_order_id.view());
        ASSERT_TRUE(c.ok() && d.ok());
        ASSERT_EQ(d->has_value(), c->has_value()) << what;
        if (*c) {
          ASSERT_EQ(order_text(**d), order_text(**c));
        }
        break;
      }
      case 4: {
        LedgerQuery lq{account, rng.Below(2) == 0 ? 0 : pick_id(), pick_limit()};
        auto a = want.Ledger(lq), b = have.Ledger(lq);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(*b, *a) << "ledger " << what;
        nonempty += !a->empty();
        break;
      }
      case 5: {
        TransferQuery tq;
        if (rng.Below(3) != 0) tq.account = account;
        if (rng.Below(2) == 0) tq.asset = static_cast<uint16_t>(rng.Below(j.config.assets.size()));
        tq.start_ms = pick_time();
        tq.end_ms = pick_time();
        tq.offset = rng.Below(3) == 0 ? rng.Below(5) : 0;
        tq.limit = pick_limit();
        auto a = want.Deposits(tq), b = have.Deposits(tq);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(*b, *a) << "deposits " << what;
        nonempty += !a->empty();
        auto c = want.Withdrawals(tq), d = have.Withdrawals(tq);
        ASSERT_TRUE(c.ok() && d.ok());
        ASSERT_EQ(*d, *c) << "withdrawals " << what;
        break;
      }
      case 6: {
        for (const uint64_t list_id : {pick_id(), Raw((*rows)[rng.Below(rows->size())].order.id)}) {
          auto a = want.FindOrderList(account, list_id), b = have.FindOrderList(account, list_id);
          ASSERT_TRUE(a.ok() && b.ok());
          ASSERT_EQ(b->has_value(), a->has_value()) << "list " << list_id << " " << what;
          if (*a) {
            ASSERT_EQ(ListText(**b), ListText(**a));
          }
        }
        auto lists = want.AllOrderLists(HistoryQuery{account, 0, 0, 0, 0, 0, 1 << 20});
        ASSERT_TRUE(lists.ok());
        if (!lists->empty()) {
          const ListRecord& l = (*lists)[rng.Below(lists->size())];
          auto a = want.FindOrderListByClientId(account, l.list_client_order_id.view());
          auto b = have.FindOrderListByClientId(account, l.list_client_order_id.view());
          ASSERT_TRUE(a.ok() && b.ok() && a->has_value() && b->has_value());
          ASSERT_EQ(ListText(**b), ListText(**a));
        }
        break;
      }
      default: {
        const uint64_t id = pick_id();
        auto a = want.FindWithdrawal(account, id, ""), b = have.FindWithdrawal(account, id, "");
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(*b, *a) << "withdrawal " << id << " " << what;
        break;
      }
    }
  }
  EXPECT_GT(nonempty, 500u);

  // Each market's trades and candles, against the read side fed the same
  // journal (with room for every trade and candle).
  marketdata::ReadSideOptions ro;
  ro.recent_trades = 1 << 20;
  ro.klines_per_interval = 1 << 20;
  marketdata::ReadSide rs(j.config, ro);
  marketdata::BatchOutput out;
  Feed(j, &rs, &out);
  std::size_t trades = 0;
  for (uint16_t m = 0; m < j.config.markets.size(); ++m) {
    const auto snap = rs.Snapshot(MarketId{m});
    const auto want_trades = snap->RecentTrades(1 << 20);
    for (const std::size_t limit : {std::size_t{1}, std::size_t{10}, std::size_t{1} << 20}) {
      auto got = have.MarketTrades(m, 0, limit);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got->size(), std::min(limit, want_trades.size()));
      for (std::size_t i = 0; i < got->size(); ++i) {
        const marketdata::TradeRow& w = want_trades[want_trades.size() - got->size() + i];
        EXPECT_EQ((*got)[i].trade_id, Raw(w.id));
        EXPECT_EQ((*got)[i].price, w.price.value);
        EXPECT_EQ((*got)[i].time_ns, w.time_ns);
      }
    }
    if (!want_trades.empty()) {
      const uint64_t from = Raw(want_trades[want_trades.size() / 2].id);
      auto got = have.MarketTrades(m, from, 3);
      ASSERT_TRUE(got.ok());
      ASSERT_FALSE(got->empty());
      EXPECT_EQ(got->front().trade_id, from);
      // A time maps to the first trade at or after it.
      for (std::size_t k = 0; k < want_trades.size(); k += 1 + want_trades.size() / 7) {
        for (const int64_t t : {want_trades[k].time_ns - 1, want_trades[k].time_ns}) {
          const auto first = std::find_if(want_trades.begin(), want_trades.end(),
                                          [&](const auto& w) { return w.time_ns >= t; });
          auto id = have.FirstTradeFrom(m, t);
          ASSERT_TRUE(id.ok()) << id.status().message();
          EXPECT_EQ(*id, Raw(first->id)) << "market " << m << " time " << t;
        }
      }
      auto none = have.FirstTradeFrom(m, want_trades.back().time_ns + 1);
      ASSERT_TRUE(none.ok());
      EXPECT_EQ(*none, 0u);
    }
    trades += want_trades.size();
    for (std::size_t i = 0; i < marketdata::kKlineIntervals; ++i) {
      const auto interval = static_cast<marketdata::KlineInterval>(i);
      const auto want_k = snap->Klines(interval, 0, 0, 1 << 20);
      auto got = have.Candles(m, static_cast<uint8_t>(i), 0, 0, 1 << 20);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got->size(), want_k.size()) << "market " << m << " interval " << i;
      for (std::size_t k = 0; k < want_k.size(); ++k) {
        const marketdata::Kline& a = want_k[k];
        const marketdata::Kline& b = (*got)[k];
        EXPECT_TRUE(a.open_time_ms == b.open_time_ms && a.open == b.open && a.high == b.high &&
                    a.low == b.low && a.close == b.close && a.volume == b.volume &&
                    a.quote_volume == b.quote_volume && a.taker_buy_base == b.taker_buy_base &&
                    a.trades == b.trades && a.first_trade == b.first_trade &&
                    a.last_trade == b.last_trade)
            << "market " << m << " interval " << i << " candle " << k;
      }
      // Ranges, as klines asks for them: the same candles as the read side's.
      for (int r = 0; r < 20 && !want_k.empty(); ++r) {
        const int64_t lo = want_k.front().open_time_ms - 1, hi = want_k.back().open_time_ms + 1;
        const int64_t start = r % 3 == 0 ? 0 : lo + static_cast<int64_t>(r * (hi - lo) / 20);
        const int64_t end = r % 4 == 0 ? 0 : start + static_cast<int64_t>((r + 1) * (hi - lo) / 30);
        const std::size_t limit = std::size_t{1} + static_cast<std::size_t>(r * 7 % 23);
        const auto want_r = snap->Klines(interval, start, end, limit);
        auto got_r = have.Candles(m, static_cast<uint8_t>(i), start, end, limit);
        ASSERT_TRUE(got_r.ok());
        std::vector<int64_t> a, b;
        for (const marketdata::Kline& k : want_r) a.push_back(k.open_time_ms);
        for (const marketdata::Kline& k : *got_r) b.push_back(k.open_time_ms);
        EXPECT_EQ(a, b) << "market " << m << " interval " << i << " start " << start << " end "
                        << end << " limit " << limit;
      }
    }
  }
  EXPECT_GT(trades, 300u);
  sql->reset();
  rocks->reset();  // closed (its memtable flushed) before its directory goes
  fs::remove_all(root);
}

// ---- lag, on the clock the projector is given ---------------------------------

// lag_seconds counts from when the oldest unapplied record became durable, and
// each lag sample from a batch's first event time to its commit, both on
// ProjectorOptions::clock: with a ManualClock the figures are exact.
TEST(ProjectorClockTest, LagIsMeasuredOnTheGivenClock) {
  const fs::path root = TestDir("lag");
  JournalBuilder j(root, 9);
  j.Run(300);
  const uint64_t half = j.last_seq() / 2;
  auto store = OpenSqliteStore((root / "p.sqlite").string(), j.config);
  ASSERT_TRUE(store.ok()) << store.status().message();

  const int64_t first_event_ns = j.records.front().front().timestamp_ns;
  ManualClock clock(first_event_ns + 7'000'000, 0);
  ProjectorOptions po;
  po.clock = &clock;
  po.batch_events = 1'000'000;  // one batch per catch-up
  po.lag_samples = 10;
  Projector p(root, j.config, j.hash, store->get(), po);
  ASSERT_TRUE(p.Init().ok());

  p.NotifyDurable(half);  // durable at steady 0
  clock.Advance(std::chrono::milliseconds(1500));
  p.NotifyDurable(j.last_seq());  // durable at steady 1.5 s
  clock.Advance(std::chrono::milliseconds(1000));
  ProjectorStats s = p.stats();
  EXPECT_EQ(s.lag_events, j.last_seq());
  EXPECT_DOUBLE_EQ(s.lag_seconds, 2.5);

  // The first half applied: the oldest record still waiting became durable at 1.5 s.
  ASSERT_TRUE(p.CatchUp(half).ok());
  s = p.stats();
  EXPECT_EQ(s.applied_seq, half);
  EXPECT_EQ(s.lag_events, j.last_seq() - half);
  EXPECT_DOUBLE_EQ(s.lag_seconds, 1.0);
  // One batch, committed 2.5 s after the wall time of 7 ms past its first event.
  EXPECT_EQ(p.TakeLagSamples(), std::vector<int64_t>{7'000'000 + 2'500'000'000});

  ASSERT_TRUE(p.CatchUp().ok());
  s = p.stats();
  EXPECT_EQ(s.lag_events, 0u);
  EXPECT_EQ(s.lag_seconds, 0.0);
  const std::vector<int64_t> second = p.TakeLagSamples();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0], clock.wall_ns() - j.records[half].front().timestamp_ns);
  fs::remove_all(root);
}

// Under journal fsync=none (sync_journal) the projector makes the journal
// records of a batch durable before it commits the batch: a failed sync
// commits nothing, and the batch is applied once the sync succeeds.
TEST(ProjectorSyncTest, SyncsTheJournalBeforeEachCommitAndCommitsNothingWhenItFails) {
  const fs::path root = TestDir("sync");
  JournalBuilder j(root, 13);
  j.Run(300);
  auto store = OpenSqliteStore((root / "p.sqlite").string(), j.config);
  ASSERT_TRUE(store.ok()) << store.status().message();
  FaultFileSystem fsys;
  ProjectorOptions po;
  po.batch_events = 100;
  po.catchup_batch_events = 100;  // several batches
  po.sync_journal = true;
  po.file_system = &fsys;
  po.log = [](std::string_view) {};
  Projector p(root, j.config, j.hash, store->get(), po);
  ASSERT_TRUE(p.Init().ok());
  auto n = p.RunOnce(j.last_seq());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(fsys.calls(FileOp::kDataSync), 1) << "one journal sync per commit";
  const uint64_t applied = p.applied_seq();
  ASSERT_GT(applied, 0u);
  ASSERT_LT(applied, j.last_seq());

  fsys.Inject(Fault(FileOp::kDataSync, EIO, ".mbj"));
  n = p.RunOnce(j.last_seq());
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("fdatasync"), std::string::npos) << n.status().message();
  EXPECT_EQ(p.applied_seq(), applied);
  EXPECT_EQ((*store)->State()->applied_seq, applied) << "committed without a durable journal";
  fsys.Clear();  // a new descriptor's sync would succeed now: still failed until a restart
  n = p.RunOnce(j.last_seq());
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("until a restart"), std::string::npos)
      << n.status().message();
  EXPECT_EQ((*store)->State()->applied_seq, applied);

  Projector again(root, j.config, j.hash, store->get(), po);
  ASSERT_TRUE(again.Init().ok());
  ASSERT_TRUE(again.CatchUp(j.last_seq()).ok());
  EXPECT_EQ(again.applied_seq(), j.last_seq());
  fs::remove_all(root);
}

// ---- the live thread's batches -------------------------------------------------

// A partial batch waits up to batch_wait for more records, but not while a
// reader waits for the projection: history answers never wait for a batch
// to fill.
TEST(ProjectorLiveTest, AReaderDoesNotWaitForABatchToFill) {
  const fs::path root = TestDir("reader");
  JournalBuilder j(root, 11);
  j.Run(300);
  const uint64_t half = j.last_seq() / 2;
  auto store = OpenSqliteStore((root / "p.sqlite").string(), j.config);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ProjectorOptions po;
  po.batch_events = 1'000'000;
  po.batch_wait = std::chrono::minutes(10);  // a batch would never fill by itself
  po.log = [](std::string_view) {};
  Projector p(root, j.config, j.hash, store->get(), po);
  p.Start(0);
  p.NotifyDurable(half);
  EXPECT_TRUE(p.WaitApplied(half, std::chrono::seconds(60)))
      << "the reader waited for the batch to fill; applied " << p.applied_seq();
  p.NotifyDurable(j.last_seq());
  EXPECT_TRUE(p.WaitApplied(j.last_seq(), std::chrono::seconds(60)))
      << "applied " << p.applied_seq();
  p.Stop();
  EXPECT_EQ(p.stats().lag_events, 0u);
  fs::remove_all(root);
}

// A partial batch is woken when the durable records could fill it, not at
// every durable record: it then commits without waiting out batch_wait.
TEST(ProjectorLiveTest, APartialBatchCommitsOnceItCanBeFull) {
  const fs::path root = TestDir("fill");
  JournalBuilder j(root, 12);
  j.Run(300);
  auto store = OpenSqliteStore((root / "p.sqlite").string(), j.config);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ProjectorOptions po;
  po.batch_events = 50;
  po.catchup_batch_events = 50;
  po.batch_wait = std::chrono::minutes(10);
  po.log = [](std::string_view) {};
  Projector p(root, j.config, j.hash, store->get(), po);
  p.Start(0);
  p.NotifyDurable(1);  // one record: the batch waits to fill
  p.NotifyDurable(j.last_seq());
  // Polled, not WaitApplied: a waiting reader would make the batch commit early.
  for (int i = 0; i < 6000 && p.applied_seq() < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(p.applied_seq(), 50u) << "the full batch waited for batch_wait";
  p.Stop();
  fs::remove_all(root);
}

// ---- bad input ---------------------------------------------------------------

TEST(BadStoreTest, SqliteRefusesANewerSchemaAndWhatIsNotADatabase) {
  const fs::path root = TestDir("bad");
  const EngineConfig config = workload::MixedConfig();
  const std::string path = (root / "p.sqlite").string();
  { ASSERT_TRUE(OpenSqliteStore(path, config).ok()); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_migrations VALUES (99, 'future')", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto newer = OpenSqliteStore(path, config);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("schema version 99 is newer than this build"),
            std::string::npos)
      << newer.status().message();

  const std::string junk = (root / "junk.sqlite").string();
  {
    std::ofstream out(junk);
    out << std::string(4096, 'x');
  }
  auto not_db = OpenSqliteStore(junk, config);
  ASSERT_FALSE(not_db.ok());
  EXPECT_NE(not_db.status().message().find("junk.sqlite"), std::string::npos);

  auto missing_dir = OpenSqliteStore((root / "no" / "such" / "dir.sqlite").string(), config);
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find("cannot open"), std::string::npos)
      << missing_dir.status().message();

  StoreOptions unknown;
  unknown.backend = "mysql";
  auto u = OpenStore(unknown, config);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("unknown backend"), std::string::npos);
  fs::remove_all(root);
}

TEST(BadStoreTest, AnUnreachableDatabaseIsAClearErrorAndRetriedLater) {
  const EngineConfig config = workload::MixedConfig();
  StoreOptions o;
  o.backend = "postgres";
  o.url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2";
  const auto started = std::chrono::steady_clock::now();
  auto s = OpenStore(o, config);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_NE(s.status().message().find("127.0.0.1"), std::string::npos) << s.status().message();

  auto lazy = OpenStoreWhenReachable(o, config, std::chrono::milliseconds(100));
  auto state = lazy->State();
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kUnavailable);
  auto orders = lazy->AllOrders(HistoryQuery{});
  ASSERT_FALSE(orders.ok());
  EXPECT_EQ(orders.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mb::projection
