#include "common/hmac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <climits>

#include "common/status.h"

namespace mb {

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  // OpenSSL reads a null key as "reuse the previous key": never pass one.
  static constexpr unsigned char kEmpty = 0;
  MB_CHECK(key.size() <= static_cast<std::size_t>(INT_MAX));
  const void* key_ptr = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  const unsigned char* data_ptr =
      data.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(data.data());
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_len = 0;
  const unsigned char* r = HMAC(EVP_sha256(), key_ptr, static_cast<int>(key.size()), data_ptr,
                                data.size(), mac.data(), &mac_len);
  MB_CHECK(r != nullptr && mac_len == 32);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(std::size_t{2} * mac_len);
  for (unsigned int i = 0; i < mac_len; ++i) {
    hex.push_back(kHex[mac[i] >> 4U]);
    hex.push_back(kHex[mac[i] & 0x0FU]);
  }
  return hex;
}

}  // namespace mb
