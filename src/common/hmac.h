// HMAC-SHA256 as a lower-case hex string: what a Binance-style SIGNED request
// carries in its `signature` parameter. The gateway checks signatures with it
// and the load generator makes them with it (OpenSSL underneath).
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace mb {

// Lower-case hex (64 characters) of HMAC-SHA256(key, data). Either may be
// empty. A key longer than INT_MAX bytes is a bug (MB_CHECK).
std::string HmacSha256Hex(std::string_view key, std::string_view data);

}  // namespace mb
