#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mb {

Progress::Progress(std::string label, uint64_t total, std::string unit)
    : Progress(std::move(label), total, std::move(unit), ::isatty(STDERR_FILENO) == 1) {}

Progress::Progress(std::string label, uint64_t total, std::string unit, bool enabled)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (enabled_ && !finished_) std::fputs("\n", stderr);
}

void Progress::Finish(uint64_t done) {
  if (!enabled_ || finished_) return;
  Redraw(done, true);
  finished_ = true;
}

void Progress::Redraw(uint64_t done, bool final) {
  const auto now = std::chrono::steady_clock::now();
  if (!final && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  char left[64] = "";
  if (total_ > 0 && rate > 0 && !final) {
    const double remain = static_cast<double>(total_ > done ? total_ - done : 0) / rate;
    std::snprintf(left, sizeof left, ", %.1f s left", remain);
  }
  if (total_ > 0) {
    std::fprintf(stderr, "\r%s: %llu/%llu %s (%.0f%%), %.0f/s%s   %s", label_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 unit_.c_str(), 100.0 * static_cast<double>(done) / static_cast<double>(total_),
                 rate, left, final ? "\n" : "");
  } else {
    std::fprintf(stderr, "\r%s: %llu %s, %.0f/s   %s", label_.c_str(),
                 static_cast<unsigned long long>(done), unit_.c_str(), rate, final ? "\n" : "");
  }
  std::fflush(stderr);
}

}  // namespace mb
