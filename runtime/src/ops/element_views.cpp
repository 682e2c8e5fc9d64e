// Views that hold every element of a tree's leaves once (element_views.h).

#include "ops/element_views.h"

#include <algorithm>
#include <tuple>

#include "backends/in_memory/intact_runs.h"
#include "core/forward_ad.h"
#include "core/strided_view.h"
#include "ops/packed_runs.h"

namespace tensordict {
namespace ops {

namespace {

// Bytes [begin, end) of one storage that leaves of one dtype fill back to back.
struct FilledBytes {
  const c10::StorageImpl* storage;
  at::ScalarType dtype;
  int64_t begin, end;
  const at::Tensor* leaf;  // the first: the view's storage, dtype and key set
  int64_t bytes() const { return end - begin; }
  // Whether `next` (after `previous`) continues the evenly spaced group this one starts.
  bool spaced_like(const FilledBytes& next, const FilledBytes& previous, int64_t step) const {
    return next.storage == storage && next.dtype == dtype && next.bytes() == bytes() && next.begin - previous.begin == step;
  }
};

// Whether a dtype is among the spans'.
bool has_dtype(c10::ArrayRef<FilledBytes> spans, at::ScalarType dtype) {
  return std::any_of(spans.begin(), spans.end(), [&](const FilledBytes& s) { return s.dtype == dtype; });
}

// The views over `spans` (each leaf's bytes), `n` leaves in all.
std::optional<ElementViews> views_over(c10::SmallVectorImpl<FilledBytes>& spans, size_t n) {
  // An empty leaf holds no element, but its dtype takes part in the result's: at::cat promotes
  // over every part, as over the per-leaf path's leaves. One empty view a dtype only empty
  // leaves have keeps it; the others hold no byte, so no overlap either.
  c10::SmallVector<FilledBytes, 2> empty_dtypes;
  const auto is_empty = [](const FilledBytes& s) { return s.begin == s.end; };
  for (const FilledBytes& s : spans)
    if (is_empty(s) && !has_dtype(empty_dtypes, s.dtype)) empty_dtypes.push_back(s);
  spans.erase(std::remove_if(spans.begin(), spans.end(), is_empty), spans.end());
  if (spans.empty()) return std::nullopt;
  const auto before = [](const FilledBytes& x, const FilledBytes& y) {
    return std::tie(x.storage, x.begin, x.end) < std::tie(y.storage, y.begin, y.end);
  };
  // Consolidated leaves come in storage order, one dtype at a time: mostly sorted already.
  if (!std::is_sorted(spans.begin(), spans.end(), before)) std::sort(spans.begin(), spans.end(), before);
  // Leaves back to back join. A leaf starting inside the bytes before it overlaps them: refused,
  // so the per-leaf path counts the shared elements twice, as a reduction over the leaves must.
  c10::SmallVector<FilledBytes, 32> filled;
  for (const FilledBytes& s : spans) {
    if (!filled.empty() && filled.back().storage == s.storage) {
      FilledBytes& last = filled.back();
      if (s.begin < last.end) return std::nullopt;
      if (s.begin == last.end && s.dtype == last.dtype) {
        last.end = s.end;
        continue;
      }
    }
    filled.push_back(s);
  }
  // Evenly spaced stretches of one size (padding between them) become one 2-D view.
  ElementViews views;
  for (size_t i = 0; i < filled.size();) {
    const FilledBytes& first = filled[i];
    size_t count = 1;
    const int64_t step = i + 1 < filled.size() ? filled[i + 1].begin - first.begin : 0;
    while (i + count < filled.size() && first.spaced_like(filled[i + count], filled[i + count - 1], step)) ++count;
    if (2 * (views.size() + 1) > n) return std::nullopt;  // as many views as pairs of leaves: no gain
    const auto item = static_cast<int64_t>(first.leaf->element_size());
    if (count == 1) {
      const int64_t size[] = {first.bytes() / item}, stride[] = {1};
      views.push_back(detail::strided_view(*first.leaf, size, stride, first.begin / item));
    } else {
      const int64_t size[] = {static_cast<int64_t>(count), first.bytes() / item}, stride[] = {step / item, 1};
      views.push_back(detail::strided_view(*first.leaf, size, stride, first.begin / item));
    }
    i += count;
  }
  for (const FilledBytes& e : empty_dtypes) {
    if (has_dtype(spans, e.dtype)) continue;
    if (2 * (views.size() + 1) > n) return std::nullopt;
    const int64_t size[] = {0}, stride[] = {1};
    views.push_back(detail::strided_view(*e.leaf, size, stride, e.begin / static_cast<int64_t>(e.leaf->element_size())));
  }
  return views;
}

}  // namespace

std::optional<ElementViews> element_views(const LeafList& leaves) {
  const size_t n = leaves.size();
  if (n < 2 || !in_few_storages(leaves)) return std::nullopt;
  c10::SmallVector<FilledBytes, 32> spans;
  spans.reserve(n);
  const at::Device device = leaves.front().device();
  for (const at::Tensor& t : leaves) {
    // One device: per leaf, `cat` refuses a mix or takes its device from every part, empty ones
    // included, which the views leave out.
    if (!runnable(t) || t.device() != device) return std::nullopt;
    const auto item = static_cast<int64_t>(t.element_size());
    const int64_t begin = t.storage_offset() * item;
    spans.push_back(FilledBytes{t.storage().unsafeGetStorageImpl(), t.scalar_type(), begin, begin + t.numel() * item, &t});
  }
  std::optional<ElementViews> views = views_over(spans, n);
  // Checked last, as packed_runs does: one lock, paid only where the leaves are in runs.
  if (!views || detail::forward_ad_open()) return std::nullopt;
  return views;
}

std::optional<ElementViews> element_views(const in_memory::IntactRuns& runs) {
  if (runs.exact) return ElementViews(runs.storages.begin(), runs.storages.end());
  c10::SmallVector<in_memory::LeafSpan, 32> leaf_spans;
  in_memory::leaf_spans(runs, leaf_spans);
  c10::SmallVector<FilledBytes, 32> spans;
  spans.reserve(leaf_spans.size());
  for (const in_memory::LeafSpan& s : leaf_spans) {
    const at::Tensor& run = runs.storages[s.run];
    const auto item = static_cast<int64_t>(run.element_size());
    const int64_t at = (run.storage_offset() + s.begin) * item;
    spans.push_back(FilledBytes{run.storage().unsafeGetStorageImpl(), run.scalar_type(), at,
                                at + (s.end - s.begin) * item, &run});
  }
  return views_over(spans, leaf_spans.size());
}

}  // namespace ops
}  // namespace tensordict
