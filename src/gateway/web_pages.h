// The web pages (the trading page at "/", the operator page at "/admin/"; the
// assets src/web embeds) as HTTP answers, on the io threads.
//
// Each answer carries the asset's content type, its strong ETag, `Cache-Control:
// no-cache` (the browser keeps the copy and revalidates it: a 304 costs no
// body), `Vary: Accept-Encoding`, the gzip copy when the client accepts gzip,
// and a Content-Security-Policy that lets the page load and connect to this
// server only.
//
// Thread safety: pure functions of their arguments and of immutable data.
#pragma once

#include <string>
#include <string_view>

#include "gateway/server.h"
#include "web/assets.h"

namespace mb::gateway {

// The embedded asset a GET of `path` names; nullptr: none (the API's 404).
const web::Asset* FindPage(std::string_view path) noexcept;

// True for the operator page and its assets (under "/admin/"): answered to
// loopback clients only unless the operator API is opened (admin_remote),
// as /admin/v1 is. The page holds no secret: it asks for the admin token.
bool IsOperatorPage(std::string_view path) noexcept;

// The answer to a GET or HEAD of `asset`: 304 when If-None-Match names the
// ETag of the representation that would be sent, else 200 with it (gzip when
// the request's Accept-Encoding takes gzip and the asset has a gzip copy).
// HEAD gets the same answer: the server drops a HEAD answer's body.
Response PageResponse(const Request& req, const web::Asset& asset);

// The policy for a page answered to a request with this Host header:
// everything from 'self' only, plus the WebSocket URLs of that host (older
// browsers do not count ws: as 'self'). A Host that is not a plain host[:port]
// adds nothing.
std::string ContentSecurityPolicy(std::string_view host);

// Whether an Accept-Encoding header value takes gzip (a "gzip" or "*" coding
// whose q is not 0).
bool AcceptsGzip(std::string_view accept_encoding) noexcept;

}  // namespace mb::gateway
