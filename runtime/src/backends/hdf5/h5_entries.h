#pragma once
// A group's entries, listed from the objects' headers: which links hold a group or a dataset,
// and of what kind, without opening each object by its full path. Listing keys asks this of
// every link, so its cost is the listing's (docs/backends.md, "HDF5 files").

#include <string>
#include <vector>

#include <tensordict/entry.h>
#include <tensordict/function_ref.h>

namespace tensordict {
namespace h5 {

struct H5File;

/// The link names of the group `group` (list_group's order) that hold an entry: a group or a
/// dataset, told from the object header alone; named datatypes are left out. A link that exists
/// but resolves to nothing (a dangling soft link) raises StorageError, as reading it would.
std::vector<std::string> entry_names(const H5File& f, const std::string& group);
/// The same links with their kinds: each object is opened relative to its group, for a
/// dataset's datatype, which tells a tensor from non-tensor data.
void for_each_entry_kind(const H5File& f, const std::string& group,
                         FunctionRef<void(const std::string&, EntryKind)> fn);
/// The same links, each with whether it is a group, from the object headers alone.
void for_each_entry_nesting(const H5File& f, const std::string& group, FunctionRef<void(const std::string&, bool)> fn);
/// Whether `path` holds an entry, from its object header alone (has(), no dataset opened).
bool holds_entry(const H5File& f, const std::string& path);

}  // namespace h5
}  // namespace tensordict
