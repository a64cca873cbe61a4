// "http://host:port" addresses of other servers Matchbook calls (a replica's
// primary, another venue): the scheme is optional, a trailing '/' is
// dropped, an IPv6 host is bracketed. TLS is not spoken: "https://" is
// refused, as is any path.
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
Result<std::pair<std::string, std::string>> ParseHttpUrl(std::string_view url,
                                                         std::string_view what,
                                                         std::string_view role);

}  // namespace mb
