#include "transfer/protocol.h"

#include <openssl/crypto.h>

#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "common/hmac.h"
#include "common/http_url.h"

namespace mb::transfer {
namespace json = boost::json;

namespace {

Status Bad(std::string_view what) {
  return InvalidArgument(std::string("venue call: ") + std::string(what));
}

const json::value* Field(const json::object& o, std::string_view key) { return o.if_contains(key); }

bool GetString(const json::object& o, std::string_view key, std::string* out) {
  const json::value* v = Field(o, key);
  if (v == nullptr || !v->is_string()) return false;
  *out = std::string(v->as_string());
  return true;
}

bool GetId(const json::object& o, std::string_view key, uint64_t* out) {
  const json::value* v = Field(o, key);
  if (v == nullptr) return false;
  if (v->is_uint64()) {
    *out = v->as_uint64();
  } else if (v->is_int64() && v->as_int64() >= 0) {
    *out = static_cast<uint64_t>(v->as_int64());
  } else {
    return false;
  }
  return true;
}

Result<json::array> ArrayOf(std::string_view body, std::string_view key) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return Bad("the body is not JSON");
  if (!v.is_object()) return Bad("the body is not a JSON object");
  const json::value* a = v.as_object().if_contains(key);
  if (a == nullptr || !a->is_array()) return Bad(std::string(key) + " is not an array");
  if (a->as_array().size() > kMaxBatch) return Bad(std::string(key) + ": too many entries");
  return a->as_array();
}

constexpr engine::RefundReason kReasons[] = {
    engine::RefundReason::kVoided, engine::RefundReason::kInvalidAddress,
    engine::RefundReason::kUnknownAsset, engine::RefundReason::kAccountUnavailable,
    engine::RefundReason::kRefused};

}  // namespace

std::string Sign(std::string_view secret, std::string_view timestamp_ms, std::string_view method,
                 std::string_view target, std::string_view body) {
  std::string data;
  data.reserve(timestamp_ms.size() + method.size() + target.size() + body.size() + 3);
  data.append(timestamp_ms).append("\n").append(method).append("\n").append(target);
  data.append("\n").append(body);
  return HmacSha256Hex(secret, data);
}

bool SignatureMatches(std::string_view expected_hex, std::string_view received_hex) noexcept {
  return expected_hex.size() == received_hex.size() &&
         CRYPTO_memcmp(expected_hex.data(), received_hex.data(), expected_hex.size()) == 0;
}

std::string EncodeDeliveries(std::span<const Delivery> deliveries) {
  json::array a;
  a.reserve(deliveries.size());
  for (const Delivery& d : deliveries) {
    a.push_back(
        json::object{{"id", d.id}, {"coin", d.coin}, {"amount", d.amount}, {"address", d.address}});
  }
  return json::serialize(json::object{{"transfers", std::move(a)}});
}

Result<std::vector<Delivery>> DecodeDeliveries(std::string_view body) {
  auto a = ArrayOf(body, "transfers");
  if (!a.ok()) return a.status();
  if (a->empty()) return Bad("transfers is empty");
  std::vector<Delivery> out;
  out.reserve(a->size());
  for (const json::value& v : *a) {
    if (!v.is_object()) return Bad("a transfer is not an object");
    const json::object& o = v.as_object();
    Delivery d;
    if (!GetId(o, "id", &d.id) || d.id == 0)
      return Bad("a transfer's id is not a positive integer");
    if (!GetString(o, "coin", &d.coin) || !GetString(o, "amount", &d.amount) ||
        !GetString(o, "address", &d.address)) {
      return Bad("transfer " + std::to_string(d.id) + ": coin, amount and address are strings");
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string EncodeResults(std::span<const DeliveryResult> results) {
  json::array a;
  a.reserve(results.size());
  for (const DeliveryResult& r : results) {
    json::object o{{"id", r.id}, {"status", ToString(r.outcome)}};
    if (r.outcome == Outcome::kCredited) o["depositId"] = r.deposit_id;
    if (r.outcome == Outcome::kRejected) o["reason"] = ReasonCode(r.reason);
    if (!r.msg.empty()) o["msg"] = r.msg;
    a.push_back(std::move(o));
  }
  return json::serialize(json::object{{"results", std::move(a)}});
}

Result<std::vector<DeliveryResult>> DecodeResults(std::string_view body) {
  auto a = ArrayOf(body, "results");
  if (!a.ok()) return a.status();
  std::vector<DeliveryResult> out;
  out.reserve(a->size());
  for (const json::value& v : *a) {
    if (!v.is_object()) return Bad("a result is not an object");
    const json::object& o = v.as_object();
    DeliveryResult r;
    std::string status;
    if (!GetId(o, "id", &r.id) || !GetString(o, "status", &status)) {
      return Bad("a result needs an id and a status");
    }
    GetString(o, "msg", &r.msg);
    if (status == ToString(Outcome::kCredited)) {
      r.outcome = Outcome::kCredited;
      if (!GetId(o, "depositId", &r.deposit_id)) return Bad("a credited result needs a depositId");
    } else if (status == ToString(Outcome::kRejected)) {
      r.outcome = Outcome::kRejected;
      std::string code;
      GetString(o, "reason", &code);
      r.reason = engine::RefundReason::kRefused;
      for (engine::RefundReason k : kReasons) {
        if (code == ReasonCode(k)) r.reason = k;
      }
      // A destination never voids: an unknown or "VOIDED" code is a refusal.
      if (r.reason == engine::RefundReason::kVoided) r.reason = engine::RefundReason::kRefused;
    } else if (status == ToString(Outcome::kRetry)) {
      r.outcome = Outcome::kRetry;
    } else {
      return Bad("unknown status \"" + status + "\"");
    }
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseHttpUrls(std::string_view urls,
                                                                       std::string_view what,
                                                                       std::string_view role,
                                                                       std::vector<bool>* tls) {
  std::vector<std::pair<std::string, std::string>> out;
  if (tls != nullptr) tls->clear();
  std::string_view rest = urls;
  for (;;) {
    const std::size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (one.empty()) {
      return InvalidArgument(std::string(what) + " \"" + std::string(urls) +
                             "\": an empty address (http://HOST:PORT[,http://HOST:PORT...])");
    }
    bool https = false;
    auto parsed = ParseHttpUrl(one, what, role, tls != nullptr ? &https : nullptr);
    if (!parsed.ok()) return parsed.status();
    if (tls != nullptr) tls->push_back(https);
    for (const auto& [host, port] : out) {
      if (host == parsed->first && port == parsed->second) {
        return InvalidArgument(std::string(what) + " \"" + std::string(one) + "\" is listed twice");
      }
    }
    out.push_back(std::move(*parsed));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::string_view ToString(Outcome o) noexcept {
  switch (o) {
    case Outcome::kCredited:
      return "CREDITED";
    case Outcome::kRejected:
      return "REJECTED";
    case Outcome::kRetry:
      return "RETRY";
  }
  return "RETRY";
}

std::string_view ReasonCode(engine::RefundReason r) noexcept { return engine::ToString(r); }

}  // namespace mb::transfer
