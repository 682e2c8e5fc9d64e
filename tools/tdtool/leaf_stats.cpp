// A mapped leaf is read once, in chunks that stay in cache: the sum (accumulated in double) and
// aminmax of each chunk, instead of a double copy of the whole leaf read three times.

#include "leaf_stats.h"

#include <algorithm>
#include <limits>

#include <ATen/ATen.h>

LeafStats leaf_stats(const at::Tensor& t) {
  at::Tensor flat = t.contiguous().view(-1);
  if (flat.scalar_type() == at::kBool) flat = flat.view(at::kByte);
  // aminmax in LibTorch 1.13 covers the standard types; half precision goes through float per chunk.
  const bool widen = flat.scalar_type() == at::kHalf || flat.scalar_type() == at::kBFloat16;
  constexpr int64_t kChunk = int64_t{1} << 18;  // elements: at most 2 MiB of doubles, 1 MiB of floats
  LeafStats s;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  bool nan = false;
  const int64_t n = flat.numel();
  for (int64_t start = 0; start < n; start += kChunk) {
    at::Tensor chunk = flat.narrow(0, start, std::min(kChunk, n - start));
    if (widen) chunk = chunk.to(at::kFloat);
    s.sum += chunk.sum(at::kDouble).item<double>();
    auto [lo, hi] = at::aminmax(chunk);
    const double l = lo.item<double>();
    const double h = hi.item<double>();
    nan = nan || l != l || h != h;
    s.min = std::min(s.min, l);
    s.max = std::max(s.max, h);
  }
  if (nan) s.min = s.max = std::numeric_limits<double>::quiet_NaN();  // as min()/max() of the leaf
  return s;
}
