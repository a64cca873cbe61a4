// A FileSystem for tests that fails chosen calls with a chosen errno (EIO,
// ENOSPC, ...) and passes every other one to the real system calls: "the
// third write to a segment fails", "the next fdatasync reports a lost
// writeback", "renames into snapshots/ fail until cleared".
//
//   FaultFileSystem fs;
//   fs.Inject(Fault(FileOp::kDataSync, EIO));                  // the next one
//   fs.Inject(Fault(FileOp::kWrite, ENOSPC, ".mbj").Skip(2).Times(-1));
//                                                              // from the 3rd on
//
// A fault matches a call by operation and, optionally, by a part of the path
// the file descriptor was opened with (for a rename: either name). Test code
// only: no production path constructs one.
//
// Thread safety: every member may be called from any thread (the journal and
// the snapshot threads share one in the pipeline tests).
#pragma once

#include <fcntl.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/file_system.h"
#include "common/thread_annotations.h"

namespace mb {

enum class FileOp : uint8_t {
  kOpen,
  kWrite,  // write and pwrite
  kDataSync,
  kSync,
  kSyncDirectory,
  kTruncate,
  kRename,
  kUnlink,
};
inline constexpr std::size_t kFileOps = 8;

struct FileFault {
  FileOp op = FileOp::kWrite;
  std::string path;  // a part of the file's path; empty: any file
  int skip = 0;      // matching calls that succeed first
  int times = 1;     // matching calls that then fail; -1: all, until Clear()
  int err = EIO;
  // kWrite: the first failing call writes half of its bytes and reports that
  // short count instead of failing (a disk that fills in the middle of a
  // write); it counts as one of `times`.
  bool short_write = false;

  FileFault& Skip(int n) {
    skip = n;
    return *this;
  }
  FileFault& Times(int n) {
    times = n;
    return *this;
  }
  FileFault& ShortFirst() {
    short_write = true;
    return *this;
  }
};

// The next call of `op` on a file whose path contains `path` fails with `err`.
inline FileFault Fault(FileOp op, int err, std::string path = {}) {
  FileFault f;
  f.op = op;
  f.err = err;
  f.path = std::move(path);
  return f;
}

class FaultFileSystem : public FileSystem {
 public:
  void Inject(FileFault fault) MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    faults_.push_back(Armed{std::move(fault), 0});
  }
  // Removes every fault: the calls succeed again (as far as the disk allows).
  void Clear() MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    faults_.clear();
  }
  // Calls of `op` made so far, and how many of them failed (short writes
  // included).
  int calls(FileOp op) const MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return calls_[static_cast<std::size_t>(op)];
  }
  int failed(FileOp op) const MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return failed_[static_cast<std::size_t>(op)];
  }

  int Open(const char* path, int flags, mode_t mode) override {
    if (const Verdict v = Check(FileOp::kOpen, path); v.fail) return Fail(v.err);
    const int fd = FileSystem::Open(path, flags, mode);
    if (fd >= 0) {
      MutexLock lock(mu_);
      paths_[fd] = path;
    }
    return fd;
  }
  int Close(int fd) override {
    {
      MutexLock lock(mu_);
      paths_.erase(fd);
    }
    return FileSystem::Close(fd);
  }
  ssize_t Write(int fd, const void* data, std::size_t n) override {
    const Verdict v = Check(FileOp::kWrite, PathOf(fd));
    if (v.short_write && n > 1) return FileSystem::Write(fd, data, n / 2);
    if (v.fail) return Fail(v.err);
    return FileSystem::Write(fd, data, n);
  }
  ssize_t PWrite(int fd, const void* data, std::size_t n, off_t offset) override {
    const Verdict v = Check(FileOp::kWrite, PathOf(fd));
    if (v.short_write && n > 1) return FileSystem::PWrite(fd, data, n / 2, offset);
    if (v.fail) return Fail(v.err);
    return FileSystem::PWrite(fd, data, n, offset);
  }
  int DataSync(int fd) override {
    if (const Verdict v = Check(FileOp::kDataSync, PathOf(fd)); v.fail) return Fail(v.err);
    return FileSystem::DataSync(fd);
  }
  int Sync(int fd) override {
    if (const Verdict v = Check(FileOp::kSync, PathOf(fd)); v.fail) return Fail(v.err);
    return FileSystem::Sync(fd);
  }
  int SyncDirectory(int fd) override {
    if (const Verdict v = Check(FileOp::kSyncDirectory, PathOf(fd)); v.fail) return Fail(v.err);
    return FileSystem::SyncDirectory(fd);
  }
  int Truncate(int fd, off_t size) override {
    if (const Verdict v = Check(FileOp::kTruncate, PathOf(fd)); v.fail) return Fail(v.err);
    return FileSystem::Truncate(fd, size);
  }
  int Rename(const char* from, const char* to) override {
    const std::string both = std::string(from) + "\n" + to;
    if (const Verdict v = Check(FileOp::kRename, both); v.fail) return Fail(v.err);
    return FileSystem::Rename(from, to);
  }
  int Unlink(const char* path) override {
    if (const Verdict v = Check(FileOp::kUnlink, path); v.fail) return Fail(v.err);
    return FileSystem::Unlink(path);
  }

 private:
  struct Armed {
    FileFault fault;
    int seen = 0;  // matching calls so far
  };
  struct Verdict {
    bool fail = false;
    bool short_write = false;
    int err = 0;
  };

  static int Fail(int err) {
    errno = err;
    return -1;
  }

  std::string PathOf(int fd) const MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    auto it = paths_.find(fd);
    return it == paths_.end() ? std::string() : it->second;
  }

  Verdict Check(FileOp op, const std::string& path) MB_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++calls_[static_cast<std::size_t>(op)];
    for (Armed& a : faults_) {
      const FileFault& f = a.fault;
      if (f.op != op) continue;
      if (!f.path.empty() && path.find(f.path) == std::string::npos) continue;
      const int n = a.seen++;
      if (n < f.skip) continue;
      if (f.times >= 0 && n >= f.skip + f.times) continue;
      ++failed_[static_cast<std::size_t>(op)];
      Verdict v;
      v.fail = true;
      v.err = f.err;
      v.short_write = f.short_write && op == FileOp::kWrite && n == f.skip;
      return v;
    }
    return {};
  }

  mutable Mutex mu_;
  std::vector<Armed> faults_ MB_GUARDED_BY(mu_);
  std::map<int, std::string> paths_ MB_GUARDED_BY(mu_);
  std::array<int, kFileOps> calls_ MB_GUARDED_BY(mu_) = {};
  std::array<int, kFileOps> failed_ MB_GUARDED_BY(mu_) = {};
};

}  // namespace mb
