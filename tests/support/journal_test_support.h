// Shared fixtures of the journal's unit tests (src/journal/*_test.cc): a
// temporary directory per test, file helpers, a real engine session whose
// events become the journal's records, helpers that write, read and recover
// journals, and JournalTest, the base fixture that gives each test its own
// directory.
//
// Every test works in its own temporary directory. Journals are written from
// the events of a real engine session (deposits, limit orders that trade, IOCs,
// cancels), so payloads have the sizes and shapes of production records.
//
// Header-only: each test binary includes it once.
//
// Thread safety: test code; each test runs on gtest's main thread (InChild
// forks, the child runs alone).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "common/file.h"
#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "journal/data_dir.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/recovery.h"
#include "journal/snapshot.h"
#include "journal/writer.h"
#include "workload/engine_workload.h"

namespace mb::journal {

namespace fs = std::filesystem;
using engine::Event;
using engine::EventBuffer;
using Bytes = std::vector<std::byte>;

#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const ::mb::Status assert_ok_ = (expr);               \
    ASSERT_TRUE(assert_ok_.ok()) << assert_ok_.message(); \
  } while (0)

#define EXPECT_OK_INVARIANTS(eng)                      \
  do {                                                 \
    const ::mb::Status inv_ = (eng).CheckInvariants(); \
    EXPECT_TRUE(inv_.ok()) << inv_.message();          \
  } while (0)

#define EXPECT_HAS(text, needle)                               \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (text) << "\"\n  does not mention \"" << (needle) << "\""

inline bool Has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// ---------------------------------------------------------------------------
// Files and directories

// A fresh directory under the system's temporary directory, removed (with
// owner permissions given back first) when the test ends.
class TempDir {
 public:
  TempDir() {
    static std::atomic<uint32_t> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / fmt::format("mb_journal_test_{}_{}_{}.{}", ::getpid(),
                                                counter++, info->test_suite_name(), info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    std::error_code it_ec;
    for (auto it = fs::recursive_directory_iterator(path_, it_ec);
         !it_ec && it != fs::recursive_directory_iterator(); it.increment(it_ec)) {
      if (it->is_directory(ec)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      }
    }
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline Bytes Load(const fs::path& path) {
  auto bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : Bytes{};
}

inline void Store(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  EXPECT_TRUE(f.good()) << "writing " << path;
}

// Every file under root except LOCK (which holds the pid of the last opener),
// by relative path: two equal trees mean nothing changed on disk.
inline std::map<std::string, Bytes> Tree(const fs::path& root) {
  std::map<std::string, Bytes> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().filename() == "LOCK") continue;
    out[fs::relative(e.path(), root).string()] = Load(e.path());
  }
  return out;
}

// Segment files, sorted by name (== by first sequence).
inline std::vector<fs::path> Segments(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "journal", ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline void CopyTree(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

// ---------------------------------------------------------------------------
// A real engine session

inline constexpr MarketId kMarket{0};
inline constexpr AssetId kUsdt{0};
inline constexpr AssetId kBtc{1};
inline constexpr uint32_t kTraders = 6;
inline constexpr int64_t kCenter = 3'000'000;  // ticks: 30,000.00 USDT

// One market BTCUSDT, tick 0.01 USDT, lot 0.0001 BTC (one tick x one lot is one
// quote unit); accounts 1..kTraders trade, 0 collects fees.
inline engine::EngineConfig TestConfig(int32_t maker_fee_bps = 2) {
  engine::EngineConfig c;
  c.assets = {engine::AssetSpec{"USDT", 6}, engine::AssetSpec{"BTC", 8}};
  engine::MarketSpec m;
  m.symbol = "BTCUSDT";
  m.base = kBtc;
  m.quote = kUsdt;
  m.tick_units = 10'000;
  m.lot_units = 10'000;
  m.min_qty = Qty{1};
  m.max_qty = Qty{1'000'000};
  m.max_price = Price{1'000'000'000};
  m.min_notional = Amount{0};
  m.maker_fee_bps = maker_fee_bps;
  m.taker_fee_bps = 5;
  c.markets = {m};
  c.max_accounts = kTraders + 1;
  c.fee_account = AccountId{0};
  c.expected_open_orders = 1024;
  c.client_id_memory = 64;
  const Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

using bench::Rng;  // the project's seeded generator (src/workload)

// The outcome of every command of one engine session.
struct History {
  engine::EngineConfig config;
  uint64_t config_hash = 0;
  std::vector<EventBuffer> records;  // records[s - 1]: the events of sequence s
  std::vector<uint64_t> hashes;      // hashes[s - 1]: StateHash() after sequence s
  uint64_t events = 0;
  uint64_t trades = 0;
  uint64_t cancels = 0;
};

// Deposits for every trader (2 per trader), then limit orders around one price
// that cross often (GTC and IOC) and cancels of resting orders.
inline History MakeHistory(uint64_t seed, std::size_t commands) {
  History h;
  h.config = TestConfig();
  engine::Engine eng(h.config);
  h.config_hash = eng.ConfigHash();
  Rng rng(seed);
  int64_t ts = 1'700'000'000'000'000'000 + static_cast<int64_t>(seed) * 1'000'000'000;
  auto run = [&](const engine::CommandBody& body) {
    engine::Command cmd{ts, body};
    ts += 1'000 + static_cast<int64_t>(rng.Below(1'000));
    EventBuffer out;
    eng.Process(cmd, &out);
    for (const Event& e : out) {
      if (e.type() == engine::EventType::kTrade) ++h.trades;
      if (e.type() == engine::EventType::kOrderCanceled) ++h.cancels;
    }
    h.events += out.size();
    h.records.push_back(std::move(out));
    h.hashes.push_back(eng.StateHash());
  };
  for (uint32_t a = 1; a <= kTraders; ++a) {
    for (AssetId asset : {kUsdt, kBtc}) {
      if (h.records.size() == commands) break;
      engine::Deposit d;
      d.account = AccountId{a};
      d.asset = asset;
      d.amount = Amount{1'000'000'000'000'000};
      d.ref = TransferRef::From(fmt::format("dep-{}-{}-{}", seed, a, Raw(asset)));
      run(d);
    }
  }
  while (h.records.size() < commands) {
    const uint64_t pick = rng.Below(100);
    const engine::Side side = rng.Below(2) == 0 ? engine::Side::kBuy : engine::Side::kSell;
    if (pick < 12) {
      const std::vector<engine::OrderView> open = eng.Orders(kMarket, side);
      if (!open.empty()) {
        const engine::OrderView& o = open[rng.Below(open.size())];
        run(engine::CancelOrder{o.terms.account, kMarket, o.id, {}, {}});
        continue;
      }
    }
    engine::PlaceOrder p;
    p.account = AccountId{static_cast<uint32_t>(1 + rng.Below(kTraders))};
    p.market = kMarket;
    p.side = side;
    p.type = engine::OrderType::kLimit;
    p.tif = pick < 22 ? engine::TimeInForce::kIoc : engine::TimeInForce::kGtc;
    // Bids in [center-15, center+5], asks in [center-5, center+15]: they overlap.
    const int64_t away = rng.Between(-5, 15);
    p.price = Price{side == engine::Side::kBuy ? kCenter - away : kCenter + away};
    p.qty = Qty{rng.Between(1, 20)};
    run(p);
  }
  const Status inv = eng.CheckInvariants();
  EXPECT_TRUE(inv.ok()) << inv.message();
  return h;
}

// A fresh engine that has applied records 1..seq of h.
inline engine::Engine EngineAt(const History& h, uint64_t seq) {
  engine::Engine e(h.config);
  for (uint64_t s = 1; s <= seq; ++s) {
    for (const Event& ev : h.records[s - 1]) e.Apply(ev);
  }
  return e;
}

// The codec bytes of a command's events, back to back (a record's payload).
inline Bytes Encoded(std::span<const Event> events) {
  Bytes out;
  for (const Event& e : events) {
    const Bytes one = codec::EncodeToVector(e);
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

// ---------------------------------------------------------------------------
// Writing and reading journals

inline JournalOptions Options(uint64_t segment_bytes = 128u << 20,
                              FsyncPolicy policy = FsyncPolicy::kFsync) {
  JournalOptions o;
  o.policy = policy;
  o.segment_bytes = segment_bytes;
  return o;
}

// Appends records first..last of h to the journal at root (which must end at
// first - 1), with Write() + Sync() after every `group` appends. Returns the
// checksum Append gave each record.
inline Result<std::vector<uint64_t>> AppendHistory(const fs::path& root, const History& h,
                                                   uint64_t first, uint64_t last,
                                                   const JournalOptions& options,
                                                   std::size_t group = 5) {
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  ScanOptions so;
  so.config_hash = h.config_hash;
  so.repair = true;
  auto scan = ScanJournal(*dir, so, nullptr);
  if (!scan.ok()) return scan.status();
  if (scan->last_seq + 1 != first) {
    return Status(StatusCode::kInternal,
                  fmt::format("the journal ends at {}, appending from {}", scan->last_seq, first));
  }
  auto w = JournalWriter::Open(*dir, options, h.config_hash, *scan);
  if (!w.ok()) return w.status();
  std::vector<uint64_t> sums;
  for (uint64_t s = first; s <= last; ++s) {
    sums.push_back((*w)->Append(h.records[s - 1]));
    if ((s - first + 1) % group == 0 || s == last) {
      MB_RETURN_IF_ERROR((*w)->Write());
      MB_RETURN_IF_ERROR((*w)->Sync());
    }
  }
  if ((*w)->durable_seq() != last) {
    return Status(StatusCode::kInternal, fmt::format("durable_seq {}", (*w)->durable_seq()));
  }
  return sums;
}

inline Result<std::vector<uint64_t>> WriteHistory(const fs::path& root, const History& h,
                                                  uint64_t count,
                                                  const JournalOptions& options = Options(),
                                                  std::size_t group = 5) {
  return AppendHistory(root, h, 1, count, options, group);
}

// A delivered record, copied out of the scan.
struct Rec {
  uint64_t seq = 0;
  uint64_t checksum = 0;
  Bytes payload;
  std::string segment;  // file name
  uint64_t offset = 0;
  uint64_t end() const { return offset + kRecordHeaderSize + payload.size(); }
};

inline Result<std::vector<Rec>> ReadAll(const DataDir& dir, const ScanOptions& options,
                                        ScanResult* result = nullptr) {
  std::vector<Rec> out;
  auto scan = ScanJournal(dir, options, [&](const JournalRecord& r) {
    out.push_back(Rec{r.seq, r.checksum, Bytes(r.payload.begin(), r.payload.end()),
                      r.segment->filename().string(), r.offset});
    return Status::Ok();
  });
  if (!scan.ok()) return scan.status();
  if (result != nullptr) *result = *scan;
  return out;
}

// A read-only scan (never repairs) of the journal at root.
inline Result<std::vector<Rec>> ReadAll(const fs::path& root, const ScanOptions& options = {},
                                        ScanResult* result = nullptr) {
  auto dir = DataDir::Open(root, OpenMode::kReadOnly);
  if (!dir.ok()) return dir.status();
  return ReadAll(*dir, options, result);
}

// Checks that records 1..n are present, dense, with the checksums and the
// payloads h and sums say.
inline ::testing::AssertionResult HoldsRecords(const std::vector<Rec>& recs, const History& h,
                                               const std::vector<uint64_t>& sums, uint64_t n) {
  if (recs.size() != n) {
    return ::testing::AssertionFailure() << recs.size() << " records, expected " << n;
  }
  for (uint64_t s = 1; s <= n; ++s) {
    const Rec& r = recs[s - 1];
    if (r.seq != s) return ::testing::AssertionFailure() << "record " << s << " has seq " << r.seq;
    if (s <= sums.size() && r.checksum != sums[s - 1]) {
      return ::testing::AssertionFailure() << "record " << s << ": checksum differs";
    }
    if (r.payload != Encoded(h.records[s - 1])) {
      return ::testing::AssertionFailure() << "record " << s << ": payload differs";
    }
  }
  return ::testing::AssertionSuccess();
}

inline Status RecoverInto(const fs::path& root, engine::Engine* eng, const RecoveryOptions& options,
                          RecoveryReport* report, OpenMode mode = OpenMode::kReadOnly) {
  auto dir = DataDir::Open(root, mode);
  if (!dir.ok()) return dir.status();
  auto r = Recover(*dir, eng, options);
  if (!r.ok()) return r.status();
  *report = *r;
  return Status::Ok();
}

inline RecoveryOptions Quiet(bool use_snapshots = true) {
  RecoveryOptions o;
  o.progress = false;
  o.use_snapshots = use_snapshots;
  return o;
}

// Writes a snapshot of h's state after `seq` into the data directory at root.
inline Result<fs::path> Snapshot(const fs::path& root, const History& h, uint64_t seq,
                                 uint64_t record_checksum, uint32_t keep = 10) {
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  const engine::Engine e = EngineAt(h, seq);
  SnapshotMeta meta;
  meta.record_checksum = record_checksum;
  return WriteSnapshot(*dir, e.ExportImage(), &meta, 3, keep);
}

// ---------------------------------------------------------------------------
// Processes and limits

// Runs fn in a child process; returns its exit status (or -1).
template <class Fn>
int InChild(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Sets RLIMIT_FSIZE for this process, with SIGXFSZ ignored so that a write past
// it fails with EFBIG instead of killing the process; both restored on exit.
class FileSizeLimit {
 public:
  FileSizeLimit() {
    ok_ = ::getrlimit(RLIMIT_FSIZE, &saved_) == 0;
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
  }
  ~FileSizeLimit() {
    Lift();
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  bool Set(uint64_t bytes) {
    rlimit r = saved_;
    r.rlim_cur = static_cast<rlim_t>(bytes);
    return ok_ && ::setrlimit(RLIMIT_FSIZE, &r) == 0;
  }
  void Lift() {
    if (ok_) (void)::setrlimit(RLIMIT_FSIZE, &saved_);
  }

 private:
  bool ok_ = false;
  rlimit saved_{};
  sighandler_t old_handler_ = SIG_DFL;
};

// ---------------------------------------------------------------------------
// Fixture

// Gives each test a fresh directory, tmp_, removed when the test ends.
class JournalTest : public ::testing::Test {
 protected:
  TempDir tmp_;
};

}  // namespace mb::journal
