// API keys' HMAC secrets sealed with the venue's master key, so that no
// journal record, snapshot, archive, backup or bus message holds one in
// plain text (docs/security.md, "What is encrypted where").
//
//   master key   32 random bytes, <data_dir>/master.key by default
//                ([security] master_key_file): 64 hex characters and a
//                newline, mode 0600 (a key others may read is refused).
//   secret       32 random bytes, given to the key's owner as 64 lower-case
//                hex characters (the HMAC key is that text, as Binance's).
//   sealed form  "e1:" + base64(AES-256-GCM ciphertext (32 bytes) + tag
//                (the first 12 bytes)), 63 characters: it fits where the
//                journal kept the secret (engine::AuthText, 64).
//                nonce = SHA-256("matchbook secret v1\n" + API key)[0, 12),
//                AAD = the API key. One API key has one secret, ever, so a
//                nonce never seals two texts under one master key; and a
//                sealed secret moved to another key does not open.
//
// A stored secret is sealed (SecretForm::kSealed), the plain text an earlier
// version wrote (kPlain), or blanked by `matchbook secrets scrub` once its key
// was revoked (kScrubbed: '*' repeated); Ed25519 keys keep their public key
// there instead, which is no secret.
//
// Thread safety: pure functions; a MasterKey is immutable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/image.h"

namespace mb::gateway {

inline constexpr std::size_t kMasterKeyBytes = 32;
inline constexpr std::size_t kSecretBytes = 32;
inline constexpr std::string_view kSealedPrefix = "e1:";
inline constexpr char kScrubbedChar = '*';

class MasterKey {
 public:
  static MasterKey Generate();  // OpenSSL RAND_bytes
  // 64 hex characters (surrounding white space ignored).
  static Result<MasterKey> FromHex(std::string_view text);
  std::string ToHex() const;

  // The stored form of a secret of kSecretBytes raw bytes for `api_key`.
  std::string Seal(std::string_view api_key, std::string_view raw_secret) const;
  // The raw secret; kInvalidArgument when the text is not a sealed form or
  // was not sealed by this key for this API key (another master key, another
  // API key, altered).
  Result<std::string> Open(std::string_view api_key, std::string_view sealed) const;

 private:
  std::array<uint8_t, kMasterKeyBytes> bytes_{};
};

// kSecretBytes random bytes (OpenSSL RAND_bytes): a new key's secret.
std::string NewRawSecret();

enum class SecretForm : uint8_t { kSealed, kPlain, kScrubbed };
SecretForm FormOf(std::string_view stored) noexcept;
// The stored text with every character kScrubbedChar (same length).
std::string Scrubbed(std::string_view stored);

// Reads the master key file (the option's name in every error). NotFound
// when it does not exist; kInvalidArgument when others may read it or it
// holds no key.
Result<MasterKey> LoadMasterKey(const std::filesystem::path& file);
// Writes a new key to `file` (0600, atomically). Error: it exists already.
Result<MasterKey> CreateMasterKey(const std::filesystem::path& file);

// What the HMAC keys of an image hold: sealed, plain (live and revoked) and
// scrubbed secrets.
struct SecretCensus {
  uint64_t sealed = 0;
  uint64_t plain_live = 0;
  uint64_t plain_revoked = 0;
  uint64_t scrubbed = 0;

  void Add(SecretForm form, bool revoked) noexcept;
};
SecretCensus CountSecrets(const engine::EngineImage& image);

// Whether `key` opens every sealed secret of `image`; the error names the
// first API key (its first 8 characters) whose secret it does not open and
// `file`.
Status CheckMasterKey(const MasterKey& key, const engine::EngineImage& image,
                      const std::filesystem::path& file);

}  // namespace mb::gateway
