#include "metrics/flight_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "common/clock.h"
#include "common/file.h"
#include "common/json_escape.h"

namespace mb::metrics {

namespace fs = std::filesystem;

// One kept trace. Every field is an atomic so that a reader racing the writer
// is well defined; the version makes the read all-or-nothing (I1).
struct FlightRecorder::Slot {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> account{0};
  std::atomic<uint16_t> http_status{0};
  std::atomic<const char*> kind{""};
  std::atomic<int64_t> ingress_ns{0};
  std::atomic<int64_t> submitted_ns{0};
  std::atomic<int64_t> sequenced_ns{0};
  std::atomic<int64_t> matched_ns{0};
  std::atomic<int64_t> journaled_ns{0};
  std::atomic<int64_t> durable_ns{0};
  std::atomic<int64_t> responded_ns{0};
};

namespace {

constexpr std::string_view kPrefix = "flight-";
constexpr std::string_view kSuffix = ".json";
constexpr std::string_view kTmpSuffix = ".json.tmp";
constexpr std::size_t kHeaderBytes = 4096;

// Milliseconds since the epoch with microsecond digits, exactly.
void AppendWallMs(fmt::memory_buffer* out, int64_t wall_ns) {
  const int64_t us = wall_ns / 1000;
  if (us < 0) {
    fmt::format_to(std::back_inserter(*out), "{}", static_cast<double>(us) / 1e3);
    return;
  }
  fmt::format_to(std::back_inserter(*out), "{}.{:03}", us / 1000, us % 1000);
}

void AppendStage(fmt::memory_buffer* out, std::string_view key, int64_t stage_ns,
                 int64_t ingress_ns) {
  fmt::format_to(std::back_inserter(*out), ",\"{}\":", key);
  if (stage_ns == 0 || ingress_ns == 0) {
    fmt::format_to(std::back_inserter(*out), "null");
  } else {
    fmt::format_to(std::back_inserter(*out), "{}",
                   static_cast<double>(stage_ns - ingress_ns) / 1e3);
  }
}

void AppendTrace(fmt::memory_buffer* out, const CommandTrace& t, int64_t wall_minus_mono_ns) {
  fmt::format_to(std::back_inserter(*out), "{{\"seq\":{},\"account\":{},\"kind\":", t.seq,
                 t.account);
  AppendJsonString(t.kind == nullptr ? "" : t.kind, out);
  fmt::format_to(std::back_inserter(*out), ",\"httpStatus\":{},\"ingress\":", t.http_status);
  if (t.ingress_ns == 0) {
    fmt::format_to(std::back_inserter(*out), "null");
  } else {
    AppendWallMs(out, t.ingress_ns + wall_minus_mono_ns);
  }
  AppendStage(out, "submittedUs", t.submitted_ns, t.ingress_ns);
  AppendStage(out, "sequencedUs", t.sequenced_ns, t.ingress_ns);
  AppendStage(out, "matchedUs", t.matched_ns, t.ingress_ns);
  AppendStage(out, "journaledUs", t.journaled_ns, t.ingress_ns);
  AppendStage(out, "durableUs", t.durable_ns, t.ingress_ns);
  AppendStage(out, "respondedUs", t.responded_ns, t.ingress_ns);
  out->push_back('}');
}

uint64_t LatencyNs(const CommandTrace& t) {
  if (t.ingress_ns == 0 || t.responded_ns <= t.ingress_ns) return 0;
  return static_cast<uint64_t>(t.responded_ns - t.ingress_ns);
}

template <class T>
bool ParseField(std::string_view text, std::string_view key, T* out) {
  const std::string quoted = fmt::format("\"{}\":", key);
  const std::size_t at = text.find(quoted);
  if (at == std::string_view::npos) return false;
  const char* begin = text.data() + at + quoted.size();
  return std::from_chars(begin, text.data() + text.size(), *out).ec == std::errc();
}

// The listing of a dump file left in the directory: its name gives the time
// and the trigger's sequence, its first bytes the rest.
bool ParseDumpFile(const fs::directory_entry& entry, FlightRecorder::DumpInfo* info) {
  const std::string name = entry.path().filename().string();
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0, ms = 0;
  unsigned long long seq = 0;
  if (std::sscanf(name.c_str(), "flight-%4d%2d%2dT%2d%2d%2d.%3d-seq%llu", &year, &mon, &day, &hour,
                  &min, &sec, &ms, &seq) != 8) {
    return false;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  info->file = name;
  info->wall_ms = static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
  info->trigger_seq = seq;
  std::error_code ec;
  info->bytes = entry.file_size(ec);
  if (ec) return false;
  std::ifstream in(entry.path(), std::ios::binary);
  std::string head(kHeaderBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  ParseField(head, "triggerLatencyNs", &info->trigger_latency_ns);
  ParseField(head, "traceCount", &info->traces);
  return true;
}

bool NewerFirst(const FlightRecorder::DumpInfo& a, const FlightRecorder::DumpInfo& b) {
  if (a.wall_ms != b.wall_ms) return a.wall_ms > b.wall_ms;
  return a.file > b.file;
}

}  // namespace

FlightRecorder::FlightRecorder(FlightRecorderOptions options)
    : options_(std::move(options)),
      mask_(std::bit_ceil(std::max<uint64_t>(options_.capacity, 2)) - 1),
      wall_minus_mono_ns_(WallNs() - SteadyNs()),
      slots_(std::make_unique<Slot[]>(mask_ + 1)) {}

FlightRecorder::~FlightRecorder() { Stop(); }

Status FlightRecorder::Start() {
  if (dumper_.running()) return Unavailable("flight recorder: already started");
  const fs::path& dir = options_.dir;
  if (dir.empty()) return InvalidArgument("flight recorder: no directory");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return IoError(
        fmt::format("flight recorder: cannot create {}: {}", dir.string(), ec.message()));
  }
  if (!fs::is_directory(dir, ec)) {
    return IoError(fmt::format("flight recorder: {} is not a directory", dir.string()));
  }
  std::vector<DumpInfo> found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    if (name.ends_with(kTmpSuffix)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);  // a dump a crash interrupted
      continue;
    }
    DumpInfo info;
    if (name.ends_with(kSuffix) && it->is_regular_file() && ParseDumpFile(*it, &info)) {
      found.push_back(std::move(info));
    }
  }
  if (ec) {
    return IoError(fmt::format("flight recorder: cannot list {}: {}", dir.string(), ec.message()));
  }
  std::sort(found.begin(), found.end(), NewerFirst);
  {
    MutexLock lock(dumps_mu_);
    dumps_ = std::move(found);
    Prune();
  }
  stopping_.store(false, std::memory_order_relaxed);
  (void)dumper_.Start();
  return Status::Ok();
}

void FlightRecorder::Stop() {
  // A pending dump is written at once (the runner drains before it stops).
  stopping_.store(true, std::memory_order_release);
  dumper_.Stop();
}

void FlightRecorder::Record(const CommandTrace& t) noexcept {
  const uint64_t n = recorded_.load(std::memory_order_relaxed);  // the writer's own counter
  Slot& s = slots_[n & mask_];
  // I1: the odd version goes first; each field store is a release so that a
  // reader which sees any new field value also sees the odd version.
  s.version.store(2 * n + 1, std::memory_order_relaxed);
  s.seq.store(t.seq, std::memory_order_release);
  s.account.store(t.account, std::memory_order_release);
  s.http_status.store(t.http_status, std::memory_order_release);
  s.kind.store(t.kind, std::memory_order_release);
  s.ingress_ns.store(t.ingress_ns, std::memory_order_release);
  s.submitted_ns.store(t.submitted_ns, std::memory_order_release);
  s.sequenced_ns.store(t.sequenced_ns, std::memory_order_release);
  s.matched_ns.store(t.matched_ns, std::memory_order_release);
  s.journaled_ns.store(t.journaled_ns, std::memory_order_release);
  s.durable_ns.store(t.durable_ns, std::memory_order_release);
  s.responded_ns.store(t.responded_ns, std::memory_order_release);
  s.version.store(2 * (n + 1), std::memory_order_release);  // I1: the trace is whole
  recorded_.store(n + 1, std::memory_order_release);        // I2

  if (options_.threshold_ns == 0) return;
  const uint64_t latency = LatencyNs(t);
  if (latency <= options_.threshold_ns) return;
  triggers_.fetch_add(1, std::memory_order_relaxed);
  const int64_t interval_ns = int64_t{options_.min_interval_ms} * 1'000'000;
  // I3: acquire pairs with the dumper's release once it is done with trigger_.
  if (pending_.load(std::memory_order_acquire) ||
      (last_trigger_ns_ != 0 && t.responded_ns - last_trigger_ns_ < interval_ns)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  last_trigger_ns_ = t.responded_ns;
  trigger_ = t;
  pending_.store(true, std::memory_order_release);  // I3: trigger_ is the dumper's now
  dumper_.Wake();
}

std::vector<CommandTrace> FlightRecorder::Recent(int64_t since_ns) const {
  std::vector<CommandTrace> out;
  const uint64_t end = recorded_.load(std::memory_order_acquire);  // I2
  const uint64_t capacity = mask_ + 1;
  for (uint64_t i = end > capacity ? end - capacity : 0; i < end; ++i) {
    const Slot& s = slots_[i & mask_];
    const uint64_t want = 2 * (i + 1);
    // I1: acquire pairs with the writer's final version store (the fields of
    // trace i are visible); the acquire field loads keep the second version
    // load after them.
    if (s.version.load(std::memory_order_acquire) != want) continue;
    CommandTrace t;
    t.seq = s.seq.load(std::memory_order_acquire);
    t.account = s.account.load(std::memory_order_acquire);
    t.http_status = s.http_status.load(std::memory_order_acquire);
    t.kind = s.kind.load(std::memory_order_acquire);
    t.ingress_ns = s.ingress_ns.load(std::memory_order_acquire);
    t.submitted_ns = s.submitted_ns.load(std::memory_order_acquire);
    t.sequenced_ns = s.sequenced_ns.load(std::memory_order_acquire);
    t.matched_ns = s.matched_ns.load(std::memory_order_acquire);
    t.journaled_ns = s.journaled_ns.load(std::memory_order_acquire);
    t.durable_ns = s.durable_ns.load(std::memory_order_acquire);
    t.responded_ns = s.responded_ns.load(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != want) continue;  // overwritten meanwhile
    if (t.ingress_ns >= since_ns) out.push_back(t);
  }
  return out;
}

int FlightRecorder::DoWork() {
  if (!pending_.load(std::memory_order_acquire)) return 0;  // I3
  // Capture what followed the slow command too (half a window after it),
  // unless stopping.
  const int64_t half_ns = int64_t{options_.window_ms / 2} * 1'000'000;
  const int64_t now = SteadyNs();
  if (dump_due_ns_ == 0) dump_due_ns_ = std::min(trigger_.responded_ns + half_ns, now + half_ns);
  if (!stopping_.load(std::memory_order_acquire) && now < dump_due_ns_) return 0;
  dump_due_ns_ = 0;
  const CommandTrace trigger = trigger_;  // I3
  const Status st = WriteDump(trigger);
  pending_.store(false, std::memory_order_release);  // I3: trigger_ is the writer's again
  // Release: whoever sees the count (stats() acquires it) sees the dump
  // listed and no longer pending.
  if (st.ok()) {
    dumps_written_.fetch_add(1, std::memory_order_release);
  } else {
    dump_errors_.fetch_add(1, std::memory_order_release);
    const std::string line = "flight recorder: dump not written: " + st.message();
    if (options_.log) {
      options_.log(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  return 1;
}

bool FlightRecorder::HasWork() const {
  // A new trigger (the dumper has not set its due time yet).
  return pending_.load(std::memory_order_acquire) && dump_due_ns_ == 0;
}

Status FlightRecorder::WriteDump(const CommandTrace& trigger) {
  const int64_t since = trigger.ingress_ns - int64_t{options_.window_ms} * 1'000'000;
  const std::vector<CommandTrace> traces = Recent(since);
  const uint64_t latency = LatencyNs(trigger);

  const int64_t wall_ms = WallMs();
  const std::time_t secs = static_cast<std::time_t>(wall_ms / 1000);
  std::tm utc{};
  ::gmtime_r(&secs, &utc);
  const std::string stem = fmt::format("flight-{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}-seq{}",
                                       utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                                       utc.tm_min, utc.tm_sec, wall_ms % 1000, trigger.seq);
  std::string name = fmt::format("{}{}", stem, kSuffix);
  std::error_code ec;
  for (int k = 1; fs::exists(options_.dir / name, ec); ++k) {
    name = fmt::format("{}-{}{}", stem, k, kSuffix);
  }

  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out),
                 "{{\"triggerSeq\":{},\"triggerLatencyNs\":{},\"traceCount\":{},"
                 "\"thresholdMs\":{},\"windowMs\":{},\"writtenAtMs\":{},\n\"trigger\":",
                 trigger.seq, latency, traces.size(),
                 static_cast<double>(options_.threshold_ns) / 1e6, options_.window_ms, wall_ms);
  AppendTrace(&out, trigger, wall_minus_mono_ns_);
  fmt::format_to(std::back_inserter(out), ",\n\"traces\":[");
  for (std::size_t i = 0; i < traces.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "{}\n", i == 0 ? "" : ",");
    AppendTrace(&out, traces[i], wall_minus_mono_ns_);
  }
  fmt::format_to(std::back_inserter(out), "\n]}}\n");

  // No fsync: a dump is a diagnostic written while commands are slow, and a
  // sync would compete with the journal's fdatasync on the same disk exactly
  // then (a power cut may lose the newest dump, never the journal). The
  // rename still keeps a reader from seeing half a dump.
  MB_RETURN_IF_ERROR(WriteFileAtomically(
      options_.dir / name, std::string_view(out.data(), out.size()), 0644, FileSync::kNone));

  DumpInfo info;
  info.file = name;
  info.wall_ms = wall_ms;
  info.trigger_seq = trigger.seq;
  info.trigger_latency_ns = latency;
  info.traces = static_cast<uint32_t>(traces.size());
  info.bytes = out.size();
  MutexLock lock(dumps_mu_);
  dumps_.insert(dumps_.begin(), std::move(info));
  Prune();
  return Status::Ok();
}

void FlightRecorder::Prune() {
  if (options_.max_age_hours != 0) {
    // By the file's modification time rather than the time in its name: the
    // two agree for the recorder's own dumps, and the file system's is the
    // one an operator sees (and a copied-in file carries). A stat per listed
    // dump, on the dumper thread, at most once per dump written.
    // Clamped to a century, far from overflowing the clock's nanoseconds.
    const auto oldest = fs::file_time_type::clock::now() -
                        std::chrono::hours(std::min<uint32_t>(options_.max_age_hours, 876'000));
    std::erase_if(dumps_, [&](const DumpInfo& d) {
      const fs::path path = options_.dir / d.file;
      std::error_code ec;
      const fs::file_time_type mtime = fs::last_write_time(path, ec);
      if (ec || mtime >= oldest) return false;
      fs::remove(path, ec);
      return true;
    });
  }
  if (options_.keep == 0) return;
  while (dumps_.size() > options_.keep) {
    std::error_code ec;
    fs::remove(options_.dir / dumps_.back().file, ec);
    dumps_.pop_back();
  }
}

std::vector<FlightRecorder::DumpInfo> FlightRecorder::Dumps() const {
  MutexLock lock(dumps_mu_);
  return dumps_;
}

Result<std::string> FlightRecorder::ReadDump(std::string_view file) const {
  {
    MutexLock lock(dumps_mu_);
    const bool listed = std::any_of(dumps_.begin(), dumps_.end(),
                                    [&](const DumpInfo& d) { return d.file == file; });
    if (!listed) return NotFound(fmt::format("no flight recorder dump named \"{}\"", file));
  }
  const fs::path path = options_.dir / std::string(file);
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("cannot open {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("cannot read {}", path.string()));
  return text.str();
}

FlightRecorder::Stats FlightRecorder::stats() const noexcept {
  return Stats{recorded_.load(std::memory_order_relaxed), triggers_.load(std::memory_order_relaxed),
               dumps_written_.load(std::memory_order_acquire),
               suppressed_.load(std::memory_order_relaxed),
               dump_errors_.load(std::memory_order_acquire)};
}

}  // namespace mb::metrics
