#include "journal/format.h"

#include <fmt/format.h>

#include <charconv>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

namespace mb::journal {

void EncodeSegmentHeader(const SegmentHeader& header,
                         std::span<std::byte, kSegmentHeaderSize> out) noexcept {
  std::byte* p = out.data();
  std::memcpy(p, kSegmentMagic.data(), 8);
  PutU16(p + 8, header.version);
  PutU16(p + 10, static_cast<uint16_t>(kSegmentHeaderSize));
  PutU32(p + 12, 0);
  PutU64(p + 16, header.first_seq);
  PutU64(p + 24, header.config_hash);
  PutU64(p + 32, XXH3_64bits(p, 32));
}

Result<SegmentHeader> DecodeSegmentHeader(std::span<const std::byte> in, std::string_view what) {
  if (in.size() < kSegmentHeaderSize) {
    return Corruption(fmt::format("{}: {} bytes, shorter than a segment header ({} bytes)", what,
                                  in.size(), kSegmentHeaderSize));
  }
  const std::byte* p = in.data();
  if (std::memcmp(p, kSegmentMagic.data(), 8) != 0) {
    return Corruption(fmt::format("{}: not a Matchbook journal segment (bad magic)", what));
  }
  if (GetU64(p + 32) != XXH3_64bits(p, 32)) {
    return Corruption(fmt::format("{}: segment header checksum mismatch", what));
  }
  SegmentHeader h;
  h.version = GetU16(p + 8);
  if (h.version < kOldestSegmentFormatVersion || h.version > kSegmentFormatVersion) {
    return Corruption(
        fmt::format("{}: segment format version {} (this build reads versions {} to {})", what,
                    h.version, kOldestSegmentFormatVersion, kSegmentFormatVersion));
  }
  if (GetU16(p + 10) != kSegmentHeaderSize) {
    return Corruption(fmt::format("{}: segment header size {} (version {} headers are {} bytes)",
                                  what, GetU16(p + 10), h.version, kSegmentHeaderSize));
  }
  h.first_seq = GetU64(p + 16);
  h.config_hash = GetU64(p + 24);
  return h;
}

uint64_t RecordChecksum(std::span<const std::byte, 16> header_prefix,
                        std::span<const std::byte> payload) noexcept {
  // XXH3 gives the same hash streamed or in one shot. A record of the usual
  // size is hashed in one shot from a stack copy: the streaming state's reset,
  // buffering and digest cost several times the hash itself (~400 instructions
  // a record, against ~60), on the journal thread and in replay alike.
  constexpr std::size_t kOneShot = 1024;
  if (payload.size() <= kOneShot - header_prefix.size()) {
    std::byte buf[kOneShot];
    std::memcpy(buf, header_prefix.data(), header_prefix.size());
    if (!payload.empty()) std::memcpy(buf + header_prefix.size(), payload.data(), payload.size());
    return XXH3_64bits(buf, header_prefix.size() + payload.size());
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header_prefix.data(), header_prefix.size());
  XXH3_64bits_update(&state, payload.data(), payload.size());
  return XXH3_64bits_digest(&state);
}

void EncodeRecordHeader(RecordType type, uint64_t seq, std::span<const std::byte> payload,
                        std::span<std::byte, kRecordHeaderSize> out) noexcept {
  std::byte* p = out.data();
  PutU32(p, static_cast<uint32_t>(payload.size()));
  p[4] = static_cast<std::byte>(type);
  p[5] = p[6] = p[7] = std::byte{0};
  PutU64(p + 8, seq);
  PutU64(p + 16, RecordChecksum(out.first<16>(), payload));
}

std::string_view ToString(RecordError e) noexcept {
  switch (e) {
    case RecordError::kOk:
      return "ok";
    case RecordError::kShortHeader:
      return "truncated record header";
    case RecordError::kBadLength:
      return "implausible record length";
    case RecordError::kShortPayload:
      return "truncated record payload";
    case RecordError::kBadChecksum:
      return "record checksum mismatch";
    case RecordError::kUnknownType:
      return "unknown record type";
  }
  return "?";
}

ParsedRecord ParseRecord(std::span<const std::byte> in) noexcept {
  ParsedRecord r;
  if (in.size() < kRecordHeaderSize) {
    r.error = RecordError::kShortHeader;
    return r;
  }
  const std::byte* p = in.data();
  r.header.payload_len = GetU32(p);
  r.header.type = static_cast<RecordType>(p[4]);
  r.header.seq = GetU64(p + 8);
  r.header.checksum = GetU64(p + 16);
  if (r.header.payload_len > kMaxRecordPayload || p[5] != std::byte{0} || p[6] != std::byte{0} ||
      p[7] != std::byte{0}) {
    r.error = RecordError::kBadLength;
    return r;
  }
  if (in.size() - kRecordHeaderSize < r.header.payload_len) {
    r.error = RecordError::kShortPayload;
    return r;
  }
  r.payload = in.subspan(kRecordHeaderSize, r.header.payload_len);
  if (RecordChecksum(in.first<16>(), r.payload) != r.header.checksum) {
    r.error = RecordError::kBadChecksum;
    return r;
  }
  if (r.header.type != RecordType::kCommandOutcome) {
    r.error = RecordError::kUnknownType;
    return r;
  }
  r.size = kRecordHeaderSize + r.header.payload_len;
  return r;
}

std::string SegmentFileName(uint64_t first_seq) { return fmt::format("{:020}.mbj", first_seq); }
std::string SnapshotFileName(uint64_t seq) { return fmt::format("{:020}.mbs", seq); }

namespace {
bool ParseNumbered(std::string_view name, std::string_view ext, uint64_t* out) noexcept {
  if (name.size() != 20 + ext.size() || name.substr(20) != ext) return false;
  const char* end = name.data() + 20;
  auto [ptr, ec] = std::from_chars(name.data(), end, *out);
  return ec == std::errc() && ptr == end;
}
}  // namespace

bool ParseSegmentFileName(std::string_view name, uint64_t* first_seq) noexcept {
  return ParseNumbered(name, ".mbj", first_seq);
}
bool ParseSnapshotFileName(std::string_view name, uint64_t* seq) noexcept {
  return ParseNumbered(name, ".mbs", seq);
}

}  // namespace mb::journal
