#include "log/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/file.h"

namespace mb::log {

namespace fs = std::filesystem;

Result<std::unique_ptr<AuditLog>> AuditLog::Open(fs::path path, AuditOptions options) {
  std::unique_ptr<AuditLog> log(new AuditLog(std::move(path), options));
  MutexLock lock(log->mu_);
  MB_RETURN_IF_ERROR(log->OpenFile());
  return Result<std::unique_ptr<AuditLog>>(std::move(log));
}

AuditLog::~AuditLog() {
  MutexLock lock(mu_);
  if (fd_ >= 0) ::close(fd_);
}

Status AuditLog::OpenFile() {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) return ErrnoStatus(path_, "open", errno);
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  size_ = end > 0 ? static_cast<uint64_t>(end) : 0;
  return Status::Ok();
}

Status AuditLog::Rotate() {
  ::close(fd_);
  fd_ = -1;
  auto numbered = [this](uint32_t k) {
    fs::path p = path_;
    p += "." + std::to_string(k);
    return p;
  };
  std::error_code ec;
  fs::remove(numbered(options_.keep), ec);
  for (uint32_t k = options_.keep; k > 1; --k) {
    if (fs::exists(numbered(k - 1), ec)) fs::rename(numbered(k - 1), numbered(k), ec);
    if (ec) return ErrnoStatus(numbered(k - 1), "rename", ec.value());
  }
  if (options_.keep > 0) {
    fs::rename(path_, numbered(1), ec);
  } else {
    fs::remove(path_, ec);
  }
  if (ec) return ErrnoStatus(path_, "rotate", ec.value());
  MB_RETURN_IF_ERROR(OpenFile());
  return SyncDir(path_.parent_path().empty() ? fs::path(".") : path_.parent_path());
}

Status AuditLog::Append(std::string_view line) {
  std::string text(line);
  text += '\n';
  MutexLock lock(mu_);
  if (fd_ < 0) MB_RETURN_IF_ERROR(OpenFile());
  if (size_ > 0 && size_ + text.size() > options_.max_bytes) MB_RETURN_IF_ERROR(Rotate());
  MB_RETURN_IF_ERROR(WriteAll(fd_, std::as_bytes(std::span(text.data(), text.size())), path_));
  if (::fdatasync(fd_) != 0) return ErrnoStatus(path_, "fdatasync", errno);
  size_ += text.size();
  return Status::Ok();
}

}  // namespace mb::log
