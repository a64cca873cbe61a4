#include "common/ed25519.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/base64.h"
#include "common/text.h"

namespace mb {

namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The raw public key of an Ed25519 EVP_PKEY, or nullopt for another type.
std::optional<std::string> RawPublic(EVP_PKEY* key) {
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) return std::nullopt;
  std::string raw(kEd25519KeyBytes, '\0');
  std::size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1 ||
      len != kEd25519KeyBytes) {
    return std::nullopt;
  }
  return raw;
}

bool VerifyWith(EVP_PKEY* key, std::string_view message, std::string_view signature) {
  if (signature.size() != kEd25519SignatureBytes) return false;
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace

struct Ed25519PublicKey::Pkey {
  PkeyPtr key;
};
struct Ed25519Key::Pkey {
  PkeyPtr key;
};

std::optional<std::string> ParseEd25519PublicKey(std::string_view text) {
  text = TrimSpace(text);
  if (text.starts_with("-----BEGIN PUBLIC KEY-----")) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    if (!bio) return std::nullopt;
    PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    return RawPublic(key.get());
  }
  std::optional<std::string> bytes = Base64Decode(text);
  if (!bytes) return std::nullopt;
  if (bytes->size() == kEd25519KeyBytes) return bytes;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes->data());
  PkeyPtr key(d2i_PUBKEY(nullptr, &p, static_cast<long>(bytes->size())));
  ERR_clear_error();
  if (!key || p != reinterpret_cast<const unsigned char*>(bytes->data()) + bytes->size()) {
    return std::nullopt;
  }
  return RawPublic(key.get());
}

bool Ed25519Verify(std::string_view public_key, std::string_view message,
                   std::string_view signature) {
  if (public_key.size() != kEd25519KeyBytes) return false;
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(public_key.data()),
                                          public_key.size()));
  if (!key) return false;
  return VerifyWith(key.get(), message, signature);
}

Result<Ed25519PublicKey> Ed25519PublicKey::FromRaw(std::string_view raw) {
  if (raw.size() != kEd25519KeyBytes) {
    return InvalidArgument("an Ed25519 public key is 32 bytes, not " + std::to_string(raw.size()));
  }
  auto pkey = std::make_shared<Pkey>();
  pkey->key.reset(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
  if (!pkey->key) return InvalidArgument("not an Ed25519 public key: " + OpenSslError());
  return Ed25519PublicKey(std::move(pkey), std::string(raw));
}

bool Ed25519PublicKey::Verify(std::string_view message, std::string_view signature) const {
  return VerifyWith(key_->key.get(), message, signature);
}

Result<Ed25519Key> Ed25519Key::Generate() {
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return Status(StatusCode::kInternal, "Ed25519 key generation failed: " + OpenSslError());
  }
  auto pkey = std::make_shared<Pkey>();
  pkey->key.reset(raw);
  std::optional<std::string> pub = RawPublic(raw);
  if (!pub) return Status(StatusCode::kInternal, "Ed25519 key generation gave no public key");
  return Ed25519Key(std::move(pkey), std::move(*pub));
}

Result<Ed25519Key> Ed25519Key::FromPem(std::string_view pem) {
  pem = TrimSpace(pem);
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Status(StatusCode::kInternal, "out of memory");
  auto pkey = std::make_shared<Pkey>();
  pkey->key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!pkey->key) {
    return InvalidArgument("not a PEM private key (\"-----BEGIN PRIVATE KEY-----\"): " +
                           OpenSslError());
  }
  std::optional<std::string> pub = RawPublic(pkey->key.get());
  if (!pub) return InvalidArgument("the private key is not an Ed25519 key");
  return Ed25519Key(std::move(pkey), std::move(*pub));
}

std::string Ed25519Key::ToPem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key_->key.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    return "";
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string Ed25519Key::Sign(std::string_view message) const {
  std::string sig(kEd25519SignatureBytes, '\0');
  std::size_t len = sig.size();
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != kEd25519SignatureBytes) {
    return "";
  }
  return sig;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace mb
