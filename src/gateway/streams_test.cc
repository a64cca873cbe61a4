// Unit tests of the stream hub: a recording WsConnection stands in for the
// server; the events come from a real engine through a real read side.
#include "gateway/streams.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/decimal.h"
#include "common/hmac.h"
#include "engine/engine.h"
#include "gateway/binance_json.h"
#include "support/key_store_test_support.h"

namespace mb::gateway {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using engine::Side;

constexpr AssetId kBtc{0};
constexpr AssetId kUsdt{1};
constexpr AssetId kEth{2};
constexpr MarketId kBtcUsdt{0};
constexpr MarketId kEthUsdt{1};
constexpr int kScale = 8;                   // every asset
constexpr int64_t kT0 = 1'700'000'040'000;  // a whole minute (UTC), in ms
constexpr int64_t kTickUnits = 1'000'000;   // 0.01 USDT
constexpr int64_t kBtcLotUnits = 1'000;     // 0.00001 BTC
constexpr int64_t kEthLotUnits = 10'000;    // 0.0001 ETH

engine::EngineConfig MakeConfig() {
  engine::EngineConfig c;
  c.assets = {{"BTC", kScale}, {"USDT", kScale}, {"ETH", kScale}};
  engine::MarketSpec btc;
  btc.symbol = "BTCUSDT";
  btc.base = kBtc;
  btc.quote = kUsdt;
  btc.tick_units = kTickUnits;
  btc.lot_units = kBtcLotUnits;
  btc.min_qty = Qty{1};
  btc.max_qty = Qty{1'000'000};
  btc.max_price = Price{100'000'000};
  btc.maker_fee_bps = 10;
  btc.taker_fee_bps = 10;
  engine::MarketSpec eth = btc;
  eth.symbol = "ETHUSDT";
  eth.base = kEth;
  eth.lot_units = kEthLotUnits;
  c.markets = {btc, eth};
  c.max_accounts = 16;
  c.fee_account = AccountId{0};
  c.expected_open_orders = 1024;
  c.client_id_memory = 64;
  const Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

// Records what the hub sends; Close() only records (the test calls OnClose
// itself, as the server would once the close handshake is over).
class TestConn final : public WsConnection {
 public:
  TestConn(std::string target, uint64_t id) : target_(std::move(target)), id_(id) {}

  using WsConnection::Send;
  bool Send(std::shared_ptr<const std::string> text, int64_t origin_wall_ns) override {
    if (closed_) return false;
    sent_.push_back(std::move(text));
    origins_.push_back(origin_wall_ns);
    return true;
  }
  void Close(uint16_t code, std::string reason) override {
    if (closed_) return;
    closed_ = true;
    close_code_ = code;
    close_reason_ = std::move(reason);
  }
  uint64_t id() const noexcept override { return id_; }
  const std::string& target() const noexcept override { return target_; }
  const std::string& remote() const noexcept override { return remote_; }

  bool closed() const { return closed_; }
  uint16_t close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }
  const std::vector<std::shared_ptr<const std::string>>& sent() const { return sent_; }
  // The origin passed with each text of sent(), in the same order.
  const std::vector<int64_t>& origins() const { return origins_; }

  // Every text received since the last Take().
  std::vector<std::string> Take() {
    std::vector<std::string> out;
    for (const auto& s : sent_) out.push_back(*s);
    sent_.clear();
    origins_.clear();
    return out;
  }
  std::string TakeOne() {
    std::vector<std::string> all = Take();
    EXPECT_EQ(all.size(), 1u) << (all.empty() ? "" : all.front());
    return all.empty() ? std::string() : all.front();
  }

 private:
  std::string target_;
  std::string remote_ = "127.0.0.1";
  uint64_t id_;
  bool closed_ = false;
  uint16_t close_code_ = 0;
  std::string close_reason_;
  std::vector<std::shared_ptr<const std::string>> sent_;
  std::vector<int64_t> origins_;
};

json::object Obj(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << text;
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << text;
    return {};
  }
  return v.get_object();
}

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) {
    ADD_FAILURE() << "no string " << key << " in " << json::serialize(o);
    return {};
  }
  return std::string(v->get_string());
}

int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !(v->is_int64() || v->is_uint64())) {
    ADD_FAILURE() << "no integer " << key << " in " << json::serialize(o);
    return -1;
  }
  return v->is_int64() ? v->get_int64() : static_cast<int64_t>(v->get_uint64());
}

int64_t Units(std::string_view decimal) {
  auto r = ParseDecimal(decimal, kScale, true);
  EXPECT_TRUE(r.ok()) << decimal;
  return r.ok() ? *r : -1;
}

// A book as a client keeps it: price units → quantity units.
struct Book {
  std::map<int64_t, int64_t> bids, asks;
  friend bool operator==(const Book&, const Book&) = default;
};

void ApplyLevels(const json::value& levels, std::map<int64_t, int64_t>* side) {
  for (const json::value& l : levels.as_array()) {
    const int64_t price = Units(l.as_array()[0].as_string());
    const int64_t qty = Units(l.as_array()[1].as_string());
    if (qty == 0) {
      side->erase(price);
    } else {
      (*side)[price] = qty;
    }
  }
}

// {lastUpdateId,bids,asks} (REST depth, partial depth stream) → book and id.
Book BookFrom(const json::object& depth, uint64_t* last_update_id) {
  Book b;
  ApplyLevels(depth.at("bids"), &b.bids);
  ApplyLevels(depth.at("asks"), &b.asks);
  *last_update_id = static_cast<uint64_t>(Int(depth, "lastUpdateId"));
  return b;
}

std::string Signed(std::string_view secret, const std::map<std::string, std::string>& params) {
  std::string payload;
  for (const auto& [k, v] : params) {
    if (!payload.empty()) payload += '&';
    payload += k + "=" + v;
  }
  return HmacSha256Hex(secret, payload);
}

class StreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("mb_streams_test_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = MakeConfig();
    auto keys = KeyStore::Open(dir_, config_.max_accounts);
    ASSERT_TRUE(keys.ok()) << keys.status().message();
    keys_ = std::move(keys).value();
    ASSERT_TRUE(keys_->EnsureMasterKey().ok());
    auto alice = testing::CreateAccount(*keys_, "alice", kT0);
    auto bob = testing::CreateAccount(*keys_, "bob", kT0);
    ASSERT_TRUE(alice.ok() && bob.ok());
    alice_ = alice->id;
    bob_ = bob->id;
    auto ka = testing::CreateKey(*keys_, alice_, kT0);
    auto kb = testing::CreateKey(*keys_, bob_, kT0);
    ASSERT_TRUE(ka.ok() && kb.ok());
    alice_key_ = *ka;
    bob_key_ = *kb;

    engine_ = std::make_unique<engine::Engine>(config_);
    read_side_ = std::make_unique<marketdata::ReadSide>(config_);
    read_side_->Bootstrap(engine_->ExportImage());
    StreamOptions options;
    options.max_requests_per_second = 1000;
    options.listen_key_ttl_ms = 10'000;
    MakeHub(options);
    for (AccountId a : {alice_, bob_}) {
      Run({engine::Deposit{a, kUsdt, Amount{1'000'000'000'000'000}, Ref()},
           engine::Deposit{a, kBtc, Amount{1'000'000'000'000}, Ref()},
           engine::Deposit{a, kEth, Amount{1'000'000'000'000}, Ref()}});
    }
  }

  void TearDown() override {
    hub_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void MakeHub(StreamOptions options) {
    hub_ = std::make_unique<StreamHub>(config_, *read_side_, *keys_, options,
                                       [this] { return now_ms_; });
  }

  TransferRef Ref() { return TransferRef::From("ref-" + std::to_string(++refs_)); }

  // The wall time the next batch's commands are stamped with (ns).
  int64_t EngineNs() const { return now_ms_ * 1'000'000 + sub_ms_ns_; }

  // One durable batch: the commands' events through the read side to the hub.
  std::vector<engine::Event> Run(const std::vector<engine::CommandBody>& bodies) {
    std::vector<engine::Event> all;
    for (const engine::CommandBody& b : bodies) {
      engine::Command c;
      c.timestamp_ns = EngineNs();
      c.body = b;
      engine::EventBuffer events;
      engine_->Process(c, &events);
      all.insert(all.end(), events.begin(), events.end());
    }
    read_side_->Apply(all, &out_);
    hub_->Publish(out_);
    return all;
  }

  static engine::PlaceOrder Limit(AccountId a, MarketId m, Side side, int64_t price_ticks,
                                  int64_t lots) {
    engine::PlaceOrder p;
    p.account = a;
    p.market = m;
    p.side = side;
    p.type = engine::OrderType::kLimit;
    p.tif = engine::TimeInForce::kGtc;
    p.price = Price{price_ticks};
    p.qty = Qty{lots};
    return p;
  }

  // Places one limit order in its own batch; its id.
  OrderId Place(AccountId a, MarketId m, Side side, int64_t price_ticks, int64_t lots) {
    const auto events = Run({Limit(a, m, side, price_ticks, lots)});
    for (const engine::Event& e : events) {
      if (const auto* acc = std::get_if<engine::OrderAccepted>(&e.body)) return acc->order_id;
    }
    ADD_FAILURE() << "order rejected";
    return OrderId{0};
  }

  bool Accepts(const std::string& target, http::verb verb = http::verb::get) {
    Request req{verb, target, 11};
    return hub_->Accepts(req);
  }

  std::shared_ptr<TestConn> Open(const std::string& target) {
    EXPECT_TRUE(Accepts(target)) << target;
    auto c = std::make_shared<TestConn>(target, ++conn_ids_);
    hub_->OnOpen(c);
    return c;
  }

  void Msg(const std::shared_ptr<TestConn>& c, std::string_view text) { hub_->OnMessage(c, text); }
  std::string Ask(const std::shared_ptr<TestConn>& c, std::string_view text) {
    Msg(c, text);
    return c->TakeOne();
  }

  // Moves the clock in 10 ms steps, ticking the hub at each.
  void Advance(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 10) {
      now_ms_ += 10;
      hub_->Tick(now_ms_);
    }
  }

  std::shared_ptr<const marketdata::MarketSnapshot> Snap(MarketId m) {
    return read_side_->Snapshot(m);
  }

  std::string SubscribeSignedRequest(const ApiKey& key, int64_t timestamp,
                                     const std::string& id = "1",
                                     const std::string& secret_override = "") {
    std::map<std::string, std::string> params = {
        {"apiKey", key.key}, {"recvWindow", "5000"}, {"timestamp", std::to_string(timestamp)}};
    const std::string sig = Signed(secret_override.empty() ? key.secret : secret_override, params);
    json::object p;
    p["apiKey"] = key.key;
    p["recvWindow"] = 5000;
    p["timestamp"] = timestamp;
    p["signature"] = sig;
    json::object req;
    req["id"] = id;
    req["method"] = "userDataStream.subscribe.signature";
    req["params"] = std::move(p);
    return json::serialize(req);
  }

  fs::path dir_;
  engine::EngineConfig config_;
  std::unique_ptr<KeyStore> keys_;
  AccountId alice_{}, bob_{};
  ApiKey alice_key_, bob_key_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<marketdata::ReadSide> read_side_;
  std::unique_ptr<StreamHub> hub_;
  marketdata::BatchOutput out_;
  int64_t now_ms_ = kT0;
  int64_t sub_ms_ns_ = 0;  // added to the commands' stamps: engine times off the ms grid
  int refs_ = 0;
  uint64_t conn_ids_ = 0;
};

// ------------------------------------------------------------ control

TEST_F(StreamsTest, AcceptsTheBinancePaths) {
  EXPECT_TRUE(Accepts("/ws"));
  EXPECT_TRUE(Accepts("/ws/0"));
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade"));
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade/ethusdt@depth@100ms"));
  EXPECT_TRUE(Accepts("/stream"));
  EXPECT_TRUE(Accepts("/stream?streams=btcusdt@trade/ethusdt@depth"));
  EXPECT_TRUE(Accepts("/stream?streams=btcusdt%40trade"));
  EXPECT_TRUE(Accepts("/ws-api/v3"));

  EXPECT_FALSE(Accepts("/"));
  EXPECT_FALSE(Accepts("/api/v3/depth"));
  EXPECT_FALSE(Accepts("/wsx"));
  EXPECT_FALSE(Accepts("/ws-api/v1"));
  EXPECT_FALSE(Accepts("/ws/btcusdt@nothing"));
  EXPECT_FALSE(Accepts("/ws/xrpusdt@trade"));
  EXPECT_FALSE(Accepts("/stream?streams=btcusdt@trade/BTCUSDT@trade"));
  EXPECT_FALSE(Accepts("/stream?streams=btcusdt@depth7"));
  EXPECT_FALSE(Accepts("/ws", http::verb::post));
  EXPECT_FALSE(Accepts("/ws/" + std::string(60, 'a')));  // no such listenKey
}

TEST_F(StreamsTest, SubscribeUnsubscribeAndListEchoTheId) {
  auto c = Open("/ws/0");
  EXPECT_EQ(
      Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@trade","ethusdt@depth@100ms"],"id":1})"),
      R"({"result":null,"id":1})");
  EXPECT_EQ(hub_->stats().subscriptions.load(), 2u);
  // A repeat is answered the same way and changes nothing.
  EXPECT_EQ(Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":2})"),
            R"({"result":null,"id":2})");
  EXPECT_EQ(hub_->stats().subscriptions.load(), 2u);
  EXPECT_EQ(Ask(c, R"({"method":"LIST_SUBSCRIPTIONS","id":"abc-1"})"),
            R"({"result":["btcusdt@trade","ethusdt@depth@100ms"],"id":"abc-1"})");
  EXPECT_EQ(Ask(c, R"({"method":"UNSUBSCRIBE","params":["btcusdt@trade"],"id":null})"),
            R"({"result":null,"id":null})");
  EXPECT_EQ(Ask(c, R"({"method":"LIST_SUBSCRIPTIONS","id":18446744073709551615})"),
            R"({"result":["ethusdt@depth@100ms"],"id":18446744073709551615})");
  EXPECT_EQ(Ask(c, R"({"method":"LIST_SUBSCRIPTIONS"})"),
            R"({"result":["ethusdt@depth@100ms"],"id":null})");
  EXPECT_EQ(hub_->stats().subscriptions.load(), 1u);

  // Streams named in the path are subscribed at open.
  auto raw = Open("/ws/btcusdt@aggTrade/btcusdt@kline_1m");
  EXPECT_EQ(Ask(raw, R"({"method":"LIST_SUBSCRIPTIONS","id":3})"),
            R"({"result":["btcusdt@aggTrade","btcusdt@kline_1m"],"id":3})");
  auto combined = Open("/stream?streams=btcusdt@depth5@100ms/ethusdt@bookTicker");
  EXPECT_EQ(Ask(combined, R"({"method":"LIST_SUBSCRIPTIONS","id":4})"),
            R"({"result":["btcusdt@depth5@100ms","ethusdt@bookTicker"],"id":4})");
  EXPECT_EQ(hub_->stats().subscriptions.load(), 5u);

  hub_->OnClose(raw);
  hub_->OnClose(combined);
  hub_->OnClose(c);
  EXPECT_EQ(hub_->stats().subscriptions.load(), 0u);
}

TEST_F(StreamsTest, MalformedRequestsGetAnErrorAndKeepTheConnection) {
  auto c = Open("/ws");
  auto error = [&](std::string_view text, int64_t code, const json::value& id) {
    const json::object a = Obj(Ask(c, text));
    EXPECT_EQ(a.at("id"), id) << text;
    const json::object& e = a.at("error").as_object();
    EXPECT_EQ(Int(e, "code"), code) << text;
    return Str(e, "msg");
  };
  EXPECT_TRUE(error("{not json", 3, nullptr).starts_with("Invalid JSON"));
  EXPECT_TRUE(error("[1,2]", 2, nullptr).starts_with("Invalid request"));
  EXPECT_TRUE(error(R"({"method":"SUBSCRIBE","params":[],"id":true})", 2, nullptr)
                  .starts_with("Invalid request"));
  EXPECT_TRUE(error(R"({"method":"SUBSCRIBE","params":[],"id":1.5})", 2, nullptr)
                  .starts_with("Invalid request"));
  EXPECT_EQ(error(R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":5,"x":1})", 0, 5),
            "Unknown property: x");
  EXPECT_TRUE(error(R"({"params":["btcusdt@trade"],"id":6})", 2, 6).starts_with("Invalid request"));
  EXPECT_EQ(error(R"({"method":"SET_PROPERTIES","params":["combined",true],"id":7})", 2, 7),
            "Invalid request: unknown variant `SET_PROPERTIES`, expected one of `SUBSCRIBE`, "
            "`UNSUBSCRIBE`, `LIST_SUBSCRIPTIONS`, `SET_PROPERTY`, `GET_PROPERTY`");
  EXPECT_EQ(error(R"({"method":"SET_PROPERTY","params":["combined","yes"],"id":13})", 1, 13),
            "Invalid value type: expected Boolean");
  EXPECT_EQ(error(R"({"method":"SET_PROPERTY","params":["combined"],"id":14})", 1, 14),
            "Invalid value type: expected Boolean");
  EXPECT_EQ(error(R"({"method":"SET_PROPERTY","params":["raw",true],"id":15})", 0, 15),
            "Unknown property");
  EXPECT_EQ(error(R"({"method":"GET_PROPERTY","params":[1],"id":16})", 2, 16),
            "Invalid request: property name must be a string");
  EXPECT_EQ(error(R"({"method":"GET_PROPERTY","id":17})", 2, 17),
            "Invalid request: property name must be a string");
  EXPECT_EQ(error(R"({"method":"GET_PROPERTY","params":["combined",true],"id":18})", 2, 18),
            "Invalid request: too many parameters");
  EXPECT_EQ(error(R"({"method":"SET_PROPERTY","params":["combined",true,1],"id":19})", 2, 19),
            "Invalid request: too many parameters");
  EXPECT_TRUE(error(R"({"method":"SUBSCRIBE","params":"btcusdt@trade","id":8})", 1, 8)
                  .starts_with("Invalid value type"));
  EXPECT_TRUE(error(R"({"method":"SUBSCRIBE","params":[42],"id":9})", 1, 9)
                  .starts_with("Invalid value type"));
  EXPECT_TRUE(error(R"({"method":"SUBSCRIBE","id":10})", 2, 10).starts_with("Invalid request"));
  for (const char* bad :
       {"btcusd@trade", "BTCUSDT@trade", "btcusdt@depth7", "btcusdt@depth@10ms", "btcusdt@kline_2m",
        "btcusdt", "@trade", "btcusdt@trade@100ms", "btcusdt@kline_1d@", "btcusdt@kline_1d@+15:00",
        "btcusdt@kline_1d@8:5", "btcusdt@kline_1S", "btcusdt@kline_@+08:00", "!ticker_2h@arr",
        "!foo@arr", "!ticker", "btcusdt@ticker_2h", "btcusdt@avgprice"}) {
    const std::string req = std::string(R"({"method":"SUBSCRIBE","params":["ethusdt@trade",")") +
                            bad + R"("],"id":"s"})";
    EXPECT_EQ(error(req, 2, "s"), std::string("Invalid request: unknown stream '") + bad + "'");
  }
  // Nothing of a refused request was subscribed; the connection still works.
  EXPECT_EQ(Ask(c, R"({"method":"LIST_SUBSCRIPTIONS","id":11})"), R"({"result":[],"id":11})");
  EXPECT_EQ(Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":12})"),
            R"({"result":null,"id":12})");
  EXPECT_FALSE(c->closed());
  EXPECT_EQ(hub_->stats().subscriptions.load(), 1u);
}

TEST_F(StreamsTest, StreamLimitPerConnection) {
  StreamOptions options;
  options.max_requests_per_second = 1000;
  options.max_streams_per_connection = 2;
  MakeHub(options);
  auto c = Open("/ws");
  EXPECT_EQ(Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@trade","btcusdt@trade"],"id":1})"),
            R"({"result":null,"id":1})");
  const json::object a =
      Obj(Ask(c, R"({"method":"SUBSCRIBE","params":["ethusdt@trade","btcusdt@ticker"],"id":2})"));
  EXPECT_EQ(Int(a.at("error").as_object(), "code"), 2);
  EXPECT_EQ(Ask(c, R"({"method":"LIST_SUBSCRIPTIONS","id":3})"),
            R"({"result":["btcusdt@trade"],"id":3})");
  EXPECT_FALSE(Accepts("/stream?streams=btcusdt@trade/ethusdt@trade/btcusdt@ticker"));
  EXPECT_TRUE(Accepts("/stream?streams=btcusdt@trade/ethusdt@trade"));
}

TEST_F(StreamsTest, FloodOfRequestsClosesWith1008) {
  StreamOptions options;
  options.max_requests_per_second = 3;
  MakeHub(options);
  auto c = Open("/ws");
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3; ++i) Msg(c, R"({"method":"LIST_SUBSCRIPTIONS","id":1})");
    EXPECT_EQ(c->Take().size(), 3u);
    EXPECT_FALSE(c->closed());
    now_ms_ += 1000;  // a new one-second window
  }
  for (int i = 0; i < 4; ++i) Msg(c, R"({"method":"LIST_SUBSCRIPTIONS","id":1})");
  EXPECT_EQ(c->Take().size(), 3u);
  EXPECT_TRUE(c->closed());
  EXPECT_EQ(c->close_code(), 1008);
}

// ------------------------------------------------------------ market streams

TEST_F(StreamsTest, CombinedPropertyIsReadAndSwitchedPerConnection) {
  auto c = Open("/ws/btcusdt@trade");
  auto other = Open("/ws/btcusdt@trade");
  auto s = Open("/stream?streams=btcusdt@trade");
  EXPECT_EQ(Ask(c, R"({"method":"GET_PROPERTY","params":["combined"],"id":1})"),
            R"({"result":false,"id":1})");
  EXPECT_EQ(Ask(s, R"({"method":"GET_PROPERTY","params":["combined"],"id":"a"})"),
            R"({"result":true,"id":"a"})");
  EXPECT_EQ(Ask(c, R"({"method":"SET_PROPERTY","params":["combined",true],"id":2})"),
            R"({"result":null,"id":2})");
  EXPECT_EQ(Ask(c, R"({"method":"GET_PROPERTY","params":["combined"],"id":3})"),
            R"({"result":true,"id":3})");
  // Streams subscribed before and after the switch arrive wrapped; the other
  // connections keep their own shape.
  EXPECT_EQ(Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@aggTrade"],"id":4})"),
            R"({"result":null,"id":4})");
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 30);
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 10);
  const std::string trade = other->TakeOne();
  const std::vector<std::string> got = c->Take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], R"({"stream":"btcusdt@trade","data":)" + trade + "}");
  EXPECT_EQ(Str(Obj(got[1]), "stream"), "btcusdt@aggTrade");
  EXPECT_EQ(s->TakeOne(), got[0]);
  // And back: raw again.
  EXPECT_EQ(Ask(s, R"({"method":"SET_PROPERTY","params":["combined",false],"id":5})"),
            R"({"result":null,"id":5})");
  EXPECT_EQ(Ask(c, R"({"method":"SET_PROPERTY","params":["combined",false],"id":6})"),
            R"({"result":null,"id":6})");
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 10);
  const std::string second = other->TakeOne();
  EXPECT_EQ(s->TakeOne(), second);
  const std::vector<std::string> raw = c->Take();
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], second);
  EXPECT_EQ(Str(Obj(raw[1]), "e"), "aggTrade");
  EXPECT_EQ(hub_->stats().subscriptions.load(), 4u);
  hub_->OnClose(c);
  hub_->OnClose(other);
  hub_->OnClose(s);
  EXPECT_EQ(hub_->stats().subscriptions.load(), 0u);
}

TEST_F(StreamsTest, TradesGoRawOrCombinedToTheirSubscribersOnly) {
  auto raw1 = Open("/ws/btcusdt@trade");
  auto raw2 = Open("/ws/0");
  EXPECT_EQ(Ask(raw2, R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":1})"),
            R"({"result":null,"id":1})");
  auto combined = Open("/stream?streams=btcusdt@trade/btcusdt@aggTrade");
  auto agg = Open("/ws/btcusdt@aggTrade");
  auto eth = Open("/ws/ethusdt@trade/ethusdt@aggTrade");
  auto nothing = Open("/ws/1");

  Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 30);  // 10000.00
  EXPECT_TRUE(raw1->sent().empty());                    // no trade yet
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'100, 20);     // takes 20 lots at 10000.00

  ASSERT_EQ(raw1->sent().size(), 1u);
  ASSERT_EQ(raw2->sent().size(), 1u);
  // Formatted once: both raw subscribers hold the same text.
  EXPECT_EQ(raw1->sent()[0].get(), raw2->sent()[0].get());
  raw2->Take();
  const std::string trade = raw1->TakeOne();
  const json::object t = Obj(trade);
  EXPECT_EQ(Str(t, "e"), "trade");
  EXPECT_EQ(Str(t, "s"), "BTCUSDT");
  EXPECT_EQ(Int(t, "t"), 1);
  EXPECT_EQ(Units(Str(t, "p")), 1'000'000 * kTickUnits);
  EXPECT_EQ(Units(Str(t, "q")), 20 * kBtcLotUnits);
  EXPECT_EQ(Int(t, "T"), now_ms_);
  EXPECT_EQ(t.at("m"), false);  // the buyer took liquidity

  const std::vector<std::string> both = combined->Take();
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], R"({"stream":"btcusdt@trade","data":)" + trade + "}");
  const json::object a = Obj(both[1]);
  EXPECT_EQ(Str(a, "stream"), "btcusdt@aggTrade");
  const json::object& ad = a.at("data").as_object();
  EXPECT_EQ(Str(ad, "e"), "aggTrade");
  EXPECT_EQ(Int(ad, "a"), 1);
  EXPECT_EQ(Str(ad, "p"), Str(t, "p"));
  EXPECT_EQ(agg->TakeOne(), json::serialize(ad));

  EXPECT_TRUE(eth->sent().empty());
  EXPECT_TRUE(nothing->sent().empty());
  // Three trades in one batch: three messages, in trade order.
  Place(alice_, kEthUsdt, Side::kSell, 200'000, 5);
  Place(alice_, kEthUsdt, Side::kSell, 200'100, 5);
  Place(alice_, kEthUsdt, Side::kSell, 200'200, 5);
  Place(bob_, kEthUsdt, Side::kBuy, 200'200, 15);
  const std::vector<std::string> e = eth->Take();
  ASSERT_EQ(e.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    const json::object x = Obj(e[static_cast<std::size_t>(2 * i)]);
    const json::object y = Obj(e[static_cast<std::size_t>(2 * i + 1)]);
    EXPECT_EQ(Str(x, "e"), "trade");
    EXPECT_EQ(Str(y, "e"), "aggTrade");
    EXPECT_EQ(Int(x, "t"), 2 + i);
    EXPECT_EQ(Units(Str(x, "p")), (200'000 + 100 * i) * kTickUnits);
  }
  EXPECT_TRUE(raw1->sent().empty());
  EXPECT_TRUE(nothing->sent().empty());

  // After OnClose the connection gets nothing more.
  hub_->OnClose(raw1);
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 1);
  EXPECT_TRUE(raw1->sent().empty());
  EXPECT_EQ(raw2->sent().size(), 1u);
}

// A tiny deterministic generator (portable, unlike std distributions).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
};

struct DepthMsg {
  uint64_t first, last;
  json::object body;
};

std::vector<DepthMsg> DepthMessages(TestConn& c, bool combined, const std::string& stream) {
  std::vector<DepthMsg> out;
  for (const std::string& text : c.Take()) {
    json::object o = Obj(text);
    if (combined) {
      EXPECT_EQ(Str(o, "stream"), stream);
      o = o.at("data").as_object();
    }
    EXPECT_EQ(Str(o, "e"), "depthUpdate");
    EXPECT_EQ(Str(o, "s"), "BTCUSDT");
    out.push_back(
        DepthMsg{static_cast<uint64_t>(Int(o, "U")), static_cast<uint64_t>(Int(o, "u")), o});
  }
  return out;
}

// Binance's procedure: buffer the stream, fetch a snapshot, drop events with
// u <= lastUpdateId, the first one kept must straddle lastUpdateId + 1, then
// apply every event in order.
Book Resync(const Book& snapshot, uint64_t last_update_id, const std::vector<DepthMsg>& msgs) {
  Book book = snapshot;
  bool first = true;
  for (const DepthMsg& m : msgs) {
    if (m.last <= last_update_id) continue;
    if (first) {
      EXPECT_LE(m.first, last_update_id + 1);
      EXPECT_GE(m.last, last_update_id + 1);
      first = false;
    }
    ApplyLevels(m.body.at("b"), &book.bids);
    ApplyLevels(m.body.at("a"), &book.asks);
  }
  return book;
}

TEST_F(StreamsTest, DepthDiffsAreContinuousPerIntervalAndRebuildTheBook) {
  auto d0 = Open("/ws/btcusdt@depth@0ms");
  auto d100 = Open("/ws/btcusdt@depth@100ms");
  auto d1000 = Open("/ws/btcusdt@depth");
  auto c100 = Open("/stream?streams=btcusdt@depth@100ms");
  auto eth = Open("/ws/ethusdt@depth@0ms");
  const uint64_t start_id = Snap(kBtcUsdt)->last_update_id;

  Rng rng{42};
  std::vector<OrderId> open_orders;
  std::vector<DepthMsg> m0, m100, m1000, mc100;
  auto drain = [&] {
    for (auto& m : DepthMessages(*d0, false, "")) m0.push_back(std::move(m));
    for (auto& m : DepthMessages(*d100, false, "")) m100.push_back(std::move(m));
    for (auto& m : DepthMessages(*d1000, false, "")) m1000.push_back(std::move(m));
    for (auto& m : DepthMessages(*c100, true, "btcusdt@depth@100ms")) mc100.push_back(std::move(m));
  };
  Book mid_book;
  uint64_t mid_id = 0;
  int batches = 0;
  for (int step = 0; step < 600; ++step) {
    Advance(10 * (1 + rng.Below(6)));
    if (rng.Below(3) == 0) continue;
    std::vector<engine::CommandBody> cmds;
    const int64_t n = 1 + rng.Below(3);
    for (int64_t i = 0; i < n; ++i) {
      const AccountId who = rng.Below(2) == 0 ? alice_ : bob_;
      if (!open_orders.empty() && rng.Below(4) == 0) {
        const std::size_t k =
            static_cast<std::size_t>(rng.Below(static_cast<int64_t>(open_orders.size())));
        engine::CancelOrder cancel;
        cancel.account = who;  // may be the other account's: then rejected, no change
        cancel.market = kBtcUsdt;
        cancel.order_id = open_orders[k];
        cmds.push_back(cancel);
        continue;
      }
      const Side side = rng.Below(2) == 0 ? Side::kBuy : Side::kSell;
      const int64_t price = side == Side::kBuy ? 9'960 + rng.Below(50) : 9'990 + rng.Below(50);
      cmds.push_back(Limit(who, kBtcUsdt, side, price, 1 + rng.Below(5)));
    }
    for (const engine::Event& e : Run(cmds)) {
      if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        open_orders.push_back(a->order_id);
      }
    }
    ++batches;
    if (step >= 300 && mid_id == 0) {
      // A client fetches the REST snapshot in the middle of the stream.
      mid_book = BookFrom(Obj(DepthJson(config_, *Snap(kBtcUsdt), 5000)), &mid_id);
    }
    drain();
  }
  Advance(1000);  // flushes everything pending
  drain();

  const auto final_snap = Snap(kBtcUsdt);
  uint64_t final_id = 0;
  const Book final_book = BookFrom(Obj(DepthJson(config_, *final_snap, 5000)), &final_id);
  ASSERT_GT(final_id, start_id + 100);  // the workload changed the book many times
  ASSERT_GT(mid_id, start_id);
  ASSERT_FALSE(final_book.bids.empty());
  ASSERT_FALSE(final_book.asks.empty());

  auto check = [&](const std::vector<DepthMsg>& msgs, const char* name) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(msgs.empty());
    EXPECT_EQ(msgs.front().first, start_id + 1);
    for (std::size_t i = 1; i < msgs.size(); ++i) {
      ASSERT_EQ(msgs[i].first, msgs[i - 1].last + 1) << "gap at message " << i;
      ASSERT_LE(msgs[i].first, msgs[i].last);
    }
    EXPECT_EQ(msgs.back().last, final_snap->last_update_id);
    // From an empty book before the first diff, and from the mid-stream snapshot.
    EXPECT_TRUE(Resync(Book{}, start_id, msgs) == final_book);
    EXPECT_TRUE(Resync(mid_book, mid_id, msgs) == final_book);
  };
  check(m0, "0ms");
  check(m100, "100ms");
  check(m1000, "1000ms");
  check(mc100, "100ms combined");
  // @0ms: one message per durable batch that changed the book; u is a
  // journal sequence, so there are at most as many as sequences passed.
  EXPECT_LE(m0.size(), final_id - start_id);
  EXPECT_LT(m100.size(), m0.size());
  EXPECT_LT(m1000.size(), m100.size());
  ASSERT_EQ(mc100.size(), m100.size());
  for (std::size_t i = 0; i < m100.size(); ++i) {
    EXPECT_EQ(json::serialize(mc100[i].body), json::serialize(m100[i].body));
  }
  EXPECT_TRUE(eth->sent().empty());
  EXPECT_GT(batches, 300);
}

TEST_F(StreamsTest, DepthStreamJoinedLaterStartsAtTheNextDiff) {
  Place(alice_, kBtcUsdt, Side::kBuy, 9'000, 1);
  Place(alice_, kBtcUsdt, Side::kBuy, 9'001, 1);
  Advance(1000);
  const uint64_t before = Snap(kBtcUsdt)->last_update_id;
  auto c = Open("/ws/0");
  EXPECT_EQ(Ask(c, R"({"method":"SUBSCRIBE","params":["btcusdt@depth@100ms"],"id":1})"),
            R"({"result":null,"id":1})");
  Advance(500);
  EXPECT_TRUE(c->sent().empty());  // nothing changed
  Place(alice_, kBtcUsdt, Side::kSell, 9'100, 3);
  Place(bob_, kBtcUsdt, Side::kSell, 9'100, 2);
  EXPECT_TRUE(c->sent().empty());  // coalescing until the interval elapses
  Advance(100);
  const json::object m = Obj(c->TakeOne());
  EXPECT_EQ(Int(m, "U"), static_cast<int64_t>(before + 1));
  EXPECT_EQ(Int(m, "u"), static_cast<int64_t>(before + 2));
  // The last value of the level wins: 5 lots at 91.00.
  const json::array& asks = m.at("a").as_array();
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(Units(asks[0].as_array()[0].as_string()), 9'100 * kTickUnits);
  EXPECT_EQ(Units(asks[0].as_array()[1].as_string()), 5 * kBtcLotUnits);
  EXPECT_TRUE(m.at("b").as_array().empty());

  // Unsubscribed: no more diffs.
  EXPECT_EQ(Ask(c, R"({"method":"UNSUBSCRIBE","params":["btcusdt@depth@100ms"],"id":2})"),
            R"({"result":null,"id":2})");
  Place(alice_, kBtcUsdt, Side::kSell, 9'200, 3);
  Advance(1000);
  EXPECT_TRUE(c->sent().empty());
}

TEST_F(StreamsTest, PartialDepthIsSentOnTheIntervalWhenTheBookChanged) {
  for (int i = 0; i < 12; ++i) {
    Place(alice_, kBtcUsdt, Side::kBuy, 9'000 + i, 1 + i);
    Place(bob_, kBtcUsdt, Side::kSell, 9'100 + i, 1 + i);
  }
  auto p5 = Open("/ws/btcusdt@depth5@100ms");
  auto p10 = Open("/stream?streams=btcusdt@depth10");
  auto p20 = Open("/ws/btcusdt@depth20@1000ms");
  // A new subscriber gets the book at the next interval even if it is quiet.
  Advance(100);
  {
    const json::object m = Obj(p5->TakeOne());
    EXPECT_EQ(json::serialize(m), PartialDepthJson(config_, *Snap(kBtcUsdt), 5));
    EXPECT_EQ(m.at("bids").as_array().size(), 5u);
    EXPECT_EQ(m.at("asks").as_array().size(), 5u);
    EXPECT_EQ(Int(m, "lastUpdateId"), static_cast<int64_t>(Snap(kBtcUsdt)->last_update_id));
    EXPECT_EQ(Units(m.at("bids").as_array()[0].as_array()[0].as_string()), 9'011 * kTickUnits);
  }
  Advance(900);
  EXPECT_TRUE(p5->sent().empty());  // unchanged since
  EXPECT_EQ(p10->TakeOne(), R"({"stream":"btcusdt@depth10","data":)" +
                                PartialDepthJson(config_, *Snap(kBtcUsdt), 10) + "}");
  EXPECT_EQ(p20->TakeOne(), PartialDepthJson(config_, *Snap(kBtcUsdt), 20));
  Advance(2000);
  EXPECT_TRUE(p5->sent().empty());
  EXPECT_TRUE(p10->sent().empty());
  EXPECT_TRUE(p20->sent().empty());

  Place(alice_, kBtcUsdt, Side::kBuy, 9'050, 7);  // a new best bid
  Advance(100);
  const json::object m = Obj(p5->TakeOne());
  EXPECT_EQ(Units(m.at("bids").as_array()[0].as_array()[0].as_string()), 9'050 * kTickUnits);
  EXPECT_EQ(Units(m.at("bids").as_array()[0].as_array()[1].as_string()), 7 * kBtcLotUnits);
  EXPECT_TRUE(p10->sent().empty());
  Advance(900);
  EXPECT_EQ(p10->Take().size(), 1u);
  EXPECT_EQ(p20->Take().size(), 1u);
}

TEST_F(StreamsTest, TickersAreThrottledToOncePerSecondPerMarket) {
  auto t = Open("/ws/btcusdt@ticker");
  auto mini = Open("/stream?streams=btcusdt@miniTicker");
  auto eth = Open("/ws/ethusdt@ticker/ethusdt@miniTicker");
  Place(alice_, kBtcUsdt, Side::kSell, 10'000, 10);
  // A batch that touched the market: the first ticker goes out at once.
  {
    const json::object m = Obj(t->TakeOne());
    EXPECT_EQ(Str(m, "e"), "24hrTicker");
    EXPECT_EQ(Str(m, "s"), "BTCUSDT");
    EXPECT_EQ(Int(m, "E"), now_ms_);
    EXPECT_EQ(Units(Str(m, "a")), 10'000 * kTickUnits);  // best ask
    const json::object n = Obj(mini->TakeOne());
    EXPECT_EQ(Str(n, "stream"), "btcusdt@miniTicker");
    EXPECT_EQ(Str(n.at("data").as_object(), "e"), "24hrMiniTicker");
  }
  Advance(200);
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 4);  // a trade, 200 ms later
  EXPECT_TRUE(t->sent().empty());
  Advance(300);
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 1);
  Advance(400);
  EXPECT_TRUE(t->sent().empty());  // 900 ms since the last one
  Advance(100);
  {
    const json::object m = Obj(t->TakeOne());
    EXPECT_EQ(Units(Str(m, "c")), 10'000 * kTickUnits);
    EXPECT_EQ(Units(Str(m, "v")), 5 * kBtcLotUnits);  // both trades
    EXPECT_EQ(Int(m, "n"), 2);
    const json::object n = Obj(mini->TakeOne());
    EXPECT_EQ(Units(Str(n.at("data").as_object(), "v")), 5 * kBtcLotUnits);
  }
  Advance(3000);  // nothing new: nothing sent
  EXPECT_TRUE(t->sent().empty());
  EXPECT_TRUE(mini->sent().empty());
  EXPECT_TRUE(eth->sent().empty());
}

TEST_F(StreamsTest, BookTickerWhenTheTopOfTheBookChanges) {
  auto b = Open("/ws/btcusdt@bookTicker");
  auto eth = Open("/ws/ethusdt@bookTicker");
  Place(alice_, kBtcUsdt, Side::kBuy, 9'990, 3);
  {
    const json::object m = Obj(b->TakeOne());
    EXPECT_EQ(Str(m, "s"), "BTCUSDT");
    EXPECT_EQ(Units(Str(m, "b")), 9'990 * kTickUnits);
    EXPECT_EQ(Units(Str(m, "B")), 3 * kBtcLotUnits);
    EXPECT_EQ(Int(m, "u"), static_cast<int64_t>(Snap(kBtcUsdt)->last_update_id));
  }
  Place(alice_, kBtcUsdt, Side::kBuy, 9'980, 3);  // below the best bid
  EXPECT_TRUE(b->sent().empty());
  Place(bob_, kBtcUsdt, Side::kSell, 10'010, 2);  // first ask
  {
    const json::object m = Obj(b->TakeOne());
    EXPECT_EQ(Units(Str(m, "b")), 9'990 * kTickUnits);
    EXPECT_EQ(Units(Str(m, "a")), 10'010 * kTickUnits);
    EXPECT_EQ(Units(Str(m, "A")), 2 * kBtcLotUnits);
  }
  Place(bob_, kBtcUsdt, Side::kSell, 9'990, 1);  // takes 1 of the best bid's 3
  {
    const json::object m = Obj(b->TakeOne());
    EXPECT_EQ(Units(Str(m, "B")), 2 * kBtcLotUnits);
  }
  EXPECT_TRUE(eth->sent().empty());
}

// One taker's fills at one price are one aggTrade event (f..l its trades, q
// their sum); at two prices, two.
TEST_F(StreamsTest, AggTradeAggregatesOneTakersFillsAtOnePrice) {
  auto agg = Open("/ws/btcusdt@aggTrade");
  auto trades = Open("/ws/btcusdt@trade");
  for (int i = 0; i < 3; ++i) Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 2);
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 6);
  EXPECT_EQ(trades->Take().size(), 3u);
  {
    const json::object a = Obj(agg->TakeOne());
    EXPECT_EQ(Str(a, "e"), "aggTrade");
    EXPECT_EQ(Int(a, "a"), 1);
    EXPECT_EQ(Int(a, "f"), 1);
    EXPECT_EQ(Int(a, "l"), 3);
    EXPECT_EQ(Units(Str(a, "q")), 6 * kBtcLotUnits);
    EXPECT_EQ(a.at("m"), false);
  }
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 1);
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'100, 1);
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'100, 1);
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'100, 3);
  const std::vector<std::string> two = agg->Take();
  ASSERT_EQ(two.size(), 2u);
  const json::object a = Obj(two[0]);
  const json::object b = Obj(two[1]);
  EXPECT_EQ(Int(a, "a"), 4);
  EXPECT_EQ(Int(a, "f"), 4);
  EXPECT_EQ(Int(a, "l"), 4);
  EXPECT_EQ(Int(b, "a"), 5);
  EXPECT_EQ(Int(b, "f"), 5);
  EXPECT_EQ(Int(b, "l"), 6);
  EXPECT_EQ(Units(Str(b, "q")), 2 * kBtcLotUnits);
  EXPECT_EQ(Units(Str(b, "p")), 1'000'100 * kTickUnits);
}

// The streams of every market send, at most once a second, one array of the
// markets that changed; a market's window ticker and average price follow
// the ticker cadence.
TEST_F(StreamsTest, AllMarketTickersWindowTickersAndAvgPrice) {
  auto mini = Open("/ws/!miniTicker@arr");
  auto both = Open("/stream?streams=!ticker@arr/!ticker_4h@arr");
  auto one = Open("/ws/btcusdt@ticker_1h/btcusdt@avgPrice");
  EXPECT_EQ(Ask(mini, R"({"method":"LIST_SUBSCRIPTIONS","id":1})"),
            R"({"result":["!miniTicker@arr"],"id":1})");
  Advance(1000);
  EXPECT_TRUE(mini->sent().empty());  // nothing changed
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 10);
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 2);
  Advance(1000);
  {
    const std::vector<std::string> got = mini->Take();
    ASSERT_EQ(got.size(), 1u);
    const json::array arr = json::parse(got[0]).as_array();
    ASSERT_EQ(arr.size(), 1u);
    EXPECT_EQ(Str(arr[0].as_object(), "e"), "24hrMiniTicker");
    EXPECT_EQ(Str(arr[0].as_object(), "s"), "BTCUSDT");
  }
  {
    std::map<std::string, json::array> by_stream;
    for (const std::string& text : both->Take()) {
      const json::object m = Obj(text);
      by_stream[std::string(Str(m, "stream"))] = m.at("data").as_array();
    }
    ASSERT_EQ(by_stream.size(), 2u);
    EXPECT_EQ(Str(by_stream.at("!ticker@arr").at(0).as_object(), "e"), "24hrTicker");
    const json::object& w = by_stream.at("!ticker_4h@arr").at(0).as_object();
    EXPECT_EQ(Str(w, "e"), "4hTicker");
    EXPECT_EQ(Int(w, "n"), 1);
  }
  {
    const std::vector<std::string> got = one->Take();
    ASSERT_GE(got.size(), 2u);
    const json::object w = Obj(got[got.size() - 2]);
    const json::object a = Obj(got.back());
    EXPECT_EQ(Str(w, "e"), "1hTicker");
    EXPECT_EQ(Int(w, "n"), 1);
    EXPECT_EQ(Int(w, "C") - Int(w, "O"), 3'600'000);
    EXPECT_EQ(Str(a, "e"), "avgPrice");
    EXPECT_EQ(Str(a, "i"), "5m");
    EXPECT_EQ(Units(Str(a, "w")), 1'000'000 * kTickUnits);
  }
  Advance(2000);
  EXPECT_TRUE(mini->sent().empty());
  // Only the market that changed.
  Place(alice_, kEthUsdt, Side::kSell, 200'000, 5);
  Advance(1000);
  {
    const json::array arr = json::parse(mini->TakeOne()).as_array();
    ASSERT_EQ(arr.size(), 1u);
    EXPECT_EQ(Str(arr[0].as_object(), "s"), "ETHUSDT");
  }
  // Unsubscribed: nothing more, and the hub forgets the route.
  EXPECT_EQ(Ask(mini, R"({"method":"UNSUBSCRIBE","params":["!miniTicker@arr"],"id":2})"),
            R"({"result":null,"id":2})");
  Place(alice_, kEthUsdt, Side::kSell, 200'000, 5);
  Advance(1000);
  EXPECT_TRUE(mini->sent().empty());
}

// 1s, 1M and candles in a time zone: t and T are the candle's bounds in UTC
// ms, as Binance aligns it in that zone.
TEST_F(StreamsTest, KlinesOfNewIntervalsAndInATimeZone) {
  using marketdata::KlineInterval;
  auto s1 = Open("/ws/btcusdt@kline_1s");
  auto month = Open("/ws/btcusdt@kline_1M");
  auto day8 = Open("/stream?streams=btcusdt@kline_1d@+08:00/btcusdt@kline_1d");
  Place(alice_, kBtcUsdt, Side::kSell, 10'000, 10);
  now_ms_ += 250;
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 2);
  const int64_t now = now_ms_;
  {
    const json::object c = Obj(s1->TakeOne()).at("k").as_object();
    EXPECT_EQ(Str(c, "i"), "1s");
    EXPECT_EQ(Int(c, "t"), now - now % 1000);
    EXPECT_EQ(Int(c, "T"), now - now % 1000 + 999);
    EXPECT_EQ(c.at("x"), false);
  }
  {
    const json::object c = Obj(month->TakeOne()).at("k").as_object();
    EXPECT_EQ(Str(c, "i"), "1M");
    const int64_t open = marketdata::KlineOpenMs(KlineInterval::k1M, now);
    EXPECT_EQ(Int(c, "t"), open);
    EXPECT_EQ(Int(c, "T"), marketdata::KlineNextOpenMs(KlineInterval::k1M, open) - 1);
    EXPECT_GE(Int(c, "T") - Int(c, "t") + 1, 28 * 86'400'000LL);
  }
  {
    std::map<std::string, json::object> by_stream;
    for (const std::string& text : day8->Take()) {
      const json::object m = Obj(text);
      by_stream[std::string(Str(m, "stream"))] = m.at("data").as_object().at("k").as_object();
    }
    ASSERT_EQ(by_stream.size(), 2u);
    const json::object& z = by_stream.at("btcusdt@kline_1d@+08:00");
    const json::object& u = by_stream.at("btcusdt@kline_1d");
    const int64_t local_open = (now + 8 * 3'600'000) / 86'400'000 * 86'400'000 - 8 * 3'600'000;
    EXPECT_EQ(Int(z, "t"), local_open);
    EXPECT_EQ(Int(z, "T"), local_open + 86'400'000 - 1);
    EXPECT_EQ(Int(u, "t"), now - now % 86'400'000);
    EXPECT_EQ(Int(z, "n"), 1);
    EXPECT_EQ(Units(Str(z, "v")), 2 * kBtcLotUnits);
  }
  // The second ends by the clock: the 1s candle goes out closed.
  Advance(1000);
  {
    const json::object c = Obj(s1->TakeOne()).at("k").as_object();
    EXPECT_EQ(Int(c, "t"), now - now % 1000);
    EXPECT_EQ(c.at("x"), true);
  }
  EXPECT_TRUE(month->sent().empty());
}

TEST_F(StreamsTest, KlinesFollowTradesAndCloseWithXTrue) {
  auto k = Open("/ws/btcusdt@kline_1m");
  auto k5 = Open("/stream?streams=btcusdt@kline_5m");
  auto eth = Open("/ws/ethusdt@kline_1m");
  Place(alice_, kBtcUsdt, Side::kSell, 10'000, 10);
  EXPECT_TRUE(k->sent().empty());  // no trade yet
  now_ms_ += 5'000;
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 2);
  const int64_t minute = now_ms_ - now_ms_ % 60'000;
  {
    const json::object m = Obj(k->TakeOne());
    EXPECT_EQ(Str(m, "e"), "kline");
    const json::object& c = m.at("k").as_object();
    EXPECT_EQ(Int(c, "t"), minute);
    EXPECT_EQ(Str(c, "i"), "1m");
    EXPECT_EQ(Int(c, "n"), 1);
    EXPECT_EQ(c.at("x"), false);
    const json::object f = Obj(k5->TakeOne());
    EXPECT_EQ(Str(f, "stream"), "btcusdt@kline_5m");
    EXPECT_EQ(Str(f.at("data").as_object().at("k").as_object(), "i"), "5m");
  }
  now_ms_ += 1'000;
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 3);
  {
    const json::object c = Obj(k->TakeOne()).at("k").as_object();
    EXPECT_EQ(Int(c, "n"), 2);
    EXPECT_EQ(Units(Str(c, "v")), 5 * kBtcLotUnits);
    EXPECT_EQ(c.at("x"), false);
  }
  k5->Take();
  // The minute ends by the clock: the candle goes out once more, closed.
  Advance(minute + 60'000 - now_ms_ - 10);
  EXPECT_TRUE(k->sent().empty());
  Advance(10);
  {
    const json::object c = Obj(k->TakeOne()).at("k").as_object();
    EXPECT_EQ(Int(c, "t"), minute);
    EXPECT_EQ(Int(c, "n"), 2);
    EXPECT_EQ(c.at("x"), true);
  }
  Advance(5'000);
  EXPECT_TRUE(k->sent().empty());
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 1);
  {
    const json::object c = Obj(k->TakeOne()).at("k").as_object();  // the new candle only
    EXPECT_EQ(Int(c, "t"), minute + 60'000);
    EXPECT_EQ(Int(c, "n"), 1);
    EXPECT_EQ(c.at("x"), false);
  }
  // Without a tick in between, a trade in the next minute closes the candle first.
  now_ms_ += 60'000;
  Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 1);
  {
    const std::vector<std::string> two = k->Take();
    ASSERT_EQ(two.size(), 2u);
    const json::object closed = Obj(two[0]).at("k").as_object();
    const json::object open = Obj(two[1]).at("k").as_object();
    EXPECT_EQ(Int(closed, "t"), minute + 60'000);
    EXPECT_EQ(closed.at("x"), true);
    EXPECT_EQ(Int(open, "t"), minute + 120'000);
    EXPECT_EQ(open.at("x"), false);
  }
  EXPECT_TRUE(eth->sent().empty());
}

// ------------------------------------------------------------ user data

TEST_F(StreamsTest, WsApiSubscribeWithSignatureAndOwnEventsOnly) {
  auto api = Open("/ws-api/v3");
  EXPECT_EQ(Ask(api, SubscribeSignedRequest(alice_key_, now_ms_)),
            R"({"id":"1","status":200,"result":{"subscriptionId":0},"rateLimits":[]})");
  EXPECT_EQ(hub_->stats().user_connections.load(), 1u);
  auto other = Open("/ws-api/v3");
  EXPECT_EQ(Ask(other, SubscribeSignedRequest(bob_key_, now_ms_, "b")),
            R"({"id":"b","status":200,"result":{"subscriptionId":0},"rateLimits":[]})");

  const OrderId mine = Place(alice_, kBtcUsdt, Side::kSell, 10'000, 5);
  {
    const std::vector<std::string> msgs = api->Take();
    ASSERT_EQ(msgs.size(), 2u);
    const json::object r = Obj(msgs[0]);
    EXPECT_EQ(Int(r, "subscriptionId"), 0);
    const json::object& e = r.at("event").as_object();
    EXPECT_EQ(Str(e, "e"), "executionReport");
    EXPECT_EQ(Str(e, "x"), "NEW");
    EXPECT_EQ(Str(e, "X"), "NEW");
    EXPECT_EQ(Int(e, "i"), static_cast<int64_t>(mine));
    EXPECT_EQ(Str(e, "S"), "SELL");
    const json::object p = Obj(msgs[1]).at("event").as_object();
    EXPECT_EQ(Str(p, "e"), "outboundAccountPosition");
    ASSERT_EQ(p.at("B").as_array().size(), 1u);  // only BTC changed (locked)
    const json::object& btc = p.at("B").as_array()[0].as_object();
    EXPECT_EQ(Str(btc, "a"), "BTC");
    EXPECT_EQ(Units(Str(btc, "l")), 5 * kBtcLotUnits);
  }
  EXPECT_TRUE(other->sent().empty());  // not bob's business

  // Bob's own order, away from the book: nothing for alice.
  const OrderId bobs = Place(bob_, kBtcUsdt, Side::kBuy, 9'000, 1);
  EXPECT_TRUE(api->sent().empty());
  EXPECT_EQ(other->Take().size(), 2u);

  // Bob takes 2 of alice's 5: alice sees her TRADE, never bob's order.
  const OrderId taker = Place(bob_, kBtcUsdt, Side::kBuy, 10'000, 2);
  {
    const std::vector<std::string> msgs = api->Take();
    ASSERT_EQ(msgs.size(), 2u);
    const json::object e = Obj(msgs[0]).at("event").as_object();
    EXPECT_EQ(Str(e, "e"), "executionReport");
    EXPECT_EQ(Str(e, "x"), "TRADE");
    EXPECT_EQ(Str(e, "X"), "PARTIALLY_FILLED");
    EXPECT_EQ(Int(e, "i"), static_cast<int64_t>(mine));
    EXPECT_EQ(Units(Str(e, "l")), 2 * kBtcLotUnits);
    EXPECT_EQ(e.at("m"), true);
    EXPECT_EQ(Str(Obj(msgs[1]).at("event").as_object(), "e"), "outboundAccountPosition");
    for (const std::string& m : msgs) {
      EXPECT_EQ(m.find("\"i\":" + std::to_string(static_cast<uint64_t>(taker))), std::string::npos);
      EXPECT_EQ(m.find("\"i\":" + std::to_string(static_cast<uint64_t>(bobs))), std::string::npos);
    }
  }
  {
    const std::vector<std::string> msgs = other->Take();
    ASSERT_EQ(msgs.size(), 3u);  // NEW, TRADE (filled), position
    EXPECT_EQ(Str(Obj(msgs[0]).at("event").as_object(), "x"), "NEW");
    EXPECT_EQ(Str(Obj(msgs[1]).at("event").as_object(), "X"), "FILLED");
    EXPECT_EQ(Int(Obj(msgs[1]).at("event").as_object(), "i"), static_cast<int64_t>(taker));
  }

  // A deposit: balanceUpdate, then the position.
  Run({engine::Deposit{alice_, kEth, Amount{12'345}, Ref()}});
  {
    const std::vector<std::string> msgs = api->Take();
    ASSERT_EQ(msgs.size(), 2u);
    const json::object e = Obj(msgs[0]).at("event").as_object();
    EXPECT_EQ(Str(e, "e"), "balanceUpdate");
    EXPECT_EQ(Str(e, "a"), "ETH");
    EXPECT_EQ(Units(Str(e, "d")), 12'345);
    EXPECT_EQ(Str(Obj(msgs[1]).at("event").as_object(), "e"), "outboundAccountPosition");
  }
  EXPECT_TRUE(other->sent().empty());

  // A second subscription on the same connection gets id 1; unsubscribing id 0 keeps it.
  EXPECT_EQ(Ask(api, SubscribeSignedRequest(alice_key_, now_ms_, "2")),
            R"({"id":"2","status":200,"result":{"subscriptionId":1},"rateLimits":[]})");
  EXPECT_EQ(
      Ask(api, R"({"id":3,"method":"userDataStream.unsubscribe","params":{"subscriptionId":0}})"),
      R"({"id":3,"status":200,"result":{},"rateLimits":[]})");
  Place(alice_, kBtcUsdt, Side::kSell, 10'500, 1);
  {
    const std::vector<std::string> msgs = api->Take();
    ASSERT_EQ(msgs.size(), 2u);
    EXPECT_EQ(Int(Obj(msgs[0]), "subscriptionId"), 1);
  }
  const json::object gone = Obj(
      Ask(api, R"({"id":4,"method":"userDataStream.unsubscribe","params":{"subscriptionId":0}})"));
  EXPECT_EQ(Int(gone, "status"), 400);
  EXPECT_EQ(Ask(api, R"({"id":5,"method":"userDataStream.unsubscribe"})"),
            R"({"id":5,"status":200,"result":{},"rateLimits":[]})");
  Place(alice_, kBtcUsdt, Side::kSell, 10'600, 1);
  EXPECT_TRUE(api->sent().empty());
  EXPECT_EQ(hub_->stats().user_connections.load(), 1u);  // bob's
  hub_->OnClose(other);
  EXPECT_EQ(hub_->stats().user_connections.load(), 0u);
}

// A FOK that cannot fill completely is an order like any other: NEW, then
// EXPIRED with its id and nothing executed. Its lock comes back in the same
// batch.
TEST_F(StreamsTest, UnfillableFokIsReportedNewThenExpired) {
  auto api = Open("/ws-api/v3");
  EXPECT_EQ(Ask(api, SubscribeSignedRequest(alice_key_, now_ms_)),
            R"({"id":"1","status":200,"result":{"subscriptionId":0},"rateLimits":[]})");
  Place(bob_, kBtcUsdt, Side::kSell, 10'000, 2);
  engine::PlaceOrder fok = Limit(alice_, kBtcUsdt, Side::kBuy, 10'000, 5);
  fok.tif = engine::TimeInForce::kFok;
  fok.client_order_id = ClientOrderId::From("fok-1");
  const engine::Balance usdt = read_side_->balance(alice_, kUsdt);
  const auto events = Run({fok});
  ASSERT_EQ(events.size(), 2u);
  const auto* accepted = std::get_if<engine::OrderAccepted>(&events[0].body);
  ASSERT_NE(accepted, nullptr);
  const int64_t id = static_cast<int64_t>(Raw(accepted->order_id));
  EXPECT_EQ(id, static_cast<int64_t>(Raw(events[0].seq)));

  const std::vector<std::string> msgs = api->Take();
  ASSERT_GE(msgs.size(), 2u);
  const json::object n = Obj(msgs[0]).at("event").as_object();
  EXPECT_EQ(Str(n, "e"), "executionReport");
  EXPECT_EQ(Str(n, "x"), "NEW");
  EXPECT_EQ(Str(n, "X"), "NEW");
  EXPECT_EQ(Int(n, "i"), id);
  EXPECT_EQ(Str(n, "c"), "fok-1");
  EXPECT_EQ(Str(n, "f"), "FOK");
  const json::object x = Obj(msgs[1]).at("event").as_object();
  EXPECT_EQ(Str(x, "e"), "executionReport");
  EXPECT_EQ(Str(x, "x"), "EXPIRED");
  EXPECT_EQ(Str(x, "X"), "EXPIRED");
  EXPECT_EQ(Int(x, "i"), id);
  EXPECT_EQ(Str(x, "c"), "fok-1");
  EXPECT_EQ(Str(x, "f"), "FOK");
  EXPECT_EQ(Units(Str(x, "q")), 5 * kBtcLotUnits);
  EXPECT_EQ(Units(Str(x, "z")), 0);
  EXPECT_EQ(Units(Str(x, "Z")), 0);
  EXPECT_EQ(Str(x, "r"), "NONE");
  for (std::size_t i = 2; i < msgs.size(); ++i) {
    EXPECT_NE(Str(Obj(msgs[i]).at("event").as_object(), "e"), "executionReport") << msgs[i];
  }

  EXPECT_EQ(read_side_->balance(alice_, kUsdt), usdt);
  const auto closed = read_side_->FindOrder(alice_, kBtcUsdt, accepted->order_id);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->status, marketdata::OrderStatus::kExpired);
  EXPECT_EQ(closed->expire_reason, engine::ExpireReason::kFokNotFillable);
  EXPECT_EQ(closed->executed, Qty{0});
  EXPECT_TRUE(read_side_->OpenOrders(alice_, kBtcUsdt).empty());
}

TEST_F(StreamsTest, WsApiRejectsBadCredentials) {
  auto api = Open("/ws-api/v3");
  auto error = [&](const std::string& req, int64_t status, int64_t code) {
    const json::object a = Obj(Ask(api, req));
    EXPECT_EQ(Int(a, "status"), status) << req;
    EXPECT_EQ(Int(a.at("error").as_object(), "code"), code) << req;
    EXPECT_EQ(a.if_contains("result"), nullptr);
  };
  // Signed with the wrong secret.
  error(SubscribeSignedRequest(alice_key_, now_ms_, "1", bob_key_.secret), 400, -1022);
  // Correctly signed, but stale (recvWindow 5000) or too far ahead.
  error(SubscribeSignedRequest(alice_key_, now_ms_ - 5'001), 400, -1021);
  error(SubscribeSignedRequest(alice_key_, now_ms_ + 1'000), 400, -1021);
  // Unknown key.
  ApiKey fake = alice_key_;
  fake.key = std::string(64, 'x');
  error(SubscribeSignedRequest(fake, now_ms_), 401, -2015);
  // Missing parameters.
  error(R"({"id":"1","method":"userDataStream.subscribe.signature","params":{"timestamp":1}})", 400,
        -1102);
  // The signature covers every parameter: one added after signing breaks it.
  {
    json::object req = Obj(SubscribeSignedRequest(alice_key_, now_ms_));
    req["params"].as_object()["extra"] = "1";
    error(json::serialize(req), 400, -1022);
  }
  // Revoked key: refused even with a valid signature.
  ASSERT_TRUE(testing::RevokeKey(*keys_, alice_key_.key).ok());
  error(SubscribeSignedRequest(alice_key_, now_ms_), 401, -2015);
  EXPECT_EQ(hub_->stats().user_connections.load(), 0u);

  // Nothing was subscribed.
  Place(alice_, kBtcUsdt, Side::kSell, 10'000, 1);
  EXPECT_TRUE(api->sent().empty());

  // The other methods, and malformed requests; the connection stays open.
  EXPECT_EQ(Ask(api, R"({"id":"p","method":"ping"})"),
            R"({"id":"p","status":200,"result":{},"rateLimits":[]})");
  EXPECT_EQ(Ask(api, R"({"id":7,"method":"time","params":{}})"),
            R"({"id":7,"status":200,"result":{"serverTime":)" + std::to_string(now_ms_) +
                R"(},"rateLimits":[]})");
  error(R"({"id":8,"method":"order.place","params":{}})", 400, -1130);
  error(R"({"id":9,"method":"ping","params":[1]})", 400, -1135);
  error("nonsense", 400, -1135);
  EXPECT_FALSE(api->closed());
}

TEST_F(StreamsTest, WsApiSignatureAcceptsNumbersAsStrings) {
  // Some clients send every parameter as a string; the payload is the same.
  auto api = Open("/ws-api/v3");
  std::map<std::string, std::string> params = {
      {"apiKey", alice_key_.key}, {"recvWindow", "20000"}, {"timestamp", std::to_string(now_ms_)}};
  json::object p;
  for (const auto& [k, v] : params) p[k] = v;
  p["signature"] = Signed(alice_key_.secret, params);
  json::object req;
  req["id"] = 77;
  req["method"] = "userDataStream.subscribe.signature";
  req["params"] = p;
  EXPECT_EQ(Ask(api, json::serialize(req)),
            R"({"id":77,"status":200,"result":{"subscriptionId":0},"rateLimits":[]})");
}

TEST_F(StreamsTest, ListenKeyLifecycle) {
  const std::string key = hub_->CreateListenKey(alice_);
  ASSERT_EQ(key.size(), 60u);
  for (char ch : key) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << key;
  EXPECT_EQ(hub_->CreateListenKey(alice_), key);  // the open key is reused
  const std::string bobs = hub_->CreateListenKey(bob_);
  EXPECT_NE(bobs, key);

  auto stream = Open("/ws/" + key);
  auto bob_stream = Open("/ws/" + bobs);
  EXPECT_EQ(hub_->stats().user_connections.load(), 2u);
  const OrderId id = Place(alice_, kBtcUsdt, Side::kBuy, 9'000, 1);
  {
    const std::vector<std::string> msgs = stream->Take();
    ASSERT_EQ(msgs.size(), 2u);
    const json::object e = Obj(msgs[0]);  // the event alone, no wrapper
    EXPECT_EQ(Str(e, "e"), "executionReport");
    EXPECT_EQ(Int(e, "i"), static_cast<int64_t>(id));
    EXPECT_EQ(Str(Obj(msgs[1]), "e"), "outboundAccountPosition");
  }
  EXPECT_TRUE(bob_stream->sent().empty());
  // Market streams can be added to a user data connection.
  EXPECT_EQ(Ask(stream, R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":1})"),
            R"({"result":null,"id":1})");

  // Keepalive: only the owner, only an open key.
  EXPECT_FALSE(hub_->KeepAliveListenKey(bob_, key));
  EXPECT_FALSE(hub_->KeepAliveListenKey(alice_, bobs));
  EXPECT_FALSE(hub_->KeepAliveListenKey(alice_, "nope"));
  Advance(6'000);
  EXPECT_TRUE(hub_->KeepAliveListenKey(alice_, key));  // valid until +16 s
  Advance(6'000);                                      // +12 s: bob's key (10 s) expired
  EXPECT_TRUE(bob_stream->closed());
  EXPECT_EQ(bob_stream->close_code(), 1000);
  ASSERT_EQ(bob_stream->sent().size(), 1u);
  EXPECT_EQ(Str(Obj(*bob_stream->sent()[0]), "e"), "listenKeyExpired");
  EXPECT_EQ(Str(Obj(*bob_stream->sent()[0]), "listenKey"), bobs);
  hub_->OnClose(bob_stream);
  EXPECT_FALSE(Accepts("/ws/" + bobs));
  EXPECT_FALSE(hub_->KeepAliveListenKey(bob_, bobs));
  EXPECT_FALSE(stream->closed());
  EXPECT_TRUE(Accepts("/ws/" + key));
  const std::string bobs2 = hub_->CreateListenKey(bob_);
  EXPECT_NE(bobs2, bobs);

  // Close: only by the owner; the stream gets a close frame and nothing more.
  EXPECT_FALSE(hub_->CloseListenKey(bob_, key));
  EXPECT_TRUE(hub_->CloseListenKey(alice_, key));
  EXPECT_TRUE(stream->closed());
  EXPECT_EQ(stream->close_code(), 1000);
  EXPECT_FALSE(hub_->CloseListenKey(alice_, key));
  EXPECT_FALSE(Accepts("/ws/" + key));
  EXPECT_EQ(hub_->stats().user_connections.load(), 0u);
  hub_->OnClose(stream);
  EXPECT_EQ(hub_->stats().subscriptions.load(), 0u);
  const std::string again = hub_->CreateListenKey(alice_);
  EXPECT_NE(again, key);
}

TEST_F(StreamsTest, ListenKeyExpiredBetweenUpgradeAndOpenIsClosed) {
  const std::string key = hub_->CreateListenKey(alice_);
  EXPECT_TRUE(Accepts("/ws/" + key));
  now_ms_ += 10'000;  // expired, not yet swept
  EXPECT_FALSE(Accepts("/ws/" + key));
  auto c = std::make_shared<TestConn>("/ws/" + key, 99);
  hub_->OnOpen(c);
  EXPECT_TRUE(c->closed());
  EXPECT_EQ(c->close_code(), 1008);
  hub_->OnClose(c);
  EXPECT_EQ(hub_->stats().user_connections.load(), 0u);
}

// ------------------------------------------------------------ time units

TEST_F(StreamsTest, TimeUnitParameterOnEveryStreamUrl) {
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade?timeUnit=MICROSECOND"));
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade?timeUnit=microsecond"));
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade?timeUnit=MILLISECOND"));
  EXPECT_TRUE(Accepts("/ws/btcusdt@trade?timeUnit=millisecond"));
  EXPECT_TRUE(Accepts("/ws?timeUnit=MICROSECOND"));
  EXPECT_TRUE(Accepts("/ws/0?timeUnit=MICROSECOND"));
  EXPECT_TRUE(Accepts("/stream?streams=btcusdt@trade/ethusdt@depth&timeUnit=MICROSECOND"));
  EXPECT_TRUE(Accepts("/stream?timeUnit=MICROSECOND&streams=btcusdt@trade"));
  EXPECT_TRUE(Accepts("/ws-api/v3?timeUnit=MICROSECOND"));

  for (const char* bad :
       {"/ws/btcusdt@trade?timeUnit=NANOSECOND", "/ws?timeUnit=", "/ws/0?timeUnit=us",
        "/stream?streams=btcusdt@trade&timeUnit=MICROSECONDS",
        "/ws/btcusdt@trade?timeUnit=MICROSECOND&timeUnit=SECOND"}) {
    EXPECT_FALSE(Accepts(bad)) << bad;
    // Should the server open it anyway, the hub closes it and says why.
    auto c = std::make_shared<TestConn>(bad, ++conn_ids_);
    hub_->OnOpen(c);
    EXPECT_TRUE(c->closed()) << bad;
    EXPECT_EQ(c->close_code(), 1008) << bad;
    EXPECT_TRUE(c->close_reason().starts_with("invalid timeUnit '")) << c->close_reason();
    EXPECT_NE(c->close_reason().find("expected MILLISECOND or MICROSECOND"), std::string::npos);
  }
  EXPECT_EQ(hub_->stats().subscriptions.load(), 0u);
}

TEST_F(StreamsTest, TradesInMicrosecondsBesideMilliseconds) {
  auto ms = Open("/ws/btcusdt@trade");
  auto us1 = Open("/ws/btcusdt@trade?timeUnit=MICROSECOND");
  auto us2 = Open("/ws?timeUnit=microsecond");
  EXPECT_EQ(Ask(us2, R"({"method":"SUBSCRIBE","params":["btcusdt@trade"],"id":1})"),
            R"({"result":null,"id":1})");
  auto combined_us = Open("/stream?streams=btcusdt@trade/btcusdt@miniTicker&timeUnit=MICROSECOND");
  auto combined_ms = Open("/stream?streams=btcusdt@trade");

  sub_ms_ns_ = 123'456;  // 0.123456 ms past the clock's ms
  Place(alice_, kBtcUsdt, Side::kSell, 1'000'000, 30);
  combined_us->Take();  // the miniTicker of the resting order
  now_ms_ += 1'007;     // past the ticker's throttle
  const int64_t engine_ns = EngineNs();
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'100, 20);  // one trade

  ASSERT_EQ(ms->sent().size(), 1u);
  ASSERT_EQ(us1->sent().size(), 1u);
  ASSERT_EQ(us2->sent().size(), 1u);
  // Formatted once per unit: the µs subscribers share one text.
  EXPECT_EQ(us1->sent()[0].get(), us2->sent()[0].get());
  EXPECT_NE(us1->sent()[0].get(), ms->sent()[0].get());
  // Every message carries the engine time of its batch.
  EXPECT_EQ(ms->origins(), std::vector<int64_t>{engine_ns});
  EXPECT_EQ(us1->origins(), std::vector<int64_t>{engine_ns});

  const json::object t_ms = Obj(ms->TakeOne());
  const json::object t_us = Obj(us1->TakeOne());
  us2->Take();
  EXPECT_EQ(Int(t_us, "T"), engine_ns / 1000);
  EXPECT_EQ(Int(t_us, "E"), engine_ns / 1000);
  EXPECT_EQ(Int(t_ms, "T"), engine_ns / 1'000'000);
  EXPECT_EQ(Int(t_ms, "E"), engine_ns / 1'000'000);
  EXPECT_EQ(Int(t_ms, "T"), now_ms_);
  EXPECT_EQ(Int(t_us, "T") % 1000, 123);  // not a whole ms scaled up
  // Nothing but the times differs.
  for (const char* key : {"e", "s", "p", "q"}) EXPECT_EQ(Str(t_us, key), Str(t_ms, key)) << key;
  EXPECT_EQ(Int(t_us, "t"), Int(t_ms, "t"));
  EXPECT_EQ(t_us.at("m"), t_ms.at("m"));

  const std::vector<std::string> c_us = combined_us->Take();
  ASSERT_EQ(c_us.size(), 2u);  // the trade, then the miniTicker
  const json::object cu = Obj(c_us[0]);
  EXPECT_EQ(Str(cu, "stream"), "btcusdt@trade");
  EXPECT_EQ(json::serialize(cu.at("data")), json::serialize(t_us));
  const json::object mini = Obj(c_us[1]);
  EXPECT_EQ(Str(mini, "stream"), "btcusdt@miniTicker");
  EXPECT_EQ(Int(mini.at("data").as_object(), "E"), now_ms_ * 1000);  // the publishing clock
  const json::object cm = Obj(combined_ms->TakeOne());
  EXPECT_EQ(json::serialize(cm.at("data")), json::serialize(t_ms));

  // A later SUBSCRIBE on a µs connection is in µs too.
  auto us3 = Open("/ws/0?timeUnit=MICROSECOND");
  EXPECT_EQ(Ask(us3, R"({"method":"SUBSCRIBE","params":["btcusdt@aggTrade"],"id":2})"),
            R"({"result":null,"id":2})");
  now_ms_ += 5;
  const int64_t second_ns = EngineNs();
  Place(bob_, kBtcUsdt, Side::kBuy, 1'000'000, 1);
  const json::object agg = Obj(us3->TakeOne());
  EXPECT_EQ(Str(agg, "e"), "aggTrade");
  EXPECT_EQ(Int(agg, "T"), second_ns / 1000);
  EXPECT_EQ(Int(agg, "E"), second_ns / 1000);
}

TEST_F(StreamsTest, DepthUpdateEventTimeIsTheEngineTimeOfTheNewestChange) {
  auto d0_ms = Open("/ws/btcusdt@depth@0ms");
  auto d0_us = Open("/ws/btcusdt@depth@0ms?timeUnit=MICROSECOND");
  auto d100_ms = Open("/ws/btcusdt@depth@100ms");
  auto d100_us = Open("/stream?streams=btcusdt@depth@100ms&timeUnit=MICROSECOND");
  Advance(100);  // at the start of a 100 ms slot

  sub_ms_ns_ = 654'321;
  now_ms_ += 3;
  const int64_t first_ns = EngineNs();
  Place(alice_, kBtcUsdt, Side::kBuy, 9'000, 1);
  now_ms_ += 20;
  const int64_t second_ns = EngineNs();
  Place(alice_, kBtcUsdt, Side::kBuy, 9'001, 1);

  // @0ms: one diff per batch, E = that batch's engine time.
  ASSERT_EQ(d0_ms->origins(), (std::vector<int64_t>{first_ns, second_ns}));
  ASSERT_EQ(d0_us->origins(), (std::vector<int64_t>{first_ns, second_ns}));
  const std::vector<std::string> ms0 = d0_ms->Take();
  const std::vector<std::string> us0 = d0_us->Take();
  EXPECT_EQ(Int(Obj(ms0[0]), "E"), first_ns / 1'000'000);
  EXPECT_EQ(Int(Obj(ms0[1]), "E"), second_ns / 1'000'000);
  EXPECT_EQ(Int(Obj(us0[0]), "E"), first_ns / 1000);
  EXPECT_EQ(Int(Obj(us0[1]), "E"), second_ns / 1000);
  EXPECT_EQ(Int(Obj(us0[1]), "u"), Int(Obj(ms0[1]), "u"));

  // @100ms: both batches in one diff, sent when the slot ends, E = the newer
  // change's engine time rather than the sending time.
  EXPECT_TRUE(d100_ms->sent().empty());
  Advance(100);
  ASSERT_EQ(d100_ms->origins(), std::vector<int64_t>{second_ns});
  ASSERT_EQ(d100_us->origins(), std::vector<int64_t>{second_ns});
  const json::object m = Obj(d100_ms->TakeOne());
  const json::object u = Obj(d100_us->TakeOne()).at("data").as_object();
  EXPECT_EQ(Int(m, "E"), second_ns / 1'000'000);
  EXPECT_NE(Int(m, "E"), now_ms_);
  EXPECT_EQ(Int(u, "E"), second_ns / 1000);
  EXPECT_EQ(Int(m, "U"), Int(u, "U"));
  EXPECT_EQ(Int(m, "u"), Int(u, "u"));
  EXPECT_EQ(Int(m, "U"), Int(Obj(ms0[0]), "U"));  // the first diff's U, the second's u
  EXPECT_EQ(Int(m, "u"), Int(Obj(ms0[1]), "u"));
  EXPECT_GT(Int(m, "u"), Int(m, "U"));
}

TEST_F(StreamsTest, RepliesCarryNoOriginAndUserEventsTheirBatch) {
  auto c = Open("/ws/0");
  Msg(c, R"({"method":"LIST_SUBSCRIPTIONS","id":1})");
  EXPECT_EQ(c->origins(), std::vector<int64_t>{0});
  c->Take();

  auto api = Open("/ws-api/v3?timeUnit=MICROSECOND");
  Msg(api, SubscribeSignedRequest(alice_key_, now_ms_));
  ASSERT_EQ(api->origins(), std::vector<int64_t>{0});
  api->Take();
  sub_ms_ns_ = 42'000;
  const int64_t engine_ns = EngineNs();
  Place(alice_, kBtcUsdt, Side::kBuy, 9'000, 1);
  const std::vector<int64_t> origins = api->origins();
  const std::vector<std::string> events = api->Take();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(origins, std::vector<int64_t>(events.size(), engine_ns));
  // User data stays in ms whatever the connection's timeUnit.
  const json::object first = Obj(events[0]).at("event").as_object();
  EXPECT_EQ(Str(first, "e"), "executionReport");
  EXPECT_EQ(Int(first, "E"), now_ms_);
  EXPECT_EQ(Int(first, "T"), engine_ns / 1'000'000);
}

TEST_F(StreamsTest, NoSubscriberNoMessage) {
  // Streams and user data of nobody: publishing sends nothing at all.
  auto idle = Open("/ws/0");
  for (int i = 0; i < 20; ++i) {
    Place(alice_, kBtcUsdt, Side::kBuy, 9'000 + i, 1);
    Place(bob_, kBtcUsdt, Side::kSell, 9'000 + i, 1);
    Advance(100);
  }
  EXPECT_TRUE(idle->sent().empty());
  EXPECT_EQ(hub_->stats().messages.load(), 0u);
}

}  // namespace
}  // namespace mb::gateway
