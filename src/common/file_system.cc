#include "common/file_system.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

namespace mb {

int FileSystem::Open(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }
int FileSystem::Close(int fd) { return ::close(fd); }
ssize_t FileSystem::Write(int fd, const void* data, std::size_t n) { return ::write(fd, data, n); }
ssize_t FileSystem::PWrite(int fd, const void* data, std::size_t n, off_t offset) {
  return ::pwrite(fd, data, n, offset);
}
int FileSystem::DataSync(int fd) { return ::fdatasync(fd); }
int FileSystem::Sync(int fd) { return ::fsync(fd); }
int FileSystem::SyncDirectory(int fd) { return ::fsync(fd); }
int FileSystem::Truncate(int fd, off_t size) { return ::ftruncate(fd, size); }
int FileSystem::Rename(const char* from, const char* to) { return ::rename(from, to); }
int FileSystem::Unlink(const char* path) { return ::unlink(path); }

FileSystem& RealFileSystem() noexcept {
  static FileSystem real;
  return real;
}

}  // namespace mb
