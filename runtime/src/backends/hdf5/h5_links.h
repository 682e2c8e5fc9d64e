#pragma once
// The links of a group: listed in their order, and kept in it when links are replaced, renamed
// or reordered. Groups C++ creates track link creation order, so keys come back in the order
// they were set; groups h5py writes by default list by name (docs/backends.md, "HDF5 files").

#include <string>
#include <vector>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

struct H5File;

/// A group or file creation property list whose links keep their creation order (tracked and
/// indexed).
H5Id ordered_links(hid_t list_class, const std::string& where);

/// The link names of a group, in creation order where it tracks it (h5py's rule), else by name.
struct GroupLinks {
  std::vector<std::string> names;
  bool in_creation_order = false;
};
GroupLinks list_group(const H5File& f, const std::string& path);
/// list_group of the group `group`, open already (`path` names it in errors).
GroupLinks list_open_group(const H5File& f, const std::string& path, hid_t group);
/// The group `path`, opened (StorageError naming it otherwise).
H5Id open_group(const H5File& f, const std::string& path);
/// list_group(f, path).names.
std::vector<std::string> group_keys(const H5File& f, const std::string& path);
/// The link names of a group by name, for walks whose result does not show the order: one
/// HDF5 call on any group.
std::vector<std::string> group_names(const H5File& f, const std::string& path);

/// True when the link `path` exists.
bool link_exists(const H5File& f, const std::string& path);
/// Moves the link `key` of `group` to the end of its creation order (metadata only).
void relink_last(const H5File& f, const std::string& group, const std::string& key);
/// Puts the links of `group` back in `order` (its link names, as listed before a replace or a
/// rename) by relinking, from the first one out of place on. Groups listed by name keep that.
void keep_order(const H5File& f, const std::string& group, const std::vector<std::string>& order);

}  // namespace h5
}  // namespace tensordict
