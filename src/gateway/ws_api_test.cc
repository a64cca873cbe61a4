// Tests of the WebSocket API's envelope, errors, authentication and sessions
// (ws_api.h), against a backend that records the calls it gets and a stand-in
// for the streams. The gateway's routing of these calls to the REST handlers
// is tested end to end in tests/gateway_test.cc.
#include "gateway/ws_api.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/hmac.h"
#include "support/key_store_test_support.h"

namespace mb::gateway {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr int64_t kNowMs = 1'700'000'000'000;

class FakeConn final : public WsConnection {
 public:
  FakeConn(uint64_t id, std::string target) : id_(id), target_(std::move(target)) {}
  bool Send(std::shared_ptr<const std::string> text, int64_t) override {
    sent.push_back(*text);
    return true;
  }
  using WsConnection::Send;
  void Close(uint16_t code, std::string) override { closed = code; }
  uint64_t id() const noexcept override { return id_; }
  const std::string& target() const noexcept override { return target_; }
  const std::string& remote() const noexcept override { return remote_; }

  std::vector<std::string> sent;
  uint16_t closed = 0;

 private:
  uint64_t id_;
  std::string target_;
  std::string remote_ = "10.0.0.1";
};

class FakeStreams final : public WsHandler {
 public:
  bool Accepts(const Request&) override { return true; }
  void OnOpen(const std::shared_ptr<WsConnection>&) override { ++opened; }
  void OnMessage(const std::shared_ptr<WsConnection>&, std::string_view text) override {
    messages.emplace_back(text);
  }
  void OnClose(const std::shared_ptr<WsConnection>&) override { ++closed; }
  int opened = 0, closed = 0;
  std::vector<std::string> messages;
};

// Answers an error with its status and JSON, a method without a path with
// its body, and any other call with {"served":"<path>"}; records each call.
class FakeBackend final : public WsApiBackend {
 public:
  void Call(WsApiCall call, WsApiDone done) override {
    WsApiAnswer a;
    a.used_weight = ++weight;
    if (call.error) {
      a.status = call.error->http_status;
      a.body = call.error->Json();
    } else if (call.method == nullptr || call.method->path.empty()) {
      a.body = call.body;
    } else {
      a.body = R"({"served":")" + std::string(call.method->path) + "\"}";
      if (call.method->name == "order.place") a.order_counts = std::make_pair(3u, 4u);
    }
    calls.push_back(std::move(call));
    done(std::move(a));
  }
  std::vector<WsApiCall> calls;
  uint32_t weight = 0;
};

std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// RFC 8032 section 7.1, test 1: the secret key; its public key below.
const std::string kEdSecret =
    Unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
const std::string kEdPublic =
    Unhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");

// Ed25519 signature (OpenSSL) of `message` with a raw 32-byte secret key.
std::string Ed25519Sign(const std::string& secret, std::string_view message) {
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(secret.data()),
      secret.size());
  EXPECT_NE(key, nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EXPECT_EQ(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key), 1);
  std::string sig(64, '\0');
  std::size_t len = sig.size();
  EXPECT_EQ(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                           reinterpret_cast<const unsigned char*>(message.data()), message.size()),
            1);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return sig;
}

// Binance's WebSocket API payload: params but the signature, sorted, k=v&k=v.
std::string Payload(const json::object& params) {
  std::map<std::string, std::string> sorted;
  for (const auto& kv : params) {
    if (kv.key() == "signature") continue;
    const json::value& v = kv.value();
    sorted[std::string(kv.key())] =
        v.is_string() ? std::string(v.get_string()) : json::serialize(v);
  }
  std::string out;
  for (const auto& [k, v] : sorted) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

class WsApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mb_ws_api_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    auto store = KeyStore::Open(dir_, 100);
    ASSERT_TRUE(store.ok()) << store.status().message();
    keys_ = std::move(store).value();
    ASSERT_TRUE(keys_->EnsureMasterKey().ok());
    auto account = testing::CreateAccount(*keys_, "alice", kNowMs);
    ASSERT_TRUE(account.ok());
    account_ = account->id;
    auto hmac = testing::CreateKey(*keys_, account_, kNowMs);
    ASSERT_TRUE(hmac.ok());
    hmac_ = *hmac;
    auto ed = testing::CreateEd25519Key(*keys_, account_, kEdPublic, kNowMs);
    ASSERT_TRUE(ed.ok()) << ed.status().message();
    ed_ = *ed;
    api_ = std::make_unique<WsApi>(*keys_, backend_, streams_,
                                   WsApiOptions{.weight_per_minute = 6000,
                                                .orders_per_10s = 50,
                                                .orders_per_day = 0,
                                                .max_request_bytes = 1024},
                                   [this] { return now_ms_ * 1000; });
    conn_ = std::make_shared<FakeConn>(1, "/ws-api/v3");
    api_->OnOpen(conn_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Sends `text`; the one answer it got, parsed.
  json::object Send(std::string_view text) {
    const std::size_t before = conn_->sent.size();
    api_->OnMessage(conn_, text);
    EXPECT_EQ(conn_->sent.size(), before + 1) << text;
    if (conn_->sent.size() != before + 1) return {};
    return json::parse(conn_->sent.back()).as_object();
  }
  json::object Request(std::string_view method, json::object params, json::value id = 7) {
    json::object req{{"id", id}, {"method", method}, {"params", std::move(params)}};
    return Send(json::serialize(req));
  }
  // params with apiKey, timestamp and an HMAC signature added.
  json::object SignHmac(json::object params, const std::string& secret = {}) {
    params["apiKey"] = hmac_.key;
    if (!params.contains("timestamp")) params["timestamp"] = now_ms_;
    params["signature"] = HmacSha256Hex(secret.empty() ? hmac_.secret : secret, Payload(params));
    return params;
  }
  json::object SignEd(json::object params) {
    params["apiKey"] = ed_.key;
    if (!params.contains("timestamp")) params["timestamp"] = now_ms_;
    params["signature"] = Base64Encode(Ed25519Sign(kEdSecret, Payload(params)));
    return params;
  }
  static int64_t Code(const json::object& a) {
    return a.at("error").at("code").to_number<int64_t>();
  }

  fs::path dir_;
  std::unique_ptr<KeyStore> keys_;
  AccountId account_{};
  ApiKey hmac_, ed_;
  FakeBackend backend_;
  FakeStreams streams_;
  int64_t now_ms_ = kNowMs;
  std::unique_ptr<WsApi> api_;
  std::shared_ptr<FakeConn> conn_;
};

TEST_F(WsApiTest, AnswersCarryTheIdStatusResultAndRateLimits) {
  json::object a = Request("ping", {}, "abc-1");
  EXPECT_EQ(a.at("id"), "abc-1");
  EXPECT_EQ(a.at("status"), 200);
  EXPECT_EQ(a.at("result"), (json::object{{"served", "/api/v3/ping"}}));
  EXPECT_EQ(a.at("rateLimits"), json::parse(R"([{"rateLimitType":"REQUEST_WEIGHT",
      "interval":"MINUTE","intervalNum":1,"limit":6000,"count":1}])"));
  ASSERT_EQ(backend_.calls.size(), 1u);
  EXPECT_EQ(backend_.calls[0].method->path, "/api/v3/ping");
  EXPECT_EQ(backend_.calls[0].remote, "10.0.0.1");

  // Orders show the ORDERS limits that are on (the daily one is off here).
  a = Request("order.place", SignHmac({{"symbol", "BTCUSDT"}}));
  EXPECT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("rateLimits").as_array().size(), 2u);
  EXPECT_EQ(a.at("rateLimits").at(1), json::parse(R"({"rateLimitType":"ORDERS",
      "interval":"SECOND","intervalNum":10,"limit":50,"count":3})"));

  for (const json::value& off : {json::value(false), json::value("false")}) {
    a = Request("time", {{"returnRateLimits", off}}, 9);
    EXPECT_EQ(a.at("id"), 9);
    EXPECT_FALSE(a.contains("rateLimits"));
  }
  a = Request("time", {{"returnRateLimits", "maybe"}});
  EXPECT_EQ(Code(a), -1130);
}

TEST_F(WsApiTest, ParamsReachTheEndpointEncodedAsItReadsThem) {
  Request("exchangeInfo", {{"symbols", json::array{"BTCUSDT", "ETHUSDT"}},
                           {"limit", 5},
                           {"flag", true},
                           {"text", "a b&c=d%"}});
  ASSERT_EQ(backend_.calls.size(), 1u);
  const Params& p = backend_.calls[0].params;
  EXPECT_EQ(p.Get("symbols"), R"(["BTCUSDT","ETHUSDT"])");
  EXPECT_EQ(p.Get("limit"), "5");
  EXPECT_EQ(p.Get("flag"), "true");
  EXPECT_EQ(p.Get("text"), "a b&c=d%");
}

TEST_F(WsApiTest, BadRequestsGetBinanceErrorsAndTheConnectionStaysUsable) {
  struct Case {
    std::string text;
    int64_t code;
    json::value id;
  };
  const Case cases[] = {
      {"{not json", -1135, nullptr},
      {"[1,2]", -1135, nullptr},
      {R"({"method":"ping"})", -1102, nullptr},
      {R"({"id":null,"method":"ping"})", -1102, nullptr},
      {R"({"id":1.5,"method":"ping"})", -1135, nullptr},
      {R"({"id":{},"method":"ping"})", -1135, nullptr},
      {R"({"id":3})", -1102, 3},
      {R"({"id":3,"method":7})", -1130, 3},
      {R"({"id":4,"method":"order.fly"})", -1130, 4},
      {R"({"id":5,"method":"ping","params":[1]})", -1135, 5},
      {R"({"id":6,"method":"depth","params":{"limit":1.5}})", -1130, 6},
      {R"({"id":6,"method":"depth","params":{"symbol":null}})", -1130, 6},
      {R"({"id":6,"method":"depth","params":{"symbol":{"a":1}}})", -1130, 6},
      {R"({"id":8,"method":"ping","params":{"x":")" + std::string(1100, 'x') + "\"}}", -1000,
       nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 80));
    const json::object a = Send(c.text);
    EXPECT_EQ(a.at("id"), c.id);
    EXPECT_EQ(a.at("status"), 400);
    EXPECT_EQ(Code(a), c.code) << json::serialize(a);
    EXPECT_FALSE(a.at("error").at("msg").as_string().empty());
    // Every refusal counts its weight against the IP, as REST's do.
    EXPECT_TRUE(a.contains("rateLimits"));
  }
  EXPECT_EQ(backend_.calls.size(), std::size(cases));
  EXPECT_EQ(conn_->closed, 0);
  EXPECT_EQ(Request("ping", {}).at("status"), 200);
}

TEST_F(WsApiTest, SignedMethodsNeedAValidSignatureInTheWindow) {
  json::object a = Request("order.place", SignHmac({{"symbol", "BTCUSDT"}, {"quantity", "1"}}));
  EXPECT_EQ(a.at("status"), 200);
  ASSERT_EQ(backend_.calls.size(), 1u);
  EXPECT_EQ(backend_.calls[0].account, account_);
  EXPECT_EQ(backend_.calls[0].api_key, hmac_.key);
  EXPECT_EQ(backend_.calls[0].params.Get("quantity"), "1");

  // Wrong secret, a changed parameter, no signature, no key, unknown key.
  EXPECT_EQ(Code(Request("order.place", SignHmac({{"symbol", "BTCUSDT"}}, "x"))), -1022);
  json::object changed = SignHmac({{"symbol", "BTCUSDT"}});
  changed["symbol"] = "ETHUSDT";
  EXPECT_EQ(Code(Request("order.place", changed)), -1022);
  EXPECT_EQ(Code(Request("order.status", {{"apiKey", hmac_.key}, {"timestamp", now_ms_}})), -1102);
  EXPECT_EQ(Code(Request("order.status", {{"timestamp", now_ms_}})), -1102);
  json::object unknown = SignHmac({});
  unknown["apiKey"] = std::string(64, 'Z');
  EXPECT_EQ(Code(Request("account.status", unknown)), -2015);
  // Outside recvWindow, or ahead of the server: -1021; a bad recvWindow -1130.
  EXPECT_EQ(Code(Request("account.status", SignHmac({{"timestamp", now_ms_ - 5001}}))), -1021);
  EXPECT_EQ(Code(Request("account.status", SignHmac({{"timestamp", now_ms_ + 1000}}))), -1021);
  EXPECT_EQ(
      Request("account.status", SignHmac({{"timestamp", now_ms_ - 9000}, {"recvWindow", 10000}}))
          .at("status"),
      200);
  EXPECT_EQ(Code(Request("account.status", SignHmac({{"recvWindow", 70000}}))), -1130);
  // A revoked key stops working.
  ASSERT_TRUE(testing::RevokeKey(*keys_, hmac_.key).ok());
  EXPECT_EQ(Code(Request("account.status", SignHmac({}))), -2015);
  // Public methods need nothing.
  EXPECT_EQ(Request("depth", {{"symbol", "BTCUSDT"}}).at("status"), 200);
}

TEST_F(WsApiTest, Ed25519KeysSignRequestsInBase64) {
  json::object a = Request("account.status", SignEd({}));
  EXPECT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(backend_.calls.back().api_key, ed_.key);
  json::object bad = SignEd({});
  bad["timestamp"] = now_ms_ - 1;
  EXPECT_EQ(Code(Request("account.status", bad)), -1022);
  // A hex HMAC signature is not an Ed25519 key's signature.
  json::object hex = SignEd({});
  hex["signature"] = HmacSha256Hex("secret", Payload(hex));
  EXPECT_EQ(Code(Request("account.status", hex)), -1022);
}

TEST_F(WsApiTest, SessionLogonLetsRequestsGoUnsignedUntilLogout) {
  json::object status = Request("session.status", {});
  EXPECT_EQ(status.at("status"), 200);
  EXPECT_TRUE(status.at("result").at("apiKey").is_null());
  EXPECT_EQ(status.at("result").at("connectedSince"), kNowMs);

  // HMAC keys cannot log on (Binance's -4056), nor can a bad signature.
  EXPECT_EQ(Code(Request("session.logon", SignHmac({}))), -4056);
  json::object forged = SignEd({});
  forged["signature"] = Base64Encode(std::string(64, 'x'));
  EXPECT_EQ(Code(Request("session.logon", forged)), -1022);
  EXPECT_EQ(Code(Request("account.status", {{"timestamp", now_ms_}})), -1102);

  now_ms_ += 10;
  json::object logon = Request("session.logon", SignEd({}));
  ASSERT_EQ(logon.at("status"), 200) << json::serialize(logon);
  EXPECT_EQ(logon.at("result").at("apiKey"), json::value(ed_.key));
  EXPECT_EQ(logon.at("result").at("authorizedSince"), kNowMs + 10);
  EXPECT_EQ(logon.at("result").at("serverTime"), kNowMs + 10);
  EXPECT_EQ(Request("session.status", {}).at("result").at("apiKey"), json::value(ed_.key));
  EXPECT_EQ(logon.at("result").at("returnRateLimits"), true);
  EXPECT_EQ(
      Request("session.status", {{"returnRateLimits", false}}).at("result").at("returnRateLimits"),
      false);

  // Logged on: a timestamp is all a signed method needs, still in its window.
  const std::size_t before = backend_.calls.size();
  json::object a = Request("order.place", {{"symbol", "BTCUSDT"}, {"timestamp", now_ms_}});
  EXPECT_EQ(a.at("status"), 200) << json::serialize(a);
  ASSERT_EQ(backend_.calls.size(), before + 1);
  EXPECT_EQ(backend_.calls.back().account, account_);
  EXPECT_EQ(backend_.calls.back().api_key, ed_.key);
  EXPECT_EQ(Code(Request("order.place", {{"symbol", "BTCUSDT"}})), -1102);
  EXPECT_EQ(Code(Request("order.place", {{"timestamp", now_ms_ - 6000}})), -1021);
  // A request that brings its own signature is checked as such.
  EXPECT_EQ(Code(Request("account.status", SignHmac({}, "wrong"))), -1022);

  // Another connection has its own session.
  auto other = std::make_shared<FakeConn>(2, "/ws-api/v3?x=1");
  api_->OnOpen(other);
  api_->OnMessage(other, R"({"id":1,"method":"account.status","params":{"timestamp":1}})");
  ASSERT_EQ(other->sent.size(), 1u);
  EXPECT_EQ(json::parse(other->sent[0]).at("error").at("code"), -1102);

  json::object logout = Request("session.logout", {});
  EXPECT_EQ(logout.at("status"), 200);
  EXPECT_TRUE(logout.at("result").at("apiKey").is_null());
  EXPECT_EQ(Code(Request("account.status", {{"timestamp", now_ms_}})), -1102);

  // Revoking the key ends what a session may do.
  ASSERT_EQ(Request("session.logon", SignEd({})).at("status"), 200);
  ASSERT_TRUE(testing::RevokeKey(*keys_, ed_.key).ok());
  EXPECT_EQ(Code(Request("account.status", {{"timestamp", now_ms_}})), -2015);
}

TEST_F(WsApiTest, StreamsAndUserDataSubscriptionsGoToTheStreams) {
  EXPECT_EQ(streams_.opened, 1);
  const std::string sub = R"({"id":1,"method":"userDataStream.subscribe.signature","params":{}})";
  api_->OnMessage(conn_, sub);
  EXPECT_TRUE(conn_->sent.empty());
  ASSERT_EQ(streams_.messages.size(), 1u);
  EXPECT_EQ(streams_.messages[0], sub);

  auto market = std::make_shared<FakeConn>(3, "/ws/btcusdt@trade");
  api_->OnOpen(market);
  api_->OnMessage(market, R"({"id":1,"method":"ping"})");
  EXPECT_TRUE(market->sent.empty());
  EXPECT_EQ(streams_.messages.size(), 2u);
  api_->OnClose(market);
  api_->OnClose(conn_);
  EXPECT_EQ(streams_.opened, 2);
  EXPECT_EQ(streams_.closed, 2);
}

TEST(WsApiMethodTest, EachMethodIsServedByItsRestTwin) {
  const std::map<std::string, std::pair<http::verb, std::string>> expected = {
      {"order.place", {http::verb::post, "/api/v3/order"}},
      {"order.test", {http::verb::post, "/api/v3/order/test"}},
      {"order.status", {http::verb::get, "/api/v3/order"}},
      {"order.cancel", {http::verb::delete_, "/api/v3/order"}},
      {"order.cancelReplace", {http::verb::post, "/api/v3/order/cancelReplace"}},
      {"order.amend.keepPriority", {http::verb::put, "/api/v3/order/amend/keepPriority"}},
      {"openOrders.status", {http::verb::get, "/api/v3/openOrders"}},
      {"openOrders.cancelAll", {http::verb::delete_, "/api/v3/openOrders"}},
      {"allOrders", {http::verb::get, "/api/v3/allOrders"}},
      {"myTrades", {http::verb::get, "/api/v3/myTrades"}},
      {"account.status", {http::verb::get, "/api/v3/account"}},
  };
  for (const auto& [name, route] : expected) {
    const WsApiMethod* m = FindWsApiMethod(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->verb, route.first) << name;
    EXPECT_EQ(m->path, route.second) << name;
    EXPECT_TRUE(m->is_signed) << name;
  }
  EXPECT_FALSE(FindWsApiMethod("ping")->is_signed);
  EXPECT_EQ(FindWsApiMethod("order.Place"), nullptr);
}

}  // namespace
}  // namespace mb::gateway
