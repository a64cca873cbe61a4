// The web pages as HTTP answers (io threads).
#include "gateway/web_pages.h"

#include <cctype>

namespace mb::gateway {
namespace {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Calls fn(item) for each comma-separated, trimmed, non-empty item.
template <class Fn>
void ForEachItem(std::string_view list, Fn fn) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = TrimSpace(list.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// If-None-Match names `etag` (or is "*"); weak comparison, as RFC 9110 asks.
bool NoneMatchHits(std::string_view header, std::string_view etag) {
  bool hit = false;
  ForEachItem(header, [&](std::string_view tag) {
    if (tag == "*") hit = true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) hit = true;
  });
  return hit;
}

bool PlainHost(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  for (const char ch : host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
                    ch == ':' || ch == '[' || ch == ']';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const web::Asset* FindPage(std::string_view path) noexcept { return web::FindAsset(path); }

bool IsOperatorPage(std::string_view path) noexcept { return path.starts_with("/admin/"); }

bool AcceptsGzip(std::string_view accept_encoding) noexcept {
  bool gzip = false;
  ForEachItem(accept_encoding, [&](std::string_view item) {
    const std::size_t semi = item.find(';');
    const std::string_view coding = TrimSpace(item.substr(0, semi));
    if (!IEquals(coding, "gzip") && coding != "*") return;
    bool zero = false;
    if (semi != std::string_view::npos) {
      std::string_view q = TrimSpace(item.substr(semi + 1));
      if (q.starts_with("q=") || q.starts_with("Q=")) {
        q.remove_prefix(2);
        zero = !q.empty() && q.find_first_not_of("0.") == std::string_view::npos;
      }
    }
    if (!zero) gzip = true;
  });
  return gzip;
}

std::string ContentSecurityPolicy(std::string_view host) {
  std::string connect = "connect-src 'self'";
  if (PlainHost(host)) {
    connect += " ws://";
    connect += host;
    connect += " wss://";
    connect += host;
  }
  return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
         "font-src 'self'; " +
         connect + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

Response PageResponse(const Request& req, const web::Asset& asset) {
  const auto ae = req.find(http::field::accept_encoding);
  const bool gzip = !asset.gzip.empty() && ae != req.end() && AcceptsGzip(ae->value());
  const std::string_view etag = gzip ? asset.gzip_etag : asset.etag;
  const auto inm = req.find(http::field::if_none_match);
  const bool not_modified = inm != req.end() && NoneMatchHits(inm->value(), etag);

  Response res{not_modified ? http::status::not_modified : http::status::ok, req.version()};
  res.set(http::field::server, "matchbook");
  res.set(http::field::etag, etag);
  res.set(http::field::cache_control, "no-cache");
  res.set(http::field::vary, "Accept-Encoding");
  res.keep_alive(req.keep_alive());
  if (not_modified) return res;
  res.set(http::field::content_type, asset.content_type);
  if (gzip) res.set(http::field::content_encoding, "gzip");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  if (asset.content_type.starts_with("text/html")) {
    const auto host = req.find(http::field::host);
    const std::string_view host_value =
        host == req.end() ? std::string_view() : std::string_view(host->value());
    res.set("Content-Security-Policy", ContentSecurityPolicy(host_value));
    res.set("X-Frame-Options", "DENY");
  }
  // HEAD too: the server sends a HEAD answer's headers only (server.h).
  res.body() = std::string(gzip ? asset.gzip : asset.body);
  res.prepare_payload();
  return res;
}

}  // namespace mb::gateway
