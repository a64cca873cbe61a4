// The NATS C client (libnats) as the bus module uses it: a connection with
// its JetStream context, errors as text, a stream made sure of. Internal to
// src/bus: the module's public headers keep nats.h out.
//
// Thread safety: a NatsConnection is used by one thread at a time (the
// library's own threads do the I/O).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/nats_security.h"
#include "common/status.h"

namespace mb::bus {

struct NatsConnection {
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  NatsConnection() = default;
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;
  ~NatsConnection();
};

// Connects to the first server of the list that answers (the client
// reconnects on its own afterwards, every `retry`); `timeout` bounds the
// connect and every JetStream call. `security`: TLS and the credential
// (nats_security.h); a refusal by the server names the [bus] keys to check.
Result<std::unique_ptr<NatsConnection>> ConnectNats(const std::vector<std::string>& servers,
                                                    const std::string& name,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds retry,
                                                    const NatsSecurity& security);

// The public nkey ("U...") of a user nkey seed ("SU..."); an error says
// why the seed is not one.
Result<std::string> NkeyPublicFromSeed(std::string_view seed);

// "<what>: <status text> (<library detail>) [JetStream error <code>]".
std::string NatsError(std::string_view what, natsStatus s, int code);

// A whole decimal number (message ids, manifest fields).
bool ParseU64(std::string_view s, uint64_t* out);

// One message published and its acknowledgement awaited (js_PublishMsg).
struct Published {
  natsStatus status = NATS_OK;
  int code = 0;            // the JetStream error, if any
  uint64_t stored = 0;     // the stream sequence it has
  bool duplicate = false;  // the server had a message with its id already
};
Published PublishMessage(jsCtx* js, const std::string& subject, std::span<const std::byte> data,
                         const jsPubOptions& options, const char* header_key = nullptr,
                         const char* header_value = nullptr);

struct StreamSpec {
  std::string name;
  std::string subject;  // the one subject (or wildcard) it takes
  std::string description;
  int replicas = 1;
  // An existing stream with more replicas than `replicas` keeps them.
  bool keep_more_replicas = false;
  int64_t max_bytes = -1;
  int64_t max_age_ns = 0;
  int64_t duplicates_ns = 0;
};

struct StreamState {
  bool created = false;   // it was missing and is new
  uint64_t last_seq = 0;  // of the stream's last message, even one since removed (0: none ever)
  uint64_t messages = 0;  // messages it holds now
  std::string change;     // its limits or replicas updated to the spec's, or why not ("": same)
};

// Creates the stream when missing, or updates an existing one's replicas,
// max bytes and max age to the spec's; a stream whose description differs
// (another venue or configuration) or that takes any subject but
// spec.subject is refused (kInvalidArgument): publishing conditions on the
// stream's last message, which only this publisher may write.
Result<StreamState> EnsureStream(jsCtx* js, const StreamSpec& spec);

}  // namespace mb::bus
