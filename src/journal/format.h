// The journal's on-disk framing (docs/journal_format.md, "Segments" and
// "Snapshot files", is the byte-level contract; this header is its code).
//
//   <data-dir>/journal/<first sequence, 20 digits>.mbj   segment files
//   <data-dir>/snapshots/<sequence, 20 digits>.mbs       snapshot files
//
// A segment is a header followed by records. A record holds the outcome of one
// command: every event the engine emitted for it, encoded by mb::codec, framed
// with its length, type, sequence and an XXH3-64 checksum. One record per
// command makes a command atomic on disk: a torn write loses whole commands,
// never half of one. Sequences are dense: each record's is the previous + 1.
//
// Thread safety: pure functions over byte spans.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mb::journal {

inline constexpr std::array<char, 8> kSegmentMagic = {'M', 'B', 'J', 'R', 'N', 'L', '0', '1'};
// The version this build writes. Version 2 added event types (and enum
// values) to the codec: ClientOrderIdChanged, ExpireReason kQuoteBudgetSpent,
// Rejected for CommandType kCancelReplace. A version 1 segment holds only the
// older ones, so this build reads both; an older build refuses version 2 by
// its header instead of failing on the first new event. Version 3 added the
// transfers to other venues: commands TransferOut and ResolveTransfer, events
// TransferHeld, TransferCompleted and TransferRefunded, RejectReason
// kUnknownTransfer. Version 4 added the conditional orders: events
// OrderArmed and OrderTriggered, OrderType STOP_LOSS .. TAKE_PROFIT_LIMIT,
// RejectReason kWouldTriggerImmediately .. kInvalidStopPrice, ExpireReason
// kInsufficientBalance; the iceberg orders: events IcebergAccepted and
// IcebergRefilled, RejectReason kInvalidIcebergQty; and the order lists:
// commands PlaceOrderList and CancelOrderList, events ListAccepted,
// OrderPending and ListDone, RejectReason kInvalidOrderList and
// kUnknownOrderList, enum ListType. Version 5 added the accounts and API
// keys: command ChangeAuth (AuthChange), event AuthChanged, RejectReason
// kNameTaken .. kInvalidAuthChange, enum AuthChangeKind; and the assets and
// markets added at run time: commands AddAsset and AddMarket, events
// AssetAdded and MarketAdded, RejectReason kSymbolTaken and kInvalidListing;
// a version 4 segment holds none, so this build reads it; an older build
// refuses version 5 by its header. AuthChanged records hold API keys' HMAC
// secrets: a segment is as secret as the key store.
inline constexpr uint16_t kSegmentFormatVersion = 5;
inline constexpr uint16_t kOldestSegmentFormatVersion = 1;
inline constexpr std::size_t kSegmentHeaderSize = 40;

inline constexpr std::size_t kRecordHeaderSize = 24;
// A record this large is damage, not data (a command's events are bounded by
// what it can match; 64 MiB is far beyond any).
inline constexpr uint32_t kMaxRecordPayload = 64u << 20;

enum class RecordType : uint8_t {
  kCommandOutcome = 1,  // payload: the events of one command, codec-encoded, back to back
};

struct SegmentHeader {
  uint16_t version = kSegmentFormatVersion;
  uint64_t first_seq = 0;
  uint64_t config_hash = 0;
};

void EncodeSegmentHeader(const SegmentHeader& header,
                         std::span<std::byte, kSegmentHeaderSize> out) noexcept;
// kCorruption naming what is wrong (magic, checksum, version); `what` names
// the file in the message.
Result<SegmentHeader> DecodeSegmentHeader(std::span<const std::byte> in, std::string_view what);

struct RecordHeader {
  uint32_t payload_len = 0;
  RecordType type = RecordType::kCommandOutcome;
  uint64_t seq = 0;
  uint64_t checksum = 0;
};

// Checksum of a record: XXH3-64 over its first 16 header bytes and its payload.
uint64_t RecordChecksum(std::span<const std::byte, 16> header_prefix,
                        std::span<const std::byte> payload) noexcept;

// Writes a record header for `payload` (checksum included) into `out`.
void EncodeRecordHeader(RecordType type, uint64_t seq, std::span<const std::byte> payload,
                        std::span<std::byte, kRecordHeaderSize> out) noexcept;

// Why the bytes at an offset are not a whole, valid record.
enum class RecordError : uint8_t {
  kOk,
  kShortHeader,   // fewer than kRecordHeaderSize bytes left
  kBadLength,     // payload_len over kMaxRecordPayload, or reserved bytes not zero
  kShortPayload,  // the header promises more bytes than are left
  kBadChecksum,   // the checksum does not match
  kUnknownType,   // a type this build does not know
};
std::string_view ToString(RecordError e) noexcept;

struct ParsedRecord {
  RecordError error = RecordError::kOk;
  RecordHeader header;
  std::span<const std::byte> payload;
  std::size_t size = 0;  // header + payload when ok
};

// Parses the record at the start of `in`. Never reads outside `in`.
ParsedRecord ParseRecord(std::span<const std::byte> in) noexcept;

// "00000000000000000042.mbj"
std::string SegmentFileName(uint64_t first_seq);
std::string SnapshotFileName(uint64_t seq);
// The sequence in a segment / snapshot file name; false for any other name.
bool ParseSegmentFileName(std::string_view name, uint64_t* first_seq) noexcept;
bool ParseSnapshotFileName(std::string_view name, uint64_t* seq) noexcept;

// ---- little-endian helpers shared by the journal's formats ----
inline void PutU16(std::byte* p, uint16_t v) noexcept { std::memcpy(p, &v, 2); }
inline void PutU32(std::byte* p, uint32_t v) noexcept { std::memcpy(p, &v, 4); }
inline void PutU64(std::byte* p, uint64_t v) noexcept { std::memcpy(p, &v, 8); }
inline uint16_t GetU16(const std::byte* p) noexcept {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t GetU32(const std::byte* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t GetU64(const std::byte* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
static_assert(std::endian::native == std::endian::little, "the formats are little-endian");

}  // namespace mb::journal
