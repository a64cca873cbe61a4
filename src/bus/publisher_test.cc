// The publisher against a real nats-server (started and stopped here, on a
// loopback port, with its own store directory): every durable record in the
// stream once and in order, across restarts of either side, a NATS outage,
// a stream that lost its content, a second publisher, and bad input.
#include "bus/publisher.h"

#include <nats/nats.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "bus/follower.h"
#include "bus/nats.h"
#include "bus/signing.h"
#include "bus/snapshots.h"
#include "codec/codec.h"
#include "support/journal_test_support.h"
#include "support/nats_test_support.h"

namespace mb::bus {
namespace {

using journal::History;
using journal::TempDir;
using namespace std::chrono_literals;

using testing::FreePort;
using testing::NatsServer;

// A record as the stream holds it, and the message it came in.
struct StreamRecord {
  uint64_t seq = 0;
  uint64_t checksum = 0;
  uint64_t message = 0;  // stream sequence
  std::size_t message_bytes = 0;
};

// Every record of every message in the stream, read with direct gets.
class StreamReader {
 public:
  explicit StreamReader(const std::string& url) {
    EXPECT_EQ(natsConnection_ConnectTo(&conn_, url.c_str()), NATS_OK);
    if (conn_ != nullptr) {
      EXPECT_EQ(natsConnection_JetStream(&js_, conn_, nullptr), NATS_OK);
    }
  }
  ~StreamReader() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (conn_ != nullptr) natsConnection_Destroy(conn_);
  }
  jsCtx* js() { return js_; }

  std::vector<StreamRecord> Records(const std::string& stream) {
    std::vector<StreamRecord> out;
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js_, stream.c_str(), nullptr, nullptr) != NATS_OK) return out;
    const uint64_t first = si->State.FirstSeq;
    const uint64_t last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    for (uint64_t n = first; n != 0 && n <= last; ++n) {
      natsMsg* m = nullptr;
      if (js_GetMsg(&m, js_, stream.c_str(), n, nullptr, nullptr) != NATS_OK) continue;
      const char* id = nullptr;
      EXPECT_EQ(natsMsgHeader_Get(m, "Nats-Msg-Id", &id), NATS_OK);
      std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(natsMsg_GetData(m)),
                                      static_cast<std::size_t>(natsMsg_GetDataLength(m)));
      uint64_t last_in_msg = 0;
      while (!rest.empty()) {
        const journal::ParsedRecord r = journal::ParseRecord(rest);
        EXPECT_EQ(r.error, journal::RecordError::kOk) << "message " << n;
        if (r.error != journal::RecordError::kOk) break;
        out.push_back({r.header.seq, r.header.checksum, n,
                       static_cast<std::size_t>(natsMsg_GetDataLength(m))});
        last_in_msg = r.header.seq;
        rest = rest.subspan(r.size);
      }
      EXPECT_EQ(std::string(id != nullptr ? id : ""), std::to_string(last_in_msg))
          << "message " << n << ": Nats-Msg-Id is its last record's sequence";
      natsMsg_Destroy(m);
    }
    return out;
  }

 private:
  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
};

// records 1..n, each once, in order, with the journal's checksums.
::testing::AssertionResult HoldsExactly(const std::vector<StreamRecord>& got,
                                        const std::vector<uint64_t>& sums, uint64_t n) {
  if (got.size() != n) {
    return ::testing::AssertionFailure() << got.size() << " records in the stream, expected " << n;
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (got[i].seq != i + 1) {
      return ::testing::AssertionFailure()
             << "position " << i << " holds record " << got[i].seq << ", expected " << i + 1;
    }
    if (got[i].checksum != sums[i]) {
      return ::testing::AssertionFailure() << "record " << i + 1 << ": checksum differs";
    }
  }
  return ::testing::AssertionSuccess();
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<NatsServer>(tmp_.path());
    nats_->Start();
    history_ = journal::MakeHistory(7, 400);
  }

  PublisherOptions Options(std::string venue = "test") {
    PublisherOptions o;
    o.servers = {nats_->url()};
    o.venue = std::move(venue);
    o.message_bytes = 2048;  // several records per message, many messages
    o.timeout = 1000ms;
    o.retry = 100ms;
    o.snapshot_check = 50ms;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    return o;
  }
  std::string LogText() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  // Appends records first..last of h to the journal in dir; returns all sums so far.
  void Append(const std::filesystem::path& dir, const History& h, uint64_t first, uint64_t last,
              std::vector<uint64_t>* sums) {
    auto got = journal::AppendHistory(dir, h, first, last, journal::Options());
    ASSERT_TRUE(got.ok()) << got.status().message();
    sums->insert(sums->end(), got->begin(), got->end());
  }

  // Waits (bounded) for the publisher to report an error containing `text`.
  static bool ErrorSays(const Publisher& p, std::string_view text) {
    for (int i = 0; i < 200; ++i) {
      if (p.stats().last_error.find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }

  TempDir tmp_;
  std::unique_ptr<NatsServer> nats_;
  History history_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(PublisherTest, PublishesEveryDurableRecordOnceInOrder) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 300, &sums);
  Publisher p(dir, history_.config_hash, Options());
  p.Start(300);
  ASSERT_TRUE(p.WaitPublished(300, 20s)) << p.stats().last_error;
  // Records made durable while it runs follow.
  Append(dir, history_, 301, 400, &sums);
  p.NotifyDurable(400);
  ASSERT_TRUE(p.WaitPublished(400, 20s)) << p.stats().last_error;
  const PublisherStats st = p.stats();
  p.Stop();
  EXPECT_EQ(st.lag_events, 0u);
  EXPECT_EQ(st.records, 400u);
  EXPECT_GT(st.messages, 10u) << "2 KiB messages hold a few records each";
  EXPECT_LT(st.messages, st.records);
  StreamReader r(nats_->url());
  const std::vector<StreamRecord> got = r.Records(p.stream());
  EXPECT_TRUE(HoldsExactly(got, sums, 400));
  for (const StreamRecord& rec : got) {
    EXPECT_LE(rec.message_bytes, 2048u) << "message " << rec.message << " (whole records only)";
  }
  EXPECT_EQ(p.stream(), "MATCHBOOK_test");
  EXPECT_EQ(p.subject(), "mb.test.journal");
}

TEST_F(PublisherTest, ARecordLargerThanAMessageTravelsAlone) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 60, &sums);
  PublisherOptions o = Options();
  o.message_bytes = 16;  // smaller than any record
  Publisher p(dir, history_.config_hash, o);
  p.Start(60);
  ASSERT_TRUE(p.WaitPublished(60, 20s)) << p.stats().last_error;
  p.Stop();
  EXPECT_EQ(p.stats().messages, 60u) << "one record per message";
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(p.stream()), sums, 60));
}

TEST_F(PublisherTest, ResumesAfterEitherSideRestartsWithoutGapOrDuplicate) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 100, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(100);
    ASSERT_TRUE(p.WaitPublished(100, 20s)) << p.stats().last_error;
    p.Stop();
  }
  Append(dir, history_, 101, 200, &sums);
  nats_->Stop();  // NATS restarts too, keeping its store
  nats_->Start();
  Publisher p(dir, history_.config_hash, Options());
  p.Start(200);
  ASSERT_TRUE(p.WaitPublished(200, 20s)) << p.stats().last_error;
  EXPECT_NE(LogText().find("holds records up to 100; publishing from 101"), std::string::npos)
      << LogText();
  p.Stop();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(p.stream()), sums, 200));
}

TEST_F(PublisherTest, AChangedConfigurationUpdatesTheStreamsLimits) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 10, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(10);
    ASSERT_TRUE(p.WaitPublished(10, 20s)) << p.stats().last_error;
    p.Stop();
  }
  PublisherOptions o = Options();
  o.max_bytes = int64_t{64} << 20;
  o.max_age = std::chrono::hours(2);
  Publisher p(dir, history_.config_hash, o);
  p.Start(10);
  ASSERT_TRUE(p.WaitPublished(10, 20s)) << p.stats().last_error;
  p.Stop();
  EXPECT_NE(LogText().find("stream MATCHBOOK_test: 1 replica(s), 32768 MiB, 604800 s → 1 "
                           "replica(s), 64 MiB, 7200 s"),
            std::string::npos)
      << LogText();
  StreamReader r(nats_->url());
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&si, r.js(), "MATCHBOOK_test", nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->Config->MaxBytes, int64_t{64} << 20);
  EXPECT_EQ(si->Config->MaxAge, int64_t{7200} * 1'000'000'000);
  jsStreamInfo_Destroy(si);
  EXPECT_TRUE(HoldsExactly(r.Records("MATCHBOOK_test"), sums, 10)) << "nothing lost by the update";
}

TEST_F(PublisherTest, NatsDownShowsAsLagThenCatchesUp) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 50, &sums);
  Publisher p(dir, history_.config_hash, Options());
  p.Start(50);
  ASSERT_TRUE(p.WaitPublished(50, 20s)) << p.stats().last_error;
  nats_->Stop(SIGKILL);
  Append(dir, history_, 51, 120, &sums);
  p.NotifyDurable(120);  // the fan-out thread's call: returns at once
  for (int i = 0; i < 200 && p.stats().last_error.empty(); ++i) std::this_thread::sleep_for(25ms);
  PublisherStats down = p.stats();
  EXPECT_FALSE(down.last_error.empty());
  EXPECT_FALSE(down.connected);
  EXPECT_EQ(down.published_seq, 50u);
  EXPECT_EQ(down.lag_events, 70u);
  nats_->Start();
  ASSERT_TRUE(p.WaitPublished(120, 30s)) << p.stats().last_error;
  EXPECT_TRUE(p.stats().last_error.empty());
  EXPECT_TRUE(p.stats().connected);
  p.Stop();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(p.stream()), sums, 120));
}

TEST_F(PublisherTest, ADeletedStreamIsMadeAgainAndFilledFromTheJournal) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 150, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(150);
    ASSERT_TRUE(p.WaitPublished(150, 20s)) << p.stats().last_error;
    p.Stop();
  }
  {
    StreamReader r(nats_->url());
    ASSERT_EQ(js_DeleteStream(r.js(), "MATCHBOOK_test", nullptr, nullptr), NATS_OK);
  }
  Publisher p(dir, history_.config_hash, Options());
  p.Start(150);
  ASSERT_TRUE(p.WaitPublished(150, 20s)) << p.stats().last_error;
  p.Stop();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(p.stream()), sums, 150));
}

TEST_F(PublisherTest, MessagesGoneFromTheStreamAreNotPublishedTwice) {
  // Purged (or expired) while the publisher runs and after it restarts:
  // publishing goes on after the last record published, never from 1 again.
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 50, &sums);
  Publisher p(dir, history_.config_hash, Options());
  p.Start(50);
  ASSERT_TRUE(p.WaitPublished(50, 20s)) << p.stats().last_error;
  StreamReader r(nats_->url());
  ASSERT_EQ(js_PurgeStream(r.js(), "MATCHBOOK_test", nullptr, nullptr), NATS_OK);
  Append(dir, history_, 51, 100, &sums);
  p.NotifyDurable(100);
  ASSERT_TRUE(p.WaitPublished(100, 20s)) << p.stats().last_error;
  std::vector<StreamRecord> got = r.Records(p.stream());
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().seq, 51u);
  EXPECT_EQ(got.back().seq, 100u);
  EXPECT_EQ(got.size(), 50u);
  p.Stop();

  ASSERT_EQ(js_PurgeStream(r.js(), "MATCHBOOK_test", nullptr, nullptr), NATS_OK);
  Append(dir, history_, 101, 120, &sums);
  Publisher again(dir, history_.config_hash, Options());
  again.Start(120);
  for (int i = 0; i < 100 && LogText().find("has no message left") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  again.Stop();
  EXPECT_NE(LogText().find("publishing from record 121"), std::string::npos) << LogText();
  EXPECT_TRUE(r.Records(again.stream()).empty()) << "nothing before the journal's end again";
}

TEST_F(PublisherTest, ASecondPrimaryIsRefusedAndSaysSo) {
  const auto dir_a = tmp_ / "a";
  const auto dir_b = tmp_ / "b";
  std::vector<uint64_t> sums_a;
  std::vector<uint64_t> sums_b;
  const History other = journal::MakeHistory(8, 400);  // same configuration, other trading
  ASSERT_EQ(other.config_hash, history_.config_hash);
  Append(dir_a, history_, 1, 80, &sums_a);
  Append(dir_b, other, 1, 90, &sums_b);
  Publisher a(dir_a, history_.config_hash, Options());
  a.Start(80);
  ASSERT_TRUE(a.WaitPublished(80, 20s)) << a.stats().last_error;

  // Ahead of the stream, with another record 80.
  Publisher b(dir_b, other.config_hash, Options());
  b.Start(90);
  EXPECT_TRUE(ErrorSays(b, "another primary publishes to it")) << b.stats().last_error;
  EXPECT_EQ(b.stats().published_seq, 0u);
  b.Stop();

  // Behind the stream.
  std::vector<uint64_t> sums_c;
  const auto dir_c = tmp_ / "c";
  Append(dir_c, other, 1, 60, &sums_c);
  Publisher c(dir_c, other.config_hash, Options());
  c.Start(60);
  EXPECT_TRUE(ErrorSays(c, "durable only to 60")) << c.stats().last_error;
  c.Stop();

  // The first goes on alone; the stream holds only its records.
  Append(dir_a, history_, 81, 100, &sums_a);
  a.NotifyDurable(100);
  ASSERT_TRUE(a.WaitPublished(100, 20s)) << a.stats().last_error;
  a.Stop();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(a.stream()), sums_a, 100));
}

TEST_F(PublisherTest, TwoPrimariesRacingNeverInterleave) {
  // Two primaries with different journals start together on an empty
  // stream: the condition on the stream's last message lets exactly one of
  // them write; the stream holds that one's records only, and the other
  // stops with the reason.
  const auto dir_a = tmp_ / "a";
  const auto dir_b = tmp_ / "b";
  const History other = journal::MakeHistory(9, 400);
  std::vector<uint64_t> sums_a;
  std::vector<uint64_t> sums_b;
  Append(dir_a, history_, 1, 400, &sums_a);
  Append(dir_b, other, 1, 400, &sums_b);
  Publisher a(dir_a, history_.config_hash, Options());
  PublisherOptions ob = Options();
  ob.message_bytes = 3000;  // other message ids: de-duplication cannot stand in
  Publisher b(dir_b, other.config_hash, ob);
  a.Start(400);
  b.Start(400);
  bool done = false;
  for (int i = 0; i < 400 && !done; ++i) {
    const auto refused = [](const Publisher& p) {
      return p.stats().last_error.find("another primary") != std::string::npos;
    };
    done = (a.stats().published_seq == 400 && refused(b)) ||
           (b.stats().published_seq == 400 && refused(a));
    std::this_thread::sleep_for(25ms);
  }
  const bool a_won = a.stats().published_seq == 400;
  Publisher& loser = a_won ? b : a;
  EXPECT_TRUE(done) << a.stats().last_error << " / " << b.stats().last_error;
  EXPECT_NE(loser.stats().last_error.find("another primary"), std::string::npos)
      << loser.stats().last_error;
  a.Stop();
  b.Stop();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(a.stream()), a_won ? sums_a : sums_b, 400));
}

TEST_F(PublisherTest, AStreamOfAnotherVenueOrConfigurationIsRefused) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 20, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(20);
    ASSERT_TRUE(p.WaitPublished(20, 20s)) << p.stats().last_error;
    p.Stop();
  }
  PublisherOptions o = Options("elsewhere");
  o.stream = "MATCHBOOK_test";  // pointed at the test venue's stream
  o.subject = "mb.test.journal";
  Publisher other_venue(dir, history_.config_hash, o);
  other_venue.Start(20);
  EXPECT_TRUE(ErrorSays(other_venue, "is not this venue's")) << other_venue.stats().last_error;
  other_venue.Stop();
  Publisher other_config(dir, history_.config_hash ^ 1, Options());
  other_config.Start(20);
  EXPECT_TRUE(ErrorSays(other_config, "another venue or another configuration"))
      << other_config.stats().last_error;
  other_config.Stop();
}

TEST_F(PublisherTest, ADamagedLastMessageIsRefused) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 30, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(30);
    ASSERT_TRUE(p.WaitPublished(30, 20s)) << p.stats().last_error;
    p.Stop();
  }
  {
    StreamReader r(nats_->url());
    const char junk[] = "not a journal record at all, just bytes";
    ASSERT_EQ(js_Publish(nullptr, r.js(), "mb.test.journal", junk, sizeof junk, nullptr, nullptr),
              NATS_OK);
  }
  Publisher p(dir, history_.config_hash, Options());
  p.Start(30);
  EXPECT_TRUE(ErrorSays(p, "is not a Matchbook journal message")) << p.stats().last_error;
  EXPECT_EQ(p.stats().published_seq, 0u);
  p.Stop();
}

TEST_F(PublisherTest, AnUnreachableServerIsAnErrorNotAStall) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 10, &sums);
  PublisherOptions o = Options();
  o.servers = {fmt::format("nats://127.0.0.1:{}", FreePort())};
  Publisher p(dir, history_.config_hash, o);
  p.Start(10);
  EXPECT_TRUE(ErrorSays(p, "cannot connect to NATS at nats://127.0.0.1:")) << p.stats().last_error;
  EXPECT_EQ(p.stats().lag_events, 10u);
  p.NotifyDurable(10);
  p.Stop();
  EXPECT_NE(LogText().find("trading is not affected"), std::string::npos) << LogText();
}

// Waits (bounded) until the publisher says snapshot `seq` is on the bus.
bool SnapshotOnBus(const Publisher& p, uint64_t seq) {
  for (int i = 0; i < 400 && p.stats().snapshot_seq < seq; ++i) std::this_thread::sleep_for(25ms);
  return p.stats().snapshot_seq == seq;
}

TEST_F(PublisherTest, SnapshotsReachTheBusAndAReplicaFetchesTheNewest) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 200, &sums);
  auto snap120 = journal::Snapshot(dir, history_, 120, sums[119]);
  ASSERT_TRUE(snap120.ok()) << snap120.status().message();
  PublisherOptions o = Options();
  o.message_bytes = 1024;  // a snapshot of several chunks
  Publisher p(dir, history_.config_hash, o);
  p.Start(200);
  ASSERT_TRUE(p.WaitPublished(200, 20s)) << p.stats().last_error;
  ASSERT_TRUE(SnapshotOnBus(p, 120)) << LogText();

  const SnapshotSource source{{nats_->url()}, p.stream(), p.subject(), 2000ms, {}, nullptr};
  const auto replica = tmp_ / "replica";
  auto got = FetchNewestSnapshot(source, replica);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->seq, 120u);
  EXPECT_EQ(got->state_hash, journal::EngineAt(history_, 120).StateHash());
  EXPECT_EQ(journal::Load(replica / "snapshots" / journal::SnapshotFileName(120)),
            journal::Load(*snap120))
      << "the file travels as the journal wrote it";

  // Newer snapshots replace it; the stream keeps the newest two.
  auto snap160 = journal::Snapshot(dir, history_, 160, sums[159]);
  ASSERT_TRUE(snap160.ok());
  ASSERT_TRUE(SnapshotOnBus(p, 160)) << LogText();
  auto snap200 = journal::Snapshot(dir, history_, 200, sums[199]);
  ASSERT_TRUE(snap200.ok());
  ASSERT_TRUE(SnapshotOnBus(p, 200)) << LogText();
  got = FetchNewestSnapshot(source, tmp_ / "replica2");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->seq, 200u);
  p.Stop();
  StreamReader r(nats_->url());
  auto on_bus = [&](uint64_t seq) {
    natsMsg* m = nullptr;
    const std::string subject = fmt::format("{}.snapshot.{}", p.subject(), seq);
    const bool found = js_GetLastMsg(&m, r.js(), "MATCHBOOK_test_SNAPSHOTS", subject.c_str(),
                                     nullptr, nullptr) == NATS_OK;
    if (m != nullptr) natsMsg_Destroy(m);
    return found;
  };
  EXPECT_FALSE(on_bus(120)) << "older than the newest two: purged";
  EXPECT_TRUE(on_bus(160));
  EXPECT_TRUE(on_bus(200));

  // A restarted publisher finds snapshot 200 on the bus and does not send it again.
  Publisher again(dir, history_.config_hash, o);
  again.Start(200);
  ASSERT_TRUE(again.WaitPublished(200, 20s));
  for (int i = 0; i < 100 && again.stats().snapshot_seq == 0; ++i)
    std::this_thread::sleep_for(20ms);
  again.Stop();
  EXPECT_EQ(again.stats().snapshot_seq, 200u);
  const std::string log = LogText();
  EXPECT_EQ(log.find("snapshot 200 on the bus"), log.rfind("snapshot 200 on the bus"))
      << "published once: " << log;
}

TEST_F(PublisherTest, FetchingASnapshotSaysWhatIsMissingOrWrong) {
  const SnapshotSource source{{nats_->url()}, "MATCHBOOK_test", "mb.test.journal", 2000ms, {},
                              nullptr};
  auto none = FetchNewestSnapshot(source, tmp_ / "r1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no snapshot on the bus yet"), std::string::npos)
      << none.status().message();

  // A manifest whose chunks are not there.
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 20, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(20);
    ASSERT_TRUE(p.WaitPublished(20, 20s));
    auto snap = journal::Snapshot(dir, history_, 20, sums[19]);
    ASSERT_TRUE(snap.ok());
    ASSERT_TRUE(SnapshotOnBus(p, 20)) << LogText();
    p.Stop();
  }
  StreamReader r(nats_->url());
  const char bogus[] = "seq=999 bytes=10 chunks=1 first=1";
  ASSERT_EQ(js_Publish(nullptr, r.js(), "mb.test.journal.snapshot.manifest", bogus,
                       sizeof bogus - 1, nullptr, nullptr),
            NATS_OK);
  auto wrong = FetchNewestSnapshot(source, tmp_ / "r2");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("is not chunk 0/1 of snapshot 999"), std::string::npos)
      << wrong.status().message();
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "r2" / "snapshots" / journal::SnapshotFileName(999)));

  const char junk[] = "seq=abc";
  ASSERT_EQ(js_Publish(nullptr, r.js(), "mb.test.journal.snapshot.manifest", junk, sizeof junk - 1,
                       nullptr, nullptr),
            NATS_OK);
  auto bad = FetchNewestSnapshot(source, tmp_ / "r3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not \"seq=S bytes=B chunks=N first=F\""),
            std::string::npos)
      << bad.status().message();
}

// Three nats-servers routed to each other on loopback: one JetStream
// cluster, an R3 stream. One node is killed while records are published;
// the publisher goes on through the other two, and the stream holds every
// record once.
// ---- the replica's follower (bus/follower.h) --------------------------------

// What a follower fed: each boot's sequence, then the records' sequences as
// applied (dense after each boot, or the test fails), and their events.
class RecordingSink final : public FollowerSink {
 public:
  void Bootstrap(const engine::EngineImage& image) override {
    std::lock_guard<std::mutex> lock(mu_);
    boots_.push_back(Raw(image.last_sequence));
    last_ = Raw(image.last_sequence);
  }
  void Apply(std::span<const engine::Event> events) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const engine::Event& e : events) {
      const uint64_t seq = Raw(e.seq);
      if (seq != last_ && seq != last_ + 1) out_of_order_ = true;
      if (seq == last_ + 1) applied_.push_back(seq);
      last_ = seq;
      events_[seq].push_back(e);
    }
  }
  void Tick() override { ticks_.fetch_add(1); }

  std::vector<uint64_t> boots() {
    std::lock_guard<std::mutex> lock(mu_);
    return boots_;
  }
  std::vector<uint64_t> applied() {
    std::lock_guard<std::mutex> lock(mu_);
    return applied_;
  }
  bool out_of_order() {
    std::lock_guard<std::mutex> lock(mu_);
    return out_of_order_;
  }
  std::size_t events_of(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    return events_[seq].size();
  }
  std::atomic<uint64_t> ticks_{0};

 private:
  std::mutex mu_;
  std::vector<uint64_t> boots_;
  std::vector<uint64_t> applied_;
  std::map<uint64_t, engine::EventBuffer> events_;
  uint64_t last_ = 0;
  bool out_of_order_ = false;
};

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

class FollowerTest : public PublisherTest {
 protected:
  FollowerOptions Follow(std::string venue = "test") {
    FollowerOptions o;
    o.servers = {nats_->url()};
    o.venue = std::move(venue);
    o.timeout = 1000ms;
    o.retry = 100ms;
    o.stall = 1000ms;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += "follower: " + std::string(line) + "\n";
    };
    return o;
  }
  // A message into the journal stream as no Matchbook publisher would send
  // it: id `id`, the given bytes.
  void Inject(const std::string& id, std::span<const std::byte> data, const char* sig = nullptr) {
    StreamReader r(nats_->url());
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = id.c_str();
    const bus::Published p = PublishMessage(r.js(), "mb.test.journal", data, po,
                                            sig != nullptr ? kSignatureHeader : nullptr, sig);
    ASSERT_EQ(p.status, NATS_OK);
  }
  // Records first..last of the history, framed as the journal frames them.
  std::vector<std::byte> Framed(uint64_t first, uint64_t last) {
    return FramedFrom(history_, first, last);
  }
  static std::vector<std::byte> FramedFrom(const History& h, uint64_t first, uint64_t last) {
    std::vector<std::byte> out;
    for (uint64_t s = first; s <= last; ++s) {
      std::vector<std::byte> payload;
      for (const engine::Event& e : h.records[s - 1]) {
        const std::vector<std::byte> one = codec::EncodeToVector(e);
        payload.insert(payload.end(), one.begin(), one.end());
      }
      std::array<std::byte, journal::kRecordHeaderSize> header{};
      journal::EncodeRecordHeader(journal::RecordType::kCommandOutcome, s, payload, header);
      out.insert(out.end(), header.begin(), header.end());
      out.insert(out.end(), payload.begin(), payload.end());
    }
    return out;
  }
};

TEST_F(FollowerTest, BootsFromTheNewestSnapshotAndAppliesEveryLaterRecordOnce) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 200, &sums);
  ASSERT_TRUE(journal::Snapshot(dir, history_, 120, sums[119]).ok());
  Publisher p(dir, history_.config_hash, Options());
  p.Start(200);
  ASSERT_TRUE(p.WaitPublished(200, 20s)) << p.stats().last_error;
  ASSERT_TRUE(SnapshotOnBus(p, 120)) << LogText();

  RecordingSink sink;
  Follower f(tmp_ / "replica", history_.config, Follow(), &sink);
  ASSERT_TRUE(f.Start().ok()) << LogText();
  ASSERT_TRUE(WaitFor([&] { return f.stats().applied_seq == 200 && f.stats().caught_up; }))
      << LogText();
  // More records while it follows.
  Append(dir, history_, 201, 300, &sums);
  p.NotifyDurable(300);
  ASSERT_TRUE(WaitFor([&] { return f.stats().applied_seq == 300; })) << LogText();
  const FollowerStats st = f.stats();
  f.Stop();
  p.Stop();
  EXPECT_EQ(sink.boots(), std::vector<uint64_t>{120});
  std::vector<uint64_t> want;
  for (uint64_t s = 121; s <= 300; ++s) want.push_back(s);
  EXPECT_EQ(sink.applied(), want);
  EXPECT_FALSE(sink.out_of_order());
  for (uint64_t s = 121; s <= 300; ++s) {
    ASSERT_EQ(sink.events_of(s), history_.records[s - 1].size()) << "record " << s;
  }
  EXPECT_EQ(st.snapshot_seq, 120u);
  EXPECT_EQ(st.lag_events, 0u);
  EXPECT_EQ(st.duplicates, 0u);
  EXPECT_EQ(st.resyncs, 0u);
  EXPECT_GT(sink.ticks_.load(), 0u) << "the streams' clock";
}

TEST_F(FollowerTest, DuplicatesAreSkippedAndADamagedMessageIsNeverApplied) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 100, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(100);
    ASSERT_TRUE(p.WaitPublished(100, 20s)) << p.stats().last_error;
    p.Stop();
  }
  // Records 99..101 again (two of them applied already), then a message
  // whose second record is cut short.
  Inject("101", Framed(99, 101));
  std::vector<std::byte> bad = Framed(102, 103);
  bad.resize(bad.size() - 3);
  Inject("103", bad);

  RecordingSink sink;
  Follower f(tmp_ / "replica", history_.config, Follow(), &sink);
  ASSERT_TRUE(f.Start().ok()) << LogText();  // no snapshot: from record 1
  // Stuck before the damage, saying why, until a snapshot past it exists:
  // never back to an older state, never ready meanwhile.
  ASSERT_TRUE(WaitFor([&] {
    return f.stats().last_error.find("waiting for a snapshot past it") != std::string::npos;
  })) << LogText();
  const FollowerStats st = f.stats();
  f.Stop();
  EXPECT_FALSE(sink.out_of_order()) << LogText();
  EXPECT_EQ(st.duplicates, 2u);
  EXPECT_NE(LogText().find("is damaged"), std::string::npos) << LogText();
  EXPECT_EQ(sink.boots(), std::vector<uint64_t>{0}) << "no boot back to an older state";
  EXPECT_EQ(st.applied_seq, 101u);
  EXPECT_FALSE(st.caught_up);
  EXPECT_EQ(sink.events_of(102), 0u) << "nothing of the damaged message";
}

// The venue's bus key signs every message and manifest; a replica verifies
// each: a record published without the key's signature — framed and
// checksummed as the journal would — is never applied.
TEST_F(FollowerTest, OnlyWhatTheBusKeySignedIsApplied) {
  auto key = Ed25519Key::Generate();
  ASSERT_TRUE(key.ok());
  auto pub = Ed25519PublicKey::FromRaw(key->public_key());
  ASSERT_TRUE(pub.ok());
  const auto verifier = std::make_shared<const BusVerifier>(*pub);
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 100, &sums);
  ASSERT_TRUE(journal::Snapshot(dir, history_, 60, sums[59]).ok());
  {
    PublisherOptions o = Options();
    o.signer = std::make_shared<const BusSigner>(*key);
    Publisher p(dir, history_.config_hash, o);
    p.Start(100);
    ASSERT_TRUE(p.WaitPublished(100, 20s)) << p.stats().last_error;
    ASSERT_TRUE(SnapshotOnBus(p, 60)) << LogText();
    p.Stop();
  }
  RecordingSink sink;
  FollowerOptions fo = Follow();
  fo.verifier = verifier;
  Follower f(tmp_ / "replica", history_.config, fo, &sink);
  ASSERT_TRUE(f.Start().ok()) << LogText();
  ASSERT_TRUE(WaitFor([&] { return f.stats().applied_seq == 100 && f.stats().caught_up; }))
      << LogText();
  EXPECT_EQ(sink.boots(), std::vector<uint64_t>{60}) << "the signed snapshot";

  // Record 101 as an attacker with publish rights would append it: no
  // signature, then a signature by another key.
  Inject("101", Framed(101, 101));
  ASSERT_TRUE(WaitFor([&] { return f.stats().refused >= 1; })) << LogText();
  auto other = Ed25519Key::Generate();
  ASSERT_TRUE(other.ok());
  const std::vector<std::byte> forged = Framed(101, 101);
  const std::string sig =
      BusSigner(*other).Sign(SignedKind::kJournal, "MATCHBOOK_test", "101", forged);
  Inject("101x", forged, sig.c_str());
  ASSERT_TRUE(WaitFor([&] { return f.stats().refused >= 2; })) << LogText();
  const FollowerStats st = f.stats();
  f.Stop();
  EXPECT_EQ(st.applied_seq, 100u) << "the state stays at the last signed record";
  EXPECT_EQ(sink.events_of(101), 0u);
  EXPECT_FALSE(st.caught_up) << "not ready while the stream ends with what it refused";
  EXPECT_NE(st.last_error.find("refused"), std::string::npos) << st.last_error;
  EXPECT_NE(LogText().find("no Mb-Sig header"), std::string::npos) << LogText();
  EXPECT_NE(LogText().find("does not verify with the bus key"), std::string::npos) << LogText();

  // A replica given another key refuses the bus's snapshot and says why.
  const auto wrong =
      std::make_shared<const BusVerifier>(*Ed25519PublicKey::FromRaw(other->public_key()));
  FollowerOptions wo = Follow();
  wo.verifier = wrong;
  RecordingSink none;
  Follower w(tmp_ / "replica2", history_.config, wo, &none);
  const Status started = w.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find("refused"), std::string::npos) << started.message();
  EXPECT_TRUE(none.boots().empty());
}

// A message at the stream's end that the bus key did not sign and that is
// not this journal's (a NATS user with publish rights wrote it) is erased by
// the publisher, which goes on: it neither stops publishing nor reads as
// another primary. An earlier version's unsigned messages of this journal
// are kept.
TEST_F(FollowerTest, APublisherErasesForgedMessagesAtTheStreamsEnd) {
  auto key = Ed25519Key::Generate();
  ASSERT_TRUE(key.ok());
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 60, &sums);
  {  // An earlier version: unsigned.
    Publisher p(dir, history_.config_hash, Options());
    p.Start(60);
    ASSERT_TRUE(p.WaitPublished(60, 20s)) << p.stats().last_error;
    p.Stop();
  }
  PublisherOptions o = Options();
  o.signer = std::make_shared<const BusSigner>(*key);
  bool fenced = false;
  o.on_fenced = [&](std::string_view) { fenced = true; };
  Publisher p(dir, history_.config_hash, o);
  Append(dir, history_, 61, 100, &sums);
  p.Start(100);
  ASSERT_TRUE(p.WaitPublished(100, 20s)) << p.stats().last_error;
  EXPECT_EQ(p.stats().forged_erased, 0u) << "its own unsigned messages stay";

  // Two forged records 101 and 102 of another history, unsigned, then the
  // journal's own 101..120.
  const History other = journal::MakeHistory(8, 400);
  Inject("101", FramedFrom(other, 101, 101));
  Inject("102", FramedFrom(other, 102, 102));
  Append(dir, history_, 101, 120, &sums);
  p.NotifyDurable(120);
  ASSERT_TRUE(p.WaitPublished(120, 20s)) << p.stats().last_error << LogText();
  const PublisherStats st = p.stats();
  p.Stop();
  EXPECT_EQ(st.forged_erased, 2u) << LogText();
  EXPECT_FALSE(fenced);
  EXPECT_NE(LogText().find("is not signed with this venue's bus key and is not this journal's: "
                           "erased"),
            std::string::npos)
      << LogText();
  StreamReader r(nats_->url());
  EXPECT_TRUE(HoldsExactly(r.Records(p.stream()), sums, 120));

  // A forgery erased by an earlier publisher: the stream's last sequence is
  // still the erased one's, and the next publisher expects it. (An unsigned
  // well-framed message beyond this journal's end would be refused instead,
  // as an earlier version's primary's that this data directory is behind.)
  const std::vector<std::byte> garbage(7, std::byte{0x5a});
  Inject("not-a-record", garbage);
  {
    Publisher eraser(dir, history_.config_hash, o);
    eraser.Start(120);
    ASSERT_TRUE(WaitFor([&] { return eraser.stats().forged_erased == 1; })) << LogText();
    eraser.Stop();
  }
  Append(dir, history_, 121, 130, &sums);
  Publisher next(dir, history_.config_hash, o);
  next.Start(130);
  ASSERT_TRUE(next.WaitPublished(130, 20s)) << next.stats().last_error << LogText();
  next.Stop();
  EXPECT_TRUE(HoldsExactly(r.Records(next.stream()), sums, 130)) << LogText();
}

TEST_F(FollowerTest, AGapIsNeverAppliedAcrossAndAnotherConfigurationIsRefused) {
  const auto dir = tmp_ / "data";
  std::vector<uint64_t> sums;
  Append(dir, history_, 1, 50, &sums);
  {
    Publisher p(dir, history_.config_hash, Options());
    p.Start(50);
    ASSERT_TRUE(p.WaitPublished(50, 20s)) << p.stats().last_error;
    p.Stop();
  }
  Inject("60", Framed(55, 60));  // 51..54 missing
  RecordingSink sink;
  Follower f(tmp_ / "replica", history_.config, Follow(), &sink);
  ASSERT_TRUE(f.Start().ok()) << LogText();
  ASSERT_TRUE(WaitFor([&] {
    return f.stats().last_error.find("record 51 cannot be had") != std::string::npos;
  })) << LogText();
  EXPECT_FALSE(f.stats().caught_up);
  EXPECT_EQ(f.stats().applied_seq, 50u);
  EXPECT_EQ(sink.events_of(55), 0u);
  // A snapshot past the gap reaches the bus (the primary goes on from the
  // stream's last record, 60, whose checksum is its journal's): the replica
  // boots from it and follows again.
  Append(dir, history_, 51, 70, &sums);
  ASSERT_TRUE(journal::Snapshot(dir, history_, 65, sums[64]).ok());
  Publisher p(dir, history_.config_hash, Options());
  p.Start(70);
  ASSERT_TRUE(p.WaitPublished(70, 20s)) << p.stats().last_error;
  ASSERT_TRUE(WaitFor([&] { return f.stats().applied_seq == 70 && f.stats().caught_up; }))
      << LogText();
  p.Stop();
  f.Stop();
  EXPECT_EQ(sink.boots(), (std::vector<uint64_t>{0, 65}));
  EXPECT_EQ(f.stats().resyncs, 1u);
  EXPECT_FALSE(sink.out_of_order());
  EXPECT_EQ(sink.events_of(55), 0u) << "never applied across the gap";
  EXPECT_EQ(sink.events_of(66), history_.records[65].size());
  EXPECT_NE(LogText().find("record 55 follows record 50"), std::string::npos) << LogText();

  // The same stream followed under another configuration: refused at start.
  engine::EngineConfig other = history_.config;
  other.markets[0].maker_fee_bps += 1;
  RecordingSink none;
  Follower g(tmp_ / "other", other, Follow(), &none);
  const Status st = g.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--config"), std::string::npos) << st.message();
  EXPECT_TRUE(none.boots().empty());
  // A venue with no stream: refused, naming it.
  Follower h(tmp_ / "nostream", history_.config, Follow("elsewhere"), &none);
  const Status missing = h.Start();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("MATCHBOOK_elsewhere"), std::string::npos) << missing.message();
}

// The publisher and a replica's follower, both on the cluster's three URLs.
TEST(PublisherCluster, ANodeOfThreeKilledUnderLoadLosesNothing) {
  TempDir tmp;
  std::vector<uint16_t> routes = {FreePort(), FreePort(), FreePort()};
  std::vector<std::unique_ptr<NatsServer>> nodes;
  for (std::size_t i = 0; i < 3; ++i) {
    std::string others;
    for (std::size_t j = 0; j < 3; ++j) {
      if (j == i) continue;
      others += fmt::format("{}nats://127.0.0.1:{}", others.empty() ? "" : ",", routes[j]);
    }
    const auto dir = tmp / fmt::format("n{}", i);
    std::filesystem::create_directories(dir);
    nodes.push_back(std::make_unique<NatsServer>(
        dir, std::vector<std::string>{
                 "--server_name", fmt::format("n{}", i), "--cluster_name", "mb", "--cluster",
                 fmt::format("nats://127.0.0.1:{}", routes[i]), "--routes", others}));
  }
  for (auto& n : nodes) n->Start();
  const History h = journal::MakeHistory(11, 600);
  const auto dir = tmp / "data";
  std::vector<uint64_t> sums;
  auto first = journal::AppendHistory(dir, h, 1, 200, journal::Options());
  ASSERT_TRUE(first.ok()) << first.status().message();
  sums = *first;

  PublisherOptions o;
  for (auto& n : nodes) o.servers.push_back(n->url());
  o.venue = "cluster";
  o.replicas = 3;
  o.message_bytes = 2048;
  o.timeout = 2000ms;
  o.retry = 200ms;
  o.log = [](std::string_view) {};
  Publisher p(dir, h.config_hash, o);
  p.Start(200);
  // The cluster elects its JetStream leader first: the publisher retries until then.
  ASSERT_TRUE(p.WaitPublished(200, 60s)) << p.stats().last_error;

  RecordingSink sink;
  FollowerOptions fo;
  fo.servers = o.servers;
  fo.venue = "cluster";
  fo.timeout = 2000ms;
  fo.retry = 200ms;
  fo.stall = 1000ms;
  std::mutex log_mu;
  std::string follower_log;
  fo.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    follower_log += std::string(line) + "\n";
  };
  Follower f(tmp / "replica", h.config, fo, &sink);
  ASSERT_TRUE(f.Start().ok());

  // The node that leads the stream is the one that dies.
  std::size_t leader = 0;
  {
    StreamReader r(nodes[0]->url());
    jsStreamInfo* si = nullptr;
    ASSERT_EQ(js_GetStreamInfo(&si, r.js(), "MATCHBOOK_cluster", nullptr, nullptr), NATS_OK);
    ASSERT_NE(si->Cluster, nullptr);
    ASSERT_NE(si->Cluster->Leader, nullptr);
    leader = static_cast<std::size_t>(si->Cluster->Leader[1] - '0');
    jsStreamInfo_Destroy(si);
    ASSERT_LT(leader, 3u);
  }
  // Records keep coming while it dies.
  for (uint64_t at = 201; at <= 600; at += 50) {
    auto more = journal::AppendHistory(dir, h, at, at + 49, journal::Options());
    ASSERT_TRUE(more.ok()) << more.status().message();
    sums.insert(sums.end(), more->begin(), more->end());
    p.NotifyDurable(at + 49);
    if (at == 301) nodes[leader]->Stop(SIGKILL);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(p.WaitPublished(600, 60s)) << p.stats().last_error;
  p.Stop();
  EXPECT_TRUE(WaitFor([&] { return f.stats().applied_seq == 600; }, 60s)) << [&] {
    std::lock_guard<std::mutex> lock(log_mu);
    return follower_log;
  }();
  f.Stop();
  EXPECT_FALSE(sink.out_of_order());
  std::vector<uint64_t> want;
  for (uint64_t s = 1; s <= 600; ++s) want.push_back(s);
  EXPECT_EQ(sink.applied(), want) << "every record once, in order, across the leader's death";

  StreamReader r(nodes[(leader + 1) % 3]->url());
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&si, r.js(), "MATCHBOOK_cluster", nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->Config->Replicas, 3);
  jsStreamInfo_Destroy(si);
  EXPECT_TRUE(HoldsExactly(r.Records("MATCHBOOK_cluster"), sums, 600));
}

TEST(BusNames, ServersVenuesAndDefaults) {
  auto one = ParseServers("nats://127.0.0.1:4222");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"nats://127.0.0.1:4222"});
  auto list = ParseServers("nats://a:4222, b:4223");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<std::string>{"nats://a:4222", "nats://b:4223"}));
  for (std::string_view bad : {"", "nats://", "nats://host", "host:0", "host:99999",
                               "http://a:4222", "a:4222,", "a:42x", "a b:4222"}) {
    auto r = ParseServers(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("nats://host:port"), std::string::npos);
    }
  }
  EXPECT_TRUE(CheckVenue("matchbook").ok());
  EXPECT_TRUE(CheckVenue("Venue_2-b").ok());
  const std::string_view bad_venues[] = {"",   "a.b", "a b",
                                         "a*", "a>",  "0123456789abcdef0123456789abcdefX"};
  for (std::string_view bad : bad_venues) {
    EXPECT_FALSE(CheckVenue(bad).ok()) << bad;
  }
  EXPECT_EQ(DefaultStream("matchbook"), "MATCHBOOK_matchbook");
  EXPECT_EQ(DefaultSubject("matchbook"), "mb.matchbook.journal");
}

// The NATS library's threads end with the test program.
class NatsLibrary : public ::testing::Environment {
 public:
  void TearDown() override { ShutdownNats(); }
};
const auto* const kNatsLibrary = ::testing::AddGlobalTestEnvironment(new NatsLibrary);

}  // namespace
}  // namespace mb::bus
