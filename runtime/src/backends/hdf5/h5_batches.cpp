// The batch size of every group of an HDF5 file, found when it is opened (h5_batches.h).

#include "backends/hdf5/h5_batches.h"

#include <algorithm>

#include <tensordict/errors.h>
#include <tensordict/json.h>

#include "backends/hdf5/h5_links.h"
#include "backends/hdf5/h5_objects.h"
#include "core/format.h"

namespace tensordict {
namespace h5 {

using detail::size_str;

// ---- Batch sizes at open ------------------------------------------------------------------------

namespace {
BatchSize parse_batch_attribute(const std::string& text, const std::string& where) {
  json::Value v;
  try {
    v = json::parse(text, where);
  } catch (const Error& e) {
    TD_THROW(StorageError, where, ": malformed ", kBatchSizeAttribute, " attribute: ", e.message());
  }
  TD_CHECK(v.is_array(), StorageError, where, ": ", kBatchSizeAttribute, " is not a list of sizes");
  BatchSize out;
  for (const auto& d : v.as_array()) {
    TD_CHECK(d.is_int() && d.as_int() >= 0, StorageError, where, ": ", kBatchSizeAttribute, " holds ", d.dump(),
             ", not a size");
    out.push_back(d.as_int());
  }
  return out;
}

// The group's stored batch size: a 1-d integer array, or (also accepted) its JSON text.
std::optional<BatchSize> read_batch_attribute(hid_t group, const std::string& where) {
  const htri_t exists = H5Aexists(group, kBatchSizeAttribute);
  check(exists, where, "H5Aexists");
  if (exists == 0) return std::nullopt;
  H5Id attr = check_id(H5Aopen(group, kBatchSizeAttribute, H5P_DEFAULT), where, "H5Aopen");
  H5Id type = check_id(H5Aget_type(attr.get()), where, "H5Aget_type");
  if (H5Tget_class(type.get()) == H5T_STRING) {
    auto text = read_string_attribute(group, kBatchSizeAttribute, where);
    return parse_batch_attribute(*text, where);
  }
  TD_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, StorageError, where, ": ", kBatchSizeAttribute,
           " is neither integers nor text");
  H5Id space = check_id(H5Aget_space(attr.get()), where, "H5Aget_space");
  const std::vector<int64_t> dims = space_shape(space.get(), where);
  TD_CHECK(dims.size() == 1 && dims[0] <= 64, StorageError, where, ": ", kBatchSizeAttribute,
           " is not a list of at most 64 sizes");
  BatchSize out(static_cast<size_t>(dims[0]));
  if (!out.empty()) check(H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()), where, "H5Aread");
  for (int64_t d : out) TD_CHECK(d >= 0, StorageError, where, ": ", kBatchSizeAttribute, " holds ", d, ", not a size");
  return out;
}

bool starts_with(c10::IntArrayRef shape, c10::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}
}  // namespace

// ValueError naming the group `path` when its batch size does not start with its parent's.
void check_extends_parent(const H5File& f, const std::string& path, c10::IntArrayRef batch, c10::IntArrayRef parent) {
  TD_CHECK(starts_with(batch, parent), ValueError, location(f, path), ": batch size ", size_str(batch),
           " does not extend the parent group's ", size_str(parent));
}

// ValueError naming the dataset when its shape does not start with its group's batch size.
void check_extends_batch(const H5File& f, const std::string& path, c10::IntArrayRef shape, c10::IntArrayRef batch) {
  TD_CHECK(starts_with(shape, batch), ValueError, location(f, path), ": batch size and array size mismatch: ",
           "the dataset has shape ", size_str(shape), ", the group's batch size is ", size_str(batch));
}

// Sets f.batches for `path` and, where needed, the groups below it. With `explicit_batch` (the
// caller gave the root's batch size), a group without a stored batch takes its parent's
// (Python's rule), and every dataset and group is checked now. Otherwise a group's batch is its
// stored attribute, read alone (its datasets are checked when read, its sub-groups resolved
// when reached: opening costs the same for ten datasets or ten thousand), or Python's
// inference: the longest leading prefix shared by the group's tensor datasets and its
// sub-groups' batches.
BatchSize resolve_batches(H5File& f, const std::string& path, const std::optional<BatchSize>& root_batch,
                          const BatchSize* parent, bool explicit_batch, int depth) {
  const std::string where = location(f, path);
  TD_CHECK(depth < 512, StorageError, where, ": groups nested more than 512 levels deep");
  std::optional<BatchSize> batch = root_batch;
  if (!batch) {
    // The root's attributes are read through the file id: no group open on the hot path.
    H5Id g;
    if (path != "/") g = check_id(H5Gopen2(f.id(), path.c_str(), H5P_DEFAULT), where, "H5Gopen2");
    if (auto stored = read_batch_attribute(g.valid() ? g.get() : f.id(), where)) {
      batch = std::move(stored);
      if (!explicit_batch) {
        if (parent) check_extends_parent(f, path, *batch, *parent);
        f.batches[path] = *batch;
        return *batch;
      }
    }
  }
  if (!batch && explicit_batch && parent) batch = *parent;
  std::optional<BatchSize> common;
  auto meet = [&](c10::IntArrayRef shape) {
    if (!common) {
      common = BatchSize(shape.begin(), shape.end());
      return;
    }
    size_t n = 0;
    while (n < common->size() && n < shape.size() && (*common)[n] == shape[n]) ++n;
    common->resize(n);
  };
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  std::vector<std::string> groups;
  // In any order: the result does not depend on it, and listing by name is one HDF5 call.
  for (const std::string& key : group_names(f, path)) {
    const std::string child = child_path(path, key);
    Object obj = open_object(f, child, location(f, child));
    if (obj.kind == EntryKind::TensorDict) groups.push_back(child);
    if (obj.kind == EntryKind::Tensor) {
      tensors.emplace_back(child, std::move(obj.dataset.shape));
      meet(tensors.back().second);
    }
    // A string array holds one value per batch element: its shape is the batch's.
    if (obj.kind == EntryKind::NonTensor && !obj.dataset.shape.empty()) meet(obj.dataset.shape);
  }
  if (batch) {
    for (const std::string& child : groups) resolve_batches(f, child, std::nullopt, &*batch, explicit_batch, depth + 1);
  } else {
    // Sub-groups first: their batches take part in this group's; then check they extend it.
    std::vector<BatchSize> children;
    for (const std::string& child : groups)
      children.push_back(resolve_batches(f, child, std::nullopt, nullptr, explicit_batch, depth + 1));
    for (const BatchSize& c : children) meet(c);
    batch = common.value_or(BatchSize{});
    for (size_t i = 0; i < groups.size(); ++i) check_extends_parent(f, groups[i], children[i], *batch);
  }
  if (parent) check_extends_parent(f, path, *batch, *parent);
  for (const auto& [child, shape] : tensors) check_extends_batch(f, child, shape, *batch);
  f.batches[path] = *batch;
  return *batch;
}

}  // namespace h5
}  // namespace tensordict
