#include "backends/hdf5/h5_selection.h"

#include <ATen/ATen.h>

namespace tensordict {
namespace h5 {

using Kind = BatchIndex::Item::Kind;
using at::indexing::Slice;
using at::indexing::TensorIndex;

namespace {

// Positions selected on one dim, as runs [start, start + count * stride) of one stride.
struct DimSelection {
  std::vector<hsize_t> starts;  // one per run
  std::vector<hsize_t> counts;
  hsize_t stride = 1;
  int64_t size = 0;  // positions in all
};

DimSelection whole(int64_t n) {
  DimSelection d;
  d.starts = {0};
  d.counts = {static_cast<hsize_t>(n)};
  d.size = n;
  return d;
}

// Sorted unique positions as runs of consecutive values, and the inverse map into them.
DimSelection from_positions(const at::Tensor& positions, at::Tensor& inverse) {
  at::Tensor unique;
  std::tie(unique, inverse, std::ignore) =
      at::_unique2(positions.reshape(-1), /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/false);
  inverse = inverse.view(positions.sizes());
  unique = unique.contiguous();
  const int64_t* p = unique.data_ptr<int64_t>();
  DimSelection d;
  d.size = unique.numel();
  for (int64_t i = 0; i < d.size; ++i) {
    if (!d.starts.empty() && static_cast<hsize_t>(p[i]) == d.starts.back() + d.counts.back()) {
      ++d.counts.back();
    } else {
      d.starts.push_back(static_cast<hsize_t>(p[i]));
      d.counts.push_back(1);
    }
  }
  return d;
}

}  // namespace

std::optional<Selection> select(hid_t dataset, const std::vector<int64_t>& shape, const BatchIndex& index,
                                const std::string& where) {
  int tensors = 0;
  for (const auto& item : index.items()) {
    if (item.kind != Kind::Tensor) continue;
    ++tensors;
    if (item.tensor.scalar_type() == at::kBool && item.tensor.dim() != 1) return std::nullopt;
  }
  if (tensors > 1) return std::nullopt;

  const size_t rank = shape.size();
  std::vector<DimSelection> dims;
  Selection sel;
  for (const auto& item : index.items()) {
    const int64_t n = dims.size() < rank ? shape[dims.size()] : 0;
    switch (item.kind) {
      case Kind::None:
        sel.post.emplace_back(at::indexing::None);
        break;
      case Kind::Boolean:
        sel.post.emplace_back(item.integer != 0);
        break;
      case Kind::Integer: {
        DimSelection d;
        d.starts = {static_cast<hsize_t>(item.integer)};
        d.counts = {1};
        d.size = 1;
        dims.push_back(d);
        sel.post.emplace_back(0);
        break;
      }
      case Kind::Slice: {
        if (item.full) {
          dims.push_back(whole(n));
        } else {
          DimSelection d;
          const int64_t count = item.stop > item.start ? (item.stop - item.start + item.step - 1) / item.step : 0;
          d.starts = {static_cast<hsize_t>(item.start)};
          d.counts = {static_cast<hsize_t>(count)};
          d.stride = static_cast<hsize_t>(item.step);
          d.size = count;
          dims.push_back(d);
        }
        sel.post.emplace_back(Slice());
        break;
      }
      case Kind::Tensor: {
        at::Tensor positions = item.tensor.scalar_type() == at::kBool ? item.tensor.nonzero().view(-1) : item.tensor;
        positions = positions.to(at::kCPU, at::kLong);
        at::Tensor inverse;
        dims.push_back(from_positions(positions, inverse));
        sel.post.emplace_back(inverse);
        break;
      }
    }
  }
  // Dims after the batch (event dims) are read whole.
  while (dims.size() < rank) dims.push_back(whole(shape[dims.size()]));

  for (const auto& d : dims) {
    sel.block_shape.push_back(d.size);
    if (d.size == 0) sel.empty = true;
  }
  sel.file_space = check_id(H5Dget_space(dataset), where, "H5Dget_space");
  if (sel.empty || rank == 0) return sel;

  // The selection is the product of the dims' runs; only one dim has several runs (the one
  // with an index tensor), so it is the union over that dim's runs of one hyperslab each.
  size_t multi = rank;
  for (size_t d = 0; d < rank; ++d) {
    if (dims[d].starts.size() > 1) multi = d;
  }
  std::vector<hsize_t> start(rank), stride(rank), count(rank);
  for (size_t d = 0; d < rank; ++d) {
    start[d] = dims[d].starts.front();
    stride[d] = dims[d].stride;
    count[d] = dims[d].counts.front();
  }
  const size_t runs = multi == rank ? 1 : dims[multi].starts.size();
  for (size_t r = 0; r < runs; ++r) {
    if (multi != rank) {
      start[multi] = dims[multi].starts[r];
      count[multi] = dims[multi].counts[r];
    }
    check(H5Sselect_hyperslab(sel.file_space.get(), r == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                              stride.data(), count.data(), nullptr),
          where, "H5Sselect_hyperslab");
  }
  return sel;
}

}  // namespace h5
}  // namespace tensordict
