// HashString: the 128-bit key (XXH3-128) under which the engine keeps a client
// order id or a transfer reference. 128 bits make a collision between two
// different strings negligible, so the key stands for the string in the
// engine's tables, its image and its state hash.
//
// Thread safety: a pure function.
#pragma once

#include <xxhash.h>

#include <string_view>

#include "engine/image.h"

namespace mb::engine::internal {

inline Key128 HashString(std::string_view s) noexcept {
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Key128{h.low64, h.high64};
}

}  // namespace mb::engine::internal
