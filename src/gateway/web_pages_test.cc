// Tests of the web pages' HTTP answers: content type, ETag and 304, gzip by
// Accept-Encoding, HEAD, the Content-Security-Policy.
#include "gateway/web_pages.h"

#include <gtest/gtest.h>

#include <string>

namespace mb::gateway {
namespace {

Request Get(std::string_view target, http::verb verb = http::verb::get) {
  Request req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1:8080");
  return req;
}

template <class Name>
std::string Header(const Response& res, Name name) {
  const auto it = res.find(name);
  return it == res.end() ? std::string() : std::string(it->value());
}

TEST(WebPagesTest, FindsThePagesOnly) {
  ASSERT_NE(FindPage("/"), nullptr);
  ASSERT_NE(FindPage("/admin/"), nullptr);
  EXPECT_EQ(FindPage("/api/v3/nope"), nullptr);
  EXPECT_EQ(FindPage("/index.html"), nullptr);
  EXPECT_TRUE(IsOperatorPage("/admin/"));
  EXPECT_TRUE(IsOperatorPage("/admin/admin.js"));
  EXPECT_FALSE(IsOperatorPage("/"));
  EXPECT_FALSE(IsOperatorPage("/app.js"));
}

TEST(WebPagesTest, TheTradingPage) {
  const web::Asset& page = *FindPage("/");
  const Response res = PageResponse(Get("/"), page);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(Header(res, http::field::content_type), "text/html; charset=utf-8");
  EXPECT_EQ(Header(res, http::field::etag), page.etag);
  EXPECT_EQ(Header(res, http::field::cache_control), "no-cache");
  EXPECT_EQ(Header(res, http::field::vary), "Accept-Encoding");
  EXPECT_EQ(Header(res, http::field::content_encoding), "");
  EXPECT_EQ(res.body(), page.body);
  EXPECT_EQ(Header(res, http::field::content_length), std::to_string(page.body.size()));
  const std::string csp = Header(res, "Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self' ws://127.0.0.1:8080 wss://127.0.0.1:8080;"),
            std::string::npos)
      << csp;
}

TEST(WebPagesTest, GzipWhenAccepted) {
  const web::Asset& page = *FindPage("/");
  Request req = Get("/");
  req.set(http::field::accept_encoding, "gzip, deflate, br");
  const Response res = PageResponse(req, page);
  EXPECT_EQ(Header(res, http::field::content_encoding), "gzip");
  EXPECT_EQ(res.body(), page.gzip);
  EXPECT_EQ(Header(res, http::field::etag), page.gzip_etag);
  req.set(http::field::accept_encoding, "gzip;q=0, identity");
  EXPECT_EQ(Header(PageResponse(req, page), http::field::content_encoding), "");
}

TEST(WebPagesTest, AcceptEncodingParsing) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(AcceptsGzip("x-gzip"));
}

TEST(WebPagesTest, IfNoneMatchAnswers304) {
  const web::Asset& page = *FindPage("/");
  Request req = Get("/");
  req.set(http::field::if_none_match, std::string("\"other\", ") + std::string(page.etag));
  Response res = PageResponse(req, page);
  EXPECT_EQ(res.result(), http::status::not_modified);
  EXPECT_TRUE(res.body().empty());
  EXPECT_EQ(Header(res, http::field::etag), page.etag);
  // The gzip copy is another representation with its own tag.
  req.set(http::field::accept_encoding, "gzip");
  EXPECT_EQ(PageResponse(req, page).result(), http::status::ok);
  req.set(http::field::if_none_match, std::string("W/") + std::string(page.gzip_etag));
  EXPECT_EQ(PageResponse(req, page).result(), http::status::not_modified);
}

TEST(WebPagesTest, HeadIsAnsweredAsGet) {
  // The server drops a HEAD answer's body after sizing it (server.h).
  const web::Asset& page = *FindPage("/vendor/lightweight-charts.mjs");
  const Response res = PageResponse(Get("/vendor/lightweight-charts.mjs", http::verb::head), page);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(Header(res, http::field::content_length), std::to_string(page.body.size()));
  EXPECT_EQ(Header(res, http::field::content_type), "text/javascript; charset=utf-8");
  // Only pages carry a policy; scripts are governed by the page's.
  EXPECT_EQ(Header(res, "Content-Security-Policy"), "");
}

TEST(WebPagesTest, HostIsNotEchoedUnlessPlain) {
  EXPECT_EQ(ContentSecurityPolicy("evil; script-src *").find("evil"), std::string::npos);
  EXPECT_NE(ContentSecurityPolicy("[::1]:9000").find("ws://[::1]:9000"), std::string::npos);
  EXPECT_NE(ContentSecurityPolicy("").find("connect-src 'self';"), std::string::npos);
}

}  // namespace
}  // namespace mb::gateway
