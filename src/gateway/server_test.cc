// Server tests against a real Server on an ephemeral port and real TCP
// clients (Beast on their own io_context, every client operation bounded by a
// deadline so a broken server fails a test instead of hanging it).

#include "gateway/server.h"

#include <gtest/gtest.h>
#include <time.h>

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "metrics/metrics.h"

namespace mb::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using std::chrono::milliseconds;
using ClientResponse = http::response<http::string_body>;

constexpr milliseconds kClientDeadline{5000};

// Polls pred until it holds or `limit` passed; the result of the last poll.
template <class Pred>
bool Eventually(Pred pred, milliseconds limit = milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return pred();
}

// Joins its threads when it goes out of scope (a failed ASSERT returns early).
class Threads {
 public:
  Threads() = default;
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;
  ~Threads() { JoinAll(); }
  template <class F>
  void Start(F&& f) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::forward<F>(f));
  }
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

ServerOptions TestOptions() {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 2;
  return o;
}

Response TextResponse(unsigned version, std::string body) {
  Response res{http::status::ok, version};
  res.set(http::field::content_type, "text/plain");
  res.body() = std::move(body);
  return res;
}

// Calls `fn` for every request; by default answers with the target as body.
class FuncHttp : public HttpHandler {
 public:
  using Fn = std::function<void(Request, Respond)>;
  explicit FuncHttp(Fn fn = nullptr) : fn_(std::move(fn)) {}

  void Handle(Request request, std::string_view remote, bool loopback, Respond respond) override {
    {
      std::lock_guard lock(mu_);
      targets_.emplace_back(request.target());
      remote_ = std::string(remote);
      loopback_ = loopback;
    }
    calls_.fetch_add(1);
    if (fn_) {
      fn_(std::move(request), std::move(respond));
    } else {
      respond(TextResponse(request.version(), std::string(request.target())));
    }
  }

  int calls() const { return calls_.load(); }
  std::vector<std::string> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }
  std::string remote() {
    std::lock_guard lock(mu_);
    return remote_;
  }
  bool loopback() {
    std::lock_guard lock(mu_);
    return loopback_;
  }

 private:
  Fn fn_;
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::vector<std::string> targets_;
  std::string remote_;
  bool loopback_ = false;
};

// Accepts targets starting with "/ws"; echoes messages unless told otherwise.
class TestWs : public WsHandler {
 public:
  bool Accepts(const Request& request) override {
    return accept_.load() && request.target().starts_with("/ws");
  }
  void OnOpen(const std::shared_ptr<WsConnection>& conn) override {
    std::lock_guard lock(mu_);
    opened_.push_back(conn);
  }
  void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) override {
    if (echo_.load()) conn->Send(std::string(text));
    // On the connection's strand: all queued before its writer can run.
    for (int i = 0; i < burst_.load(); ++i) conn->Send(BurstMessage(i));
  }
  static std::string BurstMessage(int i) {
    return std::string(static_cast<std::size_t>(i % 300), 'x') + std::to_string(i);
  }
  void OnClose(const std::shared_ptr<WsConnection>& conn) override {
    std::lock_guard lock(mu_);
    ++closes_[conn->id()];
  }

  // The n-th connection opened (1-based), once it is.
  std::shared_ptr<WsConnection> WaitOpened(std::size_t n) {
    std::shared_ptr<WsConnection> conn;
    Eventually([&] {
      std::lock_guard lock(mu_);
      if (opened_.size() >= n) conn = opened_[n - 1];
      return conn != nullptr;
    });
    return conn;
  }
  int Closes(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = closes_.find(id);
    return it == closes_.end() ? 0 : it->second;
  }

  std::atomic<bool> accept_{true};
  std::atomic<bool> echo_{true};
  std::atomic<int> burst_{0};  // messages sent back for each message received

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<WsConnection>> opened_;
  std::map<uint64_t, int> closes_;
};

// A raw HTTP client: one connection, each operation with a deadline.
class Client {
 public:
  explicit Client(uint16_t port) {
    stream_.expires_after(kClientDeadline);
    stream_.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                          [this](error_code ec) { connect_error_ = ec; });
    Run();
  }

  error_code connect_error() const { return connect_error_; }

  error_code Write(std::string_view data) {
    error_code result;
    stream_.expires_after(kClientDeadline);
    net::async_write(stream_, net::buffer(data.data(), data.size()),
                     [&](error_code ec, std::size_t) { result = ec; });
    Run();
    return result;
  }

  error_code Read(ClientResponse& res) {
    error_code result;
    stream_.expires_after(kClientDeadline);
    http::async_read(stream_, buffer_, res, [&](error_code ec, std::size_t) { result = ec; });
    Run();
    return result;
  }

  // An answer to HEAD: a header only, whatever its Content-Length says.
  error_code ReadHead(ClientResponse& res) {
    error_code result;
    http::response_parser<http::string_body> parser;
    parser.skip(true);
    stream_.expires_after(kClientDeadline);
    http::async_read(stream_, buffer_, parser, [&](error_code ec, std::size_t) { result = ec; });
    Run();
    res = parser.release();
    return result;
  }

  // Sends one GET and reads its answer.
  error_code Get(std::string_view target, ClientResponse& res) {
    const error_code ec = Write("GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n\r\n");
    return ec ? ec : Read(res);
  }

  // Bytes up to and including `delim`.
  std::string ReadUntil(std::string_view delim) {
    std::string out;
    stream_.expires_after(kClientDeadline);
    net::async_read_until(stream_, net::dynamic_buffer(raw_), std::string(delim),
                          [&](error_code ec, std::size_t n) {
                            if (!ec) out = raw_.substr(0, n);
                          });
    Run();
    if (!out.empty()) raw_.erase(0, out.size());
    return out;
  }

  // True when the server closes the connection (end of stream or reset)
  // within `limit`; unread bytes are discarded.
  bool WaitClosed(milliseconds limit = milliseconds(3000)) {
    stream_.expires_after(limit);
    for (;;) {
      error_code result;
      std::array<char, 4096> sink{};
      stream_.async_read_some(net::buffer(sink), [&](error_code ec, std::size_t) { result = ec; });
      Run();
      if (!result) continue;
      return result == net::error::eof || result == net::error::connection_reset;
    }
  }

  void Close() { stream_.close(); }

 private:
  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  net::io_context ioc_;
  beast::tcp_stream stream_{ioc_};
  beast::flat_buffer buffer_;
  std::string raw_;
  error_code connect_error_;
};

// A WebSocket client: one connection, each operation with a deadline.
class WsClient {
 public:
  WsClient(uint16_t port, std::string target) {
    auto& stream = beast::get_lowest_layer(ws_);
    error_code ec;
    stream.expires_after(kClientDeadline);
    stream.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                         [&](error_code e) { ec = e; });
    Run();
    if (ec) {
      handshake_error_ = ec;
      return;
    }
    stream.expires_after(kClientDeadline);
    ws_.async_handshake(handshake_response_, "127.0.0.1", target,
                        [&](error_code e) { handshake_error_ = e; });
    Run();
  }

  error_code handshake_error() const { return handshake_error_; }
  const websocket::response_type& handshake_response() const { return handshake_response_; }

  error_code Write(std::string_view text) {
    error_code result;
    beast::get_lowest_layer(ws_).expires_after(kClientDeadline);
    ws_.async_write(net::buffer(text.data(), text.size()),
                    [&](error_code ec, std::size_t) { result = ec; });
    Run();
    return result;
  }

  error_code Read(std::string& text) {
    error_code result;
    beast::flat_buffer buffer;
    beast::get_lowest_layer(ws_).expires_after(kClientDeadline);
    ws_.async_read(buffer, [&](error_code ec, std::size_t) { result = ec; });
    Run();
    text = beast::buffers_to_string(buffer.data());
    return result;
  }

  error_code CloseNormally() {
    error_code result;
    beast::get_lowest_layer(ws_).expires_after(kClientDeadline);
    ws_.async_close(websocket::close_code::normal, [&](error_code ec) { result = ec; });
    Run();
    return result;
  }

  const websocket::close_reason& reason() const { return ws_.reason(); }

  // One message read straight off the socket, bypassing the Beast client:
  // no UTF-8 validation, no per-byte work, so megabytes stay cheap in
  // sanitizer builds. Only for server frames (never masked) after the
  // handshake; a control frame is returned as a message of its own.
  struct RawMessage {
    int opcode = 0;  // 1 text, 2 binary, 8 close, 9 ping, 10 pong
    std::string payload;
  };
  error_code ReadRaw(RawMessage& msg) {
    msg = {};
    bool first = true;
    for (;;) {
      if (error_code ec = Need(2)) return ec;
      const auto byte = [&](std::size_t i) { return static_cast<uint8_t>(raw_[raw_pos_ + i]); };
      const bool fin = (byte(0) & 0x80) != 0;
      const int opcode = byte(0) & 0x0F;
      uint64_t length = byte(1) & 0x7F;
      std::size_t header = 2;
      if (length == 126) {
        header = 4;
      } else if (length == 127) {
        header = 10;
      }
      if (error_code ec = Need(header)) return ec;
      if (header > 2) {
        length = 0;
        for (std::size_t i = 2; i < header; ++i) length = (length << 8) | byte(i);
      }
      const auto size = static_cast<std::size_t>(length);
      if (error_code ec = Need(header + size)) return ec;
      const std::string_view payload(raw_.data() + raw_pos_ + header, size);
      if (opcode >= 8) {  // control frames may come between fragments
        msg = {opcode, std::string(payload)};
        Consume(header + size);
        return {};
      }
      if (first) msg.opcode = opcode;
      first = false;
      msg.payload += payload;
      Consume(header + size);
      if (fin) return {};
    }
  }

  // Drops the TCP connection without a close handshake.
  void Abort() { beast::get_lowest_layer(ws_).close(); }

 private:
  // At least n unparsed bytes in raw_.
  error_code Need(std::size_t n) {
    auto& stream = beast::get_lowest_layer(ws_);
    while (raw_.size() - raw_pos_ < n) {
      chunk_.resize(256 * 1024);
      error_code result;
      std::size_t got = 0;
      stream.expires_after(kClientDeadline);
      stream.async_read_some(net::buffer(chunk_), [&](error_code ec, std::size_t bytes) {
        result = ec;
        got = bytes;
      });
      Run();
      if (result) return result;
      raw_.append(chunk_.data(), got);
    }
    return {};
  }
  void Consume(std::size_t n) {
    raw_pos_ += n;
    if (raw_pos_ == raw_.size()) {
      raw_.clear();
      raw_pos_ = 0;
    }
  }

  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  net::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_{ioc_};
  websocket::response_type handshake_response_;
  error_code handshake_error_;
  std::string raw_;  // ReadRaw(): bytes read, parsed up to raw_pos_
  std::size_t raw_pos_ = 0;
  std::vector<char> chunk_;
};

// A count one thread raises and another waits on.
class Counter {
 public:
  void Add() {
    {
      std::lock_guard lock(mu_);
      ++value_;
    }
    cv_.notify_all();
  }
  int value() {
    std::lock_guard lock(mu_);
    return value_;
  }
  bool WaitAtLeast(int n, milliseconds limit = kClientDeadline) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return value_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;
};

std::string RequestText(std::string_view target) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

// ---------------------------------------------------------------------------
// Start

TEST(ServerTest, StartBindsAnEphemeralPort) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_NE(server.port(), 0);
  Client client(server.port());
  ClientResponse res;
  ASSERT_FALSE(client.Get("/ping", res));
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), "/ping");
}

TEST(ServerTest, StartFailsWhenThePortIsTaken) {
  FuncHttp http;
  Server first(TestOptions(), &http, nullptr);
  ASSERT_TRUE(first.Start().ok());
  ServerOptions o = TestOptions();
  o.port = first.port();
  Server second(o, &http, nullptr);
  const Status status = second.Start();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << status.message();
  second.Stop();  // a server that never started stops quietly
}

TEST(ServerTest, StartRejectsBadOptions) {
  FuncHttp http;
  ServerOptions bad_host = TestOptions();
  bad_host.host = "not an address";
  Server a(bad_host, &http, nullptr);
  const Status status = a.Start();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not an address"), std::string::npos) << status.message();

  ServerOptions no_threads = TestOptions();
  no_threads.io_threads = 0;
  Server b(no_threads, &http, nullptr);
  EXPECT_EQ(b.Start().code(), StatusCode::kInvalidArgument);

  Server c(TestOptions(), &http, nullptr);
  ASSERT_TRUE(c.Start().ok());
  EXPECT_EQ(c.Start().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// HTTP

TEST(ServerTest, KeepAliveServesSequentialRequests) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  for (int i = 0; i < 5; ++i) {
    ClientResponse res;
    const std::string target = "/r" + std::to_string(i);
    ASSERT_FALSE(client.Get(target, res)) << i;
    EXPECT_EQ(res.result(), http::status::ok);
    EXPECT_EQ(res.body(), target);
    EXPECT_EQ(res[http::field::server], "matchbook");
    EXPECT_TRUE(res.keep_alive());
    EXPECT_EQ(res[http::field::content_length], std::to_string(target.size()));
  }
  EXPECT_EQ(http.calls(), 5);
  EXPECT_EQ(http.remote(), "127.0.0.1");
  EXPECT_TRUE(http.loopback());
  EXPECT_EQ(server.stats().requests.load(), 5u);
  EXPECT_EQ(server.stats().connections_total.load(), 1u);
  EXPECT_EQ(server.stats().connections_open.load(), 1u);
  client.Close();
  EXPECT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 0; }));
}

TEST(ServerTest, HeadAnswerHasNoBody) {
  FuncHttp http(
      [](Request req, Respond respond) { respond(TextResponse(req.version(), "twelve bytes")); });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n"));
  ClientResponse head;
  ASSERT_FALSE(client.ReadHead(head));
  EXPECT_EQ(head[http::field::content_length], "12");
  EXPECT_EQ(head.body(), "");
  // Nothing stray follows: the next answer parses.
  ClientResponse get;
  ASSERT_FALSE(client.Get("/g", get));
  EXPECT_EQ(get.body(), "twelve bytes");
}

TEST(ServerTest, Http10WithoutKeepAliveIsClosedAfterTheAnswer) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("GET /old HTTP/1.0\r\n\r\n"));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.version(), 10u);
  EXPECT_EQ(res.body(), "/old");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(client.WaitClosed());
}

TEST(ServerTest, Http10KeepAliveStaysOpen) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(client.Write("GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    ClientResponse res;
    ASSERT_FALSE(client.Read(res)) << i;
    EXPECT_EQ(res.body(), "/ka");
    EXPECT_TRUE(res.keep_alive());
  }
  EXPECT_EQ(http.calls(), 2);
}

TEST(ServerTest, HandlerCanCloseTheConnection) {
  FuncHttp http([](Request req, Respond respond) {
    Response res = TextResponse(req.version(), "bye");
    res.set(http::field::connection, "close");
    respond(std::move(res));
  });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ClientResponse res;
  ASSERT_FALSE(client.Get("/x", res));
  EXPECT_EQ(res.body(), "bye");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(client.WaitClosed());
}

TEST(ServerTest, PipelinedRequestsAreHandledOneAtATimeAndAnsweredInOrder) {
  std::atomic<int> outstanding{0};
  std::atomic<int> max_outstanding{0};
  std::atomic<bool> first_answered{false};
  std::atomic<int> handled_before_first_answer{0};
  Threads threads;
  FuncHttp http([&](Request req, Respond respond) {
    const int now = outstanding.fetch_add(1) + 1;
    int seen = max_outstanding.load();
    while (now > seen && !max_outstanding.compare_exchange_weak(seen, now)) {
    }
    const std::string target(req.target());
    if (target != "/1" && !first_answered.load()) handled_before_first_answer.fetch_add(1);
    auto answer = [&outstanding, &first_answered, respond, target, version = req.version()] {
      outstanding.fetch_sub(1);
      if (target == "/1") first_answered.store(true);
      respond(TextResponse(version, "answer" + target));
    };
    if (target == "/1") {
      // The first answer comes late from another thread.
      threads.Start([answer] {
        std::this_thread::sleep_for(milliseconds(150));
        answer();
      });
    } else if (target == "/2") {
      threads.Start(answer);
    } else {
      answer();
    }
  });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write(RequestText("/1") + RequestText("/2") + RequestText("/3")));
  for (const char* expected : {"answer/1", "answer/2", "answer/3"}) {
    ClientResponse res;
    ASSERT_FALSE(client.Read(res)) << expected;
    EXPECT_EQ(res.body(), expected);
  }
  EXPECT_EQ(http.targets(), (std::vector<std::string>{"/1", "/2", "/3"}));
  EXPECT_EQ(max_outstanding.load(), 1);
  EXPECT_EQ(handled_before_first_answer.load(), 0);
  EXPECT_EQ(server.stats().requests.load(), 3u);
}

TEST(ServerTest, ExpectContinueGetsA100BeforeTheBody) {
  FuncHttp http([](Request req, Respond respond) {
    respond(TextResponse(req.version(), "got:" + req.body()));
  });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write(
      "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_EQ(client.ReadUntil("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_FALSE(client.Write("hello"));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.body(), "got:hello");
}

TEST(ServerTest, RepeatedRespondIsIgnored) {
  FuncHttp http([](Request req, Respond respond) {
    const std::string target(req.target());
    respond(TextResponse(req.version(), "first" + target));
    respond(TextResponse(req.version(), "second" + target));
  });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ClientResponse a;
  ASSERT_FALSE(client.Get("/a", a));
  EXPECT_EQ(a.body(), "first/a");
  ClientResponse b;
  ASSERT_FALSE(client.Get("/b", b));
  EXPECT_EQ(b.body(), "first/b");
}

TEST(ServerTest, BodyOverTheLimitGets413) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_body_bytes = 1000;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n" +
                            std::string(5000, 'x')));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.result(), http::status::payload_too_large);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res.body(), R"({"code":-1000,"msg":"Request body too large."})");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(http.calls(), 0);
  EXPECT_EQ(server.stats().bad_requests.load(), 1u);
}

TEST(ServerTest, ChunkedBodyOverTheLimitGets413) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_body_bytes = 1000;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  std::string request = "POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) request += "200\r\n" + std::string(512, 'y') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_FALSE(client.Write(request));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.result(), http::status::payload_too_large);
  EXPECT_EQ(res.body(), R"({"code":-1000,"msg":"Request body too large."})");
  EXPECT_EQ(http.calls(), 0);
}

TEST(ServerTest, BodyWithinTheLimitIsDelivered) {
  FuncHttp http([](Request req, Respond respond) {
    respond(TextResponse(req.version(), std::to_string(req.body().size())));
  });
  ServerOptions o = TestOptions();
  o.max_body_bytes = 1000;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" +
                            std::string(1000, 'x')));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), "1000");
}

TEST(ServerTest, HeaderOverTheLimitGets431) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_header_bytes = 1024;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(
      client.Write("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(2000, 'h') + "\r\n\r\n"));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.result(), http::status::request_header_fields_too_large);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res.body(), R"({"code":-1000,"msg":"Request header too large."})");
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(http.calls(), 0);
  EXPECT_EQ(server.stats().bad_requests.load(), 1u);
}

TEST(ServerTest, TooManyHeadersGets431) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_header_count = 10;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());

  Client within(server.port());
  std::string ok = "GET /ten HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 9; ++i) ok += "X-H" + std::to_string(i) + ": v\r\n";
  ASSERT_FALSE(within.Write(ok + "\r\n"));
  ClientResponse ok_res;
  ASSERT_FALSE(within.Read(ok_res));
  EXPECT_EQ(ok_res.result(), http::status::ok);

  Client over(server.port());
  std::string request = "GET /many HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 20; ++i) request += "X-H" + std::to_string(i) + ": v\r\n";
  ASSERT_FALSE(over.Write(request + "\r\n"));
  ClientResponse res;
  ASSERT_FALSE(over.Read(res));
  EXPECT_EQ(res.result(), http::status::request_header_fields_too_large);
  EXPECT_EQ(res.body(), R"({"code":-1000,"msg":"Too many header fields."})");
  EXPECT_TRUE(over.WaitClosed());
  EXPECT_EQ(http.targets(), std::vector<std::string>{"/ten"});
  EXPECT_EQ(server.stats().bad_requests.load(), 1u);
}

TEST(ServerTest, GarbageGets400) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("THIS IS NOT HTTP\r\n\r\n"));
  ClientResponse res;
  ASSERT_FALSE(client.Read(res));
  EXPECT_EQ(res.result(), http::status::bad_request);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_TRUE(res.body().starts_with(R"({"code":-1000,"msg":"Malformed request: )")) << res.body();
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(http.calls(), 0);
  EXPECT_EQ(server.stats().bad_requests.load(), 1u);
}

TEST(ServerTest, SlowLorisIsCutOffByTheReadDeadline) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.read_timeout_ms = 300;
  o.idle_timeout_ms = 30'000;  // never the reason here
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port());
  ASSERT_FALSE(client.Write("GET / HTTP/1.1\r\nHost: t\r\n"));
  // One more header line every 50 ms: each byte well within any idle limit.
  for (int i = 0; i < 60 && server.stats().timeouts.load() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    (void)client.Write("X-Trickle: " + std::to_string(i) + "\r\n");
  }
  EXPECT_EQ(server.stats().timeouts.load(), 1u);
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(http.calls(), 0);
  EXPECT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 0; }));
}

TEST(ServerTest, SilentConnectionIsClosedByTheIdleDeadline) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.idle_timeout_ms = 200;
  o.read_timeout_ms = 30'000;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  Client silent(server.port());
  EXPECT_TRUE(silent.WaitClosed());
  // The stream closes the socket before the session sees the timeout.
  EXPECT_TRUE(Eventually([&] { return server.stats().timeouts.load() == 1; }));

  // Between keep-alive requests too.
  Client client(server.port());
  ClientResponse res;
  ASSERT_FALSE(client.Get("/one", res));
  EXPECT_EQ(res.body(), "/one");
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_TRUE(Eventually([&] { return server.stats().timeouts.load() == 2; }));
  EXPECT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 0; }));
}

TEST(ServerTest, ConnectionsOverTheLimitGet503) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_connections = 2;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  auto first = std::make_unique<Client>(server.port());
  Client second(server.port());
  ClientResponse res;
  ASSERT_FALSE(first->Get("/a", res));
  ASSERT_FALSE(second.Get("/b", res));
  ASSERT_EQ(server.stats().connections_open.load(), 2u);

  Client third(server.port());
  ASSERT_FALSE(third.Write(RequestText("/c")));
  ClientResponse refused;
  ASSERT_FALSE(third.Read(refused));
  EXPECT_EQ(refused.result(), http::status::service_unavailable);
  EXPECT_EQ(refused[http::field::content_type], "application/json");
  EXPECT_TRUE(refused.body().starts_with(R"({"code":-1008,"msg":")")) << refused.body();
  EXPECT_TRUE(third.WaitClosed());
  EXPECT_EQ(server.stats().connections_refused.load(), 1u);
  EXPECT_EQ(server.stats().connections_total.load(), 2u);
  EXPECT_EQ(http.targets(), (std::vector<std::string>{"/a", "/b"}));

  first.reset();  // frees a slot
  ASSERT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 1; }));
  Client fourth(server.port());
  ClientResponse ok;
  ASSERT_FALSE(fourth.Get("/d", ok));
  EXPECT_EQ(ok.result(), http::status::ok);
  EXPECT_EQ(ok.body(), "/d");
}

TEST(ServerTest, ConnectionsFromOneAddressOverItsLimitGet429) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_connections_per_ip = 2;
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  auto first = std::make_unique<Client>(server.port());
  Client second(server.port());
  ClientResponse res;
  ASSERT_FALSE(first->Get("/a", res));
  ASSERT_FALSE(second.Get("/b", res));

  Client third(server.port());
  ASSERT_FALSE(third.Write(RequestText("/c")));
  ClientResponse refused;
  ASSERT_FALSE(third.Read(refused));
  EXPECT_EQ(refused.result(), http::status::too_many_requests);
  EXPECT_TRUE(refused.body().starts_with(R"({"code":-1003,"msg":")")) << refused.body();
  EXPECT_TRUE(third.WaitClosed());
  EXPECT_EQ(server.stats().connections_refused_per_ip.load(), 1u);
  EXPECT_EQ(server.stats().connections_open.load(), 2u);
  EXPECT_EQ(http.targets(), (std::vector<std::string>{"/a", "/b"}));

  first.reset();  // the address has room again
  ASSERT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 1; }));
  Client fourth(server.port());
  ClientResponse ok;
  ASSERT_FALSE(fourth.Get("/d", ok));
  EXPECT_EQ(ok.body(), "/d");
}

TEST(ServerTest, TrustedProxiesAreNotLimitedPerAddress) {
  FuncHttp http;
  ServerOptions o = TestOptions();
  o.max_connections_per_ip = 1;
  o.trusted_proxies = {"127.0.0.1"};
  Server server(o, &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<Client>(server.port()));
    ClientResponse res;
    ASSERT_FALSE(clients.back()->Get("/r", res));
    EXPECT_EQ(res.result(), http::status::ok);
  }
  EXPECT_EQ(server.stats().connections_refused_per_ip.load(), 0u);
}

TEST(ServerTest, RespondAfterTheClientLeftIsDropped) {
  std::mutex mu;
  std::optional<Respond> held;
  FuncHttp http([&](Request req, Respond respond) {
    if (req.target() == "/hold") {
      std::lock_guard lock(mu);
      held = std::move(respond);
    } else {
      respond(TextResponse(req.version(), "ok"));
    }
  });
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  {
    Client client(server.port());
    ASSERT_FALSE(client.Write(RequestText("/hold")));
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard lock(mu);
      return held.has_value();
    }));
  }  // the client disconnects while its request is with the handler
  Respond respond;
  {
    std::lock_guard lock(mu);
    respond = std::move(*held);
    held.reset();
  }
  std::thread other([respond] { respond(TextResponse(11, "too late")); });
  other.join();
  respond = nullptr;  // the last reference to the session
  EXPECT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 0; }));

  Client next(server.port());
  ClientResponse res;
  ASSERT_FALSE(next.Get("/next", res));
  EXPECT_EQ(res.body(), "ok");
}

TEST(ServerTest, UpgradeWithoutAWebSocketHandlerGets404) {
  FuncHttp http;
  Server server(TestOptions(), &http, nullptr);
  ASSERT_TRUE(server.Start().ok());
  WsClient ws(server.port(), "/ws");
  EXPECT_EQ(ws.handshake_error(), websocket::error::upgrade_declined);
  EXPECT_EQ(ws.handshake_response().result(), http::status::not_found);
  EXPECT_EQ(http.calls(), 0);
}

// ---------------------------------------------------------------------------
// WebSocket

TEST(ServerTest, WebSocketEcho) {
  FuncHttp http;
  TestWs handler;
  Server server(TestOptions(), &http, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient a(server.port(), "/ws/a?x=1");
  ASSERT_FALSE(a.handshake_error()) << a.handshake_error().message();
  EXPECT_EQ(a.handshake_response()[http::field::server], "matchbook");
  const auto conn_a = handler.WaitOpened(1);  // before b: OnOpen order is a's then b's
  WsClient b(server.port(), "/ws/b");
  ASSERT_FALSE(b.handshake_error());
  const auto conn_b = handler.WaitOpened(2);
  ASSERT_TRUE(conn_a && conn_b);
  EXPECT_NE(conn_a->id(), conn_b->id());
  EXPECT_EQ(conn_a->target(), "/ws/a?x=1");
  EXPECT_EQ(conn_a->remote(), "127.0.0.1");
  EXPECT_EQ(server.stats().ws_open.load(), 2u);
  EXPECT_EQ(server.stats().connections_open.load(), 2u);

  for (const char* text : {"hello", "", "{\"method\":\"SUBSCRIBE\"}"}) {
    ASSERT_FALSE(a.Write(text));
    std::string echoed;
    ASSERT_FALSE(a.Read(echoed));
    EXPECT_EQ(echoed, text);
  }
  ASSERT_FALSE(a.CloseNormally());
  ASSERT_TRUE(Eventually([&] { return handler.Closes(conn_a->id()) == 1; }));
  EXPECT_EQ(handler.Closes(conn_b->id()), 0);
  EXPECT_FALSE(conn_a->Send(std::string("after close")));
  EXPECT_EQ(server.stats().ws_open.load(), 1u);
  // Counted when a write completes, which may be after the client read it.
  EXPECT_TRUE(Eventually([&] { return server.stats().ws_messages_sent.load() == 3; }));
  EXPECT_TRUE(Eventually([&] { return server.stats().connections_open.load() == 1; }));

  std::string echoed;
  ASSERT_FALSE(b.Write("still here"));
  ASSERT_FALSE(b.Read(echoed));
  EXPECT_EQ(echoed, "still here");
  server.Stop();
  EXPECT_EQ(handler.Closes(conn_a->id()), 1);
  EXPECT_EQ(handler.Closes(conn_b->id()), 1);
}

TEST(ServerTest, WebSocketSendFromAnotherThread) {
  TestWs handler;
  handler.echo_ = false;
  Server server(TestOptions(), nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  constexpr int kMessages = 200;
  Threads sender;
  sender.Start([conn] {
    for (int i = 0; i < kMessages; ++i) EXPECT_TRUE(conn->Send("m" + std::to_string(i)));
  });
  for (int i = 0; i < kMessages; ++i) {
    std::string text;
    ASSERT_FALSE(client.Read(text)) << i;
    EXPECT_EQ(text, "m" + std::to_string(i));
  }
  sender.JoinAll();
  EXPECT_TRUE(Eventually([&] { return server.stats().ws_messages_sent.load() == kMessages; }));
}

// Messages queued while the connection's writer is busy leave together: one
// send carries many frames, each frame intact and in order. The client reads
// nothing until the burst is queued, so the frames gather.
TEST(ServerTest, WebSocketFramesQueuedTogetherLeaveInOneSend) {
  TestWs handler;
  handler.echo_ = false;
  Server server(TestOptions(), nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  const uint64_t writes_before = server.stats().ws_socket_writes.load();
  constexpr int kMessages = 500;  // ~75 KB
  handler.burst_ = kMessages;
  ASSERT_FALSE(client.Write("go"));
  for (int i = 0; i < kMessages; ++i) {
    std::string text;
    ASSERT_FALSE(client.Read(text)) << i;
    EXPECT_EQ(text, TestWs::BurstMessage(i));
  }
  EXPECT_TRUE(Eventually([&] { return server.stats().ws_messages_sent.load() == kMessages; }));
  const uint64_t writes = server.stats().ws_socket_writes.load() - writes_before;
  EXPECT_GE(writes, 1u);
  // 4 KiB per send: ~20 sends; one per frame was 500.
  EXPECT_LE(writes, static_cast<uint64_t>(kMessages / 10)) << writes << " sends for " << kMessages;
  // Every length form of the frame header (7-bit, 16-bit, 64-bit), and the
  // connection still works both ways, and closes cleanly.
  handler.burst_ = 0;
  for (const std::size_t size : {std::size_t{125}, std::size_t{126}, std::size_t{65535},
                                 std::size_t{65536}, std::size_t{200000}}) {
    const std::string big(size, 'y');
    ASSERT_TRUE(conn->Send(big));
    std::string got;
    ASSERT_FALSE(client.Read(got)) << size;
    EXPECT_EQ(got.size(), size);
    EXPECT_EQ(got, big);
  }
  ASSERT_TRUE(conn->Send(std::string("last")));
  std::string last;
  ASSERT_FALSE(client.Read(last));
  EXPECT_EQ(last, "last");
  ASSERT_FALSE(client.CloseNormally());
  EXPECT_TRUE(Eventually([&] { return handler.Closes(conn->id()) == 1; }));
}

// Write rounds: the first stream message after a quiet interval goes at
// once; one published within the interval of the last round waits for the
// next round (not written yet, long after it was queued) unless an answer
// (Send) follows; stopping the server with a round pending neither waits for
// it nor keeps the session (LeakSanitizer checks the cycle through Core).
TEST(ServerTest, WebSocketWriteRoundsHoldMessagesUntilTheIntervalIsUp) {
  TestWs handler;
  handler.echo_ = false;
  ServerOptions options = TestOptions();
  options.ws_write_interval_us = 60'000'000;  // 60 s: longer than the test
  Server server(options, nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  const auto publish = [&](std::string text) {
    return conn->Publish(std::make_shared<const std::string>(std::move(text)), 0);
  };
  ASSERT_TRUE(publish("first"));
  std::string got;
  ASSERT_FALSE(client.Read(got));  // within the client's deadline, well under 60 s
  EXPECT_EQ(got, "first");
  // The writer that sent it may still wait for its send's completion and
  // would take a message queued meanwhile: let it end.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(publish("second"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.stats().ws_messages_sent.load(), 1u);
  // An answer does not wait for the round, and takes what waits along.
  ASSERT_TRUE(conn->Send(std::string("answer")));
  ASSERT_FALSE(client.Read(got));
  EXPECT_EQ(got, "second");
  ASSERT_FALSE(client.Read(got));
  EXPECT_EQ(got, "answer");
  ASSERT_TRUE(publish("third"));  // listed for a round 60 s away
  const auto stop_began = std::chrono::steady_clock::now();
  server.Stop();
  // The round's timer does not hold the io thread until Stop() gives up (2 s).
  EXPECT_LT(std::chrono::steady_clock::now() - stop_began, std::chrono::seconds(2));
}

// Messages queued one at a time within one interval leave in one round, one
// send, where a round per message would make one send each.
TEST(ServerTest, WebSocketMessagesWithinAnIntervalLeaveInOneSend) {
  TestWs handler;
  handler.echo_ = false;
  ServerOptions options = TestOptions();
  options.ws_write_interval_us = 2'000'000;
  Server server(options, nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Publish(std::make_shared<const std::string>("opening"), 0));  // a round
  std::string got;
  ASSERT_FALSE(client.Read(got));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its writer ends
  const uint64_t writes_before = server.stats().ws_socket_writes.load();
  constexpr int kMessages = 20;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(conn->Publish(std::make_shared<const std::string>(TestWs::BurstMessage(i)), 0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a writer per message would run
  }
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_FALSE(client.Read(got)) << i;
    EXPECT_EQ(got, TestWs::BurstMessage(i));
  }
  const uint64_t writes = server.stats().ws_socket_writes.load() - writes_before;
  EXPECT_GE(writes, 1u);
  EXPECT_LE(writes, 2u) << writes << " sends for " << kMessages << " messages";
}

// Messages queued with an origin time record their age when written; the
// others do not. WebSocket connection counters follow opens and closes.
TEST(ServerTest, WebSocketFreshnessCountsMessagesWithAnOrigin) {
  TestWs handler;
  handler.echo_ = false;
  metrics::Histogram freshness;
  ServerOptions options = TestOptions();
  options.ws_freshness = &freshness;
  Server server(options, nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  {
    WsClient client(server.port(), "/ws");
    ASSERT_FALSE(client.handshake_error());
    const auto conn = handler.WaitOpened(1);
    ASSERT_TRUE(conn);
    const int64_t origin = WallNs() - 2'000'000;  // 2 ms ago
    constexpr int kWithOrigin = 5;
    for (int i = 0; i < kWithOrigin; ++i) {
      EXPECT_TRUE(conn->Send(std::make_shared<const std::string>("o" + std::to_string(i)), origin));
    }
    EXPECT_TRUE(conn->Send(std::string("plain")));
    EXPECT_TRUE(conn->Send(std::make_shared<const std::string>("zero"), 0));
    for (int i = 0; i < kWithOrigin + 2; ++i) {
      std::string text;
      ASSERT_FALSE(client.Read(text)) << i;
    }
    EXPECT_TRUE(
        Eventually([&] { return server.stats().ws_messages_sent.load() == kWithOrigin + 2; }));
    const metrics::Histogram::Snapshot snap = freshness.Collect();
    EXPECT_EQ(snap.count, static_cast<uint64_t>(kWithOrigin));
    EXPECT_GE(snap.sum_ns, uint64_t{kWithOrigin} * 2'000'000) << "each at least 2 ms old";
    EXPECT_EQ(server.stats().ws_total.load(), 1u);
    EXPECT_EQ(server.stats().ws_closed.load(), 0u);
  }
  EXPECT_TRUE(Eventually([&] { return server.stats().ws_closed.load() == 1u; }));
  EXPECT_EQ(server.stats().ws_open.load(), 0u);
}

TEST(ServerTest, WebSocketCloseFlushesTheQueueFirst) {
  TestWs handler;
  handler.echo_ = false;
  Server server(TestOptions(), nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  EXPECT_TRUE(conn->Send(std::string("one")));
  EXPECT_TRUE(conn->Send(std::string("two")));
  conn->Close(4000, "bye");
  EXPECT_FALSE(conn->Send(std::string("three")));
  std::string text;
  ASSERT_FALSE(client.Read(text));
  EXPECT_EQ(text, "one");
  ASSERT_FALSE(client.Read(text));
  EXPECT_EQ(text, "two");
  EXPECT_EQ(client.Read(text), websocket::error::closed);
  EXPECT_EQ(client.reason().code, 4000);
  EXPECT_EQ(client.reason().reason, "bye");
  EXPECT_TRUE(Eventually([&] { return handler.Closes(conn->id()) == 1; }));
  EXPECT_EQ(server.stats().ws_open.load(), 0u);
}

TEST(ServerTest, WebSocketMessageOverTheLimitClosesWith1009) {
  TestWs handler;
  ServerOptions o = TestOptions();
  o.ws_max_message_bytes = 1024;
  Server server(o, nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  ASSERT_FALSE(client.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  ASSERT_FALSE(client.Write(std::string(1024, 'a')));
  std::string text;
  ASSERT_FALSE(client.Read(text));
  EXPECT_EQ(text.size(), 1024u);
  (void)client.Write(std::string(1025, 'b'));
  EXPECT_EQ(client.Read(text), websocket::error::closed);
  EXPECT_EQ(client.reason().code, websocket::close_code::too_big);
  EXPECT_TRUE(Eventually([&] { return handler.Closes(conn->id()) == 1; }));
}

TEST(ServerTest, WebSocketRefusedUpgradeGets404) {
  FuncHttp http;
  TestWs handler;
  handler.accept_ = false;
  Server server(TestOptions(), &http, &handler);
  ASSERT_TRUE(server.Start().ok());
  WsClient client(server.port(), "/ws");
  EXPECT_EQ(client.handshake_error(), websocket::error::upgrade_declined);
  EXPECT_EQ(client.handshake_response().result(), http::status::not_found);
  EXPECT_EQ(client.handshake_response()[http::field::content_type], "application/json");
  EXPECT_EQ(client.handshake_response().body(),
            R"({"code":-1000,"msg":"No WebSocket endpoint at this path."})");
  EXPECT_EQ(server.stats().ws_open.load(), 0u);
  EXPECT_EQ(http.calls(), 0);
}

TEST(ServerTest, WebSocketSlowConsumerIsDisconnectedOthersKeepReceiving) {
  TestWs handler;
  handler.echo_ = false;
  ServerOptions o = TestOptions();
  o.ws_send_queue_messages = 8;
  o.ws_send_queue_bytes = 1 << 20;
  Server server(o, nullptr, &handler);
  ASSERT_TRUE(server.Start().ok());
  // Both clients read raw frames (see WsClient::ReadRaw): the kernel buffers
  // megabytes before the slow client's queue fills, and all of it is read.
  WsClient slow(server.port(), "/ws/slow");
  ASSERT_FALSE(slow.handshake_error());
  const auto slow_conn = handler.WaitOpened(1);
  WsClient fast(server.port(), "/ws/fast");
  ASSERT_FALSE(fast.handshake_error());
  const auto fast_conn = handler.WaitOpened(2);
  ASSERT_TRUE(slow_conn && fast_conn);

  // The fast client reads everything until "END".
  Counter fast_received;
  std::vector<std::string> fast_texts;
  error_code fast_error;
  Threads reader;
  reader.Start([&] {
    for (;;) {
      WsClient::RawMessage msg;
      fast_error = fast.ReadRaw(msg);
      if (fast_error || msg.payload == "END") return;
      fast_texts.push_back(msg.payload.substr(0, msg.payload.find('|')));
      fast_received.Add();
    }
  });

  const std::string padding(64 * 1024, 'p');
  auto message = [&](int i) {
    return std::make_shared<const std::string>("seq:" + std::to_string(i) + "|" + padding);
  };
  int sent = 0;
  bool slow_refused = false;
  for (; sent < 5000; ++sent) {
    const auto msg = message(sent);
    if (!slow_conn->Send(msg)) {
      slow_refused = true;
      break;
    }
    ASSERT_TRUE(fast_conn->Send(msg)) << sent;
    // Keep the fast client's queue short: it must never overflow.
    ASSERT_TRUE(fast_received.WaitAtLeast(sent - 3)) << sent;
  }
  ASSERT_TRUE(slow_refused);
  EXPECT_EQ(server.stats().ws_slow_disconnects.load(), 1u);
  EXPECT_FALSE(slow_conn->Send(std::string("more")));

  // The slow client, reading at last, gets what was already on its way, in
  // order, then the close frame (read now: the server tears the connection
  // down if the close frame cannot get out within a short grace period).
  int slow_received = 0;
  WsClient::RawMessage last;
  for (;;) {
    ASSERT_FALSE(slow.ReadRaw(last)) << "after " << slow_received << " messages";
    if (last.opcode != 1) break;
    ASSERT_EQ(last.payload.substr(0, last.payload.find('|')),
              "seq:" + std::to_string(slow_received));
    ++slow_received;
  }
  EXPECT_EQ(last.opcode, 8);  // close: 1008 (0x03F0) and the reason
  EXPECT_EQ(last.payload, std::string("\x03\xF0") + "slow consumer: send queue full");
  EXPECT_LT(slow_received, sent);
  slow.Abort();
  EXPECT_TRUE(Eventually([&] { return handler.Closes(slow_conn->id()) == 1; }));

  // The fast client is unaffected.
  for (int i = sent; i < sent + 20; ++i) {
    ASSERT_TRUE(fast_conn->Send(message(i)));
    ASSERT_TRUE(fast_received.WaitAtLeast(i - 3));
  }
  ASSERT_TRUE(fast_conn->Send(std::string("END")));
  reader.JoinAll();
  ASSERT_FALSE(fast_error) << fast_error.message();
  ASSERT_EQ(fast_texts.size(), static_cast<std::size_t>(sent + 20));
  for (int i = 0; i < sent + 20; ++i) {
    ASSERT_EQ(fast_texts[static_cast<std::size_t>(i)], "seq:" + std::to_string(i));
  }
  EXPECT_EQ(handler.Closes(fast_conn->id()), 0);
  EXPECT_EQ(server.stats().ws_open.load(), 1u);
  EXPECT_EQ(server.stats().ws_slow_disconnects.load(), 1u);
}

// ---------------------------------------------------------------------------
// Stop

TEST(ServerTest, StopWithOpenConnectionsReturnsPromptly) {
  std::mutex mu;
  std::optional<Respond> held;
  FuncHttp http([&](Request req, Respond respond) {
    if (req.target() == "/hold") {
      std::lock_guard lock(mu);
      held = std::move(respond);
    } else {
      respond(TextResponse(req.version(), "ok"));
    }
  });
  TestWs handler;
  auto server = std::make_unique<Server>(TestOptions(), &http, &handler);
  ASSERT_TRUE(server->Start().ok());
  const uint16_t port = server->port();

  Client idle(port);  // keep-alive, between requests
  ClientResponse res;
  ASSERT_FALSE(idle.Get("/a", res));
  Client waiting(port);  // its request is with the handler
  ASSERT_FALSE(waiting.Write(RequestText("/hold")));
  Client fresh(port);  // connected, nothing sent
  WsClient ws(port, "/ws");
  ASSERT_FALSE(ws.handshake_error());
  const auto conn = handler.WaitOpened(1);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return held.has_value();
  }));
  ASSERT_TRUE(Eventually([&] { return server->stats().connections_open.load() == 4; }));

  const auto start = std::chrono::steady_clock::now();
  server->Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, milliseconds(1500));
  server->Stop();  // idempotent
  EXPECT_EQ(handler.Closes(conn->id()), 1);
  EXPECT_FALSE(conn->Send(std::string("after stop")));
  EXPECT_EQ(server->stats().ws_open.load(), 0u);
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_TRUE(fresh.WaitClosed());
  EXPECT_TRUE(waiting.WaitClosed());

  // Connections refused after Stop.
  Client late(port);
  EXPECT_TRUE(late.connect_error() || late.WaitClosed());

  // A Respond and a WsConnection kept past the Server's life are inert.
  server.reset();
  Respond respond;
  {
    std::lock_guard lock(mu);
    respond = std::move(*held);
    held.reset();
  }
  respond(TextResponse(11, "after the server"));
  respond = nullptr;
  EXPECT_FALSE(conn->Send(std::string("after the server")));
  conn->Close(1000, "late");
}

}  // namespace
}  // namespace mb::gateway
