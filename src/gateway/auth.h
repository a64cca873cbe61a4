// Authentication: checking request signatures (Binance SIGNED endpoints:
// HMAC-SHA256 with a secret the exchange made, common/hmac.h; or Ed25519 with
// a public key the account's owner registered, OpenSSL), the
// timestamp/recvWindow window, and the store of accounts, API keys and the
// admin token, persisted in the data directory.
//
// Thread safety: the free functions are pure. KeyStore: every method from any
// thread (a shared_mutex; writes also rewrite the file atomically).
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"  // Ed25519 keys and signatures are base64
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

// An Ed25519 public key as an operator registers it: PEM ("-----BEGIN PUBLIC
// KEY-----", as Binance asks for it), base64 of that DER SubjectPublicKeyInfo,
// or base64 of the raw 32 bytes. The raw 32 bytes, or nullopt when it is none
// of these or not an Ed25519 key.
std::optional<std::string> ParseEd25519PublicKey(std::string_view text);
// RFC 8032 Ed25519 verification (OpenSSL's EVP_DigestVerify): a raw 32-byte
// public key, a 64-byte signature. False on any other size.
bool Ed25519Verify(std::string_view public_key, std::string_view message,
                   std::string_view signature);

// What a key may do, as Binance's keys (enableReading, enableSpotAndMarginTrading,
// enableWithdrawals): a bit set. A new key reads and trades; withdrawing is
// granted by the operator only.
enum Permission : uint8_t { kRead = 1, kTrade = 2, kWithdraw = 4 };
inline constexpr uint8_t kDefaultPermissions = kRead | kTrade;
inline constexpr uint8_t kAllPermissions = kRead | kTrade | kWithdraw;
// A non-empty JSON array of "READ", "TRADE", "WITHDRAW" → their bits;
// nullopt for anything else (another name, not an array, empty).
std::optional<uint8_t> ParsePermissions(const boost::json::value& names);
std::vector<std::string> PermissionNames(uint8_t permissions);

struct ApiKey {
  std::string key;     // 64 characters, public
  std::string secret;  // HMAC keys: 64 characters, shown once at creation; Ed25519 keys: empty
  AccountId account{};
  int64_t created_ms = 0;
  bool revoked = false;
  std::string ed25519_public_key;  // Ed25519 keys: the raw 32 bytes; HMAC keys: empty
  uint8_t permissions = kDefaultPermissions;

  bool is_ed25519() const noexcept { return !ed25519_public_key.empty(); }
};

// Whether `signature` is `key`'s signature of `payload`: hex HMAC-SHA256 with
// the secret (either letter case) for an HMAC key, base64 Ed25519 for an
// Ed25519 key (as Binance takes them).
bool VerifySignature(const ApiKey& key, std::string_view payload, std::string_view signature);

struct AccountInfo {
  AccountId id{};
  std::string name;
  int64_t created_ms = 0;
};

// <data_dir>/auth.json (0600): accounts, API keys (HMAC secrets included:
// HMAC needs them; Ed25519 public keys) and <data_dir>/admin.token (0600, generated on first open).
class KeyStore {
 public:
  // Loads or creates the files. Error: unreadable/invalid files (named), a
  // directory that cannot be written.
  static Result<std::unique_ptr<KeyStore>> Open(const std::filesystem::path& data_dir,
                                                uint32_t max_accounts);

  std::string admin_token() const;
  std::filesystem::path admin_token_path() const;
  bool CheckAdminToken(std::string_view token) const;  // constant time
  // A new random admin token replaces the old one, in admin.token (written
  // atomically, 0600) and at once for every check: the old one stops
  // working. Error: the file cannot be written (the old token stays).
  Result<std::string> RotateAdminToken();

  // Accounts get ids 1, 2, ... (0 is the fee account). Error when the
  // engine's max_accounts is reached or the name is taken.
  Result<AccountInfo> CreateAccount(std::string name, int64_t now_ms);
  std::optional<AccountInfo> FindAccount(AccountId id) const;
  std::vector<AccountInfo> Accounts() const;

  Result<ApiKey> CreateKey(AccountId account, int64_t now_ms,
                           uint8_t permissions = kDefaultPermissions);  // account must exist
  // An Ed25519 key: the API key for the raw 32-byte `public_key` (see
  // ParseEd25519PublicKey). Error: no such account, a key not 32 bytes, a
  // public key already registered.
  Result<ApiKey> CreateEd25519Key(AccountId account, std::string public_key, int64_t now_ms,
                                  uint8_t permissions = kDefaultPermissions);
  Status RevokeKey(std::string_view key);                     // kNotFound
  std::optional<ApiKey> FindKey(std::string_view key) const;  // revoked keys too
  std::vector<ApiKey> Keys(AccountId account) const;

  // Every later change (accounts, keys, revocations) is handed to
  // `replicate` as the whole auth.json before it is written here; an error
  // refuses the change (docs/failover.md: a standby has it the moment it
  // takes over). Set before the store is shared between threads.
  void SetReplication(std::function<Status(std::string_view auth_json)> replicate);
  // The auth.json a change would write now.
  std::string AuthJson() const;
  // A standby takes its primary's accounts and keys (an auth.json as
  // AuthJson() gives it): checked, written to this store's auth.json, then
  // served; the admin token stays this server's. kCorruption, nothing
  // changed, when the text is not a valid key store.
  Status Adopt(std::string_view auth_json);

 private:
  KeyStore() = default;
  Status Save() const MB_REQUIRES(mu_);

  std::filesystem::path dir_;
  uint32_t max_accounts_ = 0;
  mutable SharedMutex mu_;
  std::string admin_token_ MB_GUARDED_BY(mu_);
  std::map<uint32_t, AccountInfo> accounts_ MB_GUARDED_BY(mu_);
  std::map<std::string, ApiKey, std::less<>> keys_ MB_GUARDED_BY(mu_);
  std::function<Status(std::string_view)> replicate_;
};

// A standby: `auth_json` (as a primary's KeyStore wrote it) checked and
// written to <data_dir>/auth.json atomically, for the KeyStore that opens
// it when the standby takes over.
Status WriteAuthFile(const std::filesystem::path& data_dir, std::string_view auth_json,
                     uint32_t max_accounts);

}  // namespace mb::gateway
