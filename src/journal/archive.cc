#include "journal/archive.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/file.h"
#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kArchiveSuffix = ".zst";

}  // namespace

Result<Retention> ParseRetention(std::string_view s) {
  if (s == "keep") return Retention::kKeep;
  if (s == "delete") return Retention::kDelete;
  if (s == "archive") return Retention::kArchive;
  return InvalidArgument(fmt::format("retention \"{}\": expected keep, delete or archive", s));
}

std::string_view ToString(Retention r) noexcept {
  switch (r) {
    case Retention::kKeep:
      return "keep";
    case Retention::kDelete:
      return "delete";
    case Retention::kArchive:
      return "archive";
  }
  return "?";
}

Result<std::vector<ArchivedSegment>> ListArchive(const fs::path& archive_dir) {
  std::vector<ArchivedSegment> out;
  std::error_code ec;
  if (!fs::exists(archive_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(archive_dir, ec)) {
    const std::string name = e.path().filename().string();
    // An archiving or a rewrite that did not finish.
    if (name.ends_with(".tmp") || name.ends_with(".new")) continue;
    uint64_t seq = 0;
    if (!name.ends_with(kArchiveSuffix) ||
        !ParseSegmentFileName(std::string_view(name).substr(0, name.size() - kArchiveSuffix.size()),
                              &seq)) {
      return Corruption(fmt::format("{}: not an archived journal segment", e.path().string()));
    }
    out.push_back(ArchivedSegment{seq, e.path(), static_cast<uint64_t>(e.file_size(ec))});
  }
  if (ec) return ErrnoStatus(archive_dir, "list", ec.value());
  std::sort(out.begin(), out.end(), [](const ArchivedSegment& a, const ArchivedSegment& b) {
    return a.first_seq < b.first_seq;
  });
  return out;
}

Result<std::vector<std::byte>> ReadArchivedSegment(const fs::path& path) {
  MappedFile map;
  MB_RETURN_IF_ERROR(map.Open(path));
  const std::span<const std::byte> in = map.bytes();
  const unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Corruption(fmt::format("{}: not a zstd frame with its size", path.string()));
  }
  if (ZSTD_findFrameCompressedSize(in.data(), in.size()) != in.size()) {
    return Corruption(fmt::format("{}: not exactly one whole zstd frame", path.string()));
  }
  std::vector<std::byte> out(static_cast<std::size_t>(size));
  const std::size_t got = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(got) || got != out.size()) {
    return Corruption(fmt::format("{}: {}", path.string(),
                                  ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame"));
  }
  return out;
}

Result<uint64_t> WriteArchivedSegment(const fs::path& path, std::span<const std::byte> raw,
                                      int zstd_level) {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  std::vector<std::byte> packed(ZSTD_compressBound(raw.size()));
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, zstd_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  const std::size_t n =
      ZSTD_compress2(cctx.get(), packed.data(), packed.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    return IoError(fmt::format("{}: zstd: {}", path.string(), ZSTD_getErrorName(n)));
  }
  packed.resize(n);
  // Written beside, read back, and only then put in place: `path` may hold
  // the only copy of these records (a rewrite of an archived segment).
  fs::path fresh = path;
  fresh += ".new";
  MB_RETURN_IF_ERROR(WriteFileAtomically(fresh, packed, 0600));  // secrets, as the segment
  auto back = ReadArchivedSegment(fresh);
  std::error_code ec;
  if (!back.ok() || back->size() != raw.size() ||
      std::memcmp(back->data(), raw.data(), raw.size()) != 0) {
    fs::remove(fresh, ec);
    return Corruption(fmt::format("{}: the archived copy does not read back equal{}", path.string(),
                                  back.ok() ? "" : ": " + back.status().message()));
  }
  fs::rename(fresh, path, ec);
  if (ec) {
    fs::remove(fresh, ec);
    return ErrnoStatus(path, "rename", ec.value());
  }
  MB_RETURN_IF_ERROR(SyncDir(path.parent_path()));
  return uint64_t{n};
}

Result<RetentionReport> Retain(const DataDir& dir, uint64_t floor, Retention policy,
                               const fs::path& archive_dir, int zstd_level) {
  RetentionReport report;
  report.floor = floor;
  auto segments = dir.ListSegments();
  if (!segments.ok()) return segments.status();
  std::size_t removable = 0;  // segments [0, removable) end below the floor
  while (policy != Retention::kKeep && removable + 1 < segments->size() &&
         (*segments)[removable + 1].seq <= floor) {
    ++removable;
  }
  if (removable > 0 && policy == Retention::kArchive) {
    std::error_code ec;
    fs::create_directories(archive_dir, ec);
    if (ec) return ErrnoStatus(archive_dir, "create", ec.value());
  }
  for (std::size_t i = 0; i < removable; ++i) {
    const FileEntry& s = (*segments)[i];
    std::error_code ec;
    const uint64_t size = fs::file_size(s.path, ec);
    if (ec) return ErrnoStatus(s.path, "stat", ec.value());
    if (policy == Retention::kArchive) {
      MappedFile map;
      MB_RETURN_IF_ERROR(map.Open(s.path));
      const fs::path final_path =
          archive_dir / (s.path.filename().string() + std::string(kArchiveSuffix));
      auto n = WriteArchivedSegment(final_path, map.bytes(), zstd_level);
      if (!n.ok()) return n.status();
      report.bytes_written += *n;
    }
    if (dir.file_system().Unlink(s.path.c_str()) != 0) {
      return ErrnoStatus(s.path, "remove", errno);
    }
    MB_RETURN_IF_ERROR(SyncDir(dir.journal_dir(), dir.file_system()));
    ++report.segments;
    report.bytes_freed += size;
  }
  report.first_live_seq = segments->empty() ? 0 : (*segments)[removable].seq;
  return report;
}

}  // namespace mb::journal
