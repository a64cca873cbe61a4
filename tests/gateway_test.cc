// The gateway end to end in one process: a real Exchange (journal in a temp
// directory), the Gateway on an ephemeral port, and a plain HTTP client.
// Checks the Binance error paths, authentication, the operator API, rate
// limits, back-pressure answers, order answers and a restart; and the history
// endpoints served from the projection (a SQLite store fed by a Projector,
// which the gateway sees through app::ProjectionHistory), compared byte for byte with a second
// gateway on the same exchange that answers them from its read side.
#include "gateway/gateway.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <openssl/evp.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/config.h"
#include "app/demo_config.h"
#include "app/history.h"
#include "common/clock.h"
#include "common/decimal.h"
#include "common/hmac.h"
#include "engine/engine.h"
#include "exchange/exchange.h"
#include "gateway/auth.h"
#include "metrics/flight_recorder.h"
#include "metrics/metrics.h"
#include "projection/projector.h"
#include "projection/store.h"
#include "transfer/address.h"
#include "transfer/protocol.h"

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

// An HTTP client of one gateway: plain requests, operator calls, signed calls.
class Client {
 public:
  Client() = default;
  Client(uint16_t port, std::string token, std::string address = "127.0.0.1")
      : port_(port), token_(std::move(token)), address_(std::move(address)) {}

  Reply Request(http::verb method, const std::string& target, std::string body = {},
                std::map<std::string, std::string> headers = {}) {
    boost::asio::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(boost::asio::ip::make_address(address_), port_));
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
    params += fmt::format("timestamp={}&recvWindow=5000", timestamp ? timestamp : WallMs());
    const std::string sig =
        HmacSha256Hex(secret_override.empty() ? k.secret : secret_override, params);
    params += "&signature=" + sig;
    if (method == http::verb::post || method == http::verb::put) {
      return Request(method, path, params, {{"X-MBX-APIKEY", k.key}});
    }
    return Request(method, path + "?" + params, {}, {{"X-MBX-APIKEY", k.key}});
  }
  // The read side's applied sequence (operator health).
  uint64_t AppliedSeq() {
    return Admin(http::verb::get, "health").Json().at("appliedSequence").to_number<uint64_t>();
  }

 private:
  uint16_t port_ = 0;
  std::string token_;
  std::string address_ = "127.0.0.1";
};

struct NodeOptions {
  gateway::GatewayOptions gateway;
  // The history endpoints from a SQLite projection (<dir>/projection.sqlite).
  bool projection = false;
  // A second gateway on the same exchange (own key store in <dir>/twin),
  // answering history from its read side: the reference to compare with.
  bool twin = false;
  // While *hold_durable is true, durable batches wait before they reach the
  // gateway: the read side lags the engine as much as a test needs.
  std::atomic<bool>* hold_durable = nullptr;
  // [engine] client_order_id.
  engine::ClientOrderIds client_order_ids = engine::ClientOrderIds::kBinance;
};

class Node {
 public:
  explicit Node(fs::path dir, gateway::GatewayOptions go = {})
      : Node(std::move(dir), [&] {
          NodeOptions o;
          o.gateway = go;
          return o;
        }()) {}
  Node(fs::path dir, NodeOptions options) : dir_(std::move(dir)), options_(std::move(options)) {
    Start();
  }
  ~Node() { Stop(); }

  void Start() {
    auto cfg = app::ParseFullConfig(app::kDemoConfigToml, "demo");
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    cfg->runtime.data_dir = dir_.string();
    cfg->runtime.journal.policy = journal::FsyncPolicy::kNone;
    cfg->engine.client_order_ids = options_.client_order_ids;
    config_ = cfg->engine;
    gateway::GatewayOptions go = options_.gateway;
    go.server.port = 0;
    go.server.io_threads = 2;
    auto gw = gateway::Gateway::Create(config_, dir_, go);
    ASSERT_TRUE(gw.ok()) << gw.status().message();
    gw_ = std::move(gw).value();
    exchange::ExchangeOptions o = app::ExchangeOptionsFrom(*cfg);
    o.log = [](std::string_view) {};
    o.metrics = go.metrics;
    stage_ = std::make_unique<fanout::Stage>(fanout::StageOptions{.timing = true});
    gw_->Wire(&o, stage_.get());
    if (options_.twin) {
      gateway::GatewayOptions twin_go = go;
      twin_go.master_key_file = dir_ / "master.key";  // one venue, one master key
      auto twin = gateway::Gateway::Create(config_, dir_ / "twin", twin_go);
      ASSERT_TRUE(twin.ok()) << twin.status().message();
      twin_ = std::move(twin).value();
      auto recovered = o.on_recovered;
      twin_->Wire(&o, stage_.get());  // a second handler of the same stage
      o.on_recovered = [recovered, twin = o.on_recovered](const engine::Engine& e) {
        recovered(e);
        twin(e);
      };
    }
    if (options_.hold_durable != nullptr) {
      o.on_durable = [durable = o.on_durable,
                      hold = options_.hold_durable](std::span<const engine::Event> ev) {
        while (hold->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        durable(ev);
      };
    }
    if (options_.projection) {
      auto store = projection::OpenSqliteStore((dir_ / "projection.sqlite").string(), config_);
      ASSERT_TRUE(store.ok()) << store.status().message();
      store_ = std::move(store).value();
      projection::ProjectorOptions po;
      po.log = [](std::string_view) {};
      projector_ = std::make_unique<projection::Projector>(
          dir_, config_, engine::HashConfig(config_), store_.get(), po);
      projector_feed_ = std::make_unique<fanout::SequenceHandler>(
          [p = projector_.get()](uint64_t seq) { p->NotifyDurable(seq); });
      stage_->Add(projector_feed_.get());
      history_ = std::make_unique<app::ProjectionHistory>(store_.get(), projector_.get());
      gw_->SetHistory(history_.get());
    }
    auto ex = exchange::Exchange::Open(std::move(o));
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    ex_ = std::move(ex).value();
    stage_->Start();
    if (projector_) projector_->Start(ex_->durable_seq());
    ASSERT_TRUE(gw_->Start(ex_.get()).ok());
    client_ = Client(gw_->port(), ReadToken(*gw_));
    if (twin_) {
      ASSERT_TRUE(twin_->Start(ex_.get()).ok());
      twin_client_ = Client(twin_->port(), ReadToken(*twin_));
    }
  }
  void Stop() {
    if (!gw_) return;
    gw_->StopServer();
    if (twin_) twin_->StopServer();
    (void)ex_->Close();
    stage_->Stop();
    gw_->Stop();
    if (twin_) twin_->Stop();
    if (projector_) projector_->Stop();
    stage_.reset();
    projector_feed_.reset();
    gw_.reset();
    twin_.reset();
    ex_.reset();
    history_.reset();
    projector_.reset();
    store_.reset();
  }
  // Closes the exchange but keeps the server answering.
  void CloseExchange() { (void)ex_->Close(); }

  Reply Request(http::verb method, const std::string& target, std::string body = {},
                std::map<std::string, std::string> headers = {}) {
    return client_.Request(method, target, std::move(body), std::move(headers));
  }
  Reply Admin(http::verb method, const std::string& path, const std::string& body = {}) {
    return client_.Admin(method, path, body);
  }
  using Keys = Client::Keys;
  Keys NewAccount(const std::string& name) { return client_.NewAccount(name); }
  Reply Deposit(uint32_t account, const std::string& asset, const std::string& amount,
                const std::string& ref) {
    return client_.Deposit(account, asset, amount, ref);
  }
  Reply Signed(http::verb method, const std::string& path, const Keys& k, std::string params,
               int64_t timestamp = 0, const std::string& secret_override = {}) {
    return client_.Signed(method, path, k, std::move(params), timestamp, secret_override);
  }

  Client& client() { return client_; }
  Client& twin() { return twin_client_; }
  uint16_t port() const { return gw_->port(); }
  std::string token() const { return ReadToken(*gw_); }
  projection::Projector& projector() { return *projector_; }
  exchange::Exchange& exchange() { return *ex_; }
  const engine::EngineConfig& config() const { return config_; }

 private:
  static std::string ReadToken(const gateway::Gateway& gw) {
    std::ifstream in(gw.admin_token_path());
    std::string token;
    std::getline(in, token);
    EXPECT_FALSE(token.empty());
    return token;
  }

  fs::path dir_;
  NodeOptions options_;
  engine::EngineConfig config_;
  std::unique_ptr<projection::Store> store_;
  std::unique_ptr<projection::Projector> projector_;
  std::unique_ptr<fanout::SequenceHandler> projector_feed_;
  std::unique_ptr<fanout::Stage> stage_;
  std::unique_ptr<app::ProjectionHistory> history_;  // the gateway's view of the two above
  std::unique_ptr<gateway::Gateway> gw_;
  std::unique_ptr<gateway::Gateway> twin_;
  std::unique_ptr<exchange::Exchange> ex_;
  Client client_, twin_client_;
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
              static_cast<double>(WallMs()), 5000.0);
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

// `symbols=[...]` percent-encoded, as clients send it.
std::string SymbolsArg(std::initializer_list<std::string_view> names) {
  std::string s = "%5B";
  for (std::string_view n : names) {
    if (s.size() > 3) s += ',';
    s += fmt::format("%22{}%22", n);
  }
  return s + "%5D";
}

std::vector<std::string> InfoSymbols(const Reply& r) {
  std::vector<std::string> out;
  const json::value info = r.Json();
  for (const json::value& s : info.at("symbols").as_array()) {
    out.emplace_back(s.at("symbol").as_string());
  }
  return out;
}

int64_t Code(const Reply& r) {
  const json::value v = r.Json();
  return v.is_object() && v.as_object().contains("code") ? v.at("code").as_int64() : 0;
}

TEST_F(GatewayTest, ExchangeInfoSelectsSymbolsAsBinanceDoes) {
  Node n(dir_);
  auto info = [&](const std::string& q) {
    return n.Request(http::verb::get, "/api/v3/exchangeInfo" + (q.empty() ? "" : "?" + q));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(InfoSymbols(info("")), (V{"BTCUSDT", "ETHUSDT", "ETHBTC"}));
  EXPECT_EQ(InfoSymbols(info("symbol=ETHUSDT")), (V{"ETHUSDT"}));
  EXPECT_EQ(InfoSymbols(info("symbols=" + SymbolsArg({"ETHBTC", "BTCUSDT"}))),
            (V{"ETHBTC", "BTCUSDT"}));
  EXPECT_EQ(Code(info("symbol=NOPE")), -1121);
  EXPECT_EQ(info("symbol=NOPE").Json().at("msg").as_string(), "Invalid symbol.");
  EXPECT_EQ(Code(info("symbols=" + SymbolsArg({"BTCUSDT", "NOPE"}))), -1121);
  EXPECT_EQ(Code(info("symbols=" + SymbolsArg({"BTCUSDT", "BTCUSDT"}))), -1151);
  EXPECT_EQ(Code(info("symbol=BTCUSDT&symbols=" + SymbolsArg({"ETHUSDT"}))), -1128);

  // permissions: every market is SPOT only.
  EXPECT_EQ(InfoSymbols(info("permissions=SPOT")).size(), 3u);
  EXPECT_EQ(InfoSymbols(info("permissions=" + SymbolsArg({"MARGIN", "SPOT"}))).size(), 3u);
  EXPECT_EQ(InfoSymbols(info("permissions=" + SymbolsArg({"MARGIN", "LEVERAGED"}))).size(), 0u);
  EXPECT_EQ(Code(info("permissions=SPOT&symbol=BTCUSDT")), -1128);
  EXPECT_EQ(Code(info("permissions=%5B")), -1130);

  // showPermissionSets=false empties permissionSets.
  const json::value with_sets = info("symbol=BTCUSDT").Json().at("symbols").as_array()[0];
  EXPECT_EQ(json::serialize(with_sets.at("permissionSets")), R"([["SPOT"]])");
  const json::value no_sets =
      info("symbol=BTCUSDT&showPermissionSets=false").Json().at("symbols").as_array()[0];
  EXPECT_EQ(json::serialize(no_sets.at("permissionSets")), "[]");
  EXPECT_EQ(json::serialize(no_sets.at("permissions")), R"(["SPOT"])");
  EXPECT_EQ(Code(info("showPermissionSets=maybe")), -1130);

  // symbolStatus filters by the market's current status, alone only.
  ASSERT_EQ(n.Admin(http::verb::post, "markets/ETHUSDT/status", R"({"status":"HALTED"})").status,
            200);
  EXPECT_EQ(InfoSymbols(info("symbolStatus=TRADING")), (V{"BTCUSDT", "ETHBTC"}));
  EXPECT_EQ(InfoSymbols(info("symbolStatus=HALT")), (V{"ETHUSDT"}));
  EXPECT_EQ(InfoSymbols(info("symbolStatus=BREAK")), V{});
  EXPECT_EQ(Code(info("symbolStatus=HALTED")), -1122);
  EXPECT_EQ(Code(info("symbolStatus=HALT&symbol=ETHUSDT")), -1128);
  EXPECT_EQ(Code(info("symbolStatus=HALT&symbols=" + SymbolsArg({"ETHUSDT"}))), -1128);

  // The symbol flags of what Matchbook supports, and the limits it applies.
  const json::value all = info("").Json();
  const json::object& s = all.at("symbols").as_array()[0].as_object();
  EXPECT_TRUE(s.at("amendAllowed").as_bool());
  EXPECT_FALSE(s.at("opoAllowed").as_bool());
  EXPECT_FALSE(s.at("pegInstructionsAllowed").as_bool());
  EXPECT_TRUE(s.at("icebergAllowed").as_bool());
  EXPECT_TRUE(s.at("ocoAllowed").as_bool());
  EXPECT_TRUE(s.at("otoAllowed").as_bool());
  const json::array& limits = all.at("rateLimits").as_array();
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].at("rateLimitType").as_string(), "REQUEST_WEIGHT");
  EXPECT_EQ(limits[0].at("interval").as_string(), "MINUTE");
  EXPECT_EQ(limits[0].at("limit").as_int64(), 12000);  // the per-IP default
}

TEST_F(GatewayTest, TickersTakeTypeSymbolsAndSymbolStatusAsBinanceDoes) {
  Node n(dir_);
  auto get = [&](const std::string& target) { return n.Request(http::verb::get, target); };
  // type=MINI: the mini shape; FULL (the default) the full one; else -1139.
  const Reply mini = get("/api/v3/ticker/24hr?symbol=BTCUSDT&type=MINI");
  ASSERT_EQ(mini.status, 200) << mini.body;
  const json::object m = mini.Json().as_object();
  for (const char* k : {"symbol", "openPrice", "highPrice", "lowPrice", "lastPrice", "volume",
                        "quoteVolume", "openTime", "closeTime", "firstId", "lastId", "count"}) {
    EXPECT_TRUE(m.contains(k)) << k;
  }
  EXPECT_EQ(m.size(), 12u);
  EXPECT_FALSE(m.contains("priceChange"));
  EXPECT_TRUE(get("/api/v3/ticker/24hr?symbol=BTCUSDT&type=FULL")
                  .Json()
                  .as_object()
                  .contains("priceChange"));
  EXPECT_EQ(get("/api/v3/ticker/24hr?type=MINI").Json().as_array().size(), 3u);
  for (const char* bad : {"mini", "SHORT", ""}) {
    const Reply r = get(fmt::format("/api/v3/ticker/24hr?symbol=BTCUSDT&type={}", bad));
    EXPECT_EQ(Code(r), -1139) << bad;
    EXPECT_EQ(r.Json().at("msg").as_string(), "Invalid ticker type.");
  }

  ASSERT_EQ(n.Admin(http::verb::post, "markets/ETHUSDT/status", R"({"status":"HALTED"})").status,
            200);
  for (const char* path :
       {"/api/v3/ticker/24hr", "/api/v3/ticker/price", "/api/v3/ticker/bookTicker"}) {
    SCOPED_TRACE(path);
    const std::string p(path);
    const Reply dup = get(p + "?symbols=" + SymbolsArg({"BTCUSDT", "ETHUSDT", "BTCUSDT"}));
    EXPECT_EQ(Code(dup), -1151);
    EXPECT_EQ(dup.Json().at("msg").as_string(), "Symbol is present multiple times in the list.");
    EXPECT_EQ(Code(get(p + "?symbol=BTCUSDT&symbols=" + SymbolsArg({"ETHUSDT"}))), -1128);
    // symbolStatus: a list or all markets lose the others; one symbol must match.
    const Reply trading = get(p + "?symbolStatus=TRADING");
    ASSERT_EQ(trading.status, 200) << trading.body;
    ASSERT_EQ(trading.Json().as_array().size(), 2u);
    EXPECT_EQ(trading.Json().as_array()[0].at("symbol").as_string(), "BTCUSDT");
    EXPECT_EQ(trading.Json().as_array()[1].at("symbol").as_string(), "ETHBTC");
    const Reply halted =
        get(p + "?symbolStatus=HALT&symbols=" + SymbolsArg({"BTCUSDT", "ETHUSDT"}));
    ASSERT_EQ(halted.Json().as_array().size(), 1u);
    EXPECT_EQ(halted.Json().as_array()[0].at("symbol").as_string(), "ETHUSDT");
    const Reply one = get(p + "?symbol=ETHUSDT&symbolStatus=HALT");
    EXPECT_EQ(one.Json().at("symbol").as_string(), "ETHUSDT");
    const Reply mismatch = get(p + "?symbol=ETHUSDT&symbolStatus=TRADING");
    EXPECT_EQ(Code(mismatch), -1220);
    EXPECT_EQ(mismatch.Json().at("msg").as_string(),
              "The symbol's status does not match the requested symbolStatus.");
    EXPECT_EQ(Code(get(p + "?symbolStatus=OPEN")), -1122);
  }
  // depth: the one symbol's status must match.
  EXPECT_EQ(get("/api/v3/depth?symbol=ETHUSDT&symbolStatus=HALT").status, 200);
  EXPECT_EQ(Code(get("/api/v3/depth?symbol=ETHUSDT&symbolStatus=TRADING")), -1220);
  EXPECT_EQ(Code(get("/api/v3/depth?symbol=BTCUSDT&symbolStatus=NOPE")), -1122);
}

TEST_F(GatewayTest, MicrosecondTimestampsAndTheTimeUnitHeader) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);
  // A signed call with the parameters as given (timestamp and recvWindow
  // included), in the query, with extra headers.
  auto signed_get = [&](const std::string& path, const std::string& params,
                        std::map<std::string, std::string> headers = {}) {
    headers["X-MBX-APIKEY"] = alice.key;
    return n.Request(http::verb::get,
                     path + "?" + params + "&signature=" + HmacSha256Hex(alice.secret, params), {},
                     headers);
  };

  // timestamp in µs; recvWindow with µs decimals.
  const int64_t now_us = WallNs() / 1'000;
  Reply us = signed_get("/api/v3/account", fmt::format("timestamp={}", now_us));
  EXPECT_EQ(us.status, 200) << us.body;
  Reply window =
      signed_get("/api/v3/account", fmt::format("timestamp={}&recvWindow=6000.346", WallMs()));
  EXPECT_EQ(window.status, 200) << window.body;
  EXPECT_EQ(
      Code(signed_get("/api/v3/account", fmt::format("timestamp={}&recvWindow=60000.5", WallMs()))),
      -1130);
  EXPECT_EQ(Code(signed_get("/api/v3/account",
                            fmt::format("timestamp={}&recvWindow=5000.0001", WallMs()))),
            -1111);
  // Ten seconds old in µs is outside the default 5 s window.
  EXPECT_EQ(Code(signed_get("/api/v3/account", fmt::format("timestamp={}", now_us - 10'000'000))),
            -1021);
  EXPECT_EQ(Code(signed_get("/api/v3/account",
                            fmt::format("timestamp={}", WallNs() / 1'000 + 2'000'000))),
            -1021);

  // A trade to have times to show.
  const int64_t before_ms = WallMs();
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                     "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&price=30000")
                .status,
            200);
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                     "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.1")
                .status,
            200);

  // X-MBX-TIME-UNIT: every time in the body in µs; any letter case.
  const std::map<std::string, std::string> micro = {{"X-MBX-TIME-UNIT", "microsecond"}};
  const Reply t = n.Request(http::verb::get, "/api/v3/time", {}, micro);
  EXPECT_NEAR(static_cast<double>(t.Json().at("serverTime").as_int64()),
              static_cast<double>(WallNs() / 1'000), 5e6);
  const Reply ms = n.Request(http::verb::get, "/api/v3/trades?symbol=BTCUSDT");
  const Reply trades = n.Request(http::verb::get, "/api/v3/trades?symbol=BTCUSDT", {},
                                 {{"X-MBX-TIME-UNIT", "MICROSECOND"}});
  ASSERT_EQ(trades.Json().as_array().size(), 1u);
  EXPECT_EQ(trades.Json().as_array()[0].at("time").as_int64(),
            ms.Json().as_array()[0].at("time").as_int64() * 1'000);
  EXPECT_EQ(trades.Json().as_array()[0].at("price").as_string(), "30000.00000000");
  const Reply kl_ms = n.Request(http::verb::get, "/api/v3/klines?symbol=BTCUSDT&interval=1m");
  const Reply kl_us =
      n.Request(http::verb::get, "/api/v3/klines?symbol=BTCUSDT&interval=1m", {}, micro);
  ASSERT_EQ(kl_us.Json().as_array().size(), 1u);
  const json::array row_ms = kl_ms.Json().as_array()[0].as_array();
  const json::array row_us = kl_us.Json().as_array()[0].as_array();
  EXPECT_EQ(row_us[0].as_int64(), row_ms[0].as_int64() * 1'000);
  EXPECT_EQ(row_us[6].as_int64(), row_ms[6].as_int64() * 1'000);
  EXPECT_EQ(row_us[8].as_int64(), row_ms[8].as_int64());  // the trade count is not a time
  const Reply acct = signed_get("/api/v3/account", fmt::format("timestamp={}", WallMs()), micro);
  EXPECT_GT(acct.Json().at("updateTime").as_int64(), before_ms * 1'000 - 1);
  const Reply bad = n.Request(http::verb::get, "/api/v3/time", {}, {{"X-MBX-TIME-UNIT", "SECOND"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Code(bad), -1194);
  EXPECT_EQ(bad.Json().at("msg").as_string(),
            "Invalid value for time unit; expected either MICROSECOND or MILLISECOND.");
  EXPECT_EQ(n.Request(http::verb::get, "/api/v3/time", {}, {{"X-MBX-TIME-UNIT", "MILLISECOND"}})
                    .Json()
                    .at("serverTime")
                    .as_int64() /
                1'000'000'000,
            WallMs() / 1'000'000'000);

  // startTime / endTime in µs select as their ms values do.
  const int64_t trade_ms = ms.Json().as_array()[0].at("time").as_int64();
  auto agg = [&](const std::string& q) {
    return n.Request(http::verb::get, "/api/v3/aggTrades?symbol=BTCUSDT&" + q).Json().as_array();
  };
  EXPECT_EQ(agg(fmt::format("startTime={}", trade_ms * 1'000)).size(), 1u);
  EXPECT_EQ(agg(fmt::format("startTime={}", (trade_ms + 1) * 1'000)).size(), 0u);
  EXPECT_EQ(agg(fmt::format("endTime={}", (trade_ms - 1) * 1'000 + 999)).size(), 0u);
  EXPECT_EQ(
      agg(fmt::format("startTime={}&endTime={}", trade_ms * 1'000, trade_ms * 1'000 + 999)).size(),
      1u);

  // A parameter in both the query and the body: the query's value is used.
  const std::string query = "symbol=NOPE";
  const std::string body = fmt::format(
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&price=30000&timestamp={}",
      WallMs());
  const Reply both = n.Request(http::verb::post, "/api/v3/order/test?" + query,
                               body + "&signature=" + HmacSha256Hex(alice.secret, query + body),
                               {{"X-MBX-APIKEY", alice.key}});
  EXPECT_EQ(Code(both), -1121) << both.body;
}

TEST_F(GatewayTest, MarketBuyByQuoteThatSpendsItsBudgetIsFilled) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "1000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                     "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=1&price=30000")
                .status,
            200);
  // One lot (0.00001 BTC) costs 0.3 USDT: 100.1 buys 333 lots for 99.9 and
  // leaves 0.2, less than a lot, with the ask still on the book.
  const Reply buy = n.Signed(http::verb::post, "/api/v3/order", alice,
                             "symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=100.1");
  ASSERT_EQ(buy.status, 200) << buy.body;
  const json::value b = buy.Json();
  EXPECT_EQ(b.at("status").as_string(), "FILLED");
  EXPECT_EQ(b.at("executedQty").as_string(), "0.00333000");
  EXPECT_EQ(b.at("origQty").as_string(), "0.00333000");
  EXPECT_EQ(b.at("cummulativeQuoteQty").as_string(), "99.90000000");
  // Every view says FILLED, with origQty the executed quantity.
  const Reply get = n.Signed(http::verb::get, "/api/v3/order", alice,
                             fmt::format("symbol=BTCUSDT&orderId={}", b.at("orderId").as_int64()));
  EXPECT_EQ(get.Json().at("status").as_string(), "FILLED") << get.body;
  EXPECT_EQ(get.Json().at("origQty").as_string(), "0.00333000") << get.body;
  EXPECT_FALSE(get.Json().as_object().contains("expiryReason")) << get.body;
  const Reply all = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(all.status, 200) << all.body;
  ASSERT_EQ(all.Json().as_array().size(), 1u) << all.body;
  EXPECT_EQ(all.Json().as_array()[0].at("status").as_string(), "FILLED") << all.body;
  EXPECT_EQ(all.Json().as_array()[0].at("origQty").as_string(), "0.00333000") << all.body;
  // A budget larger than the book: the order runs out of liquidity and expires.
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                     "symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=800")
                .Json()
                .at("status")
                .as_string(),
            "FILLED");  // 800 of the 0.99667 BTC left: budget-bound again
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a2").status, 200);
  const Reply sweep = n.Signed(http::verb::post, "/api/v3/order", alice,
                               "symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=50000");
  ASSERT_EQ(sweep.status, 200) << sweep.body;
  EXPECT_EQ(sweep.Json().at("status").as_string(), "EXPIRED");
  EXPECT_EQ(sweep.Json().at("origQty").as_string(), sweep.Json().at("executedQty").as_string());
}

TEST_F(GatewayTest, RequestWeightsFollowBinanceAndShowOnEveryAnswer) {
  ManualClock clock;  // one minute throughout: the used weight only grows
  gateway::GatewayOptions go;
  go.clock = &clock;
  Node n(dir_, go);
  auto alice = n.NewAccount("alice");
  uint32_t used = 0;
  // The weight a request adds to the IP's used weight, and that the header is there.
  auto weigh = [&](const Reply& r) {
    const auto h = r.headers.find("X-MBX-USED-WEIGHT-1M");
    EXPECT_NE(h, r.headers.end()) << r.status << " " << r.body;
    if (h == r.headers.end()) return uint32_t{0};
    const auto now = static_cast<uint32_t>(std::stoul(h->second));
    const uint32_t delta = now - used;
    used = now;
    return delta;
  };
  auto get = [&](const std::string& target) { return weigh(n.Request(http::verb::get, target)); };
  auto sig = [&](const std::string& path, const std::string& params) {
    return weigh(n.Signed(http::verb::get, path, alice, params, clock.wall_ms()));
  };
  (void)get("/api/v3/ping");
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT"), 5u);
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT&limit=100"), 5u);
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT&limit=101"), 25u);
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT&limit=1000"), 50u);
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT&limit=5000"), 250u);
  EXPECT_EQ(get("/api/v3/ticker/24hr?symbol=BTCUSDT"), 2u);
  EXPECT_EQ(get("/api/v3/ticker/24hr?symbols=" + SymbolsArg({"BTCUSDT", "ETHUSDT"})), 2u);
  EXPECT_EQ(get("/api/v3/ticker/24hr"), 80u);
  EXPECT_EQ(get("/api/v3/ticker/price?symbol=BTCUSDT"), 2u);
  EXPECT_EQ(get("/api/v3/ticker/price"), 4u);
  EXPECT_EQ(get("/api/v3/ticker/bookTicker?symbols=" + SymbolsArg({"BTCUSDT"})), 4u);
  EXPECT_EQ(get("/api/v3/exchangeInfo"), 20u);
  // Errors show the used weight too, and a refused request still weighs.
  EXPECT_EQ(get("/api/v3/depth?symbol=NOPE"), 5u);
  EXPECT_EQ(get("/api/v3/nothing"), 0u);
  EXPECT_EQ(get("/api/v3/depth?symbol=BTCUSDT&symbol=ETHUSDT"), 5u);
  // Signed endpoints count on the IP as well.
  EXPECT_EQ(sig("/api/v3/openOrders", "symbol=BTCUSDT"), 6u);
  EXPECT_EQ(sig("/api/v3/openOrders", ""), 80u);
  EXPECT_EQ(sig("/api/v3/myTrades", "symbol=BTCUSDT"), 20u);
  EXPECT_EQ(sig("/api/v3/myTrades", "symbol=BTCUSDT&orderId=1"), 5u);
  EXPECT_EQ(sig("/api/v3/account", ""), 20u);
  EXPECT_EQ(weigh(n.Signed(http::verb::get, "/api/v3/account", alice, "", clock.wall_ms() - 9000)),
            20u);  // -1021 after the weight was taken

  // allOrders / myTrades: at most 24 h between startTime and endTime, and
  // myTrades takes no time bound with an id bound.
  const int64_t t0 = clock.wall_ms() - 48 * 3'600'000;
  auto code = [&](const std::string& path, const std::string& params) {
    return Code(n.Signed(http::verb::get, path, alice, params, clock.wall_ms()));
  };
  for (const char* path : {"/api/v3/allOrders", "/api/v3/myTrades"}) {
    SCOPED_TRACE(path);
    const Reply r =
        n.Signed(http::verb::get, path, alice,
                 fmt::format("symbol=BTCUSDT&startTime={}&endTime={}", t0, t0 + 24 * 3'600'000 + 1),
                 clock.wall_ms());
    EXPECT_EQ(Code(r), -1127);
    EXPECT_EQ(r.Json().at("msg").as_string(), "More than 24 hours between startTime and endTime.");
    EXPECT_EQ(
        code(path, fmt::format("symbol=BTCUSDT&startTime={}&endTime={}", t0, t0 + 24 * 3'600'000)),
        0);
  }
  EXPECT_EQ(code("/api/v3/myTrades", fmt::format("symbol=BTCUSDT&orderId=1&startTime={}", t0)),
            -1128);
  EXPECT_EQ(code("/api/v3/myTrades", fmt::format("symbol=BTCUSDT&fromId=1&endTime={}", t0)), -1128);
  EXPECT_EQ(code("/api/v3/myTrades", "symbol=BTCUSDT&orderId=1&fromId=1"), 0);
}

TEST_F(GatewayTest, RequestWeightAndOrderLimitsAnswer429AsBinanceDoes) {
  ManualClock clock;
  gateway::GatewayOptions go;
  go.clock = &clock;
  go.ip_limit.weight_per_minute = go.ip_limit.burst = 100;
  go.order_limit.per_10s = 2;
  go.order_limit.per_day = 3;
  Node n(dir_, go);
  // The IP's limit, in Binance's words.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(n.Request(http::verb::get, "/api/v3/exchangeInfo").status, 200);  // weight 20
  }
  const Reply over = n.Request(http::verb::get, "/api/v3/exchangeInfo");
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(Code(over), -1003);
  EXPECT_EQ(over.Json().at("msg").as_string(),
            "Too much request weight used; current limit is 100 request weight per 1 MINUTE. "
            "Please use WebSocket Streams for live updates to avoid polling the API.");
  EXPECT_EQ(over.headers.at("X-MBX-USED-WEIGHT-1M"), "100");
  EXPECT_FALSE(over.headers.at("Retry-After").empty());
  clock.Advance(std::chrono::seconds(60));

  // exchangeInfo lists the limits applied.
  const json::value info = n.Request(http::verb::get, "/api/v3/exchangeInfo").Json();
  const json::array& limits = info.at("rateLimits").as_array();
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0].at("limit").as_int64(), 100);
  EXPECT_EQ(limits[1].at("rateLimitType").as_string(), "ORDERS");
  EXPECT_EQ(limits[1].at("interval").as_string(), "SECOND");
  EXPECT_EQ(limits[1].at("intervalNum").as_int64(), 10);
  EXPECT_EQ(limits[1].at("limit").as_int64(), 2);
  EXPECT_EQ(limits[2].at("interval").as_string(), "DAY");
  EXPECT_EQ(limits[2].at("limit").as_int64(), 3);

  // New orders per account: counted in headers, refused over a limit.
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "USDT", "100000", "b").status, 200);
  auto order = [&](const Client::Keys& k) {
    return n.Signed(http::verb::post, "/api/v3/order", k,
                    "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.001&price=10000",
                    clock.wall_ms());
  };
  const Reply first = order(alice);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.headers.at("X-MBX-ORDER-COUNT-10S"), "1");
  EXPECT_EQ(first.headers.at("X-MBX-ORDER-COUNT-1D"), "1");
  EXPECT_EQ(order(alice).headers.at("X-MBX-ORDER-COUNT-10S"), "2");
  const Reply third = order(alice);
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(Code(third), -1015);
  EXPECT_EQ(third.Json().at("msg").as_string(),
            "Too many new orders; current limit is 2 orders per 10 SECOND.");
  EXPECT_FALSE(third.headers.at("Retry-After").empty());
  // Per account: Bob is not limited by Alice's orders. Reads carry no count.
  EXPECT_EQ(order(bob).headers.at("X-MBX-ORDER-COUNT-10S"), "1");
  EXPECT_EQ(
      n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT", clock.wall_ms())
          .headers.count("X-MBX-ORDER-COUNT-10S"),
      0u);
  // The next 10 s window; then the day's limit.
  clock.Advance(std::chrono::seconds(10));
  const Reply fourth = order(alice);
  ASSERT_EQ(fourth.status, 200) << fourth.body;
  EXPECT_EQ(fourth.headers.at("X-MBX-ORDER-COUNT-10S"), "1");
  EXPECT_EQ(fourth.headers.at("X-MBX-ORDER-COUNT-1D"), "3");
  clock.Advance(std::chrono::seconds(10));
  const Reply day = order(alice);
  EXPECT_EQ(Code(day), -1015);
  EXPECT_EQ(day.Json().at("msg").as_string(),
            "Too many new orders; current limit is 3 orders per 1 DAY.");
}

TEST_F(GatewayTest, AdminTokenAccountsKeysAndIdempotentTransfers) {
  Node n(dir_);
  EXPECT_EQ(n.Request(http::verb::get, "/admin/v1/health").status, 401);
  EXPECT_EQ(
      n.Request(http::verb::get, "/admin/v1/health", {}, {{"X-MB-ADMIN-TOKEN", "wrong"}}).status,
      401);
  Reply health = n.Admin(http::verb::get, "health");
  EXPECT_EQ(health.status, 200);
  EXPECT_FALSE(health.Json().as_object().contains("projection")) << health.body;
  EXPECT_EQ(n.Admin(http::verb::get, "accounts/0/ledger").status, 404);
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

// The destination's side of a transfer between venues: each delivery is
// checked (the address, the asset, the account, the amount) before anything
// is credited, and a delivery credited before is answered with its first
// credit and credits nothing.
TEST_F(GatewayTest, AVenueCallCreditsOnceAndRefusesWhatItCannotCredit) {
  gateway::GatewayOptions go;
  go.venue = "beta";
  go.venues = {transfer::VenueLink{"alpha", "http://127.0.0.1:1", "shared-secret-0123456789", ""}};
  Node n(dir_, go);
  auto bob = n.NewAccount("bob");
  const std::string bob_btc = transfer::MakeAddress("beta", AccountId{bob.account}, "BTC");
  const std::vector<transfer::Delivery> deliveries = {
      {1, "BTC", "0.5", bob_btc},
      {2, "BTC", "1", transfer::MakeAddress("beta", AccountId{77}, "BTC")},  // no such account
      {3, "DOGE", "1", transfer::MakeAddress("beta", AccountId{bob.account}, "DOGE")},
      {4, "BTC", "1", transfer::MakeAddress("gamma", AccountId{bob.account}, "BTC")},
      {5, "BTC", "0.000000001", bob_btc},                            // more decimals than BTC has
      {6, "BTC", "1", bob_btc.substr(0, bob_btc.size() - 1) + "x"},  // mistyped
      {7, "ETH", "1", bob_btc},                                      // an address for another asset
  };
  const std::string body = transfer::EncodeDeliveries(deliveries);
  auto call = [&](const std::string& secret, int64_t ts_ms) {
    const std::string ts = std::to_string(ts_ms);
    return n.Request(http::verb::post, std::string(transfer::kDeliverTarget), body,
                     {{"Content-Type", "application/json"},
                      {std::string(transfer::kVenueHeader), "alpha"},
                      {std::string(transfer::kTimestampHeader), ts},
                      {std::string(transfer::kSignatureHeader),
                       transfer::Sign(secret, ts, "POST", transfer::kDeliverTarget, body)}});
  };
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_EQ(call("wrong-secret-0123456789", now).status, 401);
  EXPECT_EQ(call("shared-secret-0123456789", now - 60'000).status, 401);
  Reply first = call("shared-secret-0123456789", now);
  ASSERT_EQ(first.status, 200) << first.body;
  auto results = transfer::DecodeResults(first.body);
  ASSERT_TRUE(results.ok()) << results.status().message();
  ASSERT_EQ(results->size(), deliveries.size());
  using engine::RefundReason;
  using transfer::Outcome;
  const std::pair<Outcome, RefundReason> want[] = {
      {Outcome::kCredited, RefundReason::kRefused},
      {Outcome::kRejected, RefundReason::kAccountUnavailable},
      {Outcome::kRejected, RefundReason::kUnknownAsset},
      {Outcome::kRejected, RefundReason::kInvalidAddress},
      {Outcome::kRejected, RefundReason::kRefused},
      {Outcome::kRejected, RefundReason::kInvalidAddress},
      {Outcome::kRejected, RefundReason::kInvalidAddress},
  };
  for (std::size_t i = 0; i < deliveries.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*results)[i].id, deliveries[i].id);
    EXPECT_EQ((*results)[i].outcome, want[i].first) << (*results)[i].msg;
    if (want[i].first == Outcome::kRejected) {
      EXPECT_EQ((*results)[i].reason, want[i].second);
    }
  }
  Reply again = call("shared-secret-0123456789", now + 1);
  ASSERT_EQ(again.status, 200) << again.body;
  auto repeated = transfer::DecodeResults(again.body);
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ((*repeated)[0].outcome, Outcome::kCredited);
  EXPECT_EQ((*repeated)[0].deposit_id, (*results)[0].deposit_id) << "the first credit stands";
  Reply acc = n.Signed(http::verb::get, "/api/v3/account", bob, "");
  ASSERT_EQ(acc.status, 200) << acc.body;
  EXPECT_EQ(Balance(acc, "BTC", "free"), "0.50000000") << "credited once";
  // The operator may not take a reference reserved for alpha's transfers.
  EXPECT_EQ(n.Deposit(bob.account, "BTC", "1", "alpha:99").status, 400);
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
  Reply stale = n.Signed(http::verb::get, "/api/v3/account", alice, "", WallMs() - 60'000);
  EXPECT_EQ(stale.Json().at("code").as_int64(), -1021);
  Reply future = n.Signed(http::verb::get, "/api/v3/account", alice, "", WallMs() + 5'000);
  EXPECT_EQ(future.Json().at("code").as_int64(), -1021);
  Reply no_sig = n.Request(http::verb::get, fmt::format("/api/v3/account?timestamp={}", WallMs()),
                           {}, {{"X-MBX-APIKEY", alice.key}});
  EXPECT_EQ(no_sig.Json().at("code").as_int64(), -1102);
  // A tampered parameter after signing.
  std::string params = fmt::format("symbol=BTCUSDT&timestamp={}", WallMs());
  const std::string sig = HmacSha256Hex(alice.secret, params);
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
  // The client order id of an open order: refused, as on Binance.
  EXPECT_EQ(dup.status, 400) << dup.body;
  EXPECT_EQ(dup.Json().at("code").as_int64(), -2010);
  EXPECT_EQ(dup.Json().at("msg").as_string(), "Duplicate order sent.");

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
  // Klines of every interval of Binance's, and in a time zone: a UTC+8 day
  // opens at 16:00 UTC; closeTime is the next open - 1.
  const int64_t traded = pub.Json().as_array()[0].at("time").as_int64();
  for (const char* iv : {"1s", "1m", "3m", "5m", "15m", "30m", "1h", "2h", "4h", "6h", "8h", "12h",
                         "1d", "3d", "1w", "1M"}) {
    Reply k =
        n.Request(http::verb::get, fmt::format("/api/v3/klines?symbol=BTCUSDT&interval={}", iv));
    ASSERT_EQ(k.status, 200) << iv << " " << k.body;
    ASSERT_EQ(k.Json().as_array().size(), 1u) << iv;
    EXPECT_EQ(k.Json().as_array()[0].as_array()[5].as_string(), "0.04000000") << iv;
  }
  constexpr int64_t kDayMs = 86'400'000;
  constexpr int64_t k8h = 8 * 3'600'000;
  const int64_t local_day = (traded + k8h) / kDayMs * kDayMs - k8h;
  for (const char* zone : {"%2B08:00", "8", "08:00"}) {
    for (const char* path : {"klines", "uiKlines"}) {
      Reply k =
          n.Request(http::verb::get,
                    fmt::format("/api/v3/{}?symbol=BTCUSDT&interval=1d&timeZone={}", path, zone));
      ASSERT_EQ(k.status, 200) << zone << " " << k.body;
      const json::value body = k.Json();
      const json::array& row = body.as_array().at(0).as_array();
      EXPECT_EQ(row[0].as_int64(), local_day) << zone;
      EXPECT_EQ(row[6].as_int64(), local_day + kDayMs - 1) << zone;
    }
  }
  for (const char* zone : {"15", "%2B14:01", "-12:30", "8:5", "UTC", ""}) {
    Reply bad =
        n.Request(http::verb::get,
                  fmt::format("/api/v3/klines?symbol=BTCUSDT&interval=1h&timeZone={}", zone));
    EXPECT_EQ(bad.status, 400) << zone;
    EXPECT_EQ(bad.Json().at("code").as_int64(), -1100) << zone << " " << bad.body;
  }
  // The average price, rolling window and trading day tickers.
  Reply avg = n.Request(http::verb::get, "/api/v3/avgPrice?symbol=BTCUSDT");
  ASSERT_EQ(avg.status, 200) << avg.body;
  EXPECT_EQ(avg.Json().at("mins").as_int64(), 5);
  EXPECT_EQ(avg.Json().at("price").as_string(), "30000.00000000");
  EXPECT_EQ(avg.Json().at("closeTime").as_int64(), traded);
  Reply hour = n.Request(http::verb::get, "/api/v3/ticker?symbol=BTCUSDT&windowSize=1h");
  ASSERT_EQ(hour.status, 200) << hour.body;
  const json::value hour_body = hour.Json();
  const json::object& h1 = hour_body.as_object();
  EXPECT_EQ(h1.at("count").as_int64(), 1);
  EXPECT_EQ(h1.at("lastPrice").as_string(), "30000.00000000");
  EXPECT_EQ(h1.at("volume").as_string(), "0.04000000");
  EXPECT_EQ(h1.at("closeTime").as_int64() - h1.at("openTime").as_int64(), 3'600'000);
  EXPECT_FALSE(h1.contains("prevClosePrice"));
  Reply minis = n.Request(http::verb::get,
                          "/api/v3/ticker?symbols=%5B%22BTCUSDT%22,%22ETHUSDT%22%5D&type=MINI");
  ASSERT_EQ(minis.status, 200) << minis.body;
  ASSERT_EQ(minis.Json().as_array().size(), 2u);
  EXPECT_FALSE(minis.Json().as_array()[0].as_object().contains("priceChange"));
  EXPECT_EQ(minis.Json().as_array()[1].at("count").as_int64(), 0);
  const int uw1 = std::stoi(minis.headers["X-MBX-USED-WEIGHT-1M"]);
  Reply week = n.Request(http::verb::get, "/api/v3/ticker?symbol=BTCUSDT&windowSize=7d");
  EXPECT_EQ(week.Json().at("count").as_int64(), 1);
  const int uw2 = std::stoi(week.headers["X-MBX-USED-WEIGHT-1M"]);
  EXPECT_TRUE(uw2 - uw1 == 4 || uw2 == 4) << uw1 << " " << uw2;  // 4 per symbol
  Reply day = n.Request(http::verb::get, "/api/v3/ticker/tradingDay?symbol=BTCUSDT&timeZone=8");
  ASSERT_EQ(day.status, 200) << day.body;
  EXPECT_EQ(day.Json().at("openTime").as_int64(), local_day);
  EXPECT_EQ(day.Json().at("closeTime").as_int64(), local_day + kDayMs - 1);
  EXPECT_EQ(day.Json().at("count").as_int64(), 1);
  Reply mini24 = n.Request(http::verb::get, "/api/v3/ticker/24hr?symbol=BTCUSDT&type=MINI");
  EXPECT_EQ(mini24.Json().at("lastPrice").as_string(), "30000.00000000");
  EXPECT_FALSE(mini24.Json().as_object().contains("bidPrice"));
  for (const char* bad :
       {"/api/v3/ticker", "/api/v3/ticker/tradingDay",
        "/api/v3/ticker?symbol=BTCUSDT&windowSize=60m",
        "/api/v3/ticker?symbol=BTCUSDT&windowSize=8d",
        "/api/v3/ticker?symbol=BTCUSDT&windowSize=0m", "/api/v3/ticker?symbol=BTCUSDT&type=BIG",
        "/api/v3/ticker/24hr?symbol=BTCUSDT&type=mini",
        "/api/v3/ticker/tradingDay?symbol=BTCUSDT&timeZone=15", "/api/v3/avgPrice",
        "/api/v3/avgPrice?symbol=NOPE"}) {
    Reply r = n.Request(http::verb::get, bad);
    EXPECT_EQ(r.status, 400) << bad;
    const int64_t code = r.Json().at("code").as_int64();
    EXPECT_TRUE(code == -1100 || code == -1102 || code == -1121 || code == -1139)
        << bad << " " << r.body;
  }
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

// An order answered with ACK is the engine's at once: an amend or a cancel
// sent before the read side shows it finds it (the engine decides, not the
// read side), and answers once its own events are durable.
TEST_F(GatewayTest, AmendAndCancelRightAfterAnAckPlacement) {
  std::atomic<bool> hold{false};
  NodeOptions no;
  no.hold_durable = &hold;
  Node n(dir_, no);
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);

  hold = true;  // from here the read side sees nothing new until released
  auto place = [&](const std::string& cid) {
    Reply r = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newOrderRespType=ACK&newClientOrderId=" +
                           cid);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().at("orderId").as_int64();
  };
  const int64_t a = place("quick-a");
  const int64_t b = place("quick-b");
  const int64_t c = place("quick-c");
  Reply amend_a, amend_b, cancel_c;
  std::thread ta([&] {
    amend_a = n.Signed(http::verb::put, "/api/v3/order/amend/keepPriority", alice,
                       fmt::format("symbol=BTCUSDT&orderId={}&newQty=0.04", a));
  });
  std::thread tb([&] {
    amend_b = n.Signed(http::verb::put, "/api/v3/order/amend/keepPriority", alice,
                       "symbol=BTCUSDT&origClientOrderId=quick-b&newQty=0.05&"
                       "newClientOrderId=quick-b");
  });
  std::thread tc([&] {
    cancel_c = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                        fmt::format("symbol=BTCUSDT&orderId={}&origClientOrderId=quick-c", c));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  hold = false;
  ta.join();
  tb.join();
  tc.join();

  ASSERT_EQ(amend_a.status, 200) << amend_a.body;
  const json::value ja = amend_a.Json();
  EXPECT_GT(ja.at("transactTime").as_int64(), 0);
  EXPECT_GT(ja.at("executionId").as_int64(), c);
  const json::object& o = ja.at("amendedOrder").as_object();
  std::vector<std::string> keys;
  for (const auto& kv : o) keys.emplace_back(kv.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"symbol", "orderId", "orderListId", "origClientOrderId",
                                            "clientOrderId", "price", "qty", "executedQty",
                                            "preventedQty", "quoteOrderQty", "cumulativeQuoteQty",
                                            "status", "timeInForce", "type", "side", "workingTime",
                                            "selfTradePreventionMode"}));
  EXPECT_EQ(o.at("orderId").as_int64(), a);
  EXPECT_EQ(o.at("origClientOrderId").as_string(), "quick-a");
  EXPECT_EQ(o.at("clientOrderId").as_string(), "quick-a");
  EXPECT_EQ(o.at("qty").as_string(), "0.04000000");
  EXPECT_EQ(o.at("status").as_string(), "NEW");
  ASSERT_EQ(amend_b.status, 200) << amend_b.body;
  EXPECT_EQ(amend_b.Json().at("amendedOrder").at("orderId").as_int64(), b);
  EXPECT_EQ(amend_b.Json().at("amendedOrder").at("qty").as_string(), "0.05000000");
  ASSERT_EQ(cancel_c.status, 200) << cancel_c.body;
  EXPECT_EQ(cancel_c.Json().at("orderId").as_int64(), c);
  EXPECT_EQ(cancel_c.Json().at("status").as_string(), "CANCELED");
  EXPECT_EQ(cancel_c.Json().at("origClientOrderId").as_string(), "quick-c");

  // The engine's refusals, each -2038 with Binance's text; nothing changes.
  auto amend = [&](const std::string& params) {
    return n.Signed(http::verb::put, "/api/v3/order/amend/keepPriority", alice,
                    "symbol=BTCUSDT&" + params);
  };
  Reply up = amend(fmt::format("orderId={}&newQty=0.05", a));
  EXPECT_EQ(up.status, 400);
  EXPECT_EQ(up.Json().at("code").as_int64(), -2038) << up.body;
  EXPECT_EQ(up.Json().at("msg").as_string(), "Order amend (quantity increase) is not supported.");
  Reply same = amend(fmt::format("orderId={}&newQty=0.04", a));
  EXPECT_EQ(same.Json().at("code").as_int64(), -2038) << same.body;
  EXPECT_EQ(same.Json().at("msg").as_string(),
            "The requested action would change no state; rejecting");
  Reply gone = amend(fmt::format("orderId={}&newQty=0.01", c));
  EXPECT_EQ(gone.Json().at("code").as_int64(), -2038) << gone.body;
  EXPECT_EQ(gone.Json().at("msg").as_string(), "Unknown order sent.");
  Reply pair = amend(fmt::format("orderId={}&origClientOrderId=quick-b&newQty=0.01", a));
  EXPECT_EQ(pair.Json().at("code").as_int64(), -2038) << pair.body;
  // newClientOrderId another open order holds: Binance's -2010.
  Reply taken = amend(fmt::format("orderId={}&newQty=0.01&newClientOrderId=quick-b", a));
  EXPECT_EQ(taken.status, 400);
  EXPECT_EQ(taken.Json().at("code").as_int64(), -2010) << taken.body;
  EXPECT_EQ(taken.Json().at("msg").as_string(), "Duplicate order sent.");
  Reply bad = amend(fmt::format("orderId={}&newQty=0.01&newClientOrderId=a%20b", a));
  EXPECT_EQ(bad.Json().at("code").as_int64(), -1100) << bad.body;
  Reply missing = amend("newQty=0.01");
  EXPECT_EQ(missing.Json().at("code").as_int64(), -1102) << missing.body;
  Reply get = n.Signed(http::verb::get, "/api/v3/order", alice,
                       fmt::format("symbol=BTCUSDT&orderId={}", a));
  EXPECT_EQ(get.Json().at("origQty").as_string(), "0.04000000") << get.body;
  EXPECT_EQ(get.Json().at("clientOrderId").as_string(), "quick-a") << get.body;

  // newClientOrderId: the amended order takes it (Binance).
  Reply renamed = amend(fmt::format("orderId={}&newQty=0.01&newClientOrderId=other", a));
  ASSERT_EQ(renamed.status, 200) << renamed.body;
  EXPECT_EQ(renamed.Json().at("amendedOrder").at("origClientOrderId").as_string(), "quick-a");
  EXPECT_EQ(renamed.Json().at("amendedOrder").at("clientOrderId").as_string(), "other");
  get = n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=other");
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.Json().at("orderId").as_int64(), a);
  EXPECT_EQ(get.Json().at("clientOrderId").as_string(), "other");
  EXPECT_EQ(get.Json().at("origQty").as_string(), "0.01000000");
  get =
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=quick-a");
  EXPECT_EQ(get.Json().at("code").as_int64(), -2013) << get.body;
  // Its previous id is free for a new order; the new one is not.
  Reply again = n.Signed(http::verb::post, "/api/v3/order", alice,
                         "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                         "price=30000&newClientOrderId=quick-a");
  EXPECT_EQ(again.status, 200) << again.body;
  Reply dup = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newClientOrderId=other");
  EXPECT_EQ(dup.Json().at("code").as_int64(), -2010) << dup.body;
  // The open orders show the new id.
  const Reply open = n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT");
  const json::value rows = open.Json();
  bool shown = false;
  for (const json::value& row : rows.as_array()) {
    if (row.at("orderId").as_int64() == a) shown = row.at("clientOrderId").as_string() == "other";
  }
  EXPECT_TRUE(shown) << open.body;
}

// Client order ids: Binance's rule by default (an open order's id refused, a
// closed order's id free for a new order); the idempotent rule as a venue
// setting answers a re-submission with the first order.
TEST_F(GatewayTest, ClientOrderIdOfAClosedOrderPlacesANewOrder) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  const std::string order =
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&price=30000&"
      "newClientOrderId=again&newOrderRespType=";
  Reply first = n.Signed(http::verb::post, "/api/v3/order", alice, order + "RESULT");
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t first_id = first.Json().at("orderId").as_int64();
  for (const char* resp : {"ACK", "RESULT"}) {
    Reply dup = n.Signed(http::verb::post, "/api/v3/order", alice, order + resp);
    EXPECT_EQ(dup.status, 400) << dup.body;
    EXPECT_EQ(dup.body, R"({"code":-2010,"msg":"Duplicate order sent."})");
  }
  ASSERT_EQ(n.Signed(http::verb::delete_, "/api/v3/order", alice,
                     fmt::format("symbol=BTCUSDT&orderId={}", first_id))
                .status,
            200);
  for (const char* resp : {"ACK", "RESULT"}) {
    Reply next = n.Signed(http::verb::post, "/api/v3/order", alice, order + resp);
    ASSERT_EQ(next.status, 200) << next.body;
    EXPECT_GT(next.Json().at("orderId").as_int64(), first_id);
    EXPECT_EQ(next.Json().at("clientOrderId").as_string(), "again");
    const int64_t id = next.Json().at("orderId").as_int64();
    Reply cancel = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                            "symbol=BTCUSDT&origClientOrderId=again");
    ASSERT_EQ(cancel.status, 200) << cancel.body;
    EXPECT_EQ(cancel.Json().at("orderId").as_int64(), id);
  }
}

TEST_F(GatewayTest, IdempotentClientOrderIdsAnswerAResubmissionWithTheFirstOrder) {
  NodeOptions no;
  no.client_order_ids = engine::ClientOrderIds::kIdempotent;
  Node n(dir_, no);
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  const std::string order =
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&price=30000&"
      "newClientOrderId=again&newOrderRespType=RESULT";
  Reply first = n.Signed(http::verb::post, "/api/v3/order", alice, order);
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t first_id = first.Json().at("orderId").as_int64();
  Reply dup = n.Signed(http::verb::post, "/api/v3/order", alice, order);
  ASSERT_EQ(dup.status, 200) << dup.body;
  EXPECT_EQ(dup.Json().at("orderId").as_int64(), first_id);
  ASSERT_EQ(n.Signed(http::verb::delete_, "/api/v3/order", alice,
                     fmt::format("symbol=BTCUSDT&orderId={}", first_id))
                .status,
            200);
  Reply closed = n.Signed(http::verb::post, "/api/v3/order", alice, order);
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(closed.Json().at("orderId").as_int64(), first_id);
  EXPECT_EQ(closed.Json().at("status").as_string(), "CANCELED");
}

// cancelReplace answers every combination as Binance does: 200 when both
// succeed, 409 -2021 when one of them failed, 400 -2022 when the cancel failed
// and the order was not attempted or failed too.
TEST_F(GatewayTest, CancelReplaceAnswersEachOutcomeAsBinance) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                     "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                     "price=30500")
                .status,
            200);
  auto rest = [&](const std::string& cid) {
    Reply r = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newClientOrderId=" +
                           cid);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().at("orderId").as_int64();
  };
  auto replace = [&](const std::string& mode, const std::string& cancel, const std::string& order) {
    return n.Signed(http::verb::post, "/api/v3/order/cancelReplace", alice,
                    "symbol=BTCUSDT&cancelReplaceMode=" + mode + "&" + cancel + "&" + order);
  };
  const std::string maker_that_takes = "side=BUY&type=LIMIT_MAKER&quantity=0.01&price=31000";
  const std::string good = "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=29000";
  auto data = [](const Reply& r) { return r.Json().at("data").as_object(); };

  // Canceled, then the engine refuses the new order: 409 -2021.
  const int64_t a = rest("cr-a");
  Reply taker = replace("STOP_ON_FAILURE", fmt::format("cancelOrderId={}", a), maker_that_takes);
  EXPECT_EQ(taker.status, 409) << taker.body;
  EXPECT_EQ(taker.Json().at("code").as_int64(), -2021);
  EXPECT_EQ(taker.Json().at("msg").as_string(), "Order cancel-replace partially failed.");
  EXPECT_EQ(data(taker).at("cancelResult").as_string(), "SUCCESS");
  EXPECT_EQ(data(taker).at("newOrderResult").as_string(), "FAILURE");
  EXPECT_EQ(data(taker).at("cancelResponse").at("orderId").as_int64(), a);
  EXPECT_EQ(data(taker).at("cancelResponse").at("status").as_string(), "CANCELED");
  EXPECT_EQ(data(taker).at("newOrderResponse").at("code").as_int64(), -2010);
  EXPECT_EQ(data(taker).at("newOrderResponse").at("msg").as_string(),
            "Order would immediately match and take.");
  // Canceled, then refused by the balance check: 409 -2021 too.
  const int64_t b = rest("cr-b");
  Reply poor = replace("STOP_ON_FAILURE", fmt::format("cancelOrderId={}", b),
                       "side=BUY&type=LIMIT&timeInForce=GTC&quantity=100&price=30000");
  EXPECT_EQ(poor.status, 409) << poor.body;
  EXPECT_EQ(data(poor).at("newOrderResponse").at("msg").as_string(),
            "Account has insufficient balance for requested action.");
  // The cancel fails: not attempted (400 -2022) or, allowed, placed (409 -2021).
  Reply stop = replace("STOP_ON_FAILURE", "cancelOrderId=999999", good);
  EXPECT_EQ(stop.status, 400) << stop.body;
  EXPECT_EQ(stop.Json().at("code").as_int64(), -2022);
  EXPECT_EQ(stop.Json().at("msg").as_string(), "Order cancel-replace failed.");
  EXPECT_EQ(data(stop).at("newOrderResult").as_string(), "NOT_ATTEMPTED");
  EXPECT_EQ(data(stop).at("cancelResponse").at("code").as_int64(), -2011);
  EXPECT_TRUE(data(stop).at("newOrderResponse").is_null());
  Reply allowed = replace("ALLOW_FAILURE", "cancelOrderId=999999", good);
  EXPECT_EQ(allowed.status, 409) << allowed.body;
  EXPECT_EQ(allowed.Json().at("code").as_int64(), -2021);
  EXPECT_EQ(data(allowed).at("cancelResult").as_string(), "FAILURE");
  EXPECT_EQ(data(allowed).at("newOrderResult").as_string(), "SUCCESS");
  EXPECT_EQ(data(allowed).at("cancelResponse").at("msg").as_string(), "Unknown order sent.");
  EXPECT_GT(data(allowed).at("newOrderResponse").at("orderId").as_int64(), b);
  // Both fail: 400 -2022.
  Reply both = replace("ALLOW_FAILURE", "cancelOrderId=999999", maker_that_takes);
  EXPECT_EQ(both.status, 400) << both.body;
  EXPECT_EQ(both.Json().at("code").as_int64(), -2022);
  EXPECT_EQ(data(both).at("newOrderResult").as_string(), "FAILURE");
  EXPECT_EQ(data(both).at("newOrderResponse").at("code").as_int64(), -2010);

  // Both ids must name the same order; cancelRestrictions are the engine's.
  const int64_t c = rest("cr-c");
  Reply pair = replace("STOP_ON_FAILURE",
                       fmt::format("cancelOrderId={}&cancelOrigClientOrderId=cr-a", c), good);
  EXPECT_EQ(pair.status, 400) << pair.body;
  EXPECT_EQ(data(pair).at("cancelResponse").at("msg").as_string(), "Unknown order sent.");
  Reply restricted =
      replace("STOP_ON_FAILURE",
              fmt::format("cancelOrderId={}&cancelRestrictions=ONLY_PARTIALLY_FILLED", c), good);
  EXPECT_EQ(restricted.status, 400) << restricted.body;
  EXPECT_EQ(data(restricted).at("cancelResponse").at("code").as_int64(), -2011);
  EXPECT_EQ(data(restricted).at("cancelResponse").at("msg").as_string(),
            "Order was not canceled due to cancel restrictions.");
  Reply bad =
      replace("STOP_ON_FAILURE", fmt::format("cancelOrderId={}&cancelRestrictions=NEW", c), good);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.body, R"({"code":-1145,"msg":"Invalid cancelRestrictions"})");
  // Both succeed.
  Reply ok = replace("STOP_ON_FAILURE",
                     fmt::format("cancelOrderId={}&cancelOrigClientOrderId=cr-c&"
                                 "cancelRestrictions=ONLY_NEW",
                                 c),
                     good);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json().at("cancelResult").as_string(), "SUCCESS");
  EXPECT_EQ(ok.Json().at("newOrderResult").as_string(), "SUCCESS");
  EXPECT_EQ(ok.Json().at("cancelResponse").at("orderId").as_int64(), c);
}

// GET and DELETE /api/v3/order with both ids, and DELETE's cancelRestrictions.
TEST_F(GatewayTest, BothOrderIdsAndCancelRestrictions) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  Reply placed = n.Signed(http::verb::post, "/api/v3/order", alice,
                          "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                          "price=30000&newClientOrderId=both-1");
  ASSERT_EQ(placed.status, 200) << placed.body;
  const int64_t id = placed.Json().at("orderId").as_int64();
  Reply wrong = n.Signed(http::verb::get, "/api/v3/order", alice,
                         fmt::format("symbol=BTCUSDT&orderId={}&origClientOrderId=other", id));
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(wrong.body,
            R"({"code":-2039,"msg":"Client order ID is not correct for this order ID."})");
  Reply right = n.Signed(http::verb::get, "/api/v3/order", alice,
                         fmt::format("symbol=BTCUSDT&orderId={}&origClientOrderId=both-1", id));
  ASSERT_EQ(right.status, 200) << right.body;
  EXPECT_EQ(right.Json().at("orderId").as_int64(), id);

  auto cancel = [&](const std::string& params) {
    return n.Signed(http::verb::delete_, "/api/v3/order", alice,
                    fmt::format("symbol=BTCUSDT&orderId={}&", id) + params);
  };
  Reply pair = cancel("origClientOrderId=other");
  EXPECT_EQ(pair.Json().at("code").as_int64(), -2011) << pair.body;
  Reply bad = cancel("cancelRestrictions=ANY");
  EXPECT_EQ(bad.body, R"({"code":-1145,"msg":"Invalid cancelRestrictions"})");
  Reply not_partial = cancel("cancelRestrictions=ONLY_PARTIALLY_FILLED");
  EXPECT_EQ(not_partial.status, 400);
  EXPECT_EQ(not_partial.body,
            R"({"code":-2011,"msg":"Order was not canceled due to cancel restrictions."})");
  // Partly filled: ONLY_NEW refused, ONLY_PARTIALLY_FILLED cancels.
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                     "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.04")
                .status,
            200);
  Reply not_new = cancel("cancelRestrictions=ONLY_NEW");
  EXPECT_EQ(not_new.Json().at("code").as_int64(), -2011) << not_new.body;
  Reply done = cancel("origClientOrderId=both-1&cancelRestrictions=ONLY_PARTIALLY_FILLED");
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.Json().at("status").as_string(), "CANCELED");
  EXPECT_EQ(done.Json().at("executedQty").as_string(), "0.04000000");
}

// A cancel gets its own client order id (newClientOrderId on DELETE,
// cancelNewClientOrderId on cancelReplace, generated otherwise);
// origClientOrderId is the order's. Expired orders say why.
TEST_F(GatewayTest, CancelAnswersCarryTheCancelsClientIdAndExpiriesTheirReason) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(alice.account, "BTC", "1", "b").status, 200);
  auto rest = [&](const std::string& cid) {
    Reply r = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                       "price=30000&newClientOrderId=" +
                           cid);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().at("orderId").as_int64();
  };
  const int64_t a = rest("order-a");
  Reply generated = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                             fmt::format("symbol=BTCUSDT&orderId={}", a));
  ASSERT_EQ(generated.status, 200) << generated.body;
  EXPECT_EQ(generated.Json().at("origClientOrderId").as_string(), "order-a");
  const std::string cancel_id(generated.Json().at("clientOrderId").as_string());
  EXPECT_NE(cancel_id, "order-a");
  EXPECT_EQ(cancel_id.size(), 25u) << cancel_id;

  rest("order-b");
  Reply named = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                         "symbol=BTCUSDT&origClientOrderId=order-b&newClientOrderId=cancel-b");
  ASSERT_EQ(named.status, 200) << named.body;
  EXPECT_EQ(named.Json().at("origClientOrderId").as_string(), "order-b");
  EXPECT_EQ(named.Json().at("clientOrderId").as_string(), "cancel-b");
  const int64_t c = rest("order-c");
  Reply illegal = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                           fmt::format("symbol=BTCUSDT&orderId={}&newClientOrderId=a%20b", c));
  EXPECT_EQ(illegal.Json().at("code").as_int64(), -1100) << illegal.body;

  Reply replaced = n.Signed(http::verb::post, "/api/v3/order/cancelReplace", alice,
                            fmt::format("symbol=BTCUSDT&cancelReplaceMode=STOP_ON_FAILURE&"
                                        "cancelOrderId={}&cancelNewClientOrderId=cancel-c&"
                                        "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                                        "price=29000&newClientOrderId=order-d",
                                        c));
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  EXPECT_EQ(replaced.Json().at("cancelResponse").at("origClientOrderId").as_string(), "order-c");
  EXPECT_EQ(replaced.Json().at("cancelResponse").at("clientOrderId").as_string(), "cancel-c");
  rest("order-e");
  Reply all = n.Signed(http::verb::delete_, "/api/v3/openOrders", alice, "symbol=BTCUSDT");
  const json::value canceled = all.Json();
  ASSERT_EQ(canceled.as_array().size(), 2u) << all.body;
  for (const json::value& o : canceled.as_array()) {
    EXPECT_NE(o.at("clientOrderId"), o.at("origClientOrderId")) << all.body;
  }

  // Expiries: an IOC's remainder, and self-trade prevention.
  Reply ioc = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=IOC&quantity=0.01&"
                       "price=30000&newOrderRespType=RESULT");
  ASSERT_EQ(ioc.status, 200) << ioc.body;
  EXPECT_EQ(ioc.Json().at("status").as_string(), "EXPIRED");
  EXPECT_EQ(ioc.Json().at("expiryReason").as_string(), "UNFILLED_IOC_QUANTITY_EXPIRED");
  rest("maker");
  Reply stp = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.03&"
                       "price=30000&selfTradePreventionMode=EXPIRE_TAKER&"
                       "newOrderRespType=RESULT");
  ASSERT_EQ(stp.status, 200) << stp.body;
  EXPECT_EQ(stp.Json().at("status").as_string(), "EXPIRED_IN_MATCH");
  EXPECT_EQ(stp.Json().at("preventedQuantity").as_string(), "0.03000000");
  EXPECT_FALSE(stp.Json().as_object().contains("expiryReason"));
  Reply get =
      n.Signed(http::verb::get, "/api/v3/order", alice,
               fmt::format("symbol=BTCUSDT&orderId={}", stp.Json().at("orderId").as_int64()));
  EXPECT_EQ(get.Json().at("preventedQuantity").as_string(), "0.03000000") << get.body;
  EXPECT_EQ(get.Json().at("status").as_string(), "EXPIRED_IN_MATCH") << get.body;
}

// A FOK that cannot fill completely is, as on Binance, an order that
// EXPIRED: HTTP 200 with its order id, nothing executed, nothing locked, the
// book untouched; queryable afterwards like any closed order.
TEST_F(GatewayTest, UnfillableFokIsAnOrderThatExpired) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);
  Reply ask = n.Signed(http::verb::post, "/api/v3/order", bob,
                       "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.02&"
                       "price=32000");
  ASSERT_EQ(ask.status, 200) << ask.body;
  const uint64_t seq_before = n.client().AppliedSeq();

  Reply fok = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=0.05&"
                       "price=32000&newClientOrderId=fok-1&newOrderRespType=FULL");
  ASSERT_EQ(fok.status, 200) << fok.body;
  const json::value f = fok.Json();
  EXPECT_EQ(f.at("status").as_string(), "EXPIRED");
  EXPECT_EQ(f.at("timeInForce").as_string(), "FOK");
  EXPECT_EQ(f.at("clientOrderId").as_string(), "fok-1");
  EXPECT_EQ(f.at("origQty").as_string(), "0.05000000");
  EXPECT_EQ(f.at("executedQty").as_string(), "0.00000000");
  EXPECT_EQ(f.at("cummulativeQuoteQty").as_string(), "0.00000000");
  EXPECT_TRUE(f.at("fills").as_array().empty());
  const int64_t fok_id = f.at("orderId").as_int64();
  EXPECT_EQ(static_cast<uint64_t>(fok_id), seq_before + 1);  // the order id is its sequence

  Reply a = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(a, "USDT", "free"), "100000.00000000");
  EXPECT_EQ(Balance(a, "USDT", "locked"), "0.00000000");
  EXPECT_EQ(Balance(a, "BTC", "free"), "0.00000000");
  Reply depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT");
  ASSERT_EQ(depth.Json().at("asks").as_array().size(), 1u) << depth.body;
  EXPECT_EQ(depth.Json().at("asks").as_array()[0].as_array()[1].as_string(), "0.02000000");
  EXPECT_TRUE(
      n.Request(http::verb::get, "/api/v3/trades?symbol=BTCUSDT").Json().as_array().empty());
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT").body, "[]");

  // Queryable by id and by client id, and listed.
  for (const std::string& q :
       {fmt::format("orderId={}", fok_id), std::string("origClientOrderId=fok-1")}) {
    Reply get = n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&" + q);
    ASSERT_EQ(get.status, 200) << q << ": " << get.body;
    EXPECT_EQ(get.Json().at("orderId").as_int64(), fok_id);
    EXPECT_EQ(get.Json().at("status").as_string(), "EXPIRED");
    EXPECT_EQ(get.Json().at("timeInForce").as_string(), "FOK");
    EXPECT_EQ(get.Json().at("executedQty").as_string(), "0.00000000");
    EXPECT_FALSE(get.Json().at("isWorking").as_bool());
  }
  Reply all = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(all.Json().as_array().size(), 1u) << all.body;
  EXPECT_EQ(all.Json().as_array()[0].at("orderId").as_int64(), fok_id);
  EXPECT_EQ(all.Json().as_array()[0].at("status").as_string(), "EXPIRED");

  // Its client order id is free again (Binance's rule): a re-submission is a
  // new order.
  Reply again = n.Signed(http::verb::post, "/api/v3/order", alice,
                         "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=0.05&"
                         "price=32000&newClientOrderId=fok-1&newOrderRespType=RESULT");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(again.Json().at("orderId").as_int64(), fok_id);
  EXPECT_EQ(again.Json().at("status").as_string(), "EXPIRED");
  const int64_t again_id = again.Json().at("orderId").as_int64();

  // RESULT and ACK answers.
  Reply result = n.Signed(http::verb::post, "/api/v3/order", alice,
                          "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=0.03&"
                          "price=32000&newOrderRespType=RESULT");
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.Json().at("status").as_string(), "EXPIRED");
  EXPECT_EQ(result.Json().at("executedQty").as_string(), "0.00000000");
  EXPECT_GT(result.Json().at("orderId").as_int64(), again_id);
  Reply ack = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=0.03&"
                       "price=32000&newOrderRespType=ACK");
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_GT(ack.Json().at("orderId").as_int64(), result.Json().at("orderId").as_int64());

  // A FOK that can fill does.
  Reply fill = n.Signed(http::verb::post, "/api/v3/order", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=0.02&"
                        "price=32000&newOrderRespType=RESULT");
  ASSERT_EQ(fill.status, 200) << fill.body;
  EXPECT_EQ(fill.Json().at("status").as_string(), "FILLED");
  EXPECT_EQ(fill.Json().at("executedQty").as_string(), "0.02000000");
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

// The gateway's time is the clock in its options: serverTime, creation times,
// the recvWindow edges and the rate limit's refill follow a ManualClock exactly.
TEST_F(GatewayTest, TimeComesFromTheGivenClock) {
  ManualClock clock;
  gateway::GatewayOptions go;
  go.clock = &clock;
  go.key_limit.weight_per_minute = 60;  // one weight a second
  go.key_limit.burst = 40;
  Node n(dir_, go);
  const int64_t now = clock.wall_ms();
  EXPECT_EQ(n.Request(http::verb::get, "/api/v3/time").Json().at("serverTime").as_int64(), now);
  auto alice = n.NewAccount("alice");
  EXPECT_EQ(n.Admin(http::verb::get, fmt::format("accounts/{}", alice.account))
                .Json()
                .at("createdTime")
                .as_int64(),
            now);

  // recvWindow=5000: 5000 ms old is in, 5001 out; 999 ms ahead is in, 1000 out.
  auto open_orders = [&](int64_t timestamp) {
    return n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT", timestamp);
  };
  EXPECT_EQ(open_orders(now - 5000).status, 200);
  EXPECT_EQ(open_orders(now - 5001).Json().at("code").as_int64(), -1021);
  EXPECT_EQ(open_orders(now + 999).status, 200);
  EXPECT_EQ(open_orders(now + 1000).Json().at("code").as_int64(), -1021);

  // 12 of the 40 weight taken (openOrders of one symbol weighs 6; refused
  // requests take none). /account weighs 20: once, then 8 are left and it waits 12 s.
  auto account = [&] {
    return n.Signed(http::verb::get, "/api/v3/account", alice, "", clock.wall_ms());
  };
  EXPECT_EQ(account().status, 200);
  Reply refused = account();
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.headers["Retry-After"], "12");
  clock.Advance(std::chrono::seconds(11));
  EXPECT_EQ(account().status, 429);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(account().status, 200);
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

// ---- history from the projection ----

NodeOptions WithProjection(bool twin = false) {
  NodeOptions o;
  o.projection = true;
  o.twin = twin;
  return o;
}

std::string Str(const json::value& v, std::string_view key) {
  return std::string(v.at(key).as_string());
}
uint64_t Id(const json::value& v, std::string_view key) { return v.at(key).to_number<uint64_t>(); }

// Waits until the twin's read side has applied what the main one has.
void AwaitTwin(Node& n) {
  const uint64_t target = n.client().AppliedSeq();
  for (int i = 0; i < 500 && n.twin().AppliedSeq() < target; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(n.twin().AppliedSeq(), target);
}

// Every ledger line of an account, fetched `limit` lines a page.
std::vector<json::value> LedgerLines(Client& c, uint32_t account, std::size_t limit) {
  std::vector<json::value> lines;
  uint64_t from = 0;
  for (int page = 0; page < 1000; ++page) {
    Reply r = c.Admin(http::verb::get,
                      fmt::format("accounts/{}/ledger?fromSeq={}&limit={}", account, from, limit));
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) break;
    const json::value v = r.Json();
    EXPECT_EQ(Id(v, "accountId"), account);
    const json::array& entries = v.at("entries").as_array();
    if (entries.empty()) break;
    for (const json::value& e : entries) lines.push_back(e);
    from = Id(entries.back(), "seq") + 1;
  }
  return lines;
}

// Sums the lines per (asset, bucket) and checks them against balances given
// as {"asset","free","locked"} objects.
void ExpectLedgerMatchesBalances(const engine::EngineConfig& config,
                                 const std::vector<json::value>& lines,
                                 const json::array& balances) {
  std::map<std::string, int64_t> sums;  // "BTC/AVAILABLE" -> units
  for (const json::value& l : lines) {
    const std::string asset = Str(l, "asset");
    int scale = -1;
    for (const auto& a : config.assets) {
      if (a.symbol == asset) scale = a.scale;
    }
    ASSERT_GE(scale, 0) << asset;
    auto units = ParseDecimal(Str(l, "delta"), scale, true);
    ASSERT_TRUE(units.ok()) << Str(l, "delta");
    sums[asset + "/" + Str(l, "bucket")] += *units;
  }
  ASSERT_EQ(balances.size(), config.assets.size());
  for (const json::value& b : balances) {
    const std::string asset = Str(b, "asset");
    int scale = 0;
    for (const auto& a : config.assets) {
      if (a.symbol == asset) scale = a.scale;
    }
    EXPECT_EQ(FormatDecimal(sums[asset + "/AVAILABLE"], scale), Str(b, "free")) << asset;
    EXPECT_EQ(FormatDecimal(sums[asset + "/LOCKED"], scale), Str(b, "locked")) << asset;
  }
}

// Orders placed, filled, expired and cancelled through HTTP; the history
// endpoints answered from the projection must equal, byte for byte, what a
// read-side gateway on the same exchange answers, and agree with the live
// RESULT / FULL / cancel answers field by field.
TEST_F(GatewayTest, HistoryFromTheProjectionEqualsTheReadSide) {
  Node n(dir_, WithProjection(/*twin=*/true));
  Client& twin = n.twin();
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  // The twin serves the same accounts and keys: they are journal records.
  const auto t_alice = alice;
  const auto t_bob = bob;
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);

  auto place = [&](const Node::Keys& k, const std::string& params) {
    Reply r = n.Signed(http::verb::post, "/api/v3/order", k, "symbol=BTCUSDT&" + params);
    EXPECT_EQ(r.status, 200) << params << ": " << r.body;
    return r.Json();
  };
  auto cancel = [&](const Node::Keys& k, const std::string& params) {
    Reply r = n.Signed(http::verb::delete_, "/api/v3/order", k, "symbol=BTCUSDT&" + params);
    EXPECT_EQ(r.status, 200) << params << ": " << r.body;
    return r.Json();
  };
  const json::value a1 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&price=30000&"
                               "newClientOrderId=alice-1&newOrderRespType=RESULT");
  const json::value b1 = place(bob,
                               "side=SELL&type=MARKET&quantity=0.04&newClientOrderId=bob-1&"
                               "newOrderRespType=FULL");
  const json::value a2 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.05&price=29000&"
                               "newClientOrderId=alice-2&newOrderRespType=RESULT");
  const json::value a2_cancel = cancel(alice, "origClientOrderId=alice-2");
  // Fills alice-1's remaining 0.06; the IOC's rest expires.
  const json::value b2 = place(bob,
                               "side=SELL&type=LIMIT&timeInForce=IOC&quantity=0.1&price=30000&"
                               "newClientOrderId=bob-2&newOrderRespType=FULL");
  const json::value a3 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=IOC&quantity=0.01&price=1000&"
                               "newClientOrderId=alice-3&newOrderRespType=RESULT");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const json::value b3 = place(bob,
                               "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.5&price=31000&"
                               "newClientOrderId=bob-3&newOrderRespType=RESULT");
  const json::value a4 = place(alice,
                               "side=BUY&type=MARKET&quantity=0.2&newClientOrderId=alice-4&"
                               "newOrderRespType=FULL");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const json::value a5 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.02&price=28000&"
                               "newClientOrderId=alice-5&newOrderRespType=RESULT");
  const json::value a6 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=25000&"
                               "newClientOrderId=alice-6&newOrderRespType=RESULT");
  const json::value a6_cancel = cancel(alice, fmt::format("orderId={}", Id(a6, "orderId")));
  const json::value b4 = place(bob,
                               "side=SELL&type=MARKET&quantity=0.01&newClientOrderId=bob-4&"
                               "newOrderRespType=FULL");
  // More than bob-3's 0.3 left at 31000: an order that expires, nothing traded.
  const json::value a7 = place(alice,
                               "side=BUY&type=LIMIT&timeInForce=FOK&quantity=1&price=31000&"
                               "newClientOrderId=alice-7&newOrderRespType=FULL");
  EXPECT_EQ(Str(a1, "status"), "NEW");
  EXPECT_EQ(Str(b1, "status"), "FILLED");
  EXPECT_EQ(Str(a2_cancel, "status"), "CANCELED");
  EXPECT_EQ(Str(b2, "status"), "EXPIRED");
  EXPECT_EQ(Str(a3, "status"), "EXPIRED");
  EXPECT_EQ(Str(b3, "status"), "NEW");
  EXPECT_EQ(Str(a4, "status"), "FILLED");
  EXPECT_EQ(Str(a5, "status"), "NEW");
  EXPECT_EQ(Str(b4, "status"), "FILLED");  // into alice-5, partially
  EXPECT_EQ(Str(a7, "status"), "EXPIRED");
  EXPECT_EQ(Str(a7, "executedQty"), "0.00000000");
  AwaitTwin(n);

  // The same request to both gateways: the same answer.
  auto same = [&](const std::string& path, const Node::Keys& k, const Node::Keys& tk,
                  const std::string& params) {
    Reply p = n.Signed(http::verb::get, path, k, params);
    Reply t = twin.Signed(http::verb::get, path, tk, params);
    EXPECT_EQ(p.status, t.status) << path << "?" << params << ": " << p.body << " / " << t.body;
    EXPECT_EQ(p.body, t.body) << path << "?" << params;
    return p;
  };
  const uint64_t a1_id = Id(a1, "orderId"), a2_id = Id(a2, "orderId");
  const uint64_t b3_id = Id(b3, "orderId");
  const int64_t t_b3 = b3.at("transactTime").as_int64();
  const int64_t t_a3 = a3.at("transactTime").as_int64();
  for (const auto& [k, tk] : {std::pair{alice, t_alice}, std::pair{bob, t_bob}}) {
    Reply all = same("/api/v3/allOrders", k, tk, "symbol=BTCUSDT");
    EXPECT_EQ(all.status, 200) << all.body;
    EXPECT_EQ(all.Json().as_array().size(), k.account == alice.account ? 7u : 4u);
    for (const std::string q : {"limit=2", "limit=1", "limit=1000"}) {
      same("/api/v3/allOrders", k, tk, "symbol=BTCUSDT&" + q);
    }
    for (const uint64_t from : {a1_id, a2_id, b3_id, b3_id + 1000}) {
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&orderId={}", from));
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&orderId={}&limit=2", from));
    }
    for (const int64_t t : {t_b3, t_a3}) {
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&startTime={}", t));
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&startTime={}&limit=1", t));
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&endTime={}", t));
      same("/api/v3/allOrders", k, tk, fmt::format("symbol=BTCUSDT&endTime={}&limit=1", t));
      same("/api/v3/allOrders", k, tk,
           fmt::format("symbol=BTCUSDT&startTime={}&endTime={}", t_a3, t));
    }
    EXPECT_EQ(same("/api/v3/allOrders", k, tk, "symbol=ETHUSDT").body, "[]");

    Reply trades = same("/api/v3/myTrades", k, tk, "symbol=BTCUSDT");
    ASSERT_EQ(trades.status, 200) << trades.body;
    const json::value trades_json = trades.Json();
    const json::array& tr = trades_json.as_array();
    ASSERT_EQ(tr.size(), 4u) << trades.body;
    for (const std::string q : {"limit=1", "limit=3"}) {
      same("/api/v3/myTrades", k, tk, "symbol=BTCUSDT&" + q);
    }
    for (const json::value& t : tr) {
      same("/api/v3/myTrades", k, tk, fmt::format("symbol=BTCUSDT&fromId={}", Id(t, "id")));
      same("/api/v3/myTrades", k, tk, fmt::format("symbol=BTCUSDT&fromId={}&limit=1", Id(t, "id")));
      same("/api/v3/myTrades", k, tk, fmt::format("symbol=BTCUSDT&orderId={}", Id(t, "orderId")));
      same("/api/v3/myTrades", k, tk,
           fmt::format("symbol=BTCUSDT&startTime={}", t.at("time").as_int64()));
      same("/api/v3/myTrades", k, tk,
           fmt::format("symbol=BTCUSDT&endTime={}", t.at("time").as_int64()));
    }

    // Every order by id and by client id; the closed ones come from the
    // projection.
    const json::value all_json = all.Json();
    for (const json::value& o : all_json.as_array()) {
      Reply by_id =
          same("/api/v3/order", k, tk, fmt::format("symbol=BTCUSDT&orderId={}", Id(o, "orderId")));
      EXPECT_EQ(by_id.status, 200);
      EXPECT_EQ(by_id.Json(), o);
      same("/api/v3/order", k, tk, "symbol=BTCUSDT&origClientOrderId=" + Str(o, "clientOrderId"));
    }
  }
  EXPECT_EQ(
      same("/api/v3/order", alice, t_alice, "symbol=BTCUSDT&orderId=999999").Json().at("code"),
      -2013);
  EXPECT_EQ(same("/api/v3/order", alice, t_alice, "symbol=BTCUSDT&origClientOrderId=nope").status,
            400);

  // The live answers, field by field.
  auto get = [&](const Node::Keys& k, uint64_t id) {
    Reply r =
        n.Signed(http::verb::get, "/api/v3/order", k, fmt::format("symbol=BTCUSDT&orderId={}", id));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  };
  for (const auto& [k, live] :
       {std::pair{alice, a1}, std::pair{bob, b1}, std::pair{alice, a2}, std::pair{bob, b2},
        std::pair{alice, a3}, std::pair{alice, a4}, std::pair{alice, a7}}) {
    const json::value h = get(k, Id(live, "orderId"));
    for (const char* f : {"symbol", "orderId", "clientOrderId", "price", "origQty", "side", "type",
                          "timeInForce", "workingTime", "selfTradePreventionMode"}) {
      EXPECT_EQ(h.at(f), live.at(f)) << f << " of " << live;
    }
    EXPECT_EQ(h.at("time"), live.at("transactTime"));
    if (Str(live, "status") != "NEW") {
      for (const char* f : {"status", "executedQty", "cummulativeQuoteQty"}) {
        EXPECT_EQ(h.at(f), live.at(f)) << f << " of " << live;
      }
    }
  }
  const json::value a1_now = get(alice, a1_id);
  EXPECT_EQ(Str(a1_now, "status"), "FILLED");
  EXPECT_EQ(Str(a1_now, "executedQty"), "0.10000000");
  EXPECT_FALSE(a1_now.at("isWorking").as_bool());
  for (const json::value& c : {a2_cancel, a6_cancel}) {
    const json::value h = get(alice, Id(c, "orderId"));
    EXPECT_EQ(h.at("clientOrderId"), c.at("origClientOrderId"));
    for (const char* f : {"symbol", "orderId", "price", "origQty", "executedQty",
                          "cummulativeQuoteQty", "status", "timeInForce", "type", "side"}) {
      EXPECT_EQ(h.at(f), c.at(f)) << f << " of " << c;
    }
  }
  // Fills in myTrades as the FULL answers gave them.
  auto trades_of = [&](const Node::Keys& k, uint64_t order) {
    Reply r = n.Signed(http::verb::get, "/api/v3/myTrades", k,
                       fmt::format("symbol=BTCUSDT&orderId={}", order));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().as_array();
  };
  for (const auto& [k, live] :
       {std::pair{bob, b1}, std::pair{bob, b2}, std::pair{alice, a4}, std::pair{bob, b4}}) {
    const json::array fills = live.at("fills").as_array();
    const json::array hist = trades_of(k, Id(live, "orderId"));
    ASSERT_EQ(hist.size(), fills.size()) << live;
    for (std::size_t i = 0; i < fills.size(); ++i) {
      EXPECT_EQ(hist[i].at("id"), fills[i].at("tradeId"));
      for (const char* f : {"price", "qty", "commission", "commissionAsset"}) {
        EXPECT_EQ(hist[i].at(f), fills[i].at(f)) << f << " of " << live;
      }
      EXPECT_FALSE(hist[i].at("isMaker").as_bool());
      EXPECT_EQ(hist[i].at("isBuyer").as_bool(), Str(live, "side") == "BUY");
      EXPECT_EQ(hist[i].at("time"), live.at("transactTime"));
    }
  }
  // The maker side of b1's fill.
  const json::array maker = trades_of(alice, a1_id);
  ASSERT_EQ(maker.size(), 2u);
  EXPECT_TRUE(maker[0].at("isMaker").as_bool());
  EXPECT_EQ(maker[0].at("id"), b1.at("fills").as_array()[0].at("tradeId"));
  EXPECT_EQ(Str(maker[0], "qty"), "0.04000000");
  // An open order (from the read side), then, once cancelled, the same order
  // from the projection.
  Reply open =
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=alice-5");
  EXPECT_EQ(Id(open.Json(), "orderId"), Id(a5, "orderId"));
  EXPECT_EQ(Str(open.Json(), "status"), "PARTIALLY_FILLED");
  EXPECT_TRUE(open.Json().at("isWorking").as_bool());
  cancel(alice, "origClientOrderId=alice-5");
  AwaitTwin(n);
  Reply closed = same("/api/v3/order", alice, t_alice, "symbol=BTCUSDT&origClientOrderId=alice-5");
  EXPECT_EQ(Id(closed.Json(), "orderId"), Id(a5, "orderId"));
  EXPECT_EQ(Str(closed.Json(), "status"), "CANCELED");
  EXPECT_EQ(Str(closed.Json(), "executedQty"), "0.01000000");
  same("/api/v3/allOrders", alice, t_alice, "symbol=BTCUSDT");
}

// Order lists from the projection: allOrderList and GET orderList (by id and
// by list client id) answer byte for byte as a read-side gateway does, and
// allOrders carries each order's list id and iceberg slice. After a restart
// the projection still has the lists done before it (the read side has lost
// them) and the open list's client ids (the read side's snapshot has none).
TEST_F(GatewayTest, OrderListsFromTheProjection) {
  Node n(dir_, WithProjection(/*twin=*/true));
  Client& twin = n.twin();
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  const auto t_alice = alice;  // the twin serves the journal's keys too
  const auto t_bob = bob;
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);
  auto post = [&](const Node::Keys& k, const std::string& path, const std::string& params) {
    Reply r = n.Signed(http::verb::post, path, k, "symbol=BTCUSDT&" + params);
    EXPECT_EQ(r.status, 200) << path << "?" << params << ": " << r.body;
    return r.Json();
  };
  // The last price: 30000.
  post(bob, "/api/v3/order", "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=30000");
  post(alice, "/api/v3/order", "side=BUY&type=MARKET&quantity=0.01");
  // Alice buys 0.02 at 29000, then sells it at 31000 as an iceberg.
  const uint64_t oto =
      Id(post(alice, "/api/v3/orderList/oto",
              "listClientOrderId=oto-1&workingType=LIMIT&workingSide=BUY&workingPrice=29000&"
              "workingQuantity=0.02&workingTimeInForce=GTC&workingClientOrderId=w-1&"
              "pendingType=LIMIT&pendingSide=SELL&pendingPrice=31000&pendingQuantity=0.02&"
              "pendingTimeInForce=GTC&pendingIcebergQty=0.01&pendingClientOrderId=p-1"),
         "orderListId");
  // Bob sells 0.05 at 32000 or on a fall to 28000.
  post(bob, "/api/v3/orderList/oco",
       "listClientOrderId=oco-1&side=SELL&quantity=0.05&aboveType=LIMIT_MAKER&abovePrice=32000&"
       "belowType=STOP_LOSS_LIMIT&belowStopPrice=28000&belowPrice=27900&belowTimeInForce=GTC");
  // Bob fills Alice's working order: her pending sell is placed.
  post(bob, "/api/v3/order", "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.02&price=29000");
  // Alice's second OTO, canceled whole: its pending order CANCELED, done.
  const json::value second =
      post(alice, "/api/v3/orderList/oto",
           "listClientOrderId=oto-2&workingType=LIMIT&workingSide=BUY&workingPrice=28500&"
           "workingQuantity=0.01&workingTimeInForce=GTC&pendingType=LIMIT&pendingSide=SELL&"
           "pendingPrice=33000&pendingQuantity=0.01&pendingTimeInForce=GTC");
  const uint64_t oto2 = Id(second, "orderListId");
  const int64_t oto2_ms = second.at("transactionTime").as_int64();
  Reply c = n.Signed(http::verb::delete_, "/api/v3/orderList", alice,
                     "symbol=BTCUSDT&listClientOrderId=oto-2");
  ASSERT_EQ(c.status, 200) << c.body;
  AwaitTwin(n);

  auto same = [&](const std::string& path, const Node::Keys& k, const Node::Keys& tk,
                  const std::string& params) {
    Reply p = n.Signed(http::verb::get, path, k, params);
    Reply t = twin.Signed(http::verb::get, path, tk, params);
    EXPECT_EQ(p.status, t.status) << path << "?" << params << ": " << p.body << " / " << t.body;
    EXPECT_EQ(p.body, t.body) << path << "?" << params;
    return p;
  };
  for (const auto& [k, tk] : {std::pair{alice, t_alice}, std::pair{bob, t_bob}}) {
    const Reply all = same("/api/v3/allOrderList", k, tk, "");
    ASSERT_EQ(all.status, 200) << all.body;
    const json::value lists = all.Json();
    EXPECT_EQ(lists.as_array().size(), k.account == alice.account ? 2u : 1u);
    for (const std::string& q :
         {std::string("limit=1"), fmt::format("fromId={}", oto), fmt::format("fromId={}", oto2),
          fmt::format("fromId={}&limit=1", oto), fmt::format("startTime={}", oto2_ms),
          fmt::format("endTime={}", oto2_ms - 1), fmt::format("endTime={}&limit=1", oto2_ms)}) {
      same("/api/v3/allOrderList", k, tk, q);
    }
    for (const json::value& l : lists.as_array()) {
      EXPECT_EQ(
          same("/api/v3/orderList", k, tk, fmt::format("orderListId={}", Id(l, "orderListId")))
              .Json(),
          l);
      same("/api/v3/orderList", k, tk, "origClientOrderId=" + Str(l, "listClientOrderId"));
    }
    same("/api/v3/allOrders", k, tk, "symbol=BTCUSDT");
  }
  EXPECT_EQ(
      same("/api/v3/orderList", bob, t_bob, fmt::format("orderListId={}", oto)).Json().at("code"),
      -2013);
  same("/api/v3/orderList", alice, t_alice, "origClientOrderId=oco-1");
  // The orders carry their list and iceberg slice.
  const json::value orders =
      n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT").Json();
  std::map<std::string, std::string> by_cid;  // client id -> "list id|iceberg|status"
  for (const json::value& o : orders.as_array()) {
    by_cid[Str(o, "clientOrderId")] = fmt::format("{}|{}|{}", o.at("orderListId").as_int64(),
                                                  Str(o, "icebergQty"), Str(o, "status"));
  }
  EXPECT_EQ(by_cid["w-1"], fmt::format("{}|0.00000000|FILLED", oto));
  EXPECT_EQ(by_cid["p-1"], fmt::format("{}|0.01000000|NEW", oto));

  // A restart: the read side keeps the open list only, without client ids;
  // the projection has both lists as they were.
  const std::string before = n.Signed(http::verb::get, "/api/v3/allOrderList", alice, "").body;
  n.Stop();
  n.Start();
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/allOrderList", alice, "").body, before);
  const Reply read_side = n.twin().Signed(http::verb::get, "/api/v3/allOrderList", t_alice, "");
  ASSERT_EQ(read_side.status, 200) << read_side.body;
  ASSERT_EQ(read_side.Json().as_array().size(), 1u) << read_side.body;
  EXPECT_EQ(Str(read_side.Json().as_array()[0], "listClientOrderId"), "");
  const Reply open =
      n.Signed(http::verb::get, "/api/v3/orderList", alice, fmt::format("orderListId={}", oto));
  ASSERT_EQ(open.status, 200) << open.body;
  EXPECT_EQ(Str(open.Json(), "listClientOrderId"), "oto-1");
  EXPECT_EQ(Str(open.Json(), "listOrderStatus"), "EXECUTING");
  EXPECT_EQ(Str(open.Json().at("orders").as_array()[1], "clientOrderId"), "p-1");
  const Reply done =
      n.Signed(http::verb::get, "/api/v3/orderList", alice, "origClientOrderId=oto-2");
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(Id(done.Json(), "orderListId"), oto2);
  EXPECT_EQ(Str(done.Json(), "listOrderStatus"), "ALL_DONE");
}

// The operator's ledger: paged, in whole records, summing to the balances;
// its errors; the projection in the health answer.
// Conditional orders through the API: exchangeInfo lists the types and
// their filters; Binance's parameter errors come back before anything
// reaches the engine; a STOP_LOSS_LIMIT sell waits (open, not working, in no
// level), a trade through its stop triggers it, part fills and the rest
// rests at its limit (working since the trigger); MAX_NUM_ALGO_ORDERS counts
// the waiting ones; a stop the last price already meets is refused; and the
// history from the projection renders them as the read side does.
TEST_F(GatewayTest, StopOrdersWaitTriggerAndReadBack) {
  Node n(dir_, WithProjection(/*twin=*/true));
  Client& twin = n.twin();
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  const auto t_alice = alice;  // the twin serves the journal's keys too
  const auto t_bob = bob;
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);

  const json::value info = n.Request(http::verb::get, "/api/v3/exchangeInfo?symbol=BTCUSDT").Json();
  const json::object& sym = info.at("symbols").as_array()[0].as_object();
  std::vector<std::string> types;
  for (const json::value& t : sym.at("orderTypes").as_array()) types.emplace_back(t.as_string());
  EXPECT_EQ(types,
            (std::vector<std::string>{"LIMIT", "LIMIT_MAKER", "MARKET", "STOP_LOSS",
                                      "STOP_LOSS_LIMIT", "TAKE_PROFIT", "TAKE_PROFIT_LIMIT"}));
  EXPECT_TRUE(sym.at("allowTrailingStop").as_bool());
  EXPECT_FALSE(sym.at("pegInstructionsAllowed").as_bool());
  std::map<std::string, json::object> filters;
  for (const json::value& f : sym.at("filters").as_array()) {
    filters[std::string(f.at("filterType").as_string())] = f.as_object();
  }
  ASSERT_TRUE(filters.count("TRAILING_DELTA"));
  EXPECT_EQ(filters["TRAILING_DELTA"].at("minTrailingAboveDelta").as_int64(), 10);
  EXPECT_EQ(filters["TRAILING_DELTA"].at("maxTrailingBelowDelta").as_int64(), 2000);
  EXPECT_EQ(filters["MAX_NUM_ALGO_ORDERS"].at("maxNumAlgoOrders").as_int64(), 5);

  auto place = [&](const Node::Keys& k, const std::string& params) {
    return n.Signed(http::verb::post, "/api/v3/order", k, "symbol=BTCUSDT&" + params);
  };
  auto error = [](const Reply& r) {
    if (r.status != 400) return fmt::format("HTTP {}: {}", r.status, r.body);
    return fmt::format("{} {}", r.Json().at("code").as_int64(), Str(r.Json(), "msg"));
  };
  // The last price: 30000.
  ASSERT_EQ(place(bob, "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=30000").status,
            200);
  ASSERT_EQ(place(alice, "side=BUY&type=MARKET&quantity=0.01&newOrderRespType=FULL").status, 200);

  // Binance's parameter errors, answered before the engine sees anything.
  const uint64_t seq = n.client().AppliedSeq();
  EXPECT_EQ(error(place(bob,
                        "side=SELL&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=0.05&"
                        "price=29000")),
            "-1102 Param 'stopPrice' or 'trailingDelta' must be sent, but both were empty/null!");
  EXPECT_EQ(error(place(bob, "side=SELL&type=STOP_LOSS&quantity=0.05&price=29000&stopPrice=29500")),
            "-1106 Parameter 'price' sent when not required.");
  EXPECT_EQ(error(place(bob,
                        "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.05&price=29000&"
                        "stopPrice=29500")),
            "-1106 Parameter 'stopPrice' sent when not required.");
  EXPECT_EQ(error(place(bob, "side=SELL&type=STOP_LOSS&quantity=0.05&trailingDelta=5")),
            "-1013 Filter failure: TRAILING_DELTA");
  EXPECT_EQ(error(place(bob, "side=SELL&type=STOP_LOSS&quantity=0.05&stopPrice=29500.001")),
            "-1013 Filter failure: PRICE_FILTER");
  EXPECT_EQ(error(place(bob,
                        "side=SELL&type=STOP_LOSS&quantity=0.05&stopPrice=29500&"
                        "pegPriceType=PRIMARY_PEG")),
            "-2010 Pegged orders are not supported for this symbol.");
  EXPECT_EQ(n.client().AppliedSeq(), seq);
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrders", bob, "symbol=BTCUSDT").body, "[]");
  // A stop the last price already meets (a sell's stop at or above 30000).
  EXPECT_EQ(error(place(bob,
                        "side=SELL&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=0.05&"
                        "price=29000&stopPrice=30000")),
            "-2010 Order would trigger immediately.");

  // The stop-loss limit sell: ACK by default, as Binance answers it.
  Reply ack = place(bob,
                    "side=SELL&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=0.05&price=29000&"
                    "stopPrice=29500&newClientOrderId=bob-stop");
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_FALSE(ack.Json().as_object().contains("status")) << ack.body;
  ASSERT_TRUE(ack.Json().as_object().contains("orderId")) << ack.body;
  const uint64_t stop_id = Id(ack.Json(), "orderId");
  Reply got;
  for (int i = 0; i < 200; ++i) {
    got = n.Signed(http::verb::get, "/api/v3/order", bob,
                   "symbol=BTCUSDT&origClientOrderId=bob-stop");
    if (got.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(got.status, 200) << got.body;
  json::value o = got.Json();
  EXPECT_EQ(Id(o, "orderId"), stop_id);
  EXPECT_EQ(Str(o, "type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(Str(o, "status"), "NEW");
  EXPECT_EQ(Str(o, "price"), "29000.00000000");
  EXPECT_EQ(Str(o, "stopPrice"), "29500.00000000");
  EXPECT_EQ(Str(o, "timeInForce"), "GTC");
  EXPECT_FALSE(o.at("isWorking").as_bool());
  EXPECT_EQ(o.at("workingTime").as_int64(), -1);
  EXPECT_FALSE(o.as_object().contains("trailingDelta"));
  Reply open = n.Signed(http::verb::get, "/api/v3/openOrders", bob, "symbol=BTCUSDT");
  ASSERT_EQ(open.Json().as_array().size(), 1u) << open.body;
  EXPECT_EQ(Str(open.Json().as_array()[0], "stopPrice"), "29500.00000000");
  EXPECT_TRUE(n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT")
                  .Json()
                  .at("asks")
                  .as_array()
                  .empty());
  EXPECT_EQ(Balance(n.Signed(http::verb::get, "/api/v3/account", bob, ""), "BTC", "locked"),
            "0.05000000");

  // A trailing take-profit sell (RESULT: its conditional fields) and three
  // more stops: five wait, the sixth is refused, cancels make room.
  Reply tp = place(bob,
                   "side=SELL&type=TAKE_PROFIT_LIMIT&timeInForce=GTC&quantity=0.02&price=32000&"
                   "stopPrice=31000&trailingDelta=100&newOrderRespType=RESULT");
  ASSERT_EQ(tp.status, 200) << tp.body;
  EXPECT_EQ(Str(tp.Json(), "stopPrice"), "31000.00000000");
  EXPECT_EQ(tp.Json().at("trailingDelta").as_int64(), 100);
  EXPECT_EQ(tp.Json().at("trailingTime").as_int64(), -1);
  EXPECT_EQ(tp.Json().at("workingTime").as_int64(), -1);
  std::vector<uint64_t> extra;
  for (int i = 0; i < 3; ++i) {
    Reply r = place(bob, fmt::format("side=SELL&type=STOP_LOSS&quantity=0.01&stopPrice={}&"
                                     "newOrderRespType=RESULT",
                                     20000 + i));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Str(r.Json(), "timeInForce"), "GTC");
    extra.push_back(Id(r.Json(), "orderId"));
  }
  EXPECT_EQ(error(place(bob, "side=SELL&type=STOP_LOSS&quantity=0.01&stopPrice=20100")),
            "-2010 Filter failure: MAX_NUM_ALGO_ORDERS");
  EXPECT_EQ(error(n.Signed(http::verb::post, "/api/v3/order/test", bob,
                           "symbol=BTCUSDT&side=BUY&type=TAKE_PROFIT&quantity=0.01&"
                           "stopPrice=20100")),
            "-2010 Filter failure: MAX_NUM_ALGO_ORDERS");
  // Other orders are not counted.
  EXPECT_EQ(place(bob, "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=40000").status,
            200);
  Reply canceled = n.Signed(http::verb::delete_, "/api/v3/order", bob,
                            fmt::format("symbol=BTCUSDT&orderId={}", extra[0]));
  ASSERT_EQ(canceled.status, 200) << canceled.body;
  EXPECT_EQ(Str(canceled.Json(), "status"), "CANCELED");
  EXPECT_EQ(Str(canceled.Json(), "type"), "STOP_LOSS");
  EXPECT_EQ(Str(canceled.Json(), "stopPrice"), "20000.00000000");
  ASSERT_EQ(place(bob,
                  "side=SELL&type=STOP_LOSS&quantity=0.01&stopPrice=20100&"
                  "newOrderRespType=RESULT")
                .status,
            200);
  // cancelReplace of a waiting stop by another: the one it cancels makes room.
  Reply cr = n.Signed(http::verb::post, "/api/v3/order/cancelReplace", bob,
                      fmt::format("symbol=BTCUSDT&cancelReplaceMode=STOP_ON_FAILURE&"
                                  "cancelOrderId={}&side=SELL&type=STOP_LOSS&quantity=0.01&"
                                  "stopPrice=20200",
                                  extra[1]));
  ASSERT_EQ(cr.status, 200) << cr.body;
  EXPECT_EQ(Str(cr.Json().at("cancelResponse"), "stopPrice"), "20001.00000000");

  // Alice bids 0.04 at 29400; Bob sells 0.01 into it: 29400 <= 29500, the
  // stop triggers, sells 0.03 more at 29400 and rests 0.02 at 29000.
  ASSERT_EQ(place(alice,
                  "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.04&price=29400&"
                  "newOrderRespType=RESULT")
                .status,
            200);
  Reply through = place(bob,
                        "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=29400&"
                        "newOrderRespType=RESULT");
  ASSERT_EQ(through.status, 200) << through.body;
  EXPECT_EQ(Str(through.Json(), "status"), "FILLED");
  const int64_t trigger_ms = through.Json().at("transactTime").as_int64();
  o = n.Signed(http::verb::get, "/api/v3/order", bob,
               fmt::format("symbol=BTCUSDT&orderId={}", stop_id))
          .Json();
  EXPECT_EQ(Str(o, "status"), "PARTIALLY_FILLED");
  EXPECT_EQ(Str(o, "type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(Str(o, "stopPrice"), "29500.00000000");
  EXPECT_EQ(Str(o, "executedQty"), "0.03000000");
  EXPECT_EQ(Str(o, "cummulativeQuoteQty"), "882.00000000");
  EXPECT_TRUE(o.at("isWorking").as_bool());
  EXPECT_EQ(o.at("workingTime").as_int64(), trigger_ms);
  EXPECT_GE(o.at("workingTime").as_int64(), o.at("time").as_int64());
  bool listed = false;
  const json::value open_now =
      n.Signed(http::verb::get, "/api/v3/openOrders", bob, "symbol=BTCUSDT").Json();
  for (const json::value& x : open_now.as_array()) {
    if (Id(x, "orderId") == stop_id) {
      listed = true;
      EXPECT_TRUE(x.at("isWorking").as_bool());
      EXPECT_EQ(x.at("workingTime").as_int64(), trigger_ms);
    }
  }
  EXPECT_TRUE(listed);
  const json::value depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT").Json();
  ASSERT_FALSE(depth.at("asks").as_array().empty());
  EXPECT_EQ(depth.at("asks").as_array()[0].as_array()[0].as_string(), "29000.00000000");
  EXPECT_EQ(depth.at("asks").as_array()[0].as_array()[1].as_string(), "0.02000000");

  // The history (projection) renders them as the read side does.
  AwaitTwin(n);
  auto same = [&](const std::string& path, const Node::Keys& k, const Node::Keys& tk,
                  const std::string& params) {
    Reply p = n.Signed(http::verb::get, path, k, params);
    Reply t = twin.Signed(http::verb::get, path, tk, params);
    EXPECT_EQ(p.status, t.status) << path << "?" << params << ": " << p.body << " / " << t.body;
    EXPECT_EQ(p.body, t.body) << path << "?" << params;
    return p;
  };
  const json::value all = same("/api/v3/allOrders", bob, t_bob, "symbol=BTCUSDT").Json();
  std::size_t stops = 0;
  for (const json::value& x : all.as_array()) {
    if (Str(x, "type") == "LIMIT" || Str(x, "type") == "MARKET") continue;
    ++stops;
    EXPECT_NE(Str(x, "stopPrice"), "0.00000000") << x;
    same("/api/v3/order", bob, t_bob, fmt::format("symbol=BTCUSDT&orderId={}", Id(x, "orderId")));
  }
  EXPECT_EQ(stops, 7u);  // bob-stop, the take-profit, 3 + 2 more stops
  // A canceled stop comes from the projection.
  o = same("/api/v3/order", bob, t_bob, fmt::format("symbol=BTCUSDT&orderId={}", extra[0])).Json();
  EXPECT_EQ(Str(o, "status"), "CANCELED");
  EXPECT_EQ(Str(o, "stopPrice"), "20000.00000000");
  EXPECT_EQ(o.at("workingTime").as_int64(), -1);
  (void)t_alice;
}

TEST_F(GatewayTest, LedgerFromTheProjectionSumsToTheBalances) {
  Node n(dir_, WithProjection());
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "50000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "3", "b").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "ETH", "7.5", "c").status, 200);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                       fmt::format("symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&"
                                   "quantity=0.1&price={}",
                                   30000 + i * 100))
                  .status,
              200);
  }
  // A market buy across the three levels: many lines in one record.
  Reply sweep = n.Signed(http::verb::post, "/api/v3/order", alice,
                         "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.25");
  ASSERT_EQ(sweep.status, 200) << sweep.body;
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                     "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.2&"
                     "price=20000")
                .status,
            200);
  ASSERT_EQ(n.Admin(http::verb::post, "withdrawals",
                    fmt::format(R"({{"accountId":{},"asset":"BTC","amount":"0.5","ref":"w"}})",
                                bob.account))
                .status,
            200);

  for (const uint32_t account : {alice.account, bob.account, 0u}) {
    const std::vector<json::value> all = LedgerLines(n.client(), account, 1000);
    ASSERT_FALSE(all.empty());
    for (std::size_t i = 1; i < all.size(); ++i) {
      const auto key = [](const json::value& l) { return std::pair{Id(l, "seq"), Id(l, "index")}; };
      EXPECT_LT(key(all[i - 1]), key(all[i]));
    }
    // Small pages give the same lines, none lost or repeated.
    for (const std::size_t limit : {1u, 2u, 3u, 5u}) {
      const std::vector<json::value> paged = LedgerLines(n.client(), account, limit);
      EXPECT_EQ(paged, all) << "limit " << limit;
    }
    Reply admin = n.Admin(http::verb::get, fmt::format("accounts/{}", account));
    ASSERT_EQ(admin.status, 200) << admin.body;
    ExpectLedgerMatchesBalances(n.config(), all, admin.Json().at("balances").as_array());
  }
  // As GET /api/v3/account sees it.
  Reply acc = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  ASSERT_EQ(acc.status, 200) << acc.body;
  ExpectLedgerMatchesBalances(n.config(), LedgerLines(n.client(), alice.account, 500),
                              acc.Json().at("balances").as_array());

  const json::value first =
      n.Admin(http::verb::get, fmt::format("accounts/{}/ledger?limit=1", bob.account)).Json();
  const json::value& deposit = first.at("entries").as_array().at(0);
  EXPECT_EQ(Str(deposit, "asset"), "BTC");
  EXPECT_EQ(Str(deposit, "bucket"), "AVAILABLE");
  EXPECT_EQ(Str(deposit, "delta"), "3.00000000");
  EXPECT_EQ(Str(deposit, "reason"), "Deposit");
  EXPECT_EQ(Str(deposit, "refKind"), "TRANSFER");
  EXPECT_EQ(Id(deposit, "ref"), Id(deposit, "seq"));
  EXPECT_NEAR(static_cast<double>(deposit.at("time").as_int64()), static_cast<double>(WallMs()),
              60'000.0);
  bool negative = false, trade = false;
  for (const json::value& l : LedgerLines(n.client(), bob.account, 1000)) {
    negative = negative || Str(l, "delta").starts_with("-");
    trade = trade || Str(l, "refKind") == "TRADE";
  }
  EXPECT_TRUE(negative);
  EXPECT_TRUE(trade);

  for (const std::string q : {"fromSeq=abc", "fromSeq=-1", "limit=x", "limit=0", "limit=-5"}) {
    Reply bad = n.Admin(http::verb::get, fmt::format("accounts/{}/ledger?{}", alice.account, q));
    EXPECT_EQ(bad.status, 400) << q << ": " << bad.body;
    EXPECT_TRUE(bad.Json().as_object().contains("code")) << bad.body;
  }
  EXPECT_EQ(n.Admin(http::verb::get, "accounts/77/ledger").status, 404);
  EXPECT_EQ(n.Request(http::verb::get, "/admin/v1/accounts/1/ledger").status, 401);
  Reply big = n.Admin(http::verb::get, fmt::format("accounts/{}/ledger?limit=5000", alice.account));
  EXPECT_EQ(big.status, 200) << big.body;

  Reply health = n.Admin(http::verb::get, "health");
  ASSERT_EQ(health.status, 200);
  const json::value p = health.Json().at("projection");
  EXPECT_EQ(Str(p, "backend"), "sqlite");
  EXPECT_TRUE(p.at("healthy").as_bool());
  EXPECT_EQ(Str(p, "lastError"), "");
  EXPECT_GE(Id(p, "appliedSequence"), Id(health.Json(), "appliedSequence"));
  EXPECT_EQ(Id(p, "lagEvents"), 0u);
  EXPECT_TRUE(p.at("lagSeconds").is_number());
  // The SQLite store's disk use and checkpoints.
  const json::value d = p.at("storage");
  EXPECT_GT(Id(d, "dbBytes"), 0u) << health.body;
  EXPECT_EQ(Id(d, "walMaxBytes"), uint64_t{64} << 20);
  EXPECT_LE(Id(d, "walBytes"), Id(d, "walMaxBytes"));
  EXPECT_FALSE(d.at("overCeiling").as_bool());
  EXPECT_GT(Id(d, "walFramesWritten"), 0u);
  EXPECT_LE(Id(d, "walFramesCheckpointed"), Id(d, "walFramesWritten"));
  EXPECT_EQ(Id(d, "ceilingWaits"), 0u);
  EXPECT_TRUE(d.at("secondsSinceCheckpoint").is_number() ||
              d.at("secondsSinceCheckpoint").is_null());
}

// A projection that does not catch up within 2 s: 503 -1001 with Retry-After,
// while open orders are still answered from the read side; served again once
// it runs.
TEST_F(GatewayTest, HistoryAnswers503WhileTheProjectionIsBehind) {
  Node n(dir_, WithProjection());
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "1000", "a").status, 200);
  Reply closed = n.Signed(http::verb::post, "/api/v3/order", alice,
                          "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                          "price=20000&newClientOrderId=c1");
  ASSERT_EQ(closed.status, 200) << closed.body;
  ASSERT_EQ(
      n.Signed(http::verb::delete_, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=c1")
          .status,
      200);
  Reply before = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(before.status, 200) << before.body;
  ASSERT_EQ(before.Json().as_array().size(), 1u);

  n.projector().Stop();
  Reply open = n.Signed(http::verb::post, "/api/v3/order", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&"
                        "price=21000&newClientOrderId=o1");
  ASSERT_EQ(open.status, 200) << open.body;
  // Four requests at once, each waiting 2 s from its arrival (not one after
  // the other).
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Reply> replies(4);
  {
    std::vector<std::thread> clients;
    clients.emplace_back([&] {
      replies[0] = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
    });
    clients.emplace_back([&] {
      replies[1] = n.Signed(http::verb::get, "/api/v3/myTrades", alice, "symbol=BTCUSDT");
    });
    clients.emplace_back([&] {
      replies[2] =
          n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=c1");
    });
    clients.emplace_back([&] {
      replies[3] = n.Admin(http::verb::get, fmt::format("accounts/{}/ledger", alice.account));
    });
    for (std::thread& t : clients) t.join();
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(1900));
  EXPECT_LT(waited, std::chrono::milliseconds(6000));
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.Json().at("code").as_int64(), -1001) << r.body;
    EXPECT_EQ(Str(r.Json(), "msg"),
              "Internal error; unable to process your request. Please try again.");
    EXPECT_EQ(r.headers.at("Retry-After"), "1");
  }
  // An open order is the read side's: answered at once.
  const auto t1 = std::chrono::steady_clock::now();
  Reply open_get =
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=o1");
  EXPECT_EQ(open_get.status, 200) << open_get.body;
  EXPECT_EQ(Str(open_get.Json(), "status"), "NEW");
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(1500));
  Reply health = n.Admin(http::verb::get, "health");
  EXPECT_GT(Id(health.Json().at("projection"), "lagEvents"), 0u) << health.body;

  n.projector().Start(n.exchange().durable_seq());
  Reply after = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(after.status, 200) << after.body;
  ASSERT_EQ(after.Json().as_array().size(), 2u) << after.body;
  EXPECT_EQ(after.Json().as_array()[0], before.Json().as_array()[0]);
  Reply closed_again =
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=c1");
  EXPECT_EQ(closed_again.Json(), before.Json().as_array()[0]);
}

// The projector is one handler of the fan-out stage; with its thread stopped
// (a database that does not answer holds it the same way) more durable
// batches than the fan-out ring holds go through, every order is answered,
// and the projection catches up once it runs again.
TEST_F(GatewayTest, AStalledProjectorHoldsNoOrderBack) {
  Node n(dir_, WithProjection());
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  n.projector().Stop();
  const uint64_t before = n.exchange().durable_seq();
  constexpr int kOrders = 1'500;  // one durable batch each: more than the ring's 1,024
  for (int i = 0; i < kOrders; ++i) {
    Reply r = n.Signed(http::verb::post, "/api/v3/order", alice,
                       fmt::format("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&"
                                   "quantity=0.001&price={}&newClientOrderId=s{}",
                                   10000 + i, i));
    ASSERT_EQ(r.status, 200) << i << ": " << r.body;
  }
  EXPECT_GE(n.exchange().durable_seq(), before + kOrders);
  Reply open = n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT");
  ASSERT_EQ(open.status, 200);
  EXPECT_EQ(open.Json().as_array().size(), static_cast<std::size_t>(kOrders));
  Reply health = n.Admin(http::verb::get, "health");
  EXPECT_GE(Id(health.Json().at("projection"), "lagEvents"), static_cast<uint64_t>(kOrders))
      << health.body;

  n.projector().Start(n.exchange().durable_seq());
  Reply all = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT&limit=1000");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(all.Json().as_array().size(), 1000u);
}

// Closed orders and fills from before a restart: the read side starts from
// the recovered state without them; the projection still has them.
TEST_F(GatewayTest, HistoryFromTheProjectionSurvivesARestart) {
  Node::Keys alice, bob;
  std::string orders, trades, order;
  {
    Node n(dir_, WithProjection());
    alice = n.NewAccount("alice");
    bob = n.NewAccount("bob");
    ASSERT_EQ(n.Deposit(alice.account, "USDT", "10000", "a").status, 200);
    ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
    ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newClientOrderId=r1")
                  .status,
              200);
    ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                       "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.04")
                  .status,
              200);
    ASSERT_EQ(
        n.Signed(http::verb::delete_, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=r1")
            .status,
        200);
    orders = n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT").body;
    trades = n.Signed(http::verb::get, "/api/v3/myTrades", alice, "symbol=BTCUSDT").body;
    order = n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=r1")
                .body;
    ASSERT_NE(orders, "[]");
    ASSERT_NE(trades, "[]");
  }
  {
    Node plain(dir_);  // the read side alone forgets them
    EXPECT_EQ(plain.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT").body,
              "[]");
  }
  Node n(dir_, WithProjection());
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT").body, orders);
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/myTrades", alice, "symbol=BTCUSDT").body, trades);
  EXPECT_EQ(
      n.Signed(http::verb::get, "/api/v3/order", alice, "symbol=BTCUSDT&origClientOrderId=r1").body,
      order);
}

// The value of one sample ("name{labels} value") in a /metrics answer; -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  const std::string key = series + " ";
  for (std::size_t pos = 0; (pos = text.find(key, pos)) != std::string::npos; pos += key.size()) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + key.size()));
  }
  return -1;
}

// Polls until pred() holds (true) or 10 s pass (false).
template <class Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A non-loopback IPv4 address of this machine ("" when there is none).
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* a = list; a != nullptr && out.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in sin{};
    std::memcpy(&sin, a->ifa_addr, sizeof sin);
    const auto addr = boost::asio::ip::address_v4(ntohl(sin.sin_addr.s_addr));
    if (!addr.is_loopback()) out = addr.to_string();
  }
  freeifaddrs(list);
  return out;
}

TEST_F(GatewayTest, MetricsCountOrdersTradesCancelsAndStages) {
  metrics::Registry registry;
  gateway::GatewayOptions go;
  go.metrics = &registry;
  go.key_limit.weight_per_minute = 60;
  go.key_limit.burst = 45;
  Node n(dir_, go);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);
  Reply buy = n.Signed(http::verb::post, "/api/v3/order", alice,
                       "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                       "price=30000&newOrderRespType=RESULT");
  ASSERT_EQ(buy.status, 200) << buy.body;
  Reply sell = n.Signed(http::verb::post, "/api/v3/order", bob,
                        "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.04&newOrderRespType=ACK");
  ASSERT_EQ(sell.status, 200) << sell.body;
  Reply cancel =
      n.Signed(http::verb::delete_, "/api/v3/order", alice,
               fmt::format("symbol=BTCUSDT&orderId={}", buy.Json().at("orderId").as_int64()));
  ASSERT_EQ(cancel.status, 200) << cancel.body;

  Reply m = n.Request(http::verb::get, "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.headers["Content-Type"], std::string(metrics::kContentType));
  const std::string& t = m.body;
  EXPECT_EQ(Sample(t, R"(matchbook_orders_total{market="BTCUSDT"})"), 2) << t;
  EXPECT_EQ(Sample(t, R"(matchbook_trades_total{market="BTCUSDT"})"), 1);
  EXPECT_EQ(Sample(t, R"(matchbook_cancels_total{market="BTCUSDT"})"), 1);
  EXPECT_EQ(Sample(t, R"(matchbook_orders_total{market="ETHUSDT"})"), 0);
  // 2 accounts, 2 API keys, 2 deposits, 2 orders, 1 cancel.
  EXPECT_EQ(Sample(t, "matchbook_commands_submitted_total"), 9);
  for (const char* stage : {"parse_auth", "ring_wait", "match", "journal_write",
                            "submit_to_durable", "fanout", "submit_to_response"}) {
    EXPECT_GT(
        Sample(t, fmt::format(R"(matchbook_stage_latency_seconds_count{{stage="{}"}})", stage)), 0)
        << stage;
  }
  // Recorded by the fan-out thread just after it hands the last answer over.
  EXPECT_TRUE(Eventually([&] {
    return Sample(n.Request(http::verb::get, "/metrics").body,
                  R"(matchbook_stage_latency_seconds_count{stage="submit_to_response"})") == 9;
  }));
  EXPECT_GE(Sample(t, R"(matchbook_http_requests_total{code="200"})"), 9);
  EXPECT_EQ(Sample(t, "matchbook_journal_durable_sequence"), 9);
  EXPECT_EQ(Sample(t, "matchbook_read_side_applied_sequence"), 9);
  EXPECT_EQ(Sample(t, R"(matchbook_http_rejected_total{reason="rate_limited_429"})"), 0);

  // Over the key's weight: 429, counted.
  int limited = 0;
  for (int i = 0; i < 5; ++i) {
    if (n.Signed(http::verb::get, "/api/v3/account", alice, "").status == 429) ++limited;
  }
  ASSERT_GT(limited, 0);
  const std::string after = n.Request(http::verb::get, "/metrics").body;
  EXPECT_EQ(Sample(after, R"(matchbook_http_rejected_total{reason="rate_limited_429"})"), limited);
  EXPECT_EQ(Sample(after, R"(matchbook_http_requests_total{code="429"})"), limited);
  EXPECT_EQ(Sample(after, R"(matchbook_http_rejected_total{reason="busy_503"})"), 0);
}

TEST_F(GatewayTest, MetricsRefusedToRemotePeersUnlessAllowed) {
  const std::string address = NonLoopbackAddress();
  if (address.empty()) GTEST_SKIP() << "no non-loopback IPv4 address";
  for (const bool remote : {false, true}) {
    SCOPED_TRACE(remote);
    metrics::Registry registry;
    gateway::GatewayOptions go;
    go.server.host = "0.0.0.0";
    go.metrics = &registry;
    go.metrics_remote = remote;
    Node n(dir_ / (remote ? "remote" : "local"), go);
    Client far(n.port(), n.token(), address);
    Reply r = far.Request(http::verb::get, "/metrics");
    if (remote) {
      EXPECT_EQ(r.status, 200) << r.body;
      EXPECT_NE(r.body.find("# TYPE matchbook_ring_capacity gauge"), std::string::npos);
    } else {
      EXPECT_EQ(r.status, 403) << r.body;
      EXPECT_EQ(r.Json().at("code").as_int64(), -1002);
    }
    EXPECT_EQ(n.Request(http::verb::get, "/metrics").status, 200) << "loopback is always served";
  }
}

// A replica's forwarded client address counts only from a trusted replica:
// then the operator API sees the client (not loopback) and the per-IP limit
// charges the client's address, not the replica's.
TEST_F(GatewayTest, ForwardedClientAddressIsBelievedOnlyFromTrustedReplicas) {
  const std::map<std::string, std::string> far = {{"X-MB-Client-Address", "203.0.113.7"}};
  for (const bool trusted : {false, true}) {
    SCOPED_TRACE(trusted);
    gateway::GatewayOptions go;
    go.ip_limit = {.weight_per_minute = 30, .burst = 30};
    if (trusted) go.trusted_replicas = {"10.9.9.9", "127.0.0.1"};
    Node n(dir_ / (trusted ? "trusted" : "untrusted"), go);
    std::map<std::string, std::string> admin = far;
    admin["X-MB-ADMIN-TOKEN"] = n.token();
    Reply h = n.Request(http::verb::get, "/admin/v1/health", {}, admin);
    EXPECT_EQ(h.status, trusted ? 403 : 200) << h.body;
    // The forwarded client's weight, then a local client's: separate buckets
    // only when the address is believed.
    const Reply a = n.Request(http::verb::get, "/api/v3/exchangeInfo", {}, far);  // weight 20
    ASSERT_EQ(a.status, 200) << a.body;
    const Reply b = n.Request(http::verb::get, "/api/v3/exchangeInfo");
    EXPECT_EQ(b.status, trusted ? 200 : 429) << b.body;
  }
}

// gateway.admin_remote opens the operator API and page to remote clients
// over TLS only; without TLS only gateway.admin_remote_plaintext does. (A
// trusted replica's forwarded address makes the client remote here.)
TEST_F(GatewayTest, RemoteOperatorCallsNeedTlsOrAnExplicitPlainTextOptIn) {
  const std::map<std::string, std::string> far = {{"X-MB-Client-Address", "203.0.113.7"}};
  for (const bool plaintext : {false, true}) {
    SCOPED_TRACE(plaintext);
    gateway::GatewayOptions go;
    go.trusted_replicas = {"127.0.0.1"};
    go.admin_remote = true;
    go.admin_remote_plaintext = plaintext;
    Node n(dir_ / (plaintext ? "plaintext" : "tls-only"), go);
    std::map<std::string, std::string> admin = far;
    admin["X-MB-ADMIN-TOKEN"] = n.token();
    const Reply h = n.Request(http::verb::get, "/admin/v1/accounts", {}, admin);
    const Reply page = n.Request(http::verb::get, "/admin/", {}, far);
    if (plaintext) {
      EXPECT_EQ(h.status, 200) << h.body;
      EXPECT_EQ(page.status, 200);
    } else {
      EXPECT_EQ(h.status, 403) << h.body;
      EXPECT_NE(h.body.find("remote clients over TLS only"), std::string::npos) << h.body;
      EXPECT_EQ(page.status, 403) << page.body;
    }
    // Loopback clients are served either way.
    EXPECT_EQ(n.Admin(http::verb::get, "accounts").status, 200);
  }
}

// JSON nested deeper than 32 levels (Boost.JSON's parse limit) is refused
// like any other bad body, and changes nothing.
TEST_F(GatewayTest, DeeplyNestedJsonIsRefused) {
  Node n(dir_);
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "{\"name\":";
  deep += "\"x\"";
  for (int i = 0; i < 40; ++i) deep += "}";
  const Reply r = n.Admin(http::verb::post, "accounts", deep);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json().at("code").as_int64(), -1130);
  EXPECT_EQ(n.Admin(http::verb::get, "accounts").body, "[]");
}

TEST_F(GatewayTest, NoMetricsWithoutARegistry) {
  Node n(dir_);
  EXPECT_EQ(n.Request(http::verb::get, "/metrics").status, 404);
  EXPECT_EQ(n.Admin(http::verb::get, "flight-recorder").status, 404);
}

TEST_F(GatewayTest, FlightRecorderDumpsSlowCommandsAndServesThem) {
  metrics::FlightRecorderOptions fo;
  fo.dir = dir_ / "flight";
  fo.threshold_ns = 1;  // every command is slow
  fo.window_ms = 200;
  fo.min_interval_ms = 10;
  metrics::FlightRecorder recorder(fo);
  ASSERT_TRUE(recorder.Start().ok());
  metrics::Registry registry;
  gateway::GatewayOptions go;
  go.metrics = &registry;
  go.flight_recorder = &recorder;
  go.flight_threshold_ns = fo.threshold_ns;
  go.flight_window_ms = fo.window_ms;
  Node n(dir_, go);
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                     "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                     "price=30000")
                .status,
            200);
  json::value list;
  ASSERT_TRUE(Eventually([&] {
    Reply r = n.Admin(http::verb::get, "flight-recorder");
    if (r.status != 200) return false;
    list = r.Json();
    return !list.at("dumps").as_array().empty();
  }));
  EXPECT_EQ(list.at("windowMs").to_number<int64_t>(), 200);
  EXPECT_DOUBLE_EQ(list.at("thresholdMs").to_number<double>(), 1e-6);
  EXPECT_GE(list.at("recorded").to_number<int64_t>(), 1);
  EXPECT_GE(list.at("triggers").to_number<int64_t>(), 1);
  const json::value& d = list.at("dumps").as_array()[0];
  const std::string file(d.at("file").as_string());
  const uint64_t trigger_seq = d.at("triggerSeq").to_number<uint64_t>();
  EXPECT_GT(trigger_seq, 0u);
  EXPECT_GE(d.at("traces").to_number<int64_t>(), 1);
  EXPECT_GT(d.at("bytes").to_number<int64_t>(), 0);
  EXPECT_GT(d.at("writtenAtMs").to_number<int64_t>(), 0);

  Reply dump = n.Admin(http::verb::get, "flight-recorder/" + file);
  ASSERT_EQ(dump.status, 200) << dump.body;
  const json::value v = dump.Json();
  EXPECT_EQ(v.at("triggerSeq").to_number<uint64_t>(), trigger_seq);
  bool found = false;
  for (const json::value& tr : v.at("traces").as_array()) {
    if (tr.at("seq").to_number<uint64_t>() != trigger_seq) continue;
    found = true;
    EXPECT_FALSE(tr.at("kind").as_string().empty());
    EXPECT_EQ(tr.at("httpStatus").to_number<int64_t>(), 200);
    EXPECT_FALSE(tr.at("durableUs").is_null());
    EXPECT_FALSE(tr.at("respondedUs").is_null());
  }
  EXPECT_TRUE(found) << dump.body;

  const std::vector<std::string> bad_names = {
      "flight-recorder/nope.json", "flight-recorder/..%2F..%2Fetc%2Fpasswd",
      "flight-recorder/../../token", "flight-recorder/" + file + "x"};
  for (const std::string& bad : bad_names) {
    Reply r = n.Admin(http::verb::get, bad);
    EXPECT_EQ(r.status, 404) << bad << ": " << r.body;
    EXPECT_TRUE(r.Json().as_object().contains("msg")) << bad;
  }
  EXPECT_EQ(n.Request(http::verb::get, "/admin/v1/flight-recorder").status, 401) << "token needed";
}

// Scrapes and flight-recorder reads run concurrently with trading: every
// answer is complete and well formed (this test also runs under TSan).
TEST_F(GatewayTest, ConcurrentScrapesWhileTrading) {
  metrics::FlightRecorderOptions fo;
  fo.dir = dir_ / "flight";
  fo.threshold_ns = 1;
  fo.window_ms = 100;
  fo.min_interval_ms = 200;
  metrics::FlightRecorder recorder(fo);
  ASSERT_TRUE(recorder.Start().ok());
  metrics::Registry registry;
  gateway::GatewayOptions go;
  go.metrics = &registry;
  go.flight_recorder = &recorder;
  go.key_limit.weight_per_minute = 0;
  go.key_limit.burst = 0;
  go.ip_limit.weight_per_minute = 0;
  go.ip_limit.burst = 0;
  Node n(dir_, go);
  std::vector<Node::Keys> traders;
  for (int i = 0; i < 2; ++i) {
    traders.push_back(n.NewAccount(fmt::format("t{}", i)));
    ASSERT_EQ(n.Deposit(traders.back().account, "USDT", "1000000", fmt::format("d{}", i)).status,
              200);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, scrapes{0}, orders{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      Client c(n.port(), n.token());
      while (!stop.load()) {
        if (i % 2 == 0) {
          Reply r = c.Request(http::verb::get, "/metrics");
          if (r.status != 200 ||
              r.body.find("# TYPE matchbook_orders_total counter") == std::string::npos ||
              r.body.back() != '\n') {
            ++bad;
          }
        } else {
          Reply r = c.Admin(http::verb::get, "flight-recorder");
          json::error_code ec;
          json::value v = json::parse(r.body, ec);
          if (r.status != 200 || ec || !v.is_object() || !v.as_object().contains("dumps")) ++bad;
        }
        ++scrapes;
      }
    });
  }
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      Client c(n.port(), n.token());
      int k = 0;
      while (!stop.load()) {
        Reply r = c.Signed(http::verb::post, "/api/v3/order", traders[static_cast<std::size_t>(i)],
                           fmt::format("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&"
                                       "quantity=0.001&price={}",
                                       20000 + (k++ % 100)));
        if (r.status != 200) ++bad;
        ++orders;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(scrapes.load(), 4);
  EXPECT_GT(orders.load(), 2);
  const std::string text = n.Request(http::verb::get, "/metrics").body;
  EXPECT_EQ(Sample(text, R"(matchbook_orders_total{market="BTCUSDT"})"), orders.load());
}

// ------------------------------------------------------------ WebSocket API

// A blocking WebSocket API client: one request, its answer.
class WsApiClient {
 public:
  WsApiClient(uint16_t port) {
    tcp::socket sock(io_);
    sock.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws_.next_layer() = std::move(sock);
    ws_.handshake("127.0.0.1", "/ws-api/v3");
  }
  json::object Call(std::string_view method, json::object params) {
    json::object req{{"id", ++id_}, {"method", method}, {"params", std::move(params)}};
    ws_.write(boost::asio::buffer(json::serialize(req)));
    for (;;) {
      beast::flat_buffer buf;
      ws_.read(buf);
      json::value v = json::parse(beast::buffers_to_string(buf.data()));
      // User data pushes have no id; answers carry the request's.
      if (v.as_object().contains("id") && v.at("id") == json::value(id_)) return v.as_object();
    }
  }
  // Binance's payload: every parameter but the signature, sorted, k=v&k=v.
  static std::string Payload(const json::object& params) {
    std::map<std::string, std::string> sorted;
    for (const auto& kv : params) {
      const json::value& v = kv.value();
      sorted[std::string(kv.key())] =
          v.is_string() ? std::string(v.get_string()) : json::serialize(v);
    }
    std::string out;
    for (const auto& [k, v] : sorted) out += (out.empty() ? "" : "&") + k + "=" + v;
    return out;
  }
  json::object Signed(std::string_view method, const Client::Keys& k, json::object params) {
    params["apiKey"] = k.key;
    params["timestamp"] = WallMs();
    params["signature"] = HmacSha256Hex(k.secret, Payload(params));
    return Call(method, std::move(params));
  }

 private:
  boost::asio::io_context io_;
  beast::websocket::stream<tcp::socket> ws_{io_};
  int64_t id_ = 0;
};

// An order's answer without what differs between two equal orders.
json::value Normalized(json::value v) {
  if (!v.is_object()) return v;
  for (const char* f : {"orderId", "clientOrderId", "transactTime", "workingTime"}) {
    v.as_object().erase(f);
  }
  if (v.as_object().contains("fills")) {
    for (json::value& fill : v.at("fills").as_array()) fill.as_object().erase("tradeId");
  }
  return v;
}

TEST_F(GatewayTest, WebSocketApiTradesAsRestDoes) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "10", "b").status, 200);
  WsApiClient ws(n.port());

  json::object a = ws.Call("ping", {});
  EXPECT_EQ(a.at("status"), 200);
  EXPECT_EQ(a.at("result"), json::object());
  EXPECT_EQ(a.at("rateLimits").at(0).at("rateLimitType"), "REQUEST_WEIGHT");
  EXPECT_GT(ws.Call("time", {}).at("result").at("serverTime").as_int64(), 0);
  a = ws.Call("exchangeInfo", {{"symbol", "BTCUSDT"}});
  ASSERT_EQ(a.at("status"), 200);
  EXPECT_EQ(a.at("result").at("symbols").as_array().size(), 1u);

  // Alice rests two equal buys, one through each API: the same answer.
  Reply rest = n.Signed(http::verb::post, "/api/v3/order", alice,
                        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.1&"
                        "price=30000&newOrderRespType=FULL");
  ASSERT_EQ(rest.status, 200) << rest.body;
  a = ws.Signed("order.place", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.1"},
                 {"price", "30000"},
                 {"newClientOrderId", "ws-1"},
                 {"newOrderRespType", "FULL"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(Normalized(a.at("result")), Normalized(rest.Json()));
  EXPECT_EQ(a.at("result").at("clientOrderId"), "ws-1");
  const int64_t ws_order = a.at("result").at("orderId").as_int64();
  // The order counts and the weight are those REST shows.
  bool orders_shown = false;
  for (const json::value& l : a.at("rateLimits").as_array()) {
    if (l.at("rateLimitType") == "ORDERS") orders_shown = true;
  }
  EXPECT_FALSE(orders_shown);  // no ORDERS limit configured: none shown

  // The errors REST gives.
  a = ws.Signed("order.place", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.1"},
                 {"price", "30000.001"}});
  EXPECT_EQ(a.at("status"), 400);
  EXPECT_EQ(a.at("error").at("code"), -1013);
  EXPECT_EQ(a.at("error").at("msg"), "Filter failure: PRICE_FILTER");
  a = ws.Signed("order.status", alice, {{"symbol", "BTCUSDT"}, {"orderId", 999999}});
  EXPECT_EQ(a.at("error").at("code"), -2013);
  // Conditional orders take the same parameters, with the same errors.
  a = ws.Signed("order.place", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "STOP_LOSS_LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.01"},
                 {"price", "31000"}});
  EXPECT_EQ(a.at("error").at("code"), -1102);
  EXPECT_EQ(a.at("error").at("msg"),
            "Param 'stopPrice' or 'trailingDelta' must be sent, but both were empty/null!");
  a = ws.Signed("order.test", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "TAKE_PROFIT"},
                 {"quantity", "0.01"},
                 {"trailingDelta", 5}});
  EXPECT_EQ(a.at("error").at("msg"), "Filter failure: TRAILING_DELTA");
  a = ws.Signed("order.place", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "STOP_LOSS_LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.01"},
                 {"price", "41000"},
                 {"stopPrice", "40000"},
                 {"newOrderRespType", "RESULT"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(a.at("result").at("stopPrice"), "40000.00000000");
  EXPECT_EQ(a.at("result").at("workingTime"), -1);
  a = ws.Signed("order.cancel", alice,
                {{"symbol", "BTCUSDT"}, {"orderId", a.at("result").at("orderId")}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("status"), "CANCELED");
  EXPECT_EQ(a.at("result").at("stopPrice"), "40000.00000000");
  EXPECT_EQ(
      ws.Signed("order.test", alice,
                {{"symbol", "BTCUSDT"}, {"side", "BUY"}, {"type", "MARKET"}, {"quantity", "0.1"}})
          .at("status"),
      200);

  // Bob sells into both; Alice sees her order, trades and balances.
  a = ws.Signed("order.place", bob,
                {{"symbol", "BTCUSDT"},
                 {"side", "SELL"},
                 {"type", "MARKET"},
                 {"quantity", "0.15"},
                 {"newOrderRespType", "RESULT"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("status"), "FILLED");
  a = ws.Signed("order.status", alice, {{"symbol", "BTCUSDT"}, {"origClientOrderId", "ws-1"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("status"), "PARTIALLY_FILLED");
  EXPECT_EQ(a.at("result").at("executedQty"), "0.05000000");
  a = ws.Signed("myTrades", alice, {{"symbol", "BTCUSDT"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").as_array().size(), 2u);
  a = ws.Signed("account.status", alice, {});
  ASSERT_EQ(a.at("status"), 200);
  EXPECT_EQ(json::serialize(a.at("result")),
            n.Signed(http::verb::get, "/api/v3/account", alice, "").body);

  // Amend, cancelReplace, open orders, cancel all, all orders.
  a = ws.Signed("order.amend.keepPriority", alice,
                {{"symbol", "BTCUSDT"}, {"orderId", ws_order}, {"newQty", "0.08"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("amendedOrder").at("qty"), "0.08000000");
  a = ws.Signed("order.cancelReplace", alice,
                {{"symbol", "BTCUSDT"},
                 {"cancelReplaceMode", "STOP_ON_FAILURE"},
                 {"cancelOrderId", ws_order},
                 {"side", "BUY"},
                 {"type", "LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.2"},
                 {"price", "29000"},
                 {"newClientOrderId", "ws-2"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("cancelResult"), "SUCCESS");
  EXPECT_EQ(a.at("result").at("newOrderResponse").at("clientOrderId"), "ws-2");
  a = ws.Signed("order.place", alice,
                {{"symbol", "BTCUSDT"},
                 {"side", "BUY"},
                 {"type", "LIMIT"},
                 {"timeInForce", "GTC"},
                 {"quantity", "0.1"},
                 {"price", "28000"},
                 {"newOrderRespType", "ACK"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_FALSE(a.at("result").as_object().contains("status"));  // ACK
  a = ws.Signed("order.cancel", alice, {{"symbol", "BTCUSDT"}, {"origClientOrderId", "ws-2"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("status"), "CANCELED");
  a = ws.Signed("openOrders.status", alice, {{"symbol", "BTCUSDT"}});
  ASSERT_EQ(a.at("status"), 200);
  EXPECT_EQ(a.at("result").as_array().size(), 1u);
  a = ws.Signed("openOrders.cancelAll", alice, {{"symbol", "BTCUSDT"}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").as_array().size(), 1u);
  EXPECT_EQ(ws.Signed("openOrders.status", alice, {}).at("result"), json::array());
  a = ws.Signed("allOrders", alice, {{"symbol", "BTCUSDT"}});
  ASSERT_EQ(a.at("status"), 200);
  EXPECT_EQ(a.at("result").as_array().size(), 5u);  // the stop-loss limit included
  EXPECT_EQ(json::serialize(a.at("result")),
            n.Signed(http::verb::get, "/api/v3/allOrders", alice, "symbol=BTCUSDT").body);

  // A bad signature, then the connection still answers.
  json::object forged{{"apiKey", alice.key}, {"timestamp", WallMs()}, {"signature", "00"}};
  EXPECT_EQ(ws.Call("account.status", forged).at("error").at("code"), -1022);
  EXPECT_EQ(ws.Call("ping", {}).at("status"), 200);
}

TEST_F(GatewayTest, WebSocketApiWeightIsTheIpsRestWeight) {
  gateway::GatewayOptions go;
  go.ip_limit.weight_per_minute = 60;
  go.ip_limit.burst = 60;
  Node n(dir_, go);
  WsApiClient ws(n.port());
  // exchangeInfo weighs 20 through either API; the IP's bucket is one.
  json::object a = ws.Call("exchangeInfo", {});
  EXPECT_EQ(a.at("rateLimits").at(0).at("count"), 20);
  EXPECT_EQ(a.at("rateLimits").at(0).at("limit"), 60);
  Reply r = n.Request(http::verb::get, "/api/v3/exchangeInfo");
  EXPECT_EQ(r.headers["X-MBX-USED-WEIGHT-1M"], "40");
  a = ws.Call("exchangeInfo", {});
  EXPECT_EQ(a.at("status"), 200);
  a = ws.Call("exchangeInfo", {});
  EXPECT_EQ(a.at("status"), 429);
  EXPECT_EQ(a.at("error").at("code"), -1003);
  EXPECT_EQ(n.Request(http::verb::get, "/api/v3/ping").status, 429);
}

TEST_F(GatewayTest, WebSocketApiSessionWithAnOperatorRegisteredEd25519Key) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  // RFC 8032's first test key.
  std::string secret, pub;
  for (std::string_view hex :
       {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"}) {
    std::string& out = secret.empty() ? secret : pub;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    }
  }
  const std::string der = std::string("\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00", 12) + pub;
  const std::string pem =
      "-----BEGIN PUBLIC KEY-----\n" + mb::Base64Encode(der) + "\n-----END PUBLIC KEY-----\n";
  Reply bad = n.Admin(http::verb::post, fmt::format("accounts/{}/apiKeys", alice.account),
                      R"({"publicKey":"nonsense"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  Reply made = n.Admin(http::verb::post, fmt::format("accounts/{}/apiKeys", alice.account),
                       json::serialize(json::object{{"publicKey", pem}}));
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.Json().at("keyType"), "ED25519");
  EXPECT_FALSE(made.Json().as_object().contains("secretKey"));
  const std::string ed_key(made.Json().at("apiKey").as_string());
  // Registered twice: refused.
  EXPECT_EQ(n.Admin(http::verb::post, fmt::format("accounts/{}/apiKeys", alice.account),
                    json::serialize(json::object{{"publicKey", pem}}))
                .status,
            400);

  const auto sign = [&](json::object params) {
    params["apiKey"] = ed_key;
    params["timestamp"] = WallMs();
    const std::string payload = WsApiClient::Payload(params);
    EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(secret.data()),
        secret.size());
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    std::string sig(64, '\0');
    std::size_t len = sig.size();
    EXPECT_EQ(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key), 1);
    EXPECT_EQ(
        EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                       reinterpret_cast<const unsigned char*>(payload.data()), payload.size()),
        1);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    params["signature"] = mb::Base64Encode(sig);
    return params;
  };

  WsApiClient ws(n.port());
  // An HMAC key cannot log on.
  json::object a = ws.Signed("session.logon", alice, {});
  EXPECT_EQ(a.at("error").at("code"), -4056);
  a = ws.Call("session.logon", sign({}));
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(a.at("result").at("apiKey"), json::value(ed_key));
  a = ws.Call("account.status", {{"timestamp", WallMs()}});
  ASSERT_EQ(a.at("status"), 200) << json::serialize(a);
  EXPECT_EQ(json::serialize(a.at("result")),
            n.Signed(http::verb::get, "/api/v3/account", alice, "").body);
  a = ws.Call("session.logout", {});
  EXPECT_TRUE(a.at("result").at("apiKey").is_null());
  EXPECT_EQ(ws.Call("account.status", {{"timestamp", WallMs()}}).at("error").at("code"), -1102);
  // The Ed25519 key signs a request by itself too, and REST takes it.
  EXPECT_EQ(ws.Call("account.status", sign({})).at("status"), 200);
  const std::string query = fmt::format("timestamp={}", WallMs());
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(secret.data()),
      secret.size());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(64, '\0');
  std::size_t len = sig.size();
  ASSERT_EQ(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key), 1);
  ASSERT_EQ(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                           reinterpret_cast<const unsigned char*>(query.data()), query.size()),
            1);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  std::string encoded;
  for (char ch : mb::Base64Encode(sig)) {
    if (ch == '+') {
      encoded += "%2B";
    } else if (ch == '/') {
      encoded += "%2F";
    } else if (ch == '=') {
      encoded += "%3D";
    } else {
      encoded += ch;
    }
  }
  Reply r = n.Request(http::verb::get, "/api/v3/account?" + query + "&signature=" + encoded, {},
                      {{"X-MBX-APIKEY", ed_key}});
  EXPECT_EQ(r.status, 200) << r.body;
  // An empty HMAC-style signature of the empty secret is no Ed25519 signature.
  const std::string hmac_sig = HmacSha256Hex("", query);
  r = n.Request(http::verb::get, "/api/v3/account?" + query + "&signature=" + hmac_sig, {},
                {{"X-MBX-APIKEY", ed_key}});
  EXPECT_EQ(r.Json().at("code"), -1022);
}

// ------------------------------------------------------------ order lists

// The id of a list's k-th order: the list's id plus k x 2^50 (docs/api.md).
constexpr uint64_t kListOrderStride = uint64_t{1} << 50;

// A user data subscription on the WebSocket API
// (userDataStream.subscribe.signature): every event it pushes, in arrival
// order. Subscribed when constructed (the answer precedes the first event);
// reads on a thread of its own until destroyed.
class UserEvents {
 public:
  UserEvents(uint16_t port, const Client::Keys& k) {
    tcp::socket sock(io_);
    sock.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws_.next_layer() = std::move(sock);
    ws_.handshake("127.0.0.1", "/ws-api/v3");
    json::object params{{"apiKey", k.key}, {"timestamp", WallMs()}};
    params["signature"] = HmacSha256Hex(k.secret, WsApiClient::Payload(params));
    const json::object req{
        {"id", 1}, {"method", "userDataStream.subscribe.signature"}, {"params", params}};
    ws_.write(boost::asio::buffer(json::serialize(req)));
    ws_.read(buf_);
    const json::value answer = json::parse(beast::buffers_to_string(buf_.data()));
    buf_.consume(buf_.size());
    EXPECT_EQ(answer.at("status"), 200) << answer;
    Read();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~UserEvents() {
    boost::asio::post(io_, [this] {
      beast::error_code ec;
      ws_.next_layer().close(ec);
    });
    thread_.join();
  }
  UserEvents(const UserEvents&) = delete;
  UserEvents& operator=(const UserEvents&) = delete;

  std::vector<json::object> Events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  // Waits (at most 10 s) for an event that pred accepts; its index in
  // Events(), or -1.
  template <class Pred>
  int Await(Pred pred) {
    int at = -1;
    Eventually([&] {
      const std::vector<json::object> ev = Events();
      for (std::size_t i = 0; i < ev.size(); ++i) {
        if (pred(ev[i])) {
          at = static_cast<int>(i);
          return true;
        }
      }
      return false;
    });
    return at;
  }

 private:
  void Read() {
    ws_.async_read(buf_, [this](beast::error_code ec, std::size_t) {
      if (ec) return;
      json::value v = json::parse(beast::buffers_to_string(buf_.data()));
      buf_.consume(buf_.size());
      if (v.is_object() && v.as_object().contains("event")) {
        std::lock_guard lock(mu_);
        events_.push_back(v.at("event").as_object());
      }
      Read();
    });
  }

  boost::asio::io_context io_;
  beast::websocket::stream<tcp::socket> ws_{io_};
  beast::flat_buffer buf_;  // the reading thread's (the constructor's before it starts)
  std::thread thread_;
  std::mutex mu_;
  std::vector<json::object> events_;  // GUARDED_BY(mu_)
};

// "code msg" of a 400 answer, else the status and body.
std::string ErrorOf(const Reply& r) {
  if (r.status != 400) return fmt::format("HTTP {}: {}", r.status, r.body);
  return fmt::format("{} {}", r.Json().at("code").as_int64(), Str(r.Json(), "msg"));
}

// What an account's refused request must leave as it was: its balances,
// open orders and open lists.
std::string AccountState(Node& n, const Node::Keys& k) {
  return json::serialize(
             n.Signed(http::verb::get, "/api/v3/account", k, "").Json().at("balances")) +
         n.Signed(http::verb::get, "/api/v3/openOrders", k, "symbol=BTCUSDT").body +
         n.Signed(http::verb::get, "/api/v3/openOrderList", k, "").body;
}

// A string field of an event that holds `text`.
bool Is(const json::object& e, std::string_view field, std::string_view text) {
  const json::value* v = e.if_contains(field);
  return v != nullptr && v->is_string() && v->get_string() == text;
}
bool IsEvent(const json::object& e, std::string_view type) { return Is(e, "e", type); }

// An event of an order of the list (executionReport) or of the list itself.
bool IsListStatus(const json::object& e, uint64_t list, std::string_view status) {
  return IsEvent(e, "listStatus") && e.at("g").to_number<uint64_t>() == list && Is(e, "l", status);
}
bool IsReport(const json::object& e, uint64_t order, std::string_view x, std::string_view status) {
  return IsEvent(e, "executionReport") && e.at("i").to_number<uint64_t>() == order &&
         Is(e, "x", x) && Is(e, "X", status);
}

// The status of one order (GET /api/v3/order by client order id).
std::string OrderStatus(Node& n, const Node::Keys& k, const std::string& cid) {
  Reply r =
      n.Signed(http::verb::get, "/api/v3/order", k, "symbol=BTCUSDT&origClientOrderId=" + cid);
  if (r.status != 200) return r.body;
  return Str(r.Json(), "status");
}

std::string Side(const json::value& depth, const char* side) {
  return json::serialize(depth.at(side));
}

// An OCO through POST /api/v3/orderList/oco with Binance's new parameter
// names; the stop leg triggers on a trade and cancels its partner in the same
// command; every view of the list, its orders, the balances and the user
// data stream agree.
TEST_F(GatewayTest, OcoStopLegTriggersAndCancelsItsPartner) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  auto carol = n.NewAccount("carol");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Deposit(carol.account, "BTC", "1", "c").status, 200);
  auto place = [&](const Node::Keys& k, const std::string& params) {
    return n.Signed(http::verb::post, "/api/v3/order", k, "symbol=BTCUSDT&" + params);
  };
  // The last price: 30000.
  ASSERT_EQ(place(carol, "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=30000").status,
            200);
  ASSERT_EQ(place(alice, "side=BUY&type=MARKET&quantity=0.01").status, 200);

  UserEvents events(n.port(), bob);
  Reply placed = n.Signed(http::verb::post, "/api/v3/orderList/oco", bob,
                          "symbol=BTCUSDT&side=SELL&quantity=0.02&listClientOrderId=bob-oco&"
                          "aboveType=LIMIT_MAKER&abovePrice=32000&aboveClientOrderId=bob-above&"
                          "belowType=STOP_LOSS_LIMIT&belowPrice=29000&belowStopPrice=29500&"
                          "belowTimeInForce=GTC&belowClientOrderId=bob-below");
  ASSERT_EQ(placed.status, 200) << placed.body;
  json::value l = placed.Json();
  const uint64_t list = Id(l, "orderListId");
  const uint64_t above = list;
  const uint64_t below = list + kListOrderStride;
  EXPECT_EQ(Str(l, "contingencyType"), "OCO");
  EXPECT_EQ(Str(l, "listStatusType"), "EXEC_STARTED");
  EXPECT_EQ(Str(l, "listOrderStatus"), "EXECUTING");
  EXPECT_EQ(Str(l, "listClientOrderId"), "bob-oco");
  EXPECT_EQ(Str(l, "symbol"), "BTCUSDT");
  EXPECT_EQ(json::serialize(l.at("orders")),
            fmt::format(R"([{{"symbol":"BTCUSDT","orderId":{},"clientOrderId":"bob-above"}},)"
                        R"({{"symbol":"BTCUSDT","orderId":{},"clientOrderId":"bob-below"}}])",
                        above, below));
  // orderReports in the default FULL shape, one per order.
  const json::array& reports = l.at("orderReports").as_array();
  ASSERT_EQ(reports.size(), 2u) << placed.body;
  EXPECT_EQ(Str(reports[0], "type"), "LIMIT_MAKER");
  EXPECT_EQ(Str(reports[0], "status"), "NEW");
  EXPECT_EQ(Str(reports[0], "price"), "32000.00000000");
  EXPECT_EQ(Str(reports[1], "type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(Str(reports[1], "status"), "NEW");
  EXPECT_EQ(Str(reports[1], "stopPrice"), "29500.00000000");
  for (const json::value& r : reports) {
    EXPECT_EQ(Id(r, "orderListId"), list);
    EXPECT_EQ(Str(r, "side"), "SELL");
    EXPECT_EQ(Str(r, "origQty"), "0.02000000");
    EXPECT_TRUE(r.as_object().contains("fills"));
  }
  // The pair shares one lock: 0.02 BTC, not 0.04.
  Reply account = n.Signed(http::verb::get, "/api/v3/account", bob, "");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.98000000");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.02000000");
  json::value depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT").Json();
  EXPECT_EQ(Side(depth, "asks"), R"([["32000.00000000","0.02000000"]])");

  // Read back: by id and by list client id alike, without orderReports.
  Reply by_id =
      n.Signed(http::verb::get, "/api/v3/orderList", bob, fmt::format("orderListId={}", list));
  ASSERT_EQ(by_id.status, 200) << by_id.body;
  EXPECT_EQ(Str(by_id.Json(), "listOrderStatus"), "EXECUTING");
  EXPECT_EQ(json::serialize(by_id.Json().at("orders")), json::serialize(l.at("orders")));
  EXPECT_FALSE(by_id.Json().as_object().contains("orderReports"));
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/orderList", bob, "origClientOrderId=bob-oco").body,
            by_id.body);
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrderList", bob, "").body,
            "[" + by_id.body + "]");
  // Another account does not see it.
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::get, "/api/v3/orderList", alice,
                             fmt::format("orderListId={}", list))),
            "-2013 Order list does not exist.");
  const json::value open = n.Signed(http::verb::get, "/api/v3/openOrders", bob, "").Json();
  ASSERT_EQ(open.as_array().size(), 2u) << open;
  for (const json::value& o : open.as_array()) {
    EXPECT_EQ(Id(o, "orderListId"), list);
    EXPECT_EQ(Str(o, "status"), "NEW");
  }
  EXPECT_EQ(OrderStatus(n, bob, "bob-above"), "NEW");
  EXPECT_EQ(OrderStatus(n, bob, "bob-below"), "NEW");

  // The stream: EXEC_STARTED before the orders' reports, which carry g.
  const int started =
      events.Await([&](const json::object& e) { return IsListStatus(e, list, "EXEC_STARTED"); });
  ASSERT_GE(started, 0);
  const int new_below =
      events.Await([&](const json::object& e) { return IsReport(e, below, "NEW", "NEW"); });
  EXPECT_GT(new_below, started);
  {
    const json::object s = events.Events()[static_cast<std::size_t>(started)];
    EXPECT_EQ(s.at("s"), "BTCUSDT");
    EXPECT_EQ(s.at("c"), "OCO");
    EXPECT_EQ(s.at("L"), "EXECUTING");
    EXPECT_EQ(s.at("r"), "NONE");
    EXPECT_EQ(s.at("C"), "bob-oco");
    EXPECT_EQ(json::serialize(s.at("O")),
              fmt::format(R"([{{"s":"BTCUSDT","i":{},"c":"bob-above"}},)"
                          R"({{"s":"BTCUSDT","i":{},"c":"bob-below"}}])",
                          above, below));
  }

  // Alice bids 0.04 at 29400; Carol sells 0.01 into it: 29400 <= 29500, the
  // stop triggers, the LIMIT_MAKER is canceled, the stop sells 0.02 at 29400.
  ASSERT_EQ(place(alice, "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.04&price=29400").status,
            200);
  Reply through = place(carol, "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=29400");
  ASSERT_EQ(through.status, 200) << through.body;
  EXPECT_EQ(Str(through.Json(), "status"), "FILLED");
  Reply done;
  EXPECT_TRUE(Eventually([&] {
    done = n.Signed(http::verb::get, "/api/v3/orderList", bob, fmt::format("orderListId={}", list));
    return done.status == 200 && Str(done.Json(), "listOrderStatus") == "ALL_DONE";
  })) << done.body;
  EXPECT_EQ(Str(done.Json(), "listStatusType"), "ALL_DONE");
  EXPECT_EQ(Str(done.Json(), "listClientOrderId"), "bob-oco");
  Reply partner = n.Signed(http::verb::get, "/api/v3/order", bob,
                           fmt::format("symbol=BTCUSDT&orderId={}", above));
  ASSERT_EQ(partner.status, 200) << partner.body;
  EXPECT_EQ(Str(partner.Json(), "status"), "CANCELED");
  EXPECT_EQ(Str(partner.Json(), "executedQty"), "0.00000000");
  EXPECT_EQ(Id(partner.Json(), "orderListId"), list);
  Reply stop = n.Signed(http::verb::get, "/api/v3/order", bob,
                        fmt::format("symbol=BTCUSDT&orderId={}", below));
  ASSERT_EQ(stop.status, 200) << stop.body;
  EXPECT_EQ(Str(stop.Json(), "status"), "FILLED");
  EXPECT_EQ(Str(stop.Json(), "executedQty"), "0.02000000");
  EXPECT_EQ(Str(stop.Json(), "cummulativeQuoteQty"), "588.00000000");
  EXPECT_GT(stop.Json().at("workingTime").as_int64(), 0);  // triggered

  // Balances unlocked exactly: Bob sold 0.02 at 29400 as the taker (10 bps
  // of 588 USDT), Alice's rest of 0.01 at 29400 stays locked.
  account = n.Signed(http::verb::get, "/api/v3/account", bob, "");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.98000000");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.00000000");
  EXPECT_EQ(Balance(account, "USDT", "free"), "587.41200000");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "0.00000000");
  account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "294.00000000");
  EXPECT_EQ(Balance(account, "USDT", "free"), "98524.00000000");
  depth = n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT").Json();
  EXPECT_EQ(Side(depth, "asks"), "[]");
  EXPECT_EQ(Side(depth, "bids"), R"([["29400.00000000","0.01000000"]])");
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrderList", bob, "").body, "[]");
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrders", bob, "").body, "[]");
  const json::value all = n.Signed(http::verb::get, "/api/v3/allOrderList", bob, "").Json();
  ASSERT_EQ(all.as_array().size(), 1u) << all;
  EXPECT_EQ(Id(all.as_array()[0], "orderListId"), list);
  EXPECT_EQ(Str(all.as_array()[0], "listOrderStatus"), "ALL_DONE");

  // The stream: the partner's CANCELED and the stop's fill, then ALL_DONE.
  const int all_done =
      events.Await([&](const json::object& e) { return IsListStatus(e, list, "ALL_DONE"); });
  ASSERT_GE(all_done, 0);
  const int canceled = events.Await(
      [&](const json::object& e) { return IsReport(e, above, "CANCELED", "CANCELED"); });
  const int filled =
      events.Await([&](const json::object& e) { return IsReport(e, below, "TRADE", "FILLED"); });
  ASSERT_GE(canceled, 0);
  ASSERT_GE(filled, 0);
  EXPECT_GT(all_done, canceled);
  EXPECT_GT(all_done, filled);
  const std::vector<json::object> ev = events.Events();
  EXPECT_EQ(ev[static_cast<std::size_t>(all_done)].at("L"), "ALL_DONE");
  EXPECT_EQ(ev[static_cast<std::size_t>(all_done)].at("C"), "bob-oco");
  std::size_t list_reports = 0;
  for (const json::object& e : ev) {
    if (!IsEvent(e, "executionReport")) continue;
    const uint64_t id = e.at("i").to_number<uint64_t>();
    if (id != above && id != below) continue;
    ++list_reports;
    EXPECT_EQ(e.at("g").to_number<uint64_t>(), list) << e;
  }
  EXPECT_GE(list_reports, 4u);  // two NEW, a CANCELED, the stop's TRADE
  std::size_t statuses = 0;
  for (const json::object& e : ev) statuses += IsEvent(e, "listStatus") ? 1u : 0u;
  EXPECT_EQ(statuses, 2u);
}

// DELETE /api/v3/orderList by orderListId and by listClientOrderId, and the
// cancel of one order of a list: every order of the list canceled, the locks
// released to the unit.
TEST_F(GatewayTest, OrderListCancelsByIdByClientIdAndByOneOrder) {
  Node n(dir_);
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "USDT", "10000", "u").status, 200);
  UserEvents events(n.port(), bob);
  const std::string before = AccountState(n, bob);
  auto oco = [&](const std::string& cid) {
    return n.Signed(http::verb::post, "/api/v3/orderList/oco", bob,
                    "symbol=BTCUSDT&side=BUY&quantity=0.1&listClientOrderId=" + cid +
                        "&aboveType=STOP_LOSS_LIMIT&abovePrice=36000&aboveStopPrice=35000&"
                        "aboveTimeInForce=GTC&belowType=LIMIT_MAKER&belowPrice=25000&"
                        "newOrderRespType=ACK");
  };
  // By orderListId, with the cancel's own client id.
  Reply first = oco("bob-1");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_FALSE(first.Json().as_object().contains("orderReports"));  // ACK
  const uint64_t list1 = Id(first.Json(), "orderListId");
  // A buy pair: the STOP_LOSS_LIMIT at 36000 holds 3600 USDT, the
  // LIMIT_MAKER at 25000 needs nothing beyond it.
  Reply account = n.Signed(http::verb::get, "/api/v3/account", bob, "");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "3600.00000000");
  EXPECT_EQ(Balance(account, "USDT", "free"), "6400.00000000");
  Reply c1 = n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                      fmt::format("symbol=BTCUSDT&orderListId={}&newClientOrderId=bob-cxl", list1));
  ASSERT_EQ(c1.status, 200) << c1.body;
  json::value c = c1.Json();
  EXPECT_EQ(Id(c, "orderListId"), list1);
  EXPECT_EQ(Str(c, "contingencyType"), "OCO");
  EXPECT_EQ(Str(c, "listStatusType"), "ALL_DONE");
  EXPECT_EQ(Str(c, "listOrderStatus"), "ALL_DONE");
  EXPECT_EQ(Str(c, "listClientOrderId"), "bob-1");
  ASSERT_EQ(c.at("orderReports").as_array().size(), 2u) << c1.body;
  for (const json::value& r : c.at("orderReports").as_array()) {
    EXPECT_EQ(Str(r, "status"), "CANCELED");
    EXPECT_EQ(Str(r, "clientOrderId"), "bob-cxl");
    EXPECT_EQ(Id(r, "orderListId"), list1);
  }
  EXPECT_EQ(Str(c.at("orderReports").as_array()[0], "type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(Str(c.at("orderReports").as_array()[1], "type"), "LIMIT_MAKER");
  EXPECT_EQ(AccountState(n, bob), before);
  // Done: a second cancel does not find it; GET still answers it.
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                             fmt::format("symbol=BTCUSDT&orderListId={}", list1))),
            "-2011 Order list does not exist.");
  EXPECT_EQ(
      Str(n.Signed(http::verb::get, "/api/v3/orderList", bob, fmt::format("orderListId={}", list1))
              .Json(),
          "listOrderStatus"),
      "ALL_DONE");

  // By listClientOrderId; the id is free again once the list is done.
  Reply second = oco("bob-1");
  ASSERT_EQ(second.status, 200) << second.body;
  const uint64_t list2 = Id(second.Json(), "orderListId");
  EXPECT_NE(list2, list1);
  EXPECT_EQ(ErrorOf(oco("bob-1")), "-2010 Duplicate order sent.");
  Reply c2 = n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                      "symbol=BTCUSDT&listClientOrderId=bob-1");
  ASSERT_EQ(c2.status, 200) << c2.body;
  EXPECT_EQ(Id(c2.Json(), "orderListId"), list2);
  EXPECT_EQ(Str(c2.Json(), "listOrderStatus"), "ALL_DONE");
  const json::value cancel2 = c2.Json();
  for (const json::value& r : cancel2.at("orderReports").as_array()) {
    EXPECT_EQ(Str(r, "status"), "CANCELED");
    EXPECT_FALSE(Str(r, "origClientOrderId").empty());
  }
  EXPECT_EQ(AccountState(n, bob), before);

  // One order of the list canceled: its partner goes with it.
  Reply third = oco("bob-3");
  ASSERT_EQ(third.status, 200) << third.body;
  const uint64_t list3 = Id(third.Json(), "orderListId");
  Reply one = n.Signed(http::verb::delete_, "/api/v3/order", bob,
                       fmt::format("symbol=BTCUSDT&orderId={}", list3 + kListOrderStride));
  ASSERT_EQ(one.status, 200) << one.body;
  // The answer is the requested order's, as on Binance.
  EXPECT_EQ(Id(one.Json(), "orderId"), list3 + kListOrderStride) << one.body;
  EXPECT_EQ(Str(one.Json(), "type"), "LIMIT_MAKER");
  EXPECT_EQ(Str(one.Json(), "status"), "CANCELED");
  EXPECT_EQ(Id(one.Json(), "orderListId"), list3);
  Reply got;
  EXPECT_TRUE(Eventually([&] {
    got = n.Signed(http::verb::get, "/api/v3/orderList", bob, fmt::format("orderListId={}", list3));
    return got.status == 200 && Str(got.Json(), "listOrderStatus") == "ALL_DONE";
  })) << got.body;
  EXPECT_EQ(Str(n.Signed(http::verb::get, "/api/v3/order", bob,
                         fmt::format("symbol=BTCUSDT&orderId={}", list3))
                    .Json(),
                "status"),
            "CANCELED");
  EXPECT_EQ(AccountState(n, bob), before);
  // By the order's client order id.
  auto named = [&](const std::string& cid) {
    return n.Signed(http::verb::post, "/api/v3/orderList/oco", bob,
                    "symbol=BTCUSDT&side=BUY&quantity=0.1&aboveType=STOP_LOSS_LIMIT&"
                    "abovePrice=36000&aboveStopPrice=35000&aboveTimeInForce=GTC&"
                    "belowType=LIMIT_MAKER&belowPrice=25000&belowClientOrderId=" +
                        cid);
  };
  Reply fourth = named("bob-4-below");
  ASSERT_EQ(fourth.status, 200) << fourth.body;
  const uint64_t list4 = Id(fourth.Json(), "orderListId");
  one = n.Signed(http::verb::delete_, "/api/v3/order", bob,
                 "symbol=BTCUSDT&origClientOrderId=bob-4-below");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(Id(one.Json(), "orderId"), list4 + kListOrderStride) << one.body;
  EXPECT_EQ(Str(one.Json(), "origClientOrderId"), "bob-4-below");
  EXPECT_EQ(AccountState(n, bob), before);
  // cancelReplace of an order of a list: the list goes, the cancel's answer
  // is the requested order's.
  Reply fifth = named("bob-5-below");
  ASSERT_EQ(fifth.status, 200) << fifth.body;
  const uint64_t list5 = Id(fifth.Json(), "orderListId");
  Reply cr = n.Signed(http::verb::post, "/api/v3/order/cancelReplace", bob,
                      "symbol=BTCUSDT&cancelReplaceMode=STOP_ON_FAILURE&"
                      "cancelOrigClientOrderId=bob-5-below&side=BUY&type=LIMIT&"
                      "timeInForce=GTC&quantity=0.01&price=20000&newClientOrderId=bob-5-new");
  ASSERT_EQ(cr.status, 200) << cr.body;
  const json::value cancel_response = cr.Json().at("cancelResponse");
  EXPECT_EQ(Id(cancel_response, "orderId"), list5 + kListOrderStride) << cr.body;
  EXPECT_EQ(Str(cancel_response, "origClientOrderId"), "bob-5-below");
  EXPECT_EQ(Str(cancel_response, "status"), "CANCELED");
  EXPECT_EQ(Str(cr.Json().at("newOrderResponse"), "clientOrderId"), "bob-5-new");
  EXPECT_EQ(cr.Json().at("newOrderResponse").at("orderListId").as_int64(), -1);
  EXPECT_EQ(OrderStatus(n, bob, "bob-5-below"), "CANCELED");
  EXPECT_EQ(Str(n.Signed(http::verb::get, "/api/v3/order", bob,
                         fmt::format("symbol=BTCUSDT&orderId={}", list5))
                    .Json(),
                "status"),
            "CANCELED");
  ASSERT_EQ(n.Signed(http::verb::delete_, "/api/v3/order", bob,
                     "symbol=BTCUSDT&origClientOrderId=bob-5-new")
                .status,
            200);
  EXPECT_EQ(AccountState(n, bob), before);

  // allOrderList: the five, by id ascending; fromId and limit.
  const json::value all = n.Signed(http::verb::get, "/api/v3/allOrderList", bob, "").Json();
  ASSERT_EQ(all.as_array().size(), 5u) << all;
  EXPECT_EQ(Id(all.as_array()[0], "orderListId"), list1);
  EXPECT_EQ(Id(all.as_array()[1], "orderListId"), list2);
  EXPECT_EQ(Id(all.as_array()[2], "orderListId"), list3);
  EXPECT_EQ(Id(all.as_array()[3], "orderListId"), list4);
  EXPECT_EQ(Id(all.as_array()[4], "orderListId"), list5);
  for (const json::value& x : all.as_array()) EXPECT_EQ(Str(x, "listStatusType"), "ALL_DONE");
  const json::value from = n.Signed(http::verb::get, "/api/v3/allOrderList", bob,
                                    fmt::format("fromId={}&limit=1", list2))
                               .Json();
  ASSERT_EQ(from.as_array().size(), 1u) << from;
  EXPECT_EQ(Id(from.as_array()[0], "orderListId"), list2);
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrderList", bob, "").body, "[]");

  // The stream: each list started and ended once.
  for (const uint64_t id : {list1, list2, list3, list4, list5}) {
    EXPECT_GE(events.Await([&](const json::object& e) { return IsListStatus(e, id, "ALL_DONE"); }),
              0)
        << id;
    std::size_t n_started = 0, n_done = 0;
    for (const json::object& e : events.Events()) {
      n_started += IsListStatus(e, id, "EXEC_STARTED") ? 1u : 0u;
      n_done += IsListStatus(e, id, "ALL_DONE") ? 1u : 0u;
    }
    EXPECT_EQ(n_started, 1u) << id;
    EXPECT_EQ(n_done, 1u) << id;
  }
}

// OTO: the pending order is PENDING_NEW (open, in no book, locking nothing)
// until the working order fills completely, then NEW and resting; OTOCO
// likewise with its OCO pair.
TEST_F(GatewayTest, OtoAndOtocoPendingOrdersWaitForTheWorkingFill) {
  Node n(dir_);
  auto alice = n.NewAccount("alice");
  auto bob = n.NewAccount("bob");
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "100000", "a").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "USDT", "100000", "bu").status, 200);
  auto place = [&](const Node::Keys& k, const std::string& params) {
    return n.Signed(http::verb::post, "/api/v3/order", k, "symbol=BTCUSDT&" + params);
  };
  auto depth = [&] { return n.Request(http::verb::get, "/api/v3/depth?symbol=BTCUSDT").Json(); };
  UserEvents events(n.port(), alice);

  // Alice buys 0.02 at 30000; once bought, she sells 0.015 at 31000.
  Reply placed = n.Signed(http::verb::post, "/api/v3/orderList/oto", alice,
                          "symbol=BTCUSDT&listClientOrderId=alice-oto&workingType=LIMIT&"
                          "workingSide=BUY&workingPrice=30000&workingQuantity=0.02&"
                          "workingTimeInForce=GTC&workingClientOrderId=alice-work&"
                          "pendingType=LIMIT&pendingSide=SELL&pendingPrice=31000&"
                          "pendingQuantity=0.015&pendingTimeInForce=GTC&"
                          "pendingClientOrderId=alice-pend&newOrderRespType=RESULT");
  ASSERT_EQ(placed.status, 200) << placed.body;
  json::value l = placed.Json();
  const uint64_t oto = Id(l, "orderListId");
  EXPECT_EQ(Str(l, "contingencyType"), "OTO");
  EXPECT_EQ(Str(l, "listStatusType"), "EXEC_STARTED");
  EXPECT_EQ(Str(l, "listOrderStatus"), "EXECUTING");
  EXPECT_EQ(Str(l, "listClientOrderId"), "alice-oto");
  ASSERT_EQ(l.at("orderReports").as_array().size(), 2u) << placed.body;
  const json::value& work = l.at("orderReports").as_array()[0];
  const json::value& pend = l.at("orderReports").as_array()[1];
  EXPECT_EQ(Id(work, "orderId"), oto);
  EXPECT_EQ(Str(work, "clientOrderId"), "alice-work");
  EXPECT_EQ(Str(work, "status"), "NEW");
  EXPECT_EQ(Str(work, "side"), "BUY");
  EXPECT_EQ(Id(pend, "orderId"), oto + kListOrderStride);
  EXPECT_EQ(Str(pend, "clientOrderId"), "alice-pend");
  EXPECT_EQ(Str(pend, "status"), "PENDING_NEW");
  EXPECT_EQ(Str(pend, "side"), "SELL");
  EXPECT_FALSE(pend.as_object().contains("fills"));  // RESULT

  // The pending order: open, PENDING_NEW, in no book, locking nothing.
  auto open_status = [&] {
    std::map<std::string, std::string> out;
    const json::value open =
        n.Signed(http::verb::get, "/api/v3/openOrders", alice, "symbol=BTCUSDT").Json();
    for (const json::value& o : open.as_array()) {
      out[Str(o, "clientOrderId")] = Str(o, "status");
    }
    return out;
  };
  using Statuses = std::map<std::string, std::string>;
  EXPECT_EQ(open_status(), (Statuses{{"alice-pend", "PENDING_NEW"}, {"alice-work", "NEW"}}));
  EXPECT_EQ(OrderStatus(n, alice, "alice-pend"), "PENDING_NEW");
  EXPECT_EQ(Side(depth(), "bids"), R"([["30000.00000000","0.02000000"]])");
  EXPECT_EQ(Side(depth(), "asks"), "[]");
  Reply account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "600.00000000");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.00000000");

  // Half the working order fills: the pending order still waits.
  ASSERT_EQ(place(bob, "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=30000").status,
            200);
  EXPECT_EQ(open_status(),
            (Statuses{{"alice-pend", "PENDING_NEW"}, {"alice-work", "PARTIALLY_FILLED"}}));
  EXPECT_EQ(Side(depth(), "asks"), "[]");
  // The rest fills: the pending order is placed, NEW, resting at 31000 and
  // locking its 0.015 BTC of the 0.01998 bought (10 bps paid in BTC).
  Reply completes = place(bob,
                          "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.01&price=30000&"
                          "newClientOrderId=bob-2");
  ASSERT_EQ(completes.status, 200) << completes.body;
  // Bob's answer is his order's, not that of the order his trade placed.
  json::value b = completes.Json();
  EXPECT_EQ(Str(b, "clientOrderId"), "bob-2") << completes.body;
  EXPECT_NE(Id(b, "orderId"), oto + kListOrderStride);
  EXPECT_EQ(b.at("orderListId").as_int64(), -1);
  EXPECT_EQ(Str(b, "side"), "SELL");
  EXPECT_EQ(Str(b, "price"), "30000.00000000");
  EXPECT_EQ(Str(b, "origQty"), "0.01000000");
  EXPECT_EQ(Str(b, "executedQty"), "0.01000000");
  EXPECT_EQ(Str(b, "status"), "FILLED");
  EXPECT_EQ(b.at("fills").as_array().size(), 1u);
  EXPECT_EQ(OrderStatus(n, alice, "alice-work"), "FILLED");
  EXPECT_EQ(open_status(), (Statuses{{"alice-pend", "NEW"}}));
  EXPECT_EQ(Side(depth(), "asks"), R"([["31000.00000000","0.01500000"]])");
  account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.00498000");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.01500000");
  EXPECT_EQ(Balance(account, "USDT", "free"), "99400.00000000");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "0.00000000");
  // The list goes on while its pending order is open.
  Reply got =
      n.Signed(http::verb::get, "/api/v3/orderList", alice, fmt::format("orderListId={}", oto));
  EXPECT_EQ(Str(got.Json(), "listOrderStatus"), "EXECUTING") << got.body;
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrderList", alice, "").body,
            "[" + got.body + "]");
  // The stream: PENDING_NEW at placement (x=NEW), NEW once placed.
  const int pending_new = events.Await([&](const json::object& e) {
    return IsReport(e, oto + kListOrderStride, "NEW", "PENDING_NEW");
  });
  const int placed_new = events.Await(
      [&](const json::object& e) { return IsReport(e, oto + kListOrderStride, "NEW", "NEW"); });
  const int work_filled =
      events.Await([&](const json::object& e) { return IsReport(e, oto, "TRADE", "FILLED"); });
  ASSERT_GE(pending_new, 0);
  ASSERT_GE(work_filled, 0);
  EXPECT_GT(placed_new, work_filled);

  // Canceled by listClientOrderId: the placed order is canceled, its BTC freed.
  Reply c = n.Signed(http::verb::delete_, "/api/v3/orderList", alice,
                     "symbol=BTCUSDT&listClientOrderId=alice-oto");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(Str(c.Json(), "listOrderStatus"), "ALL_DONE");
  EXPECT_EQ(OrderStatus(n, alice, "alice-pend"), "CANCELED");
  EXPECT_EQ(OrderStatus(n, alice, "alice-work"), "FILLED");
  account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.01998000");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.00000000");
  EXPECT_GE(events.Await([&](const json::object& e) { return IsListStatus(e, oto, "ALL_DONE"); }),
            0);

  // An OTO whose working order is canceled: the pending one goes with it,
  // CANCELED from PENDING_NEW; nothing stays locked.
  const std::string before = AccountState(n, alice);
  Reply second = n.Signed(http::verb::post, "/api/v3/orderList/oto", alice,
                          "symbol=BTCUSDT&workingType=LIMIT_MAKER&workingSide=BUY&"
                          "workingPrice=29000&workingQuantity=0.01&pendingType=TAKE_PROFIT&"
                          "pendingSide=SELL&pendingStopPrice=33000&pendingQuantity=0.01");
  ASSERT_EQ(second.status, 200) << second.body;
  const uint64_t oto2 = Id(second.Json(), "orderListId");
  EXPECT_EQ(Str(second.Json(), "listClientOrderId").rfind("mb-", 0), 0u);  // generated
  Reply cw = n.Signed(http::verb::delete_, "/api/v3/order", alice,
                      fmt::format("symbol=BTCUSDT&orderId={}", oto2));
  ASSERT_EQ(cw.status, 200) << cw.body;
  EXPECT_TRUE(Eventually([&] {
    Reply r = n.Signed(http::verb::get, "/api/v3/order", alice,
                       fmt::format("symbol=BTCUSDT&orderId={}", oto2 + kListOrderStride));
    return r.status == 200 && Str(r.Json(), "status") == "CANCELED";
  }));
  EXPECT_EQ(
      Str(n.Signed(http::verb::get, "/api/v3/orderList", alice, fmt::format("orderListId={}", oto2))
              .Json(),
          "listOrderStatus"),
      "ALL_DONE");
  EXPECT_EQ(AccountState(n, alice), before);

  // OTOCO: Alice buys 0.02 at 30000, then sells 0.015 either at 32000
  // (LIMIT_MAKER) or on a fall to 28500 (STOP_LOSS_LIMIT at 28000).
  Reply otoco = n.Signed(http::verb::post, "/api/v3/orderList/otoco", alice,
                         "symbol=BTCUSDT&listClientOrderId=alice-otoco&workingType=LIMIT&"
                         "workingSide=BUY&workingPrice=30000&workingQuantity=0.02&"
                         "workingTimeInForce=GTC&pendingSide=SELL&pendingQuantity=0.015&"
                         "pendingAboveType=LIMIT_MAKER&pendingAbovePrice=32000&"
                         "pendingAboveClientOrderId=alice-tp&pendingBelowType=STOP_LOSS_LIMIT&"
                         "pendingBelowPrice=28000&pendingBelowStopPrice=28500&"
                         "pendingBelowTimeInForce=GTC&pendingBelowClientOrderId=alice-sl");
  ASSERT_EQ(otoco.status, 200) << otoco.body;
  l = otoco.Json();
  const uint64_t list3 = Id(l, "orderListId");
  EXPECT_EQ(Str(l, "contingencyType"), "OTO");
  ASSERT_EQ(l.at("orders").as_array().size(), 3u);
  ASSERT_EQ(l.at("orderReports").as_array().size(), 3u);
  std::vector<std::string> statuses;
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(Id(l.at("orders").as_array()[k], "orderId"), list3 + k * kListOrderStride);
    statuses.emplace_back(Str(l.at("orderReports").as_array()[k], "status"));
  }
  EXPECT_EQ(statuses, (std::vector<std::string>{"NEW", "PENDING_NEW", "PENDING_NEW"}));
  EXPECT_EQ(Str(l.at("orderReports").as_array()[1], "type"), "LIMIT_MAKER");
  EXPECT_EQ(Str(l.at("orderReports").as_array()[2], "type"), "STOP_LOSS_LIMIT");
  EXPECT_EQ(OrderStatus(n, alice, "alice-tp"), "PENDING_NEW");
  EXPECT_EQ(OrderStatus(n, alice, "alice-sl"), "PENDING_NEW");
  EXPECT_EQ(Side(depth(), "asks"), "[]");
  // Bob fills the working order: both pending orders are placed; the pair
  // shares one lock of 0.015 BTC. RESULT: answered once the read side shows
  // the fill (an ACK answer may come before it).
  Reply ack = place(bob,
                    "side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.02&price=30000&"
                    "newClientOrderId=bob-3&newOrderRespType=RESULT");
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_EQ(Str(ack.Json(), "clientOrderId"), "bob-3") << ack.body;
  EXPECT_EQ(ack.Json().at("orderListId").as_int64(), -1);
  EXPECT_EQ(OrderStatus(n, alice, "alice-tp"), "NEW");
  EXPECT_EQ(OrderStatus(n, alice, "alice-sl"), "NEW");
  EXPECT_EQ(Side(depth(), "asks"), R"([["32000.00000000","0.01500000"]])");
  account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.01500000");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.02496000");  // 0.01998 + 0.01998 - 0.015
  // Bob buys at 32000: the LIMIT_MAKER fills, the stop is canceled, done.
  ASSERT_EQ(place(bob, "side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.015&price=32000").status,
            200);
  EXPECT_EQ(OrderStatus(n, alice, "alice-tp"), "FILLED");
  EXPECT_EQ(OrderStatus(n, alice, "alice-sl"), "CANCELED");
  got = n.Signed(http::verb::get, "/api/v3/orderList", alice, "origClientOrderId=alice-otoco");
  EXPECT_EQ(Str(got.Json(), "listStatusType"), "ALL_DONE") << got.body;
  account = n.Signed(http::verb::get, "/api/v3/account", alice, "");
  EXPECT_EQ(Balance(account, "BTC", "locked"), "0.00000000");
  EXPECT_EQ(Balance(account, "BTC", "free"), "0.02496000");
  // 100000 - 600 - 600 + 480 - 0.48 (the maker's 10 bps in USDT)
  EXPECT_EQ(Balance(account, "USDT", "free"), "99279.52000000");
  EXPECT_EQ(Balance(account, "USDT", "locked"), "0.00000000");
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrderList", alice, "").body, "[]");
  EXPECT_EQ(n.Signed(http::verb::get, "/api/v3/openOrders", alice, "").body, "[]");
  const json::value all = n.Signed(http::verb::get, "/api/v3/allOrderList", alice, "").Json();
  std::vector<uint64_t> ids;
  for (const json::value& x : all.as_array()) ids.push_back(Id(x, "orderListId"));
  EXPECT_EQ(ids, (std::vector<uint64_t>{oto, oto2, list3}));
  const int started =
      events.Await([&](const json::object& e) { return IsListStatus(e, list3, "EXEC_STARTED"); });
  const int ended =
      events.Await([&](const json::object& e) { return IsListStatus(e, list3, "ALL_DONE"); });
  ASSERT_GE(started, 0);
  EXPECT_GT(ended, started);
  EXPECT_EQ(events.Events()[static_cast<std::size_t>(started)].at("c"), "OTO");
  EXPECT_EQ(events.Events()[static_cast<std::size_t>(started)].at("O").as_array().size(), 3u);
}

// Refusals, each with Binance's code and message, and nothing changed: the
// balances, open orders and open lists are as they were.
TEST_F(GatewayTest, OrderListRefusalsChangeNothing) {
  Node n(dir_);
  auto bob = n.NewAccount("bob");
  auto alice = n.NewAccount("alice");
  ASSERT_EQ(n.Deposit(bob.account, "BTC", "1", "b").status, 200);
  ASSERT_EQ(n.Deposit(bob.account, "USDT", "1000", "u").status, 200);
  ASSERT_EQ(n.Deposit(alice.account, "USDT", "1000", "a").status, 200);
  // A last price (30000) and an open list of Bob's, so that "nothing
  // changed" covers something.
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", bob,
                     "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.001&"
                     "price=30000")
                .status,
            200);
  ASSERT_EQ(n.Signed(http::verb::post, "/api/v3/order", alice,
                     "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.001")
                .status,
            200);
  Reply open_list = n.Signed(http::verb::post, "/api/v3/orderList/oco", bob,
                             "symbol=BTCUSDT&side=SELL&quantity=0.01&listClientOrderId=held&"
                             "aboveType=LIMIT_MAKER&abovePrice=40000&belowType=STOP_LOSS&"
                             "belowStopPrice=20000");
  ASSERT_EQ(open_list.status, 200) << open_list.body;
  const std::string before = AccountState(n, bob);
  const uint64_t seq = n.client().AppliedSeq();

  const std::string sell =
      "symbol=BTCUSDT&side=SELL&quantity=0.02&aboveType=LIMIT_MAKER&abovePrice=32000&"
      "belowType=STOP_LOSS_LIMIT&belowPrice=29000&belowTimeInForce=GTC";
  auto oco = [&](const std::string& params) {
    return ErrorOf(n.Signed(http::verb::post, "/api/v3/orderList/oco", bob, params));
  };
  auto oto = [&](const std::string& params) {
    return ErrorOf(n.Signed(http::verb::post, "/api/v3/orderList/oto", bob, params));
  };
  auto otoco = [&](const std::string& params) {
    return ErrorOf(n.Signed(http::verb::post, "/api/v3/orderList/otoco", bob, params));
  };
  constexpr std::string_view kPrices =
      "-2010 The relationship of the prices for the orders is not correct.";
  // The above price under the below one.
  EXPECT_EQ(oco(sell + "&belowStopPrice=32500"), kPrices);
  EXPECT_EQ(oco(sell + "&belowStopPrice=32000"), kPrices);  // equal is not above
  EXPECT_EQ(oco("symbol=BTCUSDT&side=BUY&quantity=0.01&aboveType=STOP_LOSS&aboveStopPrice=25000&"
                "belowType=LIMIT_MAKER&belowPrice=26000"),
            kPrices);
  // Wrong sides: a SELL's stop-loss above, its LIMIT_MAKER below; a BUY's
  // LIMIT_MAKER above.
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=0.02&aboveType=STOP_LOSS&aboveStopPrice=32000&"
                "belowType=LIMIT_MAKER&belowPrice=25000"),
            kPrices);
  EXPECT_EQ(oco("symbol=BTCUSDT&side=BUY&quantity=0.01&aboveType=LIMIT_MAKER&abovePrice=35000&"
                "belowType=STOP_LOSS&belowStopPrice=25000"),
            kPrices);
  EXPECT_EQ(oco("symbol=BTCUSDT&side=BUY&quantity=0.01&aboveType=TAKE_PROFIT&aboveStopPrice=35000&"
                "belowType=TAKE_PROFIT&belowStopPrice=25000"),
            kPrices);
  // Missing and malformed parameters.
  EXPECT_EQ(oco("side=SELL&quantity=0.02&aboveType=LIMIT_MAKER&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1102 Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=0.02&abovePrice=32000&belowType=STOP_LOSS&"
                "belowStopPrice=29000"),
            "-1102 Mandatory parameter 'aboveType' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=0.02&aboveType=LIMIT_MAKER&abovePrice=32000"),
            "-1102 Mandatory parameter 'belowType' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&aboveType=LIMIT_MAKER&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1102 Mandatory parameter 'quantity' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco("symbol=BTCUSDT&quantity=0.02&aboveType=LIMIT_MAKER&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1102 Mandatory parameter 'side' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=0.02&aboveType=LIMIT_MAKER&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1102 Mandatory parameter 'abovePrice' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oco(sell),
            "-1102 Param 'belowStopPrice' or 'belowTrailingDelta' must be sent, but both were "
            "empty/null!");
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500&aboveTimeInForce=GTC"),
            "-1106 Parameter 'aboveTimeInForce' sent when not required.");
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=0.02&aboveType=LIMIT&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1158 Order type not supported in OCO.");
  EXPECT_EQ(oco("symbol=NOPE&side=SELL&quantity=0.02&aboveType=LIMIT_MAKER&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-1121 Invalid symbol.");
  // ICEBERG_PARTS on a leg: 0.02 / 0.001 is 20 parts, the limit 10.
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500&aboveIcebergQty=0.001"),
            "-1013 Filter failure: ICEBERG_PARTS");
  // TRAILING_DELTA: 10..2000 basis points.
  EXPECT_EQ(oco(sell + "&belowTrailingDelta=5"), "-1013 Filter failure: TRAILING_DELTA");
  EXPECT_EQ(oco(sell + "&belowTrailingDelta=2001"), "-1013 Filter failure: TRAILING_DELTA");
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500.001"), "-1013 Filter failure: PRICE_FILTER");
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500&listClientOrderId=bad%20id"),
            "-1100 Illegal characters found in parameter 'listClientOrderId'; legal range is "
            "'^[\\.A-Z\\:/a-z0-9_-]{1,36}$'.");

  const std::string working =
      "symbol=BTCUSDT&workingType=LIMIT&workingSide=SELL&workingPrice=35000&"
      "workingQuantity=0.02&workingTimeInForce=GTC";
  EXPECT_EQ(oto("symbol=BTCUSDT&workingType=MARKET&workingSide=SELL&workingQuantity=0.02&"
                "pendingType=LIMIT&pendingSide=BUY&pendingPrice=20000&pendingQuantity=0.02&"
                "pendingTimeInForce=GTC"),
            "-1158 Order type not supported in OTO.");
  EXPECT_EQ(oto(working + "&pendingSide=BUY&pendingPrice=20000&pendingQuantity=0.02"),
            "-1102 Mandatory parameter 'pendingType' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oto(working + "&pendingType=LIMIT&pendingPrice=20000&pendingQuantity=0.02&"
                          "pendingTimeInForce=GTC"),
            "-1102 Mandatory parameter 'pendingSide' was not sent, was empty/null, or malformed.");
  EXPECT_EQ(oto(working + "&workingIcebergQty=0.001&pendingType=LIMIT&pendingSide=BUY&"
                          "pendingPrice=20000&pendingQuantity=0.02&pendingTimeInForce=GTC"),
            "-1013 Filter failure: ICEBERG_PARTS");
  EXPECT_EQ(oto(working + "&pendingType=STOP_LOSS&pendingSide=BUY&pendingTrailingDelta=3000&"
                          "pendingQuantity=0.02"),
            "-1013 Filter failure: TRAILING_DELTA");
  EXPECT_EQ(otoco(working + "&pendingSide=BUY&pendingQuantity=0.02&"
                            "pendingAboveType=STOP_LOSS&pendingAboveStopPrice=25000&"
                            "pendingBelowType=LIMIT_MAKER&pendingBelowPrice=26000"),
            kPrices);
  EXPECT_EQ(otoco(working + "&pendingSide=BUY&pendingQuantity=0.02&pendingAboveType=LIMIT&"
                            "pendingAbovePrice=40000&pendingBelowType=LIMIT_MAKER&"
                            "pendingBelowPrice=26000"),
            "-1158 Order type not supported in OCO.");
  EXPECT_EQ(n.client().AppliedSeq(), seq);  // none of these reached the engine
  EXPECT_EQ(AccountState(n, bob), before);

  // Refused by the engine: insufficient funds, a duplicate list client id,
  // one client id for both orders.
  EXPECT_EQ(oco("symbol=BTCUSDT&side=SELL&quantity=2&aboveType=LIMIT_MAKER&abovePrice=32000&"
                "belowType=STOP_LOSS&belowStopPrice=29000"),
            "-2010 Account has insufficient balance for requested action.");
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500&listClientOrderId=held"),
            "-2010 Duplicate order sent.");
  EXPECT_EQ(oco(sell + "&belowStopPrice=29500&aboveClientOrderId=x1&belowClientOrderId=x1"),
            "-2010 Duplicate order sent.");
  // The OTO working order needs its funds; the pending one's are not checked
  // until it is placed.
  EXPECT_EQ(oto("symbol=BTCUSDT&workingType=LIMIT&workingSide=BUY&workingPrice=30000&"
                "workingQuantity=1&workingTimeInForce=GTC&pendingType=LIMIT&pendingSide=SELL&"
                "pendingPrice=31000&pendingQuantity=1&pendingTimeInForce=GTC"),
            "-2010 Account has insufficient balance for requested action.");
  EXPECT_EQ(AccountState(n, bob), before);

  // Unknown lists: GET -2013, DELETE -2011; nor another account's.
  const uint64_t held = Id(open_list.Json(), "orderListId");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::get, "/api/v3/orderList", bob, "orderListId=987654321")),
            "-2013 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::get, "/api/v3/orderList", bob, "origClientOrderId=nope")),
            "-2013 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::get, "/api/v3/orderList", bob, "")),
            "-1102 Param 'origClientOrderId' or 'orderListId' must be sent, but both were "
            "empty/null!");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                             "symbol=BTCUSDT&orderListId=987654321")),
            "-2011 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                             "symbol=BTCUSDT&listClientOrderId=nope")),
            "-2011 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", alice,
                             fmt::format("symbol=BTCUSDT&orderListId={}", held))),
            "-2011 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", bob,
                             fmt::format("symbol=ETHUSDT&orderListId={}", held))),
            "-2011 Order list does not exist.");
  EXPECT_EQ(ErrorOf(n.Signed(http::verb::delete_, "/api/v3/orderList", bob, "symbol=BTCUSDT")),
            "-1102 Param 'orderListId' or 'listClientOrderId' must be sent, but both were "
            "empty/null!");
  EXPECT_EQ(AccountState(n, bob), before);
  // The held list is intact.
  EXPECT_EQ(
      Str(n.Signed(http::verb::get, "/api/v3/orderList", bob, "origClientOrderId=held").Json(),
          "listOrderStatus"),
      "EXECUTING");
}

}  // namespace
}  // namespace mb
