#include "bus/lease.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "bus/nats.h"
#include "bus/publisher.h"
#include "common/clock.h"
#include "concurrency/thread.h"

namespace mb::bus {

namespace {

constexpr int64_t kNsPerMs = 1'000'000;

int64_t Ns(std::chrono::milliseconds ms) { return static_cast<int64_t>(ms.count()) * kNsPerMs; }

// A key as the KV store takes it (the NATS client's own rule): letters,
// digits, '_', '-', '/', '=' and dots that do not begin, end or double.
bool ValidKey(std::string_view key) {
  if (key.empty() || key.front() == '.' || key.back() == '.') return false;
  char prev = 0;
  for (const char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '/' || c == '=' || (c == '.' && prev != '.');
    if (!ok) return false;
    prev = c;
  }
  return true;
}

// The renewal period: renew_every, or a quarter of the TTL when it is 0.
int64_t RenewNs(const LeaseOptions& o) {
  return o.renew_every.count() > 0 ? Ns(o.renew_every) : Ns(o.ttl) / 4;
}

}  // namespace

std::string DefaultLeaseBucket(std::string_view venue) {
  return fmt::format("MATCHBOOK_{}_LEADER", venue);
}

struct Lease::Bucket {
  std::unique_ptr<NatsConnection> conn;
  kvStore* kv = nullptr;
  Bucket() = default;
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;
  ~Bucket() {
    if (kv != nullptr) kvStore_Destroy(kv);
  }
};

struct Lease::Entry {
  natsStatus status = NATS_OK;  // NATS_OK: found; NATS_NOT_FOUND: absent; else the error
  std::string error;            // when the key could not be read
  std::string value;
  uint64_t revision = 0;
  bool found() const { return status == NATS_OK; }
};

Lease::Lease(LeaseOptions options)
    : options_(std::move(options)),
      bucket_(options_.bucket.empty() ? DefaultLeaseBucket(options_.venue) : options_.bucket),
      ttl_ns_(Ns(options_.ttl)),
      margin_ns_(Ns(options_.ttl) / 10),
      renew_ns_(RenewNs(options_)),
      retry_ns_(
          std::max<int64_t>(10 * kNsPerMs, std::min(RenewNs(options_), Ns(options_.ttl) / 10))) {}

Lease::~Lease() { Stop(); }

void Lease::Log(std::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "lease: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

Status Lease::Connect() {
  if (nats_ != nullptr) return Status::Ok();
  if (options_.holder.empty()) {
    return InvalidArgument(
        "lease holder is empty: it must name this process (e.g. \"host:8080 pid 123\")");
  }
  if (options_.servers.empty()) return InvalidArgument("lease: no NATS server given");
  if (options_.bucket.empty()) MB_RETURN_IF_ERROR(CheckVenue(options_.venue));
  if (options_.ttl < std::chrono::milliseconds(100)) {
    return InvalidArgument(
        fmt::format("lease ttl {} ms: it must be at least 100 ms", options_.ttl.count()));
  }
  if (renew_ns_ >= ttl_ns_ - margin_ns_) {
    return InvalidArgument(fmt::format(
        "lease renew_every {} ms must be shorter than ttl - ttl/10 = {} ms (renewals must land "
        "before the deadline)",
        renew_ns_ / kNsPerMs, (ttl_ns_ - margin_ns_) / kNsPerMs));
  }
  if (!ValidKey(options_.key)) {
    return InvalidArgument(fmt::format(
        "lease key \"{}\": letters, digits and any of _-/=. (no leading, trailing or double dot)",
        options_.key));
  }
  if (options_.timeout.count() <= 0) return InvalidArgument("lease timeout must be positive");
  if (options_.replicas < 1) return InvalidArgument("lease replicas must be at least 1");

  auto conn = ConnectNats(options_.servers, fmt::format("matchbook lease ({})", options_.holder),
                          options_.timeout, std::chrono::milliseconds(retry_ns_ / kNsPerMs),
                          options_.security);
  if (!conn.ok()) return conn.status();
  auto b = std::make_unique<Bucket>();
  b->conn = std::move(conn).value();
  jsCtx* js = b->conn->js;

  natsStatus s = js_KeyValue(&b->kv, js, bucket_.c_str());
  bool created = false;
  if (s == NATS_NOT_FOUND) {
    const std::string description =
        fmt::format("matchbook leader lease of venue {}", options_.venue);
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = bucket_.c_str();
    cfg.Description = description.c_str();
    cfg.History = 1;
    cfg.TTL = ttl_ns_;
    cfg.StorageType = js_FileStorage;
    cfg.Replicas = options_.replicas;
    b->kv = nullptr;
    s = js_CreateKeyValue(&b->kv, js, &cfg);
    created = s == NATS_OK;
    if (!created) {
      // Another process may have created it at the same moment, with other
      // settings: bind it, and let the TTL check below speak.
      const std::string error =
          NatsError(fmt::format("cannot create lease bucket {}", bucket_), s, 0);
      b->kv = nullptr;
      if (js_KeyValue(&b->kv, js, bucket_.c_str()) != NATS_OK) {
        b->kv = nullptr;
        return Unavailable(error);
      }
    }
  } else if (s == NATS_INVALID_ARG) {
    return InvalidArgument(NatsError(fmt::format("lease bucket \"{}\"", bucket_), s, 0));
  } else if (s != NATS_OK) {
    return Unavailable(NatsError(fmt::format("lease bucket {}", bucket_), s, 0));
  }

  kvStatus* st = nullptr;
  s = kvStore_Status(&st, b->kv);
  if (s != NATS_OK) {
    return Unavailable(NatsError(fmt::format("lease bucket {}: status", bucket_), s, 0));
  }
  const int64_t their_ttl = kvStatus_TTL(st);
  const int64_t their_replicas = kvStatus_Replicas(st);
  kvStatus_Destroy(st);
  if (their_ttl != ttl_ns_) {
    return InvalidArgument(fmt::format(
        "lease bucket {} expires keys after {} ms but this lease's ttl is {} ms: every process "
        "sharing the lease must use the same ttl (or remove the bucket so that it is made again)",
        bucket_, their_ttl / kNsPerMs, options_.ttl.count()));
  }
  if (!created && their_replicas != options_.replicas) {
    Log(fmt::format("lease bucket {} has {} replica(s), the configuration asks {}: kept as it is",
                    bucket_, their_replicas, options_.replicas));
  }
  Log(fmt::format("lease bucket {} {} (ttl {} ms, renewing every {} ms), key {}, holder \"{}\"",
                  bucket_, created ? "created" : "bound", options_.ttl.count(),
                  renew_ns_ / kNsPerMs, options_.key, options_.holder));
  nats_ = std::move(b);
  return Status::Ok();
}

bool Lease::Connected() const {
  return natsConnection_Status(nats_->conn->conn) == NATS_CONN_STATUS_CONNECTED;
}

Status Lease::Disconnected(std::string_view what) const {
  return Unavailable(
      fmt::format("cannot {} lease {}/{}: NATS is disconnected", what, bucket_, options_.key));
}

Lease::Entry Lease::Read() {
  Entry e;
  kvEntry* entry = nullptr;
  e.status = kvStore_Get(&entry, nats_->kv, options_.key.c_str());
  if (e.status == NATS_OK) {
    e.value.assign(static_cast<const char*>(kvEntry_Value(entry)),
                   static_cast<std::size_t>(kvEntry_ValueLen(entry)));
    e.revision = kvEntry_Revision(entry);
    kvEntry_Destroy(entry);
    SetHolder(e.value);
  } else if (e.status == NATS_NOT_FOUND) {
    SetHolder("");
  } else {
    e.error = NatsError(fmt::format("cannot read lease {}/{}", bucket_, options_.key), e.status, 0);
  }
  return e;
}

void Lease::SetHolder(std::string_view holder) {
  MutexLock lock(mu_);
  stats_.holder = holder;
}

void Lease::Held(uint64_t revision, int64_t sent_ns) {
  revision_ = revision;
  sent_ns_ = sent_ns;
  // Invariant 1: the sent time of a write that succeeded, less the margin.
  deadline_ns_.store(sent_ns + ttl_ns_ - margin_ns_, std::memory_order_relaxed);
  MutexLock lock(mu_);
  stats_.holder = options_.holder;
  stats_.revision = revision;
}

std::string Lease::LostReason(const Entry& e) const {
  if (!e.found()) {
    return fmt::format(
        "lease {}/{} lost: revision {} is gone (the key expired: no renewal reached NATS within "
        "the ttl of {} ms)",
        bucket_, options_.key, revision_, options_.ttl.count());
  }
  if (e.value.empty()) {
    return fmt::format("lease {}/{} lost: its revision moved from {} to {}, which released it",
                       bucket_, options_.key, revision_, e.revision);
  }
  return fmt::format("lease {}/{} lost: its revision moved from {} to {}, held by \"{}\"", bucket_,
                     options_.key, revision_, e.revision, e.value);
}

Status Lease::TakeFree(uint64_t last) {
  const int64_t sent = SteadyNs();
  uint64_t rev = 0;
  const natsStatus s =
      kvStore_UpdateString(&rev, nats_->kv, options_.key.c_str(), options_.holder.c_str(), last);
  if (s != NATS_OK) {
    const Entry now = Read();
    if (now.found() && !now.value.empty() && now.value != options_.holder) {
      return Unavailable(fmt::format("lease {}/{} is held by \"{}\" (revision {})", bucket_,
                                     options_.key, now.value, now.revision));
    }
    return Unavailable(NatsError(
        fmt::format("cannot take lease {}/{} at revision {}", bucket_, options_.key, last), s, 0));
  }
  Taken(rev, sent);
  return Status::Ok();
}

void Lease::Taken(uint64_t revision, int64_t sent_ns) {
  Held(revision, sent_ns);
  {
    MutexLock lock(mu_);
    ++stats_.acquisitions;
  }
  Log(fmt::format("lease {}/{} taken by \"{}\" at revision {}", bucket_, options_.key,
                  options_.holder, revision));
}

Status Lease::TryAcquire() {
  MB_RETURN_IF_ERROR(Connect());
  // A request made while the client reconnects would wait in its buffer
  // and could still reach the server after its caller gave up on it.
  if (!Connected()) return Disconnected("take");
  MutexLock call(call_mu_);
  const int64_t sent = SteadyNs();
  uint64_t rev = 0;
  const natsStatus s =
      kvStore_CreateString(&rev, nats_->kv, options_.key.c_str(), options_.holder.c_str());
  if (s == NATS_OK) {
    Taken(rev, sent);
    return Status::Ok();
  }
  const std::string create_error =
      NatsError(fmt::format("cannot take lease {}/{}", bucket_, options_.key), s, 0);
  // The create was refused (or not answered): the key says why.
  const Entry e = Read();
  if (e.status == NATS_NOT_FOUND) return Unavailable(create_error);
  if (!e.found()) return Unavailable(e.error);
  if (e.value == options_.holder) {
    // Ours already, renewed by mb-lease and still before the deadline.
    if (e.revision == revision_ && Valid()) return Status::Ok();
    // Our own write we did not see succeed (a timed-out take or renewal):
    // taken again on its revision, which starts a deadline we know.
    return TakeFree(e.revision);
  }
  if (e.value.empty()) return TakeFree(e.revision);  // released
  return Unavailable(fmt::format("lease {}/{} is held by \"{}\" (revision {})", bucket_,
                                 options_.key, e.value, e.revision));
}

Status Lease::Acquire(std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  const auto step = std::chrono::nanoseconds(std::max<int64_t>(ttl_ns_ / 8, kNsPerMs));
  for (;;) {
    Status st = TryAcquire();
    if (st.ok() || st.code() != StatusCode::kUnavailable) return st;
    if (std::chrono::steady_clock::now() + step > end) return st;
    std::this_thread::sleep_for(step);
  }
}

Result<std::string> Lease::CurrentHolder() {
  if (Status st = Connect(); !st.ok()) return st;
  if (!Connected()) return Disconnected("read");
  MutexLock call(call_mu_);
  Entry e = Read();
  if (e.status == NATS_NOT_FOUND) return std::string();
  if (!e.found()) return Unavailable(e.error);
  return std::move(e.value);
}

bool Lease::Valid() const noexcept {
  // Invariant 2: a single word; relaxed is enough.
  return SteadyNs() < deadline_ns_.load(std::memory_order_relaxed);
}

void Lease::RenewFailed(const std::string& error) {
  bool log = false;
  {
    MutexLock lock(mu_);
    ++stats_.renew_failures;
    stats_.last_error = error;
    log = error != last_logged_;
    last_logged_ = error;
  }
  if (log) Log(error);
}

Lease::Round Lease::Renew(std::string* reason, int64_t* next_ns) {
  MutexLock call(call_mu_);
  const int64_t now = SteadyNs();
  const int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
  if (deadline == 0) {
    *reason = fmt::format("lease {}/{} lost: not held", bucket_, options_.key);
    return Round::kLost;
  }
  if (now >= deadline) {
    // Past the deadline the lease is lost whatever the key says now; the key
    // only tells why. A connection that is down is not asked.
    std::string detail;
    {
      MutexLock lock(mu_);
      detail = stats_.last_error;
    }
    Entry e;
    if (Connected()) {
      e = Read();
    } else {
      e.status = NATS_CONNECTION_DISCONNECTED;
      e.error = "NATS is disconnected";
    }
    if (e.status == NATS_NOT_FOUND || (e.found() && e.revision != revision_)) {
      *reason = LostReason(e);
    } else {
      if (detail.empty())
        detail = e.found() ? fmt::format("the key is still at revision {}", e.revision) : e.error;
      *reason = fmt::format(
          "lease {}/{} lost: no renewal succeeded before the local deadline ({} ms after the last "
          "one was sent); {}",
          bucket_, options_.key, (deadline - sent_ns_) / kNsPerMs, detail);
    }
    deadline_ns_.store(0, std::memory_order_relaxed);
    return Round::kLost;
  }
  if (!Connected()) {
    RenewFailed(Disconnected("renew").message());
    *next_ns = SteadyNs() + retry_ns_;
    return Round::kRetry;
  }
  uint64_t rev = 0;
  const natsStatus s = kvStore_UpdateString(&rev, nats_->kv, options_.key.c_str(),
                                            options_.holder.c_str(), revision_);
  if (s == NATS_OK) {
    Held(rev, now);
    std::string recovered;
    {
      MutexLock lock(mu_);
      ++stats_.renewals;
      if (!stats_.last_error.empty()) {
        recovered =
            fmt::format("lease {}/{} renewed again at revision {}", bucket_, options_.key, rev);
      }
      stats_.last_error.clear();
      last_logged_.clear();
    }
    if (!recovered.empty()) Log(recovered);
    *next_ns = now + renew_ns_;
    return Round::kRenewed;
  }
  const std::string error = NatsError(
      fmt::format("cannot renew lease {}/{} at revision {}", bucket_, options_.key, revision_), s,
      0);
  const Entry e = Read();
  if (e.found() && e.value == options_.holder && e.revision != revision_) {
    // The update went through although its answer did not arrive: carry on
    // from its revision. The deadline stays that of the last write whose
    // success we saw (this one reached the server later than it was sent).
    revision_ = e.revision;
    RenewFailed(error);
    *next_ns = SteadyNs();
    return Round::kRetry;
  }
  if (e.status == NATS_NOT_FOUND || (e.found() && e.revision != revision_)) {
    *reason = LostReason(e);
    deadline_ns_.store(0, std::memory_order_relaxed);
    return Round::kLost;
  }
  // The key is still ours at our revision, or cannot be read: try again
  // soon, until the deadline.
  RenewFailed(error);
  *next_ns = SteadyNs() + retry_ns_;
  return Round::kRetry;
}

void Lease::Run() {
  concurrency::StageConfig stage;
  stage.name = "mb-lease";
  (void)concurrency::ApplyToCurrentThread(stage);
  int64_t next_ns = 0;
  {
    MutexLock call(call_mu_);
    next_ns = sent_ns_ + renew_ns_;
  }
  for (;;) {
    {
      MutexLock lock(thread_mu_);
      for (;;) {
        if (stop_) {
          ended_ = true;
          return;
        }
        if (paused_) {
          thread_cv_.wait(lock.native());
          continue;
        }
        const int64_t now = SteadyNs();
        if (now >= next_ns) break;
        thread_cv_.wait_for(lock.native(), std::chrono::nanoseconds(next_ns - now));
      }
      in_round_ = true;
    }
    std::string reason;
    const Round r = Renew(&reason, &next_ns);
    std::function<void(std::string_view)> on_lost;
    {
      MutexLock lock(thread_mu_);
      in_round_ = false;
      if (r == Round::kLost) {
        ended_ = true;
        on_lost = on_lost_;
      }
    }
    thread_cv_.notify_all();
    if (r == Round::kLost) {
      {
        MutexLock lock(mu_);
        stats_.last_error = reason;
      }
      Log(reason);
      if (on_lost) on_lost(reason);
      return;
    }
  }
}

void Lease::StartRenewing(std::function<void(std::string_view reason)> on_lost) {
  {
    MutexLock lock(thread_mu_);
    on_lost_ = std::move(on_lost);
    if (thread_.joinable() && !ended_ && !stop_) {
      paused_ = false;  // resumes a paused mb-lease; a running one takes the new on_lost
      lock.Unlock();
      thread_cv_.notify_all();
      return;
    }
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  if (thread_.joinable()) thread_.detach();  // called from on_lost: mb-lease is ending
  {
    MutexLock lock(thread_mu_);
    stop_ = false;
    paused_ = false;
    in_round_ = false;
    ended_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void Lease::PauseRenewingForTest() {
  MutexLock lock(thread_mu_);
  paused_ = true;
  thread_cv_.wait(lock.native(), [this]() MB_REQUIRES(thread_mu_) { return !in_round_; });
}

void Lease::Stop() {
  {
    MutexLock lock(thread_mu_);
    stop_ = true;
  }
  thread_cv_.notify_all();
  // From on_lost, mb-lease is the caller and ends when it returns; the
  // owner's next Stop (or the destructor) joins it.
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

Status Lease::Release() {
  Stop();
  if (nats_ == nullptr) return Status::Ok();
  MutexLock call(call_mu_);
  if (revision_ == 0) return Status::Ok();
  // Invariant 1: not Valid() from before anyone can see the key free.
  deadline_ns_.store(0, std::memory_order_relaxed);
  const uint64_t ours = revision_;
  if (!Connected()) return Disconnected("release");
  uint64_t rev = 0;
  const natsStatus s = kvStore_UpdateString(&rev, nats_->kv, options_.key.c_str(), "", ours);
  if (s == NATS_OK) {
    revision_ = 0;
    {
      MutexLock lock(mu_);
      stats_.holder.clear();
      stats_.revision = 0;
    }
    Log(fmt::format("lease {}/{} released by \"{}\" (revision {})", bucket_, options_.key,
                    options_.holder, rev));
    return Status::Ok();
  }
  const std::string error = NatsError(
      fmt::format("cannot release lease {}/{} at revision {}", bucket_, options_.key, ours), s, 0);
  const Entry e = Read();
  if (e.status == NATS_NOT_FOUND || (e.found() && e.revision != ours)) {
    std::string why = LostReason(e);
    revision_ = 0;
    {
      MutexLock lock(mu_);
      stats_.revision = 0;
    }
    return Unavailable(fmt::format("cannot release: {}", why));
  }
  return Unavailable(error);
}

LeaseStats Lease::stats() const {
  const int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
  const int64_t now = SteadyNs();
  MutexLock lock(mu_);
  LeaseStats out = stats_;
  out.held = now < deadline;
  out.remaining_ms = out.held ? (deadline - now) / kNsPerMs : 0;
  return out;
}

}  // namespace mb::bus
