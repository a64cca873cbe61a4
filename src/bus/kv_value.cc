#include "bus/kv_value.h"

#include <fmt/format.h>

#include "bus/nats.h"

namespace mb::bus {

struct KvValue::Bucket {
  std::unique_ptr<NatsConnection> conn;
  kvStore* kv = nullptr;
  ~Bucket() {
    if (kv != nullptr) kvStore_Destroy(kv);
  }
};

KvValue::KvValue(KvValueOptions options) : options_(std::move(options)) {}
KvValue::~KvValue() = default;

Status KvValue::Connect() {
  MutexLock lock(mu_);
  if (bucket_) return Status::Ok();
  auto conn = ConnectNats(options_.servers, fmt::format("matchbook {}", options_.bucket),
                          options_.timeout, std::chrono::milliseconds(500));
  if (!conn.ok()) return conn.status();
  auto b = std::make_unique<Bucket>();
  b->conn = std::move(conn).value();
  natsStatus s = js_KeyValue(&b->kv, b->conn->js, options_.bucket.c_str());
  if (s == NATS_NOT_FOUND) {
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = options_.bucket.c_str();
    cfg.History = 1;
    cfg.StorageType = js_FileStorage;
    cfg.Replicas = options_.replicas;
    b->kv = nullptr;
    s = js_CreateKeyValue(&b->kv, b->conn->js, &cfg);
    if (s != NATS_OK) {
      // Created by another process meanwhile: bind it.
      b->kv = nullptr;
      s = js_KeyValue(&b->kv, b->conn->js, options_.bucket.c_str());
    }
  }
  if (s != NATS_OK) {
    b->kv = nullptr;
    return Unavailable(NatsError(fmt::format("key-value bucket {}", options_.bucket), s, 0));
  }
  bucket_ = std::move(b);
  return Status::Ok();
}

Result<uint64_t> KvValue::Put(std::string_view value) {
  MB_RETURN_IF_ERROR(Connect());
  MutexLock lock(mu_);
  uint64_t rev = 0;
  const natsStatus s = kvStore_Put(&rev, bucket_->kv, options_.key.c_str(), value.data(),
                                   static_cast<int>(value.size()));
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("storing {} in bucket {}", options_.key, options_.bucket), s, 0));
  }
  return rev;
}

Result<std::optional<std::pair<std::string, uint64_t>>> KvValue::Get() {
  MB_RETURN_IF_ERROR(Connect());
  MutexLock lock(mu_);
  kvEntry* e = nullptr;
  const natsStatus s = kvStore_Get(&e, bucket_->kv, options_.key.c_str());
  if (s == NATS_NOT_FOUND) return std::optional<std::pair<std::string, uint64_t>>();
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("reading {} from bucket {}", options_.key, options_.bucket), s, 0));
  }
  std::pair<std::string, uint64_t> out(std::string(static_cast<const char*>(kvEntry_Value(e)),
                                                   static_cast<std::size_t>(kvEntry_ValueLen(e))),
                                       kvEntry_Revision(e));
  kvEntry_Destroy(e);
  return std::optional<std::pair<std::string, uint64_t>>(std::move(out));
}

}  // namespace mb::bus
