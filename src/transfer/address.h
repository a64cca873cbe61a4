// Deposit addresses: where another venue sends a transfer. An address names
// the venue, the account and the asset, and ends in a checksum, so that a
// mistyped address is refused before any funds move:
//
//   <venue>:<account>:<ASSET>:<check>     e.g.  beta:42:BTC:5c0f9e21
//
// check = the low 32 bits of XXH3-64 over "<venue>:<account>:<ASSET>", as 8
// lowercase hex digits. Any change of one character (a digit of the account,
// a letter of the venue) makes the check fail, except with probability 2^-32.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/strong.h"

namespace mb::transfer {

struct Address {
  std::string venue;
  AccountId account{};
  std::string asset;
  friend bool operator==(const Address&, const Address&) = default;
};

// The longest address an engine command carries (TransferAddress).
inline constexpr std::size_t kMaxAddressSize = 64;

// The address of (venue, account, asset). It may be longer than
// kMaxAddressSize for long names: CheckAddressFits() says so at start-up.
std::string MakeAddress(std::string_view venue, AccountId account, std::string_view asset);

// kInvalidArgument naming what is wrong: the shape, the account, the
// checksum.
Result<Address> ParseAddress(std::string_view text);

}  // namespace mb::transfer
