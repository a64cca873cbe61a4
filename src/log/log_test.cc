#include "log/log.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mb::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mb-log-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    file_ = (dir_ / "matchbook.log").string();
  }
  void TearDown() override {
    Shutdown();
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> Lines() {
    Shutdown();  // drains the queue
    std::ifstream in(file_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(LogTest, TextLinesCarryTimeLevelComponentMessageAndFields) {
  ASSERT_TRUE(Init({.level = Level::kInfo, .format = Format::kText, .file = file_}).ok());
  Info("exchange", "recovered sequence 10", {{"snapshot", "0"}, {"note", "two words"}});
  Debug("exchange", "not written below the level");
  Warn("gateway", "line one\nline two");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  // 2026-12-01T01:40:00.123456Z info  exchange: ...
  EXPECT_EQ(lines[0].size() > 28 ? lines[0][26] : ' ', 'Z') << lines[0];
  EXPECT_NE(lines[0].find(" info  exchange: recovered sequence 10 snapshot=0 note=\"two words\""),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("warn  gateway: line one\\nline two"), std::string::npos) << lines[1];
}

TEST_F(LogTest, AFileIsRotatedBySizeAndTheOldestDropped) {
  ASSERT_TRUE(Init({.level = Level::kInfo,
                    .format = Format::kText,
                    .file = file_,
                    .max_file_bytes = 4096,
                    .max_files = 2})
                  .ok());
  for (int i = 0; i < 400; ++i) Info("test", "line " + std::to_string(i) + std::string(60, 'x'));
  const auto lines = Lines();  // the current file's
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("line 399"), std::string::npos) << lines.back();
  for (const char* name : {"matchbook.log", "matchbook.1.log", "matchbook.2.log"}) {
    ASSERT_TRUE(std::filesystem::exists(dir_ / name)) << name;
    EXPECT_LE(std::filesystem::file_size(dir_ / name), 4096u) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "matchbook.3.log"));
}

// A line as the text format writes it, stamped `age` ago.
std::string LineStampedAgo(std::chrono::seconds age, std::string_view text) {
  const time_t t = std::time(nullptr) - static_cast<time_t>(age.count());
  tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(stamp) + ".000000Z info  test: " + std::string(text) + "\n";
}

void SetAge(const std::filesystem::path& path, std::chrono::hours age) {
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() - age);
}

std::string Contents(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file left by an earlier run whose first line is older than the age limit
// is rotated at the first line written (its modification time is fresh: the
// age counts from its first line), and a rotated file older than
// max_files x max_age_hours is deleted at Init.
TEST_F(LogTest, AFileIsRotatedByAgeAndExpiredRotatedFilesDeleted) {
  std::ofstream(file_) << LineStampedAgo(std::chrono::hours(25), "begun yesterday")
                       << LineStampedAgo(std::chrono::minutes(1), "written lately");
  std::ofstream(dir_ / "matchbook.1.log") << "rotated an hour ago\n";
  SetAge(dir_ / "matchbook.1.log", std::chrono::hours(1));
  std::ofstream(dir_ / "matchbook.2.log") << "rotated four days ago\n";
  SetAge(dir_ / "matchbook.2.log", std::chrono::hours(4 * 24));  // past 3 x 24 h
  ASSERT_TRUE(Init({.level = Level::kInfo,
                    .format = Format::kText,
                    .file = file_,
                    .max_files = 3,
                    .max_age_hours = 24})
                  .ok());
  Info("test", "after the restart");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("after the restart"), std::string::npos) << lines[0];
  EXPECT_NE(Contents(dir_ / "matchbook.1.log").find("begun yesterday"), std::string::npos);
  EXPECT_EQ(Contents(dir_ / "matchbook.2.log"), "rotated an hour ago\n");
  // Without the deletion the four-day-old file would have moved to .3.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "matchbook.3.log"));
}

// A young file goes on; a file whose first line carries no timestamp ages
// from its modification time.
TEST_F(LogTest, AYoungFileIsKeptAndAnUnstampedOneAgesFromItsModificationTime) {
  std::ofstream(file_) << LineStampedAgo(std::chrono::minutes(30), "half an hour ago");
  ASSERT_TRUE(Init({.file = file_, .max_age_hours = 1}).ok());
  Info("test", "appended");
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("appended"), std::string::npos) << lines[1];
  EXPECT_FALSE(std::filesystem::exists(dir_ / "matchbook.1.log"));

  std::ofstream(file_) << "no timestamp here\n";
  SetAge(file_, std::chrono::hours(2));
  ASSERT_TRUE(Init({.file = file_, .max_age_hours = 1}).ok());
  Info("test", "in a new file");
  lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("in a new file"), std::string::npos) << lines[0];
  EXPECT_EQ(Contents(dir_ / "matchbook.1.log"), "no timestamp here\n");
}

// With an age limit the size limit works as without one.
TEST_F(LogTest, WithAnAgeLimitAFileIsStillRotatedBySize) {
  ASSERT_TRUE(Init({.level = Level::kInfo,
                    .format = Format::kJson,
                    .file = file_,
                    .max_file_bytes = 4096,
                    .max_files = 2,
                    .max_age_hours = 24})
                  .ok());
  for (int i = 0; i < 400; ++i) Info("test", "line " + std::to_string(i) + std::string(60, 'x'));
  const auto lines = Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("line 399"), std::string::npos) << lines.back();
  for (const char* name : {"matchbook.log", "matchbook.1.log", "matchbook.2.log"}) {
    ASSERT_TRUE(std::filesystem::exists(dir_ / name)) << name;
    EXPECT_LE(std::filesystem::file_size(dir_ / name), 4096u) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "matchbook.3.log"));
}

TEST_F(LogTest, JsonLinesAreObjectsWithEscapedValues) {
  ASSERT_TRUE(Init({.level = Level::kDebug, .format = Format::kJson, .file = file_}).ok());
  Debug("projection", "say \"hi\"\\", {{"lag", "5"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  const std::string& l = lines[0];
  EXPECT_EQ(l.rfind("{\"ts\":\"", 0), 0u) << l;
  EXPECT_NE(l.find(R"("level":"debug","component":"projection","msg":"say \"hi\"\\","lag":"5"})"),
            std::string::npos)
      << l;
  EXPECT_EQ(l.back(), '}');
}

TEST_F(LogTest, SecretFieldsAreRedacted) {
  ASSERT_TRUE(Init({.format = Format::kJson, .file = file_}).ok());
  Info("gateway", "key created", {{"apiKey", "visible-key"}, {"secret", "s3cr3t-value"}});
  Info("gateway", "admin", {{"token", "tok-123"}, {"password", "pw"}, {"signature", "abcd"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& l : lines) {
    EXPECT_EQ(l.find("s3cr3t-value"), std::string::npos) << l;
    EXPECT_EQ(l.find("tok-123"), std::string::npos) << l;
    EXPECT_EQ(l.find("\"pw\""), std::string::npos) << l;
    EXPECT_EQ(l.find("abcd"), std::string::npos) << l;
  }
  EXPECT_NE(lines[0].find("visible-key"), std::string::npos);
  EXPECT_NE(lines[0].find("<redacted>"), std::string::npos);
}

TEST(LogRedact, PasswordsInUrlsAndKeywordStrings) {
  EXPECT_EQ(Redact("postgresql://bob:hunter2@db:5432/x"), "postgresql://bob:<redacted>@db:5432/x");
  EXPECT_EQ(Redact("host=db password=hunter2 user=bob"), "host=db password=<redacted> user=bob");
  EXPECT_EQ(Redact("http://host:8080/path"), "http://host:8080/path");
  EXPECT_EQ(Redact("postgresql://bob@db/x"), "postgresql://bob@db/x");
}

// A full queue overwrites the oldest lines: the writers never wait, and the
// overwritten lines are counted.
TEST_F(LogTest, FullQueueDropsOldestInsteadOfBlocking) {
  ASSERT_TRUE(Init({.format = Format::kText, .file = file_, .queue_lines = 16}).ok());
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([t] {
      for (int i = 0; i < 20000; ++i) Info("bench", "line", {{"t", std::to_string(t)}});
    });
  }
  for (auto& w : writers) w.join();
  const uint64_t dropped_lines = dropped();
  const auto lines = Lines();
  EXPECT_EQ(lines.size() + dropped_lines, 80000u);
  EXPECT_GT(lines.size(), 0u);
}

TEST_F(LogTest, BadOptionsAreRefused) {
  EXPECT_FALSE(ParseLevel("verbose").ok());
  EXPECT_FALSE(ParseFormat("xml").ok());
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarn);
  std::ofstream(dir_ / "plain").put('x');  // a file where a directory would have to be
  const Status s = Init({.file = (dir_ / "plain" / "x.log").string()});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("plain/x.log"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace mb::log
