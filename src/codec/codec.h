// The binary codec: a hand-written, fixed-layout, little-endian encoding of the
// engine's commands, events and snapshot images. It is what the journal stores
// and what replay reads back, so the bytes are a contract: every layout is
// written up in docs/journal_format.md, and the golden tests in codec_test.cc
// pin it.
//
//   command := u8 CommandType | body | i64 timestamp_ns
//   event   := u8 EventType | u64 seq | i64 timestamp_ns | body
//
// Every field is written one by one (never a memcpy of a struct), so padding
// and in-memory layout never leak onto disk. Each record type has one fixed
// size (kCommandSize / kEventSize below). Decoding validates everything it
// reads: enum values must be in range, bools must be 0 or 1, a FixedString's
// length must be <= its capacity with zero padding after it. So every value
// has exactly one encoding and Encode(Decode(bytes)) == bytes.
//
// Hot path (Encode, Decode, EncodedSize): noexcept, no allocation, no
// exceptions; errors are a small enum. Cold path (snapshot images): Status /
// Result with a kCorruption message naming what is wrong.
//
// Thread safety: pure functions over caller-owned buffers; no shared state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/image.h"

namespace mb::codec {

// ---------------------------------------------------------------------------
// Record sizes, in bytes, type byte and timestamp (and seq) included. Indexed
// by CommandType / EventType. codec.cc static_asserts them against the field
// lists, so they can't drift from the code.
// ---------------------------------------------------------------------------

inline constexpr std::array<std::size_t, 15> kCommandSize = {
    100,  // kPlaceOrder
    61,   // kCancelOrder
    15,   // kCancelAll
    114,  // kAmendOrder
    88,   // kDeposit
    88,   // kWithdraw
    12,   // kSetMarketStatus
    153,  // kCancelReplace
    161,  // kTransferOut
    19,   // kResolveTransfer
    282,  // kPlaceOrderList
    60,   // kCancelOrderList
    154,  // kChangeAuth
    46,   // kAddAsset
    103,  // kAddMarket
};
inline constexpr std::size_t kMaxCommandSize = 282;

inline constexpr std::array<std::size_t, 24> kEventSize = {
    104,  // kOrderAccepted
    78,   // kRejected
    110,  // kTrade
    48,   // kOrderRested
    48,   // kOrderCanceled
    49,   // kOrderExpired
    65,   // kOrderAmended
    104,  // kDeposited
    104,  // kWithdrawn
    20,   // kMarketStatusChanged
    68,   // kClientOrderIdChanged
    177,  // kTransferHeld
    47,   // kTransferCompleted
    40,   // kTransferRefunded
    44,   // kOrderArmed
    48,   // kOrderTriggered
    40,   // kIcebergAccepted
    56,   // kIcebergRefilled
    93,   // kListAccepted
    116,  // kOrderPending
    31,   // kListDone
    162,  // kAuthChanged
    56,   // kAssetAdded
    113,  // kMarketAdded
};
inline constexpr std::size_t kMaxEventSize = 177;

static_assert(kCommandSize.size() == std::variant_size_v<engine::CommandBody>);
static_assert(kEventSize.size() == std::variant_size_v<engine::EventBody>);

// ---------------------------------------------------------------------------
// Commands and events (hot path)
// ---------------------------------------------------------------------------

// Why bytes did not decode. Never renumber; append.
enum class DecodeError : uint8_t {
  kOk = 0,
  kTruncated = 1,      // fewer bytes than the record's type needs (or no bytes at all)
  kUnknownType = 2,    // the type byte names no command / event type
  kBadEnum = 3,        // an enum field holds a value outside its type
  kBadString = 4,      // a string's length exceeds its capacity, or its padding is not zero
  kBadBool = 5,        // a bool byte other than 0 or 1
  kTrailingBytes = 6,  // DecodeExact only: bytes left over after the record
};

std::string_view ToString(DecodeError e) noexcept;

// consumed: the record's size when error == kOk, else 0.
struct [[nodiscard]] DecodeResult {
  DecodeError error = DecodeError::kOk;
  std::size_t consumed = 0;

  bool ok() const noexcept { return error == DecodeError::kOk; }
};

// Size of one record of that type; 0 for a type value out of range.
[[nodiscard]] std::size_t EncodedSize(engine::CommandType type) noexcept;
[[nodiscard]] std::size_t EncodedSize(engine::EventType type) noexcept;
[[nodiscard]] std::size_t EncodedSize(const engine::Command& command) noexcept;
[[nodiscard]] std::size_t EncodedSize(const engine::Event& event) noexcept;

// Writes one record at the start of `out`. Returns the bytes written
// (== EncodedSize), or 0, writing nothing, when `out` is too small.
// REQUIRES: every FixedString has len <= capacity (FixedString::Assign keeps
// that; a longer len is a bug: asserted in debug, clamped in release).
// Enum fields are written as they are; an out-of-range value (a bug upstream)
// is written too, and Decode will refuse it.
[[nodiscard]] std::size_t Encode(const engine::Command& command, std::span<std::byte> out) noexcept;
[[nodiscard]] std::size_t Encode(const engine::Event& event, std::span<std::byte> out) noexcept;

// Decodes the one record at the start of `in`; bytes after it are left alone
// (consumed tells where the next record starts). *out is written only on kOk.
// Never reads outside `in`; any input is safe.
DecodeResult Decode(std::span<const std::byte> in, engine::Command* out) noexcept;
DecodeResult Decode(std::span<const std::byte> in, engine::Event* out) noexcept;

// As Decode, but `in` must be exactly one record: kTrailingBytes otherwise.
DecodeResult DecodeExact(std::span<const std::byte> in, engine::Command* out) noexcept;
DecodeResult DecodeExact(std::span<const std::byte> in, engine::Event* out) noexcept;

// Convenience for tests and tools (allocates).
std::vector<std::byte> EncodeToVector(const engine::Command& command);
std::vector<std::byte> EncodeToVector(const engine::Event& event);

// ---------------------------------------------------------------------------
// Snapshot images (cold path)
// ---------------------------------------------------------------------------

// The first 8 bytes of every image. Fixed forever: the digits are part of the
// name, not the version (that is kImageFormatVersion).
inline constexpr std::array<char, 8> kImageMagic = {'M', 'B', 'S', 'N', 'A', 'P', '0', '1'};
// The layout this build writes. Version 2 added the pending_transfers
// section (transfers to other venues not yet resolved); a version 1 image,
// which ends before it, is still read (none were pending). Version 3 added the
// last_prices, stops, icebergs, lists and pending sections (each market's
// last trade price, the conditional orders waiting for their trigger, the
// resting icebergs' slices and hidden parts, the order lists not done and
// their pending orders); a version 2 image ends before them and is still read
// (no last price, none waiting, no iceberg, no list). Version 4 added the
// accounts and api_keys sections (the operator's accounts and API keys, as
// AuthChange made them) and the assets and markets sections (those added at
// run time, as AssetAdded and MarketAdded records); a version 3 image ends
// before them and is still read (no account, no key, nothing added).
inline constexpr uint16_t kImageFormatVersion = 4;
inline constexpr uint16_t kOldestImageFormatVersion = 1;
// Magic, version, three u64 header fields, six section counts (version 1),
// checksum.
inline constexpr std::size_t kMinImageSize = 8 + 2 + 3 * 8 + 2 * 4 + 4 * 8 + 8;

// header | sections (market statuses, asset totals, balances, orders, recent
// client ids, transfers, pending transfers, last prices, stops, icebergs,
// lists, pending, accounts, API keys, added assets, added markets; each a
// count then fixed-size records) |
// u64 XXH3-64 of every byte before it. No compression: the journal layer adds
// that. The api_keys section holds the HMAC secrets: an image is as secret as
// the key store.
std::vector<std::byte> EncodeImage(const engine::EngineImage& image);

// Checks the magic, the checksum, the version, every count against the bytes
// left (before allocating anything) and every field; any failure is
// kCorruption with a message naming the section, record and problem.
Result<engine::EngineImage> DecodeImage(std::span<const std::byte> in);

}  // namespace mb::codec
