// Listing an HDF5 level's keys from the objects' headers (h5_entries.h): the same keys, kinds
// and errors as opening every object, on a file holding what a listing must tell apart: groups,
// tensor and string datasets, a soft link, a named datatype (no entry) and, in a second file, a
// dangling soft link.

#include "support/catch_torch.h"

#include <hdf5.h>

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/backends/persistent.h>
#include <tensordict/tensordict.h>

#include "support/temp_dir.h"

namespace h5_entries_test {

using namespace tensordict;
using testing_support::TempDir;

std::vector<std::string> joined(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const NestedKey& k : keys) out.push_back(k.join("/"));
  return out;
}

// A file C++ writes (groups in creation order), then links the C API adds at the end of "/":
// a soft link to "obs", a named datatype, and (when `dangling`) a soft link to nothing.
std::string write_file(const TempDir& dir, const std::string& name, bool dangling) {
  const std::string path = dir / name;
  TensorDict td({{"obs", at::arange(8.0).reshape({4, 2})},
                 {"g", EntryInit({{"x", at::ones({4, 3})}, {"inner", EntryInit({{"y", at::zeros({4})}})}})}},
                {4});
  td.set_non_tensor("label", json::Value("run 1"));
  td.set_non_tensor({"g", "note"}, json::Value("nested text"));
  PersistentTensorDict::to_h5(td, path).close();
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  REQUIRE(H5Lcreate_soft("/obs", file, "alias", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  const hid_t type = H5Tcopy(H5T_NATIVE_INT);
  REQUIRE(H5Tcommit2(file, "a_type", type, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) >= 0);
  H5Tclose(type);
  if (dangling) REQUIRE(H5Lcreate_soft("/nowhere", file, "broken", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  H5Fclose(file);
  return path;
}

TEST_CASE("HDF5 keys list groups and datasets from their headers, named datatypes left out", "[h5][keys]") {
  TempDir dir;
  PersistentTensorDict h5 = PersistentTensorDict::from_h5(write_file(dir, "entries.h5", false));
  TensorDict td = h5;

  const std::vector<std::string> top{"obs", "g", "label", "alias"};
  CHECK(h5.impl()->keys() == top);
  CHECK(h5.impl()->num_entries() == 4);
  CHECK(joined(td.keys()) == top);
  CHECK(joined(td.keys(true)) ==
        std::vector<std::string>{"obs", "g", "g/x", "g/inner", "g/inner/y", "g/note", "label", "alias"});
  // Leaves only: the string datasets are non-tensor data, told apart by their datatype.
  CHECK(joined(td.keys(true, true)) == std::vector<std::string>{"obs", "g/x", "g/inner/y", "alias"});

  CHECK(td.contains("alias"));
  CHECK_FALSE(td.contains("a_type"));  // a link, but to no entry
  CHECK_FALSE(td.contains("absent"));
  CHECK_FALSE(td.contains(NestedKey({"g", "absent"})));
  CHECK(at::equal(td.get("alias"), td.get("obs")));

  // Every listing agrees with what each key holds when looked up on its own.
  for (const TensorDictBase* level : {td.impl(), td.get_tensordict("g").impl()}) {
    std::vector<std::string> listed;
    level->for_each_key([&](const std::string& key, EntryKind kind) {
      listed.push_back(key);
      CHECK(kind == level->kind(key));
      CHECK(kind == level->get(key).kind());
    });
    std::vector<std::string> nesting;
    level->for_each_key_nesting([&](const std::string& key, bool nested) {
      nesting.push_back(key);
      CHECK(nested == (level->kind(key) == EntryKind::TensorDict));
    });
    CHECK(listed == level->keys());
    CHECK(nesting == listed);
  }
  // An indexed view lists its source's keys the same ways.
  TensorDict view = td.index({at::indexing::Slice(0, 2)});
  CHECK(joined(view.keys(true)) == joined(td.keys(true)));
  CHECK(joined(view.keys(true, true)) == joined(td.keys(true, true)));
}

TEST_CASE("an HDF5 level with a dangling soft link raises StorageError naming it on every listing", "[h5][keys][errors]") {
  TempDir dir;
  PersistentTensorDict h5 = PersistentTensorDict::from_h5(write_file(dir, "dangling.h5", true));
  TensorDict td = h5;
  const auto names_link = Catch::Contains("dangling.h5:/broken");
  CHECK_THROWS_AS(h5.impl()->keys(), StorageError);
  CHECK_THROWS_WITH(h5.impl()->keys(), names_link);
  CHECK_THROWS_WITH(td.keys(), names_link);
  CHECK_THROWS_WITH(td.keys(true), names_link);
  CHECK_THROWS_WITH(td.keys(true, true), names_link);
  CHECK_THROWS_WITH(td.contains("broken"), names_link);
  // The rest of the file still reads.
  CHECK(td.contains("obs"));
  CHECK(joined(td.get_tensordict("g").keys()) == std::vector<std::string>{"x", "inner", "note"});
}

}  // namespace h5_entries_test
