#pragma once
// How an index over the batch dims becomes an HDF5 read or write of only the selected
// elements. Each batch dim gets a sorted, duplicate-free set of positions (an integer: one, a
// slice: a strided range, an index tensor or a 1-d mask: its unique positions), the file
// selection is their product (hyperslabs), and a post-index applied to what was read restores
// the requested order, repeats and dims. h5py passes fancy indices through to HDF5, which
// refuses unsorted or repeated ones; this does not.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/batch_index.h>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

struct Selection {
  /// Shape of the block read (or written): per batch dim the number of positions, then the
  /// dataset's remaining dims whole.
  std::vector<int64_t> block_shape;
  /// Applied to the block: gives `leaf[index]`.
  std::vector<at::indexing::TensorIndex> post;
  /// The post-index only keeps every element (basic slices): the block is the result.
  bool post_is_identity = true;
  /// The block holds no element (nothing to read or write).
  bool empty = false;
  /// The hyperslab: per dataset dim its first position, stride and count; on `runs_dim` (the
  /// dim of an index tensor, if any) the positions are the runs below instead.
  std::vector<hsize_t> start, stride, count;
  size_t runs_dim = 0;
  std::vector<hsize_t> run_starts, run_counts;
};

/// The selection of `index` over a dataset of shape `shape`, or nullopt when the index cannot be
/// split per dim (several index tensors, a mask over several dims): read the whole dataset then.
std::optional<Selection> select(const std::vector<int64_t>& shape, const BatchIndex& index);

/// Reads the selected elements of `dataset` into `block` (shaped sel.block_shape, of memory type
/// `mem_type`), or writes them from it. A few runs are one HDF5 call on their union; many runs
/// are one call per run, as HDF5 1.10 builds a union of n hyperslabs in O(n^2). `file_space` is
/// the dataset's dataspace (the caller's, already open: one HDF5 call fewer); its selection is
/// replaced.
void transfer(hid_t dataset, hid_t file_space, hid_t mem_type, const Selection& sel, void* block, bool write,
              const std::string& where);

}  // namespace h5
}  // namespace tensordict
