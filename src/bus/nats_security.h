// How a process proves itself to NATS and checks the server: TLS (the
// server's CA, a client certificate for mutual TLS) and one kind of
// credential. Every connection the bus module makes (publisher, follower,
// snapshots, lease) takes the same settings, from [bus] (docs/security.md).
//
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace mb::bus {

struct NatsSecurity {
  // TLS: a tls:// server URL or any of these files turns it on. The CA
  // checks the server's certificate (without one, the system's CAs do);
  // cert + key: this client's certificate for a server that asks for one.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // At most one credential: a NATS .creds file (a user JWT and its nkey
  // seed), an nkey seed file, a user with a password file, or a token file.
  std::string creds_file;
  std::string nkey_seed_file;
  std::string user;
  std::string password_file;
  std::string token_file;

  bool tls() const noexcept {
    return !tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty();
  }
};

// Each named file readable, the certificate with its key, at most one
// credential, a user with its password file: an error names the [bus] key.
Status CheckNatsSecurity(const NatsSecurity& security);

// Connects once to see the server take the credential and TLS settings: an
// error (kInvalidArgument, naming the [bus] keys) when it refuses them; Ok
// when it takes them or cannot be reached (NATS down is lag, not a refusal).
Status CheckNatsCredentials(const std::vector<std::string>& servers, const NatsSecurity& security,
                            std::chrono::milliseconds timeout);

}  // namespace mb::bus
