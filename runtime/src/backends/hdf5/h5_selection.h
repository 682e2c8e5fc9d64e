#pragma once
// How an index over the batch dims becomes an HDF5 read or write of only the selected
// elements. Each batch dim gets a sorted, duplicate-free set of positions (an integer: one, a
// slice: a strided range, an index tensor or a 1-d mask: its unique positions), the file
// selection is their product (hyperslabs), and a post-index applied to what was read restores
// the requested order, repeats and dims. h5py passes fancy indices through to HDF5, which
// refuses unsorted or repeated ones; this does not.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIndexing.h>
#include <c10/util/SmallVector.h>

#include <tensordict/batch_index.h>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

// Inline capacities: a read of a few dims allocates nothing here (a 64-row read is ~10 us, so
// the vectors of a selection would be a tenth of it on the heap).
constexpr unsigned kInlineDims = 6;

struct Selection {
  /// Shape of the block read (or written): per batch dim the number of positions, then the
  /// dataset's remaining dims whole.
  c10::SmallVector<int64_t, kInlineDims> block_shape;
  /// Applied to the block: gives `leaf[index]`.
  c10::SmallVector<at::indexing::TensorIndex, kInlineDims> post;
  /// The post-index only keeps every element (basic slices): the block is the result.
  bool post_is_identity = true;
  /// The block holds no element (nothing to read or write).
  bool empty = false;
  /// The hyperslab: per dataset dim its first position, stride and count; on `runs_dim` (the
  /// dim of an index tensor, if any) the positions are the runs below instead.
  c10::SmallVector<hsize_t, kInlineDims> start, stride, count;
  size_t runs_dim = 0;
  c10::SmallVector<hsize_t, 1> run_starts, run_counts;
};

/// Fills `sel` (empty) with the selection of `index` over a dataset of shape `shape`; false when
/// the index cannot be split per dim (several index tensors, a mask over several dims): read the
/// whole dataset then. Filled in place: a Selection holds its vectors inline, so moving one
/// copies them.
bool select(const std::vector<int64_t>& shape, const BatchIndex& index, Selection& sel);

/// Reads the selected elements of `dataset` into `block` (shaped sel.block_shape, of memory type
/// `mem_type`), or writes them from it. A few runs are one HDF5 call on their union; many runs
/// are one call per run, as HDF5 1.10 builds a union of n hyperslabs in O(n^2). `file_space` is
/// the dataset's dataspace (the caller's, already open: one HDF5 call fewer); its selection is
/// replaced.
void transfer(hid_t dataset, hid_t file_space, hid_t mem_type, const Selection& sel, void* block, bool write,
              const std::string& where);

}  // namespace h5
}  // namespace tensordict
