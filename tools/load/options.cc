#include "load/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>

namespace mb::load {
namespace {

struct Preset {
  const char* name;
  int subscribers;
  double rate;
  double duration_s;
};

// coinflow: 001 document; snaptrade: 000 (one subscriber so delivery is
// measured); lighter: 002's freshness view; max: the first step of the search.
constexpr Preset kPresets[] = {
    {"coinflow", 50, 100, 300},
    {"snaptrade", 1, 10'000, 60},
    {"lighter", 1000, 50, 60},
    {"max", 1, 1'000, 60},
};

constexpr double kMaxRate = 1'000'000;
constexpr double kMaxDuration = 86'400;
constexpr int kMaxSubscribers = 20'000;

// tls: null refuses https://; else set to whether the target is https://.
Status ParseTarget(const std::string& target, std::string_view flag, std::string* out_host,
                   uint16_t* out_port, bool* tls = nullptr) {
  std::string_view scheme = "http://";
  std::string_view t = target;
  if (tls != nullptr && t.starts_with("https://")) scheme = "https://";
  if (tls != nullptr) *tls = scheme == "https://";
  if (t.substr(0, scheme.size()) != scheme)
    return InvalidArgument(std::string(flag) + ": '" + target + "' is not http://host:port");
  t.remove_prefix(scheme.size());
  while (!t.empty() && t.back() == '/') t.remove_suffix(1);
  const std::size_t colon = t.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == t.size())
    return InvalidArgument(std::string(flag) + ": '" + target + "' is not http://host:port");
  std::string_view host = t.substr(0, colon);
  std::string_view port = t.substr(colon + 1);
  if (host.find('/') != std::string_view::npos)
    return InvalidArgument(std::string(flag) + ": '" + target +
                           "' is not http://host:port (no path)");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc{} || end != port.data() + port.size() || p == 0 || p > 65535)
    return InvalidArgument(std::string(flag) + ": port '" + std::string(port) +
                           "' is not 1..65535");
  *out_host = std::string(host);
  *out_port = static_cast<uint16_t>(p);
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Preset& p : kPresets) n.emplace_back(p.name);
    return n;
  }();
  return names;
}

const char* RespTypeName(RespType t) {
  switch (t) {
    case RespType::kAck:
      return "ACK";
    case RespType::kResult:
      return "RESULT";
    case RespType::kFull:
      return "FULL";
  }
  return "RESULT";
}

Result<Options> ParseOptions(int argc, char** argv) {
  Options o;
  CLI::App app{
      "matchbook-load: an open-loop load generator for matchbook serve (constant arrival rate; "
      "latency from the intended send time)",
      "matchbook-load"};
  std::string resp = "RESULT";
  std::string transport = "http";
  std::string ws_auth = "hmac";
  double duration = 0, rate = 0;
  int subscribers = 0;
  app.add_option("--target", o.target, "the server, http://host:port or https://host:port")
      ->required();
  app.add_option("--ca", o.ca_file,
                 "CA file (PEM) that checks an https:// target's certificate (default: the "
                 "system's CAs)");
  app.add_option("--admin-token", o.admin_token, "operator API token (<data_dir>/admin.token)");
  app.add_option("--preset", o.preset, "coinflow | snaptrade | lighter | max")->required();
  auto* duration_opt = app.add_option("--duration", duration, "seconds (overrides the preset)");
  auto* rate_opt = app.add_option("--rate", rate, "orders/s (max: the first step's rate)");
  auto* subs_opt = app.add_option("--subscribers", subscribers, "WebSocket subscribers");
  app.add_option("--subscribe-to", o.subscribe_to,
                 "where the subscribers connect, http://host:port or https://host:port (a "
                 "replica; default: --target)");
  app.add_option("--history-readers", o.history_readers,
                 "connections asking allOrders/myTrades in a loop (default 0)");
  app.add_option("--accounts", o.accounts, "synthetic accounts (default 64)");
  app.add_option("--connections", o.connections, "HTTP keep-alive connections (default 64)");
  app.add_option("--threads", o.threads, "io threads (default 1)");
  app.add_option("--symbol", o.symbol, "market (default: the first TRADING one)");
  app.add_option("--seed", o.seed, "random seed (default 1)");
  app.add_option("--out-dir", o.out_dir, "writes load-<preset>.json and load-<preset>.svg");
  app.add_option("--marketable-share", o.marketable_share, "share of orders that trade (0.2)");
  app.add_option("--cancel-share", o.cancel_share, "share of cancels (0.2)");
  app.add_option("--amend-share", o.amend_share, "share of amends (0.05)");
  app.add_option("--stop-share", o.stop_share,
                 "of the resting orders, the share placed as waiting STOP_LOSS_LIMIT orders (0)");
  app.add_option("--iceberg-share", o.iceberg_share,
                 "of the resting orders, the share placed as icebergs (icebergQty = half) (0)");
  app.add_option("--resp-type", resp, "newOrderRespType: ACK | RESULT | FULL (RESULT)");
  app.add_option("--transport", transport,
                 "orders over http (REST) or ws-api (the WebSocket API, /ws-api/v3) (http)");
  app.add_option("--ws-auth", ws_auth,
                 "ws-api: hmac (each request signed) or session (session.logon, Ed25519) (hmac)");
  app.add_option("--max-p99-ms", o.max_p99_ms, "max: the p99 a step must stay under (5)");
  app.add_flag("--json", o.json, "print one JSON object on the last line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return NotFound("help");
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }

  const auto* preset = std::find_if(std::begin(kPresets), std::end(kPresets),
                                    [&](const Preset& p) { return o.preset == p.name; });
  if (preset == std::end(kPresets))
    return InvalidArgument("--preset: unknown preset '" + o.preset +
                           "' (coinflow, snaptrade, lighter, max)");
  MB_RETURN_IF_ERROR(ParseTarget(o.target, "--target", &o.host, &o.port, &o.tls));
  o.sub_host = o.host;
  o.sub_port = o.port;
  o.sub_tls = o.tls;
  if (!o.subscribe_to.empty()) {
    MB_RETURN_IF_ERROR(
        ParseTarget(o.subscribe_to, "--subscribe-to", &o.sub_host, &o.sub_port, &o.sub_tls));
  }
  if (o.admin_token.empty())
    return InvalidArgument("--admin-token: missing (the operator API token)");
  o.duration_s = duration_opt->count() ? duration : preset->duration_s;
  o.rate = rate_opt->count() ? rate : preset->rate;
  o.subscribers = subs_opt->count() ? subscribers : preset->subscribers;
  if (!std::isfinite(o.duration_s) || o.duration_s <= 0 || o.duration_s > kMaxDuration)
    return InvalidArgument("--duration: must be > 0 and at most 86400 seconds");
  if (!std::isfinite(o.rate) || o.rate <= 0 || o.rate > kMaxRate)
    return InvalidArgument("--rate: must be > 0 and at most 1000000 orders/s");
  if (o.subscribers < 0 || o.subscribers > kMaxSubscribers)
    return InvalidArgument("--subscribers: must be 0..20000");
  if (o.history_readers < 0 || o.history_readers > 1000)
    return InvalidArgument("--history-readers: must be 0..1000");
  if (o.accounts < 1 || o.accounts > 10'000) return InvalidArgument("--accounts: must be 1..10000");
  if (o.connections < 1 || o.connections > 10'000)
    return InvalidArgument("--connections: must be 1..10000");
  if (o.threads < 1 || o.threads > 64) return InvalidArgument("--threads: must be 1..64");
  for (auto [name, v] :
       {std::pair{"--marketable-share", o.marketable_share},
        std::pair{"--cancel-share", o.cancel_share}, std::pair{"--amend-share", o.amend_share},
        std::pair{"--stop-share", o.stop_share}, std::pair{"--iceberg-share", o.iceberg_share}}) {
    if (!(v >= 0 && v <= 1)) return InvalidArgument(std::string(name) + ": must be 0..1");
  }
  if (o.marketable_share + o.cancel_share + o.amend_share > 1)
    return InvalidArgument("--marketable-share + --cancel-share + --amend-share: must be <= 1");
  if (!(o.max_p99_ms > 0)) return InvalidArgument("--max-p99-ms: must be > 0");
  if (resp == "ACK") {
    o.resp_type = RespType::kAck;
  } else if (resp == "RESULT") {
    o.resp_type = RespType::kResult;
  } else if (resp == "FULL") {
    o.resp_type = RespType::kFull;
  } else {
    return InvalidArgument("--resp-type: '" + resp + "' is not ACK, RESULT or FULL");
  }
  if (transport == "http") {
    o.transport = Transport::kHttp;
  } else if (transport == "ws-api") {
    o.transport = Transport::kWsApi;
  } else {
    return InvalidArgument("--transport: '" + transport + "' is not http or ws-api");
  }
  if (ws_auth == "hmac") {
    o.ws_auth = WsAuth::kHmac;
  } else if (ws_auth == "session") {
    if (o.transport != Transport::kWsApi)
      return InvalidArgument("--ws-auth: session needs --transport ws-api");
    o.ws_auth = WsAuth::kSession;
  } else {
    return InvalidArgument("--ws-auth: '" + ws_auth + "' is not hmac or session");
  }
  return o;
}

}  // namespace mb::load
