#include "bus/follower.h"

#include <fmt/format.h>

#include <cstdio>

#include "bus/nats.h"
#include "bus/publisher.h"
#include "bus/snapshots.h"
#include "common/clock.h"
#include "engine/engine.h"
#include "journal/format.h"
#include "journal/reader.h"
#include "journal/snapshot.h"

namespace mb::bus {

struct Follower::Subscription {
  natsSubscription* sub = nullptr;
  ~Subscription() {
    if (sub != nullptr) {
      natsSubscription_Unsubscribe(sub);
      natsSubscription_Destroy(sub);
    }
  }
};

namespace {

// The records a message holds: the first one's sequence, and the last one's
// (its Nats-Msg-Id, checked against its records when they are read).
struct MessageSpan {
  uint64_t first = 0;
  uint64_t last = 0;
};

// A journal message's signature, checked (no verifier: taken as it is).
Status CheckSigned(const BusVerifier* verifier, natsMsg* m, const std::string& stream) {
  if (verifier == nullptr) return Status::Ok();
  const char* id = nullptr;
  if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK || id == nullptr) id = "";
  const char* sig = nullptr;
  if (natsMsgHeader_Get(m, kSignatureHeader, &sig) != NATS_OK) sig = nullptr;
  return verifier->Verify(
      SignedKind::kJournal, stream, id,
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(natsMsg_GetData(m)),
                                 static_cast<std::size_t>(natsMsg_GetDataLength(m))),
      sig);
}

Result<MessageSpan> ReadSpan(jsCtx* js, const std::string& stream, uint64_t stream_seq,
                             const BusVerifier* verifier) {
  natsMsg* m = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetMsg(&m, js, stream.c_str(), stream_seq, nullptr, &code);
  if (s != NATS_OK) {
    const std::string what = NatsError(fmt::format("message {} of stream {}", stream_seq, stream),
                                       s, static_cast<int>(code));
    // Gone (expired, deleted): what it held must come from a snapshot.
    if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) return NotFound(what);
    return Unavailable(what);
  }
  if (Status st = CheckSigned(verifier, m, stream); !st.ok()) {
    natsMsg_Destroy(m);
    return Corruption(
        fmt::format("message {} of stream {} is refused: {}", stream_seq, stream, st.message()));
  }
  MessageSpan span;
  const char* id_header = nullptr;
  const bool has_id =
      natsMsgHeader_Get(m, "Nats-Msg-Id", &id_header) == NATS_OK && id_header != nullptr;
  const std::string id = has_id ? id_header : "";  // the message's memory goes below
  const bool id_ok = has_id && ParseU64(id, &span.last);
  const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(m));
  const journal::ParsedRecord r = journal::ParseRecord(
      std::span<const std::byte>(data, static_cast<std::size_t>(natsMsg_GetDataLength(m))));
  span.first = r.header.seq;
  natsMsg_Destroy(m);
  if (!id_ok || r.error != journal::RecordError::kOk || span.first > span.last) {
    return Corruption(fmt::format(
        "message {} of stream {} is not a Matchbook journal message (Nats-Msg-Id \"{}\", first "
        "record: {})",
        stream_seq, stream, id, journal::ToString(r.error)));
  }
  return span;
}

}  // namespace

Follower::Follower(std::filesystem::path data_dir, const engine::EngineConfig& config,
                   FollowerOptions options, FollowerSink* sink)
    : data_dir_(std::move(data_dir)),
      config_(config),
      config_hash_(engine::HashConfig(config)),
      options_(std::move(options)),
      stream_(options_.stream.empty() ? DefaultStream(options_.venue) : options_.stream),
      subject_(options_.subject.empty() ? DefaultSubject(options_.venue) : options_.subject),
      sink_(sink) {}

Follower::~Follower() { Stop(); }

void Follower::Log(std::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
}

void Follower::Fail(const Status& st) {
  bool changed = false;
  {
    MutexLock lock(mu_);
    changed = last_error_ != st.message();
    last_error_ = st.message();
  }
  if (changed) Log(st.message());  // not under the lock stats() takes
}

FollowerStats Follower::stats() const {
  FollowerStats s;
  s.applied_seq = applied_.load(std::memory_order_acquire);
  s.stream_seq = stream_seq_.load(std::memory_order_relaxed);
  s.lag_events = s.stream_seq > s.applied_seq ? s.stream_seq - s.applied_seq : 0;
  s.messages = messages_.load(std::memory_order_relaxed);
  s.records = records_.load(std::memory_order_relaxed);
  s.duplicates = duplicates_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  s.resyncs = resyncs_.load(std::memory_order_relaxed);
  s.snapshot_seq = snapshot_seq_.load(std::memory_order_relaxed);
  s.boot_seconds = static_cast<double>(boot_us_.load(std::memory_order_relaxed)) / 1e6;
  s.connected = connected_.load(std::memory_order_relaxed);
  s.caught_up = caught_up_.load(std::memory_order_relaxed);
  s.halted = halted_.load(std::memory_order_relaxed);
  s.stream = stream_;
  s.subject = subject_;
  MutexLock lock(mu_);
  s.last_error = last_error_;
  return s;
}

Status Follower::Start() {
  MB_RETURN_IF_ERROR(Boot(0));
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mb-follower");
    Run();
  });
  return Status::Ok();
}

void Follower::Stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  sub_.reset();
  nats_.reset();
}

// Connect, check the stream, load the newest snapshot (or the empty state),
// bootstrap the sink, subscribe from the next record.
Status Follower::Connect() {
  if (nats_) return Status::Ok();
  auto c = ConnectNats(options_.servers,
                       options_.resume_after ? "matchbook standby" : "matchbook replica",
                       options_.timeout, options_.retry, options_.security);
  if (!c.ok()) return c.status();
  nats_ = std::move(*c);
  return Status::Ok();
}

Result<StreamPoint> Follower::Probe(uint64_t seq) {
  MB_RETURN_IF_ERROR(Connect());
  StreamPoint point;
  natsMsg* m = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&m, nats_->js, stream_.c_str(), subject_.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr || code == JSStreamNotFoundErr) {
    return point;  // nothing published yet
  }
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("last message of stream {}", stream_), s, static_cast<int>(code)));
  }
  const Status last_signed = CheckSigned(options_.verifier.get(), m, stream_);
  const char* id = nullptr;
  const bool known = natsMsgHeader_Get(m, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr &&
                     ParseU64(id, &point.last_seq);
  natsMsg_Destroy(m);
  if (!last_signed.ok()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return Corruption(fmt::format("the last message of stream {} is refused: {}", stream_,
                                  last_signed.message()));
  }
  if (!known) {
    return Corruption(
        fmt::format("the last message of stream {} is not a journal message", stream_));
  }
  if (seq == 0 || seq > point.last_seq) return point;
  auto at = Locate(seq);
  if (!at.ok()) {
    if (at.status().code() == StatusCode::kNotFound) return point;  // expired
    return at.status();
  }
  m = nullptr;
  s = js_GetMsg(&m, nats_->js, stream_.c_str(), *at, nullptr, &code);
  if (s != NATS_OK) {
    return Unavailable(
        NatsError(fmt::format("message {} of stream {}", *at, stream_), s, static_cast<int>(code)));
  }
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(natsMsg_GetData(m)),
                                  static_cast<std::size_t>(natsMsg_GetDataLength(m)));
  Status st = CheckSigned(options_.verifier.get(), m, stream_);
  if (!st.ok()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    st = Corruption(
        fmt::format("message {} of stream {} is refused: {}", *at, stream_, st.message()));
  }
  while (st.ok() && !rest.empty()) {
    const journal::ParsedRecord r = journal::ParseRecord(rest);
    if (r.error != journal::RecordError::kOk) {
      st = Corruption(fmt::format("message {} of stream {}: a damaged record ({})", *at, stream_,
                                  journal::ToString(r.error)));
      break;
    }
    if (r.header.seq == seq) {
      point.frame.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(r.size));
      break;
    }
    rest = rest.subspan(r.size);
  }
  natsMsg_Destroy(m);
  if (!st.ok()) return st;
  return point;
}

Status Follower::Boot(uint64_t past) {
  const int64_t start_ns = SteadyNs();
  sub_.reset();
  caught_up_.store(false, std::memory_order_relaxed);
  MB_RETURN_IF_ERROR(Connect());
  jsStreamInfo* si = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, nats_->js, stream_.c_str(), nullptr, &code);
  if (s != NATS_OK) {
    connected_.store(false, std::memory_order_relaxed);
    if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) {
      return NotFound(fmt::format(
          "stream {} does not exist on NATS {}: no `matchbook serve --nats` of venue \"{}\" has "
          "published to it yet",
          stream_, fmt::join(options_.servers, ","), options_.venue));
    }
    return Unavailable(NatsError(fmt::format("stream {}", stream_), s, static_cast<int>(code)));
  }
  connected_.store(true, std::memory_order_relaxed);
  const std::string theirs =
      si->Config != nullptr && si->Config->Description != nullptr ? si->Config->Description : "";
  const uint64_t first_msg = si->State.FirstSeq;
  const uint64_t msgs = si->State.Msgs;
  const uint64_t ever = si->State.LastSeq;  // messages ever stored, some maybe gone
  jsStreamInfo_Destroy(si);
  const std::string ours = StreamDescription(options_.venue, config_hash_);
  if (theirs != ours) {
    return InvalidArgument(fmt::format(
        "stream {} carries \"{}\", this replica follows \"{}\": start it with the primary's "
        "venue and configuration (--config)",
        stream_, theirs, ours));
  }

  if (options_.resume_after) {
    // A standby: its own journal is the starting point.
    const uint64_t from = *options_.resume_after;
    applied_.store(from, std::memory_order_release);
    booted_at_ = from;
    MB_RETURN_IF_ERROR(Subscribe());
    boot_us_.store((SteadyNs() - start_ns) / 1000, std::memory_order_relaxed);
    Log(fmt::format("following stream {} from record {} (the local journal ends at {})", stream_,
                    from + 1, from));
    return Status::Ok();
  }

  // The stream's first record: where following from sequence 0 would start.
  uint64_t stream_first = 0;
  if (msgs > 0) {
    auto span = ReadSpan(nats_->js, stream_, first_msg, options_.verifier.get());
    if (!span.ok()) return span.status();
    stream_first = span->first;
  }
  if (past > 0) {
    auto manifest =
        ReadManifest(*nats_, SnapshotNamesFor(stream_, subject_), options_.verifier.get());
    if (!manifest.ok()) return manifest.status();
    const uint64_t newest = *manifest ? (*manifest)->seq : 0;
    if (newest <= past) {
      return NotFound(fmt::format(
          "record {} cannot be had from stream {}; waiting for a snapshot past it on the bus "
          "(the newest is {}); meanwhile the replica serves what it has and is not ready",
          past + 1, stream_, newest));
    }
  }
  SnapshotSource source{options_.servers, stream_,           subject_,
                        options_.timeout, options_.security, options_.verifier};
  auto fetched = FetchNewestSnapshot(source, data_dir_);
  engine::EngineImage image;
  uint64_t snapshot = 0;
  if (fetched.ok()) {
    auto loaded =
        journal::ReadSnapshot(data_dir_ / "snapshots" / journal::SnapshotFileName(fetched->seq));
    if (!loaded.ok()) return loaded.status();
    if (loaded->meta.config_hash != config_hash_) {
      return InvalidArgument(fmt::format(
          "snapshot {} on the bus was taken under configuration {:016x}, this replica runs "
          "{:016x}: start it with the primary's configuration (--config)",
          fetched->seq, loaded->meta.config_hash, config_hash_));
    }
    image = std::move(loaded->image);
    snapshot = fetched->seq;
    // Older fetched snapshots are of no further use.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(data_dir_ / "snapshots", ec)) {
      uint64_t seq = 0;
      if (journal::ParseSnapshotFileName(e.path().filename().string(), &seq) && seq != snapshot) {
        std::filesystem::remove(e.path(), ec);
      }
    }
  } else if (fetched.status().code() != StatusCode::kNotFound) {
    return fetched.status();
  }
  if (snapshot == 0) {
    if ((msgs > 0 && stream_first != 1) || (msgs == 0 && ever > 0)) {
      return NotFound(fmt::format(
          "stream {} no longer starts at record 1 (its first is {}) and the bus holds no "
          "snapshot yet: the replica waits for the primary's first snapshot (SIGUSR1 or POST "
          "/admin/v1/snapshot on the primary)",
          stream_, msgs > 0 ? stream_first : ever + 1));
    }
    image = engine::Engine(config_).ExportImage();
  }
  if (msgs > 0 && stream_first > Raw(image.last_sequence) + 1) {
    return NotFound(fmt::format(
        "stream {} starts at record {}, after the newest snapshot on the bus ({}): the replica "
        "waits for a newer snapshot",
        stream_, stream_first, Raw(image.last_sequence)));
  }
  sink_->Bootstrap(image);
  applied_.store(Raw(image.last_sequence), std::memory_order_release);
  booted_at_ = Raw(image.last_sequence);
  snapshot_seq_.store(snapshot, std::memory_order_relaxed);
  MB_RETURN_IF_ERROR(Subscribe());
  boot_us_.store((SteadyNs() - start_ns) / 1000, std::memory_order_relaxed);
  Log(fmt::format("booted at record {} ({}) in {:.3f} s; following stream {} from record {}",
                  Raw(image.last_sequence),
                  snapshot != 0 ? fmt::format("snapshot {} from the bus", snapshot)
                                : std::string("the empty state"),
                  static_cast<double>(SteadyNs() - start_ns) / 1e9, stream_,
                  Raw(image.last_sequence) + 1));
  return Status::Ok();
}

Result<uint64_t> Follower::Locate(uint64_t seq) {
  jsStreamInfo* si = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&si, nats_->js, stream_.c_str(), nullptr, &code);
  if (s != NATS_OK) {
    return Unavailable(NatsError(fmt::format("stream {}", stream_), s, static_cast<int>(code)));
  }
  uint64_t lo = si->State.FirstSeq;
  uint64_t hi = si->State.LastSeq;
  const uint64_t msgs = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  if (msgs == 0) return hi + 1;
  auto last = ReadSpan(nats_->js, stream_, hi, options_.verifier.get());
  if (!last.ok()) return last.status();
  if (last->last < seq) return hi + 1;  // not published yet
  // The first message whose last record is at or after seq.
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    auto span = ReadSpan(nats_->js, stream_, mid, options_.verifier.get());
    if (!span.ok()) return span.status();
    if (span->last < seq) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  auto found = ReadSpan(nats_->js, stream_, lo, options_.verifier.get());
  if (!found.ok()) return found.status();
  if (found->first > seq) {
    return NotFound(fmt::format("stream {} no longer holds record {} (its oldest is {})", stream_,
                                seq, found->first));
  }
  return lo;
}

Status Follower::Subscribe() {
  sub_.reset();
  const uint64_t next = applied_.load(std::memory_order_acquire) + 1;
  auto from = Locate(next);
  if (!from.ok()) return from.status();
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = *from;
  so.Stream = stream_.c_str();
  auto sub = std::make_unique<Subscription>();
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s =
      js_SubscribeSync(&sub->sub, nats_->js, subject_.c_str(), nullptr, &so, &code);
  if (s != NATS_OK) {
    sub->sub = nullptr;
    return Unavailable(NatsError(fmt::format("subscribing to {} from message {}", stream_, *from),
                                 s, static_cast<int>(code)));
  }
  sub_ = std::move(sub);
  last_message_ns_ = SteadyNs();
  return Status::Ok();
}

Status Follower::Take(std::span<const std::byte> data, uint64_t stream_seq) {
  events_.clear();
  uint64_t applied = applied_.load(std::memory_order_relaxed);
  uint64_t records = 0;
  std::span<const std::byte> rest = data;
  while (!rest.empty()) {
    const journal::ParsedRecord r = journal::ParseRecord(rest);
    if (r.error != journal::RecordError::kOk) {
      return Corruption(fmt::format("message {} of stream {}: a record after {} is damaged ({})",
                                    stream_seq, stream_, applied, journal::ToString(r.error)));
    }
    rest = rest.subspan(r.size);
    const uint64_t seq = r.header.seq;
    if (seq <= applied) {
      // Before the boot point: the first message may start before it.
      if (seq > booted_at_) duplicates_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (seq != applied + 1) {
      return OutOfRange(fmt::format("message {} of stream {}: record {} follows record {}",
                                    stream_seq, stream_, seq, applied));
    }
    if (Status st = sink_->Record(seq, data.subspan(data.size() - rest.size() - r.size, r.size));
        !st.ok()) {
      return Status(st.code(), fmt::format("record {}: {}", seq, st.message()));
    }
    journal::JournalRecord jr;
    jr.seq = seq;
    jr.checksum = r.header.checksum;
    jr.payload = r.payload;
    if (Status st = journal::DecodeOutcome(jr, &events_); !st.ok()) {
      return Corruption(
          fmt::format("message {} of stream {}: {}", stream_seq, stream_, st.message()));
    }
    applied = seq;
    ++records;
  }
  if (records > 0) {
    if (Status st = sink_->Commit(); !st.ok()) return st;
  }
  if (!events_.empty()) sink_->Apply(events_);
  applied_.store(applied, std::memory_order_release);
  messages_.fetch_add(1, std::memory_order_relaxed);
  records_.fetch_add(records, std::memory_order_relaxed);
  return Status::Ok();
}

void Follower::CheckStream() {
  natsMsg* m = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  // Briefly: the streams' clock waits meanwhile.
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 250;
  const natsStatus s = js_GetLastMsg(&m, nats_->js, stream_.c_str(), subject_.c_str(), &jo, &code);
  if (s != NATS_OK) {
    if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) {
      // Nothing published yet: nothing to catch up with.
      connected_.store(true, std::memory_order_relaxed);
      caught_up_.store(true, std::memory_order_relaxed);
      return;
    }
    connected_.store(false, std::memory_order_relaxed);
    Fail(Unavailable(
        NatsError(fmt::format("last message of stream {}", stream_), s, static_cast<int>(code))));
    return;
  }
  connected_.store(true, std::memory_order_relaxed);
  const Status last_signed = CheckSigned(options_.verifier.get(), m, stream_);
  const char* id = nullptr;
  uint64_t last = 0;
  const bool known =
      natsMsgHeader_Get(m, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr && ParseU64(id, &last);
  natsMsg_Destroy(m);
  if (!last_signed.ok()) {
    // What the stream ends with is not the venue's: not caught up with it.
    caught_up_.store(false, std::memory_order_relaxed);
    Fail(Corruption(fmt::format("the last message of stream {} is refused: {}", stream_,
                                last_signed.message())));
    return;
  }
  if (!known) return;  // not a Matchbook message: reading it will say so
  stream_seq_.store(last, std::memory_order_relaxed);
  if (last <= applied_.load(std::memory_order_acquire)) {
    caught_up_.store(true, std::memory_order_relaxed);
  }
}

void Follower::Halt(const Status& st) {
  Fail(Status(st.code(), st.message() + ": the standby stops following"));
  Unsubscribe();
  halted_.store(true, std::memory_order_release);
}

// Off the stream (a stall, a read error, a record that cannot be applied):
// not caught up, so not ready, until following again.
void Follower::Unsubscribe() {
  sub_.reset();
  caught_up_.store(false, std::memory_order_relaxed);
}

void Follower::Run() {
  const int64_t tick_ns = options_.tick.count() * 1'000'000;
  int64_t last_tick_ns = SteadyNs();
  int64_t retry_at_ns = 0;
  bool resync = false;
  while (!stop_.load(std::memory_order_acquire)) {
    const int64_t now = SteadyNs();
    if (now - last_tick_ns >= tick_ns) {
      sink_->Tick();
      last_tick_ns = now;
    }
    if (!sub_) {
      // Boot again (a gap, a damaged record) or subscribe again (a stall, NATS gone).
      if (now < retry_at_ns) {
        std::this_thread::sleep_for(options_.tick);
        continue;
      }
      Status st = resync ? Boot(applied_.load(std::memory_order_acquire)) : Subscribe();
      if (st.ok() && resync) resyncs_.fetch_add(1, std::memory_order_relaxed);
      if (!st.ok()) {
        // A subscription that cannot start where it must: the stream no
        // longer holds the next record.
        if (st.code() == StatusCode::kNotFound && options_.resume_after) {
          Halt(st);
          return;
        }
        if (st.code() == StatusCode::kNotFound) resync = true;
        Fail(st);
        retry_at_ns = now + options_.retry.count() * 1'000'000;
        continue;
      }
      resync = false;
      next_check_ns_ = 0;
    }
    if (now >= next_check_ns_) {
      CheckStream();
      next_check_ns_ = now + 1'000'000'000;
      const FollowerStats st = stats();
      if (st.lag_events > 0 && now - last_message_ns_ > options_.stall.count() * 1'000'000) {
        Fail(
            Unavailable(fmt::format("{} records behind stream {} and nothing arrived for {} ms: "
                                    "subscribing again",
                                    st.lag_events, stream_, options_.stall.count())));
        Unsubscribe();
        continue;
      }
    }
    natsMsg* msg = nullptr;
    const natsStatus s =
        natsSubscription_NextMsg(&msg, sub_->sub, static_cast<int64_t>(options_.tick.count()));
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) {
      Fail(Unavailable(NatsError(fmt::format("reading stream {}", stream_), s, 0)));
      Unsubscribe();
      retry_at_ns = SteadyNs() + options_.retry.count() * 1'000'000;
      continue;
    }
    jsMsgMetaData* meta = nullptr;
    uint64_t stream_seq = 0;
    uint64_t pending = 1;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      stream_seq = meta->Sequence.Stream;
      pending = meta->NumPending;
      jsMsgMetaData_Destroy(meta);
    }
    if (Status sig = CheckSigned(options_.verifier.get(), msg, stream_); !sig.ok()) {
      // Never applied: the state stays at the last good record, and the
      // follower is not caught up until a signed message applies.
      natsMsg_Destroy(msg);
      last_message_ns_ = SteadyNs();
      refused_.fetch_add(1, std::memory_order_relaxed);
      caught_up_.store(false, std::memory_order_relaxed);
      Fail(Corruption(fmt::format(
          "message {} of stream {} is refused and not applied (the state "
          "stays at record {}): {}",
          stream_seq, stream_, applied_.load(std::memory_order_relaxed), sig.message())));
      continue;
    }
    const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(msg));
    const Status st =
        Take(std::span<const std::byte>(data, static_cast<std::size_t>(natsMsg_GetDataLength(msg))),
             stream_seq);
    natsMsg_Destroy(msg);
    last_message_ns_ = SteadyNs();
    if (!st.ok() && options_.resume_after) {
      Halt(st);
      return;
    }
    if (!st.ok()) {
      // Not at once: a damaged message stays in the stream until a snapshot
      // past it is on the bus, and each boot meets it again.
      Fail(Status(st.code(), st.message() + ": resynchronising from the newest snapshot"));
      Unsubscribe();
      resync = true;
      retry_at_ns = SteadyNs() + options_.retry.count() * 1'000'000;
      continue;
    }
    if (pending == 0) {
      // The last message the stream holds: what it ends with is applied.
      const uint64_t applied = applied_.load(std::memory_order_relaxed);
      if (applied > stream_seq_.load(std::memory_order_relaxed)) {
        stream_seq_.store(applied, std::memory_order_relaxed);
      }
      caught_up_.store(true, std::memory_order_relaxed);
    }
    {
      MutexLock lock(mu_);
      last_error_.clear();
    }
  }
}

}  // namespace mb::bus
