#include "bus/publisher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "bus/nats.h"
#include "common/clock.h"
#include "journal/format.h"
#include "journal/tail.h"

namespace mb::bus {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
// What a message's headers may take of the server's max_payload.
constexpr int64_t kHeaderRoom = 4096;
// A refusal (another venue's stream, another primary) is retried less and
// less often, up to this.
constexpr int64_t kMaxRefusedRetryNs = int64_t{30'000} * kNsPerMs;
// How long the server remembers message ids. Short on purpose: publishing
// is exactly-once by the expected-last-sequence condition, not by ids (a
// publish that may have landed is followed by reading the stream's end);
// and records a stream lost (purged, or gone with a NATS node) can be
// published again under their ids two seconds later.
constexpr int64_t kDuplicateWindowNs = int64_t{2'000} * kNsPerMs;
// Forged messages erased from the stream's end at one resume before giving
// up (and retrying later): a writer faster than this is an incident.
constexpr uint64_t kMaxErasedInARow = 1000;
// Stream sequences with no message (erased, expired) skipped below an erased
// message before the stream counts as holding none.
constexpr int kMaxGoneProbes = 1000;

}  // namespace

std::string DefaultStream(std::string_view venue) { return fmt::format("MATCHBOOK_{}", venue); }
std::string DefaultSubject(std::string_view venue) { return fmt::format("mb.{}.journal", venue); }

Status CheckVenue(std::string_view venue) {
  const bool ok =
      !venue.empty() && venue.size() <= 32 && std::all_of(venue.begin(), venue.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
      });
  if (ok) return Status::Ok();
  return InvalidArgument(fmt::format(
      "venue \"{}\": 1 to 32 letters, digits, '_' or '-' (it names the bus stream and subject)",
      venue));
}

Result<std::vector<std::string>> ParseServers(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view url = list.substr(start, end - start);
    while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
    while (!url.empty() && url.back() == ' ') url.remove_suffix(1);
    std::string_view rest = url;
    std::string_view scheme = "nats://";
    if (rest.starts_with("tls://")) scheme = "tls://";
    if (rest.starts_with(scheme)) rest.remove_prefix(scheme.size());
    const std::size_t colon = rest.rfind(':');
    uint64_t port = 0;
    const bool ok = !rest.empty() && colon != std::string_view::npos && colon > 0 &&
                    rest.find_first_of("/ ?#") == std::string_view::npos &&
                    ParseU64(rest.substr(colon + 1), &port) && port > 0 && port <= 65535;
    if (!ok) {
      return InvalidArgument(fmt::format(
          "NATS server \"{}\" is not nats://host:port or tls://host:port (a list separates "
          "servers with commas)",
          url));
    }
    out.push_back(fmt::format("{}{}", scheme, rest));
    start = end + 1;
  }
  return out;
}

std::string StreamDescription(std::string_view venue, uint64_t config_hash) {
  return fmt::format("matchbook journal; venue {}; configuration {:016x}", venue, config_hash);
}

Publisher::Publisher(std::filesystem::path data_dir, uint64_t config_hash, PublisherOptions options)
    : data_dir_(std::move(data_dir)),
      config_hash_(config_hash),
      options_(std::move(options)),
      stream_(options_.stream.empty() ? DefaultStream(options_.venue) : options_.stream),
      subject_(options_.subject.empty() ? DefaultSubject(options_.venue) : options_.subject),
      snapshot_names_(SnapshotNamesFor(stream_, subject_)),
      // Parks between retries; NotifyDurable wakes it.
      runner_(this, concurrency::StageConfig{"mb-publisher",
                                             {concurrency::WaitKind::kBackOff, 0, 0, 100'000}}) {}

Publisher::~Publisher() { Stop(); }

void Publisher::Log(std::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "bus: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

std::string Publisher::Start(uint64_t durable_seq) {
  NotifyDurable(durable_seq);  // never lowers what the fan-out stage told already
  stop_.store(false, std::memory_order_release);
  next_ = 0;
  retry_at_ns_ = 0;
  return runner_.Start();
}

void Publisher::Stop() {
  stop_.store(true, std::memory_order_release);
  runner_.Stop();
}

void Publisher::NotifyDurable(uint64_t seq) {
  uint64_t cur = durable_.load(std::memory_order_relaxed);
  while (seq > cur && !durable_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
  }
  runner_.Wake();
}

bool Publisher::WaitPublished(uint64_t seq, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return published_cv_.wait_for(lock.native(), timeout,
                                [&] { return published_.load(std::memory_order_acquire) >= seq; });
}

PublisherStats Publisher::stats() const {
  PublisherStats s;
  s.published_seq = published_.load(std::memory_order_acquire);
  s.durable_seq = durable_.load(std::memory_order_acquire);
  s.lag_events = s.durable_seq > s.published_seq ? s.durable_seq - s.published_seq : 0;
  s.messages = messages_.load(std::memory_order_relaxed);
  s.records = records_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.forged_erased = forged_erased_.load(std::memory_order_relaxed);
  s.connected = connected_.load(std::memory_order_relaxed);
  s.stream = stream_;
  s.subject = subject_;
  s.snapshot_seq = snapshot_seq_.load(std::memory_order_relaxed);
  MutexLock lock(mu_);
  s.last_error = last_error_;
  return s;
}

bool Publisher::HasWork() const {
  return retry_at_ns_ == 0 &&
         durable_.load(std::memory_order_acquire) > published_.load(std::memory_order_acquire);
}

int Publisher::DoWork() {
  if (stop_.load(std::memory_order_acquire)) return 0;
  if (retry_at_ns_ != 0) {
    if (SteadyNs() < retry_at_ns_) return 0;
    retry_at_ns_ = 0;
  }
  if (!nats_) {
    if (Status s = Connect(); !s.ok()) {
      Fail(s);
      return 0;
    }
  }
  // The client reconnects by itself; its state is read here, on the thread
  // that owns the connection (at least every park, 100 ms).
  connected_.store(natsConnection_Status(nats_->conn) == NATS_CONN_STATUS_CONNECTED,
                   std::memory_order_relaxed);
  if (next_ == 0) {
    if (Status s = Resume(); !s.ok()) {
      Fail(s);
      return 0;
    }
  }
  auto n = PublishBatch();
  if (!n.ok()) {
    Fail(n.status());
    return 0;
  }
  // At most one snapshot chunk per round, between journal messages.
  const std::size_t chunks = options_.snapshots && StepSnapshot() ? 1 : 0;
  return static_cast<int>(std::min<std::size_t>(*n + chunks, 1 << 30));
}

void Publisher::OnClose() {
  tail_.reset();
  nats_.reset();
  connected_.store(false, std::memory_order_relaxed);
}

void Publisher::Fail(const Status& st) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  connected_.store(false, std::memory_order_relaxed);
  // Whatever went wrong, the stream's end is read again before the next
  // publish: a publish that timed out may have been stored.
  next_ = 0;
  tail_.reset();
  carry_.clear();
  carry_seq_ = 0;
  snapshots_ready_ = false;
  upload_.reset();
  int64_t wait = options_.retry.count() * kNsPerMs;
  if (st.code() == StatusCode::kInvalidArgument) {
    // A refusal does not go away by itself: asked again less and less often.
    wait = std::min(kMaxRefusedRetryNs, wait << std::min(refusals_, 6));
    ++refusals_;
  }
  retry_at_ns_ = SteadyNs() + wait;
  {
    MutexLock lock(mu_);
    if (last_error_ == st.message()) return;  // logged already
    last_error_ = st.message();
  }
  Log(fmt::format("{} (tried again in {} ms; trading is not affected)", st.message(),
                  wait / kNsPerMs));
}

Status Publisher::Connect() {
  auto nats = ConnectNats(options_.servers, fmt::format("matchbook {} publisher", options_.venue),
                          options_.timeout, options_.retry, options_.security);
  if (!nats.ok()) return nats.status();
  nats_ = std::move(*nats);
  // No message passes the server's max_payload (headers need room too).
  const int64_t payload = natsConnection_GetMaxPayload(nats_->conn);
  max_message_ = static_cast<std::size_t>(std::max<int64_t>(payload - kHeaderRoom, 1024));
  return Status::Ok();
}

Status Publisher::Resume() {
  jsCtx* js = nats_->js;
  StreamSpec spec;
  spec.name = stream_;
  spec.subject = subject_;
  spec.description = StreamDescription(options_.venue, config_hash_);
  spec.replicas = options_.replicas;
  spec.keep_more_replicas = options_.keep_more_replicas;
  spec.max_bytes = options_.max_bytes;
  spec.max_age_ns = static_cast<int64_t>(options_.max_age.count()) * 1'000'000'000;
  spec.duplicates_ns = kDuplicateWindowNs;
  auto state = EnsureStream(js, spec);
  if (!state.ok()) return state.status();
  if (state->created) {
    Log(fmt::format("created stream {} (subject {}, {} replica{}, at most {} MiB and {} h)",
                    stream_, subject_, options_.replicas, options_.replicas == 1 ? "" : "s",
                    options_.max_bytes >> 20, options_.max_age.count() / 3600));
  }
  if (!state->change.empty()) Log(state->change);

  const uint64_t durable = durable_.load(std::memory_order_acquire);
  // This journal's checksum of record `seq` (nullopt: not in it).
  auto checksum_at = [&](uint64_t seq) -> Result<std::optional<uint64_t>> {
    journal::JournalTail t(data_dir_, config_hash_, seq, options_.file_system);
    uint64_t mine = 0;
    auto got = t.Read(durable, 1, [&](const journal::JournalRecord& r) {
      mine = r.checksum;
      return Status::Ok();
    });
    if (!got.ok()) return got.status();
    return *got == 0 ? std::optional<uint64_t>() : std::optional<uint64_t>(mine);
  };
  std::optional<BusVerifier> own;
  if (options_.signer) {
    auto pub = Ed25519PublicKey::FromRaw(options_.signer->public_key());
    if (!pub.ok()) return pub.status();
    own.emplace(std::move(*pub));
  }

  // Which record the stream ends with, and that message's stream sequence
  // (what the next publish expects to follow). With a bus key, a last
  // message that is neither signed with it nor this journal's (an earlier
  // version published unsigned) was written by a NATS user with publish
  // rights: it is erased, so that it can neither stop publishing nor pass
  // for another primary's, and the one before it is looked at.
  uint64_t last = 0;
  uint64_t last_checksum = 0;
  uint64_t last_message = 0;
  uint64_t erased_top = 0;  // the highest stream sequence erased (0: none)
  uint64_t erased = 0;
  // Once the stream's last message is removed (erased here or before), the
  // server finds no last message of the subject: the messages before it are
  // read by their stream sequence, skipping those gone (erased, expired) — a
  // bounded number.
  uint64_t probe = 0;
  int gone_in_a_row = 0;
  for (;;) {
    last = last_checksum = last_message = 0;
    natsMsg* m = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = probe == 0
                       ? js_GetLastMsg(&m, js, stream_.c_str(), subject_.c_str(), nullptr, &code)
                       : js_GetMsg(&m, js, stream_.c_str(), probe, nullptr, &code);
    if (s != NATS_OK) {
      if (s != NATS_NOT_FOUND && code != JSNoMessageFoundErr) {
        return Unavailable(NatsError(fmt::format("last message of stream {}", stream_), s,
                                     static_cast<int>(code)));
      }
      if (probe == 0 && state->messages > 0 && state->last_seq > 0) {
        // The stream holds messages, but its last one was removed: the
        // server then finds no last message of the subject either.
        probe = state->last_seq;
        continue;
      }
      if (probe > 1 && ++gone_in_a_row < kMaxGoneProbes) {
        --probe;
        continue;
      }
      break;
    }
    gone_in_a_row = 0;
    const char* id = nullptr;
    const bool has_id = natsMsgHeader_Get(m, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr;
    const std::string id_text = has_id ? id : "";
    const char* sig = nullptr;
    if (natsMsgHeader_Get(m, kSignatureHeader, &sig) != NATS_OK) sig = nullptr;
    const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(m));
    const std::span<const std::byte> body(data, static_cast<std::size_t>(natsMsg_GetDataLength(m)));
    const bool signed_by_us =
        own && own->Verify(SignedKind::kJournal, stream_, id_text, body, sig).ok();
    std::span<const std::byte> rest = body;
    std::string damage;
    while (!rest.empty()) {
      const journal::ParsedRecord r = journal::ParseRecord(rest);
      if (r.error != journal::RecordError::kOk) {
        damage =
            fmt::format("a record after {} is not whole ({})", last, journal::ToString(r.error));
        break;
      }
      last = r.header.seq;
      last_checksum = r.header.checksum;
      rest = rest.subspan(r.size);
    }
    last_message = natsMsg_GetSequence(m);
    uint64_t id_seq = 0;
    if (damage.empty() && (!has_id || !ParseU64(id, &id_seq) || id_seq != last || last == 0)) {
      damage = fmt::format("its Nats-Msg-Id \"{}\" is not the sequence of its last record ({})",
                           id_text, last);
    }
    natsMsg_Destroy(m);
    // Kept: signed with the key; or unsigned and this journal's records (an
    // earlier version's); or unsigned and beyond this journal's end, which
    // only an earlier version's primary could have written after this data
    // directory (an older backup): that is refused below, as before.
    bool keep = !own || signed_by_us;
    if (!keep && sig == nullptr && damage.empty()) {
      if (last > durable) {
        keep = true;
      } else {
        auto mine = checksum_at(last);
        if (!mine.ok()) return mine.status();
        keep = *mine && **mine == last_checksum;
      }
    }
    if (keep) {
      if (!damage.empty()) {
        return InvalidArgument(
            fmt::format("the last message of stream {} is not a Matchbook journal message: {}",
                        stream_, damage));
      }
      break;
    }
    if (erased >= kMaxErasedInARow) {
      return InvalidArgument(fmt::format(
          "stream {}: {} messages in a row not signed with this venue's bus key were erased and "
          "there are more: check who may publish to {}",
          stream_, erased, subject_));
    }
    code = static_cast<jsErrCode>(0);
    s = js_EraseMsg(js, stream_.c_str(), last_message, nullptr, &code);
    if (s != NATS_OK) {
      return Unavailable(
          NatsError(fmt::format("erasing message {} of stream {}", last_message, stream_), s,
                    static_cast<int>(code)));
    }
    ++erased;
    ++erased_total_;
    erased_top = std::max(erased_top, last_message);
    forged_erased_.fetch_add(1, std::memory_order_relaxed);
    Log(fmt::format(
        "stream {}: message {} (id \"{}\") is not signed with this venue's bus key and is not "
        "this journal's: erased. A NATS user with publish rights on {} wrote it",
        stream_, last_message, id_text, subject_));
    if (last_message <= 1) {
      last = last_checksum = last_message = 0;
      break;
    }
    probe = last_message - 1;
  }

  if (last > durable) {
    return InvalidArgument(fmt::format(
        "stream {} holds records up to {}, but this journal is durable only to {}: another "
        "primary publishes to it, or this data directory is older than the stream",
        stream_, last, durable));
  }
  uint64_t from = last + 1;
  // Every message the stream ever stored was erased as forged (by this
  // publisher, over any number of resumes): nothing of this journal was
  // published yet.
  const bool only_forged = last == 0 && erased_total_ > 0 && erased_total_ >= state->last_seq;
  if (last == 0 && state->last_seq > 0 && !only_forged) {
    // Messages were stored and are gone (expired by max_age, purged): the
    // stream cannot say where this journal stands in it. Publishing goes on
    // after what this publisher knows it published, else after the journal's
    // end; what lies before is not published again (a replica that needs it
    // boots from a snapshot).
    const uint64_t known = published_.load(std::memory_order_acquire);
    from = (known > 0 ? known : durable) + 1;
    Log(
        fmt::format("stream {} has no message left (its last was message {}); publishing from "
                    "record {}: records before it are not on the bus, and a replica starts "
                    "from a snapshot at or after record {}",
                    stream_, state->last_seq, from, from - 1));
    snapshot_check_at_ns_ = 0;  // the newest snapshot goes out first
  }
  // Reading record `last` leaves the tail at the next one.
  auto tail = std::make_unique<journal::JournalTail>(data_dir_, config_hash_,
                                                     last > 0 ? last : from, options_.file_system);
  if (last > 0) {
    uint64_t mine = 0;
    auto got = tail->Read(durable, 1, [&](const journal::JournalRecord& r) {
      mine = r.checksum;
      return Status::Ok();
    });
    if (!got.ok()) return got.status();
    if (*got == 0 || mine != last_checksum) {
      Status fenced = InvalidArgument(fmt::format(
          "stream {} ends with a record {} that is not this journal's (checksum {:016x}, this "
          "journal's {:016x}): another primary publishes to it",
          stream_, last, last_checksum, mine));
      if (options_.on_fenced) options_.on_fenced(fenced.message());
      return fenced;
    }
  }
  tail_ = std::move(tail);
  carry_.clear();
  carry_seq_ = 0;
  next_ = from;
  // The stream's last sequence stays that of a message since removed (an
  // erased forgery, now or at an earlier resume): the next publish expects it.
  expect_message_ =
      std::max({last > 0 ? last_message : state->last_seq, state->last_seq, erased_top});
  // What the stream holds, as it says (a stream that lost its tail holds
  // less than was acknowledged before: the lag shows it again).
  const bool idle = from > durable;
  bool recovered = false;
  {
    MutexLock lock(mu_);
    published_.store(from - 1, std::memory_order_release);
    // With nothing left to publish the resume itself is the proof that the
    // stream answers; otherwise the next publish is.
    if (idle) {
      recovered = !last_error_.empty();
      last_error_.clear();
    }
  }
  if (idle) refusals_ = 0;
  published_cv_.notify_all();
  if (recovered) Log(fmt::format("stream {} answers again, at record {}", stream_, from - 1));
  const std::string line =
      fmt::format("stream {} holds records up to {}; publishing from {}", stream_, last, from);
  if (line != last_resume_log_) Log(line);  // once, not at every retry of a failing publish
  last_resume_log_ = line;
  return Status::Ok();
}

Result<std::size_t> Publisher::PublishBatch() {
  const uint64_t durable = durable_.load(std::memory_order_acquire);
  if (next_ > durable) return std::size_t{0};
  // A message holds whole records: one that does not fit is carried over
  // to the next message.
  buf_.swap(carry_);
  carry_.clear();
  uint64_t last = carry_seq_;
  std::size_t count = buf_.empty() ? 0 : 1;
  carry_seq_ = 0;
  const journal::RecordFn append = [&](const journal::JournalRecord& r) -> Status {
    const std::size_t size = journal::kRecordHeaderSize + r.payload.size();
    if (size > max_message_) {
      return InvalidArgument(fmt::format(
          "record {} is {} bytes, more than a NATS message may carry here ({} bytes: the "
          "server's max_payload less {} for headers); raise max_payload in nats-server's "
          "configuration",
          r.seq, size, max_message_, kHeaderRoom));
    }
    // A record that would take a message past message_bytes (or past the
    // server's limit) starts the next one; alone, a record may pass
    // message_bytes.
    const std::size_t close_at = std::min(options_.message_bytes, max_message_);
    std::vector<std::byte>& into = !buf_.empty() && buf_.size() + size > close_at ? carry_ : buf_;
    const std::size_t at = into.size();
    into.resize(at + size);
    journal::EncodeRecordHeader(journal::RecordType::kCommandOutcome, r.seq, r.payload,
                                std::span<std::byte, journal::kRecordHeaderSize>(
                                    into.data() + at, journal::kRecordHeaderSize));
    if (journal::GetU64(into.data() + at + 16) != r.checksum) {
      return Status(
          StatusCode::kInternal,
          fmt::format("record {}: its framing here does not give the journal's checksum", r.seq));
    }
    std::copy(r.payload.begin(), r.payload.end(),
              into.begin() + static_cast<std::ptrdiff_t>(at) + journal::kRecordHeaderSize);
    if (&into == &carry_) {
      carry_seq_ = r.seq;
    } else {
      last = r.seq;
      ++count;
    }
    return Status::Ok();
  };
  // What is durable now; then, for a message not yet full, what becomes
  // durable within the linger: at low rates one message (one round trip,
  // one wake-up here and in the server) carries several records.
  const int64_t deadline = SteadyNs() + options_.linger.count() * 1000;
  uint64_t limit = durable;
  for (;;) {
    while (carry_.empty() && tail_->next_seq() <= limit) {
      auto got = tail_->Read(limit, 1, append);
      if (!got.ok()) return got.status();
      if (*got == 0) break;
    }
    const int64_t now = SteadyNs();
    if (!carry_.empty() || now >= deadline || stop_.load(std::memory_order_acquire)) break;
    std::this_thread::sleep_for(std::chrono::nanoseconds(deadline - now));
    limit = durable_.load(std::memory_order_acquire);
  }
  if (count == 0) {
    if (next_ <= durable) {
      return Unavailable(fmt::format("record {} is durable but not in the journal files of {}",
                                     next_, data_dir_.string()));
    }
    return std::size_t{0};
  }
  if (options_.sync_journal) {
    // Under fsync = none the journal's pages reach the disk when the kernel
    // writes them: the records go to the bus only once they are on disk, so
    // the stream never holds what a power cut could take from the journal.
    MB_RETURN_IF_ERROR(tail_->SyncDelivered());
  }

  if (options_.may_publish && !options_.may_publish()) {
    return Unavailable(fmt::format(
        "records {}..{} are not published: this process no longer holds the leadership lease",
        next_, last));
  }
  const std::string id = std::to_string(last);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = id.c_str();
  po.ExpectStream = stream_.c_str();
  // The stream must end with the message this publisher stored last (or be
  // empty): a second writer's publish is refused instead of interleaved.
  if (expect_message_ != 0) {
    po.ExpectLastSeq = expect_message_;
  } else {
    po.ExpectNoMessage = true;
  }
  po.MaxWait = options_.timeout.count();
  const std::string sig =
      options_.signer ? options_.signer->Sign(SignedKind::kJournal, stream_, id, buf_) : "";
  const Published p =
      PublishMessage(nats_->js, subject_, buf_, po, sig.empty() ? nullptr : kSignatureHeader,
                     sig.empty() ? nullptr : sig.c_str());
  if (p.status != NATS_OK) {
    if (p.code == JSStreamWrongLastSequenceErr) {
      return Unavailable(fmt::format(
          "stream {} no longer ends with message {}: another publisher wrote to it (checking "
          "whose records it holds)",
          stream_, expect_message_));
    }
    return Unavailable(NatsError(
        fmt::format("publishing records {}..{} to {}", next_, last, stream_), p.status, p.code));
  }
  if (p.duplicate) {
    // The server already had a message with this id: whose it is is read
    // from the stream before anything else is published.
    return Unavailable(
        fmt::format("stream {} already held a message with id {} (checking whose records it holds)",
                    stream_, id));
  }
  next_ = last + 1;
  expect_message_ = p.stored;
  messages_.fetch_add(1, std::memory_order_relaxed);
  records_.fetch_add(count, std::memory_order_relaxed);
  bytes_.fetch_add(buf_.size(), std::memory_order_relaxed);
  connected_.store(true, std::memory_order_relaxed);
  refusals_ = 0;
  bool recovered = false;
  {
    MutexLock lock(mu_);
    published_.store(last, std::memory_order_release);
    recovered = !last_error_.empty();
    last_error_.clear();
  }
  published_cv_.notify_all();
  if (recovered) Log(fmt::format("publishing to {} again, at record {}", stream_, last));
  return count;
}

bool Publisher::StepSnapshot() {
  // A deposed primary's snapshots would carry records the stream never had.
  if (options_.may_publish && !options_.may_publish()) return false;
  auto step = [&]() -> Result<bool> {
    if (!upload_) {
      if (SteadyNs() < snapshot_check_at_ns_) return false;
      snapshot_check_at_ns_ = SteadyNs() + options_.snapshot_check.count() * kNsPerMs;
      if (!snapshots_ready_) {
        StreamSpec spec;
        spec.name = snapshot_names_.stream;
        spec.subject = snapshot_names_.filter;
        spec.description = StreamDescription(options_.venue, config_hash_);
        spec.replicas = options_.replicas;
        spec.keep_more_replicas = options_.keep_more_replicas;
        spec.max_bytes = options_.snapshot_max_bytes;
        spec.duplicates_ns = kDuplicateWindowNs;
        auto state = EnsureStream(nats_->js, spec);
        if (!state.ok()) return state.status();
        if (!state->change.empty()) Log(state->change);
        // Signing: a manifest this key did not sign (an earlier version's,
        // unsigned) counts as none, so the newest snapshot goes out signed.
        std::optional<BusVerifier> own;
        if (options_.signer) {
          auto pub = Ed25519PublicKey::FromRaw(options_.signer->public_key());
          if (!pub.ok()) return pub.status();
          own.emplace(std::move(*pub));
        }
        auto manifest = ReadManifest(*nats_, snapshot_names_, own ? &*own : nullptr);
        if (!manifest.ok() && manifest.status().code() == StatusCode::kCorruption && own) {
          Log(fmt::format("{}: the newest snapshot is published again, signed",
                          manifest.status().message()));
          manifest = std::optional<SnapshotManifest>();
        }
        if (!manifest.ok()) return manifest.status();
        snapshot_seq_.store(*manifest ? (*manifest)->seq : 0, std::memory_order_relaxed);
        snapshot_chunks_ = *manifest ? (*manifest)->chunks : 0;
        snapshots_ready_ = true;
      }
      auto newest = NewestSnapshotFile(data_dir_);
      if (!newest.ok()) return newest.status();
      if (!*newest || (*newest)->first <= snapshot_seq_.load(std::memory_order_relaxed)) {
        return false;
      }
      const auto& [seq, path] = **newest;
      auto upload = SnapshotUpload::Open(snapshot_names_, seq, path, max_message_,
                                         ++snapshot_attempts_, options_.signer.get());
      if (!upload.ok()) {
        if (upload.status().code() != StatusCode::kNotFound) return upload.status();
        snapshot_check_at_ns_ = 0;  // rotated away meanwhile: the newer one is there
        return false;
      }
      // Room for it, the one before and the next one in the stream's limit.
      if ((*upload)->manifest().bytes > static_cast<uint64_t>(options_.snapshot_max_bytes) / 3) {
        return InvalidArgument(fmt::format(
            "snapshot {} is {} bytes, more than a third of the snapshot stream's limit ({} bytes)",
            seq, (*upload)->manifest().bytes, options_.snapshot_max_bytes));
      }
      upload_ = std::move(*upload);
    }
    auto done = upload_->Step(*nats_, snapshot_chunks_);
    if (!done.ok()) return done.status();
    if (*done) {
      const SnapshotManifest& m = upload_->manifest();
      snapshot_seq_.store(m.seq, std::memory_order_relaxed);
      snapshot_chunks_ = m.chunks;
      Log(fmt::format("snapshot {} on the bus: {} bytes in {} message{} (stream {})", m.seq,
                      m.bytes, m.chunks, m.chunks == 1 ? "" : "s", snapshot_names_.stream));
      upload_.reset();
      snapshot_error_.clear();
    }
    return true;
  };
  auto did = step();
  if (did.ok()) return *did;
  // Never in the journal's way: the journal's records keep going, the
  // snapshot is tried again later, from its first chunk.
  const Status& st = did.status();
  errors_.fetch_add(1, std::memory_order_relaxed);
  upload_.reset();
  snapshots_ready_ = false;
  snapshot_check_at_ns_ = SteadyNs() + 10 * options_.snapshot_check.count() * kNsPerMs;
  if (st.message() != snapshot_error_) {
    snapshot_error_ = st.message();
    Log(fmt::format("snapshot not published: {} (tried again in {} ms)", st.message(),
                    10 * options_.snapshot_check.count()));
  }
  return false;
}

void ShutdownNats() { nats_CloseAndWait(2000); }

}  // namespace mb::bus
