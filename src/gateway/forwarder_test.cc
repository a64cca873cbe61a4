// The forwarder against a real Server standing in for the primary: the
// request arrives unchanged with the client's address added, answers come
// back to the right caller under concurrency, and a primary that cannot be
// reached is a 502 with a Binance error body, never a hang. Given several
// URLs, calls follow the one whose ping says primary.

#include "gateway/forwarder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mb::gateway {
namespace {

namespace json = boost::json;
using std::chrono::seconds;

template <class Pred>
bool Eventually(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

// The primary: answers every request with what it received.
class Echo final : public HttpHandler {
 public:
  void Handle(Request req, std::string_view remote, bool, Respond respond) override {
    ++requests;
    json::object o;
    o["method"] = std::string(req.method_string());
    o["target"] = std::string(req.target());
    o["body"] = req.body();
    o["peer"] = std::string(remote);
    auto get = [&req](std::string_view name) {
      const auto it = req.find(name);
      return it == req.end() ? std::string("(none)") : std::string(it->value());
    };
    o["apikey"] = get("X-MBX-APIKEY");
    o["client"] = get(kClientAddressHeader);
    o["type"] = get("Content-Type");
    Response res{http::status::ok, req.version()};
    res.set("X-MBX-USED-WEIGHT-1M", "7");
    res.keep_alive(req.keep_alive());
    res.body() = json::serialize(o);
    res.prepare_payload();
    respond(std::move(res));
  }
  std::atomic<int> requests{0};
};

class ForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.io_threads = 2;
    server_ = std::make_unique<Server>(o, &echo_, nullptr);
    ASSERT_TRUE(server_->Start().ok());
    auto f = Forwarder::Create("http://127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(f.ok()) << f.status().message();
    fwd_ = std::move(*f);
  }

  // Forwards one request and waits for its answer.
  static Response Send(Forwarder& f, Request req, std::string client = "203.0.113.9") {
    std::promise<Response> p;
    auto fut = p.get_future();
    f.Forward(std::move(req), std::move(client), [&p](Response r) { p.set_value(std::move(r)); });
    EXPECT_EQ(fut.wait_for(seconds(15)), std::future_status::ready);
    return fut.get();
  }

  static Request Post(std::string target, std::string body) {
    Request req{http::verb::post, target, 11};
    req.set("X-MBX-APIKEY", "key-1");
    req.set(http::field::content_type, "application/x-www-form-urlencoded");
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  Echo echo_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Forwarder> fwd_;
};

TEST_F(ForwarderTest, TheRequestArrivesUnchangedWithTheClientAddress) {
  const std::string body = "symbol=BTCUSDT&side=BUY&timestamp=1&signature=abcdef0123";
  Response res = Send(*fwd_, Post("/api/v3/order?recvWindow=5000", body));
  ASSERT_EQ(res.result_int(), 200u) << res.body();
  const json::object o = json::parse(res.body()).as_object();
  EXPECT_EQ(o.at("method").as_string(), "POST");
  EXPECT_EQ(o.at("target").as_string(), "/api/v3/order?recvWindow=5000");
  EXPECT_EQ(o.at("body").as_string(), body);
  EXPECT_EQ(o.at("apikey").as_string(), "key-1");
  EXPECT_EQ(o.at("type").as_string(), "application/x-www-form-urlencoded");
  EXPECT_EQ(o.at("client").as_string(), "203.0.113.9");
  EXPECT_EQ(o.at("peer").as_string(), "127.0.0.1");
  // The primary's headers come back.
  EXPECT_EQ(res["X-MBX-USED-WEIGHT-1M"], "7");
  EXPECT_EQ(fwd_->stats().forwarded, 1u);
  EXPECT_EQ(fwd_->stats().probes, 0u);  // one URL: never probed
}

TEST_F(ForwarderTest, AClientsOwnAddressHeaderIsReplaced) {
  Request req{http::verb::get, "/api/v3/account?signature=x", 11};
  req.set(kClientAddressHeader, "127.0.0.1");  // a client pretending to be local
  Response res = Send(*fwd_, std::move(req), "198.51.100.4");
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_EQ(json::parse(res.body()).at("client").as_string(), "198.51.100.4");
}

TEST_F(ForwarderTest, ConcurrentRequestsEachGetTheirOwnAnswerOverAFewConnections) {
  constexpr int kThreads = 4;
  constexpr int kEach = 100;
  std::atomic<int> wrong{0};
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::future<void>> waits;
      std::vector<std::shared_ptr<std::promise<void>>> ps;
      for (int i = 0; i < kEach; ++i) {
        const std::string target = "/api/v3/openOrders?n=" + std::to_string(t * kEach + i);
        auto p = std::make_shared<std::promise<void>>();
        waits.push_back(p->get_future());
        Request req{http::verb::get, target, 11};
        fwd_->Forward(std::move(req), "192.0.2.1", [&, p, target](Response r) {
          const json::value v = json::parse(r.body());
          if (r.result_int() != 200 || v.at("target").as_string() != target) ++wrong;
          ++answered;
          p->set_value();
        });
        ps.push_back(std::move(p));
      }
      for (auto& w : waits) w.wait_for(seconds(20));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(answered.load(), kThreads * kEach);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(echo_.requests.load(), kThreads * kEach);
  EXPECT_LE(fwd_->stats().connections, ForwarderOptions{}.max_connections);
}

TEST_F(ForwarderTest, AnUnreachablePrimaryIsA502WithABinanceError) {
  const uint16_t port = server_->port();
  server_->Stop();
  auto f = Forwarder::Create("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(f.ok());
  Response res = Send(**f, Post("/api/v3/order", "a=1"));
  EXPECT_EQ(res.result_int(), 502u);
  const json::object o = json::parse(res.body()).as_object();
  EXPECT_EQ(o.at("code").as_int64(), -1001);
  EXPECT_NE(std::string(o.at("msg").as_string()).find("127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << o.at("msg").as_string();
  EXPECT_EQ((*f)->stats().failed, 1u);
}

TEST_F(ForwarderTest, AStoppedForwarderAnswersAtOnce) {
  fwd_->Stop();
  Response res = Send(*fwd_, Post("/api/v3/order", "a=1"));
  EXPECT_EQ(res.result_int(), 502u);
  EXPECT_EQ(echo_.requests.load(), 0);
}

// The primary's WebSocket side: echoes each message, remembers the client
// address the upgrade carried, refuses /refused.
class EchoWs final : public WsHandler {
 public:
  bool Accepts(const Request& request) override {
    if (request.target() == "/refused") return false;
    const auto it = request.find(kClientAddressHeader);
    std::lock_guard<std::mutex> lock(mu);
    client = it == request.end() ? "(none)" : std::string(it->value());
    return true;
  }
  void OnOpen(const std::shared_ptr<WsConnection>&) override {}
  void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) override {
    if (text == "bye") return conn->Close(4000, "asked to");
    conn->Send("echo " + std::string(text));
  }
  void OnClose(const std::shared_ptr<WsConnection>&) override {}
  std::mutex mu;
  std::string client;
};

// What a tunnel delivered to the client's side.
struct TunnelEnd {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  std::optional<std::pair<uint16_t, std::string>> closed;
  template <class Pred>
  bool Wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, seconds(10), pred);
  }
};

TEST(ForwarderTunnelTest, RelaysBothWaysAndCloses) {
  Echo http;
  EchoWs ws;
  ServerOptions o;
  o.port = 0;
  Server primary(o, &http, &ws);
  ASSERT_TRUE(primary.Start().ok());
  auto f = Forwarder::Create("127.0.0.1:" + std::to_string(primary.port()));
  ASSERT_TRUE(f.ok());
  auto end = std::make_shared<TunnelEnd>();
  auto open = [&](const std::string& target) {
    return (*f)->Tunnel(
        target, "198.51.100.7",
        [end](std::string text) {
          std::lock_guard<std::mutex> lock(end->mu);
          end->messages.push_back(std::move(text));
          end->cv.notify_all();
        },
        [end](uint16_t code, std::string reason) {
          std::lock_guard<std::mutex> lock(end->mu);
          end->closed.emplace(code, std::move(reason));
          end->cv.notify_all();
        });
  };
  auto t = open("/ws-api/v3");
  t->Send("one");  // queued until the connection is open
  t->Send("two");
  ASSERT_TRUE(end->Wait([&] { return end->messages.size() == 2; }));
  EXPECT_EQ(end->messages, (std::vector<std::string>{"echo one", "echo two"}));
  {
    std::lock_guard<std::mutex> lock(ws.mu);
    EXPECT_EQ(ws.client, "198.51.100.7");
  }
  EXPECT_EQ((*f)->stats().tunnels, 1u);
  t->Send("bye");  // the primary closes: the client's side hears why
  ASSERT_TRUE(end->Wait([&] { return end->closed.has_value(); }));
  EXPECT_EQ(end->closed->first, 4000);
  EXPECT_EQ(end->closed->second, "asked to");
  EXPECT_TRUE(Eventually([&] { return (*f)->stats().tunnels == 0; }));

  auto end2 = std::make_shared<TunnelEnd>();
  end = end2;
  auto refused = open("/refused");
  ASSERT_TRUE(end2->Wait([&] { return end2->closed.has_value(); }));
  EXPECT_EQ(end2->closed->first, 1008);
  EXPECT_NE(end2->closed->second.find("HTTP 404"), std::string::npos) << end2->closed->second;

  // A tunnel still open when the forwarder stops does not hold it up.
  auto end3 = std::make_shared<TunnelEnd>();
  end = end3;
  auto kept = open("/ws-api/v3");
  kept->Send("ping");
  ASSERT_TRUE(end3->Wait([&] { return !end3->messages.empty(); }));
  (*f)->Stop();
  EXPECT_EQ((*f)->stats().tunnels, 0u);
}

// One of a primary and its standby: GET /api/v3/ping says its role in
// X-MB-Role; anything else is answered with its name while it is the
// primary, 503 while it is a standby (as a standby's gateway does).
class RoleServer final : public HttpHandler {
 public:
  RoleServer(std::string name, bool is_primary) : primary(is_primary), name_(std::move(name)) {
    ServerOptions o;
    o.port = 0;
    server_ = std::make_unique<Server>(o, this, nullptr);
  }
  bool Start() { return server_->Start().ok(); }
  void Stop() { server_->Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  std::string host_port() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  void Handle(Request req, std::string_view, bool, Respond respond) override {
    Response res{http::status::ok, req.version()};
    res.keep_alive(req.keep_alive());
    if (req.target() == "/api/v3/ping") {
      ++pings;
      res.set("X-MB-Role", primary.load() ? "primary" : "standby");
      res.body() = "{}";
    } else if (primary.load()) {
      ++requests;
      res.body() = json::serialize(json::object{{"server", name_}});
    } else {
      ++requests;
      res.result(http::status::service_unavailable);
      res.body() = R"({"code":-1000,"msg":"This server is a standby, not the primary"})";
    }
    res.prepare_payload();
    respond(std::move(res));
  }

  std::atomic<bool> primary;
  std::atomic<int> pings{0};
  std::atomic<int> requests{0};

 private:
  const std::string name_;
  std::unique_ptr<Server> server_;
};

// Who answered: the server's name, or the status when it was not 200.
std::string AnsweredBy(const Response& res) {
  if (res.result_int() != 200) return std::to_string(res.result_int());
  return std::string(json::parse(res.body()).at("server").as_string());
}

class ForwarderFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.Start());
    ASSERT_TRUE(b_.Start());
  }
  std::unique_ptr<Forwarder> Make(std::string urls,
                                  std::chrono::milliseconds interval = std::chrono::hours(1)) {
    ForwarderOptions o;
    o.probe_interval = interval;
    auto f = Forwarder::Create(urls, o);
    EXPECT_TRUE(f.ok()) << f.status().message();
    return f.ok() ? std::move(*f) : nullptr;
  }
  static Response Get(Forwarder& f, std::string target = "/api/v3/account?signature=x") {
    std::promise<Response> p;
    auto fut = p.get_future();
    f.Forward(Request{http::verb::get, target, 11}, "203.0.113.9",
              [&p](Response r) { p.set_value(std::move(r)); });
    EXPECT_EQ(fut.wait_for(seconds(15)), std::future_status::ready);
    return fut.get();
  }
  static Response Post(Forwarder& f) {
    std::promise<Response> p;
    auto fut = p.get_future();
    Request req{http::verb::post, "/api/v3/order", 11};
    req.body() = "symbol=BTCUSDT&signature=x";
    req.prepare_payload();
    f.Forward(std::move(req), "203.0.113.9", [&p](Response r) { p.set_value(std::move(r)); });
    EXPECT_EQ(fut.wait_for(seconds(15)), std::future_status::ready);
    return fut.get();
  }

  RoleServer a_{"a", true};
  RoleServer b_{"b", false};
};

TEST_F(ForwarderFailoverTest, TheFirstCallGoesToTheURLWhosePingSaysPrimary) {
  // The standby is listed first: the first call waits for the first round.
  auto f = Make(b_.url() + "," + a_.url());
  ASSERT_TRUE(f);
  EXPECT_EQ(AnsweredBy(Post(*f)), "a");
  EXPECT_EQ(f->primary(), a_.host_port());
  EXPECT_EQ(b_.requests.load(), 0);
  EXPECT_EQ(f->stats().switches, 1u);
}

TEST_F(ForwarderFailoverTest, CallsFollowTheRoleFromOneServerToTheOther) {
  auto f = Make(a_.url() + "," + b_.url());
  ASSERT_TRUE(f);
  EXPECT_EQ(AnsweredBy(Get(*f)), "a");
  EXPECT_EQ(AnsweredBy(Post(*f)), "a");
  EXPECT_EQ(f->primary(), a_.host_port());
  // A planned failover: a closes its intake, b takes the lease.
  a_.primary = false;
  b_.primary = true;
  // The call in flight gets a's answer as it is; the 503 starts a round.
  EXPECT_EQ(AnsweredBy(Post(*f)), "503");
  EXPECT_EQ(AnsweredBy(Post(*f)), "b");
  EXPECT_EQ(AnsweredBy(Get(*f)), "b");
  EXPECT_EQ(f->primary(), b_.host_port());
  EXPECT_EQ(f->stats().switches, 1u);
  // And back.
  b_.primary = false;
  a_.primary = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the 503 rounds' spacing
  EXPECT_EQ(AnsweredBy(Post(*f)), "503");
  EXPECT_EQ(AnsweredBy(Post(*f)), "a");
  EXPECT_EQ(f->stats().switches, 2u);
}

TEST_F(ForwarderFailoverTest, APrimaryThatDiedIsReplacedWithoutFailingTheCall) {
  auto f = Make(a_.url() + "," + b_.url());
  ASSERT_TRUE(f);
  EXPECT_EQ(AnsweredBy(Get(*f)), "a");
  a_.Stop();  // killed: its connections close, nothing listens
  b_.primary = true;
  // A GET on the kept-alive connection finds it closed, goes again on a new
  // one, cannot connect, waits for a round and goes to b.
  EXPECT_EQ(AnsweredBy(Get(*f)), "b");
  EXPECT_EQ(AnsweredBy(Post(*f)), "b");
  EXPECT_EQ(f->primary(), b_.host_port());
  EXPECT_EQ(f->stats().failed, 0u);
}

TEST_F(ForwarderFailoverTest, WithNoPrimaryTheLastOneIsKeptAndItsAnswersPassed) {
  auto f = Make(a_.url() + "," + b_.url());
  ASSERT_TRUE(f);
  EXPECT_EQ(AnsweredBy(Get(*f)), "a");
  a_.primary = false;
  EXPECT_EQ(AnsweredBy(Post(*f)), "503");
  EXPECT_EQ(AnsweredBy(Post(*f)), "503");
  EXPECT_EQ(f->primary(), a_.host_port());
  EXPECT_EQ(b_.requests.load(), 0);
  // Nothing listens anywhere: 502 naming the one kept.
  a_.Stop();
  b_.Stop();
  Response res = Post(*f);
  EXPECT_EQ(res.result_int(), 502u);
  EXPECT_NE(res.body().find(a_.host_port()), std::string::npos) << res.body();
}

TEST_F(ForwarderFailoverTest, TheBackgroundProbesFindANewPrimaryWithoutACall) {
  auto f = Make(a_.url() + "," + b_.url(), std::chrono::milliseconds(20));
  ASSERT_TRUE(f);
  EXPECT_TRUE(Eventually([&] { return f->stats().probes >= 2; }));
  EXPECT_EQ(f->primary(), a_.host_port());
  a_.primary = false;
  b_.primary = true;
  EXPECT_TRUE(Eventually([&] { return f->primary() == b_.host_port(); }));
  EXPECT_EQ(AnsweredBy(Post(*f)), "b");
  EXPECT_EQ(a_.requests.load(), 0);
}

TEST_F(ForwarderFailoverTest, OneURLIsNeverProbed) {
  auto f = Make(b_.url(), std::chrono::milliseconds(10));
  ASSERT_TRUE(f);
  EXPECT_EQ(AnsweredBy(Post(*f)), "503");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(b_.pings.load(), 0);
  EXPECT_EQ(f->stats().probes, 0u);
}

TEST(ForwarderCreateTest, ListsAreCheckedElementByElement) {
  auto two = ParsePrimary("http://10.0.0.1:8080, 10.0.0.2:8081");
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1], (std::pair<std::string, std::string>{"10.0.0.2", "8081"}));
  auto bad = ParsePrimary("http://10.0.0.1:8080,http://h:8x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"http://h:8x\""), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("http(s)://HOST:PORT"), std::string::npos);
  std::vector<bool> tls;
  auto mixed = ParsePrimary("https://a.example:8443,http://10.0.0.2:8081", &tls);
  ASSERT_TRUE(mixed.ok()) << mixed.status().message();
  EXPECT_EQ(tls, (std::vector<bool>{true, false}));
  EXPECT_EQ((*mixed)[0], (std::pair<std::string, std::string>{"a.example", "8443"}));
  ForwarderOptions bad_ca;
  bad_ca.ca_file = "/nonexistent/ca.pem";
  auto no_ca = Forwarder::Create("https://a.example:8443", bad_ca);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("--primary-ca"), std::string::npos)
      << no_ca.status().message();
  for (const char* wrong : {"http://a:1,,http://b:2", "http://a:1,", "http://a:1,http://a:1/"}) {
    EXPECT_FALSE(ParsePrimary(wrong).ok()) << wrong;
    EXPECT_FALSE(Forwarder::Create(wrong).ok()) << wrong;
  }
}

TEST(ForwarderCreateTest, RefusesWhatIsNotHttpHostPort) {
  for (const char* bad :
       {"ftp://127.0.0.1:8080", "127.0.0.1", "http://127.0.0.1:0", "http://127.0.0.1:99999",
        "http://:8080", "http://h:80/api", "https://h:80/api", "http://h:8x"}) {
    auto f = Forwarder::Create(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_NE(f.status().message().find("http(s)://HOST:PORT"), std::string::npos);
  }
  for (const char* good : {"http://127.0.0.1:8080", "127.0.0.1:8080", "http://[::1]:8080/",
                           "https://127.0.0.1:8443"}) {
    auto f = Forwarder::Create(good);
    EXPECT_TRUE(f.ok()) << good << ": " << f.status().message();
  }
}

}  // namespace
}  // namespace mb::gateway
