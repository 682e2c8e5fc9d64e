#include "backends/hdf5/h5_links.h"

#include "backends/hdf5/persistent_impl.h"

namespace tensordict {
namespace h5 {

H5Id ordered_links(hid_t list_class, const std::string& where) {
  H5Id plist = check_id(H5Pcreate(list_class), where, "H5Pcreate");
  check(H5Pset_link_creation_order(plist.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED), where,
        "H5Pset_link_creation_order");
  return plist;
}

namespace {

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

void list_by_name(const H5File& f, const std::string& path, hid_t group, std::vector<std::string>& names) {
  hsize_t idx = 0;
  check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names), location(f, path), "H5Literate");
}

}  // namespace

H5Id open_group(const H5File& f, const std::string& path) {
  return check_id(H5Gopen2(f.id(), path.c_str(), H5P_DEFAULT), location(f, path), "H5Gopen2");
}

GroupLinks list_group(const H5File& f, const std::string& path) {
  return list_open_group(f, path, open_group(f, path).get());
}

GroupLinks list_open_group(const H5File& f, const std::string& path, hid_t group) {
  GroupLinks out;
  // Listing by creation order fails on a group that does not track it, and is then redone by
  // name: one call for the groups C++ writes, two for h5py's. The order is not read from the
  // group's creation property list first: H5Gget_create_plist parses the link-info message and
  // opens the group's name index for nothing but this flag, where HDF5 1.10 crashes on some
  // corrupt files (docs/reliability.md).
  hsize_t idx = 0;
  out.in_creation_order = H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_name, &out.names) >= 0;
  if (!out.in_creation_order) {
    H5Eclear2(H5E_DEFAULT);
    out.names.clear();
    list_by_name(f, path, group, out.names);
  }
  return out;
}

std::vector<std::string> group_keys(const H5File& f, const std::string& path) { return list_group(f, path).names; }

std::vector<std::string> group_names(const H5File& f, const std::string& path) {
  std::vector<std::string> names;
  H5Id g = open_group(f, path);
  list_by_name(f, path, g.get(), names);
  return names;
}

bool link_exists(const H5File& f, const std::string& path) {
  const htri_t e = H5Lexists(f.id(), path.c_str(), H5P_DEFAULT);
  check(e, location(f, path), "H5Lexists");
  return e > 0;
}

// A link moved with H5Lmove is created anew, so it lists last: `key` is moved to a free
// temporary name and back. The object is untouched.
void relink_last(const H5File& f, const std::string& group, const std::string& key) {
  std::string temp = child_path(group, ".tensordict-relink");
  while (link_exists(f, temp)) temp += "_";
  const std::string path = child_path(group, key);
  check(H5Lmove(f.id(), path.c_str(), f.id(), temp.c_str(), H5P_DEFAULT, H5P_DEFAULT), location(f, path), "H5Lmove");
  check(H5Lmove(f.id(), temp.c_str(), f.id(), path.c_str(), H5P_DEFAULT, H5P_DEFAULT), location(f, path), "H5Lmove");
}

void keep_order(const H5File& f, const std::string& group, const std::vector<std::string>& order) {
  const GroupLinks links = list_group(f, group);
  if (!links.in_creation_order) return;
  const std::vector<std::string>& now = links.names;
  size_t first = 0;
  while (first < now.size() && first < order.size() && now[first] == order[first]) ++first;
  for (size_t i = first; i < order.size(); ++i) {
    if (link_exists(f, child_path(group, order[i]))) relink_last(f, group, order[i]);
  }
}

}  // namespace h5
}  // namespace tensordict
