// A progress line for long replays, verifies and dumps: records done, rate and
// time left, redrawn at most five times a second on stderr — and only when
// stderr is a terminal, so logs and pipes stay clean.
//
// Thread safety: one thread per Progress.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mb {

class Progress {
 public:
  // total == 0: unknown (no percentage or time left). enabled defaults to
  // "stderr is a terminal".
  Progress(std::string label, uint64_t total, std::string unit = "records");
  Progress(std::string label, uint64_t total, std::string unit, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cheap when called often: redraws only every 200 ms.
  void Update(uint64_t done) {
    if (enabled_ && (++calls_ & 1023) == 0) Redraw(done, false);
  }
  void SetTotal(uint64_t total) { total_ = total; }
  // Final line (when enabled); idempotent.
  void Finish(uint64_t done);

  bool enabled() const { return enabled_; }

 private:
  void Redraw(uint64_t done, bool final);

  std::string label_;
  std::string unit_;
  uint64_t total_;
  bool enabled_;
  bool finished_ = false;
  uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mb
