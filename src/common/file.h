// Small file helpers over POSIX calls, shared by the journal (segments,
// snapshots), the gateway's key store and the flight recorder. Errors are
// kIoError statuses naming the path, what failed and the errno text. The
// helpers that change files make their calls through a FileSystem
// (common/file_system.h): the real system calls unless a test passes one that
// fails some of them.
//
// Thread safety: plain functions; a MappedFile is owned by one thread (its
// bytes may be read by any once Open() returned).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "common/file_system.h"
#include "common/status.h"

namespace mb {

// "<path>: <what>: <strerror(err)>", as kIoError.
Status ErrnoStatus(const std::filesystem::path& path, std::string_view what, int err);

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
// Reads a key file that only its owner may read (checked on the open file).
// Errors name `option` and the path: kNotFound when it does not exist,
// kInvalidArgument when its mode lets others read it.
Result<std::string> ReadOwnerOnlyFile(const std::filesystem::path& path, std::string_view option);
// write() until done; EINTR retried. `path` names the file in errors.
Status WriteAll(int fd, std::span<const std::byte> bytes, const std::filesystem::path& path,
                FileSystem& fsys = RealFileSystem());
// fsync of a directory, so that a create / rename / unlink in it is durable.
Status SyncDir(const std::filesystem::path& dir, FileSystem& fsys = RealFileSystem());

// Whether WriteFileAtomically makes the new file durable before it returns.
enum class FileSync : uint8_t {
  kDurable,  // fsync the file before the rename and the directory after it
  kNone,     // rename only: readers never see a part, a power cut may lose the file
};

// Writes `bytes` to path.tmp (created with `mode`, which a leftover temporary
// file is also set to, so a secret is never readable by others, even briefly),
// renames it over `path` (with kDurable: fsyncs it first and the directory
// after): readers see the old file or the whole new one, never a part. On an
// error before the rename the temporary file is removed and `path` is as it
// was. A failed directory fsync after the rename is reported too: `path` then
// holds the whole new file, but a power cut may still bring the old one back.
Status WriteFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                           unsigned mode = 0644, FileSync sync = FileSync::kDurable,
                           FileSystem& fsys = RealFileSystem());
Status WriteFileAtomically(const std::filesystem::path& path, std::string_view text,
                           unsigned mode = 0644, FileSync sync = FileSync::kDurable,
                           FileSystem& fsys = RealFileSystem());

}  // namespace mb
