#include "journal/snapshot.h"

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <vector>

#include "codec/codec.h"
#include "common/file.h"
#include "journal/format.h"

namespace mb::journal {

namespace fs = std::filesystem;

namespace {
constexpr uint8_t kZstd = 1;
}

Result<fs::path> WriteSnapshot(const DataDir& dir, const engine::EngineImage& image,
                               SnapshotMeta* meta, int zstd_level, uint32_t keep) {
  const std::vector<std::byte> raw = codec::EncodeImage(image);
  const std::size_t bound = ZSTD_compressBound(raw.size());
  std::vector<std::byte> file(kSnapshotHeaderSize + bound);
  const std::size_t csize =
      ZSTD_compress(file.data() + kSnapshotHeaderSize, bound, raw.data(), raw.size(), zstd_level);
  if (ZSTD_isError(csize)) {
    return Status(StatusCode::kInternal,
                  fmt::format("zstd compression failed: {}", ZSTD_getErrorName(csize)));
  }
  file.resize(kSnapshotHeaderSize + csize);
  meta->seq = Raw(image.last_sequence);
  meta->state_hash = engine::HashImage(image);
  meta->config_hash = image.config_hash;
  meta->raw_size = raw.size();
  meta->compressed_size = csize;

  std::byte* p = file.data();
  std::memcpy(p, kSnapshotMagic.data(), 8);
  PutU16(p + 8, kSnapshotFormatVersion);
  p[10] = std::byte{kZstd};
  p[11] = std::byte{0};
  PutU32(p + 12, 0);
  PutU64(p + 16, meta->seq);
  PutU64(p + 24, meta->state_hash);
  PutU64(p + 32, meta->config_hash);
  PutU64(p + 40, meta->record_checksum);
  PutU64(p + 48, meta->raw_size);
  PutU64(p + 56, meta->compressed_size);
  PutU64(p + 64, XXH3_64bits(p + kSnapshotHeaderSize, csize));
  PutU64(p + 72, XXH3_64bits(p, 72));

  const fs::path path = dir.snapshot_dir() / SnapshotFileName(meta->seq);
  // 0600: the image holds API keys' secrets.
  MB_RETURN_IF_ERROR(WriteFileAtomically(path, file, 0600, FileSync::kDurable, dir.file_system()));

  auto listed = dir.ListSnapshots();
  if (listed.ok() && listed->size() > keep) {
    const std::size_t drop = listed->size() - keep;
    for (std::size_t i = 0; i < drop; ++i) dir.file_system().Unlink((*listed)[i].path.c_str());
    MB_RETURN_IF_ERROR(SyncDir(dir.snapshot_dir(), dir.file_system()));
  }
  return path;
}

Result<LoadedSnapshot> ReadSnapshot(const fs::path& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  const std::string name = path.string();
  const std::vector<std::byte>& b = *bytes;
  if (b.size() < kSnapshotHeaderSize) {
    return Corruption(fmt::format("{}: {} bytes, shorter than a snapshot header", name, b.size()));
  }
  const std::byte* p = b.data();
  if (std::memcmp(p, kSnapshotMagic.data(), 8) != 0) {
    return Corruption(fmt::format("{}: not a Matchbook snapshot (bad magic)", name));
  }
  if (GetU64(p + 72) != XXH3_64bits(p, 72)) {
    return Corruption(fmt::format("{}: snapshot header checksum mismatch", name));
  }
  if (GetU16(p + 8) != kSnapshotFormatVersion || p[10] != std::byte{kZstd}) {
    return Corruption(
        fmt::format("{}: snapshot format version {} compression {} (this build "
                    "reads version {} with zstd)",
                    name, GetU16(p + 8), static_cast<int>(p[10]), kSnapshotFormatVersion));
  }
  LoadedSnapshot out;
  SnapshotMeta& m = out.meta;
  m.seq = GetU64(p + 16);
  m.state_hash = GetU64(p + 24);
  m.config_hash = GetU64(p + 32);
  m.record_checksum = GetU64(p + 40);
  m.raw_size = GetU64(p + 48);
  m.compressed_size = GetU64(p + 56);
  if (m.compressed_size != b.size() - kSnapshotHeaderSize) {
    return Corruption(fmt::format("{}: {} compressed bytes expected, {} present (truncated?)", name,
                                  m.compressed_size, b.size() - kSnapshotHeaderSize));
  }
  const std::span<const std::byte> payload(p + kSnapshotHeaderSize, m.compressed_size);
  if (GetU64(p + 64) != XXH3_64bits(payload.data(), payload.size())) {
    return Corruption(fmt::format("{}: snapshot payload checksum mismatch", name));
  }
  const unsigned long long content = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (content != m.raw_size || m.raw_size > (uint64_t{1} << 36)) {
    return Corruption(fmt::format("{}: compressed frame size does not match the header", name));
  }
  std::vector<std::byte> raw(m.raw_size);
  const std::size_t n = ZSTD_decompress(raw.data(), raw.size(), payload.data(), payload.size());
  if (ZSTD_isError(n) || n != raw.size()) {
    return Corruption(fmt::format("{}: decompression failed", name));
  }
  auto image = codec::DecodeImage(raw);
  if (!image.ok()) {
    return Corruption(fmt::format("{}: {}", name, image.status().message()));
  }
  if (Raw(image->last_sequence) != m.seq || image->config_hash != m.config_hash) {
    return Corruption(
        fmt::format("{}: the image's sequence or configuration differs from the "
                    "header's",
                    name));
  }
  if (engine::HashImage(*image) != m.state_hash) {
    return Corruption(fmt::format("{}: the image's state hash differs from the header's", name));
  }
  out.image = std::move(image).value();
  return out;
}

}  // namespace mb::journal
