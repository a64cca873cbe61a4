// Status and Result<T> for cold paths (configuration, files, network setup).
// The hot path never uses these: it returns small enums and emits reject events.
//
// Thread safety: plain values.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace mb {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // the input is malformed or inconsistent; the message names the field
  kOutOfRange,       // a value is outside what the domain can represent
  kNotFound,         // a named file, market, asset or record does not exist
  kCorruption,       // stored bytes fail a checksum or structural check
  kIoError,          // the operating system refused a read or write
  kInternal,         // a broken invariant; a bug
  kUnavailable,      // refused for now (queue full, journal failing, shutting down, in use); retry
                     // later
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace mb

#define MB_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::mb::Status mb_status_ = (expr);        \
    if (!mb_status_.ok()) return mb_status_; \
  } while (0)

// A broken invariant in release builds: log and abort.
#define MB_CHECK(cond)                                                                   \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "MB_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
