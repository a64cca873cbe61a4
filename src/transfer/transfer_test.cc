// Deposit addresses and the calls between venues: what is accepted, what is
// refused and why; a link to a venue of several servers follows the one
// whose ping says primary.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/event.h"
#include "engine/market.h"
#include "fanout/stage.h"
#include "transfer/address.h"
#include "transfer/dispatcher.h"
#include "transfer/protocol.h"

namespace mb::transfer {
namespace {

TEST(AddressTest, RoundTripsAndNamesVenueAccountAsset) {
  const std::string a = MakeAddress("beta", AccountId{42}, "BTC");
  auto p = ParseAddress(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->venue, "beta");
  EXPECT_EQ(p->account, AccountId{42});
  EXPECT_EQ(p->asset, "BTC");
  EXPECT_EQ(a.rfind("beta:42:BTC:", 0), 0u) << a;
}

TEST(AddressTest, EveryOneCharacterTypoIsRefused) {
  const std::string a = MakeAddress("beta", AccountId{42}, "BTC");
  const std::string alphabet = "0123456789abcdefBTCEHUSDTx:-_";
  int refused = 0, tried = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (char c : alphabet) {
      if (c == a[i]) continue;
      std::string typo = a;
      typo[i] = c;
      ++tried;
      if (!ParseAddress(typo).ok()) ++refused;
    }
  }
  EXPECT_EQ(refused, tried);
}

TEST(AddressTest, RefusesMalformedAddresses) {
  for (const char* bad : {"", "beta", "beta:42:BTC", "beta:x:BTC:00000000", "beta:042:BTC:00000000",
                          ":42:BTC:00000000", "beta:42::00000000", "be ta:42:BTC:00000000",
                          "beta:99999999999:BTC:00000000"}) {
    EXPECT_FALSE(ParseAddress(bad).ok()) << bad;
  }
  const std::string good = MakeAddress("beta", AccountId{7}, "ETH");
  EXPECT_FALSE(ParseAddress(good + "0").ok());
  EXPECT_FALSE(ParseAddress(std::string(70, 'a')).ok());
}

TEST(ProtocolTest, SignatureDependsOnEveryPart) {
  const std::string s = Sign("secret-0123456789", "1700000000000", "POST", kDeliverTarget, "{}");
  EXPECT_EQ(s.size(), 64u);
  EXPECT_TRUE(SignatureMatches(s, s));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456780", "1700000000000", "POST", kDeliverTarget, "{}")));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456789", "1700000000001", "POST", kDeliverTarget, "{}")));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456789", "1700000000000", "POST", kDeliverTarget, "[]")));
  EXPECT_FALSE(SignatureMatches(s, s.substr(1)));
}

TEST(ProtocolTest, DeliveriesAndResultsRoundTrip) {
  const std::vector<Delivery> d = {{7, "BTC", "0.5", "beta:1:BTC:00000000"},
                                   {8, "USDT", "10", "beta:2:USDT:00000000"}};
  auto back = DecodeDeliveries(EncodeDeliveries(d));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].id, 8u);
  EXPECT_EQ((*back)[1].coin, "USDT");
  EXPECT_EQ((*back)[0].address, "beta:1:BTC:00000000");

  std::vector<DeliveryResult> r(3);
  r[0] = {7, Outcome::kCredited, 991, engine::RefundReason::kRefused, ""};
  r[1] = {8, Outcome::kRejected, 0, engine::RefundReason::kInvalidAddress, "no such account"};
  r[2] = {9, Outcome::kRetry, 0, engine::RefundReason::kRefused, "busy"};
  auto rb = DecodeResults(EncodeResults(r));
  ASSERT_TRUE(rb.ok()) << rb.status().message();
  ASSERT_EQ(rb->size(), 3u);
  EXPECT_EQ((*rb)[0].outcome, Outcome::kCredited);
  EXPECT_EQ((*rb)[0].deposit_id, 991u);
  EXPECT_EQ((*rb)[1].reason, engine::RefundReason::kInvalidAddress);
  EXPECT_EQ((*rb)[1].msg, "no such account");
  EXPECT_EQ((*rb)[2].outcome, Outcome::kRetry);
}

TEST(ProtocolTest, RefusesBadBodies) {
  for (const char* bad : {"", "not json", "[]", "{}", R"({"transfers":{}})", R"({"transfers":[]})",
                          R"({"transfers":[1]})",
                          R"({"transfers":[{"id":0,"coin":"BTC","amount":"1","address":"a"}]})",
                          R"({"transfers":[{"id":-3,"coin":"BTC","amount":"1","address":"a"}]})",
                          R"({"transfers":[{"id":3,"coin":"BTC","amount":1,"address":"a"}]})"}) {
    EXPECT_FALSE(DecodeDeliveries(bad).ok()) << bad;
  }
  // A destination cannot void: an answer saying so is a refusal.
  auto r = DecodeResults(R"({"results":[{"id":3,"status":"REJECTED","reason":"VOIDED"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].reason, engine::RefundReason::kRefused);
  EXPECT_FALSE(DecodeResults(R"({"results":[{"id":3,"status":"CREDITED"}]})").ok());
  EXPECT_FALSE(DecodeResults(R"({"results":[{"id":3,"status":"MAYBE"}]})").ok());
}

TEST(ProtocolTest, ParsesListsOfUrlsElementByElement) {
  auto one = ParseHttpUrls("http://10.0.0.2:8080", "url", "the venue's API");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  auto two = ParseHttpUrls("http://10.0.0.2:8080 , 10.0.0.3:8081/", "url", "the venue's API");
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].first, "10.0.0.3");
  EXPECT_EQ((*two)[1].second, "8081");
  auto bad = ParseHttpUrls("http://10.0.0.2:8080,https://10.0.0.3:8080", "url", "the venue's API");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "url \"https://10.0.0.3:8080\" is not http://HOST:PORT (the venue's API)");
  std::vector<bool> tls;
  auto secure = ParseHttpUrls("http://10.0.0.2:8080,https://10.0.0.3:8443", "url", "", &tls);
  ASSERT_TRUE(secure.ok()) << secure.status().message();
  EXPECT_EQ(tls, (std::vector<bool>{false, true}));
  EXPECT_EQ((*secure)[1].second, "8443");
  EXPECT_FALSE(ParseHttpUrls("https://10.0.0.3:8443/api", "url", "", &tls).ok());
  EXPECT_FALSE(ParseHttpUrls("http://a:1,,http://b:1", "url", "").ok());
  EXPECT_FALSE(ParseHttpUrls("", "url", "").ok());
  auto twice = ParseHttpUrls("http://a:1,a:1", "url", "");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos);
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

template <class Pred>
bool Eventually(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// One server of a venue, a primary or a standby, on a thread of its own:
// GET /api/v3/ping says its role in X-MB-Role; a delivery is answered RETRY
// for every transfer by the primary (so the source submits nothing), 503 by
// a standby (as a standby's gateway answers).
class FakeVenue {
 public:
  explicit FakeVenue(bool is_primary) : primary(is_primary) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeVenue() { Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Killed: the listener and every connection close.
  void Stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      for (const auto& w : sessions_) {
        if (auto s = w.lock()) s->stream.socket().close(ec);
      }
    });
    asio::post(io_, [this] { io_.stop(); });
    thread_.join();
  }

  std::atomic<bool> primary;
  std::atomic<int> pings{0};
  std::atomic<int> deliveries{0};

 private:
  struct Session {
    explicit Session(tcp::socket s) : stream(std::move(s)) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto s = std::make_shared<Session>(std::move(socket));
      sessions_.push_back(s);
      Read(s);
      Accept();
    });
  }

  void Read(const std::shared_ptr<Session>& s) {
    s->request = {};
    http::async_read(
        s->stream, s->buffer, s->request, [this, s](beast::error_code ec, std::size_t) {
          if (ec) return;
          s->response = http::response<http::string_body>(http::status::ok, 11);
          s->response.keep_alive(s->request.keep_alive());
          if (s->request.target() == kPingTarget) {
            ++pings;
            s->response.set(kRoleHeader, primary.load() ? kRolePrimary : kRoleStandby);
            s->response.body() = "{}";
          } else if (primary.load()) {
            ++deliveries;
            std::vector<DeliveryResult> results;
            if (auto d = DecodeDeliveries(s->request.body()); d.ok()) {
              for (const Delivery& one : *d) {
                results.push_back(
                    {one.id, Outcome::kRetry, 0, engine::RefundReason::kRefused, "busy"});
              }
            }
            s->response.body() = EncodeResults(results);
          } else {
            ++deliveries;
            s->response.result(http::status::service_unavailable);
            s->response.body() = R"({"code":-1000,"msg":"This server is a read replica"})";
          }
          s->response.prepare_payload();
          http::async_write(s->stream, s->response, [this, s](beast::error_code ec2, std::size_t) {
            if (ec2 || !s->response.keep_alive()) return;
            Read(s);
          });
        });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  uint16_t port_ = 0;
  std::vector<std::weak_ptr<Session>> sessions_;  // io thread only
  std::thread thread_;
};

// A link to "beta", a venue of two servers, with one transfer pending to it.
class VenueFailoverTest : public ::testing::Test {
 protected:
  std::unique_ptr<Dispatcher> Make(std::string urls) {
    engine::AssetSpec btc;
    btc.symbol = "BTC";
    config_.assets.push_back(btc);
    DispatchOptions o;
    o.venue = "alpha";
    o.venues = {VenueLink{"beta", std::move(urls), "shared-secret-0123456789", ""}};
    o.mode = DispatchMode::kSequential;
    o.retry_max_ms = 200;
    o.timeout_ms = 2000;
    auto d = Dispatcher::Create(config_, std::move(o));
    EXPECT_TRUE(d.ok()) << d.status().message();
    if (!d.ok()) return nullptr;
    fanout::Batch batch;
    const std::string address = MakeAddress("beta", AccountId{42}, "BTC");
    batch.events.emplace_back(
        Sequence{7}, 1,
        engine::TransferHeld{TransferId{7}, AccountId{1}, AssetId{0}, Amount{100}, Amount{0},
                             TransferRef::From("w-7"), TransferAddress::From(address)});
    (*d)->OnBatch(batch, true);
    // No answer of the fake venue leads to a ResolveTransfer, so the link
    // never submits: no exchange behind it.
    (*d)->Start(nullptr);
    return std::move(*d);
  }
  static std::string Primary(const Dispatcher& d) {
    const boost::json::value h = boost::json::parse(d.HealthJson());
    return std::string(h.at("links").at("beta").at("primary").as_string());
  }

  engine::EngineConfig config_;
};

TEST_F(VenueFailoverTest, DeliversToTheServerWhosePingSaysPrimaryAndFollowsIt) {
  FakeVenue a(false), b(true);
  auto d = Make(a.url() + "," + b.url());
  ASSERT_TRUE(d);
  ASSERT_TRUE(Eventually([&] { return b.deliveries.load() >= 2; }));
  EXPECT_EQ(a.deliveries.load(), 0);  // probed first: a standby gets no call
  EXPECT_EQ(Primary(*d), b.url());
  // The roles swap: b's next answer is 503, a probe finds a, the call goes
  // there at once.
  a.primary = true;
  b.primary = false;
  ASSERT_TRUE(Eventually([&] { return a.deliveries.load() >= 2; }));
  EXPECT_EQ(Primary(*d), a.url());
  // a dies: the connection fails, the probe finds b again.
  b.primary = true;
  a.Stop();
  const int before = b.deliveries.load();
  ASSERT_TRUE(Eventually([&] { return b.deliveries.load() >= before + 2; }));
  EXPECT_EQ(Primary(*d), b.url());
  d->Stop();
}

TEST_F(VenueFailoverTest, WithNoPrimaryTheLinkKeepsItsURLAndRetries) {
  FakeVenue a(false), b(false);
  auto d = Make(a.url() + "," + b.url());
  ASSERT_TRUE(d);
  ASSERT_TRUE(Eventually([&] { return a.deliveries.load() >= 2; }));
  EXPECT_EQ(b.deliveries.load(), 0);
  EXPECT_EQ(Primary(*d), a.url());
  const boost::json::value h = boost::json::parse(d->HealthJson());
  EXPECT_GE(h.at("links").at("beta").at("errors").to_number<uint64_t>(), 1u);
  d->Stop();
}

TEST(DispatcherCreateTest, RefusesAListWithABadURL) {
  engine::EngineConfig config;
  DispatchOptions o;
  o.venue = "alpha";
  o.venues = {
      VenueLink{"beta", "http://127.0.0.1:1,http://127.0.0.1:x", "shared-secret-0123456789", ""}};
  auto d = Dispatcher::Create(config, std::move(o));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("venues.beta.url \"http://127.0.0.1:x\""), std::string::npos)
      << d.status().message();
}

}  // namespace
}  // namespace mb::transfer
