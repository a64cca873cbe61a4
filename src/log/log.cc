#include "log/log.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <memory>

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
