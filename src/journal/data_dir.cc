#include "journal/data_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

Status ErrnoStatus(const fs::path& path, std::string_view what, int err) {
  return IoError(fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

Result<DataDir> DataDir::Open(const fs::path& root, OpenMode mode) {
  DataDir d;
  d.root_ = root;
  d.mode_ = mode;
  std::error_code ec;
  if (mode == OpenMode::kReadOnly) {
    if (!fs::is_directory(root, ec)) {
      return NotFound(fmt::format("data directory {} does not exist", root.string()));
    }
    return d;
  }
  for (const fs::path& p : {root, d.journal_dir(), d.snapshot_dir()}) {
    fs::create_directories(p, ec);
    if (ec || !fs::is_directory(p)) {
      return IoError(fmt::format("cannot create data directory {}: {}", p.string(),
                                 ec ? ec.message() : "exists and is not a directory"));
    }
  }
  const fs::path lock_path = root / "LOCK";
  d.lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (d.lock_fd_ < 0) {
    return IoError(
        fmt::format("data directory {} is not writable: {}", root.string(), std::strerror(errno)));
  }
  if (::flock(d.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(d.lock_fd_, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK) {
      return Unavailable(fmt::format(
          "data directory {} is in use by another process (pid {}); only one process may "
          "open it",
          root.string(), holder));
    }
    return ErrnoStatus(lock_path, "lock", err);
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(d.lock_fd_, 0) != 0 ||
      ::pwrite(d.lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return ErrnoStatus(lock_path, "write", errno);
  }
  // A probe that the directories accept new files (root may own an
  // unwritable tree; EACCES / EROFS / ENOSPC are found here, not mid-run).
  for (const fs::path& dir : {d.journal_dir(), d.snapshot_dir()}) {
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      return IoError(
          fmt::format("data directory {} is not writable: {}", dir.string(), std::strerror(errno)));
    }
  }
  return d;
}

DataDir::DataDir(DataDir&& other) noexcept
    : root_(std::move(other.root_)), mode_(other.mode_), lock_fd_(other.lock_fd_) {
  other.lock_fd_ = -1;
}

DataDir& DataDir::operator=(DataDir&& other) noexcept {
  if (this != &other) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    root_ = std::move(other.root_);
    mode_ = other.mode_;
    lock_fd_ = other.lock_fd_;
    other.lock_fd_ = -1;
  }
  return *this;
}

DataDir::~DataDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

namespace {
Result<std::vector<FileEntry>> ListNumbered(const fs::path& dir, bool snapshots) {
  std::vector<FileEntry> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    FileEntry f;
    f.path = entry.path();
    const bool ok =
        snapshots ? ParseSnapshotFileName(name, &f.seq) : ParseSegmentFileName(name, &f.seq);
    if (ok && entry.is_regular_file()) {
      out.push_back(std::move(f));
      continue;
    }
    if (snapshots && name.ends_with(".mbs.tmp")) continue;  // an interrupted write
    return Corruption(fmt::format(
        "unexpected file {} in {} (only {} files belong there); move it away", name, dir.string(),
        snapshots ? "<sequence>.mbs snapshot" : "<sequence>.mbj segment"));
  }
  if (ec) return IoError(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  std::sort(out.begin(), out.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.seq < b.seq; });
  return out;
}
}  // namespace

Result<std::vector<FileEntry>> DataDir::ListSegments() const {
  return ListNumbered(journal_dir(), false);
}
Result<std::vector<FileEntry>> DataDir::ListSnapshots() const {
  return ListNumbered(snapshot_dir(), true);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Status MappedFile::Open(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "stat", err);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      size_ = 0;
      return ErrnoStatus(path, "mmap", err);
    }
    data_ = p;
    ::madvise(p, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);
  return Status::Ok();
}

Result<std::vector<std::byte>> ReadFile(const fs::path& path) {
  MappedFile file;
  MB_RETURN_IF_ERROR(file.Open(path));
  return std::vector<std::byte>(file.bytes().begin(), file.bytes().end());
}

Status WriteAll(int fd, std::span<const std::byte> bytes, const fs::path& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, "write", errno);
    if (n == 0) return ErrnoStatus(path, "write", EIO);
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Status SyncDir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(dir, "open directory", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(dir, "fsync directory", err);
  return Status::Ok();
}

Status WriteFileAtomically(const fs::path& path, std::span<const std::byte> bytes, unsigned mode) {
  fs::path tmp = path;
  tmp += ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                        static_cast<mode_t>(mode));
  if (fd < 0) return ErrnoStatus(tmp, "create", errno);
  Status s;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) s = ErrnoStatus(tmp, "chmod", errno);
  if (s.ok()) s = WriteAll(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus(tmp, "fsync", errno);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(tmp, "close", errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus(path, "rename", errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDir(path.parent_path());
}

}  // namespace mb::journal
