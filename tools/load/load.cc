#include "load/load.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/base64.h"
#include "common/clock.h"
#include "common/hmac.h"
#include "common/thread_annotations.h"
#include "load/histogram.h"
#include "load/prometheus.h"
#include "load/ws_frames.h"
#include "net/stream.h"

namespace mb::load {

std::atomic<bool> g_stop_requested{false};

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::nanoseconds;

constexpr auto kRequestTimeout = std::chrono::seconds(5);
constexpr auto kConnectTimeout = std::chrono::seconds(2);
constexpr auto kReconnectDelay = std::chrono::milliseconds(200);
// Nothing answered for this long after a transport error: the server is gone.
constexpr auto kServerGoneAfter = std::chrono::seconds(2);
constexpr auto kSenderMinSleep = std::chrono::microseconds(100);
// An account with more tracked open orders than this cancels before it adds.
constexpr std::size_t kMaxOpenPerAccount = 256;
// Waiting stop orders per account: below the demo's MAX_NUM_ALGO_ORDERS (5).
constexpr std::size_t kMaxStopsPerAccount = 4;
// Marketable orders reach this many ticks past the mid; resting orders placed
// farther out are never filled by them, so their cancels and amends never miss.
constexpr int64_t kMarketableReachTicks = 3;
constexpr int kSeedLevels = 20;
// Each account's deposit covers this many orders on each side.
constexpr int64_t kFundedOrders = 100'000;

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// "0.01000000" at scale 8 -> 1000000. Extra places beyond scale are dropped.
Result<int64_t> ParseUnits(std::string_view s, int scale) {
  int64_t whole = 0, frac = 0;
  const std::size_t dot = s.find('.');
  std::string_view w = s.substr(0, dot);
  if (w.empty() || std::from_chars(w.data(), w.data() + w.size(), whole).ec != std::errc{})
    return InvalidArgument("bad decimal '" + std::string(s) + "'");
  int places = 0;
  if (dot != std::string_view::npos) {
    for (char c : s.substr(dot + 1)) {
      if (c < '0' || c > '9') return InvalidArgument("bad decimal '" + std::string(s) + "'");
      if (places == scale) break;
      frac = frac * 10 + (c - '0');
      ++places;
    }
  }
  for (; places < scale; ++places) frac *= 10;
  int64_t p = 1;
  for (int i = 0; i < scale; ++i) p *= 10;
  return whole * p + frac;
}

std::string FormatUnits(int64_t units, int scale) {
  int64_t p = 1;
  for (int i = 0; i < scale; ++i) p *= 10;
  if (scale == 0) return std::to_string(units);
  return fmt::format("{}.{:0{}}", units / p, units % p, scale);
}

// The integer after `key` (e.g. "\"T\":") in text; -1 when absent.
int64_t FindInt(std::string_view text, std::string_view key) {
  const std::size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  const char* p = text.data() + at + key.size();
  const char* end = text.data() + text.size();
  while (p < end && *p == ' ') ++p;
  int64_t v = -1;
  if (std::from_chars(p, end, v).ec != std::errc{}) return -1;
  return v;
}

struct Market {
  std::string symbol, base, quote;
  int base_scale = 8, quote_scale = 8;
  int64_t tick = 1, step = 1, min_qty = 1, max_price = 0;  // units of the asset's scale
  double min_notional = 0;                                 // in whole quote
};

struct AccountKeys {
  uint64_t id = 0;
  std::string key, secret;
  // --ws-auth session: an Ed25519 key (raw 32-byte private key) for session.logon.
  std::string ed_key, ed_private;
};

// A new Ed25519 key pair (OpenSSL): raw private and public keys, 32 bytes each.
bool NewEd25519(std::string* priv, std::string* pub) {
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  const bool made =
      ctx != nullptr && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &key) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!made) return false;
  priv->assign(32, '\0');
  pub->assign(32, '\0');
  std::size_t priv_len = 32, pub_len = 32;
  const bool ok = EVP_PKEY_get_raw_private_key(key, reinterpret_cast<unsigned char*>(priv->data()),
                                               &priv_len) == 1 &&
                  EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(pub->data()),
                                              &pub_len) == 1;
  EVP_PKEY_free(key);
  return ok && priv_len == 32 && pub_len == 32;
}

// The base64 Ed25519 signature of `message` by a raw private key.
std::string SignEd25519(const std::string& priv, std::string_view message) {
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(priv.data()), priv.size());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(64, '\0');
  std::size_t len = sig.size();
  const bool ok =
      key != nullptr && ctx != nullptr &&
      EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok ? Base64Encode(std::string_view(sig).substr(0, len)) : std::string();
}

// Blocking HTTP for the set-up; every call has a deadline (its own io_context
// runs each exchange to completion).
class SetupClient {
 public:
  // tls: the context for an https:// target (null: plain).
  SetupClient(const Options& o, std::shared_ptr<wire::TlsContext> tls)
      : o_(o), tls_(std::move(tls)) {}

  Status Resolve() {
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(o_.host, std::to_string(o_.port), ec);
    if (ec || results.empty())
      return Unavailable(fmt::format("cannot resolve {}: {}", o_.host, ec.message()));
    endpoint_ = results.begin()->endpoint();
    return Status::Ok();
  }
  const tcp::endpoint& endpoint() const { return endpoint_; }

  struct Answer {
    unsigned status = 0;
    std::string body;
  };

  Result<Answer> Call(http::verb verb, const std::string& target, const std::string& body,
                      const std::string& api_key = {}) {
    for (int attempt = 0;; ++attempt) {
      const bool was_connected = connected_;
      auto r = CallOnce(verb, target, body, api_key);
      // A kept-alive connection the server closed meanwhile: once more,
      // fresh. Not a request the server may have taken (a POST that timed
      // out waiting for its answer): sent twice, it would be done twice.
      if (r.ok() || !was_connected || attempt > 0) return r;
      if (verb != http::verb::get && !unsent_) return r;
    }
  }

  // An operator call: 2xx and a JSON body, else an error with the answer.
  Result<json::value> Admin(http::verb verb, const std::string& target, const std::string& body) {
    auto a = Call(verb, target, body);
    if (!a.ok()) return a.status();
    if (a->status == 401 || a->status == 403)
      return InvalidArgument(
          fmt::format("{} refused the admin token ({}): {}", target, a->status, a->body));
    if (a->status / 100 != 2)
      return Unavailable(fmt::format("{} answered {}: {}", target, a->status, a->body));
    boost::system::error_code ec;
    json::value v = json::parse(a->body, ec);
    if (ec) return Unavailable(fmt::format("{}: unparsable answer: {}", target, a->body));
    return v;
  }

  Result<Answer> Signed(http::verb verb, const std::string& path, const std::string& query,
                        const AccountKeys& acct) {
    std::string q = fmt::format("{}&timestamp={}&recvWindow=60000", query, WallMs());
    std::string target = fmt::format("{}?{}&signature={}", path, q, HmacSha256Hex(acct.secret, q));
    return Call(verb, target, {}, acct.key);
  }

 private:
  Result<Answer> CallOnce(http::verb verb, const std::string& target, const std::string& body,
                          const std::string& api_key) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, fmt::format("{}:{}", o_.host, o_.port));
    req.set("X-MB-ADMIN-TOKEN", o_.admin_token);
    if (!api_key.empty()) req.set("X-MBX-APIKEY", api_key);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    beast::error_code result;
    const char* stage = "connect";
    std::size_t answer_bytes = 0;
    auto exchange = [&] {
      stage = "write";
      stream_->expires_after(kRequestTimeout);
      http::async_write(*stream_, req, [&](beast::error_code ec, std::size_t) {
        if (ec) {
          result = ec;
          return;
        }
        stage = "read";
        http::async_read(*stream_, buffer_, res, [&](beast::error_code ec2, std::size_t n) {
          result = ec2;
          answer_bytes = n;
        });
      });
    };
    ioc_.restart();
    if (!connected_) {
      stream_.emplace(tcp::socket(ioc_), tls_);
      stream_->expires_after(kConnectTimeout);
      stream_->tcp_layer().async_connect(endpoint_, [&](beast::error_code ec) {
        if (ec) {
          result = ec;
          return;
        }
        stage = "TLS handshake";
        stream_->async_client_handshake(o_.host, [&](beast::error_code ec2) {
          if (ec2) {
            result = ec2;
            return;
          }
          connected_ = true;
          exchange();
        });
      });
    } else {
      exchange();
    }
    ioc_.run();
    // The server closed the connection before taking the request: nothing of
    // an answer, and not a deadline (a slow server may be working on it).
    unsent_ = result && answer_bytes == 0 && result != beast::error::timeout &&
              (stage[0] != 'r' || result == http::error::end_of_stream ||
               result == asio::error::connection_reset || result == asio::error::eof);
    if (result) {
      beast::error_code ignored;
      stream_->socket().close(ignored);
      connected_ = false;
      buffer_.clear();
      return Unavailable(fmt::format("{} {}{}: {} failed: {}", std::string(http::to_string(verb)),
                                     o_.target, target.substr(0, target.find('?')), stage,
                                     result.message()));
    }
    if (!res.keep_alive()) {
      beast::error_code ignored;
      stream_->socket().close(ignored);
      connected_ = false;
    }
    return Answer{res.result_int(), std::move(res.body())};
  }

  const Options& o_;
  const std::shared_ptr<wire::TlsContext> tls_;
  asio::io_context ioc_;
  tcp::endpoint endpoint_;
  std::optional<wire::Stream> stream_;  // made anew for each connection
  beast::flat_buffer buffer_;
  bool connected_ = false;
  bool unsent_ = false;  // the last call failed before the server could have taken it
};

std::string JStr(const json::value& v, std::string_view key) {
  if (!v.is_object()) return {};
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr || !f->is_string()) return {};
  return std::string(f->as_string());
}

Result<Market> LoadMarket(SetupClient& c, const std::string& wanted) {
  auto info = c.Admin(http::verb::get, "/api/v3/exchangeInfo", {});
  if (!info.ok()) return info.status();
  const json::object* root = info->if_object();
  const json::value* symbols = root ? root->if_contains("symbols") : nullptr;
  if (symbols == nullptr || !symbols->is_array())
    return Unavailable("exchangeInfo has no symbols array");
  for (const json::value& s : symbols->as_array()) {
    const std::string name = JStr(s, "symbol");
    if (!wanted.empty() ? name != wanted : JStr(s, "status") != "TRADING") continue;
    if (JStr(s, "status") != "TRADING")
      return InvalidArgument("--symbol: market " + name + " is not TRADING");
    Market m;
    m.symbol = name;
    m.base = JStr(s, "baseAsset");
    m.quote = JStr(s, "quoteAsset");
    const json::object& so = s.as_object();
    if (const auto* p = so.if_contains("baseAssetPrecision"); p && p->is_int64())
      m.base_scale = static_cast<int>(p->as_int64());
    if (const auto* p = so.if_contains("quoteAssetPrecision"); p && p->is_int64())
      m.quote_scale = static_cast<int>(p->as_int64());
    const json::value* filters = so.if_contains("filters");
    if (filters == nullptr || !filters->is_array()) return Unavailable(name + ": no filters");
    for (const json::value& f : filters->as_array()) {
      const std::string type = JStr(f, "filterType");
      if (type == "PRICE_FILTER") {
        auto tick = ParseUnits(JStr(f, "tickSize"), m.quote_scale);
        auto maxp = ParseUnits(JStr(f, "maxPrice"), m.quote_scale);
        if (!tick.ok() || !maxp.ok()) return Unavailable(name + ": bad PRICE_FILTER");
        m.tick = std::max<int64_t>(1, *tick);
        m.max_price = *maxp;
      } else if (type == "LOT_SIZE") {
        auto step = ParseUnits(JStr(f, "stepSize"), m.base_scale);
        auto minq = ParseUnits(JStr(f, "minQty"), m.base_scale);
        if (!step.ok() || !minq.ok()) return Unavailable(name + ": bad LOT_SIZE");
        m.step = std::max<int64_t>(1, *step);
        m.min_qty = *minq;
      } else if (type == "NOTIONAL" || type == "MIN_NOTIONAL") {
        m.min_notional =
            std::max(m.min_notional, std::strtod(JStr(f, "minNotional").c_str(), nullptr));
      }
    }
    return m;
  }
  return wanted.empty() ? NotFound("no TRADING market in exchangeInfo")
                        : NotFound("--symbol: no market '" + wanted + "' in exchangeInfo");
}

Result<std::vector<AccountKeys>> CreateAccounts(SetupClient& c, const Market& m, int n, int64_t mid,
                                                int64_t qty, bool ed25519) {
  std::vector<AccountKeys> out;
  const std::string run = std::to_string(WallNs());
  for (int i = 0; i < n; ++i) {
    auto acct = c.Admin(http::verb::post, "/admin/v1/accounts",
                        fmt::format(R"({{"name":"load-{}-{}"}})", run, i));
    if (!acct.ok()) return acct.status();
    const json::value* id = acct->as_object().if_contains("accountId");
    if (id == nullptr || !id->is_number()) return Unavailable("accounts: no accountId");
    AccountKeys k;
    k.id = id->to_number<uint64_t>();
    auto key = c.Admin(http::verb::post, fmt::format("/admin/v1/accounts/{}/apiKeys", k.id), {});
    if (!key.ok()) return key.status();
    k.key = JStr(*key, "apiKey");
    k.secret = JStr(*key, "secretKey");
    if (k.key.empty() || k.secret.empty()) return Unavailable("apiKeys: no apiKey/secretKey");
    if (ed25519) {
      std::string pub;
      if (!NewEd25519(&k.ed_private, &pub)) return Unavailable("cannot make an Ed25519 key");
      auto ed = c.Admin(http::verb::post, fmt::format("/admin/v1/accounts/{}/apiKeys", k.id),
                        json::serialize(json::object{{"publicKey", Base64Encode(pub)}}));
      if (!ed.ok()) return ed.status();
      k.ed_key = JStr(*ed, "apiKey");
      if (k.ed_key.empty()) return Unavailable("apiKeys: no apiKey for the Ed25519 key");
    }
    // Ample funds: enough for kFundedOrders orders of the run's largest size
    // on each side (an account holds at most kMaxOpenPerAccount open).
    const double base_units = static_cast<double>(2 * qty) * kFundedOrders;
    const double quote_units = base_units * static_cast<double>((mid + kSeedLevels + 64) * m.tick) /
                               std::pow(10.0, m.base_scale);
    if (quote_units > 1e17) return InvalidArgument(m.symbol + ": deposits too large");
    for (const auto& [asset, amount] :
         {std::pair{m.base, FormatUnits(static_cast<int64_t>(base_units), m.base_scale)},
          std::pair{m.quote, FormatUnits(static_cast<int64_t>(quote_units), m.quote_scale)}}) {
      auto dep = c.Admin(
          http::verb::post, "/admin/v1/deposits",
          fmt::format(R"({{"accountId":{},"asset":"{}","amount":"{}","ref":"load-{}-{}-{}"}})",
                      k.id, asset, amount, run, k.id, asset));
      if (!dep.ok()) return dep.status();
    }
    out.push_back(std::move(k));
  }
  return out;
}

// The mid in ticks: the book's, or a default that keeps prices well inside
// the price filter.
Result<int64_t> FindMid(SetupClient& c, const Market& m) {
  auto depth =
      c.Admin(http::verb::get, fmt::format("/api/v3/depth?symbol={}&limit=5", m.symbol), {});
  if (!depth.ok()) return depth.status();
  auto best = [&](const char* side) -> int64_t {
    const json::value* levels = depth->as_object().if_contains(side);
    if (levels == nullptr || !levels->is_array() || levels->as_array().empty()) return 0;
    const json::value& lvl = levels->as_array().front();
    if (!lvl.is_array() || lvl.as_array().empty() || !lvl.as_array()[0].is_string()) return 0;
    auto p = ParseUnits(lvl.as_array()[0].as_string(), m.quote_scale);
    return p.ok() ? *p / m.tick : 0;
  };
  const int64_t bid = best("bids"), ask = best("asks");
  if (bid > 0 && ask > bid) return (bid + ask) / 2;
  int64_t mid = 10'000;
  if (m.max_price > 0) mid = std::min(mid, m.max_price / m.tick / 2);
  if (mid < 100)
    return InvalidArgument(m.symbol + ": the price filter leaves no room around a mid");
  return mid;
}

// The smallest quantity (units) that passes LOT_SIZE and the notional at the
// lowest price an order of the run uses.
int64_t MinQty(const Market& m, int64_t low_price_ticks) {
  const double price =
      static_cast<double>(low_price_ticks * m.tick) / std::pow(10.0, m.quote_scale);
  const double need = m.min_notional / price * std::pow(10.0, m.base_scale);
  int64_t q = static_cast<int64_t>(std::ceil(need / static_cast<double>(m.step))) * m.step + m.step;
  return std::max({q, m.min_qty, m.step});
}

enum class Op : uint8_t { kLimit, kMarketable, kCancel, kAmend, kStop };

struct Iteration {
  Op op = Op::kLimit;
  uint32_t account = 0;
  bool track = false;    // a resting order beyond the marketable reach
  bool iceberg = false;  // a resting iceberg (canceled, never amended)
  uint64_t order_id = 0;
  Clock::time_point intended;
  http::verb verb = http::verb::post;
  std::string target;   // http: the signed request target
  std::string ws_text;  // ws-api: the signed request {id, method, params}
};

// The order mix. Next() is called by the sender only; Answered() from any io
// thread; both take mu_.
class OrderFlow {
 public:
  OrderFlow(const Options& o, const Market& m, std::vector<AccountKeys> accounts, int64_t mid,
            int64_t qty)
      : o_(o),
        m_(m),
        keys_(std::move(accounts)),
        state_(keys_.size()),
        mid_(mid),
        qty_(qty),
        rng_(o.seed) {}

  // account >= 0: for that account (a connection logged on as it).
  Iteration Next(Clock::time_point intended, int account = -1) {
    MutexLock lock(mu_);
    Iteration it;
    it.intended = intended;
    it.account = account >= 0 ? static_cast<uint32_t>(account)
                              : static_cast<uint32_t>(next_account_++ % keys_.size());
    State& st = state_[it.account];
    const double r = uniform_(rng_);
    const std::size_t open = st.fresh.size() + st.amended.size() + st.stops.size();
    if (open > kMaxOpenPerAccount || r < o_.cancel_share) {
      it.op = Op::kCancel;
    } else if (r < o_.cancel_share + o_.amend_share) {
      it.op = Op::kAmend;
    } else if (r < o_.cancel_share + o_.amend_share + o_.marketable_share) {
      it.op = Op::kMarketable;
    } else {
      it.op = Op::kLimit;
    }
    if (it.op == Op::kCancel && open == 0) it.op = Op::kLimit;
    if (it.op == Op::kAmend && st.fresh.empty()) it.op = Op::kLimit;
    bool iceberg = false;
    if (it.op == Op::kLimit && o_.stop_share > 0 && uniform_(rng_) < o_.stop_share) {
      // A full set of waiting stops: the oldest goes instead.
      it.op = st.stops.size() < kMaxStopsPerAccount ? Op::kStop : Op::kCancel;
    } else if (it.op == Op::kLimit && o_.iceberg_share > 0) {
      iceberg = uniform_(rng_) < o_.iceberg_share;
    }
    it.iceberg = iceberg;
    std::string query;
    switch (it.op) {
      case Op::kCancel: {
        std::deque<uint64_t>& from = st.stops.size() >= kMaxStopsPerAccount ? st.stops
                                     : !st.amended.empty()                  ? st.amended
                                     : !st.fresh.empty()                    ? st.fresh
                                                                            : st.stops;
        it.order_id = from.front();
        from.pop_front();
        it.verb = http::verb::delete_;
        query = fmt::format("symbol={}&orderId={}", m_.symbol, it.order_id);
        break;
      }
      case Op::kAmend:
        it.order_id = st.fresh.back();
        st.fresh.pop_back();
        it.verb = http::verb::put;
        query = fmt::format("symbol={}&orderId={}&newQty={}", m_.symbol, it.order_id,
                            FormatUnits(qty_, m_.base_scale));
        break;
      case Op::kMarketable: {
        const bool buy = st.next_buy;
        st.next_buy = !buy;
        const int64_t ticks = buy ? mid_ + kMarketableReachTicks : mid_ - kMarketableReachTicks;
        it.verb = http::verb::post;
        query = fmt::format(
            "symbol={}&side={}&type=LIMIT&timeInForce=IOC&quantity={}&price={}&newOrderRespType={}",
            m_.symbol, buy ? "BUY" : "SELL", FormatUnits(qty_, m_.base_scale),
            FormatUnits(ticks * m_.tick, m_.quote_scale), RespTypeName(o_.resp_type));
        break;
      }
      case Op::kLimit: {
        const bool buy = st.next_buy;
        st.next_buy = !buy;
        const int64_t offset = 1 + offset_(rng_);
        const int64_t ticks = std::max<int64_t>(1, buy ? mid_ - offset : mid_ + offset);
        it.track = offset > kMarketableReachTicks;
        it.verb = http::verb::post;
        query = fmt::format(
            "symbol={}&side={}&type=LIMIT&timeInForce=GTC&quantity={}&price={}&newOrderRespType={}",
            m_.symbol, buy ? "BUY" : "SELL", FormatUnits(2 * qty_, m_.base_scale),
            FormatUnits(ticks * m_.tick, m_.quote_scale), RespTypeName(o_.resp_type));
        if (iceberg) query += fmt::format("&icebergQty={}", FormatUnits(qty_, m_.base_scale));
        break;
      }
      case Op::kStop: {
        // A stop-loss beyond the marketable reach, on the side it protects:
        // a buy's stop above the mid, a sell's below; it waits, and triggers
        // only when the price runs that far.
        const bool buy = st.next_buy;
        st.next_buy = !buy;
        const int64_t offset = 1 + kMarketableReachTicks + offset_(rng_);
        const int64_t ticks = std::max<int64_t>(1, buy ? mid_ + offset : mid_ - offset);
        it.verb = http::verb::post;
        query = fmt::format(
            "symbol={}&side={}&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity={}&price={}&"
            "stopPrice={}&newOrderRespType={}",
            m_.symbol, buy ? "BUY" : "SELL", FormatUnits(qty_, m_.base_scale),
            FormatUnits(ticks * m_.tick, m_.quote_scale),
            FormatUnits(ticks * m_.tick, m_.quote_scale), RespTypeName(o_.resp_type));
        break;
      }
    }
    const AccountKeys& k = keys_[it.account];
    if (o_.transport == Transport::kWsApi) {
      const char* method = it.op == Op::kCancel  ? "order.cancel"
                           : it.op == Op::kAmend ? "order.amend.keepPriority"
                                                 : "order.place";
      it.ws_text = WsApiRequest(++ws_id_, method, query, k, o_.ws_auth == WsAuth::kSession);
      return it;
    }
    query += fmt::format("&timestamp={}&recvWindow=60000", WallMs());
    const std::string sig = HmacSha256Hex(k.secret, query);
    const char* path = it.op == Op::kCancel  ? "/api/v3/order"
                       : it.op == Op::kAmend ? "/api/v3/order/amend/keepPriority"
                                             : "/api/v3/order";
    it.target = fmt::format("{}?{}&signature={}", path, query, sig);
    return it;
  }

  // A 200 answer: remember orders that rest out of reach, and amended ones.
  void Answered(const Iteration& it, std::string_view body) {
    if (it.op == Op::kAmend) {
      MutexLock lock(mu_);
      state_[it.account].amended.push_back(it.order_id);
      return;
    }
    if (it.op == Op::kStop) {
      const int64_t id = FindInt(body, "\"orderId\":");
      if (id <= 0) return;
      MutexLock lock(mu_);
      state_[it.account].stops.push_back(static_cast<uint64_t>(id));
      return;
    }
    if (it.op != Op::kLimit || !it.track) return;
    if (o_.resp_type != RespType::kAck && body.find("\"status\":\"NEW\"") == std::string_view::npos)
      return;
    const int64_t id = FindInt(body, "\"orderId\":");
    if (id <= 0) return;
    MutexLock lock(mu_);
    // An iceberg is not amended (Binance refuses it): it is only canceled.
    (it.iceberg ? state_[it.account].amended : state_[it.account].fresh)
        .push_back(static_cast<uint64_t>(id));
  }

  const std::string& api_key(uint32_t account) const { return keys_[account].key; }
  const AccountKeys& keys(uint32_t account) const { return keys_[account]; }
  std::size_t accounts() const { return keys_.size(); }

  // A WebSocket API request with the parameters of `query` (k=v&..., values
  // that need no encoding), signed as Binance's WebSocket API wants it: HMAC
  // over every parameter sorted by name, k=v&k=v.
  // logged_on: the connection's session authenticates it (no key, no signature).
  static std::string WsApiRequest(uint64_t id, std::string_view method, std::string_view query,
                                  const AccountKeys& k, bool logged_on) {
    std::map<std::string, std::string> params;
    for (std::size_t pos = 0; pos < query.size();) {
      const std::size_t amp = std::min(query.find('&', pos), query.size());
      const std::string_view pair = query.substr(pos, amp - pos);
      const std::size_t eq = pair.find('=');
      params[std::string(pair.substr(0, eq))] =
          eq == std::string_view::npos ? std::string() : std::string(pair.substr(eq + 1));
      pos = amp + 1;
    }
    if (!logged_on) params["apiKey"] = k.key;
    params["timestamp"] = std::to_string(WallMs());
    params["recvWindow"] = "60000";
    std::string payload;
    json::object p;
    for (const auto& [name, value] : params) {
      if (!payload.empty()) payload += '&';
      payload += name + "=" + value;
      p[name] = value;
    }
    if (!logged_on) p["signature"] = HmacSha256Hex(k.secret, payload);
    return json::serialize(json::object{{"id", id}, {"method", method}, {"params", std::move(p)}});
  }

  // The n-th history query: allOrders and myTrades in turn, each account in
  // turn. Any thread (reads only what never changes).
  Iteration History(uint64_t n) const {
    Iteration it;
    it.account = static_cast<uint32_t>((n / 2) % keys_.size());
    it.verb = http::verb::get;
    const std::string query =
        fmt::format("symbol={}&limit=100&timestamp={}&recvWindow=60000", m_.symbol, WallMs());
    it.target =
        fmt::format("{}?{}&signature={}", n % 2 == 0 ? "/api/v3/allOrders" : "/api/v3/myTrades",
                    query, HmacSha256Hex(keys_[it.account].secret, query));
    return it;
  }

 private:
  struct State {
    std::deque<uint64_t> fresh;    // resting, never amended
    std::deque<uint64_t> amended;  // resting, quantity reduced once, or an iceberg
    std::deque<uint64_t> stops;    // waiting stop-loss orders
    bool next_buy = true;
  };
  const Options& o_;
  const Market& m_;
  const std::vector<AccountKeys> keys_;
  Mutex mu_;
  std::vector<State> state_ MB_GUARDED_BY(mu_);
  const int64_t mid_, qty_;
  uint64_t next_account_ = 0;
  uint64_t ws_id_ = 0;  // the last WebSocket API request id
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  // Offsets from the mid in ticks: geometric, mean ~6 ticks.
  std::geometric_distribution<int64_t> offset_{1.0 / 6.0};
};

class Runner;

// A connection of the order flow, with at most one request in flight.
class OrderConn {
 public:
  virtual ~OrderConn() = default;
  virtual void Connect() = 0;
  virtual void Send(Iteration it) = 0;
  virtual void Close() = 0;
  // The account every request on it must be for (a logged-on session), or -1.
  virtual int account() const { return -1; }
};

// One keep-alive HTTP connection. Every member is touched on the
// connection's strand only.
class HttpConn final : public OrderConn {
 public:
  HttpConn(Runner& runner, asio::io_context& ioc)
      : runner_(runner), strand_(asio::make_strand(ioc)), retry_(strand_) {}
  void Connect() override {
    asio::post(strand_, [this] { DoConnect(); });
  }
  void Send(Iteration it) override {
    asio::post(strand_, [this, it = std::move(it)]() mutable { DoSend(std::move(it)); });
  }
  void Close() override {
    asio::post(strand_, [this] {
      retry_.cancel();
      beast::error_code ignored;
      if (stream_) stream_->socket().close(ignored);
    });
  }

 private:
  void DoConnect();
  void DoSend(Iteration it);
  void OnRead(beast::error_code ec);
  void Fail(const char* stage, beast::error_code ec);

  Runner& runner_;
  asio::strand<asio::io_context::executor_type> strand_;
  std::optional<wire::Stream> stream_;  // made anew for each connection (TLS or plain)
  asio::steady_timer retry_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> req_;
  http::response<http::string_body> res_;
  Iteration it_;
};

// One WebSocket API connection (/ws-api/v3): a request, its answer, the
// next. Every member is touched on the connection's strand only.
class WsApiConn final : public OrderConn {
 public:
  // account >= 0: logs on as that account (session.logon) after each connect.
  WsApiConn(Runner& runner, asio::io_context& ioc, int account)
      : runner_(runner), strand_(asio::make_strand(ioc)), retry_(strand_), account_(account) {}
  int account() const override { return account_; }
  void Connect() override {
    asio::post(strand_, [this] { DoConnect(); });
  }
  void Send(Iteration it) override {
    asio::post(strand_, [this, it = std::move(it)]() mutable { DoSend(std::move(it)); });
  }
  void Close() override {
    asio::post(strand_, [this] {
      retry_.cancel();
      beast::error_code ignored;
      if (ws_) ws_->next_layer().socket().close(ignored);
    });
  }

 private:
  void DoConnect();
  void Upgrade();  // the WebSocket handshake, once connected (and TLS's done)
  void Logon();
  void DoSend(Iteration it);
  void OnRead(beast::error_code ec);
  void Fail(const char* stage, beast::error_code ec);

  Runner& runner_;
  asio::strand<asio::io_context::executor_type> strand_;
  // A new stream for each connection: a failed WebSocket stream is not reused.
  std::unique_ptr<websocket::stream<wire::Stream>> ws_;
  asio::steady_timer retry_;
  beast::flat_buffer buffer_;
  Iteration it_;
  const int account_;
  std::string logon_;  // the session.logon request in flight
};

// One WebSocket subscriber: trade delivery lag and depth freshness. It
// reads the socket itself, 64 KiB at a time, and takes every frame in what
// arrived (WsFrameReader): with a thousand subscribers at hundreds of
// thousands of messages a second, a composed read per message cost the
// generator three quarters of its CPU, and a generator that falls behind
// measures itself, not the server. The handshake is the plain RFC 6455
// request; pings are answered.
class Subscriber {
 public:
  Subscriber(Runner& runner, asio::io_context& ioc)
      : runner_(runner), strand_(asio::make_strand(ioc)), timer_(strand_) {}
  void Start() {
    asio::post(strand_, [this] { DoConnect(); });
  }
  void Close() {
    asio::post(strand_, [this] {
      timer_.cancel();
      CloseSocket();
    });
  }

 private:
  void Deadline();
  void DoConnect();
  void Upgrade();  // the WebSocket upgrade request, once connected (and TLS's done)
  void OnHandshake(beast::error_code ec, std::size_t n);
  void Read();
  void OnRead(beast::error_code ec, std::size_t n);
  void Pong(std::string_view payload);
  void Closed(bool was_ready, beast::error_code ec);
  void CloseSocket() {
    beast::error_code ignored;
    if (stream_) stream_->socket().close(ignored);
  }

  static constexpr std::size_t kReadBytes = 64 * 1024;

  Runner& runner_;
  asio::strand<asio::io_context::executor_type> strand_;
  std::optional<wire::Stream> stream_;  // TLS or plain, made at the connect
  asio::steady_timer timer_;            // the handshake's deadline
  std::string request_;                 // the upgrade request, then the handshake's answer
  WsFrameReader reader_;
  std::string pong_;  // the pong being written
  bool pong_pending_ = false;
  std::string close_reason_;  // from the server's close frame
  bool ready_ = false;        // the handshake is done: the deadline no longer applies
};

// One connection asking for history in a closed loop (a new query as soon as
// the last is answered) from Start() until the run shuts down. Every member is
// touched on the connection's strand only.
class HistoryReader {
 public:
  HistoryReader(Runner& runner, asio::io_context& ioc, uint64_t first)
      : runner_(runner), strand_(asio::make_strand(ioc)), retry_(strand_), n_(first) {}
  void Start() {
    asio::post(strand_, [this] { DoConnect(); });
  }
  void Close() {
    asio::post(strand_, [this] {
      retry_.cancel();
      beast::error_code ignored;
      if (stream_) stream_->socket().close(ignored);
    });
  }

 private:
  void DoConnect();
  void Next();
  void Retry();

  Runner& runner_;
  asio::strand<asio::io_context::executor_type> strand_;
  std::optional<wire::Stream> stream_;  // TLS or plain, made at each connect
  asio::steady_timer retry_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> req_;
  http::response<http::string_body> res_;
  uint64_t n_;
  Clock::time_point sent_;
};

class Runner {
 public:
  Runner(const Options& o, const Market& m, const tcp::endpoint& ep, const tcp::endpoint& sub_ep,
         OrderFlow& flow, std::shared_ptr<wire::TlsContext> tls,
         std::shared_ptr<wire::TlsContext> sub_tls)
      : o_(o),
        tls_(std::move(tls)),
        sub_tls_(std::move(sub_tls)),
        m_(m),
        endpoint_(ep),
        sub_endpoint_(sub_ep),
        flow_(flow),
        sender_strand_(asio::make_strand(ioc_)),
        sender_timer_(sender_strand_) {}
  ~Runner() { Shutdown(); }

  // Connects the pool and the subscribers and starts the io threads.
  Status Start() {
    work_.emplace(asio::make_work_guard(ioc_));
    for (int i = 0; i < o_.threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
    for (int i = 0; i < o_.connections; ++i) {
      if (o_.transport == Transport::kWsApi) {
        const int account = o_.ws_auth == WsAuth::kSession
                                ? static_cast<int>(static_cast<std::size_t>(i) % flow_.accounts())
                                : -1;
        conns_.push_back(std::make_unique<WsApiConn>(*this, ioc_, account));
      } else {
        conns_.push_back(std::make_unique<HttpConn>(*this, ioc_));
      }
    }
    for (int i = 0; i < o_.subscribers; ++i)
      subs_.push_back(std::make_unique<Subscriber>(*this, ioc_));
    for (int i = 0; i < o_.history_readers; ++i)
      readers_.push_back(std::make_unique<HistoryReader>(*this, ioc_, static_cast<uint64_t>(i)));
    for (auto& c : conns_) c->Connect();
    for (auto& s : subs_) s->Start();
    for (auto& r : readers_) r->Start();
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (IdleCount() == conns_.size() &&
          subs_ready_.load() + subs_failed_.load() == static_cast<uint64_t>(subs_.size()))
        break;
      if (g_stop_requested.load()) return Unavailable("interrupted during set-up");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (IdleCount() != conns_.size())
      return Unavailable(fmt::format("only {} of {} HTTP connections opened ({})", IdleCount(),
                                     conns_.size(), LastTransportError()));
    if (subs_ready_.load() != static_cast<uint64_t>(subs_.size()))
      return Unavailable(fmt::format("only {} of {} WebSocket subscribers connected ({})",
                                     subs_ready_.load(), subs_.size(), LastTransportError()));
    return Status::Ok();
  }

  struct PhaseResult {
    double elapsed_s = 0;
    uint64_t requests = 0, responses = 0, answered_ok = 0, errors = 0, dropped = 0;
    std::unique_ptr<Histogram::Snapshot> order;  // this phase's latencies
  };

  // Sends at `rate` for `seconds`; appends one series point per second (time
  // offset by t0). Returns early when the run is aborted or interrupted.
  PhaseResult RunPhase(double rate, double seconds, double t0, Report& rep) {
    PhaseResult pr;
    const auto before = order_.Collect();
    const uint64_t req0 = requests_.load(), resp0 = responses_.load(), ok0 = answered_ok_.load(),
                   err0 = errors_.load(), drop0 = dropped_.load();
    const auto start = Clock::now() + std::chrono::milliseconds(1);
    asio::post(sender_strand_, [this, start, rate, seconds] {
      rate_ = rate;
      phase_start_ = start;
      next_i_ = 0;
      total_ = static_cast<uint64_t>(std::floor(rate * seconds));
      sending_ = true;
      Tick();
    });
    auto prev = order_.Collect();
    uint64_t prev_resp = resp0;
    auto next_tick = start + std::chrono::seconds(1);
    const auto end = start + duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const bool tty = isatty(STDERR_FILENO) != 0;
    while (true) {
      const auto now = Clock::now();
      if (now >= end || g_stop_requested.load() || CheckServerGone(now)) break;
      if (now >= next_tick) {
        auto cur = order_.Collect();
        Histogram::Snapshot sec = cur->Since(*prev);
        const uint64_t resp = responses_.load();
        SecondPoint pt;
        pt.t_s = t0 + duration_cast<std::chrono::duration<double>>(now - start).count();
        pt.rate = static_cast<double>(resp - prev_resp);
        pt.p50_ms = static_cast<double>(sec.Quantile(0.5)) / 1e6;
        pt.p99_ms = static_cast<double>(sec.Quantile(0.99)) / 1e6;
        pt.max_ms = static_cast<double>(sec.max_ns) / 1e6;
        rep.series.push_back(pt);
        if (tty) {
          std::fprintf(
              stderr,
              "\r%6.1fs  rate %8.0f/s  errors %llu  dropped %llu  p99 %8.3f ms  subs %llu/%d"
              "   ",
              pt.t_s, pt.rate, static_cast<unsigned long long>(errors_.load()),
              static_cast<unsigned long long>(dropped_.load()), pt.p99_ms,
              static_cast<unsigned long long>(subs_ready_.load() - sub_drops_.load()),
              o_.subscribers);
          std::fflush(stderr);
        }
        prev = std::move(cur);
        prev_resp = resp;
        next_tick += std::chrono::seconds(1);
        continue;
      }
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(20), std::min(next_tick, end) - now));
    }
    StopSending();
    pr.elapsed_s =
        duration_cast<std::chrono::duration<double>>(std::min(Clock::now(), end) - start).count();
    // Answers still in flight belong to this phase.
    const auto drain_until = Clock::now() + std::chrono::seconds(2);
    while (!aborted() && IdleCount() < conns_.size() && Clock::now() < drain_until &&
           !g_stop_requested.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (tty) std::fprintf(stderr, "\n");
    auto after = order_.Collect();
    pr.order = std::make_unique<Histogram::Snapshot>(after->Since(*before));
    pr.requests = requests_.load() - req0;
    pr.responses = responses_.load() - resp0;
    pr.answered_ok = answered_ok_.load() - ok0;
    pr.errors = errors_.load() - err0;
    pr.dropped = dropped_.load() - drop0;
    return pr;
  }

  void Shutdown() {
    if (threads_.empty()) return;
    stopping_.store(true);
    StopSending();
    for (auto& c : conns_) c->Close();
    for (auto& s : subs_) s->Close();
    for (auto& r : readers_) r->Close();
    // Without the work guard the io threads return once every socket and
    // timer has completed; a deadline bounds it.
    work_.reset();
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (!ioc_.stopped() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  void Fill(Report& r) const {
    r.requests = requests_.load();
    r.responses = responses_.load();
    r.errors = errors_.load();
    r.dropped = dropped_.load();
    {
      MutexLock lock(mu_);
      r.errors_by_code = errors_by_code_;
    }
    r.delivery = Figures::From(*delivery_.Collect());
    r.freshness = Figures::From(*freshness_.Collect());
    r.history_readers = o_.history_readers;
    r.history = Figures::From(*history_.Collect());
    r.history_errors = history_errors_.load();
    r.subscriber_drops = sub_drops_.load();
    r.messages = messages_.load();
    if (!abort_reason_.empty()) r.aborted = abort_reason_;
  }
  bool aborted() const { return aborted_.load(); }
  uint64_t messages() const { return messages_.load(); }
  const std::string& abort_reason() const { return abort_reason_; }

  // Called by connections and subscribers.
  void Idle(OrderConn* c) {
    MutexLock lock(idle_mu_);
    idle_.push_back(c);
  }
  void Answered(const Iteration& it, unsigned status, std::string_view body) {
    const auto now = Clock::now();
    order_.RecordDelta(duration_cast<nanoseconds>(now - it.intended).count());
    responses_.fetch_add(1, std::memory_order_relaxed);
    last_response_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    if (status == 200) {
      answered_ok_.fetch_add(1, std::memory_order_relaxed);
      flow_.Answered(it, body);
      return;
    }
    errors_.fetch_add(1, std::memory_order_relaxed);
    const int64_t code = FindInt(body, "\"code\":");
    MutexLock lock(mu_);
    ++errors_by_code_[fmt::format("{}/{}", status, code == -1 ? 0 : code)];
  }
  void RequestFailed(const char* stage, const beast::error_code& ec) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    MutexLock lock(mu_);
    ++errors_by_code_[fmt::format("transport/{}", ec.message())];
    NoteTransportErrorLocked(stage, ec);
  }
  void ConnectFailed(const char* stage, const beast::error_code& ec) {
    MutexLock lock(mu_);
    NoteTransportErrorLocked(stage, ec);
  }
  void Message(std::string_view text) {
    messages_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now_ns = WallNs();
    auto to_ns = [](int64_t t) { return t < 100'000'000'000'000 ? t * 1'000'000 : t * 1'000; };
    if (text.find("\"e\":\"trade\"") != std::string_view::npos) {
      const int64_t t = FindInt(text, "\"T\":");
      if (t > 0) delivery_.RecordDelta(now_ns - to_ns(t));
    } else if (text.find("\"e\":\"depthUpdate\"") != std::string_view::npos) {
      const int64_t e = FindInt(text, "\"E\":");
      if (e > 0) freshness_.RecordDelta(now_ns - to_ns(e));
    }
  }
  void HistoryAnswered(Clock::time_point sent, unsigned status, std::string_view body) {
    if (status != 200) {
      history_errors_.fetch_add(1, std::memory_order_relaxed);
      const int64_t code = FindInt(body, "\"code\":");
      MutexLock lock(mu_);
      ++errors_by_code_[fmt::format("history {}/{}", status, code == -1 ? 0 : code)];
      return;
    }
    history_.RecordDelta(duration_cast<nanoseconds>(Clock::now() - sent).count());
  }
  void HistoryFailed(const char* stage, const beast::error_code& ec) {
    if (stopping_.load()) return;
    history_errors_.fetch_add(1, std::memory_order_relaxed);
    MutexLock lock(mu_);
    ++errors_by_code_[fmt::format("history transport/{}", ec.message())];
    NoteTransportErrorLocked(stage, ec);
  }
  Iteration HistoryQuery(uint64_t n) const { return flow_.History(n); }
  void SubscriberReady() { subs_ready_.fetch_add(1); }
  void SubscriberClosed(bool was_ready, const beast::error_code& ec, std::string_view reason) {
    if (!was_ready) {
      subs_failed_.fetch_add(1);
      ConnectFailed("websocket connect", ec);
      return;
    }
    if (stopping_.load()) return;
    sub_drops_.fetch_add(1);
    MutexLock lock(mu_);
    if (!reason.empty()) ++errors_by_code_[fmt::format("ws-close/{}", reason)];
  }
  bool stopping() const { return stopping_.load(); }
  const Options& options() const { return o_; }
  const tcp::endpoint& endpoint() const { return endpoint_; }
  const tcp::endpoint& sub_endpoint() const { return sub_endpoint_; }
  std::string ws_target() const {
    std::string s = m_.symbol;
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return fmt::format("/stream?streams={}@trade/{}@depth@0ms&timeUnit=MICROSECOND", s, s);
  }
  const std::string& api_key(uint32_t account) const { return flow_.api_key(account); }
  const AccountKeys& keys(uint32_t account) const { return flow_.keys(account); }
  const std::string& host_header() const { return host_header_; }
  const std::string& host() const { return o_.host; }
  const std::shared_ptr<wire::TlsContext>& tls() const { return tls_; }
  const std::shared_ptr<wire::TlsContext>& sub_tls() const { return sub_tls_; }
  const std::string& sub_host() const { return o_.sub_host; }

 private:
  std::size_t IdleCount() {
    MutexLock lock(idle_mu_);
    return idle_.size();
  }
  OrderConn* TakeIdle() {
    MutexLock lock(idle_mu_);
    if (idle_.empty()) return nullptr;
    OrderConn* c = idle_.front();
    idle_.pop_front();
    return c;
  }
  std::string LastTransportError() {
    MutexLock lock(mu_);
    return last_error_.empty() ? "no error seen" : last_error_;
  }
  void NoteTransportErrorLocked(const char* stage, const beast::error_code& ec) MB_REQUIRES(mu_) {
    last_error_ = fmt::format(
        "{} {}: {}", stage,
        endpoint_.address().to_string() + ":" + std::to_string(endpoint_.port()), ec.message());
    last_transport_error_ns_.store(Clock::now().time_since_epoch().count(),
                                   std::memory_order_relaxed);
  }
  bool CheckServerGone(Clock::time_point now) {
    const int64_t last_err = last_transport_error_ns_.load(std::memory_order_relaxed);
    const int64_t last_ok =
        std::max(last_response_ns_.load(std::memory_order_relaxed), started_ns_);
    if (last_err == 0 || last_err < last_ok) return false;
    if (now.time_since_epoch().count() - last_ok <
        duration_cast<Clock::duration>(kServerGoneAfter).count())
      return false;
    abort_reason_ = "server went away: " + LastTransportError();
    aborted_.store(true);
    return true;
  }
  void StopSending() {
    // Shared: on a backlogged io thread the post may run after the wait gave up.
    auto done = std::make_shared<std::promise<void>>();
    auto f = done->get_future();
    asio::post(sender_strand_, [this, done] {
      sending_ = false;
      sender_timer_.cancel();
      done->set_value();
    });
    f.wait_for(std::chrono::seconds(2));
  }

  // The sender: on sender_strand_ only.
  void Tick() {
    if (!sending_) return;
    const auto now = Clock::now();
    const double elapsed = duration_cast<std::chrono::duration<double>>(now - phase_start_).count();
    const uint64_t due =
        std::min<uint64_t>(total_, elapsed < 0 ? 0 : static_cast<uint64_t>(elapsed * rate_) + 1);
    for (; next_i_ < due; ++next_i_) {
      const auto intended =
          phase_start_ +
          nanoseconds(static_cast<int64_t>(static_cast<double>(next_i_) * 1e9 / rate_));
      OrderConn* c = TakeIdle();
      if (c == nullptr) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      c->Send(flow_.Next(intended, c->account()));
    }
    if (next_i_ >= total_) {
      sending_ = false;
      return;
    }
    const auto next = phase_start_ +
                      nanoseconds(static_cast<int64_t>(static_cast<double>(next_i_) * 1e9 / rate_));
    sender_timer_.expires_at(std::max(next, now + kSenderMinSleep));
    sender_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) Tick();
    });
  }

  const Options& o_;
  const std::shared_ptr<wire::TlsContext> tls_;      // https:// targets (null: plain)
  const std::shared_ptr<wire::TlsContext> sub_tls_;  // the subscribers' (null: plain)
  const Market& m_;
  const tcp::endpoint endpoint_;
  const tcp::endpoint sub_endpoint_;  // the subscribers'
  const std::string host_header_ = fmt::format("{}:{}", o_.host, o_.port);
  OrderFlow& flow_;
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  asio::strand<asio::io_context::executor_type> sender_strand_;
  asio::steady_timer sender_timer_;
  // Sender state (sender_strand_ only).
  bool sending_ = false;
  double rate_ = 1;
  Clock::time_point phase_start_;
  uint64_t next_i_ = 0, total_ = 0;

  std::vector<std::unique_ptr<OrderConn>> conns_;
  std::vector<std::unique_ptr<Subscriber>> subs_;
  std::vector<std::unique_ptr<HistoryReader>> readers_;
  Mutex idle_mu_;
  // First in, first out: every connection is used in turn, so none sits idle
  // long enough for the server's keep-alive timeout to close it.
  std::deque<OrderConn*> idle_ MB_GUARDED_BY(idle_mu_);

  Histogram order_, delivery_, freshness_, history_;
  std::atomic<uint64_t> history_errors_{0};
  std::atomic<uint64_t> requests_{0}, responses_{0}, answered_ok_{0}, errors_{0}, dropped_{0},
      messages_{0};
  std::atomic<uint64_t> subs_ready_{0}, subs_failed_{0}, sub_drops_{0};
  std::atomic<bool> stopping_{false}, aborted_{false};
  const int64_t started_ns_ = Clock::now().time_since_epoch().count();
  std::atomic<int64_t> last_response_ns_{0}, last_transport_error_ns_{0};
  std::string abort_reason_;  // main thread only
  mutable Mutex mu_;
  std::map<std::string, uint64_t> errors_by_code_ MB_GUARDED_BY(mu_);
  std::string last_error_ MB_GUARDED_BY(mu_);
};

void HttpConn::DoConnect() {
  if (runner_.stopping()) return;
  stream_.emplace(tcp::socket(strand_), runner_.tls());
  stream_->expires_after(kConnectTimeout);
  auto failed = [this](const char* stage, beast::error_code ec) {
    runner_.ConnectFailed(stage, ec);
    if (runner_.stopping()) return;
    retry_.expires_after(kReconnectDelay);
    retry_.async_wait([this](beast::error_code ec2) {
      if (!ec2) DoConnect();
    });
  };
  stream_->tcp_layer().async_connect(runner_.endpoint(), [this, failed](beast::error_code ec) {
    if (ec) return failed("connect", ec);
    stream_->socket().set_option(tcp::no_delay(true));
    stream_->async_client_handshake(runner_.host(), [this, failed](beast::error_code ec3) {
      if (ec3) return failed("TLS handshake", ec3);
      buffer_.clear();
      runner_.Idle(this);  // last: the sender may use this connection at once
    });
  });
}

void HttpConn::DoSend(Iteration it) {
  it_ = std::move(it);
  req_ = {};
  req_.method(it_.verb);
  req_.target(it_.target);
  req_.version(11);
  req_.set(http::field::host, runner_.host_header());
  req_.set("X-MBX-APIKEY", runner_.api_key(it_.account));
  req_.keep_alive(true);
  req_.prepare_payload();
  res_ = {};
  stream_->expires_after(kRequestTimeout);
  http::async_write(*stream_, req_, [this](beast::error_code ec, std::size_t) {
    if (ec) return Fail("write", ec);
    http::async_read(*stream_, buffer_, res_,
                     [this](beast::error_code ec2, std::size_t) { OnRead(ec2); });
  });
}

void HttpConn::OnRead(beast::error_code ec) {
  if (ec) return Fail("read", ec);
  runner_.Answered(it_, res_.result_int(), res_.body());
  if (!res_.keep_alive()) {
    beast::error_code ignored;
    stream_->socket().close(ignored);
    return DoConnect();
  }
  runner_.Idle(this);  // last
}

void HttpConn::Fail(const char* stage, beast::error_code ec) {
  if (runner_.stopping()) return;
  runner_.RequestFailed(stage, ec);
  beast::error_code ignored;
  stream_->socket().close(ignored);
  retry_.expires_after(kReconnectDelay);
  retry_.async_wait([this](beast::error_code ec2) {
    if (!ec2) DoConnect();
  });
}

void WsApiConn::DoConnect() {
  if (runner_.stopping()) return;
  ws_ = std::make_unique<websocket::stream<wire::Stream>>(strand_, runner_.tls());
  wire::Stream& wire = ws_->next_layer();
  wire.expires_after(kConnectTimeout);
  wire.tcp_layer().async_connect(runner_.endpoint(), [this](beast::error_code ec) {
    if (ec) return Fail("ws-api connect", ec);
    ws_->next_layer().socket().set_option(tcp::no_delay(true));
    ws_->next_layer().async_client_handshake(runner_.host(), [this](beast::error_code ec1) {
      if (ec1) return Fail("ws-api TLS handshake", ec1);
      Upgrade();
    });
  });
}

void WsApiConn::Upgrade() {
  {
    ws_->next_layer().expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = kConnectTimeout;
    t.idle_timeout = websocket::stream_base::none();
    t.keep_alive_pings = false;
    ws_->set_option(t);
    ws_->text(true);
    const auto& ep = runner_.endpoint();
    ws_->async_handshake(fmt::format("{}:{}", ep.address().to_string(), ep.port()), "/ws-api/v3",
                         [this](beast::error_code ec2) {
                           if (ec2) return Fail("ws-api handshake", ec2);
                           buffer_.clear();
                           if (account_ >= 0) return Logon();
                           runner_.Idle(this);  // last: the sender may use it at once
                         });
  }
}

void WsApiConn::Logon() {
  const AccountKeys& k = runner_.keys(static_cast<uint32_t>(account_));
  const std::string ts = std::to_string(WallMs());
  const std::string payload = "apiKey=" + k.ed_key + "&timestamp=" + ts;
  logon_ = json::serialize(
      json::object{{"id", "logon"},
                   {"method", "session.logon"},
                   {"params", json::object{{"apiKey", k.ed_key},
                                           {"timestamp", ts},
                                           {"signature", SignEd25519(k.ed_private, payload)}}}});
  ws_->async_write(asio::buffer(logon_), [this](beast::error_code ec, std::size_t) {
    if (ec) return Fail("ws-api logon", ec);
    ws_->async_read(buffer_, [this](beast::error_code ec2, std::size_t) {
      if (ec2) return Fail("ws-api logon", ec2);
      const auto data = buffer_.cdata();
      const std::string_view text(static_cast<const char*>(data.data()), data.size());
      const bool ok = FindInt(text, "\"status\":") == 200;
      buffer_.consume(buffer_.size());
      if (!ok) {
        return Fail("ws-api logon refused",
                    boost::system::errc::make_error_code(boost::system::errc::permission_denied));
      }
      runner_.Idle(this);  // last
    });
  });
}

void WsApiConn::DoSend(Iteration it) {
  it_ = std::move(it);
  ws_->async_write(asio::buffer(it_.ws_text), [this](beast::error_code ec, std::size_t) {
    if (ec) return Fail("write", ec);
    ws_->async_read(buffer_, [this](beast::error_code ec2, std::size_t) { OnRead(ec2); });
  });
}

void WsApiConn::OnRead(beast::error_code ec) {
  if (ec) return Fail("read", ec);
  const auto data = buffer_.cdata();
  const std::string_view text(static_cast<const char*>(data.data()), data.size());
  // {"id":N,"status":S,"result"|"error":...}: the envelope's status comes first.
  const int64_t status = FindInt(text, "\"status\":");
  runner_.Answered(it_, status > 0 ? static_cast<unsigned>(status) : 0u, text);
  buffer_.consume(buffer_.size());
  runner_.Idle(this);  // last
}

void WsApiConn::Fail(const char* stage, beast::error_code ec) {
  if (runner_.stopping()) return;
  if (it_.ws_text.empty()) {
    runner_.ConnectFailed(stage, ec);
  } else {
    runner_.RequestFailed(stage, ec);
  }
  it_ = {};
  beast::error_code ignored;
  beast::get_lowest_layer(*ws_).socket().close(ignored);
  retry_.expires_after(kReconnectDelay);
  retry_.async_wait([this](beast::error_code ec2) {
    if (!ec2) DoConnect();
  });
}

// The connect, and then the handshake, each within kConnectTimeout. The
// deadline's handler may already be queued when the handshake completes, so
// it checks `ready_` rather than trusting the cancel.
void Subscriber::Deadline() {
  timer_.expires_after(kConnectTimeout);
  timer_.async_wait([this](beast::error_code ec) {
    if (ec || ready_) return;
    CloseSocket();  // the connect or the handshake fails with operation_aborted
  });
}

void Subscriber::DoConnect() {
  Deadline();
  stream_.emplace(tcp::socket(strand_), runner_.sub_tls());
  stream_->socket().async_connect(runner_.sub_endpoint(), [this](beast::error_code ec) {
    if (ec) return Closed(false, ec);
    Deadline();
    stream_->async_client_handshake(runner_.sub_host(), [this](beast::error_code ec1) {
      if (ec1) return Closed(false, ec1);
      Upgrade();
    });
  });
}

void Subscriber::Upgrade() {
  {
    const auto& ep = runner_.sub_endpoint();
    request_ = fmt::format(
        "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: bWF0Y2hib29rLWxvYWQtMQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        runner_.ws_target(), ep.address().to_string(), ep.port());
    asio::async_write(*stream_, asio::buffer(request_), [this](beast::error_code ec2, std::size_t) {
      if (ec2) return Closed(false, ec2);
      request_.clear();
      asio::async_read_until(*stream_, asio::dynamic_buffer(request_), "\r\n\r\n",
                             [this](beast::error_code e, std::size_t n) { OnHandshake(e, n); });
    });
  }
}

void Subscriber::OnHandshake(beast::error_code ec, std::size_t n) {
  timer_.cancel();
  if (ec) return Closed(false, ec);
  const std::string_view head(request_.data(), n);
  // "HTTP/1.1 101 Switching Protocols": anything else refused the upgrade.
  if (head.substr(0, 13) != "HTTP/1.1 101 ") {
    return Closed(false, beast::websocket::error::upgrade_declined);
  }
  reader_.Feed(std::string_view(request_).substr(n));  // frames that came with the answer
  request_ = {};
  ready_ = true;
  runner_.SubscriberReady();
  OnRead({}, 0);
}

void Subscriber::Read() {
  char* p = reader_.Prepare(kReadBytes);
  stream_->async_read_some(asio::buffer(p, reader_.prepared()),
                           [this](beast::error_code ec, std::size_t n) { OnRead(ec, n); });
}

void Subscriber::OnRead(beast::error_code ec, std::size_t n) {
  if (ec) return Closed(true, ec);
  reader_.Commit(n);
  for (;;) {
    const WsFrameReader::Item it = reader_.Next();
    switch (it.kind) {
      case WsFrameReader::Kind::kNeedMore:
        return Read();
      case WsFrameReader::Kind::kMessage:
        runner_.Message(it.data);
        break;
      case WsFrameReader::Kind::kPing:
        Pong(it.data);
        break;
      case WsFrameReader::Kind::kPong:
        break;
      case WsFrameReader::Kind::kClose:
        close_reason_ = fmt::format("{} {}", it.close_code, it.data);
        return Closed(true, beast::websocket::error::closed);
      case WsFrameReader::Kind::kError:
        close_reason_ = "protocol error: " + reader_.error();
        return Closed(true, beast::websocket::error::closed);
    }
  }
}

// One pong at a time; a ping that comes while one is written is answered by
// it (any pong keeps the connection alive).
void Subscriber::Pong(std::string_view payload) {
  if (pong_pending_) return;
  pong_pending_ = true;
  pong_ = WsClientFrame(0xA, payload);
  asio::async_write(*stream_, asio::buffer(pong_),
                    [this](beast::error_code, std::size_t) { pong_pending_ = false; });
}

void Subscriber::Closed(bool was_ready, beast::error_code ec) {
  timer_.cancel();
  CloseSocket();
  runner_.SubscriberClosed(was_ready, ec, close_reason_);
}

void HistoryReader::DoConnect() {
  if (runner_.stopping()) return;
  stream_.emplace(tcp::socket(strand_), runner_.tls());
  stream_->expires_after(kConnectTimeout);
  stream_->tcp_layer().async_connect(runner_.endpoint(), [this](beast::error_code ec) {
    if (ec) return Retry();
    stream_->socket().set_option(tcp::no_delay(true));
    stream_->async_client_handshake(runner_.host(), [this](beast::error_code ec1) {
      if (ec1) {
        runner_.HistoryFailed("history TLS handshake", ec1);
        return Retry();
      }
      buffer_.clear();
      Next();
    });
  });
}

void HistoryReader::Next() {
  if (runner_.stopping()) return;
  const Iteration it = runner_.HistoryQuery(n_);
  n_ += static_cast<uint64_t>(std::max(1, runner_.options().history_readers));
  req_ = {};
  req_.method(it.verb);
  req_.target(it.target);
  req_.version(11);
  req_.set(http::field::host, runner_.host_header());
  req_.set("X-MBX-APIKEY", runner_.api_key(it.account));
  req_.keep_alive(true);
  res_ = {};
  sent_ = Clock::now();
  stream_->expires_after(kRequestTimeout);
  http::async_write(*stream_, req_, [this](beast::error_code ec, std::size_t) {
    if (ec) {
      runner_.HistoryFailed("history write", ec);
      return Retry();
    }
    http::async_read(*stream_, buffer_, res_, [this](beast::error_code ec2, std::size_t) {
      if (ec2) {
        runner_.HistoryFailed("history read", ec2);
        return Retry();
      }
      runner_.HistoryAnswered(sent_, res_.result_int(), res_.body());
      if (!res_.keep_alive()) return Retry();
      Next();
    });
  });
}

void HistoryReader::Retry() {
  if (runner_.stopping()) return;
  beast::error_code ignored;
  if (stream_) stream_->socket().close(ignored);
  retry_.expires_after(kReconnectDelay);
  retry_.async_wait([this](beast::error_code ec) {
    if (!ec) DoConnect();
  });
}

// The serving process's CPU counters from the target's GET /metrics, on the
// main thread between phases. The first failure (unreachable, refused, no
// process_cpu_seconds_total) is kept as the reason and ends the readings:
// every later Read() is nullopt at once, so a refusing server costs one call.
class ServerCpuProbe {
 public:
  struct Reading {
    ServerCpu cpu;
    Clock::time_point at;
  };
  explicit ServerCpuProbe(SetupClient& c) : c_(c) {}

  std::optional<Reading> Read() {
    if (failure_) return std::nullopt;
    auto a = c_.Call(http::verb::get, "/metrics", {});
    if (!a.ok()) return Fail(a.status().message());
    if (a->status != 200) {
      std::string body = a->body.substr(0, 200);
      while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
      return Fail(fmt::format("GET /metrics answered {}: {}", a->status, body));
    }
    auto cpu = ServerCpuFrom(ParsePromText(a->body));
    if (!cpu.ok()) return Fail("GET /metrics: " + cpu.status().message());
    return Reading{std::move(*cpu), Clock::now()};
  }
  const std::optional<std::string>& failure() const { return failure_; }

 private:
  std::nullopt_t Fail(std::string why) {
    failure_ = std::move(why);
    return std::nullopt;
  }
  SetupClient& c_;
  std::optional<std::string> failure_;
};

// The server's CPU over [before, after] divided by the orders answered (us)
// and the messages delivered (ns) in it; unset figures where a divisor is 0.
void SetServerCpu(const ServerCpuProbe::Reading& before, const ServerCpuProbe::Reading& after,
                  uint64_t orders, uint64_t messages, Report& rep) {
  rep.messages_delivered = messages;
  const double cpu = after.cpu.process_seconds - before.cpu.process_seconds;
  if (cpu < 0) {
    rep.server_cpu_warning = "process_cpu_seconds_total went down: another process answered";
    return;
  }
  const auto per = [](double seconds, uint64_t n, double unit) -> std::optional<double> {
    if (n == 0) return std::nullopt;
    return seconds * unit / static_cast<double>(n);
  };
  rep.server_cpu_seconds = cpu;
  rep.server_cpu_window_s =
      duration_cast<std::chrono::duration<double>>(after.at - before.at).count();
  rep.server_cpu_us_per_order = per(cpu, orders, 1e6);
  if (rep.subscribers > 0) rep.server_cpu_ns_per_message = per(cpu, messages, 1e9);
  for (const auto& [name, secs] : after.cpu.threads) {
    const auto was = before.cpu.threads.find(name);
    // A thread started inside the window counts from 0.
    const double d = std::max(0.0, secs - (was == before.cpu.threads.end() ? 0.0 : was->second));
    rep.server_threads[name] = ServerThreadCpu{d, per(d, orders, 1e6)};
  }
}

Status SeedBook(SetupClient& c, const Market& m, const std::vector<AccountKeys>& accounts,
                int64_t mid, int64_t qty) {
  for (int level = 1; level <= kSeedLevels; ++level) {
    for (const bool buy : {true, false}) {
      const AccountKeys& k = accounts[static_cast<std::size_t>(level) % accounts.size()];
      const int64_t ticks = buy ? mid - level : mid + level;
      auto a = c.Signed(http::verb::post, "/api/v3/order",
                        fmt::format("symbol={}&side={}&type=LIMIT&timeInForce=GTC&quantity={}&"
                                    "price={}&newOrderRespType=ACK",
                                    m.symbol, buy ? "BUY" : "SELL", FormatUnits(qty, m.base_scale),
                                    FormatUnits(ticks * m.tick, m.quote_scale)),
                        k);
      if (!a.ok()) return a.status();
      if (a->status != 200)
        return Unavailable(
            fmt::format("seeding the book: order answered {}: {}", a->status, a->body));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Report> RunLoad(const Options& o) {
  Report rep;
  rep.preset = o.preset;
  rep.rate = o.rate;
  rep.subscribers = o.subscribers;
  rep.threads = o.threads;
  rep.connections = o.connections;
  rep.accounts = o.accounts;

  std::shared_ptr<wire::TlsContext> tls;
  std::shared_ptr<wire::TlsContext> sub_tls;
  if (o.tls || o.sub_tls) {
    auto ctx = wire::MakeClientTlsContext(o.ca_file);
    if (!ctx.ok()) return Status(ctx.status().code(), "--ca: " + ctx.status().message());
    if (o.tls) tls = *ctx;
    if (o.sub_tls) sub_tls = *ctx;
  }
  SetupClient setup(o, tls);
  MB_RETURN_IF_ERROR(setup.Resolve());
  auto ping = setup.Call(http::verb::get, "/api/v3/ping", {});
  if (!ping.ok()) return Unavailable("target unreachable: " + ping.status().message());
  auto market = LoadMarket(setup, o.symbol);
  if (!market.ok()) return market.status();
  const Market& m = *market;
  rep.symbol = m.symbol;
  auto mid = FindMid(setup, m);
  if (!mid.ok()) return mid.status();
  const int64_t qty = MinQty(m, *mid - 64);
  auto accounts = CreateAccounts(setup, m, o.accounts, *mid, qty, o.ws_auth == WsAuth::kSession);
  if (!accounts.ok()) return accounts.status();
  MB_RETURN_IF_ERROR(SeedBook(setup, m, *accounts, *mid, 5 * qty));

  OrderFlow flow(o, m, std::move(*accounts), *mid, qty);
  tcp::endpoint sub_ep = setup.endpoint();
  if (!o.subscribe_to.empty()) {
    asio::io_context ioc_sub;
    beast::error_code ec;
    tcp::resolver resolver(ioc_sub);
    auto results = resolver.resolve(o.sub_host, std::to_string(o.sub_port), ec);
    if (ec || results.empty()) {
      return Unavailable(
          fmt::format("--subscribe-to: cannot resolve {}: {}", o.sub_host, ec.message()));
    }
    sub_ep = results.begin()->endpoint();
  }
  Runner runner(o, m, setup.endpoint(), sub_ep, flow, tls, sub_tls);
  MB_RETURN_IF_ERROR(runner.Start());

  // The server's CPU is read right before the first order and right after
  // each phase's answers have drained: set-up and connecting stay outside.
  ServerCpuProbe probe(setup);
  std::optional<ServerCpuProbe::Reading> first = probe.Read(), last = first;
  const uint64_t messages0 = runner.messages();
  uint64_t window_orders = 0;

  const double cpu0 = CpuSeconds();
  const auto wall0 = Clock::now();
  Figures order;
  double achieved = 0, elapsed = 0;
  if (o.preset != "max") {
    auto pr = runner.RunPhase(o.rate, o.duration_s, 0, rep);
    window_orders = pr.responses;
    if (first) last = probe.Read();
    order = Figures::From(*pr.order);
    elapsed = pr.elapsed_s;
    achieved = pr.elapsed_s > 0 ? static_cast<double>(pr.answered_ok) / pr.elapsed_s : 0;
  } else {
    // Steps of duration/8 s (at least 1 s): x1.5 until a step fails or the
    // time is spent, then two bisections between the best pass and the fail.
    const double step_s = std::max(1.0, o.duration_s / 8);
    double rate = o.rate, best = 0, fail = 0;
    int bisections = 0;
    const Step* best_step = nullptr;
    while (!runner.aborted() && !g_stop_requested.load()) {
      const std::optional<ServerCpuProbe::Reading> step_start = last;
      auto pr = runner.RunPhase(rate, step_s, elapsed, rep);
      elapsed += pr.elapsed_s;
      window_orders += pr.responses;
      Step s;
      if (step_start) {
        last = probe.Read();
        const double cpu = last ? last->cpu.process_seconds - step_start->cpu.process_seconds : -1;
        if (cpu >= 0 && pr.responses > 0)
          s.server_cpu_us_per_order = cpu * 1e6 / static_cast<double>(pr.responses);
      }
      s.rate = rate;
      s.achieved = pr.elapsed_s > 0 ? static_cast<double>(pr.answered_ok) / pr.elapsed_s : 0;
      s.requests = pr.requests;
      s.errors = pr.errors;
      s.dropped = pr.dropped;
      s.order = Figures::From(*pr.order);
      const double attempts = static_cast<double>(pr.requests + pr.dropped);
      s.pass = !runner.aborted() && pr.requests > 0 && s.order.p99 < o.max_p99_ms &&
               static_cast<double>(pr.errors + pr.dropped) <= std::max(1.0, 0.001 * attempts);
      rep.steps.push_back(s);
      if (s.pass && rate > best) best = rate;
      if (!s.pass && (fail == 0 || rate < fail)) fail = rate;
      if (fail == 0) {
        if (elapsed >= o.duration_s) break;
        rate *= 1.5;
      } else if (best == 0) {
        if (rate < 2 || bisections >= 3) break;
        rate /= 2;
        ++bisections;
      } else {
        if (bisections >= 2 || fail - best < 1) break;
        rate = std::floor((best + fail) / 2);
        ++bisections;
      }
    }
    for (const Step& s : rep.steps)
      if (s.pass && (best_step == nullptr || s.rate > best_step->rate)) best_step = &s;
    if (best_step != nullptr) {
      order = best_step->order;
      achieved = best_step->achieved;
      rep.rate = best_step->rate;
    } else if (!rep.steps.empty()) {
      order = rep.steps.front().order;
      achieved = 0;
    }
  }
  const double wall = duration_cast<std::chrono::duration<double>>(Clock::now() - wall0).count();
  const double cpu = CpuSeconds() - cpu0;
  const uint64_t messages = runner.messages() - messages0;
  runner.Shutdown();
  runner.Fill(rep);
  if (first && last) {
    SetServerCpu(*first, *last, window_orders, messages, rep);
  } else {
    rep.messages_delivered = messages;
    rep.server_cpu_warning = probe.failure().value_or("no /metrics reading");
  }
  if (rep.server_cpu_warning)
    fmt::print(stderr, "matchbook-load: warning: server CPU not measured: {}\n",
               *rep.server_cpu_warning);
  if (!rep.aborted && g_stop_requested.load()) rep.aborted = "interrupted (SIGINT)";
  rep.order = order;
  rep.achieved_rate_per_s = achieved;
  rep.duration_s = elapsed;
  rep.loadgen_cpu_percent = wall > 0 ? 100.0 * cpu / wall : 0;
  return rep;
}

}  // namespace mb::load
