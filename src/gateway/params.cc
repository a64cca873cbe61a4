#include "gateway/params.h"

#include <charconv>
#include <cstdint>
#include <system_error>

namespace mb::gateway {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool HasControlChar(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20U || u == 0x7FU) return true;
  }
  return false;
}

ApiError TooManyParams() {
  return ApiError{400, -1101, "Too many parameters sent for this endpoint."};
}

// Binance's -1100 text for a malformed integer, with the pattern it accepts.
ApiError BadInteger(std::string_view name, std::string_view legal_range) {
  std::string msg = "Illegal characters found in parameter '";
  msg.append(name).append("'; legal range is '").append(legal_range).append("'.");
  return ApiError{400, -1100, std::move(msg)};
}

constexpr std::string_view kSignature = "signature";
constexpr std::string_view kUintRange = "^[0-9]{1,20}$";
constexpr std::string_view kIntRange = "^-?[0-9]{1,19}$";

struct ParseState {
  std::vector<std::pair<std::string, std::string>> items;
  std::optional<std::string> signature;
  std::size_t count = 0;
};

// Parses one source (the query string or the body) into `state` and appends
// its raw bytes, minus the signature parameter and one '&' next to it, to
// `payload`. Every other byte is kept as received: the client signed those.
// `query_items`: how many of state->items came from the query string when
// parsing the body (a body parameter the query already has is ignored: the
// query's value is used, as on Binance); SIZE_MAX while parsing the query.
std::optional<ApiError> ParseSource(std::string_view src, std::size_t max_params,
                                    std::size_t query_items, ParseState* state,
                                    std::string* payload) {
  std::size_t cut_begin = std::string_view::npos;
  std::size_t cut_end = std::string_view::npos;
  std::size_t pos = 0;
  while (pos <= src.size()) {
    std::size_t amp = src.find('&', pos);
    if (amp == std::string_view::npos) amp = src.size();
    const std::string_view piece = src.substr(pos, amp - pos);
    const std::size_t piece_begin = pos;
    pos = amp + 1;
    if (piece.empty()) continue;  // "a=1&&b=2", a trailing '&'

    if (++state->count > max_params) return TooManyParams();
    const std::size_t eq = piece.find('=');
    const std::string_view raw_name = piece.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1);
    std::string name;
    if (!PercentDecode(raw_name, &name) || HasControlChar(name)) {
      // The raw bytes: a malformed name cannot be shown decoded.
      return ApiError::IllegalChars(raw_name);
    }
    if (name.empty()) return ApiError::IllegalChars("");
    std::string value;
    if (!PercentDecode(raw_value, &value) || HasControlChar(value)) {
      return ApiError::IllegalChars(name);
    }
    bool in_query = false;
    for (std::size_t i = 0; i < state->items.size(); ++i) {
      if (state->items[i].first != name) continue;
      if (query_items == SIZE_MAX || i >= query_items) return ApiError::DuplicateParam(name);
      in_query = true;
    }
    if (name == kSignature) {
      if (!in_query) state->signature = value;
      cut_begin = piece_begin;
      cut_end = piece_begin + piece.size();
    }
    if (!in_query) state->items.emplace_back(std::move(name), std::move(value));
  }

  if (cut_begin == std::string_view::npos) {
    payload->append(src);
    return std::nullopt;
  }
  if (cut_begin > 0) {
    --cut_begin;  // "...&signature=x": the '&' before it
  } else if (cut_end < src.size()) {
    ++cut_end;  // "signature=x&...": the '&' after it
  }
  payload->append(src.substr(0, cut_begin));
  payload->append(src.substr(cut_end));
  return std::nullopt;
}

}  // namespace

bool PercentDecode(std::string_view in, std::string* out) {
  std::string decoded;
  decoded.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '+') {
      decoded.push_back(' ');
    } else if (c == '%') {
      if (in.size() - i < 3) return false;  // '%' needs two hex digits after it
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      decoded.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      decoded.push_back(c);
    }
  }
  *out = std::move(decoded);
  return true;
}

std::optional<ApiError> Params::Parse(std::string_view query, std::string_view body, Params* out,
                                      std::size_t max_params) {
  ParseState state;
  std::string payload;
  payload.reserve(query.size() + body.size());
  // The query string first, then the body directly after it (no separator):
  // Binance's "totalParams".
  if (auto err = ParseSource(query, max_params, SIZE_MAX, &state, &payload)) return err;
  if (auto err = ParseSource(body, max_params, state.items.size(), &state, &payload)) return err;
  out->items_ = std::move(state.items);
  out->signature_ = std::move(state.signature);
  out->signed_payload_ = std::move(payload);
  return std::nullopt;
}

Params Params::FromPairs(std::vector<std::pair<std::string, std::string>> items) {
  Params p;
  p.items_ = std::move(items);
  return p;
}

bool Params::Set(std::string_view name, std::string value) {
  for (auto& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return true;
    }
  }
  return false;
}

bool Params::Has(std::string_view name) const { return Get(name).has_value(); }

std::optional<std::string_view> Params::Get(std::string_view name) const {
  for (const auto& item : items_) {
    if (item.first == name) return std::string_view(item.second);
  }
  return std::nullopt;
}

std::optional<ApiError> Params::Require(std::string_view name, std::string_view* out) const {
  const std::optional<std::string_view> value = Get(name);
  if (!value) return ApiError::MandatoryMissing(name);
  if (value->empty()) return ApiError::EmptyParam(name);
  *out = *value;
  return std::nullopt;
}

std::optional<ApiError> Params::GetInt(std::string_view name, std::optional<int64_t>* out) const {
  const std::optional<std::string_view> value = Get(name);
  if (!value) {
    *out = std::nullopt;
    return std::nullopt;
  }
  if (value->empty()) return ApiError::EmptyParam(name);
  const std::string_view digits = (*value)[0] == '-' ? value->substr(1) : *value;
  // from_chars alone would accept a '-' before the digits only: the checks
  // here keep "+1", " 1", "1 ", "--1" and "-" out, and the digit count bound
  // mirrors the pattern quoted in the error.
  if (digits.empty() || digits.size() > 19) return BadInteger(name, kIntRange);
  for (char c : digits) {
    if (c < '0' || c > '9') return BadInteger(name, kIntRange);
  }
  int64_t v = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, v);
  if (ec != std::errc() || ptr != end) return BadInteger(name, kIntRange);
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> Params::GetUint(std::string_view name, std::optional<uint64_t>* out) const {
  const std::optional<std::string_view> value = Get(name);
  if (!value) {
    *out = std::nullopt;
    return std::nullopt;
  }
  if (value->empty()) return ApiError::EmptyParam(name);
  if (value->size() > 20) return BadInteger(name, kUintRange);
  for (char c : *value) {
    if (c < '0' || c > '9') return BadInteger(name, kUintRange);
  }
  uint64_t v = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, v);
  if (ec != std::errc() || ptr != end) return BadInteger(name, kUintRange);  // overflow
  *out = v;
  return std::nullopt;
}

}  // namespace mb::gateway
