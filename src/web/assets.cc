#include "web/assets.h"

#include <algorithm>

#include "web/internal/asset_table.h"

namespace mb::web {

std::span<const Asset> Assets() noexcept { return internal::AssetTable(); }

const Asset* FindAsset(std::string_view path) noexcept {
  const std::span<const Asset> all = Assets();
  const auto it = std::lower_bound(all.begin(), all.end(), path,
                                   [](const Asset& a, std::string_view p) { return a.path < p; });
  if (it == all.end() || it->path != path) return nullptr;
  return &*it;
}

}  // namespace mb::web
