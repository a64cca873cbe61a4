// Structured, levelled, asynchronous logs.
//
// One line per event: a UTC timestamp taken when the event happened, the
// level, the component that speaks, the message and optional key=value
// fields. Two formats:
//
//   text  2026-12-01T01:40:00.123456Z info  exchange: recovered sequence 10 (snapshot 0) key=value
//   json  {"ts":"2026-12-01T01:40:00.123456Z","level":"info","component":"exchange",
//          "msg":"recovered sequence 10 (snapshot 0)","key":"value"}
//
// Asynchronous: a call formats its line into a bounded queue and returns; a
// logger thread (spdlog's async logger) writes. When the queue is full the
// oldest queued line is overwritten and counted (dropped()), so no thread —
// the engine's and journal's included — ever waits for the terminal or the
// disk. Before Init() (tests, tools) and after Shutdown() lines are written
// synchronously to stderr in the text format.
//
// Secrets: callers never pass API secrets, admin tokens or passwords; values
// of fields whose key names a secret ("secret", "token", "password",
// "signature", "apiSecret") are written as "<redacted>", and Redact() strips
// the password from a connection URL.
//
// Thread safety: Write() and the helpers from any thread. Init() and
// Shutdown() from one thread, with no concurrent Write() during Shutdown().
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mb::log {

enum class Level : uint8_t { kDebug, kInfo, kWarn, kError };
enum class Format : uint8_t { kText, kJson };

struct Options {
  Level level = Level::kInfo;
  Format format = Format::kText;
  std::string file;  // empty: stderr
  // A file is rotated when it would pass max_file_bytes (0: no size limit)
  // or when it has been written for max_age_hours (0: no age limit): name.ext
  // -> name.1.ext -> ... -> name.<max_files>.ext (the oldest dropped). With
  // an age limit, a rotated file last modified more than max_files x
  // max_age_hours ago is deleted too (at Init() and at each rotation), so a
  // quiet log does not keep a month-old tail around.
  //
  // The age of the file is counted from its first line: a file left by an
  // earlier run goes on aging from the timestamp its first line carries (its
  // modification time when that line cannot be read), so restarts do not
  // postpone the rotation. The check is one comparison per line.
  uint64_t max_file_bytes = uint64_t{64} << 20;
  uint32_t max_files = 5;
  uint32_t max_age_hours = 0;
  std::size_t queue_lines = 8192;  // lines queued before the oldest is overwritten
};

// "debug" | "info" | "warn" | "error"; "text" | "json".
Result<Level> ParseLevel(std::string_view s);
Result<Format> ParseFormat(std::string_view s);
std::string_view ToString(Level level) noexcept;

// Starts the logger thread. Error: the file cannot be opened (named).
Status Init(const Options& options);
// Writes what is queued and stops the logger thread.
void Shutdown();

struct Field {
  std::string_view key;
  std::string value;
};

void Write(Level level, std::string_view component, std::string_view message,
           std::initializer_list<Field> fields = {});
inline void Debug(std::string_view component, std::string_view message,
                  std::initializer_list<Field> fields = {}) {
  Write(Level::kDebug, component, message, fields);
}
inline void Info(std::string_view component, std::string_view message,
                 std::initializer_list<Field> fields = {}) {
  Write(Level::kInfo, component, message, fields);
}
inline void Warn(std::string_view component, std::string_view message,
                 std::initializer_list<Field> fields = {}) {
  Write(Level::kWarn, component, message, fields);
}
inline void Error(std::string_view component, std::string_view message,
                  std::initializer_list<Field> fields = {}) {
  Write(Level::kError, component, message, fields);
}

// A line-callback (ExchangeOptions::log, ProjectorOptions::log) writing
// through this logger as `component` at `level`.
std::function<void(std::string_view)> Sink(std::string component, Level level = Level::kInfo);

// Lines overwritten because the queue was full, since Init().
uint64_t dropped() noexcept;

// The text with any password of a URL (scheme://user:password@host) or a
// libpq keyword string (password=...) replaced by "<redacted>".
std::string Redact(std::string_view text);

}  // namespace mb::log
