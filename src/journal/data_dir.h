// The data directory: its layout and its lock.
//
//   <dir>/LOCK          flock()ed while a process has the directory open for
//                       writing; holds that process's pid (for the message)
//   <dir>/journal/      segments, <first sequence>.mbj
//   <dir>/snapshots/    snapshots, <sequence>.mbs (and <sequence>.mbs.tmp while
//                       one is being written)
//
// A second process opening the same directory for writing is refused
// (kUnavailable, naming the holder's pid). Read-only opens (verify, dump) take
// no lock and create nothing.
//
// The file helpers the journal uses (WriteFileAtomically, MappedFile, ...)
// are in common/file.h. Everything that writes into the directory (the lock
// file, the journal writer, snapshots, the repair of a torn tail) makes its
// calls through the directory's FileSystem: the real system calls, or in
// tests one that fails chosen calls.
//
// Thread safety: a DataDir is immutable after Open.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "common/status.h"

namespace mb::journal {

enum class OpenMode : uint8_t {
  kReadOnly,   // nothing is created, locked or repaired
  kReadWrite,  // creates the layout, takes the lock
};

struct FileEntry {
  uint64_t seq = 0;  // from the file name
  std::filesystem::path path;
};

class DataDir {
 public:
  // `file_system` (null: RealFileSystem()) must outlive the DataDir and
  // everything opened through it.
  static Result<DataDir> Open(const std::filesystem::path& root, OpenMode mode,
                              FileSystem* file_system = nullptr);
  DataDir(DataDir&& other) noexcept;
  DataDir& operator=(DataDir&& other) noexcept;
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;
  ~DataDir();

  const std::filesystem::path& root() const noexcept { return root_; }
  std::filesystem::path journal_dir() const { return root_ / "journal"; }
  std::filesystem::path snapshot_dir() const { return root_ / "snapshots"; }
  OpenMode mode() const noexcept { return mode_; }
  FileSystem& file_system() const noexcept { return *fsys_; }

  // Segments sorted by first sequence. A file in journal/ that is not a
  // segment (by name) is an error: the directory holds only what we wrote.
  Result<std::vector<FileEntry>> ListSegments() const;
  // Snapshots sorted by sequence, oldest first; *.tmp leftovers are skipped.
  Result<std::vector<FileEntry>> ListSnapshots() const;

  // The pid of the process that has `root` open for writing (its LOCK held),
  // or 0 when none has. Takes no lock and creates nothing.
  static Result<pid_t> LockHolder(const std::filesystem::path& root);

 private:
  DataDir() = default;
  std::filesystem::path root_;
  OpenMode mode_ = OpenMode::kReadOnly;
  FileSystem* fsys_ = &RealFileSystem();
  int lock_fd_ = -1;
};

}  // namespace mb::journal
