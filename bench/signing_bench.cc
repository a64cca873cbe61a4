#include "signing_bench.h"

#include <fmt/core.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bus/signing.h"
#include "cli.h"
#include "stats.h"

namespace mb::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct SigningOptions {
  uint64_t repeat = 2000;
  std::vector<uint64_t> records = {1, 16, 1000};
  uint64_t record_bytes = 150;
  bool json = false;
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Phase {
  Percentiles ns;
  double per_s = 0;           // messages per second of wall time
  double cpu_us_per_rec = 0;  // process CPU per record
};

template <class F>
Phase Time(uint64_t repeat, uint64_t records, F&& f) {
  std::vector<int64_t> ns;
  ns.reserve(repeat);
  const double cpu0 = CpuSeconds();
  const auto t0 = SteadyClock::now();
  for (uint64_t i = 0; i < repeat; ++i) {
    const auto a = SteadyClock::now();
    f(i);
    ns.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - a).count());
  }
  const double wall = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  Phase p;
  p.ns = Summarize(&ns);
  p.per_s = static_cast<double>(repeat) / wall;
  p.cpu_us_per_rec = cpu * 1e6 / static_cast<double>(repeat * records);
  return p;
}

int Run(const SigningOptions& o) {
  auto key = Ed25519Key::Generate();
  if (!key.ok()) {
    std::fprintf(stderr, "%s\n", key.status().message().c_str());
    return 1;
  }
  auto pub = Ed25519PublicKey::FromRaw(key->public_key());
  const bus::BusSigner signer(*key);
  const bus::BusVerifier verifier(*pub);
  std::string json = "{\"benchmark\":\"signing\",\"cases\":[";
  fmt::print(
      "{:>8} {:>9} | {:>7} {:>7} {:>7} {:>7} {:>9} {:>8} | {:>7} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
      "records", "bytes", "sign50", "sign99", "s99.9", "smax", "msg/s", "cpu/rec", "ver50", "ver99",
      "v99.9", "vmax", "msg/s", "cpu/rec");
  for (std::size_t c = 0; c < o.records.size(); ++c) {
    const uint64_t n = o.records[c];
    std::vector<std::byte> body(n * o.record_bytes);
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::byte>(i * 131 + 7);
    std::vector<std::string> sigs(o.repeat);
    const Phase sign = Time(o.repeat, n, [&](uint64_t i) {
      body[0] = static_cast<std::byte>(i);  // a different message each time
      sigs[i] = signer.Sign(bus::SignedKind::kJournal, "MATCHBOOK_bench", std::to_string(i), body);
    });
    uint64_t bad = 0;
    const Phase verify = Time(o.repeat, n, [&](uint64_t i) {
      body[0] = static_cast<std::byte>(i);
      if (!verifier
               .Verify(bus::SignedKind::kJournal, "MATCHBOOK_bench", std::to_string(i), body,
                       sigs[i].c_str())
               .ok()) {
        ++bad;
      }
    });
    if (bad != 0) {
      std::fprintf(stderr, "%llu signatures did not verify\n",
                   static_cast<unsigned long long>(bad));
      return 1;
    }
    const auto us = [](int64_t ns) { return static_cast<double>(ns) / 1e3; };
    fmt::print(
        "{:>8} {:>9} | {:>7.1f} {:>7.1f} {:>7.1f} {:>7.1f} {:>9.0f} {:>8.3f} | {:>7.1f} {:>7.1f} "
        "{:>7.1f} {:>7.1f} {:>9.0f} {:>8.3f}\n",
        n, body.size(), us(sign.ns.p50), us(sign.ns.p99), us(sign.ns.p999), us(sign.ns.max),
        sign.per_s, sign.cpu_us_per_rec, us(verify.ns.p50), us(verify.ns.p99), us(verify.ns.p999),
        us(verify.ns.max), verify.per_s, verify.cpu_us_per_rec);
    json += fmt::format(
        R"({}{{"records":{},"bytes":{},"sign_p50_ns":{},"sign_p99_ns":{},"sign_p999_ns":{},)"
        R"("sign_max_ns":{},"sign_per_s":{:.0f},"sign_cpu_us_per_record":{:.4f},)"
        R"("verify_p50_ns":{},"verify_p99_ns":{},"verify_p999_ns":{},"verify_max_ns":{},)"
        R"("verify_per_s":{:.0f},"verify_cpu_us_per_record":{:.4f}}})",
        c == 0 ? "" : ",", n, body.size(), sign.ns.p50, sign.ns.p99, sign.ns.p999, sign.ns.max,
        sign.per_s, sign.cpu_us_per_rec, verify.ns.p50, verify.ns.p99, verify.ns.p999,
        verify.ns.max, verify.per_s, verify.cpu_us_per_rec);
  }
  fmt::print("(µs per message; msg/s on one core; cpu/rec: process CPU µs per journal record)\n");
  if (o.json) fmt::print("{}]}}\n", json);
  return 0;
}

}  // namespace

std::function<int()> AddSigningBench(CLI::App* app) {
  auto o = std::make_shared<SigningOptions>();
  CLI::App* sub = app->add_subcommand(
      "signing", "The bus key's cost: Ed25519 signing and verification per journal message");
  sub->add_option("--repeat", o->repeat, "Messages signed and verified per size")
      ->transform(DecimalCount())
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  sub->add_option("--records", o->records, "Records per message, one case each (default 1 16 1000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000}));
  sub->add_option("--record-bytes", o->record_bytes, "Bytes per framed record (default 150)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
  sub->add_flag("--json", o->json, "Print one JSON object as the last line");
  return [o] { return Run(*o); };
}

}  // namespace mb::bench
