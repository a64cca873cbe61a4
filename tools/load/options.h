// Command line of matchbook-load: the presets (the background documents'
// scenarios) and every override, checked before anything touches the network.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace mb::load {

enum class RespType : uint8_t { kAck, kResult, kFull };
// How orders travel: signed REST requests, or the WebSocket API (/ws-api/v3:
// one connection per load connection, each request HMAC-signed).
enum class Transport : uint8_t { kHttp, kWsApi };
// How ws-api requests authenticate: each signed with HMAC, or the connection
// logged on once (session.logon with an Ed25519 key; one account per
// connection) and requests unsigned.
enum class WsAuth : uint8_t { kHmac, kSession };

struct Options {
  std::string target;  // http://host:port or https://host:port as given
  std::string host;
  uint16_t port = 0;
  bool tls = false;     // https://: every connection to the target over TLS
  std::string ca_file;  // checks an https:// target's certificate ("": the system's CAs)
  std::string admin_token;
  // Where the WebSocket subscribers connect (a replica); empty: the target.
  std::string subscribe_to;
  std::string sub_host;
  uint16_t sub_port = 0;
  bool sub_tls = false;  // the subscribers' target is https:// (wss)
  std::string preset;
  double duration_s = 0;
  double rate = 0;  // orders/s; for `max`, the first step's rate
  int subscribers = 0;
  // Connections asking for order and trade history (allOrders, myTrades) in a
  // closed loop beside the order flow: the API's history readers.
  int history_readers = 0;
  int accounts = 64;
  int connections = 64;  // HTTP keep-alive (or ws-api) connections, one request in flight each
  Transport transport = Transport::kHttp;
  WsAuth ws_auth = WsAuth::kHmac;
  int threads = 1;     // io threads
  std::string symbol;  // empty: the first TRADING market
  uint64_t seed = 1;
  std::string out_dir;  // empty: no files
  double marketable_share = 0.2;
  double cancel_share = 0.2;
  double amend_share = 0.05;
  // Of the resting limit orders: the share placed as STOP_LOSS_LIMIT orders
  // waiting beyond the marketable reach (at most kMaxStopsPerAccount per
  // account, under exchangeInfo's MAX_NUM_ALGO_ORDERS), and the share placed
  // as icebergs showing half their quantity.
  double stop_share = 0;
  double iceberg_share = 0;
  RespType resp_type = RespType::kResult;
  bool json = false;
  // `max`: the order p99 a step must stay under.
  double max_p99_ms = 5.0;
};

// The preset names, in the order the help lists them.
const std::vector<std::string>& PresetNames();

// Parses argv. On a bad argument: InvalidArgument naming it (exit 2). --help
// prints the usage and returns NotFound (exit 0).
Result<Options> ParseOptions(int argc, char** argv);

const char* RespTypeName(RespType t);

}  // namespace mb::load
