#include <tensordict/batch_index.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/errors.h>

#include "core/plain_copy.h"
#include "core/sym_int.h"

namespace tensordict {

namespace idx = at::indexing;

namespace {

bool is_mask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

// The smallest and largest of `t`'s (long) indices: read in place on the CPU (a replay buffer's
// sample of a few hundred rows would spend more in aminmax's dispatch and two item() reads).
std::pair<int64_t, int64_t> index_range(const at::Tensor& t) {
  if (t.is_cpu() && t.is_contiguous()) {
    const int64_t* p = t.data_ptr<int64_t>();
    const auto [lo, hi] = std::minmax_element(p, p + t.numel());
    return {*lo, *hi};
  }
  const auto [lo, hi] = at::aminmax(t);
  return {lo.item<int64_t>(), hi.item<int64_t>()};
}

int64_t consumed_dims(const idx::TensorIndex& i) {
  if (i.is_integer() || i.is_slice()) return 1;
  if (i.is_tensor()) return is_mask(i.tensor()) ? i.tensor().dim() : 1;
  return 0;  // None, Boolean, Ellipsis
}

std::vector<idx::TensorIndex> to_tensor_indices(const std::vector<BatchIndex::Item>& items) {
  std::vector<idx::TensorIndex> out;
  out.reserve(items.size());
  for (const auto& it : items) {
    switch (it.kind) {
      case BatchIndex::Item::Kind::None: out.emplace_back(idx::None); break;
      case BatchIndex::Item::Kind::Integer: out.emplace_back(it.integer); break;
      case BatchIndex::Item::Kind::Boolean: out.emplace_back(it.integer != 0); break;
      case BatchIndex::Item::Kind::Slice:
        // A full slice stays `:`: LibTorch 1.13 misapplies an explicit slice after a
        // multi-dim mask (pytorch/pytorch#71673).
        if (it.full) out.emplace_back(idx::Slice());
        else out.emplace_back(idx::Slice(it.start, it.stop, it.step));
        break;
      case BatchIndex::Item::Kind::Tensor: out.emplace_back(it.tensor); break;
    }
  }
  return out;
}

// LibTorch 1.13 counts a mask of several dims as one dim when it places what follows
// (pytorch/pytorch#71673): a None, an integer, a slice or another index after such a mask lands
// on the wrong dim. A mask means the tuple of its nonzero() columns (numpy's rule), which
// LibTorch places right: a multi-dim mask followed by anything but full slices (a no-op wherever
// they land) is replaced by its columns, once.
void expand_misplaced_masks(std::vector<BatchIndex::Item>& items) {
  using Kind = BatchIndex::Item::Kind;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Kind::Tensor || !is_mask(items[i].tensor) || items[i].tensor.dim() < 2) continue;
    const bool misplaced = std::any_of(items.begin() + static_cast<std::ptrdiff_t>(i) + 1, items.end(),
                                       [](const BatchIndex::Item& it) { return !(it.kind == Kind::Slice && it.full); });
    if (!misplaced) continue;
    std::vector<at::Tensor> columns = items[i].tensor.nonzero().unbind(1);
    std::vector<BatchIndex::Item> replaced(columns.size());
    for (size_t c = 0; c < columns.size(); ++c) {
      replaced[c].kind = Kind::Tensor;
      replaced[c].tensor = std::move(columns[c]);
    }
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(i), replaced.begin(), replaced.end());
    i += replaced.size() - 1;
  }
}

}  // namespace

BatchIndex::BatchIndex(c10::ArrayRef<idx::TensorIndex> indices, c10::IntArrayRef batch_size) {
  const int64_t bd = static_cast<int64_t>(batch_size.size());
  source_batch_dims_ = bd;
  int64_t consumed = 0;
  int ellipses = 0;
  for (const auto& i : indices) {
    consumed += consumed_dims(i);
    if (i.is_ellipsis()) ++ellipses;
  }
  TD_CHECK(ellipses <= 1, RuntimeError, "An index can only have one ellipsis at most.");
  if (bd == 0) {
    // As Python: a bool is an int there, so only None and 0-dim masks index a 0-dim batch.
    for (const auto& i : indices) {
      const bool allowed = i.is_none() || i.is_ellipsis() ||
                           (i.is_tensor() && i.tensor().dim() == 0 && is_mask(i.tensor()));
      if (!allowed) {
        std::ostringstream os;
        os << i;
        TD_THROW(RuntimeError, "indexing a tensordict with td.batch_dims==0 is not permitted. Got index ",
                 os.str(), ".");
      }
    }
  }
  // A lazy stack's ragged dim (-1) has no one size to check an index against.
  TD_CHECK(std::none_of(batch_size.begin(), batch_size.end(), [](int64_t s) { return s < 0; }), IndexError,
           "batch size ", batch_size, " has ragged dims (-1: the members of a lazy stack differ in size there); "
           "index it first (td.index(...) indexes each member over its own size), then read or write the result");
  TD_CHECK(consumed <= bd, IndexError, "too many indices for a tensordict with batch size ",
           batch_size, ": ", consumed, " batch dims indexed but only ", bd, " exist");

  is_identity_ = true;
  int64_t dim = 0;  // source batch dim the next index applies to
  items_.reserve(indices.size() + bd);
  auto full_slice = [&](int64_t d) {
    Item it;
    it.kind = Item::Kind::Slice;
    it.start = 0;
    it.stop = batch_size[d];
    it.step = 1;
    it.full = true;
    items_.push_back(it);
    result_batch_size_.push_back(batch_size[d]);
  };
  for (const auto& i : indices) {
    Item it;
    if (i.is_ellipsis()) {
      for (int64_t k = 0; k < bd - consumed; ++k) full_slice(dim++);
      continue;
    }
    if (i.is_none()) {
      it.kind = Item::Kind::None;
      result_batch_size_.push_back(1);
      is_identity_ = false;
    } else if (i.is_boolean()) {
      it.kind = Item::Kind::Boolean;
      it.integer = i.boolean() ? 1 : 0;
      result_batch_size_.push_back(it.integer);
      is_identity_ = false;
      if (!i.boolean()) is_basic_ = false;
    } else if (i.is_integer()) {
      const int64_t size = batch_size[dim];
      int64_t v = detail::plain_int(i.integer());
      TD_CHECK(v >= -size && v < size, IndexError, "index ", v, " is out of range for batch dim ",
               dim, " of size ", size, " (batch size ", batch_size, ")");
      it.kind = Item::Kind::Integer;
      it.integer = v < 0 ? v + size : v;
      ++dim;
      is_identity_ = false;
    } else if (i.is_slice()) {
      const int64_t size = batch_size[dim];
      const auto& s = i.slice();
      const int64_t step = detail::plain_int(s.step());
      TD_CHECK(step > 0, ValueError, "slice step must be positive, got ", step, " for batch dim ", dim);
      int64_t start = detail::plain_int(s.start()), stop = detail::plain_int(s.stop());
      if (start < 0) start = std::max<int64_t>(start + size, 0);
      if (stop < 0) stop = std::max<int64_t>(stop + size, 0);
      start = std::min(start, size);
      stop = std::min(std::max(stop, start), size);
      it.kind = Item::Kind::Slice;
      it.start = start;
      it.stop = stop;
      it.step = step;
      it.full = start == 0 && stop == size && step == 1;
      result_batch_size_.push_back((stop - start + step - 1) / step);
      if (!it.full) is_identity_ = false;
      ++dim;
    } else {  // tensor
      at::Tensor t = i.tensor();
      it.kind = Item::Kind::Tensor;
      is_basic_ = false;
      is_identity_ = false;
      if (is_mask(t)) {
        c10::IntArrayRef covered = batch_size.slice(dim, t.dim());
        TD_CHECK(t.sizes() == covered, IndexError, "boolean mask of shape ", t.sizes(),
                 " does not match the batch dims ", covered, " it indexes (batch size ", batch_size,
                 ", starting at dim ", dim, ")");
        dim += t.dim();
      } else {
        TD_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), IndexError,
                 "tensors used as batch indices must be long, int, byte or bool tensors, got ",
                 t.scalar_type());
        // LibTorch 1.13 indexes with long tensors only (2.x also takes int): widen once here.
        if (t.scalar_type() != at::kLong) t = t.to(at::kLong);
        // Checked against the dim and made non-negative here, as integers are, so every backend
        // reads the same positions and refuses the same indices; torch checks only the elements
        // it reads, and takes td[[2]] of batch [1, 0] (finding A23).
        if (t.numel() > 0) {
          const int64_t size = batch_size[dim];
          const auto [low, high] = index_range(t);
          TD_CHECK(low >= -size && high < size, IndexError, "index ", high >= size ? high : low,
                   " is out of range for batch dim ", dim, " of size ", size, " (batch size ", batch_size, ")");
          if (low < 0) t = at::where(t < 0, t + size, t);
        }
        ++dim;
      }
      it.tensor = t;
    }
    items_.push_back(std::move(it));
  }
  source_dims_ = dim;
  for (int64_t d = dim; d < bd; ++d) result_batch_size_.push_back(batch_size[d]);
  const bool one_tensor = items_.size() == 1 && items_[0].kind == Item::Kind::Tensor;
  if (one_tensor && !is_mask(items_[0].tensor)) {
    // One long index (the common `td[idx]`): its dims take the first batch dim's place.
    const at::Tensor& t = items_[0].tensor;
    result_batch_size_.assign(t.sizes().begin(), t.sizes().end());
    result_batch_size_.append(batch_size.begin() + 1, batch_size.end());
  } else if (one_tensor && items_[0].tensor.dim() == 1) {
    // One 1-D mask on the first dim (the common `td[mask]`): turned into long indices once, so
    // every leaf takes index_select, as `td[idx]` does, instead of advanced indexing (which
    // would redo nonzero() on the mask for each leaf).
    items_[0].tensor = items_[0].tensor.nonzero().squeeze(1);
    result_batch_size_.assign({items_[0].tensor.size(0)});
    result_batch_size_.append(batch_size.begin() + 1, batch_size.end());
  } else if (!is_basic_) {
    expand_misplaced_masks(items_);
    // Advanced indexing moves and merges dims by rules best left to ATen: index a one-element
    // stand-in of the batch shape (all strides zero) and read its shape.
    at::Tensor probe = at::empty_strided(batch_size, std::vector<int64_t>(bd, 0));
    at::Tensor result;
    try {
      result = probe.index(to_tensor_indices(items_));
    } catch (const c10::Error& e) {
      TD_THROW(IndexError, "invalid batch index ", repr(), " for batch size ", batch_size, ": ",
               e.what_without_backtrace());
    }
    result_batch_size_.assign(result.sizes().begin(), result.sizes().end());
  }
}

at::Tensor BatchIndex::apply(const at::Tensor& leaf) const {
  if (is_identity_) return leaf;
  if (is_basic_) {
    // Each view is taken of the previous one, the first of `leaf` itself: no handle of `leaf` is
    // copied and released (two atomic operations a leaf, most of this loop's cost).
    at::Tensor out;
    const at::Tensor* from = &leaf;
    int64_t d = 0;
    for (const auto& it : items_) {
      switch (it.kind) {
        case Item::Kind::None:
        case Item::Kind::Boolean:  // only `true` is basic: a new dim of size 1
          out = from->unsqueeze(d++);
          from = &out;
          break;
        case Item::Kind::Integer:
          out = from->select(d, it.integer);
          from = &out;
          break;
        case Item::Kind::Slice:
          if (!(it.start == 0 && it.step == 1 && it.stop == from->size(d))) {
            out = from->slice(d, it.start, it.stop, it.step);
            from = &out;
          }
          ++d;
          break;
        case Item::Kind::Tensor:
          break;
      }
    }
    if (from == &leaf) return leaf;
    return out;  // moved
  }
  if (items_.size() == 1 && items_[0].kind == Item::Kind::Tensor && items_[0].tensor.dim() == 1 &&
      items_[0].tensor.scalar_type() == at::kLong) {
    try {
      return at::index_select(leaf, 0, items_[0].tensor);
    } catch (const c10::Error& e) {
      TD_THROW(IndexError, "invalid batch index ", repr(), ": ", e.what_without_backtrace());
    }
  }
  try {
    return leaf.index(to_tensor_indices(items_));
  } catch (const c10::Error& e) {
    TD_THROW(IndexError, "invalid batch index ", repr(), ": ", e.what_without_backtrace());
  }
}

void BatchIndex::assign(const at::Tensor& leaf, const at::Tensor& value) const {
  if (is_basic_) {
    // Rows of a plain CPU leaf (one integer, a step-1 slice or the whole batch): one memcpy,
    // with no view made and no copy_ dispatched (Note [Plain copies]).
    if (is_identity_ && leaf.dim() > 0 && detail::copy_rows_into(leaf, 0, leaf.size(0), false, value)) return;
    if (items_.size() == 1) {
      const Item& it = items_[0];
      if (it.kind == Item::Kind::Integer && detail::copy_rows_into(leaf, it.integer, 1, true, value)) return;
      if (it.kind == Item::Kind::Slice && it.step == 1 && detail::copy_rows_into(leaf, it.start, it.stop - it.start, false, value))
        return;
    }
    apply(leaf).copy_(value);
    return;
  }
  // index_put_ wants the leaf's dtype where copy_ casts: cast first, so every index kind
  // writes the same way (a mask with tensor(1.5) into an int64 leaf writes 1, as torch's
  // masked_fill_ path does).
  at::Tensor dest = leaf;
  dest.index_put_(to_tensor_indices(items_), value.scalar_type() == leaf.scalar_type() ? value : value.to(leaf.scalar_type()));
}

void BatchIndex::assign(const at::Tensor& leaf, const c10::Scalar& value) const {
  if (is_basic_) {
    apply(leaf).fill_(value);
    return;
  }
  at::Tensor dest = leaf;
  dest.index_put_(to_tensor_indices(items_), value);
}

std::string BatchIndex::repr() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i) os << ", ";
    const Item& it = items_[i];
    switch (it.kind) {
      case Item::Kind::None: os << "None"; break;
      case Item::Kind::Integer: os << it.integer; break;
      case Item::Kind::Boolean: os << (it.integer ? "True" : "False"); break;
      case Item::Kind::Slice: os << "slice(" << it.start << ", " << it.stop << ", " << it.step << ")"; break;
      case Item::Kind::Tensor: os << "tensor(shape=" << it.tensor.sizes() << ", dtype=" << it.tensor.scalar_type() << ")"; break;
    }
  }
  os << ")";
  return os.str();
}

}  // namespace tensordict
