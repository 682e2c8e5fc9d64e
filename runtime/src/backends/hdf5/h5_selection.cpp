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
  c10::SmallVector<hsize_t, 1> starts;  // one per run
  c10::SmallVector<hsize_t, 1> counts;
  hsize_t stride = 1;
  int64_t size = 0;  // positions in all
};

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

bool select(const std::vector<int64_t>& shape, const BatchIndex& index, Selection& sel) {
  int tensors = 0;
  for (const auto& item : index.items()) {
    if (item.kind != Kind::Tensor) continue;
    ++tensors;
    if (item.tensor.scalar_type() == at::kBool && item.tensor.dim() != 1) return false;
  }
  if (tensors > 1) return false;

  const size_t rank = shape.size();
  c10::SmallVector<DimSelection, kInlineDims> dims;
  // One run of `count` positions from `start`, `stride` apart, on the next dim.
  auto run = [&dims](int64_t start, int64_t count, int64_t stride) {
    DimSelection& d = dims.emplace_back();
    d.starts.push_back(static_cast<hsize_t>(start));
    d.counts.push_back(static_cast<hsize_t>(count));
    d.stride = static_cast<hsize_t>(stride);
    d.size = count;
  };
  for (const auto& item : index.items()) {
    const int64_t n = dims.size() < rank ? shape[dims.size()] : 0;
    switch (item.kind) {
      case Kind::None:
        sel.post.emplace_back(at::indexing::None);
        sel.post_is_identity = false;
        break;
      case Kind::Boolean:
        sel.post.emplace_back(item.integer != 0);
        sel.post_is_identity = false;
        break;
      case Kind::Integer:
        run(item.integer, 1, 1);
        sel.post.emplace_back(0);
        sel.post_is_identity = false;
        break;
      case Kind::Slice:
        if (item.full) {
          run(0, n, 1);
        } else {
          run(item.start, item.stop > item.start ? (item.stop - item.start + item.step - 1) / item.step : 0, item.step);
        }
        sel.post.emplace_back(Slice());
        break;
      case Kind::Tensor: {
        at::Tensor positions = item.tensor.scalar_type() == at::kBool ? item.tensor.nonzero().view(-1) : item.tensor;
        positions = positions.to(at::kCPU, at::kLong);
        at::Tensor inverse;
        dims.emplace_back(from_positions(positions, inverse));
        sel.post.emplace_back(inverse);
        sel.post_is_identity = false;
        break;
      }
    }
  }
  // Dims after the batch (event dims) are read whole.
  while (dims.size() < rank) run(0, shape[dims.size()], 1);

  for (const auto& d : dims) {
    sel.block_shape.push_back(d.size);
    if (d.size == 0) sel.empty = true;
  }
  if (sel.empty || rank == 0) return true;

  // The selection is the product of the dims' runs; only one dim has several runs (the one
  // with an index tensor).
  sel.runs_dim = rank;
  for (size_t d = 0; d < rank; ++d) {
    if (dims[d].starts.size() > 1) sel.runs_dim = d;
    sel.start.push_back(dims[d].starts.front());
    sel.stride.push_back(dims[d].stride);
    sel.count.push_back(dims[d].counts.front());
  }
  if (sel.runs_dim == rank) {
    sel.runs_dim = 0;
    sel.run_starts.push_back(sel.start[0]);
    sel.run_counts.push_back(sel.count[0]);
  } else {
    sel.run_starts = std::move(dims[sel.runs_dim].starts);
    sel.run_counts = std::move(dims[sel.runs_dim].counts);
  }
  return true;
}

namespace {
// Above this many runs, one call per run beats building their union (bench/h5_bench.cpp,
// RandomRows: the union costs 2.7 us a run at 64 runs and 10 us at 1024, one call per run
// about 4.5 us).
constexpr size_t kUnionRuns = 128;
}  // namespace

void transfer(hid_t dataset, hid_t file_space, hid_t mem_type, const Selection& sel, void* block, bool write,
              const std::string& where) {
  if (sel.empty) return;
  auto io = [&](hid_t mem_space, hid_t file_space) {
    if (write) {
      check(H5Dwrite(dataset, mem_type, mem_space, file_space, H5P_DEFAULT, block), where, "H5Dwrite");
    } else {
      check(H5Dread(dataset, mem_type, mem_space, file_space, H5P_DEFAULT, block), where, "H5Dread");
    }
  };
  const size_t rank = sel.start.size();
  if (rank == 0) return io(H5S_ALL, H5S_ALL);
  const c10::SmallVector<hsize_t, kInlineDims> block_dims(sel.block_shape.begin(), sel.block_shape.end());
  H5Id mem_space = check_id(H5Screate_simple(static_cast<int>(rank), block_dims.data(), nullptr), where,
                            "H5Screate_simple");
  c10::SmallVector<hsize_t, kInlineDims> start = sel.start, count = sel.count;
  const size_t d = sel.runs_dim;
  const size_t runs = sel.run_starts.size();
  if (runs <= kUnionRuns) {
    for (size_t r = 0; r < runs; ++r) {
      start[d] = sel.run_starts[r];
      count[d] = sel.run_counts[r];
      check(H5Sselect_hyperslab(file_space, r == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                                sel.stride.data(), count.data(), nullptr),
            where, "H5Sselect_hyperslab");
    }
    return io(mem_space.get(), file_space);
  }
  // Run r lands at its offset along dim d of the block.
  c10::SmallVector<hsize_t, kInlineDims> mem_start(rank, 0);
  for (size_t r = 0; r < runs; ++r) {
    start[d] = sel.run_starts[r];
    count[d] = sel.run_counts[r];
    check(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), sel.stride.data(), count.data(), nullptr),
          where, "H5Sselect_hyperslab");
    check(H5Sselect_hyperslab(mem_space.get(), H5S_SELECT_SET, mem_start.data(), nullptr, count.data(), nullptr),
          where, "H5Sselect_hyperslab");
    io(mem_space.get(), file_space);
    mem_start[d] += sel.run_counts[r];
  }
}

}  // namespace h5
}  // namespace tensordict
