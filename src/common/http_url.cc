#include "common/http_url.h"

#include <string>

namespace mb {

Result<std::pair<std::string, std::string>> ParseHttpUrl(std::string_view url,
                                                         std::string_view what,
                                                         std::string_view role, bool* tls) {
  std::string_view rest = url;
  const bool https = tls != nullptr && rest.starts_with("https://");
  if (tls != nullptr) *tls = https;
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  if (https) rest.remove_prefix(8);
  while (rest.ends_with('/')) rest.remove_suffix(1);
  const std::size_t colon = rest.rfind(':');
  const bool bracketed = rest.starts_with('[');
  std::string host(colon == std::string_view::npos ? rest : rest.substr(0, colon));
  if (bracketed && host.size() >= 2 && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port(colon == std::string_view::npos ? "" : rest.substr(colon + 1));
  const bool port_ok = !port.empty() && port.size() <= 5 &&
                       port.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoul(port) > 0 && std::stoul(port) <= 65535;
  if ((!https && url.starts_with("https://")) || host.empty() || !port_ok ||
      rest.find('/') != std::string_view::npos) {
    return InvalidArgument(std::string(what) + " \"" + std::string(url) + "\" is not " +
                           (tls != nullptr ? "http(s)://HOST:PORT (" : "http://HOST:PORT (") +
                           std::string(role) + ")");
  }
  return std::make_pair(std::move(host), port);
}

}  // namespace mb
