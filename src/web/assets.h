// The web pages' assets (web/: the trading page, the operator page, the chart
// library from npm), embedded in the binary at build time so that `matchbook
// serve` serves them from any working directory and with no network: each
// with its content type, a strong ETag (a hash of its bytes) and, when it is
// smaller, a gzip copy made at build time (embed_assets.cmake).
//
// Thread safety: the table is immutable static data; every function may be
// called from any thread.
#pragma once

#include <span>
#include <string_view>

namespace mb::web {

struct Asset {
  std::string_view path;          // the URL path: "/", "/admin/", "/app.js"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view etag;          // quoted, of `body`: "\"3f2a...\""
  std::string_view body;
  std::string_view gzip;       // the gzip copy; empty when it would not be smaller
  std::string_view gzip_etag;  // quoted, of the gzip copy (another representation)
};

// Every embedded asset, sorted by path.
std::span<const Asset> Assets() noexcept;

// The asset served at `path` (exactly: "/" and "/admin/" are the pages;
// "/index.html" is not an asset); nullptr when there is none.
const Asset* FindAsset(std::string_view path) noexcept;

}  // namespace mb::web
