#include "common/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace mb {

namespace fs = std::filesystem;

Status ErrnoStatus(const fs::path& path, std::string_view what, int err) {
  std::string msg = path.string();
  msg.append(": ").append(what).append(": ").append(std::strerror(err));
  return IoError(std::move(msg));
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

Result<std::string> ReadOwnerOnlyFile(const fs::path& path, std::string_view option) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return NotFound(std::string(option) + ": " + path.string() + " does not exist");
    }
    return ErrnoStatus(path, "open", errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "stat", err);
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 0777));
    return InvalidArgument(std::string(option) + ": " + path.string() +
                           " may be read by others (mode " + mode + "); chmod 600 it");
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(path, "read", err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteAll(int fd, std::span<const std::byte> bytes, const fs::path& path, FileSystem& fsys) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = fsys.Write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, "write", errno);
    if (n == 0) return ErrnoStatus(path, "write", EIO);
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Status SyncDir(const fs::path& dir, FileSystem& fsys) {
  const int fd = fsys.Open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(dir, "open directory", errno);
  const int rc = fsys.SyncDirectory(fd);
  const int err = errno;
  fsys.Close(fd);
  if (rc != 0) return ErrnoStatus(dir, "fsync directory", err);
  return Status::Ok();
}

Status WriteFileAtomically(const fs::path& path, std::span<const std::byte> bytes, unsigned mode,
                           FileSync sync, FileSystem& fsys) {
  fs::path tmp = path;
  tmp += ".tmp";
  const int fd = fsys.Open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                           static_cast<mode_t>(mode));
  if (fd < 0) return ErrnoStatus(tmp, "create", errno);
  Status s;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) s = ErrnoStatus(tmp, "chmod", errno);
  if (s.ok()) s = WriteAll(fd, bytes, tmp, fsys);
  if (s.ok() && sync == FileSync::kDurable && fsys.Sync(fd) != 0) {
    s = ErrnoStatus(tmp, "fsync", errno);
  }
  if (fsys.Close(fd) != 0 && s.ok()) s = ErrnoStatus(tmp, "close", errno);
  if (s.ok() && fsys.Rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus(path, "rename", errno);
  if (!s.ok()) {
    fsys.Unlink(tmp.c_str());
    return s;
  }
  if (sync == FileSync::kNone) return Status::Ok();
  return SyncDir(path.parent_path(), fsys);
}

Status WriteFileAtomically(const fs::path& path, std::string_view text, unsigned mode,
                           FileSync sync, FileSystem& fsys) {
  return WriteFileAtomically(path, std::as_bytes(std::span(text.data(), text.size())), mode, sync,
                             fsys);
}

}  // namespace mb
