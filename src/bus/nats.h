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
#include <string>
#include <string_view>
#include <vector>

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
// connect and every JetStream call.
Result<std::unique_ptr<NatsConnection>> ConnectNats(const std::vector<std::string>& servers,
                                                    const std::string& name,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds retry);

// "<what>: <status text> (<library detail>) [JetStream error <code>]".
std::string NatsError(std::string_view what, natsStatus s, int code);

struct StreamSpec {
  std::string name;
  std::string subject;  // the one subject (or wildcard) it takes
  std::string description;
  int replicas = 1;
  int64_t max_bytes = -1;
  int64_t max_age_ns = 0;
  int64_t duplicates_ns = 0;
};

// Creates the stream when missing (returns true then); a stream whose
// description differs (another venue or configuration) or that does not
// take the subject is refused (kInvalidArgument).
Result<bool> EnsureStream(jsCtx* js, const StreamSpec& spec);

}  // namespace mb::bus
