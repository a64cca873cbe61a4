#include "transfer/address.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <charconv>
#include <cstdint>
#include <limits>

namespace mb::transfer {
namespace {

std::string Check(std::string_view body) {
  const auto h = static_cast<uint64_t>(XXH3_64bits(body.data(), body.size()));
  return fmt::format("{:08x}", static_cast<uint32_t>(h));
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace

std::string MakeAddress(std::string_view venue, AccountId account, std::string_view asset) {
  const std::string body = fmt::format("{}:{}:{}", venue, Raw(account), asset);
  return body + ":" + Check(body);
}

Result<Address> ParseAddress(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("address \"{}\": {}", text.substr(0, 80), why));
  };
  const std::size_t c3 = text.rfind(':');
  if (text.size() > kMaxAddressSize) return bad("too long");
  if (c3 == std::string_view::npos) return bad("not <venue>:<account>:<asset>:<check>");
  const std::string_view body = text.substr(0, c3);
  const std::size_t c1 = body.find(':');
  const std::size_t c2 = body.rfind(':');
  if (c1 == std::string_view::npos || c1 == c2) {
    return bad("not <venue>:<account>:<asset>:<check>");
  }
  Address a;
  a.venue = std::string(body.substr(0, c1));
  const std::string_view account = body.substr(c1 + 1, c2 - c1 - 1);
  a.asset = std::string(body.substr(c2 + 1));
  bool names = !a.venue.empty() && !a.asset.empty();
  for (char c : a.venue) names = names && NameChar(c);
  for (char c : a.asset) names = names && NameChar(c);
  if (!names) return bad("the venue and the asset are letters, digits, '_' or '-'");
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(account.data(), account.data() + account.size(), id);
  if (ec != std::errc() || end != account.data() + account.size() || account.empty() ||
      (account.size() > 1 && account[0] == '0') || id > std::numeric_limits<uint32_t>::max()) {
    return bad("the account is not a number");
  }
  a.account = AccountId{static_cast<uint32_t>(id)};
  if (text.substr(c3 + 1) != Check(body)) return bad("checksum mismatch (mistyped?)");
  return a;
}

}  // namespace mb::transfer
