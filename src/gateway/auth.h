// Authentication: checking request signatures (Binance SIGNED endpoints:
// HMAC-SHA256 with a secret the exchange made, common/hmac.h; or Ed25519 with
// a public key the account's owner registered, OpenSSL), the
// timestamp/recvWindow window, and the store of accounts and API keys (fed
// from the journal's records) and of the admin token (a file in the data
// directory).
//
// Thread safety: the free functions are pure. KeyStore: every method from any
// thread (a shared_mutex), except LegacyChanges and RetireLegacyFile: the
// thread that starts the gateway, before it serves.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"  // Ed25519 keys and signatures are base64
#include "common/ed25519.h"
#include "common/status.h"
#include "common/strong.h"
#include "common/thread_annotations.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/image.h"
#include "gateway/api_error.h"
#include "gateway/sealed_secret.h"

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
  std::string key;  // 64 characters, public
  // HMAC keys: 64 characters, shown once at creation (empty when the store
  // cannot open it: a replica has no master key; a scrubbed key); Ed25519
  // keys: empty.
  std::string secret;
  AccountId account{};
  int64_t created_ms = 0;
  bool revoked = false;
  std::string ed25519_public_key;  // Ed25519 keys: the raw 32 bytes; HMAC keys: empty
  uint8_t permissions = kDefaultPermissions;
  SecretForm stored_form = SecretForm::kSealed;  // HMAC keys: how the journal holds the secret

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

// The accounts and API keys the engine recorded, served to every request,
// and <data_dir>/admin.token (0600, generated on first open). Accounts and
// keys live in the journal (AuthChange commands, AuthChanged events) and in
// the engine's snapshots: an operator call builds the command (NewAccount,
// NewKey, Revocation), the exchange journals it, and the store serves the
// change once the durable batch reaches it (Apply). A standby, a replica and
// a restarted server get the same store from the same records (Bootstrap
// from the recovered image, then Apply).
//
// <data_dir>/auth.json, where versions before that kept accounts and keys,
// is read at Open; LegacyChanges() gives what of it the journal still lacks.
//
// HMAC secrets are sealed with the venue's master key (gateway/sealed_secret.h)
// in every command and event: the store seals a new key's secret and opens
// each one it learns. Without a master key (a replica, which forwards
// signed calls, and never calls EnsureMasterKey) secrets stay sealed and
// unused.
class KeyStore {
 public:
  // Loads or creates admin.token, reads a legacy auth.json, and the master
  // key from `master_key_file` (empty: <data_dir>/master.key) when it
  // exists.
  // Error: unreadable/invalid files (named), a directory that cannot be
  // written.
  static Result<std::unique_ptr<KeyStore>> Open(const std::filesystem::path& data_dir,
                                                uint32_t max_accounts,
                                                const std::filesystem::path& master_key_file = {});

  // Once the recovered state is in (Bootstrap), before serving: the master
  // key must open every sealed secret (else the error names the file and a
  // key); a missing key file is made (0600) when no secret is sealed yet,
  // and is an error when one is. Plain secrets an earlier version wrote are
  // counted (secret_census) and keep working until rotated.
  Status EnsureMasterKey();
  SecretCensus secret_census() const;
  // The secret to give the key's owner for a stored form (a new key's
  // AuthChanged event): a sealed one opened, else empty.
  std::string OpenedSecret(std::string_view key, std::string_view stored) const;

  std::string admin_token() const;
  std::filesystem::path admin_token_path() const;
  bool CheckAdminToken(std::string_view token) const;  // constant time
  // A new random admin token replaces the old one, in admin.token (written
  // atomically, 0600) and at once for every check: the old one stops
  // working. Error: the file cannot be written (the old token stays).
  Result<std::string> RotateAdminToken();

  // Everything the image holds replaces what the store served.
  void Bootstrap(const engine::EngineImage& image);
  // The AuthChanged events among `events`, in order.
  void Apply(std::span<const engine::Event> events);

  std::optional<AccountInfo> FindAccount(AccountId id) const;
  std::vector<AccountInfo> Accounts() const;
  std::optional<ApiKey> FindKey(std::string_view key) const;  // revoked keys too
  std::vector<ApiKey> Keys(AccountId account) const;

  // The commands of the operator's calls. The engine has the last word (a
  // name taken meanwhile, no id left); these refuse early what the store
  // already shows: kInvalidArgument for a name outside the rules or taken, a
  // public key registered already; kNotFound for no such account or key;
  // kOutOfRange when no account id is left.
  Result<engine::AuthChange> NewAccount(std::string_view name, int64_t now_ms) const;
  // A new random API key; an HMAC key gets a random secret, an Ed25519 key
  // carries `ed25519_public_key` (the raw 32 bytes, ParseEd25519PublicKey).
  Result<engine::AuthChange> NewKey(AccountId account, int64_t now_ms, uint8_t permissions,
                                    std::string_view ed25519_public_key = {}) const;
  Result<engine::AuthChange> Revocation(std::string_view key) const;

  // What of a legacy auth.json the store does not hold yet, as commands in
  // the order they must be journaled (accounts by id, then keys oldest
  // first; a key the file says is revoked: its revocation when the store
  // has it, nothing when it does not). Empty without such a file.
  // kCorruption when the file and the store disagree (an account id with
  // another name, ids not 1, 2, ..., a key with another account, secret or
  // permissions, a public key two keys share): nothing may be imported then.
  Result<std::vector<engine::AuthChange>> LegacyChanges() const;
  // auth.json becomes auth.json.imported (kept for the operator), once
  // LegacyChanges() is journaled and served. Ok without such a file.
  Status RetireLegacyFile();

 private:
  KeyStore() = default;

  // The secret the store serves for `stored` (empty: none it can open); an
  // unopened sealed one is counted.
  std::string OpenSecret(std::string_view key, std::string_view stored) MB_REQUIRES(mu_);

  std::filesystem::path dir_;
  uint32_t max_accounts_ = 0;
  std::filesystem::path master_key_file_;
  mutable SharedMutex mu_;
  std::optional<MasterKey> master_ MB_GUARDED_BY(mu_);
  SecretCensus census_ MB_GUARDED_BY(mu_);    // of keys_, kept with it
  uint64_t unopened_ MB_GUARDED_BY(mu_) = 0;  // sealed secrets the master key did not open
  std::string first_unopened_ MB_GUARDED_BY(mu_);
  std::string admin_token_ MB_GUARDED_BY(mu_);
  std::map<uint32_t, AccountInfo> accounts_ MB_GUARDED_BY(mu_);
  std::map<std::string, ApiKey, std::less<>> keys_ MB_GUARDED_BY(mu_);
  // The legacy auth.json as read at Open (nothing when there was none).
  bool legacy_file_ = false;
  std::map<uint32_t, AccountInfo> legacy_accounts_;
  std::map<std::string, ApiKey, std::less<>> legacy_keys_;
};

}  // namespace mb::gateway
