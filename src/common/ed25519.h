// Ed25519 (RFC 8032) keys and signatures, OpenSSL underneath: the public
// keys API clients register (gateway/auth.h) and the venue's bus key, which
// signs every journal message and snapshot manifest on NATS (bus/signing.h).
//
// Thread safety: the free functions are pure; an Ed25519Key or
// Ed25519PublicKey is immutable once made, so Sign and Verify may be called
// from any number of threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mb {

inline constexpr std::size_t kEd25519KeyBytes = 32;
inline constexpr std::size_t kEd25519SignatureBytes = 64;

// An Ed25519 public key as an operator gives it: PEM ("-----BEGIN PUBLIC
// KEY-----"), base64 of that DER SubjectPublicKeyInfo, or base64 of the raw
// 32 bytes. The raw 32 bytes, or nullopt when it is none of these or not an
// Ed25519 key.
std::optional<std::string> ParseEd25519PublicKey(std::string_view text);

// Verification with a raw 32-byte public key and a 64-byte signature. False
// on any other size.
bool Ed25519Verify(std::string_view public_key, std::string_view message,
                   std::string_view signature);

// A public key parsed once, for many verifications.
class Ed25519PublicKey {
 public:
  // raw: the 32 bytes; kInvalidArgument otherwise.
  static Result<Ed25519PublicKey> FromRaw(std::string_view raw);
  bool Verify(std::string_view message, std::string_view signature) const;
  const std::string& raw() const noexcept { return raw_; }

 private:
  struct Pkey;
  Ed25519PublicKey(std::shared_ptr<const Pkey> key, std::string raw)
      : key_(std::move(key)), raw_(std::move(raw)) {}
  std::shared_ptr<const Pkey> key_;
  std::string raw_;
};

// A private key.
class Ed25519Key {
 public:
  static Result<Ed25519Key> Generate();
  // PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----", as `openssl genpkey
  // -algorithm ed25519` writes it); an error says what is wrong.
  static Result<Ed25519Key> FromPem(std::string_view pem);
  std::string ToPem() const;
  const std::string& public_key() const noexcept { return public_raw_; }  // raw 32 bytes
  std::string Sign(std::string_view message) const;                       // 64 bytes

 private:
  struct Pkey;
  Ed25519Key(std::shared_ptr<const Pkey> key, std::string public_raw)
      : key_(std::move(key)), public_raw_(std::move(public_raw)) {}
  std::shared_ptr<const Pkey> key_;
  std::string public_raw_;
};

// Lower-case hex of bytes, and back (nullopt: not hex of whole bytes).
std::string HexEncode(std::string_view bytes);
std::optional<std::string> HexDecode(std::string_view hex);

}  // namespace mb
