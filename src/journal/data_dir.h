// The data directory: its layout, its lock, and small file helpers.
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
// Thread safety: a DataDir is immutable after Open; the helpers are plain
// functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

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
  static Result<DataDir> Open(const std::filesystem::path& root, OpenMode mode);
  DataDir(DataDir&& other) noexcept;
  DataDir& operator=(DataDir&& other) noexcept;
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;
  ~DataDir();

  const std::filesystem::path& root() const noexcept { return root_; }
  std::filesystem::path journal_dir() const { return root_ / "journal"; }
  std::filesystem::path snapshot_dir() const { return root_ / "snapshots"; }
  OpenMode mode() const noexcept { return mode_; }

  // Segments sorted by first sequence. A file in journal/ that is not a
  // segment (by name) is an error: the directory holds only what we wrote.
  Result<std::vector<FileEntry>> ListSegments() const;
  // Snapshots sorted by sequence, oldest first; *.tmp leftovers are skipped.
  Result<std::vector<FileEntry>> ListSnapshots() const;

 private:
  DataDir() = default;
  std::filesystem::path root_;
  OpenMode mode_ = OpenMode::kReadOnly;
  int lock_fd_ = -1;
};

// ---- file helpers (errors name the path and the errno text) ----

// A read-only memory mapping of a whole file (as it is when opened).
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  Status Open(const std::filesystem::path& path);
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Reads a whole file.
Result<std::vector<std::byte>> ReadFile(const std::filesystem::path& path);
// write() until done; EINTR retried.
Status WriteAll(int fd, std::span<const std::byte> bytes, const std::filesystem::path& path);
// fsync of a directory, so that a create / rename / unlink in it is durable.
Status SyncDir(const std::filesystem::path& dir);
// Writes `bytes` to path.tmp (created with `mode`, which a leftover temporary
// file is also set to, so a secret is never readable by others, even briefly),
// fsyncs it, renames it over `path`, fsyncs the directory: readers see the old
// file or the whole new one, never a part.
Status WriteFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                           unsigned mode = 0644);
// "<path>: <what>: <strerror(err)>"
Status ErrnoStatus(const std::filesystem::path& path, std::string_view what, int err);

}  // namespace mb::journal
