// Tests of the data directory: its lock (one writer at a time), bad paths,
// and directories the process cannot write.
#include <gtest/gtest.h>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

// Each test in a fresh directory (tmp_).
class JournalDataDir : public JournalTest {};

TEST_F(JournalDataDir, OneWriterAtATime) {
  const fs::path root = tmp_ / "data";
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

TEST_F(JournalDataDir, BadPaths) {
  const fs::path file = tmp_ / "file";
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
  auto missing = DataDir::Open(tmp_ / "missing", OpenMode::kReadOnly);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(missing.status().message(), "does not exist");
  EXPECT_FALSE(fs::exists(tmp_ / "missing"));
  fs::create_directories(tmp_ / "empty");
  auto ro = DataDir::Open(tmp_ / "empty", OpenMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_TRUE(fs::is_empty(tmp_ / "empty"));
  auto scan = ScanJournal(*ro, {}, nullptr);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  EXPECT_EQ(scan->last_seq, 0u);
  EXPECT_EQ(scan->segments, 0u);
  ScanOptions repair;
  repair.repair = true;
  EXPECT_EQ(ScanJournal(*ro, repair, nullptr).status().code(), StatusCode::kInternal);
  EXPECT_FALSE(JournalWriter::Open(*ro, Options(), 1, *scan).ok());
}

TEST_F(JournalDataDir, UnwritableDirectory) {
  // Root ignores permission bits: run as root, the checks run in a child that
  // has become an unprivileged user (nobody), on directories it owns.
  const bool root_user = ::geteuid() == 0;
  const uid_t uid = root_user ? 65534 : ::geteuid();
  const gid_t gid = root_user ? 65534 : ::getegid();

  const fs::path fresh = tmp_ / "fresh";    // empty, 0500
  const fs::path layout = tmp_ / "layout";  // journal/ and snapshots/, no LOCK; 0500
  const fs::path jro = tmp_ / "jro";        // complete, journal/ 0500
  fs::create_directories(fresh);
  fs::create_directories(layout / "journal");
  fs::create_directories(layout / "snapshots");
  { ASSERT_TRUE(DataDir::Open(jro, OpenMode::kReadWrite).ok()); }
  if (root_user) {
    for (const fs::path& p : fs::recursive_directory_iterator(tmp_.path())) {
      ASSERT_EQ(::chown(p.c_str(), uid, gid), 0) << p;
    }
    ASSERT_EQ(::chown(tmp_.path().c_str(), uid, gid), 0);
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

}  // namespace
}  // namespace mb::journal
