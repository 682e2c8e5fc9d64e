// The walk the child process of the untrusted-file check runs (h5_preflight.h): what
// PersistentTensorDict reads when a file is opened and every entry read, through plain HDF5 C
// calls. It runs in a forked copy of the process whose other threads are gone: no LibTorch, no
// exceptions, nothing that waits on another thread.

#include "backends/hdf5/h5_preflight.h"

#include <hdf5.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "backends/hdf5/h5_id.h"
#include "backends/hdf5/h5_types.h"

namespace tensordict {
namespace h5 {

namespace {

// The backend refuses groups nested deeper (resolve_batches): nothing below is ever read.
constexpr int kMaxDepth = 512;
// Attributes, and the string and opaque datasets the backend reads whole on every get(), are
// read whole up to this size; tensors only by their first element (the backend reads them
// lazily, and the check must not cost a read of the file's data).
constexpr hsize_t kWholeReadBytes = hsize_t{64} << 20;

struct Walk {
  hid_t file = H5I_INVALID_HID;
  // The object being walked, and the first HDF5 call that failed on the file's structure.
  std::string object = "/";
  std::string failure;
};

// False for a failed call on the file's structure (a group's links, an object header, an
// attribute, a type, a dataspace, a layout, a chunk index): HDF5 cannot parse that metadata,
// and its error paths on corrupt metadata are where HDF5 1.10 frees invalid pointers (which
// crashes or corrupts the heap depending on what the heap holds), so the file is refused. The
// walk goes on with what it still reaches.
bool good(Walk& w, int64_t result, const char* call) {
  if (result >= 0) return true;
  if (w.failure.empty()) w.failure = w.object + ": " + call + " failed: " + error_stack();
  H5Eclear2(H5E_DEFAULT);
  return false;
}

// The same for reading values: a failure there (a compression filter this HDF5 lacks, a missing
// external file, a type it cannot convert) is the backend's typed error when that entry is read,
// not a reason to refuse the file.
bool read_ok(int64_t result) {
  if (result >= 0) return true;
  H5Eclear2(H5E_DEFAULT);
  return false;
}

// Reads `count` elements of an attribute (`dataset` < 0) or of a dataset's selection `file_space`
// in HDF5's native form of `type`: the conversion and, for variable-length data, the global
// heap are what a read of the backend goes through.
void read_into_memory(hid_t type, hid_t attribute, hid_t dataset, hid_t file_space, hsize_t count) {
  H5Id mem(H5Tget_native_type(type, H5T_DIR_DEFAULT));
  if (!read_ok(mem.get())) return;
  const size_t size = H5Tget_size(mem.get());
  if (size == 0 || count > kWholeReadBytes / size) return;
  std::vector<unsigned char> buffer(count * size);  // zeroed: variable-length pointers start null
  H5Id mem_space(H5Screate_simple(1, &count, nullptr));
  if (!read_ok(mem_space.get())) return;
  const herr_t read = attribute >= 0 ? H5Aread(attribute, mem.get(), buffer.data())
                                     : H5Dread(dataset, mem.get(), mem_space.get(), file_space, H5P_DEFAULT, buffer.data());
  if (read_ok(read) && (H5Tdetect_class(mem.get(), H5T_VLEN) > 0 || H5Tis_variable_str(mem.get()) > 0))
    H5Dvlen_reclaim(mem.get(), mem_space.get(), H5P_DEFAULT, buffer.data());
  H5Eclear2(H5E_DEFAULT);
}

herr_t on_attribute(hid_t object, const char* name, const H5A_info_t*, void* data) {
  Walk& w = *static_cast<Walk*>(data);
  H5Id attribute(H5Aopen(object, name, H5P_DEFAULT));
  if (!good(w, attribute.get(), "H5Aopen")) return 0;
  H5Id type(H5Aget_type(attribute.get()));
  H5Id space(H5Aget_space(attribute.get()));
  if (!good(w, type.get(), "H5Aget_type") || !good(w, space.get(), "H5Aget_space")) return 0;
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (good(w, points, "H5Sget_simple_extent_npoints") && points > 0)
    read_into_memory(type.get(), attribute.get(), -1, H5S_ALL, static_cast<hsize_t>(points));
  return 0;
}

// Every attribute of `object`, read; and the lookups by name the backend makes.
void walk_attributes(Walk& w, hid_t object, std::initializer_list<const char*> looked_up) {
  hsize_t index = 0;
  good(w, H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, &index, on_attribute, &w), "H5Aiterate2");
  for (const char* name : looked_up) good(w, H5Aexists(object, name), "H5Aexists");
}

void walk_dataset(Walk& w, hid_t dataset) {
  walk_attributes(w, dataset, {kDtypeAttribute, kEncodingAttribute});
  H5Id type(H5Dget_type(dataset));
  H5Id space(H5Dget_space(dataset));
  H5Id creation(H5Dget_create_plist(dataset));
  if (!good(w, type.get(), "H5Dget_type") || !good(w, space.get(), "H5Dget_space") ||
      !good(w, creation.get(), "H5Dget_create_plist"))
    return;
  if (H5Tget_class(type.get()) == H5T_OPAQUE) {  // the backend classifies opaque types by tag
    char* tag = H5Tget_tag(type.get());
    if (tag) H5free_memory(tag);
  }
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (!good(w, points, "H5Sget_simple_extent_npoints")) return;
  // The layout, the filters and, for chunked data, the whole chunk index (metadata only); the
  // storage address direct reads ask for.
  const H5D_layout_t layout = H5Pget_layout(creation.get());
  good(w, layout, "H5Pget_layout");
  good(w, H5Pget_nfilters(creation.get()), "H5Pget_nfilters");
  if (layout == H5D_CHUNKED) {
    hsize_t chunks = 0;
    good(w, H5Dget_num_chunks(dataset, space.get(), &chunks), "H5Dget_num_chunks");
  }
  (void)H5Dget_offset(dataset);
  (void)H5Dget_storage_size(dataset);
  H5Eclear2(H5E_DEFAULT);
  if (points == 0) return;
  // Non-tensor values whole when not huge, else the first element.
  const hsize_t count = static_cast<hsize_t>(points);
  const size_t element = H5Tget_size(type.get());
  const H5T_class_t cls = H5Tget_class(type.get());
  if ((cls == H5T_STRING || cls == H5T_OPAQUE) && element > 0 && count <= kWholeReadBytes / element) {
    read_into_memory(type.get(), -1, dataset, H5S_ALL, count);
    return;
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (!good(w, rank, "H5Sget_simple_extent_ndims") || rank == 0) return;
  std::vector<hsize_t> start(static_cast<size_t>(rank), 0), one(static_cast<size_t>(rank), 1);
  if (read_ok(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, one.data(), nullptr)))
    read_into_memory(type.get(), -1, dataset, space.get(), 1);
}

struct Link {
  std::string name;
  bool hard;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  static_cast<std::vector<Link>*>(out)->push_back(Link{name, info->type == H5L_TYPE_HARD});
  return 0;
}

void walk_group(Walk& w, const std::string& path, int depth) {
  if (depth >= kMaxDepth) return;
  w.object = path;
  H5Id group(H5Gopen2(w.file, path.c_str(), H5P_DEFAULT));
  if (!good(w, group.get(), "H5Gopen2")) return;
  walk_attributes(w, group.get(), {kBatchSizeAttribute, kDeviceAttribute});
  // Listed both ways the backend may list it: by creation order (which fails, harmlessly, on
  // groups that do not track it) and by name.
  std::vector<Link> links;
  hsize_t index = 0;
  if (H5Literate(group.get(), H5_INDEX_CRT_ORDER, H5_ITER_INC, &index, collect_link, &links) < 0) H5Eclear2(H5E_DEFAULT);
  links.clear();
  index = 0;
  if (!good(w, H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_link, &links), "H5Literate")) return;
  group.reset();
  for (const Link& link : links) {
    // Opened by full path from the file, as the backend opens entries (links are followed).
    const std::string child = path == "/" ? "/" + link.name : path + "/" + link.name;
    w.object = child;
    H5Id object(H5Oopen(w.file, child.c_str(), H5P_DEFAULT));
    // A soft or external link may point nowhere: a broken link, not broken metadata.
    if (!(link.hard ? good(w, object.get(), "H5Oopen") : read_ok(object.get()))) continue;
    const H5I_type_t kind = H5Iget_type(object.get());
    if (kind == H5I_GROUP) {
      object.reset();
      walk_group(w, child, depth + 1);
    } else if (kind == H5I_DATASET) {
      walk_dataset(w, object.get());
    }
  }
}

}  // namespace

std::string walk_for_check(const char* path) {
  // A file HDF5 cannot open at all (missing, not HDF5, a broken superblock) is left to the
  // backend's open, which says why.
  H5Id file(H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!read_ok(file.get())) return "";
  Walk w;
  w.file = file.get();
  walk_group(w, "/", 0);
  return w.failure;
}

}  // namespace h5
}  // namespace tensordict
