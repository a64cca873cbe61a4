// The operator audit log: one JSON line per operator call (who, what, when,
// the result), appended to a file and synced before Append() returns, so a
// call that was answered is on disk. When the file would pass max_bytes it
// is rotated: audit.log -> audit.log.1 -> ... -> audit.log.<keep> (the
// oldest dropped).
//
// Thread safety: Append() from any thread (a mutex; operator calls are rare).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace mb::log {

struct AuditOptions {
  uint64_t max_bytes = uint64_t{16} << 20;  // per file, before it is rotated
  uint32_t keep = 5;                        // rotated files kept
};

class AuditLog {
 public:
  // Opens (creating, 0600) `path` for appending. Error: it cannot be opened.
  static Result<std::unique_ptr<AuditLog>> Open(std::filesystem::path path,
                                                AuditOptions options = {});
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;
  ~AuditLog();

  // Appends `line` and a newline, synced. Error: the write, sync or a
  // rotation failed (the line may be lost; the caller reports it).
  Status Append(std::string_view line);

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  AuditLog(std::filesystem::path path, AuditOptions options)
      : path_(std::move(path)), options_(options) {}
  Status OpenFile() MB_REQUIRES(mu_);
  Status Rotate() MB_REQUIRES(mu_);

  const std::filesystem::path path_;
  const AuditOptions options_;
  Mutex mu_;
  int fd_ MB_GUARDED_BY(mu_) = -1;
  uint64_t size_ MB_GUARDED_BY(mu_) = 0;
};

}  // namespace mb::log
