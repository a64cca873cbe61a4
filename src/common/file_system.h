// The calls through which the journal, the snapshots, the data directory and
// the helpers of common/file.h change files: open, write / pwrite, fdatasync,
// fsync (of a file and of a directory), ftruncate, rename, unlink, close. Each
// has the meaning and the error convention of its system call (-1 with errno set).
//
// RealFileSystem() makes the system calls; it is what every caller uses
// unless it is handed another one. Tests hand in a FileSystem that fails
// chosen calls (common/fault_file_system.h) to reach the error paths a real
// kernel produces only on a failing disk: a lost writeback reported by
// fdatasync, ENOSPC in the middle of a group commit, a rename or a directory
// fsync that fails. One virtual call per system call is all it costs.
//
// Reading (mmap) does not go through it: a read error is reported as the
// damage it causes, and the recovery tests make that damage directly. Nor do
// the journal's sync_file_range, a writeback hint whose failure changes
// nothing.
//
// Thread safety: RealFileSystem is stateless and may be used by any thread.
// An implementation used by several threads (the journal thread, the snapshot
// thread) must be safe for that.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace mb {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  virtual int Open(const char* path, int flags, mode_t mode);
  virtual int Close(int fd);
  virtual ssize_t Write(int fd, const void* data, std::size_t n);
  virtual ssize_t PWrite(int fd, const void* data, std::size_t n, off_t offset);
  // fdatasync of a file's data (the journal's group commit).
  virtual int DataSync(int fd);
  // fsync of a regular file (snapshots, atomically written files).
  virtual int Sync(int fd);
  // fsync of a directory opened with O_DIRECTORY: makes a create, rename or
  // unlink in it durable.
  virtual int SyncDirectory(int fd);
  virtual int Truncate(int fd, off_t size);
  virtual int Rename(const char* from, const char* to);
  virtual int Unlink(const char* path);
};

// The system calls themselves.
FileSystem& RealFileSystem() noexcept;

}  // namespace mb
