// The operator's accounts and API keys as the engine records them
// (AuthChange / AuthChanged): the part of the engine's state a snapshot
// carries so that a key store rebuilt after retention, or on a standby, is the
// one the operator made. The engine only checks and records; the gateway makes
// the keys and serves them (gateway/auth.h KeyStore).
//
// Thread safety: none (the engine thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/image.h"

namespace mb::engine::internal {

class AuthRegistry {
 public:
  explicit AuthRegistry(uint32_t max_accounts) : max_accounts_(max_accounts) {}

  // Whether `c` may take effect: kNone and *out filled (the new account's
  // id for kCreateAccount), or why not.
  RejectReason Check(const AuthChange& c, AuthChanged* out) const;
  // REQUIRES: `e` passed Check (in the order it was emitted).
  void Apply(const AuthChanged& e);

  void Export(EngineImage* image) const;
  // Loads an image's accounts and keys. Error: ids not 1, 2, ..., a name or
  // key twice, a key of no account.
  Status Load(const EngineImage& image);

 private:
  uint32_t max_accounts_;
  std::vector<ImageAccount> accounts_;  // accounts_[i].id == i + 1
  std::unordered_set<std::string> names_;
  std::vector<ImageApiKey> keys_;                     // creation order
  std::unordered_map<std::string, std::size_t> key_;  // key -> index in keys_
  std::unordered_set<std::string> public_keys_;       // Ed25519 keys' secret field
};

}  // namespace mb::engine::internal
