// The flight recorder: a slow command dumps its window to one JSON file;
// suppression, pruning, the listing at Start, refused names, and torn-free
// reads under a concurrent writer.
#include "metrics/flight_recorder.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/src.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace mb::metrics {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr int64_t kMs = 1'000'000;

// Every stage reached, evenly spread over latency_ns.
CommandTrace Trace(uint64_t seq, int64_t ingress_ns, int64_t latency_ns) {
  CommandTrace t;
  t.seq = seq;
  t.account = static_cast<uint32_t>(seq % 1000);
  t.kind = "new_order";
  t.http_status = 200;
  t.ingress_ns = ingress_ns;
  t.submitted_ns = ingress_ns + latency_ns / 6;
  t.sequenced_ns = ingress_ns + 2 * latency_ns / 6;
  t.matched_ns = ingress_ns + 3 * latency_ns / 6;
  t.journaled_ns = ingress_ns + 4 * latency_ns / 6;
  t.durable_ns = ingress_ns + 5 * latency_ns / 6;
  t.responded_ns = ingress_ns + latency_ns;
  return t;
}

// Polls a condition the recorder's own thread makes true, up to a deadline.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("mb-flight-{}-{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  FlightRecorderOptions Options() const {
    FlightRecorderOptions o;
    o.dir = dir_;
    o.capacity = 1024;
    o.window_ms = 400;
    o.threshold_ns = 1 * kMs;
    o.min_interval_ms = 0;
    return o;
  }

  std::set<std::string> FilesInDir() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }

  fs::path dir_;
};

TEST_F(FlightRecorderTest, OneSlowCommandDumpsItsWindow) {
  FlightRecorder fr(Options());
  ASSERT_TRUE(fr.Start().ok());
  const int64_t now = SteadyNs();
  for (uint64_t s = 1; s <= 10; ++s) fr.Record(Trace(s, now - 2000 * kMs, 100'000));  // too old
  for (uint64_t s = 11; s <= 20; ++s) fr.Record(Trace(s, now - 100 * kMs, 100'000));
  CommandTrace refused = Trace(0, now - 50 * kMs, 0);  // answered without reaching the engine
  refused.kind = "cancel";
  refused.http_status = 400;
  refused.submitted_ns = refused.sequenced_ns = refused.matched_ns = 0;
  refused.journaled_ns = refused.durable_ns = 0;
  refused.responded_ns = refused.ingress_ns + 20'000;
  fr.Record(refused);
  fr.Record(Trace(21, now - 5 * kMs, 5 * kMs));  // the slow one
  for (uint64_t s = 22; s <= 25; ++s) fr.Record(Trace(s, SteadyNs(), 50'000));

  // The count is published after the listing: waiting on it sees both.
  ASSERT_TRUE(WaitFor([&] { return fr.stats().dumps == 1; }));
  const auto dumps = fr.Dumps();
  ASSERT_EQ(dumps.size(), 1u);
  const auto& d = dumps[0];
  EXPECT_EQ(d.trigger_seq, 21u);
  EXPECT_EQ(d.trigger_latency_ns, 5u * kMs);
  EXPECT_EQ(d.traces, 16u);  // 11..25 and the refused one
  EXPECT_TRUE(d.file.starts_with("flight-")) << d.file;
  EXPECT_TRUE(d.file.ends_with("-seq21.json")) << d.file;
  EXPECT_EQ(d.file.size(), std::string("flight-20240101T000000.000-seq21.json").size());
  EXPECT_EQ(fs::file_size(dir_ / d.file), d.bytes);
  EXPECT_EQ(FilesInDir(), std::set<std::string>{d.file});
  const auto stats = fr.stats();
  EXPECT_EQ(stats.recorded, 26u);
  EXPECT_EQ(stats.triggers, 1u);
  EXPECT_EQ(stats.dumps, 1u);
  EXPECT_EQ(stats.suppressed, 0u);

  const Result<std::string> text = fr.ReadDump(d.file);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(text->size(), d.bytes);
  const json::object root = json::parse(*text).as_object();
  EXPECT_EQ(root.at("triggerSeq").to_number<uint64_t>(), 21u);
  EXPECT_EQ(root.at("traceCount").to_number<uint64_t>(), 16u);
  EXPECT_EQ(root.at("windowMs").to_number<uint64_t>(), 400u);
  EXPECT_EQ(root.at("thresholdMs").to_number<double>(), 1.0);
  EXPECT_EQ(root.at("writtenAtMs").to_number<int64_t>(), d.wall_ms);
  const json::object& trigger = root.at("trigger").as_object();
  EXPECT_EQ(trigger.at("seq").to_number<uint64_t>(), 21u);
  EXPECT_EQ(trigger.at("respondedUs").to_number<double>(), 5000.0);

  const json::array& traces = root.at("traces").as_array();
  ASSERT_EQ(traces.size(), 16u);
  std::vector<uint64_t> seqs;
  for (const auto& t : traces) seqs.push_back(t.at("seq").to_number<uint64_t>());
  std::vector<uint64_t> want;
  for (uint64_t s = 11; s <= 20; ++s) want.push_back(s);
  want.push_back(0);
  for (uint64_t s = 21; s <= 25; ++s) want.push_back(s);
  EXPECT_EQ(seqs, want);

  const json::object& first = traces[0].as_object();
  EXPECT_EQ(first.at("account").to_number<uint32_t>(), 11u);
  EXPECT_EQ(first.at("kind").as_string(), "new_order");
  EXPECT_EQ(first.at("httpStatus").to_number<int>(), 200);
  EXPECT_EQ(first.at("respondedUs").to_number<double>(), 100.0);
  // Ingress in wall-clock milliseconds: within a minute of now.
  const auto wall_now_ms = static_cast<double>(WallMs());
  EXPECT_NEAR(first.at("ingress").to_number<double>(), wall_now_ms, 60'000.0);
  const json::object& cancel = traces[10].as_object();
  EXPECT_EQ(cancel.at("kind").as_string(), "cancel");
  EXPECT_EQ(cancel.at("httpStatus").to_number<int>(), 400);
  EXPECT_TRUE(cancel.at("submittedUs").is_null());
  EXPECT_TRUE(cancel.at("durableUs").is_null());
  EXPECT_EQ(cancel.at("respondedUs").to_number<double>(), 20.0);
}

TEST_F(FlightRecorderTest, TriggersWithinTheIntervalAreSuppressed) {
  FlightRecorderOptions o = Options();
  o.window_ms = 20;
  o.min_interval_ms = 60'000;
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  fr.Record(Trace(1, SteadyNs() - 3 * kMs, 3 * kMs));
  ASSERT_TRUE(WaitFor([&] { return fr.stats().dumps == 1; }));
  fr.Record(Trace(2, SteadyNs() - 3 * kMs, 3 * kMs));
  fr.Record(Trace(3, SteadyNs() - 100, 100));  // fast
  fr.Stop();
  const auto s = fr.stats();
  EXPECT_EQ(s.triggers, 2u);
  EXPECT_EQ(s.suppressed, 1u);
  EXPECT_EQ(s.dumps, 1u);
  ASSERT_EQ(fr.Dumps().size(), 1u);
  EXPECT_EQ(fr.Dumps()[0].trigger_seq, 1u);
}

TEST_F(FlightRecorderTest, TriggersWhileADumpIsPendingAreSuppressedAndStopWritesIt) {
  FlightRecorderOptions o = Options();
  o.window_ms = 600'000;  // the dumper would wait five minutes for the rest of the window
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  fr.Record(Trace(7, SteadyNs() - 3 * kMs, 3 * kMs));
  fr.Record(Trace(8, SteadyNs() - 3 * kMs, 3 * kMs));
  EXPECT_EQ(fr.stats().suppressed, 1u);
  fr.Stop();  // writes the pending dump now
  fr.Stop();  // idempotent
  ASSERT_EQ(fr.Dumps().size(), 1u);
  EXPECT_EQ(fr.Dumps()[0].trigger_seq, 7u);
  EXPECT_EQ(fr.Dumps()[0].traces, 2u);
  EXPECT_EQ(fr.stats().dumps, 1u);
}

TEST_F(FlightRecorderTest, KeepsOnlyTheNewestFilesAndListsThemAtStart) {
  FlightRecorderOptions o = Options();
  o.window_ms = 10;
  o.keep = 2;
  std::vector<std::string> names;
  std::vector<FlightRecorder::DumpInfo> listed;
  {
    FlightRecorder fr(o);
    ASSERT_TRUE(fr.Start().ok());
    for (uint64_t s = 1; s <= 3; ++s) {
      fr.Record(Trace(s, SteadyNs() - 2 * kMs, 2 * kMs + static_cast<int64_t>(s)));
      ASSERT_TRUE(WaitFor([&] { return fr.stats().dumps == s; }));
      names.push_back(fr.Dumps()[0].file);
    }
    listed = fr.Dumps();
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0].trigger_seq, 3u);
    EXPECT_EQ(listed[1].trigger_seq, 2u);
    EXPECT_EQ(FilesInDir(), (std::set<std::string>{names[1], names[2]}));
    EXPECT_FALSE(fr.ReadDump(names[0]).ok());
  }
  // A stray temporary file from a crash is removed at Start.
  std::ofstream(dir_ / "flight-20200101T000000.000-seq9.json.tmp") << "{";
  {
    FlightRecorder fr(o);
    ASSERT_TRUE(fr.Start().ok());
    const auto dumps = fr.Dumps();
    ASSERT_EQ(dumps.size(), 2u);
    EXPECT_EQ(dumps[0].file, names[2]);
    EXPECT_EQ(dumps[0].trigger_seq, 3u);
    EXPECT_EQ(dumps[0].trigger_latency_ns, 2u * kMs + 3);
    EXPECT_GE(dumps[0].traces, 1u);
    EXPECT_EQ(dumps[0].traces, listed[0].traces);
    EXPECT_EQ(dumps[0].bytes, listed[0].bytes);
    EXPECT_EQ(dumps[0].bytes, fs::file_size(dir_ / names[2]));
    EXPECT_EQ(dumps[0].wall_ms, listed[0].wall_ms);
    EXPECT_EQ(dumps[1].file, names[1]);
    EXPECT_EQ(dumps[1].trigger_latency_ns, listed[1].trigger_latency_ns);
    EXPECT_EQ(dumps[1].wall_ms, listed[1].wall_ms);
    EXPECT_TRUE(fr.ReadDump(names[1]).ok());
    EXPECT_EQ(FilesInDir(), (std::set<std::string>{names[1], names[2]}));
  }
  o.keep = 1;
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  ASSERT_EQ(fr.Dumps().size(), 1u);
  EXPECT_EQ(FilesInDir(), std::set<std::string>{names[2]});
}

// Dumps last modified longer ago than max_age_hours are deleted at Start and
// when a dump is written; young ones stay, whatever the time in their name.
TEST_F(FlightRecorderTest, DumpsOlderThanTheAgeLimitAreDeleted) {
  const auto set_age = [&](const std::string& name, std::chrono::hours age) {
    fs::last_write_time(dir_ / name, fs::file_time_type::clock::now() - age);
  };
  fs::create_directories(dir_);
  const std::string old_dump = "flight-20260101T000000.000-seq1.json";
  // Young by its modification time, old by its name: the file's time counts.
  const std::string young_dump = "flight-20200101T000000.000-seq2.json";
  const std::string other = "flight-notes.txt";  // not a dump: left alone
  for (const std::string& name : {old_dump, young_dump, other}) {
    std::ofstream(dir_ / name) << R"({"triggerSeq":1,"triggerLatencyNs":5,"traceCount":0})";
  }
  set_age(old_dump, std::chrono::hours(3));
  set_age(young_dump, std::chrono::hours(1));
  set_age(other, std::chrono::hours(3));

  FlightRecorderOptions o = Options();
  o.window_ms = 10;
  o.max_age_hours = 2;
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  ASSERT_EQ(fr.Dumps().size(), 1u);
  EXPECT_EQ(fr.Dumps()[0].file, young_dump);
  EXPECT_EQ(FilesInDir(), (std::set<std::string>{young_dump, other}));

  // The young dump ages past the limit; the next dump written takes it away.
  set_age(young_dump, std::chrono::hours(5));
  fr.Record(Trace(3, SteadyNs() - 2 * kMs, 2 * kMs));
  ASSERT_TRUE(WaitFor([&] { return fr.stats().dumps == 1; }));
  const auto dumps = fr.Dumps();
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(dumps[0].trigger_seq, 3u);
  EXPECT_EQ(FilesInDir(), (std::set<std::string>{dumps[0].file, other}));
  EXPECT_FALSE(fr.ReadDump(young_dump).ok());
}

TEST_F(FlightRecorderTest, ReadDumpRefusesNamesNotListed) {
  FlightRecorder fr(Options());
  ASSERT_TRUE(fr.Start().ok());
  std::ofstream(dir_ / "other.json") << "{}";
  fs::create_directories(dir_ / "sub");
  std::ofstream(dir_ / "sub" / "x") << "secret";
  for (std::string_view name : {"", "../x", "/etc/passwd", "other.json", "sub/x", "..", "."}) {
    const auto r = fr.ReadDump(name);
    EXPECT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << name;
  }
  fr.Record(Trace(5, SteadyNs() - 2 * kMs, 2 * kMs));
  ASSERT_TRUE(WaitFor([&] { return fr.Dumps().size() == 1; }));
  EXPECT_TRUE(fr.ReadDump(fr.Dumps()[0].file).ok());
  EXPECT_FALSE(fr.ReadDump("../" + fr.Dumps()[0].file).ok());
}

TEST_F(FlightRecorderTest, ZeroThresholdNeverDumps) {
  FlightRecorderOptions o = Options();
  o.threshold_ns = 0;
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  for (uint64_t s = 1; s <= 100; ++s) fr.Record(Trace(s, SteadyNs() - 1000 * kMs, 1000 * kMs));
  fr.Stop();
  const auto st = fr.stats();
  EXPECT_EQ(st.recorded, 100u);
  EXPECT_EQ(st.triggers, 0u);
  EXPECT_EQ(st.dumps, 0u);
  EXPECT_TRUE(fr.Dumps().empty());
  EXPECT_TRUE(FilesInDir().empty());
  EXPECT_EQ(fr.Recent(0).size(), 100u);
}

TEST_F(FlightRecorderTest, StartNamesAnUnusableDirectory) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "plain-file") << "x";
  FlightRecorderOptions o = Options();
  o.dir = dir_ / "plain-file" / "dumps";
  FlightRecorder fr(o);
  const Status st = fr.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(o.dir.string()), std::string::npos) << st.message();
}

// A dump that cannot be written (its directory replaced by a file) is
// counted and reported through the log the recorder was given.
TEST_F(FlightRecorderTest, ADumpThatCannotBeWrittenIsLogged) {
  std::mutex mu;
  std::vector<std::string> lines;
  auto o = Options();
  o.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(line);
  };
  FlightRecorder fr(o);
  ASSERT_TRUE(fr.Start().ok());
  fs::remove_all(dir_);
  std::ofstream(dir_) << "not a directory";
  fr.Record(Trace(1, SteadyNs() - 5 * kMs, 5 * kMs));
  ASSERT_TRUE(WaitFor([&] { return fr.stats().dump_errors == 1; }));
  EXPECT_EQ(fr.stats().dumps, 0u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("flight recorder: dump not written"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(dir_.string()), std::string::npos) << lines[0];
}

// Readers copying the ring while one thread writes never see a torn trace.
// Run under ThreadSanitizer too (the tsan preset).
TEST_F(FlightRecorderTest, RecentUnderAConcurrentWriter) {
  FlightRecorderOptions o = Options();
  o.capacity = 1000;  // rounded up to 1024
  o.threshold_ns = 0;
  FlightRecorder fr(o);
  constexpr uint64_t kTraces = 200'000;
  auto make = [](uint64_t s) {
    CommandTrace t = Trace(s, static_cast<int64_t>(s) * 1000, 500 + static_cast<int64_t>(s % 97));
    t.kind = (s % 2) != 0 ? "odd" : "even";
    return t;
  };
  std::atomic<bool> done{false};
  std::atomic<uint64_t> checked{0};
  auto reader = [&] {
    while (!done.load(std::memory_order_acquire)) {
      const auto traces = fr.Recent(0);
      EXPECT_LE(traces.size(), 1024u);
      uint64_t prev = 0;
      for (const CommandTrace& t : traces) {
        const CommandTrace w = make(t.seq);
        ASSERT_GT(t.seq, prev);
        prev = t.seq;
        ASSERT_EQ(t.account, w.account);
        ASSERT_STREQ(t.kind, w.kind);
        ASSERT_EQ(t.ingress_ns, w.ingress_ns);
        ASSERT_EQ(t.matched_ns, w.matched_ns);
        ASSERT_EQ(t.responded_ns, w.responded_ns);
      }
      checked.fetch_add(traces.size(), std::memory_order_relaxed);
    }
  };
  std::thread r1(reader), r2(reader);
  for (uint64_t s = 1; s <= kTraces; ++s) fr.Record(make(s));
  done.store(true, std::memory_order_release);
  r1.join();
  r2.join();

  const auto all = fr.Recent(0);
  ASSERT_EQ(all.size(), 1024u);
  EXPECT_EQ(all.front().seq, kTraces - 1023);
  EXPECT_EQ(all.back().seq, kTraces);
  const auto late = fr.Recent(static_cast<int64_t>(kTraces - 9) * 1000);
  ASSERT_EQ(late.size(), 10u);
  EXPECT_EQ(late.front().seq, kTraces - 9);
  EXPECT_EQ(fr.stats().recorded, kTraces);
}

}  // namespace
}  // namespace mb::metrics
