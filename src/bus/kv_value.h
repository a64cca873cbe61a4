// One value replicated through a NATS JetStream key-value bucket: what a
// primary keeps outside its journal and its standby must have the moment it
// takes over (the key store: accounts and API keys, revocations included).
//
//   Put       the whole value; answered once the bucket's stream has stored
//             it (with replicas = 3: once a quorum holds it)
//   Get       the newest value and its revision (nullopt: never written)
//
// The bucket ("MATCHBOOK_<venue>_<name>") keeps one revision per key and no
// TTL; it is created on first use.
//
// Thread safety: one thread at a time (the owner's calls are serialised by
// an internal mutex, so io threads may Put).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace mb::bus {

struct KvValueOptions {
  std::vector<std::string> servers;
  std::string bucket;  // e.g. "MATCHBOOK_<venue>_AUTH"
  std::string key;
  int replicas = 1;
  std::chrono::milliseconds timeout{2000};
};

class KvValue {
 public:
  explicit KvValue(KvValueOptions options);
  ~KvValue();
  KvValue(const KvValue&) = delete;
  KvValue& operator=(const KvValue&) = delete;

  // Connects and creates the bucket when missing.
  Status Connect();
  // Stores `value`; its revision once the bucket holds it.
  Result<uint64_t> Put(std::string_view value);
  // The newest value and its revision; nullopt when the key was never written.
  Result<std::optional<std::pair<std::string, uint64_t>>> Get();

 private:
  struct Bucket;
  const KvValueOptions options_;
  Mutex mu_;
  std::unique_ptr<Bucket> bucket_ MB_GUARDED_BY(mu_);
};

}  // namespace mb::bus
