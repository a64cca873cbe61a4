// The generated table (assets_data.cc, written by embed_assets.cmake at build
// time): internal to src/web.
#pragma once

#include <span>

#include "web/assets.h"

namespace mb::web::internal {

// Sorted by path; static storage.
std::span<const Asset> AssetTable() noexcept;

}  // namespace mb::web::internal
