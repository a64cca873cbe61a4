// Authentication: checking HMAC-SHA256 request signatures (Binance SIGNED
// endpoints; common/hmac.h computes them), the timestamp/recvWindow window,
// and the store of accounts, API keys and the admin token, persisted in the
// data directory.
//
// Thread safety: the free functions are pure. KeyStore: every method from any
// thread (a shared_mutex; writes also rewrite the file atomically).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "common/thread_annotations.h"
#include "gateway/api_error.h"

namespace mb::gateway {

// Constant-time equality of two hex signatures (case-insensitive hex), such as
// the HmacSha256Hex (common/hmac.h) of a payload and the signature sent with it.
bool SignatureEquals(std::string_view expected_hex, std::string_view given_hex);
// Binance takes `timestamp`, `startTime` and `endTime` in ms or in µs and
// tells them apart by size: a value of 10^13 or more (in ms, a date after the
// year 2286) is µs.
inline constexpr int64_t kMicrosFrom = 10'000'000'000'000;
// A timestamp in ms or µs (by kMicrosFrom) → ms, rounded down.
int64_t TimestampToMillis(int64_t ts) noexcept;

// Binance: -1021 when timestamp >= now + 1000 ms or now - timestamp > recvWindow.
// `timestamp` in ms or µs (kMicrosFrom); recv_window_us and now_us in µs.
std::optional<ApiError> CheckTimestampUs(int64_t timestamp, int64_t recv_window_us, int64_t now_us);
// The same with a whole-ms recvWindow, which must be in 1..60000 (else -1130
// on 'recvWindow').
std::optional<ApiError> CheckTimestamp(int64_t timestamp, int64_t recv_window_ms, int64_t now_ms);
// recvWindow as Binance takes it: ms with up to three decimals (µs), more
// than 0 and at most 60000; absent: 5000. In µs. Errors: empty -1105, not a
// decimal -1100, a fourth decimal -1111, out of range -1130.
std::optional<ApiError> ParseRecvWindow(std::optional<std::string_view> text, int64_t* window_us);

// Random printable token of `length` [A-Za-z0-9] characters (OpenSSL RAND_bytes).
std::string RandomToken(std::size_t length);

struct ApiKey {
  std::string key;     // 64 characters, public
  std::string secret;  // 64 characters, shown once at creation
  AccountId account{};
  int64_t created_ms = 0;
  bool revoked = false;
};

struct AccountInfo {
  AccountId id{};
  std::string name;
  int64_t created_ms = 0;
};

// <data_dir>/auth.json (0600): accounts, API keys (secrets included: HMAC
// needs them) and <data_dir>/admin.token (0600, generated on first open).
class KeyStore {
 public:
  // Loads or creates the files. Error: unreadable/invalid files (named), a
  // directory that cannot be written.
  static Result<std::unique_ptr<KeyStore>> Open(const std::filesystem::path& data_dir,
                                                uint32_t max_accounts);

  const std::string& admin_token() const noexcept { return admin_token_; }
  std::filesystem::path admin_token_path() const;
  bool CheckAdminToken(std::string_view token) const;  // constant time

  // Accounts get ids 1, 2, ... (0 is the fee account). Error when the
  // engine's max_accounts is reached or the name is taken.
  Result<AccountInfo> CreateAccount(std::string name, int64_t now_ms);
  std::optional<AccountInfo> FindAccount(AccountId id) const;
  std::vector<AccountInfo> Accounts() const;

  Result<ApiKey> CreateKey(AccountId account, int64_t now_ms);  // account must exist
  Status RevokeKey(std::string_view key);                       // kNotFound
  std::optional<ApiKey> FindKey(std::string_view key) const;    // revoked keys too
  std::vector<ApiKey> Keys(AccountId account) const;

 private:
  KeyStore() = default;
  Status Save() const MB_REQUIRES(mu_);

  std::filesystem::path dir_;
  uint32_t max_accounts_ = 0;
  std::string admin_token_;
  mutable SharedMutex mu_;
  std::map<uint32_t, AccountInfo> accounts_ MB_GUARDED_BY(mu_);
  std::map<std::string, ApiKey, std::less<>> keys_ MB_GUARDED_BY(mu_);
};

}  // namespace mb::gateway
