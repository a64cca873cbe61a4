// Tests of the embedded web assets: the pages are there, every asset has a
// content type and a strong ETag, and every gzip copy inflates to the bytes.
#include "web/assets.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace mb::web {
namespace {

std::string Gunzip(std::string_view gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);  // 16: gzip framing
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

TEST(WebAssetsTest, ThePagesAreEmbedded) {
  const Asset* trading = FindAsset("/");
  ASSERT_NE(trading, nullptr);
  EXPECT_EQ(trading->content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(trading->body.starts_with("<!doctype html>"));
  const Asset* admin = FindAsset("/admin/");
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(admin->content_type, "text/html; charset=utf-8");
  const Asset* chart = FindAsset("/vendor/lightweight-charts.mjs");
  ASSERT_NE(chart, nullptr);
  EXPECT_EQ(chart->content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(chart->body.find("Apache License 2.0"), std::string_view::npos);
  ASSERT_NE(FindAsset("/vendor/lightweight-charts.LICENSE.txt"), nullptr);
}

TEST(WebAssetsTest, OnlyExactPaths) {
  EXPECT_EQ(FindAsset("/index.html"), nullptr);
  EXPECT_EQ(FindAsset("/admin/index.html"), nullptr);
  EXPECT_EQ(FindAsset("/admin"), nullptr);
  EXPECT_EQ(FindAsset(""), nullptr);
  EXPECT_EQ(FindAsset("/api/v3/ping"), nullptr);
}

TEST(WebAssetsTest, EveryAssetIsComplete) {
  std::string_view previous;
  ASSERT_FALSE(Assets().empty());
  for (const Asset& a : Assets()) {
    SCOPED_TRACE(std::string(a.path));
    EXPECT_TRUE(a.path.starts_with("/"));
    EXPECT_LT(previous, a.path) << "sorted, no path twice";
    previous = a.path;
    EXPECT_EQ(FindAsset(a.path), &a);
    EXPECT_FALSE(a.content_type.empty());
    EXPECT_FALSE(a.body.empty());
    // A strong ETag: quoted, 32 hex digits of the content's SHA-256.
    ASSERT_EQ(a.etag.size(), 34u);
    EXPECT_EQ(a.etag.front(), '"');
    EXPECT_EQ(a.etag.back(), '"');
    if (!a.gzip.empty()) {
      EXPECT_LT(a.gzip.size(), a.body.size());
      EXPECT_EQ(Gunzip(a.gzip), a.body);
      EXPECT_EQ(a.gzip_etag, std::string(a.etag.substr(0, 33)) + ".gz\"");
    } else {
      EXPECT_TRUE(a.gzip_etag.empty());
    }
  }
  // Text compresses: the pages and the chart library have gzip copies.
  EXPECT_FALSE(FindAsset("/")->gzip.empty());
  EXPECT_FALSE(FindAsset("/vendor/lightweight-charts.mjs")->gzip.empty());
}

}  // namespace
}  // namespace mb::web
