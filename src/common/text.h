// Small text helpers shared by the parsers of key files and keys.
//
// Thread safety: pure functions.
#pragma once

#include <cctype>
#include <string_view>

namespace mb {

// `s` without the white space at either end.
inline std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace mb
