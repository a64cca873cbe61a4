#include "log/audit.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mb::log {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mb_audit_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AuditLogTest, AppendsLinesOnlyTheOwnerCanRead) {
  auto log = AuditLog::Open(dir_ / "audit.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE((*log)->Append(R"({"n":1})").ok());
  ASSERT_TRUE((*log)->Append(R"({"n":2})").ok());
  EXPECT_EQ(ReadText(dir_ / "audit.log"), "{\"n\":1}\n{\"n\":2}\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
}

TEST_F(AuditLogTest, ReopeningAppendsAfterWhatIsThere) {
  {
    auto log = AuditLog::Open(dir_ / "audit.log");
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Append("first").ok());
  }
  auto log = AuditLog::Open(dir_ / "audit.log");
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append("second").ok());
  EXPECT_EQ(ReadText(dir_ / "audit.log"), "first\nsecond\n");
}

TEST_F(AuditLogTest, RotatesBySizeAndKeepsTheNewestFiles) {
  // 10-byte lines ("line NNNN\n"), 25 bytes per file: two lines per file.
  auto log = AuditLog::Open(dir_ / "audit.log", AuditOptions{.max_bytes = 25, .keep = 2});
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE((*log)->Append("line " + std::to_string(1000 + i)).ok());
  }
  // Lines 1000..1008 in files of two: [1000 1001] [1002 1003] [1004 1005]
  // [1006 1007] [1008]; the newest file and two rotated ones stay.
  EXPECT_EQ(ReadText(dir_ / "audit.log"), "line 1008\n");
  EXPECT_EQ(ReadText(dir_ / "audit.log.1"), "line 1006\nline 1007\n");
  EXPECT_EQ(ReadText(dir_ / "audit.log.2"), "line 1004\nline 1005\n");
  EXPECT_FALSE(fs::exists(dir_ / "audit.log.3"));
}

TEST_F(AuditLogTest, AnUnwritableFileIsAnError) {
  auto log = AuditLog::Open(dir_ / "missing" / "audit.log");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("missing/audit.log"), std::string::npos)
      << log.status().message();
}

}  // namespace
}  // namespace mb::log
