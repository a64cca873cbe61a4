// Signed bus messages: no record or snapshot reaches a replica or a standby
// unless the venue's bus key signed it (docs/security.md, "The bus key").
//
// The publisher signs every journal message and every snapshot manifest
// with the venue's Ed25519 bus key; the signature travels in the message's
// Mb-Sig header (base64). It covers SHA-256 of
//
//   "matchbook <kind> v1\n" <stream> "\n" <id> "\n" <body>
//
// where kind is "journal" or "manifest", stream the JetStream stream the
// message belongs to, and id its Nats-Msg-Id for a journal message (the
// sequence of its last record) or "manifest". So a signed message cannot be
// moved to another venue's stream, given another id, or have a byte of its
// records changed. A manifest names its snapshot's SHA-256, so the chunks it
// points to are covered too. A replay of an old message carries records the
// follower has applied already (their sequences are dense), so it applies
// nothing.
//
// Followers verify with the public key (Ed25519PublicKey, parsed once);
// verification is a pure function of the message, so it runs on the
// follower's thread with no lock.
//
// Thread safety: BusSigner and BusVerifier are immutable after construction.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "common/ed25519.h"
#include "common/status.h"

namespace mb::bus {

inline constexpr char kSignatureHeader[] = "Mb-Sig";
inline constexpr std::string_view kManifestId = "manifest";

enum class SignedKind { kJournal, kManifest };

// SHA-256, fed in pieces (raw 32 bytes, or lower-case hex).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::span<const std::byte> bytes);
  void Update(std::string_view text) { Update(std::as_bytes(std::span(text.data(), text.size()))); }
  std::string Finish();  // raw; the object is then spent
  static std::string Hex(std::span<const std::byte> bytes);

 private:
  void* ctx_;
};

class BusSigner {
 public:
  explicit BusSigner(Ed25519Key key) : key_(std::move(key)) {}
  // The Mb-Sig header's value.
  std::string Sign(SignedKind kind, std::string_view stream, std::string_view id,
                   std::span<const std::byte> body) const;
  const std::string& public_key() const noexcept { return key_.public_key(); }

 private:
  Ed25519Key key_;
};

class BusVerifier {
 public:
  explicit BusVerifier(Ed25519PublicKey key) : key_(std::move(key)) {}
  // header: the message's Mb-Sig value (null: it had none). A refusal is
  // kCorruption with the reason: no signature, not base64, or not made by
  // this key.
  Status Verify(SignedKind kind, std::string_view stream, std::string_view id,
                std::span<const std::byte> body, const char* header) const;
  std::string key_hex() const { return HexEncode(key_.raw()); }

 private:
  Ed25519PublicKey key_;
};

// The venue's bus key from a PEM file (PKCS#8, as `openssl genpkey -algorithm
// ed25519` writes it). create: a missing file is made (0600) with a new
// key. Either way "<file>.pub" is written with the public key in hex when it
// is missing, for replicas' [bus] verify_key. A file readable by others than
// its owner is refused.
Result<Ed25519Key> LoadSigningKey(const std::filesystem::path& file, bool create);

// [bus] verify_key: 64 hex characters, or a file holding them, a PEM public
// key or the PEM private key (its public half is taken). The raw 32 bytes.
Result<std::string> ParseVerifyKey(std::string_view text);

}  // namespace mb::bus
