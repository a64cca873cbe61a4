// The gateway end to end in one process: a real Exchange (journal in a temp
// directory), the Gateway on an ephemeral port, and a plain HTTP client.
// Checks the Binance error paths, authentication, the operator API, rate
// limits, back-pressure answers, order answers and a restart.
#include "gateway/gateway.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "app/config.h"
#include "app/demo_config.h"
#include "exchange/exchange.h"
#include "gateway/auth.h"

namespace mb {
namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = boost::asio::ip::tcp;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  json::value Json() const { return json::parse(body); }
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Node {
 public:
  explicit Node(fs::path dir, gateway::GatewayOptions go = {}) : dir_(std::move(dir)), go_(go) {
    Start();
  }
  ~Node() { Stop(); }

  void Start() {
    auto cfg = app::ParseFullConfig(app::kDemoConfigToml, "demo");
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    cfg->runtime.data_dir = dir_.string();
    cfg->runtime.journal.policy = journal::FsyncPolicy::kNone;
    config_ = cfg->engine;
    go_.server.port = 0;
    go_.server.io_threads = 2;
    auto gw = gateway::Gateway::Create(cfg->engine, dir_, go_);
    ASSERT_TRUE(gw.ok()) << gw.status().message();
    gw_ = std::move(gw).value();
    exchange::ExchangeOptions o = app::ExchangeOptionsFrom(*cfg);
    o.log = [](std::string_view) {};
    gw_->Wire(&o);
    auto ex = exchange::Exchange::Open(std::move(o));
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    ex_ = std::move(ex).value();
    ASSERT_TRUE(gw_->Start(ex_.get()).ok());
    std::ifstream in(gw_->admin_token_path());
    std::getline(in, token_);
    ASSERT_FALSE(token_.empty());
  }
  void Stop() {
    if (!gw_) return;
    gw_->StopServer();
    (void)ex_->Close();
    gw_->Stop();
    gw_.reset();
    ex_.reset();
  }
  // Closes the exchange but keeps the server answering.
  void CloseExchange() { (void)ex_->Close(); }

  Reply Request(http::verb method, const std::string& target, std::string body = {},
                std::map<std::string, std::string> headers = {}) {
    boost::asio::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), gw_->port()));
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (auto& [k, v] : headers) req.set(k, v);
    if (!body.empty()) {
      if (req.find(http::field::content_type) == req.end()) {
        req.set(http::field::content_type, "application/x-www-form-urlencoded");
      }
      req.body() = std::move(body);
    }
    req.prepare_payload();
    http::write(sock, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(sock, buf, res);
    Reply r;
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
    return r;
  }
  Reply Admin(http::verb method, const std::string& path, const std::string& body = {}) {
    return Request(method, "/admin/v1/" + path, body,
                   {{"X-MB-ADMIN-TOKEN", token_}, {"Content-Type", "application/json"}});
  }

  struct Keys {
    uint32_t account = 0;
    std::string key, secret;
  };
  Keys NewAccount(const std::string& name) {
    Reply a = Admin(http::verb::post, "accounts", fmt::format(R"({{"name":"{}"}})", name));
    EXPECT_EQ(a.status, 200) << a.body;
    Keys k;
    k.account = static_cast<uint32_t>(a.Json().at("accountId").as_int64());
    Reply r = Admin(http::verb::post, fmt::format("accounts/{}/apiKeys", k.account));
    EXPECT_EQ(r.status, 200) << r.body;
    k.key = std::string(r.Json().at("apiKey").as_string());
    k.secret = std::string(r.Json().at("secretKey").as_string());
    return k;
  }
  Reply Deposit(uint32_t account, const std::string& asset, const std::string& amount,
                const std::string& ref) {
    return Admin(http::verb::post, "deposits",
                 fmt::format(R"({{"accountId":{},"asset":"{}","amount":"{}","ref":"{}"}})", account,
                             asset, amount, ref));
  }
  // A signed call: GET/DELETE in the query, POST/PUT in the body.
  Reply Signed(http::verb method, const std::string& path, const Keys& k, std::string params,
               int64_t timestamp = 0, const std::string& secret_override = {}) {
    if (!params.empty()) params += '&';
    params += fmt::format("timestamp={}&recvWindow=5000", timestamp ? timestamp : NowMs());
    const std::string sig =
        gateway::HmacSha256Hex(secret_override.empty() ? k.secret : secret_override, params);
    params += "&signature=" + sig;
    if (method == http::verb::post || method == http::verb::put) {
      return Request(method, path, params, {{"X-MBX-APIKEY", k.key}});
    }
    return Request(method, path + "?" + params, {}, {{"X-MBX-APIKEY", k.key}});
  }

  const engine::EngineConfig& config() const { return config_; }

 private:
  fs::path dir_;
  gateway::GatewayOptions go_;
  engine::EngineConfig config_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::unique_ptr<exchange::Exchange> ex_;
  std::string token_;
};

class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("mb-gateway-test-{}-{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string Balance(const Reply& account, const std::string& asset, const char* field) {
  const json::value v = account.Json();
  if (!v.is_object() || !v.as_object().contains("balances")) return "no balances: " + account.body;
  for (const json::value& b : v.at("balances").as_array()) {
    if (b.at("asset").as_string() == asset) return std::string(b.at(field).as_string());
  }
  return "missing";
}

TEST_F(GatewayTest, PublicEndpointsAndRoutingErrors) {
  Node n(dir_);
  Reply ping = n.Request(http::verb::get, "/api/v3/ping");
  EXPECT_EQ(ping.status, 200);
  EXPECT_EQ(ping.body, "{}");
  EXPECT_EQ(ping.headers["Content-Type"].rfind("application/json", 0), 0u);
  Reply time = n.Request(http::verb::get, "/api/v3/time");
  EXPECT_NEAR(static_cast<double>(time.Json().at("serverTime").as_int64()),
              static_cast<double>(NowMs()), 5000.0);
  Reply info = n.Request(http::verb::get, "/api/v3/exchangeInfo");
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(info.Json().at("symbols").as_array().size(), 3u);

  Reply unknown = n.Request(http::verb::get, "/api/v3/depth?symbol=NOPE");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.Json().at("code").as_int64(), -1121);
  Reply missing = n.Request(http::verb::get, "/api/v3/depth");
  EXPECT_EQ(missing.Json().at("code").as_int64(), -1102);
  Reply bad_limit = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT&limit=abc");
  EXPECT_EQ(bad_limit.Json().at("code").as_int64(), -1100);
  Reply bad_interval = n.Request(http::verb::get, "/api/v3/klines?symbol=BTCUSDT&interval=7m");
  EXPECT_EQ(bad_interval.Json().at("code").as_int64(), -1120);
  Reply nf = n.Request(http::verb::get, "/api/v3/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(nf.Json().is_object());
  Reply wrong_method = n.Request(http::verb::post, "/api/v3/depth");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_TRUE(wrong_method.Json().as_object().contains("code"));
  Reply dup = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT&symbol=ETHUSDT");
  EXPECT_EQ(dup.Json().at("code").as_int64(), -1101);
  Reply depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT&limit=5");
  ASSERT_EQ(depth.status, 200);
  EXPECT_EQ(depth.Json().at("bids").as_array().size(), 0u);
  EXPECT_FALSE(depth.Json().as_object().contains("code"));
}

TEST_F(GatewayTest, AdminTokenAccountsKeysAndIdempotentTransfers) {
  Node n(dir_);
  EXPECT_EQ(n.Request(http::verb::get, "/admin/v1/health").status, 401);
  EXPECT_EQ(
      n.Request(http::verb::get, "/admin/v1/health", {}, {{"X-MB-ADMIN-TOKEN", "wrong"}}).status,
      401);
  EXPECT_EQ(n.Admin(http::verb::get, "health").status, 200);
  EXPECT_EQ(n.Admin(http::verb::post, "accounts", "not json").status, 400);
  EXPECT_EQ(n.Admin(http::verb::post, "accounts", R"({"nome":"x"})").status, 400);

  auto alice = n.NewAccount("alice");
  EXPECT_EQ(alice.account, 1u);
  EXPECT_EQ(n.Admin(http::verb::post, "accounts", R"({"name":"alice"})").status, 400);
  EXPECT_EQ(alice.key.size(), 64u);

  Reply d1 = n.Deposit(alice.account, "USDT", "1000.5", "bank-1");
  ASSERT_EQ(d1.status, 200) << d1.body;
  EXPECT_FALSE(d1.Json().at("duplicate").as_bool());
  Reply d2 = n.Deposit(alice.account, "USDT", "1000.5", "bank-1");
  ASSERT_EQ(d2.status, 200) << d2.body;
  EXPECT_TRUE(d2.Json().at("duplicate").as_bool());
  EXPECT_EQ(d2.Json().at("transferId"), d1.Json().at("transferId"));
  EXPECT_EQ(n.Deposit(alice.account, "DOGE", "1", "x").status, 400);
  EXPECT_EQ(n.Deposit(alice.account, "USDT", "-1", "x").status, 400);
  EXPECT_EQ(n.Deposit(alice.account, "USDT", "0.000000001", "x").status, 400);
  EXPECT_EQ(n.Deposit(99, "USDT", "1", "x").status, 400);

  Reply w = n.Admin(http::verb::post, "withdrawals",
                    R"({"accountId":1,"asset":"USDT","amount":"5000","ref":"w-1"})");
  EXPECT_EQ(w.status, 400);
  EXPECT_EQ(w.Json().at("code").as_int64(), -2010);
  Reply w2 = n.Admin(http::verb::post, "withdrawals",
                     R"({"accountId":1,"asset":"USDT","amount":"0.5","ref":"w-2"})");
  EXPECT_EQ(w2.status, 200) << w2.body;

  Reply acc = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  ASSERT_EQ(acc.status, 200) << acc.body;
  EXPECT_EQ(Balance(acc, "USDT", "free"), "1000.00000000");
  EXPECT_EQ(Balance(acc, "BTC", "free"), "0.00000000");

  Reply revoke = n.Admin(http::verb::delete_, "apiKeys/" + alice.key);
  EXPECT_EQ(revoke.status, 200);
  Reply after = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(after.status, 401);
  EXPECT_EQ(after.Json().at("code").as_int64(), -2015);
  EXPECT_EQ(n.Admin(http::verb::delete_, "apiKeys/nosuchkey").status, 404);
}

TEST_F(GatewayTest, SignatureTimestampAndKeyErrors) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  Reply no_key = n.Request(http::verb::get, "/api/v3/account?timestamp=1&signature=00");
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.Json().at("code").as_int64(), -2014);
  Reply bad_key = n.Request(http::verb::get, "/api/v3/account?timestamp=1&signature=00", {},
                            {{"X-MBX-APIKEY", "nosuchkey"}});
  EXPECT_EQ(bad_key.Json().at("code").as_int64(), -2015);
  Reply bad_sig = n.Signed(http::verb::get, "/api/v3/account", alice, "", 0, "wrongsecret");
  EXPECT_EQ(bad_sig.Json().at("code").as_int64(), -1022);
  Reply stale = n.Signed(http::verb::get, "/api/v3/account", alice, "", NowMs() - 60'000);
  EXPECT_EQ(stale.Json().at("code").as_int64(), -1021);
  Reply future = n.Signed(http::verb::get, "/api/v3/account", alice, "", NowMs() + 5'000);
  EXPECT_EQ(future.Json().at("code").as_int64(), -1021);
  Reply no_sig = n.Request(http::verb::get, fmt::format("/api/v3/account?timestamp={}", NowMs()),
                           {}, {{"X-MBX-APIKEY", alice.key}});
  EXPECT_EQ(no_sig.Json().at("code").as_int64(), -1102);
  // A tampered parameter after signing.
  std::string params = fmt::format("symbol=BTCUSDT&timestamp={}", NowMs());
  const std::string sig = gateway::HmacSha256Hex(alice.secret, params);
  Reply tampered =
      n.Request(http::verb::get,
                "/api/v3/openOrders?symbol=ETHUSDT&timestamp=" +
                    params.substr(params.find("timestamp=") + 10) + "&signature=" + sig,
                {}, {{"X-MBX-APIKEY", alice.key}});
  EXPECT_EQ(tampered.Json().at("code").as_int64(), -1022);
  Reply ok = n.Request(http::verb::get, "/api/v3/openOrders?" + params + "&signature=" + sig, {},
                       {{"X-MBX-APIKEY", alice.key}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, "[]");
}

TEST_F(GatewayTest, OrdersFillsBalancesAndCancels) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);

  // Refused before the engine: filters, balance, order/test.
  Reply tick = n.Signed(http::verb::post, "/api/v3/order", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                        "price=30000.001");
  EXPECT_EQ(tick.Json().at("code").as_int64(), -1013) << tick.body;
  EXPECT_EQ(tick.Json().at("msg").as_string(), "Filter failure: PRICE_FILTER");
  Reply places = n.Signed(http::verb::post, "/api/v3/order", alice,
                          "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                          "price=30000.000000001");
  EXPECT_EQ(places.Json().at("code").as_int64(), -1111) << places.body;
  Reply poor = n.Signed(http::verb::post, "/api/v3/order", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=10&"
                        "price=30000");
  EXPECT_EQ(poor.Json().at("code").as_int64(), -2010);
  EXPECT_EQ(poor.Json().at("msg").as_string(),
            "Account has insufficient balance for requested action.");
  Reply test = n.Signed(http::verb::post, "/api/v3/order/test", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                        "price=30000");
  EXPECT_EQ(test.status, 200);
  EXPECT_EQ(test.body, "{}");
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrders", alice, "").body, "[]");

  // Alice rests a buy; Bob sells into it.
  Reply buy = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newClientOrderId=alice-1&newOrderRespType=RESULT");
  ASSERT_EQ(buy.status, 200) << buy.body;
  EXPECT_EQ(buy.Json().at("status").as_string(), "NEW");
  EXPECT_EQ(buy.Json().at("clientOrderId").as_string(), "alice-1");
  const int64_t buy_id = buy.Json().at("orderId").as_int64();
  Reply dup = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newClientOrderId=alice-1");
  // Idempotent re-submission: the first order, not a second one.
  ASSERT_EQ(dup.status, 200) << dup.body;
  EXPECT_EQ(dup.Json().at("orderId").as_int64(), buy_id);

  Reply get =
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=alice-1");
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.Json().at("orderId").as_int64(), buy_id);
  EXPECT_EQ(get.Json().at("origQty").as_string(), "0.10000000");

  Reply sell = n.Signed(http::verb::post, "/api/v3/order", bob,
                        "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.04&newOrderRespType=FULL");
  ASSERT_EQ(sell.status, 200) << sell.body;
  const json::value s = sell.Json();
  EXPECT_EQ(s.at("status").as_string(), "FILLED");
  EXPECT_EQ(s.at("executedQty").as_string(), "0.04000000");
  EXPECT_EQ(s.at("cummulativeQuoteQty").as_string(), "1200.00000000");
  ASSERT_EQ(s.at("fills").as_array().size(), 1u);
  EXPECT_EQ(s.at("fills").as_array()[0].at("price").as_string(), "30000.00000000");
  EXPECT_EQ(s.at("fills").as_array()[0].at("commission").as_string(), "1.20000000");
  EXPECT_EQ(s.at("fills").as_array()[0].at("commissionAsset").as_string(), "USDT");

  // Balances from both sides, fees 10 bps.
  Reply a = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(a, "BTC", "free"), "0.03996000");
  EXPECT_EQ(Balance(a, "USDT", "free"), "97000.00000000");
  EXPECT_EQ(Balance(a, "USDT", "locked"), "1800.00000000");
  Reply b = n.Signed(http::verb::get, "/api/v3/account", bob, "");
  EXPECT_EQ(Balance(b, "BTC", "free"), "9.96000000");
  EXPECT_EQ(Balance(b, "USDT", "free"), "1198.80000000");

  Reply partial = n.Signed(http::verb::get, "/api/v3/order", alice,
                           fmt::format("symbol=BTCUSDT&orderId={}", buy_id));
  EXPECT_EQ(partial.Json().at("status").as_string(), "PARTIALLY_FILLED");
  EXPECT_EQ(partial.Json().at("executedQty").as_string(), "0.04000000");

  Reply trades = n.Signed(http::verb::get, "/api/v3/myTrades", alice, "symbol=BTCUSDT");
  ASSERT_EQ(trades.Json().as_array().size(), 1u) << trades.body;
  EXPECT_TRUE(trades.Json().as_array()[0].at("isMaker").as_bool());
  EXPECT_TRUE(trades.Json().as_array()[0].at("isBuyer").as_bool());
  Reply pub = n.Request(http::verb::get, "/api/v3/trades?symbol=BTCUSDT");
  ASSERT_EQ(pub.Json().as_array().size(), 1u);
  EXPECT_EQ(pub.Json().as_array()[0].at("qty").as_string(), "0.04000000");
  Reply depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT");
  ASSERT_EQ(depth.Json().at("bids").as_array().size(), 1u);
  EXPECT_EQ(depth.Json().at("bids").as_array()[0].as_array()[1].as_string(), "0.06000000");

  // Cancels.
  Reply unknown =
      n.Signed(http::verb::delete_, "/api/v3/order", alice, "symbol=BTCUSDT&orderId=999999");
  EXPECT_EQ(unknown.Json().at("code").as_int64(), -2011);
  Reply cancel = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                          fmt::format("symbol=BTCUSDT&orderId={}", buy_id));
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(cancel.Json().at("status").as_string(), "CANCELED");
  Reply a2 = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(a2, "USDT", "locked"), "0.00000000");
  EXPECT_EQ(Balance(a2, "USDT", "free"), "98800.00000000");
  Reply none = n.Signed(http::verb::delete_, "/api/v3/openOrders", alice, "symbol=BTCUSDT");
  EXPECT_EQ(none.Json().at("code").as_int64(), -2011);
  Reply all = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(all.Json().as_array().size(), 1u) << all.body;
  EXPECT_EQ(all.Json().as_array()[0].at("status").as_string(), "CANCELED");

  // ACK answers at sequencing, with the order id.
  Reply ack = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                       "price=29000&newOrderRespType=ACK");
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_GT(ack.Json().at("orderId").as_int64(), buy_id);
  EXPECT_FALSE(ack.Json().as_object().contains("status"));
}

TEST_F(GatewayTest, RateLimitAnswers429WithRetryAfter) {
  gateway::GatewayOptions go;
  go.key_limit.weight_per_minute = 60;
  go.key_limit.burst = 45;
  Node n(dir_, go);
  auto alice = n.NewAccount("alice");
  int ok = 0;
  Reply last;
  for (int i = 0; i < 5; ++i) {
    last = n.Signed(http::verb::get, "/api/v3/account", alice, "");  // weight 20
    if (last.status == 200) ++ok;
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(last.status, 429);
  EXPECT_EQ(last.Json().at("code").as_int64(), -1003);
  EXPECT_FALSE(last.headers["Retry-After"].empty());
  EXPECT_FALSE(last.headers["X-MBX-USED-WEIGHT-1M"].empty());
}

TEST_F(GatewayTest, ClosedExchangeAnswers503WithRetryAfter) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  n.CloseExchange();
  Reply r = n.Deposit(alice.account, "USDT", "1", "late");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.headers["Retry-After"], "1");
  EXPECT_TRUE(r.Json().as_object().contains("msg"));
}

TEST_F(GatewayTest, RestartKeepsAccountsKeysOrdersAndBalances) {
  Node::Keys alice;
  int64_t order_id = 0;
  {
    Node n(dir_);
    alice = n.NewAccount("alice");
    ASSERT_EQ(n.Deposit(alice.account, "USDT", "1000", "a").status, 200);
    Reply buy = n.Signed(http::verb::post, "/api/v3/order", alice,
                         "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                         "price=20000");
    ASSERT_EQ(buy.status, 200) << buy.body;
    order_id = buy.Json().at("orderId").as_int64();
  }
  Node n(dir_);
  Reply open = n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(open.status, 200) << open.body;
  ASSERT_EQ(open.Json().as_array().size(), 1u);
  EXPECT_EQ(open.Json().as_array()[0].at("orderId").as_int64(), order_id);
  Reply acc = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(acc, "USDT", "free"), "800.00000000");
  EXPECT_EQ(Balance(acc, "USDT", "locked"), "200.00000000");
  Reply depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT");
  ASSERT_EQ(depth.Json().at("bids").as_array().size(), 1u);
  Reply dup = n.Deposit(alice.account, "USDT", "1000", "a");
  EXPECT_TRUE(dup.Json().at("duplicate").as_bool());
}

}  // namespace
}  // namespace mb
