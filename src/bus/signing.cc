#include "bus/signing.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <system_error>

#include "common/base64.h"
#include "common/file.h"
#include "common/text.h"

namespace mb::bus {

namespace {

std::string_view KindName(SignedKind kind) {
  return kind == SignedKind::kJournal ? "journal" : "manifest";
}

// SHA-256 of the signed form (the header of the doc comment, then the body).
std::string Digest(SignedKind kind, std::string_view stream, std::string_view id,
                   std::span<const std::byte> body) {
  Sha256 h;
  h.Update(fmt::format("matchbook {} v1\n{}\n{}\n", KindName(kind), stream, id));
  h.Update(body);
  return h.Finish();
}

std::string AsText(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  MB_CHECK(ctx_ != nullptr &&
           EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(std::span<const std::byte> bytes) {
  MB_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size()) == 1);
}

std::string Sha256::Finish() {
  std::string out(32, '\0');
  unsigned int n = 0;
  MB_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_),
                              reinterpret_cast<unsigned char*>(out.data()), &n) == 1 &&
           n == 32);
  return out;
}

std::string Sha256::Hex(std::span<const std::byte> bytes) {
  Sha256 h;
  h.Update(bytes);
  return HexEncode(h.Finish());
}

std::string BusSigner::Sign(SignedKind kind, std::string_view stream, std::string_view id,
                            std::span<const std::byte> body) const {
  return Base64Encode(key_.Sign(Digest(kind, stream, id, body)));
}

Status BusVerifier::Verify(SignedKind kind, std::string_view stream, std::string_view id,
                           std::span<const std::byte> body, const char* header) const {
  if (header == nullptr || *header == '\0') {
    return Corruption(fmt::format("it carries no {} header: not signed by the venue's bus key",
                                  kSignatureHeader));
  }
  const std::optional<std::string> sig = Base64Decode(header);
  if (!sig || sig->size() != kEd25519SignatureBytes) {
    return Corruption(
        fmt::format("its {} header is not a base64 Ed25519 signature", kSignatureHeader));
  }
  if (!key_.Verify(Digest(kind, stream, id, body), *sig)) {
    return Corruption(fmt::format(
        "its signature does not verify with the bus key {} ([bus] verify_key): a forged or "
        "altered message, or another venue's key",
        key_hex()));
  }
  return Status::Ok();
}

Result<Ed25519Key> LoadSigningKey(const std::filesystem::path& file, bool create) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(file, ec);
  std::filesystem::path pub = file;
  pub += ".pub";
  if (!exists) {
    if (!create) {
      return NotFound(fmt::format("[bus] signing_key_file: {} does not exist", file.string()));
    }
    auto key = Ed25519Key::Generate();
    if (!key.ok()) return key.status();
    MB_RETURN_IF_ERROR(WriteFileAtomically(file, key->ToPem(), 0600));
    MB_RETURN_IF_ERROR(WriteFileAtomically(pub, HexEncode(key->public_key()) + "\n", 0644));
    return key;
  }
  auto text = ReadOwnerOnlyFile(file, "[bus] signing_key_file");
  if (!text.ok()) return text.status();
  auto key = Ed25519Key::FromPem(*text);
  if (!key.ok()) {
    return InvalidArgument(
        fmt::format("[bus] signing_key_file: {}: {}", file.string(), key.status().message()));
  }
  if (!std::filesystem::exists(pub, ec)) {
    MB_RETURN_IF_ERROR(WriteFileAtomically(pub, HexEncode(key->public_key()) + "\n", 0644));
  }
  return key;
}

Result<std::string> ParseVerifyKey(std::string_view text) {
  text = TrimSpace(text);
  auto from_hex = [](std::string_view t) -> std::optional<std::string> {
    if (t.size() != 2 * kEd25519KeyBytes) return std::nullopt;
    return HexDecode(t);
  };
  if (auto raw = from_hex(text)) return *raw;
  std::error_code ec;
  if (text.empty() || !std::filesystem::is_regular_file(std::filesystem::path(text), ec)) {
    return InvalidArgument(fmt::format(
        "[bus] verify_key: \"{}\" is neither 64 hex characters nor a readable file (the primary "
        "writes its public bus key to <data_dir>/bus.key.pub)",
        text));
  }
  auto bytes = ReadFile(std::filesystem::path(text));
  if (!bytes.ok()) return bytes.status();
  const std::string content = AsText(*bytes);
  const std::string_view body = TrimSpace(content);
  if (auto raw = from_hex(body)) return *raw;
  if (body.starts_with("-----BEGIN PRIVATE KEY-----")) {
    auto key = Ed25519Key::FromPem(body);
    if (key.ok()) return key->public_key();
  } else if (auto raw = ParseEd25519PublicKey(body)) {
    return *raw;
  }
  return InvalidArgument(fmt::format(
      "[bus] verify_key: {} holds neither 64 hex characters nor an Ed25519 PEM key", text));
}

}  // namespace mb::bus
