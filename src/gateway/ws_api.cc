// The WebSocket API (see ws_api.h). Runs on the io threads; answers leave
// from the thread the backend answers on.
#include "gateway/ws_api.h"

#include <array>
#include <boost/json.hpp>
#include <map>
#include <unordered_map>
#include <utility>
#include <variant>

#include "common/thread_annotations.h"

namespace mb::gateway {
namespace {

namespace json = boost::json;
using V = http::verb;

constexpr std::string_view kPath = "/ws-api/v3";

// Binance's WebSocket API methods Matchbook serves, each by its REST twin.
constexpr std::array kMethods = {
    WsApiMethod{"ping", V::get, "/api/v3/ping"},
    WsApiMethod{"time", V::get, "/api/v3/time"},
    WsApiMethod{"exchangeInfo", V::get, "/api/v3/exchangeInfo"},
    WsApiMethod{"depth", V::get, "/api/v3/depth"},
    WsApiMethod{"trades.recent", V::get, "/api/v3/trades"},
    WsApiMethod{"trades.historical", V::get, "/api/v3/historicalTrades"},
    WsApiMethod{"trades.aggregate", V::get, "/api/v3/aggTrades"},
    WsApiMethod{"klines", V::get, "/api/v3/klines"},
    WsApiMethod{"uiKlines", V::get, "/api/v3/uiKlines"},
    WsApiMethod{"avgPrice", V::get, "/api/v3/avgPrice"},
    WsApiMethod{"ticker.24hr", V::get, "/api/v3/ticker/24hr"},
    WsApiMethod{"ticker.tradingDay", V::get, "/api/v3/ticker/tradingDay"},
    WsApiMethod{"ticker", V::get, "/api/v3/ticker"},
    WsApiMethod{"ticker.price", V::get, "/api/v3/ticker/price"},
    WsApiMethod{"ticker.book", V::get, "/api/v3/ticker/bookTicker"},
    WsApiMethod{"order.place", V::post, "/api/v3/order", true},
    WsApiMethod{"order.test", V::post, "/api/v3/order/test", true},
    WsApiMethod{"order.status", V::get, "/api/v3/order", true},
    WsApiMethod{"order.cancel", V::delete_, "/api/v3/order", true},
    WsApiMethod{"order.cancelReplace", V::post, "/api/v3/order/cancelReplace", true},
    WsApiMethod{"order.amend.keepPriority", V::put, "/api/v3/order/amend/keepPriority", true},
    WsApiMethod{"openOrders.status", V::get, "/api/v3/openOrders", true},
    WsApiMethod{"openOrders.cancelAll", V::delete_, "/api/v3/openOrders", true},
    WsApiMethod{"allOrders", V::get, "/api/v3/allOrders", true},
    WsApiMethod{"orderList.place.oco", V::post, "/api/v3/orderList/oco", true},
    WsApiMethod{"orderList.place.oto", V::post, "/api/v3/orderList/oto", true},
    WsApiMethod{"orderList.place.otoco", V::post, "/api/v3/orderList/otoco", true},
    WsApiMethod{"orderList.cancel", V::delete_, "/api/v3/orderList", true},
    WsApiMethod{"orderList.status", V::get, "/api/v3/orderList", true},
    WsApiMethod{"openOrderLists.status", V::get, "/api/v3/openOrderList", true},
    WsApiMethod{"allOrderLists", V::get, "/api/v3/allOrderList", true},
    WsApiMethod{"myTrades", V::get, "/api/v3/myTrades", true},
    WsApiMethod{"account.status", V::get, "/api/v3/account", true},
    WsApiMethod{"session.logon", V::get, "", false, 2},
    WsApiMethod{"session.status", V::get, "", false, 2},
    WsApiMethod{"session.logout", V::get, "", false, 2},
};

bool IsValidId(const json::value& v) {
  return v.is_int64() || v.is_uint64() || (v.is_string() && v.get_string().size() <= 64);
}

// A parameter's value as the endpoint reads it and the signature covers it:
// strings as they are, integers in decimal, booleans true/false, arrays (of
// symbols, permissions) as their JSON text. Floats, objects and null have no
// exact text: nullopt.
std::optional<std::string> ParamText(const json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  if (v.is_bool()) return std::string(v.get_bool() ? "true" : "false");
  if (v.is_array()) return json::serialize(v);
  return std::nullopt;
}

// Percent-encoding of everything but RFC 3986's unreserved characters.
void FormEncode(std::string_view in, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : in) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out->push_back(ch);
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15u]);
    }
  }
}

// A logged-on session (session.logon with an Ed25519 key).
struct Session {
  int64_t connected_ms = 0;
  std::string api_key;  // empty: not logged on
  AccountId account{};
  int64_t authorized_ms = 0;
};

}  // namespace

bool IsWsApiTarget(std::string_view target) { return target.substr(0, target.find('?')) == kPath; }

const WsApiMethod* FindWsApiMethod(std::string_view name) {
  for (const WsApiMethod& m : kMethods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string WsApiEnvelope(std::string_view id_json, const WsApiAnswer& answer,
                          const WsApiOptions& options, bool return_rate_limits) {
  std::string out;
  out.reserve(answer.body.size() + 256);
  out += "{\"id\":";
  out += id_json;
  out += ",\"status\":";
  out += std::to_string(answer.status);
  out += answer.status == 200 ? ",\"result\":" : ",\"error\":";
  out += answer.body.empty() ? std::string_view("{}") : std::string_view(answer.body);
  if (return_rate_limits) {
    out += ",\"rateLimits\":[";
    bool first = true;
    const auto limit = [&](std::string_view type, std::string_view interval, int num, uint32_t max,
                           uint32_t count) {
      if (max == 0) return;
      if (!first) out += ',';
      first = false;
      out += "{\"rateLimitType\":\"";
      out += type;
      out += "\",\"interval\":\"";
      out += interval;
      out += "\",\"intervalNum\":";
      out += std::to_string(num);
      out += ",\"limit\":";
      out += std::to_string(max);
      out += ",\"count\":";
      out += std::to_string(count);
      out += '}';
    };
    limit("REQUEST_WEIGHT", "MINUTE", 1, options.weight_per_minute, answer.used_weight);
    if (answer.order_counts) {
      limit("ORDERS", "SECOND", 10, options.orders_per_10s, answer.order_counts->first);
      limit("ORDERS", "DAY", 1, options.orders_per_day, answer.order_counts->second);
    }
    out += ']';
  }
  out += '}';
  return out;
}

class WsApi::Impl {
 public:
  Impl(const KeyStore& keys, WsApiBackend& backend, WsHandler& streams, WsApiOptions options,
       std::function<int64_t()> clock_us)
      : keys_(keys),
        backend_(backend),
        streams_(streams),
        options_(options),
        clock_us_(std::move(clock_us)) {}

  bool Accepts(const Request& request) { return streams_.Accepts(request); }

  void OnOpen(const std::shared_ptr<WsConnection>& conn) {
    streams_.OnOpen(conn);
    if (!IsWsApiTarget(conn->target())) return;
    auto session = std::make_shared<Session>();
    session->connected_ms = clock_us_() / 1'000;
    MutexLock lock(mu_);
    sessions_[conn->id()] = std::move(session);
  }

  void OnClose(const std::shared_ptr<WsConnection>& conn) {
    streams_.OnClose(conn);
    MutexLock lock(mu_);
    sessions_.erase(conn->id());
  }

  void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) {
    if (!IsWsApiTarget(conn->target())) return streams_.OnMessage(conn, text);
    try {
      HandleRequest(conn, text);
    } catch (const std::exception& e) {
      // A library exception (allocation, JSON) answers this request only.
      Refuse(conn, "null", true, ApiError::Unknown(e.what()));
    }
  }

 private:
  // Sends the envelope of an answer on `conn`.
  void Answer(const std::shared_ptr<WsConnection>& conn, std::string id_json,
              bool return_rate_limits, WsApiCall call) {
    backend_.Call(std::move(call), [conn, id = std::move(id_json), return_rate_limits,
                                    options = options_](WsApiAnswer a) {
      conn->Send(WsApiEnvelope(id, a, options, return_rate_limits));
    });
  }
  void Refuse(const std::shared_ptr<WsConnection>& conn, std::string id_json,
              bool return_rate_limits, ApiError e) {
    WsApiCall call;
    call.error = std::move(e);
    call.remote = conn->remote();
    Answer(conn, std::move(id_json), return_rate_limits, std::move(call));
  }

  std::shared_ptr<Session> SessionOf(const WsConnection& conn) {
    MutexLock lock(mu_);
    const auto it = sessions_.find(conn.id());
    return it == sessions_.end() ? nullptr : it->second;
  }

  void HandleRequest(const std::shared_ptr<WsConnection>& conn, std::string_view text) {
    if (text.size() > options_.max_request_bytes) {
      return Refuse(
          conn, "null", true,
          ApiError{400, -1000,
                   "Request too large: " + std::to_string(text.size()) + " bytes; at most " +
                       std::to_string(options_.max_request_bytes) + " are read."});
    }
    boost::system::error_code ec;
    const json::value doc = json::parse(text, ec);
    if (ec)
      return Refuse(conn, "null", true, ApiError{400, -1135, "Invalid JSON: " + ec.message()});
    const json::object* req = doc.if_object();
    if (req == nullptr) {
      return Refuse(conn, "null", true,
                    ApiError{400, -1135, "Invalid request: expected a JSON object."});
    }
    const json::value* id = req->if_contains("id");
    if (id == nullptr || id->is_null()) {
      return Refuse(conn, "null", true, ApiError::MandatoryMissing("id"));
    }
    if (!IsValidId(*id)) {
      return Refuse(conn, "null", true,
                    ApiError{400, -1135,
                             "Invalid 'id' in JSON request; expected a string of at most 64 "
                             "characters or an integer."});
    }
    std::string id_json = json::serialize(*id);
    static const json::object kNoParams;
    const json::object* params = &kNoParams;
    if (const json::value* p = req->if_contains("params")) {
      if (!p->is_object()) {
        return Refuse(
            conn, std::move(id_json), true,
            ApiError{400, -1135, "Invalid 'params' in JSON request; expected an object."});
      }
      params = &p->get_object();
    }
    bool rate_limits = true;
    if (const json::value* r = params->if_contains("returnRateLimits")) {
      if (r->is_bool()) {
        rate_limits = r->get_bool();
      } else if (r->is_string() && (r->get_string() == "true" || r->get_string() == "false")) {
        rate_limits = r->get_string() == "true";
      } else {
        return Refuse(conn, std::move(id_json), true,
                      ApiError::BadParam("returnRateLimits", "Expected true or false."));
      }
    }
    const json::value* method_value = req->if_contains("method");
    if (method_value == nullptr) {
      return Refuse(conn, std::move(id_json), rate_limits, ApiError::MandatoryMissing("method"));
    }
    if (!method_value->is_string()) {
      return Refuse(conn, std::move(id_json), rate_limits,
                    ApiError::BadParam("method", "Expected a string."));
    }
    const std::string_view name = method_value->get_string();
    // User data subscriptions belong to the streams.
    if (name.starts_with("userDataStream.")) return streams_.OnMessage(conn, text);
    const WsApiMethod* method = FindWsApiMethod(name);
    if (method == nullptr) {
      return Refuse(conn, std::move(id_json), rate_limits,
                    ApiError::BadParam(
                        "method", "Unknown method '" + std::string(name.substr(0, 64)) + "'."));
    }

    WsApiCall call;
    call.method = method;
    call.weight = method->weight;
    call.remote = conn->remote();
    // The endpoint's parameters, and the signature payload: every parameter
    // but the signature, sorted by name, k=v&k=v, unencoded.
    std::map<std::string_view, std::string> sorted;
    std::string query;
    for (const auto& kv : *params) {
      std::optional<std::string> value = ParamText(kv.value());
      if (!value) {
        return Refuse(conn, std::move(id_json), rate_limits,
                      ApiError::BadParam(kv.key(),
                                         "Expected a string, an integer or a boolean (decimals "
                                         "as strings)."));
      }
      if (!query.empty()) query += '&';
      FormEncode(kv.key(), &query);
      query += '=';
      FormEncode(*value, &query);
      if (kv.key() != "signature") sorted.emplace(kv.key(), std::move(*value));
    }
    if (auto e = Params::Parse(query, {}, &call.params)) {
      return Refuse(conn, std::move(id_json), rate_limits, std::move(*e));
    }
    std::string payload;
    for (const auto& [k, v] : sorted) {
      if (!payload.empty()) payload += '&';
      payload.append(k);
      payload += '=';
      payload += v;
    }

    const std::shared_ptr<Session> session = SessionOf(*conn);
    if (method->path.empty()) {
      if (auto e = SessionMethod(*method, call.params, payload, session, rate_limits, &call.body)) {
        call.error = std::move(*e);
      }
    } else if (method->is_signed) {
      if (auto e = Authenticate(call.params, payload, session, &call)) {
        call.error = std::move(*e);
      }
    }
    Answer(conn, std::move(id_json), rate_limits, std::move(call));
  }

  // The timestamp and recvWindow of a signed request (-1102, -1100, -1021, ...).
  std::optional<ApiError> CheckTime(const Params& params) const {
    std::optional<int64_t> ts;
    if (auto e = params.GetInt("timestamp", &ts)) return e;
    if (!ts) return ApiError::MandatoryMissing("timestamp");
    int64_t window_us = 0;
    if (auto e = ParseRecvWindow(params.Get("recvWindow"), &window_us)) return e;
    return CheckTimestampUs(*ts, window_us, clock_us_());
  }

  // A request signed by its own apiKey + signature: the key, or the error.
  std::variant<ApiKey, ApiError> VerifySigned(const Params& params,
                                              std::string_view payload) const {
    const std::optional<std::string_view> api_key = params.Get("apiKey");
    if (!api_key || api_key->empty()) return ApiError::MandatoryMissing("apiKey");
    const std::optional<std::string_view> signature = params.Get("signature");
    if (!signature || signature->empty()) return ApiError::MandatoryMissing("signature");
    std::optional<ApiKey> key = keys_.FindKey(*api_key);
    if (!key || key->revoked) return ApiError::RejectedApiKey();
    if (auto e = CheckTime(params)) return *e;
    if (!VerifySignature(*key, payload, *signature)) return ApiError::BadSignature();
    return std::move(*key);
  }

  // TRADE / USER_DATA: the request's own signature, else the session's key.
  std::optional<ApiError> Authenticate(const Params& params, std::string_view payload,
                                       const std::shared_ptr<Session>& session, WsApiCall* call) {
    if (!params.Has("signature")) {
      std::string key_name;
      {
        MutexLock lock(mu_);
        if (session) key_name = session->api_key;
      }
      if (key_name.empty()) {
        return params.Has("apiKey") ? ApiError::MandatoryMissing("signature")
                                    : ApiError::MandatoryMissing("apiKey");
      }
      // A key revoked since the logon stops working at once.
      const std::optional<ApiKey> key = keys_.FindKey(key_name);
      if (!key || key->revoked) return ApiError::RejectedApiKey();
      if (auto e = CheckTime(params)) return e;
      call->api_key = key->key;
      call->account = key->account;
      return std::nullopt;
    }
    auto verified = VerifySigned(params, payload);
    if (ApiError* e = std::get_if<ApiError>(&verified)) return std::move(*e);
    const ApiKey& key = std::get<ApiKey>(verified);
    call->api_key = key.key;
    call->account = key.account;
    return std::nullopt;
  }

  // session.logon / status / logout: the answer's body, or the error.
  std::optional<ApiError> SessionMethod(const WsApiMethod& method, const Params& params,
                                        std::string_view payload,
                                        const std::shared_ptr<Session>& session,
                                        bool return_rate_limits, std::string* body) {
    if (!session) return ApiError::Unknown("The connection is closing.");
    const int64_t now_ms = clock_us_() / 1'000;
    if (method.name == "session.logon") {
      auto verified = VerifySigned(params, payload);
      if (ApiError* e = std::get_if<ApiError>(&verified)) return std::move(*e);
      const ApiKey& key = std::get<ApiKey>(verified);
      if (!key.is_ed25519()) {
        return ApiError{400, -4056,
                        "HMAC_SHA256 API key is not supported. Only Ed25519 keys are supported."};
      }
      MutexLock lock(mu_);
      session->api_key = key.key;
      session->account = key.account;
      session->authorized_ms = now_ms;
    } else if (method.name == "session.logout") {
      MutexLock lock(mu_);
      session->api_key.clear();
      session->account = AccountId{};
      session->authorized_ms = 0;
    }
    json::object o;
    MutexLock lock(mu_);
    if (session->api_key.empty()) {
      o["apiKey"] = nullptr;
      o["authorizedSince"] = nullptr;
    } else {
      o["apiKey"] = session->api_key;
      o["authorizedSince"] = session->authorized_ms;
    }
    o["connectedSince"] = session->connected_ms;
    o["returnRateLimits"] = return_rate_limits;
    o["serverTime"] = now_ms;
    o["userDataStream"] = false;
    *body = json::serialize(o);
    return std::nullopt;
  }

  const KeyStore& keys_;
  WsApiBackend& backend_;
  WsHandler& streams_;
  const WsApiOptions options_;
  const std::function<int64_t()> clock_us_;
  Mutex mu_;
  // By connection id; a Session's fields are under mu_ too.
  std::unordered_map<uint64_t, std::shared_ptr<Session>> sessions_ MB_GUARDED_BY(mu_);
};

WsApi::WsApi(const KeyStore& keys, WsApiBackend& backend, WsHandler& streams, WsApiOptions options,
             std::function<int64_t()> clock_us)
    : impl_(std::make_unique<Impl>(keys, backend, streams, options, std::move(clock_us))) {}
WsApi::~WsApi() = default;

bool WsApi::Accepts(const Request& request) { return impl_->Accepts(request); }
void WsApi::OnOpen(const std::shared_ptr<WsConnection>& conn) { impl_->OnOpen(conn); }
void WsApi::OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) {
  impl_->OnMessage(conn, text);
}
void WsApi::OnClose(const std::shared_ptr<WsConnection>& conn) { impl_->OnClose(conn); }

}  // namespace mb::gateway
