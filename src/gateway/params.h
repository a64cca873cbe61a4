// Request parameters as Binance defines them: the query string and a
// form-encoded body, percent-decoded, in order, plus the raw bytes a
// signature covers.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gateway/api_error.h"

namespace mb::gateway {

class Params {
 public:
  // Parses "a=1&b=x%20y" (and a form body). Errors: bad percent-encoding or a
  // control character (-1100), a name twice in the query or twice in the body
  // (-1101), more than max_params (-1101). A name in both the query and the
  // body takes the query's value, as on Binance. Empty values are kept (Get()
  // sees ""), checked later.
  static std::optional<ApiError> Parse(std::string_view query, std::string_view body, Params* out,
                                       std::size_t max_params = 64);

  // The exact bytes a signature covers: the raw query string, then the raw
  // body ("query" + "body" concatenated when both exist, as Binance does),
  // with the "signature=..." parameter removed; signature(): its value.
  const std::string& signed_payload() const noexcept { return signed_payload_; }
  const std::optional<std::string>& signature() const noexcept { return signature_; }

  bool Has(std::string_view name) const;
  // The decoded value, or nullopt when absent.
  std::optional<std::string_view> Get(std::string_view name) const;
  // Present and non-empty, or -1102 (absent) / -1105 (empty).
  std::optional<ApiError> Require(std::string_view name, std::string_view* out) const;
  // Optional integers: absent → nullopt value and no error; malformed → -1100
  // ("Illegal characters found in parameter 'limit'; legal range is '...'").
  std::optional<ApiError> GetInt(std::string_view name, std::optional<int64_t>* out) const;
  std::optional<ApiError> GetUint(std::string_view name, std::optional<uint64_t>* out) const;

  const std::vector<std::pair<std::string, std::string>>& all() const noexcept { return items_; }

  // Parameters from decoded name/value pairs (no signed payload): one
  // order of an order list, re-read under the names of a single order.
  static Params FromPairs(std::vector<std::pair<std::string, std::string>> items);

  // Replaces the value of a parameter that is present (false otherwise). The
  // signed payload is not touched: it stays the bytes the client signed.
  bool Set(std::string_view name, std::string value);

 private:
  std::vector<std::pair<std::string, std::string>> items_;
  std::string signed_payload_;
  std::optional<std::string> signature_;
};

// Percent-decoding ('+' is a space in form and query encoding). False on a
// malformed escape.
bool PercentDecode(std::string_view in, std::string* out);

}  // namespace mb::gateway
