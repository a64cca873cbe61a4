// Standard base64 (RFC 4648, with padding): API keys' Ed25519 public keys
// and signatures.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mb {

std::string Base64Encode(std::string_view bytes);
// nullopt when `text` is not padded base64 of the standard alphabet.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace mb
