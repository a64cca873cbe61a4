#include "gateway/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "common/base64.h"
#include "common/checked.h"
#include "common/decimal.h"
#include "common/file.h"
#include "common/hmac.h"

namespace mb::gateway {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::string_view kAuthFile = "auth.json";
constexpr std::string_view kAdminTokenFile = "admin.token";
constexpr std::size_t kKeyLength = 64;
constexpr std::size_t kAdminTokenLength = 64;
// An operator may write their own admin token: these bounds keep it from
// being trivially guessable or absurd.
constexpr std::size_t kMinAdminTokenLength = 32;
constexpr std::size_t kMaxAdminTokenLength = 1024;
constexpr std::size_t kMaxNameLength = 64;
constexpr int64_t kFileVersion = 1;
constexpr int64_t kMaxRecvWindowMs = 60'000;
constexpr int64_t kMaxAheadMs = 1'000;

bool IsAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsToken(std::string_view s, std::size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), IsAlnum);
}

Status CheckAccountName(std::string_view name) {
  if (name.empty()) return InvalidArgument("account name is empty");
  if (name.size() > kMaxNameLength) {
    return InvalidArgument("account name is longer than " + std::to_string(kMaxNameLength) +
                           " characters");
  }
  for (char c : name) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') {
      return InvalidArgument("account name '" + std::string(name) +
                             "' has a character outside [A-Za-z0-9_.-]");
    }
  }
  return Status::Ok();
}

// Secrets (API secrets, the admin token) are written 0600 from the first byte.
constexpr std::string_view kMasterKeyFile = "master.key";

Status WriteSecretFileAtomically(const fs::path& path, std::string_view bytes) {
  return WriteFileAtomically(path, bytes, 0600);
}

// The file's bytes, or nullopt when it does not exist.
Result<std::optional<std::string>> ReadIfExists(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return std::optional<std::string>();
  if (ec) return IoError(path.string() + ": stat: " + ec.message());
  if (st.type() != fs::file_type::regular) return IoError(path.string() + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(path, "open", errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoStatus(path, "read", errno);
  return std::optional<std::string>(std::move(text).str());
}

// ---- auth.json ----
//
// {"version":1,
//  "accounts":[{"id":1,"name":"alice","created_ms":1700000000000}],
//  "keys":[{"key":"<64>","secret":"<64>","account":1,"created_ms":...,"revoked":false}]}
// An Ed25519 key has "secret":"" and "ed25519":"<base64 of the raw 32-byte public key>".

std::optional<int64_t> GetInt64(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr) return std::nullopt;
  if (const int64_t* i = v->if_int64()) return *i;
  if (const uint64_t* u = v->if_uint64()) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(*u);
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> GetString(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr) return std::nullopt;
  if (const json::string* s = v->if_string()) return std::string_view(*s);
  return std::nullopt;
}

struct Loaded {
  std::map<uint32_t, AccountInfo> accounts;
  std::map<std::string, ApiKey, std::less<>> keys;
};

// Why the document is not a valid store, or "" with *out filled.
std::string ParseAuthJson(std::string_view text, uint32_t max_accounts, Loaded* out) {
  boost::system::error_code ec;
  const json::value doc = json::parse(text, ec);
  if (ec) return "not valid JSON: " + ec.message();
  const json::object* root = doc.if_object();
  if (root == nullptr) return "the document is not a JSON object";
  const std::optional<int64_t> version = GetInt64(*root, "version");
  if (version != kFileVersion) return "\"version\" is missing or not 1";
  const json::value* accounts_v = root->if_contains("accounts");
  const json::value* keys_v = root->if_contains("keys");
  if (accounts_v == nullptr || !accounts_v->is_array()) return "\"accounts\" is not an array";
  if (keys_v == nullptr || !keys_v->is_array()) return "\"keys\" is not an array";

  Loaded loaded;
  std::set<std::string_view> names;
  std::size_t index = 0;
  for (const json::value& v : accounts_v->get_array()) {
    const std::string where = "accounts[" + std::to_string(index++) + "]";
    const json::object* o = v.if_object();
    if (o == nullptr) return where + " is not an object";
    const std::optional<int64_t> id = GetInt64(*o, "id");
    const std::optional<std::string_view> name = GetString(*o, "name");
    const std::optional<int64_t> created = GetInt64(*o, "created_ms");
    if (!id || !name || !created) return where + " needs \"id\", \"name\" and \"created_ms\"";
    if (*id < 1 || *id >= static_cast<int64_t>(max_accounts)) {
      return where + ": id " + std::to_string(*id) + " is outside 1.." +
             std::to_string(static_cast<int64_t>(max_accounts) - 1) + " (max_accounts " +
             std::to_string(max_accounts) + ")";
    }
    if (Status s = CheckAccountName(*name); !s.ok()) return where + ": " + s.message();
    const auto raw_id = static_cast<uint32_t>(*id);
    if (loaded.accounts.count(raw_id) != 0) {
      return where + ": id " + std::to_string(*id) + " appears twice";
    }
    if (!names.insert(*name).second) {
      return where + ": name '" + std::string(*name) + "' appears twice";
    }
    loaded.accounts.emplace(raw_id, AccountInfo{AccountId{raw_id}, std::string(*name), *created});
  }
  index = 0;
  for (const json::value& v : keys_v->get_array()) {
    const std::string where = "keys[" + std::to_string(index++) + "]";
    const json::object* o = v.if_object();
    if (o == nullptr) return where + " is not an object";
    const std::optional<std::string_view> key = GetString(*o, "key");
    const std::optional<std::string_view> secret = GetString(*o, "secret");
    const std::optional<int64_t> account = GetInt64(*o, "account");
    const std::optional<int64_t> created = GetInt64(*o, "created_ms");
    const json::value* revoked = o->if_contains("revoked");
    if (!key || !secret || !account || !created || revoked == nullptr || !revoked->is_bool()) {
      return where +
             " needs \"key\", \"secret\", \"account\", \"created_ms\" and a boolean \"revoked\"";
    }
    std::string ed25519;
    if (const json::value* pk = o->if_contains("ed25519")) {
      const std::optional<std::string> raw =
          pk->is_string() ? Base64Decode(pk->get_string()) : std::nullopt;
      if (!raw || raw->size() != kEd25519KeyBytes || !secret->empty()) {
        return where + ": \"ed25519\" must be the base64 of 32 bytes, with an empty secret";
      }
      ed25519 = *raw;
    }
    if (!IsToken(*key, kKeyLength) || (ed25519.empty() && !IsToken(*secret, kKeyLength))) {
      return where + ": key and secret must be 64 characters of [A-Za-z0-9]";
    }
    if (*account < 1 || *account > std::numeric_limits<uint32_t>::max() ||
        loaded.accounts.count(static_cast<uint32_t>(*account)) == 0) {
      return where + ": account " + std::to_string(*account) + " does not exist";
    }
    ApiKey k;
    k.key = std::string(*key);
    k.secret = std::string(*secret);
    k.account = AccountId{static_cast<uint32_t>(*account)};
    k.created_ms = *created;
    k.revoked = revoked->get_bool();
    k.ed25519_public_key = std::move(ed25519);
    // Optional: keys written before permissions existed read and trade.
    if (const json::value* p = o->if_contains("permissions")) {
      const std::optional<uint8_t> bits = ParsePermissions(*p);
      if (!bits) return where + ": \"permissions\" must list READ, TRADE or WITHDRAW";
      k.permissions = *bits;
    }
    if (!loaded.keys.emplace(k.key, k).second) return where + ": the key appears twice";
  }
  *out = std::move(loaded);
  return "";
}

// The token in admin.token (surrounding whitespace ignored), or why not.
std::string ParseAdminToken(std::string_view text, std::string* out) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.size() < kMinAdminTokenLength || text.size() > kMaxAdminTokenLength) {
    return "the token must have " + std::to_string(kMinAdminTokenLength) + " to " +
           std::to_string(kMaxAdminTokenLength) + " characters";
  }
  for (char c : text) {
    if (c <= ' ' || c > '~') return "the token has a character that is not printable ASCII";
  }
  *out = std::string(text);
  return "";
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Lengths are not secret (keys and signatures have fixed lengths).
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

bool SignatureEquals(std::string_view expected_hex, std::string_view given_hex) {
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  };
  return ConstantTimeEquals(lower(expected_hex), lower(given_hex));
}

bool VerifySignature(const ApiKey& key, std::string_view payload, std::string_view signature) {
  if (key.is_ed25519()) {
    const std::optional<std::string> raw = Base64Decode(signature);
    return raw && Ed25519Verify(key.ed25519_public_key, payload, *raw);
  }
  // An HMAC key always has its secret; an empty one would make any
  // signature of the empty secret pass.
  if (key.secret.empty()) return false;
  return SignatureEquals(HmacSha256Hex(key.secret, payload), signature);
}

int64_t TimestampToMillis(int64_t ts) noexcept {
  if (ts < kMicrosFrom) return ts;
  return ts / 1'000;
}

std::optional<ApiError> CheckTimestampUs(int64_t timestamp, int64_t recv_window_us,
                                         int64_t now_us) {
  // In 128 bits: a client's timestamp may be any int64.
  const int128 ts_us = timestamp >= kMicrosFrom ? static_cast<int128>(timestamp)
                                                : static_cast<int128>(timestamp) * 1'000;
  const int128 ahead = ts_us - now_us;
  if (ahead >= kMaxAheadMs * 1'000) {
    return ApiError{400, -1021,
                    "Timestamp for this request was 1000ms ahead of the server's time."};
  }
  if (-ahead > recv_window_us) return ApiError::TimestampOutside();
  return std::nullopt;
}

std::optional<ApiError> CheckTimestamp(int64_t timestamp, int64_t recv_window_ms, int64_t now_ms) {
  if (recv_window_ms < 1 || recv_window_ms > kMaxRecvWindowMs) {
    return ApiError::BadParam("recvWindow", "It must be between 1 and 60000 milliseconds.");
  }
  return CheckTimestampUs(timestamp, recv_window_ms * 1'000,
                          static_cast<int64_t>(static_cast<int128>(now_ms) * 1'000));
}

std::optional<ApiError> ParseRecvWindow(std::optional<std::string_view> text, int64_t* window_us) {
  if (!text) {
    *window_us = 5'000'000;
    return std::nullopt;
  }
  if (text->empty()) return ApiError::EmptyParam("recvWindow");
  int64_t us = 0;
  switch (TryParseDecimal(*text, 3, /*allow_negative=*/true, &us)) {
    case DecimalError::kOk:
      break;
    case DecimalError::kTooManyDecimals:
      return ApiError::TooMuchPrecision("recvWindow");
    case DecimalError::kOverflow:
      us = -1;  // out of range below
      break;
    default:
      return ApiError::IllegalChars("recvWindow");
  }
  if (us <= 0 || us > kMaxRecvWindowMs * 1'000) {
    return ApiError::BadParam("recvWindow",
                              "It must be more than 0 and at most 60000 milliseconds.");
  }
  *window_us = us;
  return std::nullopt;
}

std::string RandomToken(std::size_t length) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static_assert(kAlphabet.size() == 62);
  // Bytes >= 248 (= 4 * 62) are dropped so that byte % 62 is uniform.
  constexpr unsigned kLimit = 4 * kAlphabet.size();
  std::string out;
  out.reserve(length);
  std::array<unsigned char, 64> buf{};
  while (out.size() < length) {
    // Without randomness no secret may be made: a broken invariant of the host.
    MB_CHECK(RAND_bytes(buf.data(), static_cast<int>(buf.size())) == 1);
    for (unsigned char b : buf) {
      if (b >= kLimit) continue;
      out.push_back(kAlphabet[b % kAlphabet.size()]);
      if (out.size() == length) break;
    }
  }
  return out;
}

// ---- KeyStore ----

namespace {

AccountInfo InfoOf(const engine::ImageAccount& a) {
  return AccountInfo{a.id, std::string(a.name.view()), a.created_ms};
}

// The key as the journal holds it: `secret` is the stored form (HMAC keys;
// KeyStore::OpenSecret makes it the served one).
ApiKey KeyOf(AccountId account, int64_t created_ms, uint8_t permissions, bool ed25519, bool revoked,
             std::string_view key, std::string_view secret) {
  ApiKey k;
  k.key = std::string(key);
  k.account = account;
  k.created_ms = created_ms;
  k.permissions = permissions;
  k.revoked = revoked;
  if (ed25519) {
    // The engine keeps the public key as base64; the store serves the raw bytes.
    k.ed25519_public_key = Base64Decode(secret).value_or(std::string());
  } else {
    k.secret = std::string(secret);
    k.stored_form = FormOf(secret);
  }
  return k;
}

engine::AuthChange Change(engine::AuthChangeKind kind, AccountId account, int64_t created_ms,
                          std::string_view subject) {
  engine::AuthChange c;
  c.kind = kind;
  c.account = account;
  c.created_ms = created_ms;
  // Names and keys are at most 64 characters (CheckAccountName, kKeyLength).
  MB_CHECK(c.subject.Assign(subject));
  return c;
}

engine::AuthChange KeyChange(const ApiKey& k) {
  engine::AuthChange c = Change(engine::AuthChangeKind::kCreateKey, k.account, k.created_ms, k.key);
  c.permissions = k.permissions;
  c.ed25519 = k.is_ed25519();
  MB_CHECK(c.secret.Assign(c.ed25519 ? Base64Encode(k.ed25519_public_key) : k.secret));
  return c;
}

}  // namespace

Result<std::unique_ptr<KeyStore>> KeyStore::Open(const fs::path& data_dir, uint32_t max_accounts,
                                                 const fs::path& master_key_file) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) return IoError(data_dir.string() + ": create directory: " + ec.message());

  std::unique_ptr<KeyStore> store(new KeyStore());
  store->dir_ = data_dir;
  store->max_accounts_ = max_accounts;
  store->master_key_file_ = master_key_file.empty() ? data_dir / kMasterKeyFile : master_key_file;
  std::optional<MasterKey> master;
  if (auto key = LoadMasterKey(store->master_key_file_); key.ok()) {
    master = *key;
  } else if (key.status().code() != StatusCode::kNotFound) {
    return key.status();
  }
  const fs::path auth_path = data_dir / kAuthFile;
  const fs::path token_path = store->admin_token_path();

  // Both files are read and checked before anything is written: a bad file
  // fails the open and is left as it is for the operator to look at.
  Result<std::optional<std::string>> auth_text = ReadIfExists(auth_path);
  if (!auth_text.ok()) return auth_text.status();
  Result<std::optional<std::string>> token_text = ReadIfExists(token_path);
  if (!token_text.ok()) return token_text.status();

  if (auth_text->has_value()) {
    Loaded loaded;
    const std::string why = ParseAuthJson(**auth_text, max_accounts, &loaded);
    if (!why.empty()) return Corruption(auth_path.string() + ": " + why);
    store->legacy_file_ = true;
    store->legacy_accounts_ = std::move(loaded.accounts);
    store->legacy_keys_ = std::move(loaded.keys);
  }
  std::string token;
  if (token_text->has_value()) {
    const std::string why = ParseAdminToken(**token_text, &token);
    if (!why.empty()) return Corruption(token_path.string() + ": " + why);
  } else {
    token = RandomToken(kAdminTokenLength);
    MB_RETURN_IF_ERROR(WriteSecretFileAtomically(token_path, token + "\n"));
  }
  WriterLock lock(store->mu_);  // uncontended: no other thread has the store yet
  store->admin_token_ = std::move(token);
  store->master_ = master;
  return Result<std::unique_ptr<KeyStore>>(std::move(store));
}

fs::path KeyStore::admin_token_path() const { return dir_ / kAdminTokenFile; }

std::string KeyStore::admin_token() const {
  ReaderLock lock(mu_);
  return admin_token_;
}

bool KeyStore::CheckAdminToken(std::string_view token) const {
  ReaderLock lock(mu_);
  return ConstantTimeEquals(admin_token_, token);
}

Result<std::string> KeyStore::RotateAdminToken() {
  std::string token = RandomToken(kAdminTokenLength);
  WriterLock lock(mu_);
  MB_RETURN_IF_ERROR(WriteSecretFileAtomically(admin_token_path(), token + "\n"));
  admin_token_ = token;
  return token;
}

std::string KeyStore::OpenSecret(std::string_view key, std::string_view stored) {
  switch (FormOf(stored)) {
    case SecretForm::kPlain:
      return std::string(stored);  // an earlier version's: it works until rotated
    case SecretForm::kScrubbed:
      return {};
    case SecretForm::kSealed:
      break;
  }
  if (!master_) return {};
  auto raw = master_->Open(key, stored);
  if (!raw.ok()) {
    if (unopened_++ == 0) first_unopened_ = std::string(key.substr(0, 8));
    return {};
  }
  return HexEncode(*raw);
}

std::string KeyStore::OpenedSecret(std::string_view key, std::string_view stored) const {
  ReaderLock lock(mu_);
  if (FormOf(stored) != SecretForm::kSealed || !master_) return {};
  auto raw = master_->Open(key, stored);
  return raw.ok() ? HexEncode(*raw) : std::string();
}

void KeyStore::Bootstrap(const engine::EngineImage& image) {
  std::map<uint32_t, AccountInfo> accounts;
  std::map<std::string, ApiKey, std::less<>> keys;
  for (const engine::ImageAccount& a : image.accounts) accounts.emplace(Raw(a.id), InfoOf(a));
  WriterLock lock(mu_);
  unopened_ = 0;
  first_unopened_.clear();
  census_ = {};
  for (const engine::ImageApiKey& k : image.api_keys) {
    ApiKey key = KeyOf(k.account, k.created_ms, k.permissions, k.ed25519, k.revoked, k.key.view(),
                       k.secret.view());
    if (!key.is_ed25519()) {
      key.secret = OpenSecret(key.key, key.secret);
      census_.Add(key.stored_form, key.revoked);
    }
    keys.emplace(key.key, std::move(key));
  }
  accounts_ = std::move(accounts);
  keys_ = std::move(keys);
}

void KeyStore::Apply(std::span<const engine::Event> events) {
  for (const engine::Event& e : events) {
    const auto* a = std::get_if<engine::AuthChanged>(&e.body);
    if (a == nullptr) continue;
    WriterLock lock(mu_);
    switch (a->kind) {
      case engine::AuthChangeKind::kCreateAccount:
        accounts_[Raw(a->account)] =
            AccountInfo{a->account, std::string(a->subject.view()), a->created_ms};
        break;
      case engine::AuthChangeKind::kCreateKey: {
        ApiKey key = KeyOf(a->account, a->created_ms, a->permissions, a->ed25519, false,
                           a->subject.view(), a->secret.view());
        if (!key.is_ed25519()) {
          key.secret = OpenSecret(key.key, key.secret);
          census_.Add(key.stored_form, false);
        }
        keys_[key.key] = std::move(key);
        break;
      }
      case engine::AuthChangeKind::kRevokeKey:
        if (auto it = keys_.find(a->subject.view()); it != keys_.end()) {
          ApiKey& k = it->second;
          if (!k.revoked && !k.is_ed25519() && k.stored_form == SecretForm::kPlain) {
            --census_.plain_live;
            ++census_.plain_revoked;
          }
          k.revoked = true;
        }
        break;
    }
  }
}

Status KeyStore::EnsureMasterKey() {
  WriterLock lock(mu_);
  const SecretCensus census = census_;
  if (master_) {
    if (unopened_ > 0) {
      return InvalidArgument(fmt::format(
          "[security] master_key_file: {} does not open the secret of API key {}... ({} in all) "
          "in this data directory: it is not the master key its secrets were sealed with",
          master_key_file_.string(), first_unopened_, unopened_));
    }
    return Status::Ok();
  }
  // Made since Open (by another gateway of the same venue): used when no
  // sealed secret waited for it.
  if (auto late = LoadMasterKey(master_key_file_); late.ok() && census.sealed == 0) {
    master_ = *late;
    return Status::Ok();
  } else if (!late.ok() && late.status().code() != StatusCode::kNotFound) {
    return late.status();
  }
  if (census.sealed > 0) {
    return NotFound(fmt::format(
        "[security] master_key_file: {} does not exist, and {} API key secrets in this data "
        "directory are sealed with a master key: copy the venue's master.key there (mode 0600) "
        "or name it with --master-key / [security] master_key_file",
        master_key_file_.string(), census.sealed));
  }
  auto key = CreateMasterKey(master_key_file_);
  if (!key.ok()) return key.status();
  master_ = *key;
  return Status::Ok();
}

SecretCensus KeyStore::secret_census() const {
  ReaderLock lock(mu_);
  return census_;
}

std::optional<AccountInfo> KeyStore::FindAccount(AccountId id) const {
  ReaderLock lock(mu_);
  const auto it = accounts_.find(Raw(id));
  if (it == accounts_.end()) return std::nullopt;
  return it->second;
}

std::vector<AccountInfo> KeyStore::Accounts() const {
  ReaderLock lock(mu_);
  std::vector<AccountInfo> out;
  out.reserve(accounts_.size());
  for (const auto& [id, a] : accounts_) out.push_back(a);
  return out;
}

Result<engine::AuthChange> KeyStore::NewAccount(std::string_view name, int64_t now_ms) const {
  MB_RETURN_IF_ERROR(CheckAccountName(name));
  ReaderLock lock(mu_);
  for (const auto& [id, a] : accounts_) {
    if (a.name == name) return InvalidArgument("account name '" + std::string(name) + "' is taken");
  }
  // Ids are dense from 1 (accounts are never deleted); 0 is the fee account.
  const uint64_t next = accounts_.empty() ? 1 : uint64_t{accounts_.rbegin()->first} + 1;
  if (next >= max_accounts_) {
    return OutOfRange("no account id left: max_accounts is " + std::to_string(max_accounts_) +
                      " (ids 1.." + std::to_string(max_accounts_ > 0 ? max_accounts_ - 1 : 0) +
                      ", 0 is the fee account)");
  }
  return Change(engine::AuthChangeKind::kCreateAccount, AccountId{}, now_ms, name);
}

Result<engine::AuthChange> KeyStore::NewKey(AccountId account, int64_t now_ms, uint8_t permissions,
                                            std::string_view ed25519_public_key) const {
  if (!ed25519_public_key.empty() && ed25519_public_key.size() != kEd25519KeyBytes) {
    return InvalidArgument("an Ed25519 public key has 32 bytes");
  }
  ApiKey k;
  k.account = account;
  k.created_ms = now_ms;
  k.permissions = permissions;
  k.ed25519_public_key = std::string(ed25519_public_key);
  ReaderLock lock(mu_);
  if (accounts_.count(Raw(account)) == 0) {
    return NotFound("account " + std::to_string(Raw(account)) + " does not exist");
  }
  if (k.is_ed25519()) {
    for (const auto& [name, existing] : keys_) {
      if (existing.ed25519_public_key == k.ed25519_public_key) {
        return InvalidArgument("this public key is already registered");
      }
    }
  } else if (!master_) {
    return InvalidArgument(
        "no master key to seal the secret with (a replica makes no keys; a server loads or "
        "makes [security] master_key_file at start)");
  }
  do {
    k.key = RandomToken(kKeyLength);
  } while (keys_.count(k.key) != 0);  // 62^64 keys: a repeat is a formality
  if (!k.is_ed25519()) {
    // 32 random bytes, given as 64 hex characters; the journal holds them sealed.
    k.secret = master_->Seal(k.key, NewRawSecret());
  }
  return KeyChange(k);
}

Result<engine::AuthChange> KeyStore::Revocation(std::string_view key) const {
  ReaderLock lock(mu_);
  const auto it = keys_.find(key);
  if (it == keys_.end()) return NotFound("no such API key");
  return Change(engine::AuthChangeKind::kRevokeKey, it->second.account, 0, key);
}

Result<std::vector<engine::AuthChange>> KeyStore::LegacyChanges() const {
  std::vector<engine::AuthChange> out;
  if (!legacy_file_) return out;
  const std::string file = (dir_ / kAuthFile).string();
  ReaderLock lock(mu_);
  uint32_t expected = 1;
  for (const auto& [id, a] : legacy_accounts_) {
    if (id != expected++) {
      return Corruption(file + ": account ids are not 1, 2, ... (" + std::to_string(id) +
                        " follows " + std::to_string(expected - 2) + "): cannot import it");
    }
    const auto it = accounts_.find(id);
    if (it == accounts_.end()) {
      out.push_back(Change(engine::AuthChangeKind::kCreateAccount, a.id, a.created_ms, a.name));
    } else if (it->second.name != a.name) {
      return Corruption(file + ": account " + std::to_string(id) + " is '" + a.name +
                        "' there and '" + it->second.name + "' in the journal: cannot import it");
    }
  }
  std::vector<const ApiKey*> keys;
  for (const auto& [key, k] : legacy_keys_) keys.push_back(&k);
  std::sort(keys.begin(), keys.end(), [](const ApiKey* a, const ApiKey* b) {
    return a->created_ms != b->created_ms ? a->created_ms < b->created_ms : a->key < b->key;
  });
  // Everything is checked before anything is journaled: a file the engine
  // would refuse half-way could never be imported.
  std::set<std::string, std::less<>> public_keys;
  for (const auto& [key, k] : keys_) {
    if (k.is_ed25519()) public_keys.insert(k.ed25519_public_key);
  }
  for (const ApiKey* k : keys) {
    const auto it = keys_.find(k->key);
    if (it != keys_.end()) {
      const ApiKey& j = it->second;
      if (j.account != k->account || j.secret != k->secret ||
          j.ed25519_public_key != k->ed25519_public_key || j.permissions != k->permissions) {
        return Corruption(file + ": key " + k->key.substr(0, 8) +
                          "... differs from the journal's: cannot import it");
      }
      // Revoked there since: the journal learns it.
      if (k->revoked && !j.revoked) {
        out.push_back(Change(engine::AuthChangeKind::kRevokeKey, k->account, 0, k->key));
      }
      continue;
    }
    // A revoked key that never reached the journal stays out of it: it could
    // only ever be refused, and journaling it before its revocation would
    // leave a moment in which it works.
    if (k->revoked) continue;
    if (k->is_ed25519() && !public_keys.insert(k->ed25519_public_key).second) {
      return Corruption(file + ": key " + k->key.substr(0, 8) +
                        "... has a public key another key has: cannot import it");
    }
    out.push_back(KeyChange(*k));
  }
  return out;
}

Status KeyStore::RetireLegacyFile() {
  if (!legacy_file_) return Status::Ok();
  const fs::path from = dir_ / kAuthFile;
  fs::path to = from;
  to += ".imported";
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IoError(from.string() + ": rename to " + to.filename().string() + ": " + ec.message());
  }
  legacy_file_ = false;
  return Status::Ok();
}

std::vector<std::string> PermissionNames(uint8_t permissions) {
  std::vector<std::string> out;
  if ((permissions & kRead) != 0) out.emplace_back("READ");
  if ((permissions & kTrade) != 0) out.emplace_back("TRADE");
  if ((permissions & kWithdraw) != 0) out.emplace_back("WITHDRAW");
  return out;
}

std::optional<uint8_t> ParsePermissions(const json::value& names) {
  if (!names.is_array() || names.get_array().empty()) return std::nullopt;
  uint8_t bits = 0;
  for (const json::value& name : names.get_array()) {
    if (!name.is_string()) return std::nullopt;
    const std::string_view n = name.get_string();
    const uint8_t bit = n == "READ"       ? kRead
                        : n == "TRADE"    ? kTrade
                        : n == "WITHDRAW" ? kWithdraw
                                          : 0;
    if (bit == 0) return std::nullopt;
    bits = static_cast<uint8_t>(bits | bit);
  }
  return bits;
}

std::optional<ApiKey> KeyStore::FindKey(std::string_view key) const {
  ReaderLock lock(mu_);
  const auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

std::vector<ApiKey> KeyStore::Keys(AccountId account) const {
  std::vector<ApiKey> out;
  {
    ReaderLock lock(mu_);
    for (const auto& [key, k] : keys_) {
      if (k.account == account) out.push_back(k);
    }
  }
  // Oldest first; the key breaks ties so that the order is stable.
  std::sort(out.begin(), out.end(), [](const ApiKey& a, const ApiKey& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.key < b.key;
  });
  return out;
}

}  // namespace mb::gateway
