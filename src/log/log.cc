#include "log/log.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/details/file_helper.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <tuple>

#include "common/clock.h"
#include "common/json_escape.h"
#include "common/thread_annotations.h"

namespace mb::log {

namespace {

std::atomic<Level> g_level{Level::kInfo};
std::atomic<Format> g_format{Format::kText};
// The async logger, set by Init(). Replaced only by Init()/Shutdown(), which
// no Write() runs concurrently with (the header's contract for Shutdown);
// the mutex keeps a Write() racing Init() safe.
Mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger MB_GUARDED_BY(g_mu);
std::shared_ptr<spdlog::details::thread_pool> g_pool MB_GUARDED_BY(g_mu);

bool IsSecretKey(std::string_view key) {
  static constexpr std::array<std::string_view, 6> kSecret = {
      "secret", "token", "password", "signature", "apiSecret", "secretKey"};
  for (std::string_view s : kSecret) {
    if (key == s) return true;
  }
  return false;
}

// logfmt: bare when the value has no space, quote, '=' or control character.
void AppendTextValue(std::string* out, std::string_view s) {
  bool bare = !s.empty();
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == '"' || c == '=' || c == '\\') bare = false;
  }
  if (bare) {
    out->append(s);
  } else {
    AppendJsonString(s, out);
  }
}

// The line without its timestamp (the logger's pattern adds it).
std::string Body(Format format, Level level, std::string_view component, std::string_view message,
                 std::initializer_list<Field> fields) {
  std::string out;
  out.reserve(64 + message.size());
  if (format == Format::kJson) {
    out.append("\"level\":");
    AppendJsonString(ToString(level), &out);
    out.append(",\"component\":");
    AppendJsonString(component, &out);
    out.append(",\"msg\":");
    AppendJsonString(message, &out);
    for (const Field& f : fields) {
      out.push_back(',');
      AppendJsonString(f.key, &out);
      out.push_back(':');
      AppendJsonString(IsSecretKey(f.key) ? std::string_view("<redacted>") : f.value, &out);
    }
    out.push_back('}');
  } else {
    fmt::format_to(std::back_inserter(out), "{:<5} {}: ", ToString(level), component);
    // The message is free text; only its line breaks are escaped, so one
    // event stays one line.
    for (const char ch : message) {
      if (ch == '\n') {
        out.append("\\n");
      } else if (ch != '\r') {
        out.push_back(ch);
      }
    }
    for (const Field& f : fields) {
      out.push_back(' ');
      out.append(f.key);
      out.push_back('=');
      AppendTextValue(&out, IsSecretKey(f.key) ? std::string_view("<redacted>") : f.value);
    }
  }
  return out;
}

std::string Timestamp() {
  const int64_t ns = WallNs();
  const auto seconds = static_cast<time_t>(ns / 1'000'000'000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     ns % 1'000'000'000 / 1000);
}

// Ages are clamped to a century: time arithmetic in nanoseconds stays far
// from overflow, and no log lives that long.
constexpr std::chrono::hours kCentury{24 * 365 * 100};

// The UTC time of a log file's first line (text: the line starts with its
// timestamp; json: after {"ts":"), to the second; nullopt when there is none.
std::optional<std::chrono::system_clock::time_point> FirstLineTime(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size() - 1));
  head.resize(static_cast<std::size_t>(in.gcount()));
  std::string_view h = head;
  if (h.starts_with("{\"ts\":\"")) h.remove_prefix(7);
  const std::string stamp(h.substr(0, 19));  // yyyy-mm-ddThh:mm:ss
  tm utc{};
  char t = 0;
  if (std::sscanf(stamp.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &utc.tm_year, &utc.tm_mon,
                  &utc.tm_mday, &t, &utc.tm_hour, &utc.tm_min, &utc.tm_sec) != 7 ||
      t != 'T') {
    return std::nullopt;
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  const time_t secs = timegm(&utc);
  if (secs == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(secs);
}

// A file sink rotated by size and by age. spdlog 1.10's rotating sink
// cannot be told to rotate, so this one keeps the same chain (name.ext ->
// name.1.ext -> ... -> name.<max_files>.ext, the oldest dropped) and adds
// the age limit (log.h, Options). Only used with an age limit, so a log
// without one behaves exactly as before. Runs on the logger thread; the
// base class holds its mutex around sink_it_() and flush_().
class AgeRotatingFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Throws spdlog::spdlog_ex when the file cannot be opened (as spdlog's
  // sinks do; Init() turns it into a Status).
  AgeRotatingFileSink(std::string file, uint64_t max_bytes, uint32_t max_files,
                      std::chrono::hours max_age)
      : file_(std::move(file)),
        max_bytes_(max_bytes),
        max_files_(max_files),
        max_age_(std::min(max_age, kCentury)) {
    helper_.open(file_);
    size_ = helper_.size();  // a system call; once
    if (size_ > 0) {
      // Left by an earlier run: it has been aging since its first line.
      if (auto first = FirstLineTime(file_)) {
        born_ = *first;
      } else {
        std::error_code ec;
        const auto mtime = std::filesystem::last_write_time(file_, ec);
        born_ = ec ? std::chrono::system_clock::now()
                   : std::chrono::system_clock::now() -
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::filesystem::file_time_type::clock::now() - mtime);
      }
    }
    DeleteExpired();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    // Size as spdlog's rotating sink estimates it (the real size is asked
    // only when the estimate says to rotate); age against the line's own
    // time, so the check costs no clock read.
    const bool too_big = max_bytes_ != 0 && size_ + line.size() > max_bytes_;
    const bool too_old = size_ != 0 && msg.time - born_ >= max_age_;
    if (too_big || too_old) {
      helper_.flush();
      // An empty file is never rotated (a full disk would otherwise rotate
      // the chain away line by line; spdlog issue #2261).
      if (helper_.size() > 0) Rotate();
      size_ = 0;  // rotated, or found empty
    }
    if (size_ == 0) born_ = msg.time;
    helper_.write(line);
    size_ += line.size();
  }

  void flush_() override { helper_.flush(); }

 private:
  std::string Name(uint32_t index) const {
    if (index == 0) return file_;
    const auto [base, ext] = spdlog::details::file_helper::split_by_extension(file_);
    return fmt::format("{}.{}{}", base, index, ext);
  }

  void Rotate() {
    helper_.close();
    for (uint32_t i = max_files_; i > 0; --i) {
      const std::string from = Name(i - 1);
      std::error_code ec;
      if (!std::filesystem::exists(from, ec)) continue;  // a gap (an expired file)
      const std::string to = Name(i);
      std::filesystem::rename(from, to, ec);  // replaces `to`
      if (ec) {
        // Truncated anyway, so the live file cannot grow past its limits.
        helper_.reopen(true);
        size_ = 0;
        spdlog::throw_spdlog_ex(
            fmt::format("cannot rename the log {} to {}: {}", from, to, ec.message()));
      }
    }
    helper_.reopen(true);
    DeleteExpired();
  }

  // Rotated files last modified more than max_files x max_age ago.
  void DeleteExpired() {
    if (max_files_ == 0 || max_age_ * max_files_ > kCentury) return;
    const auto oldest = std::filesystem::file_time_type::clock::now() - max_age_ * max_files_;
    for (uint32_t i = 1; i <= max_files_; ++i) {
      const std::string name = Name(i);
      std::error_code ec;
      const auto mtime = std::filesystem::last_write_time(name, ec);
      if (!ec && mtime < oldest) std::filesystem::remove(name, ec);
    }
  }

  const std::string file_;
  const uint64_t max_bytes_;  // 0: no size limit
  const uint32_t max_files_;
  const std::chrono::hours max_age_;  // > 0
  spdlog::details::file_helper helper_;
  // The live file's size, estimated as spdlog does, and the time of its
  // first line.
  uint64_t size_ = 0;
  std::chrono::system_clock::time_point born_{};
};

void WriteSync(Format format, const std::string& body) {
  std::string line = format == Format::kJson ? "{\"ts\":\"" + Timestamp() + "\"," + body
                                             : Timestamp() + " " + body;
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

Result<Level> ParseLevel(std::string_view s) {
  if (s == "debug") return Level::kDebug;
  if (s == "info") return Level::kInfo;
  if (s == "warn") return Level::kWarn;
  if (s == "error") return Level::kError;
  return InvalidArgument(
      fmt::format("unknown log level \"{}\" (expected debug, info, warn or error)", s));
}

Result<Format> ParseFormat(std::string_view s) {
  if (s == "text") return Format::kText;
  if (s == "json") return Format::kJson;
  return InvalidArgument(fmt::format("unknown log format \"{}\" (expected text or json)", s));
}

std::string_view ToString(Level level) noexcept {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "?";
}

Status Init(const Options& options) {
  Shutdown();
  try {
    auto pool = std::make_shared<spdlog::details::thread_pool>(
        options.queue_lines, 1, [] { pthread_setname_np(pthread_self(), "mb-log"); });
    spdlog::sink_ptr sink;
    if (options.file.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    } else if (options.max_age_hours != 0) {
      sink = std::make_shared<AgeRotatingFileSink>(options.file, options.max_file_bytes,
                                                   options.max_files,
                                                   std::chrono::hours(options.max_age_hours));
    } else if (options.max_file_bytes == 0) {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, false);
    } else {
      sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
          options.file, static_cast<std::size_t>(options.max_file_bytes), options.max_files);
    }
    auto logger = std::make_shared<spdlog::async_logger>(
        "matchbook", std::move(sink), pool, spdlog::async_overflow_policy::overrun_oldest);
    logger->set_pattern(options.format == Format::kJson ? "{\"ts\":\"%Y-%m-%dT%H:%M:%S.%fZ\",%v"
                                                        : "%Y-%m-%dT%H:%M:%S.%fZ %v",
                        spdlog::pattern_time_type::utc);
    logger->set_level(spdlog::level::trace);
    logger->flush_on(spdlog::level::trace);  // on the logger thread, line by line
    g_level.store(options.level, std::memory_order_relaxed);
    g_format.store(options.format, std::memory_order_relaxed);
    MutexLock lock(g_mu);
    g_pool = std::move(pool);
    g_logger = std::move(logger);
  } catch (const spdlog::spdlog_ex& e) {
    return IoError(fmt::format("cannot open the log {}: {}",
                               options.file.empty() ? std::string("stderr") : options.file,
                               e.what()));
  }
  return Status::Ok();
}

void Shutdown() {
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<spdlog::details::thread_pool> pool;
  {
    MutexLock lock(g_mu);
    logger = std::move(g_logger);
    pool = std::move(g_pool);
  }
  // No flush() here: an async flush is queued under the overrun policy and
  // could overwrite a line still queued. Every line is flushed as it is
  // written (flush_on), and the pool's destructor drains the queue (its
  // terminate messages block rather than overwrite) and joins the thread.
  // The pool goes first, so the logger and its sink are destroyed after the
  // join — an order ThreadSanitizer can see (libspdlog.so is not instrumented).
  pool.reset();
  logger.reset();
}

void Write(Level level, std::string_view component, std::string_view message,
           std::initializer_list<Field> fields) {
  if (level < g_level.load(std::memory_order_relaxed)) return;
  const Format format = g_format.load(std::memory_order_relaxed);
  const std::string body = Body(format, level, component, message, fields);
  std::shared_ptr<spdlog::logger> logger;
  {
    MutexLock lock(g_mu);
    logger = g_logger;
  }
  if (!logger) return WriteSync(format, body);
  static constexpr std::array<spdlog::level::level_enum, 4> kLevels = {
      spdlog::level::debug, spdlog::level::info, spdlog::level::warn, spdlog::level::err};
  logger->log(kLevels[static_cast<std::size_t>(level)], spdlog::string_view_t(body));
}

std::function<void(std::string_view)> Sink(std::string component, Level level) {
  return [component = std::move(component), level](std::string_view line) {
    Write(level, component, line);
  };
}

uint64_t dropped() noexcept {
  MutexLock lock(g_mu);
  return g_pool ? static_cast<uint64_t>(g_pool->overrun_counter()) : 0;
}

std::string Redact(std::string_view text) {
  std::string out(text);
  // scheme://user:password@host
  for (std::size_t scheme = out.find("://"); scheme != std::string::npos;
       scheme = out.find("://", scheme + 3)) {
    const std::size_t start = scheme + 3;
    const std::size_t at = out.find('@', start);
    const std::size_t end = out.find_first_of("/ ?", start);
    if (at == std::string::npos || (end != std::string::npos && end < at)) continue;
    const std::size_t colon = out.find(':', start);
    if (colon == std::string::npos || colon > at) continue;
    out.replace(colon + 1, at - colon - 1, "<redacted>");
  }
  // password=... (libpq keyword strings, query parameters)
  for (std::size_t p = out.find("password="); p != std::string::npos;
       p = out.find("password=", p + 1)) {
    const std::size_t start = p + 9;
    std::size_t end = out.find_first_of(" &", start);
    if (end == std::string::npos) end = out.size();
    out.replace(start, end - start, "<redacted>");
  }
  return out;
}

}  // namespace mb::log
