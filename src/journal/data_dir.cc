#include "journal/data_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/file.h"
#include "journal/format.h"

namespace mb::journal {

namespace {

// The pid a LOCK file holds (its writer's, in decimal); 0 when it holds none.
pid_t LockFilePid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  const long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
  return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

namespace fs = std::filesystem;

Result<DataDir> DataDir::Open(const fs::path& root, OpenMode mode, FileSystem* file_system) {
  DataDir d;
  d.root_ = root;
  d.mode_ = mode;
  if (file_system != nullptr) d.fsys_ = file_system;
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
  d.lock_fd_ = d.fsys_->Open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (d.lock_fd_ < 0) {
    return IoError(
        fmt::format("data directory {} is not writable: {}", root.string(), std::strerror(errno)));
  }
  if (::flock(d.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const pid_t pid = LockFilePid(d.lock_fd_);
      return Unavailable(fmt::format(
          "data directory {} is in use by another process (pid {}); only one process may "
          "open it",
          root.string(), pid > 0 ? std::to_string(pid) : std::string("?")));
    }
    return ErrnoStatus(lock_path, "lock", err);
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (d.fsys_->Truncate(d.lock_fd_, 0) != 0 ||
      d.fsys_->PWrite(d.lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
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
    : root_(std::move(other.root_)),
      mode_(other.mode_),
      fsys_(other.fsys_),
      lock_fd_(other.lock_fd_) {
  other.lock_fd_ = -1;
}

DataDir& DataDir::operator=(DataDir&& other) noexcept {
  if (this != &other) {
    if (lock_fd_ >= 0) fsys_->Close(lock_fd_);
    root_ = std::move(other.root_);
    mode_ = other.mode_;
    fsys_ = other.fsys_;
    lock_fd_ = other.lock_fd_;
    other.lock_fd_ = -1;
  }
  return *this;
}

DataDir::~DataDir() {
  if (lock_fd_ >= 0) fsys_->Close(lock_fd_);  // releases the flock
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

Result<pid_t> DataDir::LockHolder(const fs::path& root) {
  const fs::path lock_path = root / "LOCK";
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return pid_t{0};
    return ErrnoStatus(lock_path, "open", errno);
  }
  Result<pid_t> holder = pid_t{0};
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      holder = ErrnoStatus(lock_path, "flock", errno);
    } else if (const pid_t pid = LockFilePid(fd); pid > 0) {
      holder = pid;
    } else {
      holder = Unavailable(
          fmt::format("{} is locked by a process that did not write its pid", lock_path.string()));
    }
  }
  ::close(fd);  // drops a shared lock taken above
  return holder;
}

Result<std::vector<FileEntry>> DataDir::ListSegments() const {
  return ListNumbered(journal_dir(), false);
}
Result<std::vector<FileEntry>> DataDir::ListSnapshots() const {
  return ListNumbered(snapshot_dir(), true);
}

}  // namespace mb::journal
