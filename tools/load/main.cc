// matchbook-load: an open-loop load generator for `matchbook serve`
// (docs/load.md). Exit status: 0 a complete run, 1 set-up failed or the run
// was aborted (the report says why), 2 a bad argument.
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "load/load.h"
#include "load/options.h"
#include "load/report.h"

namespace {

void OnSigint(int) { mb::load::g_stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  auto options = mb::load::ParseOptions(argc, argv);
  if (!options.ok()) {
    if (options.status().code() == mb::StatusCode::kNotFound) return 0;  // --help
    fmt::print(stderr, "matchbook-load: {}\n", options.status().message());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto report = mb::load::RunLoad(*options);
  if (!report.ok()) {
    fmt::print(stderr, "matchbook-load: {}\n", report.status().message());
    return 1;
  }
  int rc = report->aborted ? 1 : 0;
  if (!options->out_dir.empty()) {
    if (mb::Status s = mb::load::WriteFiles(*report, options->out_dir); !s.ok()) {
      fmt::print(stderr, "matchbook-load: {}\n", s.message());
      rc = 1;
    }
  }
  if (report->aborted) fmt::print(stderr, "matchbook-load: aborted: {}\n", *report->aborted);
  if (options->json) {
    std::cout << mb::load::ToJson(*report) << std::endl;
  } else {
    std::cout << mb::load::HumanSummary(*report) << std::flush;
  }
  return rc;
}
