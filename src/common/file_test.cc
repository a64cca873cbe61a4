#include "common/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "common/fault_file_system.h"

namespace mb {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mb-file-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static unsigned Mode(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0);
    return static_cast<unsigned>(st.st_mode) & 0777U;
  }

  fs::path dir_;
};

TEST_F(FileTest, WriteFileAtomicallyReplacesTheWholeFile) {
  const fs::path p = dir_ / "a.json";
  ASSERT_TRUE(WriteFileAtomically(p, std::string_view("first")).ok());
  EXPECT_EQ(Slurp(p), "first");
  EXPECT_EQ(Mode(p), 0644U);
  ASSERT_TRUE(WriteFileAtomically(p, std::string_view("second, longer")).ok());
  EXPECT_EQ(Slurp(p), "second, longer");
  EXPECT_FALSE(fs::exists(dir_ / "a.json.tmp"));

  // Bytes, and the rename-only form.
  const std::byte raw[] = {std::byte{0}, std::byte{0xff}, std::byte{'x'}};
  ASSERT_TRUE(WriteFileAtomically(p, raw, 0644, FileSync::kNone).ok());
  EXPECT_EQ(Slurp(p), std::string("\0\xffx", 3));
  EXPECT_FALSE(fs::exists(dir_ / "a.json.tmp"));
}

TEST_F(FileTest, SecretModeEvenOverALeftoverTemporaryFile) {
  const fs::path p = dir_ / "auth.json";
  {
    std::ofstream leftover(dir_ / "auth.json.tmp");
    leftover << "old";
  }
  fs::permissions(dir_ / "auth.json.tmp", fs::perms(0666));
  ASSERT_TRUE(WriteFileAtomically(p, std::string_view("secret"), 0600).ok());
  EXPECT_EQ(Mode(p), 0600U);
  EXPECT_EQ(Slurp(p), "secret");
}

TEST_F(FileTest, ErrorsNameThePathAndLeaveNothingBehind) {
  const fs::path p = dir_ / "missing" / "x";
  const Status s = WriteFileAtomically(p, std::string_view("x"));
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find((dir_ / "missing" / "x.tmp").string() + ": create: "),
            std::string::npos)
      << s.message();

  // A directory in the way of the rename: the temporary file is removed.
  fs::create_directories(dir_ / "busy" / "inside");
  const Status r = WriteFileAtomically(dir_ / "busy", std::string_view("x"));
  EXPECT_EQ(r.code(), StatusCode::kIoError);
  EXPECT_NE(r.message().find(": rename: "), std::string::npos) << r.message();
  EXPECT_FALSE(fs::exists(dir_ / "busy.tmp"));

  EXPECT_EQ(ErrnoStatus("/some/path", "open", ENOENT).message(),
            "/some/path: open: No such file or directory");
}

// Each step of WriteFileAtomically failing (the key store and the flight
// recorder rely on it as the snapshots do): before the rename, the old file
// is untouched and no temporary file is left; a failed directory fsync after
// it is reported, with the whole new file in place.
TEST_F(FileTest, EveryFailingStepLeavesTheOldFileOrTheWholeNewOne) {
  const fs::path p = dir_ / "keys.json";
  ASSERT_TRUE(WriteFileAtomically(p, std::string_view("old")).ok());
  struct Step {
    FileFault fault;
    const char* says;
  };
  const Step steps[] = {
      {Fault(FileOp::kOpen, ENOSPC, "keys.json.tmp"), "create"},
      {Fault(FileOp::kWrite, ENOSPC, "keys.json.tmp").Times(-1).ShortFirst(), "write"},
      {Fault(FileOp::kSync, EIO, "keys.json.tmp"), "fsync"},
      {Fault(FileOp::kRename, EIO, "keys.json"), "rename"},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.says);
    FaultFileSystem fsys;
    fsys.Inject(step.fault);
    const Status s = WriteFileAtomically(p, std::string_view("a new and longer content"), 0600,
                                         FileSync::kDurable, fsys);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_NE(s.message().find(step.says), std::string::npos) << s.message();
    EXPECT_EQ(Slurp(p), "old");
    EXPECT_FALSE(fs::exists(dir_ / "keys.json.tmp"));
  }
  FaultFileSystem fsys;
  fsys.Inject(Fault(FileOp::kSyncDirectory, EIO));
  const Status s = WriteFileAtomically(p, std::string_view("new"), 0600, FileSync::kDurable, fsys);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fsync directory"), std::string::npos) << s.message();
  EXPECT_EQ(Slurp(p), "new");
  EXPECT_EQ(fsys.failed(FileOp::kSyncDirectory), 1);
}

TEST_F(FileTest, ReadFileAndMappedFile) {
  const fs::path p = dir_ / "data.bin";
  ASSERT_TRUE(WriteFileAtomically(p, std::string_view("hello")).ok());
  auto bytes = ReadFile(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  ASSERT_EQ(bytes->size(), 5u);
  EXPECT_EQ(static_cast<char>((*bytes)[0]), 'h');

  const fs::path empty = dir_ / "empty";
  ASSERT_TRUE(WriteFileAtomically(empty, std::string_view()).ok());
  MappedFile m;
  ASSERT_TRUE(m.Open(empty).ok());
  EXPECT_TRUE(m.bytes().empty());

  auto missing = ReadFile(dir_ / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope: open: "), std::string::npos);
}

TEST_F(FileTest, WriteAllAndSyncDir) {
  const fs::path p = dir_ / "w";
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string text(100'000, 'z');
  EXPECT_TRUE(WriteAll(fd, std::as_bytes(std::span(text.data(), text.size())), p).ok());
  ::close(fd);
  EXPECT_EQ(Slurp(p), text);
  EXPECT_TRUE(SyncDir(dir_).ok());
  EXPECT_EQ(SyncDir(dir_ / "no-such-dir").code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace mb
