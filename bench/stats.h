// Percentiles of a sorted sample, the one rule every benchmark here reports
// with: the value at index floor(q * n), clamped to the last; Summarize() gives
// the figures every benchmark prints.
//
// Thread safety: a plain function.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

struct Percentiles {
  uint64_t n = 0;
  int64_t p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  double mean = 0;
};

// Sorts *v and summarises it (all zero when empty).
inline Percentiles Summarize(std::vector<int64_t>* v) {
  Percentiles p;
  p.n = v->size();
  if (v->empty()) return p;
  std::sort(v->begin(), v->end());
  auto at = [&](double q) { return PercentileOf(*v, q); };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.max = v->back();
  double sum = 0;
  for (int64_t x : *v) sum += static_cast<double>(x);
  p.mean = sum / static_cast<double>(v->size());
  return p;
}

}  // namespace mb::bench
