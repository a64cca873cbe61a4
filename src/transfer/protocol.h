// The calls between venues (docs/transfers.md, "Between venues"). The source
// venue's dispatcher delivers a batch of transfers; the destination credits
// each once and answers for each:
//
//   POST /venue/v1/transfers
//   X-MB-Venue: <source venue>   X-MB-Timestamp: <ms>   X-MB-Signature: <hex>
//   {"transfers":[{"id":7,"coin":"BTC","amount":"0.5","address":"beta:42:BTC:5c0f9e21"}]}
//
//   200 {"results":[{"id":7,"status":"CREDITED","depositId":991},
//                   {"id":8,"status":"REJECTED","reason":"INVALID_ADDRESS","msg":"..."},
//                   {"id":9,"status":"RETRY","msg":"..."}]}
//
// The signature is HMAC-SHA256, keyed by the pair's shared secret (never
// sent), over "<timestamp>\n<method>\n<target>\n<body>"; a call whose
// timestamp is further than the allowed skew from the destination's clock is
// refused. A delivery is idempotent by (source venue, id): the destination
// records "<source venue>:<id>" as the deposit's reference, and a second
// delivery is answered CREDITED with the first deposit's id.
//
// A venue (like a replica's primary) may be several servers, a primary and
// its standbys, each with its own URL: every answer to GET /api/v3/ping
// says which one holds intake in its X-MB-Role header ("primary",
// "standby", "replica"; docs/api.md), and calls go to the first URL whose
// ping says "primary".
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/types.h"

namespace mb::transfer {

inline constexpr std::string_view kDeliverTarget = "/venue/v1/transfers";
inline constexpr std::string_view kVenueHeader = "X-MB-Venue";
inline constexpr std::string_view kTimestampHeader = "X-MB-Timestamp";
inline constexpr std::string_view kSignatureHeader = "X-MB-Signature";

// The role probe: an unauthenticated GET of kPingTarget, whose answer
// carries kRoleHeader.
inline constexpr std::string_view kPingTarget = "/api/v3/ping";
inline constexpr std::string_view kRoleHeader = "X-MB-Role";
inline constexpr std::string_view kRolePrimary = "primary";  // holds intake
inline constexpr std::string_view kRoleStandby = "standby";  // follows; may take over
inline constexpr std::string_view kRoleReplica = "replica";  // a read replica

// "URL[,URL...]", each "http://HOST:PORT" (mb::ParseHttpUrl) → each (host,
// port), in order. Spaces around an element are ignored. Error (`what`
// names the list, `role` what it addresses): an empty element, an element
// that is not http://HOST:PORT (named), the same address twice.
// tls: null refuses https://; otherwise one flag per URL, in order.
Result<std::vector<std::pair<std::string, std::string>>> ParseHttpUrls(
    std::string_view urls, std::string_view what, std::string_view role,
    std::vector<bool>* tls = nullptr);

// The most transfers one call carries.
inline constexpr std::size_t kMaxBatch = 1000;

struct Delivery {
  uint64_t id = 0;      // the source's transfer id
  std::string coin;     // the asset's symbol
  std::string amount;   // decimal text: what the destination credits
  std::string address;  // the destination's deposit address
};

enum class Outcome : uint8_t {
  kCredited = 0,  // durable on the destination (now or by an earlier delivery)
  kRejected = 1,  // never credited: the source refunds (reason)
  kRetry = 2,     // not decided (destination busy): deliver again later
};

struct DeliveryResult {
  uint64_t id = 0;
  Outcome outcome = Outcome::kRetry;
  uint64_t deposit_id = 0;                                       // kCredited
  engine::RefundReason reason = engine::RefundReason::kRefused;  // kRejected
  std::string msg;
};

// The hex signature of one call.
std::string Sign(std::string_view secret, std::string_view timestamp_ms, std::string_view method,
                 std::string_view target, std::string_view body);
// Constant-time comparison of a received signature with the expected one.
bool SignatureMatches(std::string_view expected_hex, std::string_view received_hex) noexcept;

std::string EncodeDeliveries(std::span<const Delivery> deliveries);
// kInvalidArgument naming the field: not JSON, a missing or mistyped field,
// more than kMaxBatch, no transfers.
Result<std::vector<Delivery>> DecodeDeliveries(std::string_view body);

std::string EncodeResults(std::span<const DeliveryResult> results);
Result<std::vector<DeliveryResult>> DecodeResults(std::string_view body);

std::string_view ToString(Outcome o) noexcept;
// The wire name of a refund reason ("INVALID_ADDRESS", ...) and back.
std::string_view ReasonCode(engine::RefundReason r) noexcept;

}  // namespace mb::transfer
