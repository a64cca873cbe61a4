#include "gateway/sealed_secret.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <system_error>

#include "common/base64.h"
#include "common/ed25519.h"
#include "common/file.h"
#include "common/text.h"

namespace mb::gateway {

namespace {

constexpr std::size_t kNonceBytes = 12;
constexpr std::size_t kTagBytes = 12;  // GCM's tag, truncated to 96 bits (SP 800-38D allows it)
constexpr std::string_view kNonceLabel = "matchbook secret v1\n";
constexpr std::string_view kOption = "[security] master_key_file";

std::array<unsigned char, kNonceBytes> NonceFor(std::string_view api_key) {
  std::string text(kNonceLabel);
  text += api_key;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::array<unsigned char, kNonceBytes> nonce{};
  std::copy_n(digest, kNonceBytes, nonce.begin());
  return nonce;
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// AES-256-GCM over `in` (encrypting or decrypting); the tag is read from or
// written to `tag`. False when OpenSSL refuses or, decrypting, the tag does
// not match.
bool Gcm(bool encrypt, const std::array<uint8_t, kMasterKeyBytes>& key, std::string_view api_key,
         std::string_view in, std::string* out, unsigned char* tag) {
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return false;
  const auto nonce = NonceFor(api_key);
  auto init = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  if (init(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      init(ctx.get(), nullptr, nullptr, key.data(), nonce.data()) != 1) {
    return false;
  }
  int n = 0;
  auto update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate;
  if (update(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(api_key.data()),
             static_cast<int>(api_key.size())) != 1) {
    return false;
  }
  out->assign(in.size(), '\0');
  if (update(ctx.get(), reinterpret_cast<unsigned char*>(out->data()), &n,
             reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size())) != 1) {
    return false;
  }
  if (encrypt) {
    int tail = 0;
    return EVP_EncryptFinal_ex(ctx.get(), nullptr, &tail) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1;
  }
  int tail = 0;
  return EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) == 1 &&
         EVP_DecryptFinal_ex(ctx.get(), nullptr, &tail) == 1;
}

}  // namespace

MasterKey MasterKey::Generate() {
  MasterKey k;
  MB_CHECK(RAND_bytes(k.bytes_.data(), static_cast<int>(k.bytes_.size())) == 1);
  return k;
}

Result<MasterKey> MasterKey::FromHex(std::string_view text) {
  text = TrimSpace(text);
  const std::optional<std::string> raw =
      text.size() == 2 * kMasterKeyBytes ? HexDecode(text) : std::nullopt;
  if (!raw) return InvalidArgument("a master key is 64 hex characters");
  MasterKey k;
  std::copy(raw->begin(), raw->end(), reinterpret_cast<char*>(k.bytes_.data()));
  return k;
}

std::string MasterKey::ToHex() const {
  return HexEncode(std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()));
}

std::string MasterKey::Seal(std::string_view api_key, std::string_view raw_secret) const {
  std::string ct;
  unsigned char tag[kTagBytes];
  MB_CHECK(Gcm(true, bytes_, api_key, raw_secret, &ct, tag));
  ct.append(reinterpret_cast<const char*>(tag), kTagBytes);
  return std::string(kSealedPrefix) + Base64Encode(ct);
}

Result<std::string> MasterKey::Open(std::string_view api_key, std::string_view sealed) const {
  if (!sealed.starts_with(kSealedPrefix)) return InvalidArgument("not a sealed secret");
  const std::optional<std::string> bytes = Base64Decode(sealed.substr(kSealedPrefix.size()));
  if (!bytes || bytes->size() <= kTagBytes) return InvalidArgument("not a sealed secret");
  const std::string_view ct(bytes->data(), bytes->size() - kTagBytes);
  unsigned char tag[kTagBytes];
  std::copy_n(bytes->data() + ct.size(), kTagBytes, reinterpret_cast<char*>(tag));
  std::string raw;
  if (!Gcm(false, bytes_, api_key, ct, &raw, tag)) {
    return InvalidArgument("the master key does not open this secret");
  }
  return raw;
}

std::string NewRawSecret() {
  std::string raw(kSecretBytes, '\0');
  MB_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) ==
           1);
  return raw;
}

SecretForm FormOf(std::string_view stored) noexcept {
  if (stored.starts_with(kSealedPrefix)) return SecretForm::kSealed;
  if (!stored.empty() &&
      std::all_of(stored.begin(), stored.end(), [](char c) { return c == kScrubbedChar; })) {
    return SecretForm::kScrubbed;
  }
  return SecretForm::kPlain;
}

std::string Scrubbed(std::string_view stored) { return std::string(stored.size(), kScrubbedChar); }

Result<MasterKey> LoadMasterKey(const std::filesystem::path& file) {
  auto text = ReadOwnerOnlyFile(file, kOption);
  if (!text.ok()) return text.status();
  auto key = MasterKey::FromHex(*text);
  if (!key.ok()) {
    return InvalidArgument(
        fmt::format("{}: {}: {}", kOption, file.string(), key.status().message()));
  }
  return key;
}

Result<MasterKey> CreateMasterKey(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    return InvalidArgument(fmt::format("{}: {} exists already", kOption, file.string()));
  }
  MasterKey key = MasterKey::Generate();
  MB_RETURN_IF_ERROR(WriteFileAtomically(file, key.ToHex() + "\n", 0600));
  return key;
}

void SecretCensus::Add(SecretForm form, bool revoked) noexcept {
  switch (form) {
    case SecretForm::kSealed:
      ++sealed;
      return;
    case SecretForm::kScrubbed:
      ++scrubbed;
      return;
    case SecretForm::kPlain:
      ++(revoked ? plain_revoked : plain_live);
      return;
  }
}

SecretCensus CountSecrets(const engine::EngineImage& image) {
  SecretCensus c;
  for (const engine::ImageApiKey& k : image.api_keys) {
    if (!k.ed25519) c.Add(FormOf(k.secret.view()), k.revoked);
  }
  return c;
}

Status CheckMasterKey(const MasterKey& key, const engine::EngineImage& image,
                      const std::filesystem::path& file) {
  for (const engine::ImageApiKey& k : image.api_keys) {
    if (k.ed25519 || FormOf(k.secret.view()) != SecretForm::kSealed) continue;
    if (!key.Open(k.key.view(), k.secret.view()).ok()) {
      return InvalidArgument(fmt::format(
          "{}: {} does not open the secret of API key {}... in this data directory: it is not "
          "the master key its secrets were sealed with",
          kOption, file.string(), k.key.view().substr(0, 8)));
    }
  }
  return Status::Ok();
}

}  // namespace mb::gateway
