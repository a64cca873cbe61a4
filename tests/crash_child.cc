// crash_child: the process tests/crash_test.cc kills. It opens an Exchange on
// a data directory (recovering whatever an earlier, killed child left there),
// then submits a pre-generated command stream from where recovery ended, as
// one producer, in order, until it is killed with SIGKILL.
//
//   crash_child <data_dir> <stream_file> <accounts> <expected_open_orders>
//               <fsync policy> <commands per second, 0: flat out> <seed>
//
// The stream file is the codec encoding of every command (setup included),
// back to back; every command takes one sequence, so journal record k is the
// outcome of stream command k - 1. The engine configuration is
// bench::BenchConfig(accounts, expected_open_orders).
//
// stdout is a pipe to the parent. Each line is one fact, and lines reach the
// pipe only in write(2) calls of whole lines of at most PIPE_BUF bytes, so
// they are atomic: a SIGKILL can lose lines, never cut or interleave one.
//
//   R <recovered seq> <state hash> <snapshot seq> <replayed records>
//                                 after Open, before the first Submit
//   D <seq> <xxh3 of the encoded events of its outcome>
//                                 OnDone(kDurable): the command is durable
//   S <seq> <state hash>          a snapshot file at seq is durable
//   E <commands>                  all submitted; idle until killed
//
// Hashes are 16 hex digits. Anything unexpected (a refusal, an outcome that is
// not durable, a sequence that is not the command's) is printed to stderr and
// ends the process with exit code 3, which the parent reports as a failure.
#include <fmt/format.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "common/file.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/writer.h"
#include "workload/engine_workload.h"

namespace mb {
namespace {

[[noreturn]] void Die(std::string_view what) {
  std::fprintf(stderr, "crash_child: %.*s\n", static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::_Exit(3);
}

// One write(2) of whole lines; REQUIRES bytes.size() <= PIPE_BUF.
void WriteLines(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Die(fmt::format("write to the parent's pipe: {}", std::strerror(errno)));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Completions: one "D" line per durable command, buffered on the journal
// thread and written at the end of each durable batch (on_durable), or
// earlier when the next line would make the write larger than PIPE_BUF.
class Reporter : public exchange::Completion {
 public:
  void OnDone(uint64_t tag, const exchange::Outcome& o) noexcept override {
    if (o.state != exchange::Outcome::State::kDurable) {
      Die(fmt::format("command {} completed with state {}, not durable", tag,
                      static_cast<int>(o.state)));
    }
    if (Raw(o.seq) != tag + 1) {
      Die(fmt::format("command {} got sequence {}; one producer in order means {}", tag, Raw(o.seq),
                      tag + 1));
    }
    encoded_.resize(o.events.size() * codec::kMaxEventSize);
    std::size_t size = 0;
    for (const engine::Event& e : o.events) {
      const std::size_t n =
          codec::Encode(e, std::span<std::byte>(encoded_.data() + size, codec::kMaxEventSize));
      if (n == 0) Die(fmt::format("command {}: an event does not encode", tag));
      size += n;
    }
    const uint64_t hash = XXH3_64bits(encoded_.data(), size);
    std::array<char, 64> line{};
    const auto r = fmt::format_to_n(line.data(), line.size(), "D {} {:016x}\n", Raw(o.seq), hash);
    const auto len = static_cast<std::size_t>(r.out - line.data());
    if (pending_.size() + len > PIPE_BUF) Flush();
    pending_.append(line.data(), len);
  }

  // Journal thread, after the OnDone calls of a durable batch.
  void Flush() {
    if (pending_.empty()) return;
    WriteLines(pending_);
    pending_.clear();
  }

 private:
  // Journal thread only.
  std::vector<std::byte> encoded_;
  std::string pending_;
};

std::vector<engine::Command> ReadStream(const std::filesystem::path& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) Die(bytes.status().message());
  std::vector<engine::Command> out;
  std::span<const std::byte> in(*bytes);
  while (!in.empty()) {
    engine::Command c;
    const codec::DecodeResult r = codec::Decode(in, &c);
    if (!r.ok()) {
      Die(fmt::format("{}: command {} does not decode: {}", path.string(), out.size(),
                      codec::ToString(r.error)));
    }
    out.push_back(c);
    in = in.subspan(r.consumed);
  }
  return out;
}

uint64_t ParseU64(const char* text, const char* what) {
  uint64_t v = 0;
  const std::string_view s(text);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    Die(fmt::format("{}: \"{}\" is not a number", what, s));
  }
  return v;
}

int Run(int argc, char** argv) {
  if (argc != 8) {
    Die("usage: crash_child <data_dir> <stream_file> <accounts> <expected_open_orders> "
        "<fsync policy> <commands per second> <seed>");
  }
  // Never outlive the test that started us, even when it crashes.
  const pid_t parent = ::getppid();
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) Die("parent gone");
  const auto accounts = static_cast<uint32_t>(ParseU64(argv[3], "accounts"));
  const auto open_orders = static_cast<uint32_t>(ParseU64(argv[4], "expected_open_orders"));
  const uint64_t rate = ParseU64(argv[6], "commands per second");
  bench::Rng rng(ParseU64(argv[7], "seed"));

  Reporter reporter;
  exchange::ExchangeOptions o;
  o.engine = bench::BenchConfig(accounts, open_orders);
  o.data_dir = argv[1];
  if (Status s = journal::ParseFsyncPolicy(argv[5], &o.journal); !s.ok()) Die(s.message());
  // Small segments: rolls (and kills during them) happen every run.
  o.journal.segment_bytes = 1u << 20;
  // Frequent snapshots: recovery uses snapshot + journal replay, and kills
  // land while snapshots are being written.
  o.snapshots.every_events = 10'000;
  o.snapshots.every_seconds = 0;
  o.snapshots.keep = 3;
  o.on_durable = [&reporter](std::span<const engine::Event>) { reporter.Flush(); };
  o.on_snapshot = [](const journal::SnapshotMeta& m) {
    WriteLines(fmt::format("S {} {:016x}\n", m.seq, m.state_hash));
  };

  // Open first, so that a kill soon after the start lands in recovery.
  auto opened = exchange::Exchange::Open(std::move(o));
  if (!opened.ok()) Die(opened.status().message());
  exchange::Exchange& ex = **opened;
  const journal::RecoveryReport& rec = ex.recovery();

  const std::vector<engine::Command> stream = ReadStream(argv[2]);
  if (rec.recovered_seq > stream.size()) {
    Die(fmt::format("recovered sequence {} is beyond the stream's {} commands", rec.recovered_seq,
                    stream.size()));
  }
  WriteLines(fmt::format("R {} {:016x} {} {}\n", rec.recovered_seq, rec.state_hash,
                         rec.snapshot_seq, rec.replayed_records));

  // Paced load: chunks of 1..2048 commands submitted flat out (big engine
  // batches and write groups), then a pause whenever the run is ahead of
  // `rate` commands per second (small ones).
  constexpr uint64_t kMaxChunk = 2048;
  const auto start = std::chrono::steady_clock::now();
  uint64_t submitted = 0;
  std::size_t next = rec.recovered_seq;
  while (next < stream.size()) {
    if (rate != 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (static_cast<double>(submitted) >= elapsed * static_cast<double>(rate)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
    }
    const uint64_t chunk = 1 + rng.Below(kMaxChunk);
    for (uint64_t k = 0; k < chunk && next < stream.size(); ++k, ++next, ++submitted) {
      exchange::SubmitResult r;
      while ((r = ex.Submit(stream[next], &reporter, next)) == exchange::SubmitResult::kFull) {
        std::this_thread::yield();
      }
      if (r != exchange::SubmitResult::kOk) {
        Die(fmt::format("Submit of command {}: {} {}", next, exchange::ToString(r),
                        ex.RefusalReason()));
      }
    }
  }
  WriteLines(fmt::format("E {}\n", stream.size()));
  for (;;) ::pause();
}

}  // namespace
}  // namespace mb

int main(int argc, char** argv) { return mb::Run(argc, argv); }
