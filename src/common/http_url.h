// "http://host:port" addresses of other servers Matchbook calls (a replica's
// primary, another venue): the scheme is optional, a trailing '/' is
// dropped, an IPv6 host is bracketed. "https://" where the caller speaks TLS
// (it passes `tls`); any path is refused.
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace mb {

// → (host, port). `what` names the address in the error: "<what> \"<url>\"
// is not http://HOST:PORT (<role>)".
// tls: null refuses https://; otherwise set to whether the URL is https://.
Result<std::pair<std::string, std::string>> ParseHttpUrl(std::string_view url,
                                                         std::string_view what,
                                                         std::string_view role,
                                                         bool* tls = nullptr);

}  // namespace mb
