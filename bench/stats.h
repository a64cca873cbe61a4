// Percentiles of a sorted sample, the one rule every benchmark here reports
// with: the value at index floor(q * n), clamped to the last.
//
// Thread safety: a plain function.
#pragma once

#include <cstddef>
#include <vector>

namespace mb::bench {

// REQUIRES: sorted is sorted ascending and not empty; 0 <= q <= 1.
template <class T>
T PercentileOf(const std::vector<T>& sorted, double q) {
  const std::size_t n = sorted.size();
  std::size_t idx = static_cast<std::size_t>(q * static_cast<double>(n));
  if (idx >= n) idx = n - 1;
  return sorted[idx];
}

}  // namespace mb::bench
