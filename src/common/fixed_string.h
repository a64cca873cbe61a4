// A fixed-capacity string stored inline: client order ids and transfer
// references travel inside commands and events without a heap allocation.
//
// Thread safety: plain value.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace mb {

template <std::size_t N>
struct FixedString {
  static_assert(N < 256, "length is stored in one byte");
  static constexpr std::size_t kCapacity = N;

  uint8_t len = 0;
  char data[N] = {};

  // Returns false (and stores nothing) when s is longer than N.
  [[nodiscard]] bool Assign(std::string_view s) noexcept {
    if (s.size() > N) return false;
    len = static_cast<uint8_t>(s.size());
    std::memset(data, 0, N);
    if (!s.empty()) std::memcpy(data, s.data(), s.size());  // s.data() may be null when empty
    return true;
  }
  static FixedString From(std::string_view s) noexcept {
    FixedString f;
    (void)f.Assign(s.substr(0, std::min(s.size(), N)));
    return f;
  }
  std::string_view view() const noexcept { return {data, len}; }
  bool empty() const noexcept { return len == 0; }
  friend bool operator==(const FixedString& a, const FixedString& b) noexcept {
    return a.view() == b.view();
  }
};

using ClientOrderId = FixedString<36>;    // Binance: ^[.A-Z:/a-z0-9_-]{1,36}$
using TransferRef = FixedString<64>;      // external reference of a deposit/withdrawal
using TransferAddress = FixedString<64>;  // a deposit address on another venue
using AuthText = FixedString<64>;         // an account name, an API key or its secret
using SymbolText = FixedString<32>;       // an asset's or a market's symbol

}  // namespace mb
