// Tests of the journal: the framing, segments and their rolls, torn tails and
// damage in the middle, the data directory and its lock, snapshots, write
// errors from the kernel, and recovery of a real engine session.
//
// Every test works in its own temporary directory. Journals are written from
// the events of a real engine session (deposits, limit orders that trade, IOCs,
// cancels), so payloads have the sizes and shapes of production records.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
namespace {

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

bool Has(std::string_view text, std::string_view needle) {
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

Bytes Load(const fs::path& path) {
  auto bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : Bytes{};
}

void Store(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  EXPECT_TRUE(f.good()) << "writing " << path;
}

// Every file under root except LOCK (which holds the pid of the last opener),
// by relative path: two equal trees mean nothing changed on disk.
std::map<std::string, Bytes> Tree(const fs::path& root) {
  std::map<std::string, Bytes> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().filename() == "LOCK") continue;
    out[fs::relative(e.path(), root).string()] = Load(e.path());
  }
  return out;
}

// Segment files, sorted by name (== by first sequence).
std::vector<fs::path> Segments(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "journal", ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void CopyTree(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

// ---------------------------------------------------------------------------
// A real engine session

constexpr MarketId kMarket{0};
constexpr AssetId kUsdt{0};
constexpr AssetId kBtc{1};
constexpr uint32_t kTraders = 6;
constexpr int64_t kCenter = 3'000'000;  // ticks: 30,000.00 USDT

// One market BTCUSDT, tick 0.01 USDT, lot 0.0001 BTC (one tick x one lot is one
// quote unit); accounts 1..kTraders trade, 0 collects fees.
engine::EngineConfig TestConfig(int32_t maker_fee_bps = 2) {
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
History MakeHistory(uint64_t seed, std::size_t commands) {
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
engine::Engine EngineAt(const History& h, uint64_t seq) {
  engine::Engine e(h.config);
  for (uint64_t s = 1; s <= seq; ++s) {
    for (const Event& ev : h.records[s - 1]) e.Apply(ev);
  }
  return e;
}

// The codec bytes of a command's events, back to back (a record's payload).
Bytes Encoded(std::span<const Event> events) {
  Bytes out;
  for (const Event& e : events) {
    const Bytes one = codec::EncodeToVector(e);
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

// ---------------------------------------------------------------------------
// Writing and reading journals

JournalOptions Options(uint64_t segment_bytes = 128u << 20,
                       FsyncPolicy policy = FsyncPolicy::kFsync) {
  JournalOptions o;
  o.policy = policy;
  o.segment_bytes = segment_bytes;
  return o;
}

// Appends records first..last of h to the journal at root (which must end at
// first - 1), with Write() + Sync() after every `group` appends. Returns the
// checksum Append gave each record.
Result<std::vector<uint64_t>> AppendHistory(const fs::path& root, const History& h, uint64_t first,
                                            uint64_t last, const JournalOptions& options,
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

Result<std::vector<uint64_t>> WriteHistory(const fs::path& root, const History& h, uint64_t count,
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

Result<std::vector<Rec>> ReadAll(const DataDir& dir, const ScanOptions& options,
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
Result<std::vector<Rec>> ReadAll(const fs::path& root, const ScanOptions& options = {},
                                 ScanResult* result = nullptr) {
  auto dir = DataDir::Open(root, OpenMode::kReadOnly);
  if (!dir.ok()) return dir.status();
  return ReadAll(*dir, options, result);
}

// Checks that records 1..n are present, dense, with the checksums and the
// payloads h and sums say.
::testing::AssertionResult HoldsRecords(const std::vector<Rec>& recs, const History& h,
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

Status RecoverInto(const fs::path& root, engine::Engine* eng, const RecoveryOptions& options,
                   RecoveryReport* report, OpenMode mode = OpenMode::kReadOnly) {
  auto dir = DataDir::Open(root, mode);
  if (!dir.ok()) return dir.status();
  auto r = Recover(*dir, eng, options);
  if (!r.ok()) return r.status();
  *report = *r;
  return Status::Ok();
}

RecoveryOptions Quiet(bool use_snapshots = true) {
  RecoveryOptions o;
  o.progress = false;
  o.use_snapshots = use_snapshots;
  return o;
}

// Writes a snapshot of h's state after `seq` into the data directory at root.
Result<fs::path> Snapshot(const fs::path& root, const History& h, uint64_t seq,
                          uint64_t record_checksum, uint32_t keep = 10) {
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  if (!dir.ok()) return dir.status();
  const engine::Engine e = EngineAt(h, seq);
  SnapshotMeta meta;
  meta.record_checksum = record_checksum;
  return WriteSnapshot(*dir, e.ExportImage(), &meta, 3, keep);
}

// ===========================================================================
// Framing

TEST(JournalFormat, SegmentHeaderLayoutAndEverySingleByteDamage) {
  std::array<std::byte, kSegmentHeaderSize> b{};
  EncodeSegmentHeader({kSegmentFormatVersion, 42, 0x1122334455667788}, b);
  EXPECT_EQ(std::memcmp(b.data(), "MBJRNL01", 8), 0);
  EXPECT_EQ(GetU16(b.data() + 8), 1u);
  EXPECT_EQ(GetU16(b.data() + 10), 40u);
  EXPECT_EQ(GetU32(b.data() + 12), 0u);
  EXPECT_EQ(GetU64(b.data() + 16), 42u);
  EXPECT_EQ(GetU64(b.data() + 24), 0x1122334455667788u);
  EXPECT_EQ(GetU64(b.data() + 32), XXH3_64bits(b.data(), 32));
  auto h = DecodeSegmentHeader(b, "seg");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->version, 1u);
  EXPECT_EQ(h->first_seq, 42u);
  EXPECT_EQ(h->config_hash, 0x1122334455667788u);

  for (std::size_t i = 0; i < b.size(); ++i) {
    auto damaged = b;
    damaged[i] ^= std::byte{0x04};
    auto d = DecodeSegmentHeader(damaged, "seg");
    EXPECT_FALSE(d.ok()) << "byte " << i;
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << "byte " << i;
  }
  auto shorter = DecodeSegmentHeader(std::span(b).first(39), "seg");
  EXPECT_EQ(shorter.status().code(), StatusCode::kCorruption);
}

TEST(JournalFormat, RecordFrameAndItsErrors) {
  const History h = MakeHistory(3, 20);
  const Bytes payload = Encoded(h.records[19]);
  Bytes rec(kRecordHeaderSize + payload.size());
  std::copy(payload.begin(), payload.end(), rec.begin() + kRecordHeaderSize);
  EncodeRecordHeader(RecordType::kCommandOutcome, 20, payload,
                     std::span<std::byte, kRecordHeaderSize>(rec.data(), kRecordHeaderSize));
  EXPECT_EQ(GetU32(rec.data()), payload.size());
  EXPECT_EQ(rec[4], std::byte{1});
  EXPECT_EQ(rec[5], std::byte{0});
  EXPECT_EQ(rec[6], std::byte{0});
  EXPECT_EQ(rec[7], std::byte{0});
  EXPECT_EQ(GetU64(rec.data() + 8), 20u);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, rec.data(), 16);
  XXH3_64bits_update(st, payload.data(), payload.size());
  EXPECT_EQ(GetU64(rec.data() + 16), XXH3_64bits_digest(st));
  XXH3_freeState(st);

  ParsedRecord ok = ParseRecord(rec);
  ASSERT_EQ(ok.error, RecordError::kOk);
  EXPECT_EQ(ok.size, rec.size());
  EXPECT_EQ(ok.header.seq, 20u);
  // Trailing bytes are the next record's business.
  Bytes longer = rec;
  longer.resize(rec.size() + 7);
  EXPECT_EQ(ParseRecord(longer).error, RecordError::kOk);

  EXPECT_EQ(ParseRecord(std::span(rec).first(kRecordHeaderSize - 1)).error,
            RecordError::kShortHeader);
  EXPECT_EQ(ParseRecord(std::span(rec).first(rec.size() - 1)).error, RecordError::kShortPayload);
  Bytes bad;
  for (std::size_t reserved : {5u, 6u, 7u}) {
    bad = rec;
    bad[reserved] = std::byte{1};
    EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadLength) << "reserved byte " << reserved;
  }
  bad = rec;
  PutU32(bad.data(), kMaxRecordPayload + 1);
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadLength);
  bad = rec;
  bad[kRecordHeaderSize + 3] ^= std::byte{0x80};
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadChecksum);
  // A type this build does not know, with a checksum that matches.
  bad = rec;
  bad[4] = std::byte{2};
  PutU64(bad.data() + 16, RecordChecksum(std::span<const std::byte, 16>(bad.data(), 16), payload));
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kUnknownType);
}

TEST(JournalFormat, FileNames) {
  EXPECT_EQ(SegmentFileName(42), "00000000000000000042.mbj");
  EXPECT_EQ(SnapshotFileName(18446744073709551615u), "18446744073709551615.mbs");
  uint64_t seq = 0;
  EXPECT_TRUE(ParseSegmentFileName("00000000000000000042.mbj", &seq));
  EXPECT_EQ(seq, 42u);
  EXPECT_TRUE(ParseSnapshotFileName("00000000000000001000.mbs", &seq));
  EXPECT_EQ(seq, 1000u);
  for (const char* bad : {"42.mbj", "0000000000000000004x.mbj", "00000000000000000042.mbs",
                          "00000000000000000042.mbj.tmp", "000000000000000000042.mbj",
                          "99999999999999999999.mbj", "notes.txt", ""}) {
    EXPECT_FALSE(ParseSegmentFileName(bad, &seq)) << bad;
  }
  EXPECT_FALSE(ParseSnapshotFileName("00000000000000000042.mbj", &seq));
  EXPECT_FALSE(ParseSnapshotFileName("00000000000000000042.mbs.tmp", &seq));
}

TEST(JournalFormat, DecodeOutcomeChecksTheRecord) {
  const History h = MakeHistory(3, 30);
  for (uint64_t s : {1u, 20u, 30u}) {
    const Bytes payload = Encoded(h.records[s - 1]);
    JournalRecord rec{s, 0, payload, nullptr, 0};
    EventBuffer out;
    ASSERT_OK(DecodeOutcome(rec, &out));
    EXPECT_EQ(Encoded(out), payload);

    rec.seq = s + 1;  // the events carry another sequence
    out.clear();
    EXPECT_EQ(DecodeOutcome(rec, &out).code(), StatusCode::kCorruption);
    rec.seq = s;
    const Bytes cut(payload.begin(), payload.end() - 1);  // not whole events
    rec.payload = cut;
    out.clear();
    const Status st = DecodeOutcome(rec, &out);
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_HAS(st.message(), "does not decode");
  }
  JournalRecord empty{5, 0, {}, nullptr, 0};
  EventBuffer out;
  EXPECT_EQ(DecodeOutcome(empty, &out).code(), StatusCode::kCorruption);
}

// ===========================================================================
// Writer and reader

TEST(JournalWriter, RoundTripAcrossSegmentRolls) {
  TempDir tmp;
  const History h = MakeHistory(1, 300);
  ASSERT_GT(h.trades, 20u);
  ASSERT_GT(h.cancels, 5u);
  auto sums = WriteHistory(tmp.path(), h, 300, Options(2048), 7);
  ASSERT_TRUE(sums.ok()) << sums.status().message();

  const std::vector<fs::path> segs = Segments(tmp.path());
  ASSERT_GE(segs.size(), 5u);
  ScanResult scan;
  ScanOptions so;
  so.config_hash = h.config_hash;
  auto recs = ReadAll(tmp.path(), so, &scan);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, *sums, 300));

  // DecodeOutcome gives back exactly the events appended.
  for (const Rec& r : *recs) {
    EventBuffer events;
    JournalRecord jr{r.seq, r.checksum, r.payload, nullptr, r.offset};
    ASSERT_OK(DecodeOutcome(jr, &events));
    ASSERT_EQ(events.size(), h.records[r.seq - 1].size()) << r.seq;
    ASSERT_EQ(Encoded(events), Encoded(h.records[r.seq - 1])) << r.seq;
  }

  EXPECT_EQ(scan.segments, segs.size());
  EXPECT_EQ(scan.first_seq, 1u);
  EXPECT_EQ(scan.last_seq, 300u);
  EXPECT_EQ(scan.last_checksum, sums->back());
  EXPECT_EQ(scan.records_checked, 300u);
  EXPECT_EQ(scan.records_delivered, 300u);
  EXPECT_FALSE(scan.tail.has_value());
  EXPECT_EQ(scan.last_segment, segs.back());
  EXPECT_EQ(scan.last_segment_size, fs::file_size(segs.back()));
  uint64_t total = 0;
  for (const fs::path& p : segs) total += fs::file_size(p);
  EXPECT_EQ(scan.bytes, total);

  // Each segment: named after its first record, a header saying the same,
  // records back to back from offset 40 to the end of the file; every segment
  // but the last reached the roll size.
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::string name = segs[i].filename().string();
    uint64_t first = 0;
    ASSERT_TRUE(ParseSegmentFileName(name, &first)) << name;
    const Bytes bytes = Load(segs[i]);
    auto header = DecodeSegmentHeader(bytes, name);
    ASSERT_TRUE(header.ok()) << header.status().message();
    EXPECT_EQ(header->first_seq, first);
    EXPECT_EQ(header->config_hash, h.config_hash);
    uint64_t expected_offset = kSegmentHeaderSize;
    uint64_t expected_seq = first;
    for (const Rec& r : *recs) {
      if (r.segment != name) continue;
      EXPECT_EQ(r.seq, expected_seq++) << name;
      EXPECT_EQ(r.offset, expected_offset) << name;
      expected_offset = r.end();
    }
    EXPECT_GT(expected_seq, first) << name << " holds no record";
    EXPECT_EQ(expected_offset, bytes.size()) << name;
    if (i + 1 < segs.size()) {
      EXPECT_GE(bytes.size(), 2048u) << name;
    }
  }

  // Delivery from a later sequence, skipping the records of earlier segments.
  so.deliver_from = 150;
  so.check_all = false;
  auto later = ReadAll(tmp.path(), so, &scan);
  ASSERT_TRUE(later.ok()) << later.status().message();
  ASSERT_EQ(later->size(), 151u);
  EXPECT_EQ(later->front().seq, 150u);
  EXPECT_EQ(later->back().seq, 300u);
  EXPECT_EQ(scan.last_seq, 300u);
  EXPECT_EQ(scan.last_checksum, sums->back());
}

TEST(JournalWriter, ReopenContinuesTheLastSegment) {
  TempDir tmp;
  const History h = MakeHistory(2, 60);
  auto first = WriteHistory(tmp.path(), h, 20, Options(1 << 20));
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::vector<fs::path> segs = Segments(tmp.path());
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].filename(), SegmentFileName(1));
  const uint64_t size20 = fs::file_size(segs[0]);

  std::vector<uint64_t> sums = *first;
  {
    auto dir = DataDir::Open(tmp.path(), OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    ScanOptions so;
    so.repair = true;
    so.config_hash = h.config_hash;
    auto scan = ScanJournal(*dir, so, nullptr);
    ASSERT_TRUE(scan.ok()) << scan.status().message();
    EXPECT_EQ(scan->last_seq, 20u);
    EXPECT_EQ(scan->last_checksum, sums.back());
    EXPECT_EQ(scan->last_segment, segs[0]);
    EXPECT_EQ(scan->last_segment_size, size20);
    auto w = JournalWriter::Open(*dir, Options(1 << 20), h.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ((*w)->next_seq(), 21u);
    EXPECT_EQ((*w)->written_seq(), 20u);
    EXPECT_EQ((*w)->durable_seq(), 20u);
    EXPECT_EQ((*w)->bytes_on_disk(), size20);
    for (uint64_t s = 21; s <= 40; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    ASSERT_OK((*w)->Write());
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 40u);
    EXPECT_EQ((*w)->bytes_on_disk(), fs::file_size(segs[0]));
  }
  segs = Segments(tmp.path());
  ASSERT_EQ(segs.size(), 1u) << "reopening must append to the last segment";
  EXPECT_GT(fs::file_size(segs[0]), size20);
  auto recs = ReadAll(tmp.path());
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 40));

  // A third session with a tiny roll size: every group starts a segment named
  // after its first record.
  auto third = AppendHistory(tmp.path(), h, 41, 60, Options(64), 5);
  ASSERT_TRUE(third.ok()) << third.status().message();
  sums.insert(sums.end(), third->begin(), third->end());
  segs = Segments(tmp.path());
  std::vector<std::string> names;
  for (const fs::path& p : segs) names.push_back(p.filename().string());
  EXPECT_EQ(names,
            (std::vector<std::string>{SegmentFileName(1), SegmentFileName(41), SegmentFileName(46),
                                      SegmentFileName(51), SegmentFileName(56)}));
  recs = ReadAll(tmp.path());
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 60));
}

TEST(JournalWriter, DurableSequenceFollowsThePolicy) {
  TempDir tmp;
  const History h = MakeHistory(2, 6);
  const auto now = std::chrono::steady_clock::now;
  struct Case {
    const char* policy;
    bool durable_on_write;
  };
  for (const Case& c : {Case{"fsync", false}, Case{"none", true}, Case{"interval:50", false}}) {
    SCOPED_TRACE(c.policy);
    const fs::path root = tmp / c.policy;
    JournalOptions o;
    ASSERT_OK(ParseFsyncPolicy(c.policy, &o));
    EXPECT_EQ(DescribeFsyncPolicy(o), c.policy);
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto scan = ScanJournal(*dir, {}, nullptr);
    ASSERT_TRUE(scan.ok());
    auto w = JournalWriter::Open(*dir, o, h.config_hash, *scan);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_FALSE((*w)->SyncDue(now()));
    EXPECT_EQ((*w)->NextSyncDeadline(), std::chrono::steady_clock::time_point::max());
    for (uint64_t s = 1; s <= 3; ++s) (void)(*w)->Append(h.records[s - 1]);
    EXPECT_EQ((*w)->next_seq(), 4u);
    EXPECT_EQ((*w)->written_seq(), 0u);
    EXPECT_EQ((*w)->durable_seq(), 0u);
    const auto before = now();
    ASSERT_OK((*w)->Write());
    EXPECT_EQ((*w)->written_seq(), 3u);
    EXPECT_EQ((*w)->durable_seq(), c.durable_on_write ? 3u : 0u);
    EXPECT_EQ((*w)->SyncDue(now()), o.policy == FsyncPolicy::kFsync);
    if (o.policy == FsyncPolicy::kInterval) {
      const auto deadline = (*w)->NextSyncDeadline();
      EXPECT_GE(deadline, before + std::chrono::milliseconds(50));
      EXPECT_LE(deadline, now() + std::chrono::milliseconds(50));
      EXPECT_FALSE((*w)->SyncDue(deadline - std::chrono::milliseconds(1)));
      EXPECT_TRUE((*w)->SyncDue(deadline));
    }
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 3u);
    EXPECT_FALSE((*w)->SyncDue(now() + std::chrono::hours(1)));
  }
  JournalOptions o;
  for (const char* bad :
       {"interval:0", "interval:60001", "interval:", "interval:5ms", "always", "FSYNC", ""}) {
    const Status s = ParseFsyncPolicy(bad, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  ASSERT_OK(ParseFsyncPolicy("interval:60000", &o));
  EXPECT_EQ(o.interval_ms, 60000u);
}

// ===========================================================================
// Torn tails

// The journal of `bytes` (one segment) cut at `cut`: a read-write open repairs
// it to the last whole record, a writer continues it with the next record, and
// the result is the original journal's prefix up to that record.
::testing::AssertionResult RepairsTornCut(const fs::path& root, const Bytes& bytes, uint64_t cut,
                                          const std::vector<Rec>& recs, const History& h) {
  const std::string name = SegmentFileName(1);
  fs::remove_all(root);
  fs::create_directories(root / "journal");
  const fs::path seg = root / "journal" / name;
  Store(seg, std::span(bytes).first(cut));

  // k: the records wholly before the cut.
  uint64_t k = 0;
  while (k < recs.size() && recs[k].end() <= cut) ++k;
  const uint64_t keep = k == 0 ? kSegmentHeaderSize : recs[k - 1].end();

  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  if (!dir.ok()) return ::testing::AssertionFailure() << dir.status().message();
  ScanOptions so;
  so.repair = true;
  so.config_hash = h.config_hash;
  ScanResult scan;
  auto got = ReadAll(*dir, so, &scan);
  if (!got.ok()) return ::testing::AssertionFailure() << got.status().message();
  if (got->size() != k || scan.last_seq != k) {
    return ::testing::AssertionFailure()
           << got->size() << " records, last_seq " << scan.last_seq << ", expected " << k;
  }
  for (uint64_t s = 1; s <= k; ++s) {
    if ((*got)[s - 1].checksum != recs[s - 1].checksum) {
      return ::testing::AssertionFailure() << "record " << s << " differs";
    }
  }
  if (cut == keep) {
    if (scan.tail) return ::testing::AssertionFailure() << "damage reported at a record boundary";
  } else {
    if (!scan.tail) return ::testing::AssertionFailure() << "no tail damage reported";
    const TailDamage& t = *scan.tail;
    if (t.segment != seg || t.offset != keep || t.bytes != cut - keep || t.records < 1 ||
        !t.repaired || t.reason.empty()) {
      return ::testing::AssertionFailure() << "tail: " << Describe(t) << " (expected " << cut - keep
                                           << " bytes after " << keep << ")";
    }
  }
  if (fs::file_size(seg) != keep) {
    return ::testing::AssertionFailure()
           << "file is " << fs::file_size(seg) << " bytes, not " << keep;
  }
  if (scan.last_segment_size != keep || scan.bytes != keep) {
    return ::testing::AssertionFailure() << "scan sizes " << scan.last_segment_size;
  }
  // Continue with the next record.
  auto w = JournalWriter::Open(*dir, Options(1 << 20, FsyncPolicy::kNone), h.config_hash, scan);
  if (!w.ok()) return ::testing::AssertionFailure() << w.status().message();
  if ((*w)->next_seq() != k + 1) return ::testing::AssertionFailure() << "next_seq";
  const uint64_t sum = (*w)->Append(h.records[k]);
  Status s = (*w)->Write();
  if (s.ok()) s = (*w)->Sync();
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  w->reset();
  if (k < recs.size() && sum != recs[k].checksum) {
    return ::testing::AssertionFailure() << "appended record's checksum differs";
  }
  ScanResult again;
  ScanOptions plain;
  plain.config_hash = h.config_hash;
  auto all = ReadAll(root, plain, &again);
  if (!all.ok()) return ::testing::AssertionFailure() << all.status().message();
  if (again.tail || again.last_seq != k + 1 || all->size() != k + 1) {
    return ::testing::AssertionFailure() << "re-scan: last_seq " << again.last_seq;
  }
  const Bytes now = Load(seg);
  if (now != Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(recs[k].end()))) {
    return ::testing::AssertionFailure() << "the repaired and continued file is not the original "
                                            "journal's prefix";
  }
  return ::testing::AssertionSuccess();
}

TEST(JournalTornTail, EveryCutInTheLastThreeRecords) {
  TempDir tmp;
  const History h = MakeHistory(4, 31);
  const fs::path src = tmp / "src";
  // Records 1..31 are written for the expected bytes; the journal under test
  // is records 1..30 (31 is what the writer appends after the deepest cut).
  auto sums = WriteHistory(src, h, 31, Options(1 << 20));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_EQ(Segments(src).size(), 1u);
  auto recs = ReadAll(src);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  ASSERT_EQ(recs->size(), 31u);
  const Bytes full = Load(Segments(src)[0]);
  const uint64_t end30 = (*recs)[29].end();
  const uint64_t from = (*recs)[27].offset;  // the 3rd-last record of 30
  ASSERT_GT(end30 - from, 3 * kRecordHeaderSize);

  uint64_t cuts = 0;
  for (uint64_t cut = from; cut <= end30; ++cut, ++cuts) {
    const ::testing::AssertionResult r = RepairsTornCut(tmp / "cut", full, cut, *recs, h);
    if (!r) {
      ADD_FAILURE() << "cut at offset " << cut << " (records 28..30 span " << from << ".." << end30
                    << "): " << r.message();
      break;
    }
  }
  EXPECT_EQ(cuts, end30 - from + 1);
}

TEST(JournalTornTail, ZeroFilledTail) {
  TempDir tmp;
  const History h = MakeHistory(5, 11);
  const fs::path src = tmp / "src";
  auto sums = WriteHistory(src, h, 11);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  auto recs = ReadAll(src);
  ASSERT_TRUE(recs.ok());
  const Bytes full = Load(Segments(src)[0]);
  const uint64_t end10 = (*recs)[9].end();

  for (uint64_t zeros : {1u, 10u, 24u, 25u, 4096u}) {
    SCOPED_TRACE(fmt::format("{} zero bytes", zeros));
    const fs::path root = tmp / "z";
    fs::remove_all(root);
    fs::create_directories(root / "journal");
    const fs::path seg = root / "journal" / SegmentFileName(1);
    Bytes bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(end10));
    bytes.resize(end10 + zeros);
    Store(seg, bytes);

    // Found, not cut, by a read-only scan.
    ScanResult scan;
    auto ro = ReadAll(root, {}, &scan);
    ASSERT_TRUE(ro.ok()) << ro.status().message();
    EXPECT_EQ(scan.last_seq, 10u);
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_FALSE(scan.tail->repaired);
    EXPECT_EQ(fs::file_size(seg), end10 + zeros);

    // Cut by a repairing one, and the journal continues.
    {
      auto dir = DataDir::Open(root, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok());
      ScanOptions so;
      so.repair = true;
      auto rw = ReadAll(*dir, so, &scan);
      ASSERT_TRUE(rw.ok()) << rw.status().message();
      ASSERT_TRUE(scan.tail.has_value());
      EXPECT_EQ(scan.tail->offset, end10);
      EXPECT_EQ(scan.tail->bytes, zeros);
      EXPECT_GE(scan.tail->records, 1u);
      EXPECT_TRUE(scan.tail->repaired);
      EXPECT_EQ(scan.last_seq, 10u);
      EXPECT_EQ(fs::file_size(seg), end10);
      auto w = JournalWriter::Open(*dir, Options(), h.config_hash, scan);
      ASSERT_TRUE(w.ok()) << w.status().message();
      EXPECT_EQ((*w)->Append(h.records[10]), (*sums)[10]);
      ASSERT_OK((*w)->Write());
      ASSERT_OK((*w)->Sync());
    }
    auto again = ReadAll(root, {}, &scan);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_FALSE(scan.tail.has_value());
    EXPECT_TRUE(HoldsRecords(*again, h, *sums, 11));
    EXPECT_EQ(Load(seg), full);
  }
}

// Pages written back out of order when the machine stopped: a zero-filled
// hole with whole records after it. Nothing after the hole was ever covered
// by an fdatasync, so it is a torn tail too (cut at the hole); the same bytes
// non-zero are damage (JournalDamage tests).
TEST(JournalTornTail, ZeroHoleBeforeLaterRecordsIsATornTail) {
  TempDir tmp;
  const History h = MakeHistory(9, 30);
  const fs::path root = tmp / "hole";
  auto sums = WriteHistory(root, h, 30);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  auto recs = ReadAll(root);
  ASSERT_TRUE(recs.ok());
  const fs::path seg = Segments(root)[0];
  Bytes bytes = Load(seg);
  const Rec& r20 = (*recs)[19];  // sequence 20
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(r20.offset),
            bytes.begin() + static_cast<std::ptrdiff_t>(r20.end()), std::byte{0});
  Store(seg, bytes);

  ScanResult scan;
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_TRUE(Has(scan.tail->reason, "a hole left by out-of-order writeback"))
        << scan.tail->reason;
    EXPECT_EQ(scan.tail->offset, r20.offset);
    EXPECT_EQ(scan.last_seq, 19u);
    EXPECT_EQ(fs::file_size(seg), r20.offset);
  }
  // One non-zero byte in the hole makes it damage: refused, file unchanged.
  const fs::path root2 = tmp / "hole2";
  auto sums2 = WriteHistory(root2, h, 30);
  ASSERT_TRUE(sums2.ok());
  const fs::path seg2 = Segments(root2)[0];
  Bytes bytes2 = Load(seg2);
  std::fill(bytes2.begin() + static_cast<std::ptrdiff_t>(r20.offset),
            bytes2.begin() + static_cast<std::ptrdiff_t>(r20.end()), std::byte{0});
  bytes2[r20.offset + 30] = std::byte{7};
  Store(seg2, bytes2);
  auto dir2 = DataDir::Open(root2, OpenMode::kReadWrite);
  ASSERT_TRUE(dir2.ok());
  ScanOptions so2;
  so2.repair = true;
  auto bad = ReadAll(*dir2, so2, &scan);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "refusing to skip it")) << bad.status().message();
  EXPECT_EQ(Load(seg2), bytes2);
}

TEST(JournalTornTail, PartialSegmentHeaderIsRemoved) {
  TempDir tmp;
  const History h = MakeHistory(6, 45);
  const fs::path root = tmp / "multi";
  auto sums = WriteHistory(root, h, 40, Options(1024));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  const std::vector<fs::path> segs = Segments(root);
  ASSERT_GE(segs.size(), 2u);

  std::array<std::byte, kSegmentHeaderSize> header{};
  EncodeSegmentHeader({kSegmentFormatVersion, 41, h.config_hash}, header);
  const fs::path partial = root / "journal" / SegmentFileName(41);
  Store(partial, std::span(header).first(10));

  ScanResult scan;
  auto ro = ReadAll(root, {}, &scan);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  ASSERT_TRUE(scan.tail.has_value());
  EXPECT_EQ(scan.tail->segment, partial);
  EXPECT_EQ(scan.tail->bytes, 10u);
  EXPECT_FALSE(scan.tail->repaired);
  EXPECT_TRUE(fs::exists(partial));
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    so.config_hash = h.config_hash;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_TRUE(scan.tail->repaired);
    EXPECT_FALSE(fs::exists(partial));
    EXPECT_EQ(scan.last_seq, 40u);
    EXPECT_EQ(scan.last_checksum, sums->back());
    EXPECT_EQ(scan.last_segment, segs.back());
    EXPECT_EQ(scan.last_segment_size, fs::file_size(segs.back()));
  }
  auto more = AppendHistory(root, h, 41, 45, Options(1024));
  ASSERT_TRUE(more.ok()) << more.status().message();
  sums->insert(sums->end(), more->begin(), more->end());
  auto all = ReadAll(root, {}, &scan);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_FALSE(scan.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*all, h, *sums, 45));

  // A last segment of zero bytes only (a filesystem that showed the new size
  // before the data after a crash) holds nothing: the tail, removed likewise.
  {
    const std::vector<std::byte> zeros(4096, std::byte{0});
    const fs::path zeroed = root / "journal" / SegmentFileName(46);
    Store(zeroed, zeros);
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    ScanOptions so;
    so.repair = true;
    auto rw = ReadAll(*dir, so, &scan);
    ASSERT_TRUE(rw.ok()) << rw.status().message();
    ASSERT_TRUE(scan.tail.has_value());
    EXPECT_EQ(scan.tail->reason, "segment holds only zero bytes");
    EXPECT_FALSE(fs::exists(zeroed));
    EXPECT_EQ(scan.last_seq, 45u);
  }

  // The only segment, empty or with a partial header: removed; the journal
  // starts again at sequence 1.
  for (uint64_t size : {0u, 10u, 39u}) {
    SCOPED_TRACE(fmt::format("{} header bytes", size));
    const fs::path only = tmp / "only";
    fs::remove_all(only);
    fs::create_directories(only / "journal");
    EncodeSegmentHeader({kSegmentFormatVersion, 1, h.config_hash}, header);
    Store(only / "journal" / SegmentFileName(1), std::span(header).first(size));
    {
      auto dir = DataDir::Open(only, OpenMode::kReadWrite);
      ASSERT_TRUE(dir.ok());
      ScanOptions so;
      so.repair = true;
      auto s = ScanJournal(*dir, so, nullptr);
      ASSERT_TRUE(s.ok()) << s.status().message();
      ASSERT_TRUE(s->tail.has_value());
      EXPECT_TRUE(s->tail->repaired);
      EXPECT_EQ(s->last_seq, 0u);
      EXPECT_EQ(s->segments, 0u);
      EXPECT_TRUE(s->last_segment.empty());
      EXPECT_TRUE(Segments(only).empty());
    }
    auto first = WriteHistory(only, h, 3);
    ASSERT_TRUE(first.ok()) << first.status().message();
    auto recs = ReadAll(only);
    ASSERT_TRUE(recs.ok()) << recs.status().message();
    EXPECT_TRUE(HoldsRecords(*recs, h, *first, 3));
  }
}

// ===========================================================================
// Damage that is not a torn tail

// Scans root read-only and read-write with repair; both must fail with
// kCorruption mentioning every needle, and the files must be unchanged.
::testing::AssertionResult RefusedUnchanged(const fs::path& root, uint64_t config_hash,
                                            const std::vector<std::string>& needles) {
  const auto before = Tree(root);
  for (const bool repair : {false, true}) {
    auto dir = DataDir::Open(root, repair ? OpenMode::kReadWrite : OpenMode::kReadOnly);
    if (!dir.ok()) return ::testing::AssertionFailure() << dir.status().message();
    ScanOptions so;
    so.repair = repair;
    so.config_hash = config_hash;
    auto scan = ScanJournal(*dir, so, nullptr);
    if (scan.ok()) {
      return ::testing::AssertionFailure()
             << "scan (repair " << repair << ") succeeded"
             << (scan->tail ? ", with a tail: " + Describe(*scan->tail) : std::string());
    }
    if (scan.status().code() != StatusCode::kCorruption) {
      return ::testing::AssertionFailure() << "not kCorruption: " << scan.status().message();
    }
    for (const std::string& n : needles) {
      if (!Has(scan.status().message(), n)) {
        return ::testing::AssertionFailure()
               << "\"" << scan.status().message() << "\" does not mention \"" << n << "\"";
      }
    }
  }
  if (Tree(root) != before) return ::testing::AssertionFailure() << "the files changed";
  return ::testing::AssertionSuccess();
}

TEST(JournalDamage, FlippedByteInTheMiddleOfTheLastSegment) {
  TempDir tmp;
  const History h = MakeHistory(7, 30);
  const fs::path root = tmp / "j";
  auto sums = WriteHistory(root, h, 30);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  auto recs = ReadAll(root);
  ASSERT_TRUE(recs.ok());
  const fs::path seg = Segments(root).at(0);
  const Bytes clean = Load(seg);

  // Every byte of record 10, and a few of record 28 (two valid records after it).
  std::vector<uint64_t> where;
  for (uint64_t i = (*recs)[9].offset; i < (*recs)[9].end(); ++i) where.push_back(i);
  for (uint64_t i : {0u, 4u, 9u, 20u, 30u}) where.push_back((*recs)[27].offset + i);
  for (uint64_t at : where) {
    const Rec& hit = (*recs)[at < (*recs)[27].offset ? 9u : 27u];
    Bytes damaged = clean;
    damaged[at] ^= std::byte{0x20};
    Store(seg, damaged);
    const ::testing::AssertionResult r =
        RefusedUnchanged(root, h.config_hash,
                         {seg.filename().string(), fmt::format("offset {}", hit.offset),
                          fmt::format("sequence {}", hit.seq), "not a torn tail"});
    if (!r) {
      ADD_FAILURE() << "byte " << at << " flipped: " << r.message();
      break;
    }
  }

  // Recover refuses it too, and changes nothing.
  Bytes damaged = clean;
  damaged[(*recs)[9].offset + 30] ^= std::byte{0x01};
  Store(seg, damaged);
  engine::Engine eng(h.config);
  RecoveryReport report;
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  const Status s = RecoverInto(root, &eng, ro, &report, OpenMode::kReadWrite);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
  EXPECT_EQ(Load(seg), damaged);
}

TEST(JournalDamage, DamageInANonLastSegmentIsNeverATornTail) {
  TempDir tmp;
  const History h = MakeHistory(8, 60);
  const fs::path src = tmp / "src";
  auto sums = WriteHistory(src, h, 60, Options(1024));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_GE(Segments(src).size(), 3u);
  auto recs = ReadAll(src);
  ASSERT_TRUE(recs.ok());
  const std::string seg0 = Segments(src)[0].filename().string();
  const std::string seg1 = Segments(src)[1].filename().string();
  const Rec* last0 = nullptr;  // the last record of the first segment
  for (const Rec& r : *recs) {
    if (r.segment == seg0) last0 = &r;
  }
  ASSERT_NE(last0, nullptr);
  const fs::path root = tmp / "case";

  {
    SCOPED_TRACE("a flipped byte in the last record of the first segment");
    CopyTree(src, root);
    Bytes b = Load(root / "journal" / seg0);
    b[last0->offset + kRecordHeaderSize + 5] ^= std::byte{0x10};
    Store(root / "journal" / seg0, b);
    EXPECT_TRUE(
        RefusedUnchanged(root, h.config_hash, {seg0, fmt::format("offset {}", last0->offset)}));
  }
  {
    SCOPED_TRACE("the first segment cut inside its last record");
    CopyTree(src, root);
    fs::resize_file(root / "journal" / seg0, last0->end() - 5);
    EXPECT_TRUE(
        RefusedUnchanged(root, h.config_hash, {seg0, fmt::format("offset {}", last0->offset)}));
  }
  {
    SCOPED_TRACE("the first segment cut at a record boundary (a whole record lost)");
    CopyTree(src, root);
    fs::resize_file(root / "journal" / seg0, last0->offset);
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {seg1, "missing"}));
  }
  {
    SCOPED_TRACE("a flipped byte in the header of the second segment");
    CopyTree(src, root);
    Bytes b = Load(root / "journal" / seg1);
    b[20] ^= std::byte{0x01};
    Store(root / "journal" / seg1, b);
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {seg1, "checksum"}));
  }
  {
    SCOPED_TRACE("the second segment cut to a partial header");
    CopyTree(src, root);
    fs::resize_file(root / "journal" / seg1, 10);
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {seg1, "shorter than a segment header"}));
  }
}

TEST(JournalDamage, WrongVersionBadMagicAndForeignFiles) {
  TempDir tmp;
  const History h = MakeHistory(9, 40);
  const fs::path src = tmp / "src";
  auto sums = WriteHistory(src, h, 40, Options(1024));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  const std::vector<fs::path> segs = Segments(src);
  ASSERT_GE(segs.size(), 2u);
  const std::string last = segs.back().filename().string();
  const fs::path root = tmp / "case";

  // Rewrites bytes [at, at + 2) of a segment header as `value`, checksum redone.
  auto rewrite_u16 = [&](const fs::path& seg, std::size_t at, uint16_t value) {
    Bytes b = Load(seg);
    PutU16(b.data() + at, value);
    PutU64(b.data() + 32, XXH3_64bits(b.data(), 32));
    Store(seg, b);
  };
  {
    SCOPED_TRACE("format version 2");
    CopyTree(src, root);
    rewrite_u16(root / "journal" / last, 8, 2);
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {last, "version 2"}));
  }
  {
    SCOPED_TRACE("header size 48");
    CopyTree(src, root);
    rewrite_u16(root / "journal" / last, 10, 48);
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {last, "segment header size 48"}));
  }
  {
    SCOPED_TRACE("a foreign file with a segment name, after the journal");
    CopyTree(src, root);
    const std::string text = "This is not a journal segment, it is someone's notes.\n";
    const fs::path foreign = root / "journal" / SegmentFileName(41);
    std::ofstream(foreign) << text << text;
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {SegmentFileName(41), "bad magic"}));
  }
  {
    SCOPED_TRACE("a foreign file with a segment name, alone");
    fs::remove_all(root);
    fs::create_directories(root / "journal");
    std::ofstream(root / "journal" / SegmentFileName(1)) << std::string(100, 'x');
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {"bad magic"}));
  }
  {
    SCOPED_TRACE("a segment whose name and header disagree");
    CopyTree(src, root);
    fs::rename(root / "journal" / last, root / "journal" / SegmentFileName(1000));
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {"the file name says 1000"}));
  }
  {
    SCOPED_TRACE("notes.txt in journal/");
    CopyTree(src, root);
    std::ofstream(root / "journal" / "notes.txt") << "hello\n";
    EXPECT_TRUE(RefusedUnchanged(root, h.config_hash, {"unexpected file notes.txt"}));
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "notes.txt");
  }
  {
    SCOPED_TRACE("notes.txt in snapshots/");
    CopyTree(src, root);
    std::ofstream(root / "snapshots" / "notes.txt") << "hello\n";
    const auto before = Tree(root);
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "unexpected file notes.txt");
    EXPECT_EQ(Tree(root), before);
  }
}

TEST(JournalDamage, MissingSegments) {
  TempDir tmp;
  const History h = MakeHistory(10, 60);
  const fs::path src = tmp / "src";
  auto sums = WriteHistory(src, h, 60, Options(1024));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  const std::vector<fs::path> segs = Segments(src);
  ASSERT_GE(segs.size(), 3u);
  const fs::path root = tmp / "case";
  {
    SCOPED_TRACE("a middle segment deleted");
    CopyTree(src, root);
    fs::remove(root / "journal" / segs[1].filename());
    EXPECT_TRUE(
        RefusedUnchanged(root, h.config_hash, {segs[2].filename().string(), "records missing"}));
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(false), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
    EXPECT_HAS(s.message(), "records missing");
  }
  {
    SCOPED_TRACE("the first segment deleted");
    CopyTree(src, root);
    fs::remove(root / "journal" / segs[0].filename());
    const auto before = Tree(root);
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.message();
    EXPECT_HAS(s.message(), "segments are missing");
    EXPECT_EQ(Tree(root), before);
  }
}

TEST(JournalDamage, ConfigHashMismatch) {
  TempDir tmp;
  const History h = MakeHistory(11, 30);
  auto sums = WriteHistory(tmp.path(), h, 30, Options(1024));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  const engine::Engine other(TestConfig(/*maker_fee_bps=*/3));
  ASSERT_NE(other.ConfigHash(), h.config_hash);
  EXPECT_TRUE(
      RefusedUnchanged(tmp.path(), other.ConfigHash(),
                       {Segments(tmp.path())[0].filename().string(), "another configuration"}));
  // 0 skips the check; the right hash passes.
  EXPECT_TRUE(ReadAll(tmp.path()).ok());
  ScanOptions so;
  so.config_hash = h.config_hash;
  EXPECT_TRUE(ReadAll(tmp.path(), so).ok());

  const auto before = Tree(tmp.path());
  engine::Engine eng(TestConfig(3));
  RecoveryReport report;
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  const Status s = RecoverInto(tmp.path(), &eng, ro, &report, OpenMode::kReadWrite);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_HAS(s.message(), "another configuration");
  EXPECT_EQ(Tree(tmp.path()), before);
}

// ===========================================================================
// The data directory

// Runs fn in a child process; returns its exit status (or -1).
template <class Fn>
int InChild(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(JournalDataDir, OneWriterAtATime) {
  TempDir tmp;
  const fs::path root = tmp / "data";
  auto first = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(fs::is_directory(root / "journal"));
  EXPECT_TRUE(fs::is_directory(root / "snapshots"));
  std::string lock_text;
  std::getline(std::ifstream(root / "LOCK"), lock_text);
  EXPECT_EQ(lock_text, std::to_string(::getpid()));

  // flock() locks an open file description: a second open() in this process
  // conflicts with the first, as another process's would.
  auto second = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_HAS(second.status().message(), "in use");
  EXPECT_HAS(second.status().message(), fmt::format("pid {}", ::getpid()));
  EXPECT_EQ(InChild([&] {
              auto d = DataDir::Open(root, OpenMode::kReadWrite);
              return !d.ok() && d.status().code() == StatusCode::kUnavailable &&
                             Has(d.status().message(), "in use")
                         ? 0
                         : 1;
            }),
            0)
      << "another process got the lock";
  // Readers take no lock.
  EXPECT_TRUE(DataDir::Open(root, OpenMode::kReadOnly).ok());

  // A moved DataDir keeps the lock; the moved-from one gives nothing up.
  {
    DataDir moved(std::move(*first));
    DataDir assigned = std::move(moved);
    EXPECT_EQ(DataDir::Open(root, OpenMode::kReadWrite).status().code(), StatusCode::kUnavailable);
  }
  // Released with its owner.
  auto third = DataDir::Open(root, OpenMode::kReadWrite);
  EXPECT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(InChild([&] { return DataDir::Open(root, OpenMode::kReadWrite).ok() ? 1 : 0; }), 0);
}

TEST(JournalDataDir, BadPaths) {
  TempDir tmp;
  const fs::path file = tmp / "file";
  std::ofstream(file) << "a regular file\n";

  auto under = DataDir::Open(file / "data", OpenMode::kReadWrite);
  ASSERT_FALSE(under.ok());
  EXPECT_EQ(under.status().code(), StatusCode::kIoError);
  EXPECT_HAS(under.status().message(), "cannot create data directory");
  EXPECT_HAS(under.status().message(), (file / "data").string());
  EXPECT_HAS(under.status().message(), "ot a directory");

  auto itself = DataDir::Open(file, OpenMode::kReadWrite);
  ASSERT_FALSE(itself.ok());
  EXPECT_HAS(itself.status().message(), file.string());
  EXPECT_HAS(itself.status().message(), "ot a directory");
  EXPECT_TRUE(fs::is_regular_file(file));

  // Read-only opens create nothing.
  auto missing = DataDir::Open(tmp / "missing", OpenMode::kReadOnly);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(missing.status().message(), "does not exist");
  EXPECT_FALSE(fs::exists(tmp / "missing"));
  fs::create_directories(tmp / "empty");
  auto ro = DataDir::Open(tmp / "empty", OpenMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_TRUE(fs::is_empty(tmp / "empty"));
  auto scan = ScanJournal(*ro, {}, nullptr);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  EXPECT_EQ(scan->last_seq, 0u);
  EXPECT_EQ(scan->segments, 0u);
  ScanOptions repair;
  repair.repair = true;
  EXPECT_EQ(ScanJournal(*ro, repair, nullptr).status().code(), StatusCode::kInternal);
  EXPECT_FALSE(JournalWriter::Open(*ro, Options(), 1, *scan).ok());
}

TEST(JournalDataDir, UnwritableDirectory) {
  TempDir tmp;
  // Root ignores permission bits: run as root, the checks run in a child that
  // has become an unprivileged user (nobody), on directories it owns.
  const bool root_user = ::geteuid() == 0;
  const uid_t uid = root_user ? 65534 : ::geteuid();
  const gid_t gid = root_user ? 65534 : ::getegid();

  const fs::path fresh = tmp / "fresh";    // empty, 0500
  const fs::path layout = tmp / "layout";  // journal/ and snapshots/, no LOCK; 0500
  const fs::path jro = tmp / "jro";        // complete, journal/ 0500
  fs::create_directories(fresh);
  fs::create_directories(layout / "journal");
  fs::create_directories(layout / "snapshots");
  { ASSERT_TRUE(DataDir::Open(jro, OpenMode::kReadWrite).ok()); }
  if (root_user) {
    for (const fs::path& p : fs::recursive_directory_iterator(tmp.path())) {
      ASSERT_EQ(::chown(p.c_str(), uid, gid), 0) << p;
    }
    ASSERT_EQ(::chown(tmp.path().c_str(), uid, gid), 0);
  }
  fs::permissions(fresh, fs::perms::owner_read | fs::perms::owner_exec);
  fs::permissions(layout, fs::perms::owner_read | fs::perms::owner_exec);
  fs::permissions(jro / "journal", fs::perms::owner_read | fs::perms::owner_exec);

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int rc = InChild([&] {
    ::close(pipe_fds[0]);
    if (root_user && (::setgid(gid) != 0 || ::setuid(uid) != 0)) return 77;
    std::string problems;
    auto check = [&](const fs::path& p, std::string_view needle) {
      auto d = DataDir::Open(p, OpenMode::kReadWrite);
      if (d.ok()) {
        problems += fmt::format("{}: opened\n", p.string());
      } else if (d.status().code() != StatusCode::kIoError || !Has(d.status().message(), needle) ||
                 !Has(d.status().message(), p.string())) {
        problems +=
            fmt::format("{}: \"{}\" lacks \"{}\"\n", p.string(), d.status().message(), needle);
      }
    };
    check(fresh, "Permission denied");
    check(layout, "not writable");
    check(jro, "not writable");
    if (!fs::is_empty(fresh)) problems += "something was created in fresh/\n";
    (void)!::write(pipe_fds[1], problems.data(), problems.size());
    return problems.empty() ? 0 : 1;
  });
  ::close(pipe_fds[1]);
  std::string problems;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) {
    problems.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (rc == 77) GTEST_SKIP() << "running as root and cannot drop privileges";
  EXPECT_EQ(rc, 0) << problems;
}

// ===========================================================================
// Snapshots

TEST(JournalSnapshot, RoundTripAndPruning) {
  TempDir tmp;
  const History h = MakeHistory(12, 120);
  const fs::path root = tmp / "data";
  {
    auto dir = DataDir::Open(root, OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    const engine::Engine e = EngineAt(h, 100);
    const engine::EngineImage image = e.ExportImage();
    SnapshotMeta meta;
    meta.record_checksum = 0xfeedface12345678;
    auto path = WriteSnapshot(*dir, image, &meta, 3, 5);
    ASSERT_TRUE(path.ok()) << path.status().message();
    EXPECT_EQ(*path, root / "snapshots" / SnapshotFileName(100));
    EXPECT_EQ(meta.seq, 100u);
    EXPECT_EQ(meta.state_hash, e.StateHash());
    EXPECT_EQ(meta.state_hash, h.hashes[99]);
    EXPECT_EQ(meta.config_hash, h.config_hash);
    EXPECT_EQ(meta.record_checksum, 0xfeedface12345678u);
    const Bytes raw = codec::EncodeImage(image);
    EXPECT_EQ(meta.raw_size, raw.size());
    const Bytes file = Load(*path);
    ASSERT_EQ(file.size(), kSnapshotHeaderSize + meta.compressed_size);
    EXPECT_LT(meta.compressed_size, meta.raw_size);
    const std::byte* p = file.data();
    EXPECT_EQ(std::memcmp(p, "MBSNAPZ1", 8), 0);
    EXPECT_EQ(GetU16(p + 8), 1u);
    EXPECT_EQ(p[10], std::byte{1});  // zstd
    EXPECT_EQ(p[11], std::byte{0});
    EXPECT_EQ(GetU32(p + 12), 0u);
    EXPECT_EQ(GetU64(p + 16), 100u);
    EXPECT_EQ(GetU64(p + 24), meta.state_hash);
    EXPECT_EQ(GetU64(p + 32), meta.config_hash);
    EXPECT_EQ(GetU64(p + 40), meta.record_checksum);
    EXPECT_EQ(GetU64(p + 48), meta.raw_size);
    EXPECT_EQ(GetU64(p + 56), meta.compressed_size);
    EXPECT_EQ(GetU64(p + 64), XXH3_64bits(p + 80, meta.compressed_size));
    EXPECT_EQ(GetU64(p + 72), XXH3_64bits(p, 72));
    EXPECT_FALSE(fs::exists(root / "snapshots" / (SnapshotFileName(100) + ".tmp")));

    auto loaded = ReadSnapshot(*path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->meta.seq, meta.seq);
    EXPECT_EQ(loaded->meta.state_hash, meta.state_hash);
    EXPECT_EQ(loaded->meta.config_hash, meta.config_hash);
    EXPECT_EQ(loaded->meta.record_checksum, meta.record_checksum);
    EXPECT_EQ(loaded->meta.raw_size, meta.raw_size);
    EXPECT_EQ(loaded->meta.compressed_size, meta.compressed_size);
    EXPECT_EQ(engine::HashImage(loaded->image), meta.state_hash);
    EXPECT_EQ(codec::EncodeImage(loaded->image), raw);
    engine::Engine restored(h.config);
    ASSERT_OK(restored.Restore(loaded->image));
    EXPECT_EQ(restored.StateHash(), h.hashes[99]);
  }

  // keep = 3: the newest three stay, whatever order they were written in.
  const fs::path pr = tmp / "prune";
  for (uint64_t seq : {20u, 60u, 40u, 80u, 10u, 100u}) {
    auto path = Snapshot(pr, h, seq, 0, 3);
    ASSERT_TRUE(path.ok()) << path.status().message();
  }
  // An interrupted write's leftover is not a snapshot.
  std::ofstream(pr / "snapshots" / (SnapshotFileName(120) + ".tmp")) << "partial";
  auto dir = DataDir::Open(pr, OpenMode::kReadOnly);
  ASSERT_TRUE(dir.ok());
  auto listed = dir->ListSnapshots();
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  std::vector<uint64_t> seqs;
  for (const FileEntry& f : *listed) seqs.push_back(f.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{60, 80, 100}));
  ASSERT_TRUE(Snapshot(pr, h, 110, 0, 1).ok());
  listed = dir->ListSnapshots();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].seq, 110u);
}

TEST(JournalSnapshot, DamagedFilesAreRefused) {
  TempDir tmp;
  const History h = MakeHistory(13, 80);
  auto path = Snapshot(tmp / "data", h, 80, 1);
  ASSERT_TRUE(path.ok()) << path.status().message();
  const Bytes clean = Load(*path);
  ASSERT_TRUE(ReadSnapshot(*path).ok());

  struct Case {
    std::string name;
    Bytes bytes;
    std::string needle;
  };
  std::vector<Case> cases;
  cases.push_back({"one byte short", Bytes(clean.begin(), clean.end() - 1), "truncated"});
  cases.push_back({"cut inside the header", Bytes(clean.begin(), clean.begin() + 50),
                   "shorter than a snapshot header"});
  cases.push_back({"empty", Bytes{}, "shorter than a snapshot header"});
  Bytes b = clean;
  b.push_back(std::byte{0});
  cases.push_back({"one byte too many", b, "truncated"});
  b = clean;
  b[kSnapshotHeaderSize + (clean.size() - kSnapshotHeaderSize) / 2] ^= std::byte{0x08};
  cases.push_back({"a flipped payload byte", b, "payload checksum"});
  b = clean;
  b[0] = std::byte{'X'};
  cases.push_back({"bad magic", b, "bad magic"});
  b = clean;
  b[17] ^= std::byte{0x01};
  cases.push_back({"a flipped header byte", b, "header checksum"});
  b = clean;
  PutU16(b.data() + 8, 2);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"version 2", b, "version 2"});
  b = clean;
  b[10] = std::byte{2};
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"unknown compression", b, "compression 2"});
  // Damage behind valid checksums: each deeper check still catches it.
  b = clean;
  b[kSnapshotHeaderSize + (clean.size() - kSnapshotHeaderSize) / 2] ^= std::byte{0x08};
  PutU64(b.data() + 64, XXH3_64bits(b.data() + 80, b.size() - 80));
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"a flipped payload byte, checksums redone", b, ""});
  b = clean;
  PutU64(b.data() + 24, GetU64(b.data() + 24) + 1);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another state hash, checksum redone", b, "state hash"});
  b = clean;
  PutU64(b.data() + 16, 79);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another sequence, checksum redone", b, "sequence"});
  b = clean;
  PutU64(b.data() + 48, GetU64(b.data() + 48) + 1);
  PutU64(b.data() + 72, XXH3_64bits(b.data(), 72));
  cases.push_back({"another raw size, checksum redone", b, "size"});

  const fs::path file = tmp / "data" / "snapshots" / SnapshotFileName(80);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Store(file, c.bytes);
    auto loaded = ReadSnapshot(file);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption) << loaded.status().message();
    EXPECT_HAS(loaded.status().message(), file.string());
    EXPECT_HAS(loaded.status().message(), c.needle);
    EXPECT_EQ(Load(file), c.bytes);
  }
  EXPECT_EQ(ReadSnapshot(tmp / "data" / "snapshots" / SnapshotFileName(7)).status().code(),
            StatusCode::kIoError);
}

// ===========================================================================
// Recovery

TEST(JournalRecovery, FromScratchMatchesTheLiveEngine) {
  TempDir tmp;
  const History h = MakeHistory(14, 400);
  ASSERT_GT(h.trades, 30u);
  ASSERT_GT(h.cancels, 10u);
  auto sums = WriteHistory(tmp.path(), h, 400, Options(8192), 9);
  ASSERT_TRUE(sums.ok()) << sums.status().message();

  engine::Engine eng(h.config);
  RecoveryOptions ro = Quiet(false);
  uint64_t calls = 0;
  ro.after_record = [&](const engine::Engine& e, uint64_t seq) -> Status {
    ++calls;
    if (seq != calls || Raw(e.last_sequence()) != seq || e.StateHash() != h.hashes[seq - 1]) {
      return Status(StatusCode::kInternal, fmt::format("diverged at {}", seq));
    }
    return Status::Ok();
  };
  RecoveryReport report;
  ASSERT_OK(RecoverInto(tmp.path(), &eng, ro, &report));
  EXPECT_EQ(calls, 400u);
  EXPECT_EQ(report.snapshot_seq, 0u);
  EXPECT_EQ(report.recovered_seq, 400u);
  EXPECT_EQ(report.replayed_records, 400u);
  EXPECT_EQ(report.replayed_events, h.events);
  EXPECT_EQ(report.state_hash, h.hashes.back());
  EXPECT_EQ(eng.StateHash(), h.hashes.back());
  EXPECT_EQ(Raw(eng.last_sequence()), 400u);
  EXPECT_OK_INVARIANTS(eng);
  EXPECT_EQ(report.journal.last_checksum, sums->back());
  EXPECT_FALSE(report.journal.tail.has_value());
  EXPECT_HAS(Describe(report), "recovered sequence 400");

  // The callback's error stops recovery.
  engine::Engine stopped(h.config);
  ro.after_record = [](const engine::Engine&, uint64_t seq) {
    return seq == 17 ? Status(StatusCode::kInternal, "stop at 17") : Status::Ok();
  };
  const Status s = RecoverInto(tmp.path(), &stopped, ro, &report);
  EXPECT_HAS(s.message(), "stop at 17");

  // An empty data directory recovers to the empty state.
  fs::create_directories(tmp / "empty");
  engine::Engine fresh(h.config);
  ASSERT_OK(RecoverInto(tmp / "empty", &fresh, Quiet(), &report));
  EXPECT_EQ(report.recovered_seq, 0u);
  EXPECT_EQ(report.state_hash, engine::Engine(h.config).StateHash());
}

TEST(JournalRecovery, FromASnapshotReplaysOnlyLaterRecords) {
  TempDir tmp;
  const History h = MakeHistory(15, 300);
  auto sums = WriteHistory(tmp.path(), h, 300, Options(4096), 6);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  auto recs = ReadAll(tmp.path());
  ASSERT_TRUE(recs.ok());
  // Snapshot points at segment edges (first and last record of a segment) as
  // well as inside segments and at both ends of the journal.
  std::vector<uint64_t> points = {1, 150, 299, 300};
  for (std::size_t i = 1; i < recs->size(); ++i) {
    if ((*recs)[i].segment != (*recs)[i - 1].segment && points.size() < 12) {
      points.push_back((*recs)[i - 1].seq);
      points.push_back((*recs)[i].seq);
    }
  }
  ASSERT_GE(points.size(), 8u);
  for (uint64_t s : points) {
    SCOPED_TRACE(fmt::format("snapshot at {}", s));
    auto path = Snapshot(tmp.path(), h, s, (*sums)[s - 1]);
    ASSERT_TRUE(path.ok()) << path.status().message();
    engine::Engine eng(h.config);
    RecoveryOptions ro = Quiet();
    uint64_t first_replayed = 0;
    ro.after_record = [&](const engine::Engine&, uint64_t seq) {
      if (first_replayed == 0) first_replayed = seq;
      return Status::Ok();
    };
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp.path(), &eng, ro, &report));
    EXPECT_EQ(report.snapshot_seq, s);
    EXPECT_EQ(report.snapshot_file, path->string());
    EXPECT_TRUE(report.notes.empty());
    EXPECT_EQ(report.replayed_records, 300 - s);
    EXPECT_EQ(first_replayed, s == 300 ? 0 : s + 1);
    EXPECT_EQ(report.recovered_seq, 300u);
    EXPECT_EQ(report.state_hash, h.hashes.back());
    EXPECT_EQ(report.journal.last_seq, 300u);
    EXPECT_EQ(report.journal.last_checksum, sums->back());
    EXPECT_OK_INVARIANTS(eng);
    fs::remove(*path);
  }
}

TEST(JournalRecovery, DamagedSnapshotsFallBack) {
  TempDir tmp;
  const History h = MakeHistory(16, 400);
  auto sums = WriteHistory(tmp.path(), h, 400, Options(8192), 10);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  std::vector<fs::path> snaps;
  for (uint64_t s : {100u, 200u, 300u}) {
    auto path = Snapshot(tmp.path(), h, s, (*sums)[s - 1]);
    ASSERT_TRUE(path.ok()) << path.status().message();
    snaps.push_back(*path);
  }
  engine::Engine scratch(h.config);
  RecoveryReport base;
  ASSERT_OK(RecoverInto(tmp.path(), &scratch, Quiet(false), &base));
  EXPECT_EQ(base.snapshot_seq, 0u);
  EXPECT_EQ(base.state_hash, h.hashes.back());

  struct Step {
    std::size_t damage;  // index into snaps
    void (*how)(const fs::path&);
    uint64_t expect_snapshot;
  };
  const Step steps[] = {
      {2,
       [](const fs::path& p) {
         Bytes b = Load(p);
         b[b.size() - 3] ^= std::byte{0x40};
         Store(p, b);
       },
       200},
      {1, [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 10); }, 100},
      {0,
       [](const fs::path& p) {
         Bytes b = Load(p);
         b[1] = std::byte{'X'};
         Store(p, b);
       },
       0},
  };
  std::size_t damaged = 0;
  for (const Step& step : steps) {
    SCOPED_TRACE(fmt::format("damaged {}", snaps[step.damage].filename().string()));
    step.how(snaps[step.damage]);
    ++damaged;
    const auto before = Tree(tmp.path());
    engine::Engine eng(h.config);
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp.path(), &eng, Quiet(), &report));
    EXPECT_EQ(report.snapshot_seq, step.expect_snapshot);
    EXPECT_EQ(report.replayed_records, 400 - step.expect_snapshot);
    ASSERT_EQ(report.notes.size(), damaged);
    for (std::size_t i = 0; i < damaged; ++i) {
      EXPECT_HAS(report.notes[i], "skipped");
      EXPECT_HAS(report.notes[i], snaps[snaps.size() - 1 - i].filename().string());
    }
    EXPECT_EQ(report.recovered_seq, base.recovered_seq);
    EXPECT_EQ(report.state_hash, base.state_hash);
    EXPECT_OK_INVARIANTS(eng);
    EXPECT_EQ(Tree(tmp.path()), before) << "recovery changed a file";
  }
}

TEST(JournalRecovery, SnapshotAheadOfTheJournal) {
  TempDir tmp;
  const History h = MakeHistory(17, 150);
  const fs::path full = tmp / "full";
  auto sums = WriteHistory(full, h, 150);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  {
    SCOPED_TRACE("journal of 100 records, snapshot at 150");
    const fs::path root = tmp / "short";
    ASSERT_TRUE(WriteHistory(root, h, 100).ok());
    ASSERT_TRUE(Snapshot(root, h, 150, (*sums)[149]).ok());
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
    EXPECT_HAS(s.message(), "ends at 100");
  }
  {
    SCOPED_TRACE("no journal at all, a snapshot at 150");
    const fs::path root = tmp / "none";
    ASSERT_TRUE(Snapshot(root, h, 150, (*sums)[149]).ok());
    engine::Engine eng(h.config);
    RecoveryReport report;
    const Status s = RecoverInto(root, &eng, Quiet(), &report);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
  }
  {
    SCOPED_TRACE("the snapshot's record lost in a torn tail");
    const fs::path root = tmp / "torn";
    CopyTree(full, root);
    ASSERT_TRUE(Snapshot(root, h, 150, (*sums)[149]).ok());
    const fs::path seg = Segments(root).back();
    fs::resize_file(seg, fs::file_size(seg) - 3);
    engine::Engine eng(h.config);
    RecoveryReport report;
    RecoveryOptions ro = Quiet();
    ro.repair = true;
    const Status s = RecoverInto(root, &eng, ro, &report, OpenMode::kReadWrite);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_HAS(s.message(), "ahead of the journal");
    EXPECT_HAS(s.message(), "ends at 149");
  }
}

TEST(JournalRecovery, SnapshotFromAnotherHistory) {
  TempDir tmp;
  const History a = MakeHistory(18, 200);
  const History b = MakeHistory(19, 200);
  ASSERT_EQ(a.config_hash, b.config_hash);
  ASSERT_NE(a.hashes[119], b.hashes[119]);
  auto sums_a = WriteHistory(tmp / "a", a, 200);
  auto sums_b = WriteHistory(tmp / "b", b, 200);
  ASSERT_TRUE(sums_a.ok() && sums_b.ok());
  ASSERT_NE((*sums_a)[119], (*sums_b)[119]);

  auto path = Snapshot(tmp / "a", b, 120, (*sums_b)[119]);
  ASSERT_TRUE(path.ok()) << path.status().message();
  const auto before = Tree(tmp / "a");
  engine::Engine eng(a.config);
  RecoveryReport report;
  const Status s = RecoverInto(tmp / "a", &eng, Quiet(), &report);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_HAS(s.message(), "does not belong to this journal");
  EXPECT_HAS(s.message(), path->filename().string());
  EXPECT_EQ(Tree(tmp / "a"), before);

  // Without snapshots the journal alone recovers.
  engine::Engine scratch(a.config);
  ASSERT_OK(RecoverInto(tmp / "a", &scratch, Quiet(false), &report));
  EXPECT_EQ(report.state_hash, a.hashes.back());
}

TEST(JournalRecovery, TornTailIsFoundAndRepaired) {
  TempDir tmp;
  const History h = MakeHistory(20, 200);
  auto sums = WriteHistory(tmp.path(), h, 200, Options(8192));
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_GE(Segments(tmp.path()).size(), 2u);
  const fs::path seg = Segments(tmp.path()).back();
  const uint64_t size = fs::file_size(seg);
  fs::resize_file(seg, size - 7);

  {
    SCOPED_TRACE("read-only: found, not cut");
    engine::Engine eng(h.config);
    RecoveryReport report;
    ASSERT_OK(RecoverInto(tmp.path(), &eng, Quiet(), &report));
    EXPECT_EQ(report.recovered_seq, 199u);
    EXPECT_EQ(report.state_hash, h.hashes[198]);
    ASSERT_TRUE(report.journal.tail.has_value());
    EXPECT_FALSE(report.journal.tail->repaired);
    EXPECT_EQ(fs::file_size(seg), size - 7);
  }
  auto dir = DataDir::Open(tmp.path(), OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  engine::Engine eng(h.config);
  RecoveryOptions ro = Quiet();
  ro.repair = true;
  auto report = Recover(*dir, &eng, ro);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->recovered_seq, 199u);
  EXPECT_EQ(report->state_hash, h.hashes[198]);
  ASSERT_TRUE(report->journal.tail.has_value());
  EXPECT_TRUE(report->journal.tail->repaired);
  EXPECT_HAS(Describe(*report->journal.tail), "dropped");
  EXPECT_EQ(report->journal.last_checksum, (*sums)[198]);
  // The writer continues from the recovery's scan, as the exchange does.
  // (A roll size the last segment has not reached: the record goes into it.)
  auto w = JournalWriter::Open(*dir, Options(1 << 20), eng.ConfigHash(), report->journal);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->Append(h.records[199]), (*sums)[199]);
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ(fs::file_size(seg), size);
  w->reset();
  engine::Engine again(h.config);
  RecoveryReport r2;
  ASSERT_OK(RecoverInto(tmp.path(), &again, Quiet(), &r2));
  EXPECT_EQ(r2.recovered_seq, 200u);
  EXPECT_EQ(r2.state_hash, h.hashes.back());
  EXPECT_FALSE(r2.journal.tail.has_value());
}

// ===========================================================================
// Write errors from the kernel

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

TEST(JournalWriteErrors, FailedWritesLeaveARecordBoundaryAndAreRetried) {
  TempDir tmp;
  const History h = MakeHistory(21, 40);
  const fs::path root = tmp / "data";
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  auto scan = ScanJournal(*dir, {}, nullptr);
  ASSERT_TRUE(scan.ok());
  auto w = JournalWriter::Open(*dir, Options(), h.config_hash, *scan);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint64_t> sums;
  for (uint64_t s = 1; s <= 10; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  const fs::path seg = Segments(root).at(0);
  const uint64_t good = fs::file_size(seg);
  ASSERT_EQ((*w)->bytes_on_disk(), good);

  {
    FileSizeLimit limit;
    // Room for part of the next group: the first write() is short, the next
    // fails with EFBIG.
    ASSERT_TRUE(limit.Set(good + 100));
    for (uint64_t s = 11; s <= 30; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    Status s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), seg.string());
    EXPECT_HAS(s.message(), "File too large");
    EXPECT_EQ((*w)->written_seq(), 10u);
    EXPECT_EQ((*w)->durable_seq(), 10u);
    EXPECT_EQ((*w)->next_seq(), 31u);
    EXPECT_EQ(fs::file_size(seg), good) << "not cut back to the record boundary";
    EXPECT_EQ((*w)->bytes_on_disk(), good);
    // Sync has nothing to make durable.
    ASSERT_OK((*w)->Sync());
    EXPECT_EQ((*w)->durable_seq(), 10u);

    // Still failing: the same again; more records queue behind.
    for (uint64_t q = 31; q <= 35; ++q) sums.push_back((*w)->Append(h.records[q - 1]));
    s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_EQ((*w)->durable_seq(), 10u);
    EXPECT_EQ(fs::file_size(seg), good);

    // Meanwhile the journal on disk is whole: ten records, no tail.
    ScanResult mid;
    auto recs = ReadAll(root, {}, &mid);
    ASSERT_TRUE(recs.ok()) << recs.status().message();
    EXPECT_EQ(mid.last_seq, 10u);
    EXPECT_FALSE(mid.tail.has_value());
  }
  // The limit is lifted: the retry writes everything, once.
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 35u);
  EXPECT_EQ((*w)->bytes_on_disk(), fs::file_size(seg));
  for (uint64_t s = 36; s <= 40; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 40u);

  ScanResult end;
  auto recs = ReadAll(root, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 40));
  EXPECT_EQ(end.bytes, fs::file_size(seg));
}

TEST(JournalWriteErrors, FailedRollIsRetried) {
  TempDir tmp;
  const History h = MakeHistory(22, 20);
  const fs::path root = tmp / "data";
  auto dir = DataDir::Open(root, OpenMode::kReadWrite);
  ASSERT_TRUE(dir.ok());
  auto scan = ScanJournal(*dir, {}, nullptr);
  ASSERT_TRUE(scan.ok());
  auto w = JournalWriter::Open(*dir, Options(256), h.config_hash, *scan);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint64_t> sums;
  for (uint64_t s = 1; s <= 5; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  ASSERT_EQ(Segments(root).size(), 1u);
  ASSERT_GE(fs::file_size(Segments(root)[0]), 256u);  // the next Write rolls

  {
    FileSizeLimit limit;
    ASSERT_TRUE(limit.Set(20));  // not even a whole segment header fits
    for (uint64_t s = 6; s <= 8; ++s) sums.push_back((*w)->Append(h.records[s - 1]));
    const Status s = (*w)->Write();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_HAS(s.message(), SegmentFileName(6));
    EXPECT_EQ((*w)->durable_seq(), 5u);
    EXPECT_EQ(Segments(root).size(), 1u) << "the half-made segment was left behind";
  }
  ASSERT_OK((*w)->Write());
  ASSERT_OK((*w)->Sync());
  EXPECT_EQ((*w)->durable_seq(), 8u);
  ASSERT_EQ(Segments(root).size(), 2u);
  EXPECT_EQ(Segments(root)[1].filename(), SegmentFileName(6));
  ScanResult end;
  auto recs = ReadAll(root, {}, &end);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_FALSE(end.tail.has_value());
  EXPECT_TRUE(HoldsRecords(*recs, h, sums, 8));
}

}  // namespace
}  // namespace mb::journal
