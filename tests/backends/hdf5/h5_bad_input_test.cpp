// Hostile HDF5 files (issue 17), written with the HDF5 C API: a dataset claiming 2^60
// elements, and groups nested 100,000 levels deep. Each is a typed error naming the file and
// the object, never an unbounded allocation or a stack overflow; what can be read lazily still is.

#include "support/catch_torch.h"

#include <hdf5.h>

#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/persistent.h>

#include "support/temp_dir.h"

using namespace tensordict;
using testing_support::TempDir;

TEST_CASE("a dataset claiming 2^60 elements reads by rows, and refuses a whole read", "[h5][bad_input]") {
  TempDir dir;
  const std::string path = dir / "huge.h5";
  {
    // Chunked, nothing written: the file is a few KiB, the dataset 4 EiB of fill values.
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {hsize_t{1} << 60}, chunk[1] = {1024};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    const hid_t ds = H5Dcreate2(file, "huge", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(ds >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
  }
  PersistentTensorDict td = PersistentTensorDict::from_h5(path);
  CHECK(td.batch_size() == c10::IntArrayRef({int64_t{1} << 60}));
  CHECK(at::equal(td.index({at::indexing::Slice(0, 10)}).get("huge"), at::zeros({10})));
  REQUIRE_THROWS_AS(td.get("huge"), StorageError);
  CHECK_THROWS_WITH(td.get("huge"), Catch::Contains("huge.h5:/huge") && Catch::Contains("bytes"));
}

TEST_CASE("groups nested 100000 levels deep are a StorageError, not a stack overflow", "[h5][bad_input]") {
  TempDir dir;
  const std::string path = dir / "deep.h5";
  {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t parent = H5Gopen2(file, "/", H5P_DEFAULT);
    for (int i = 0; i < 100000; ++i) {
      const hid_t child = H5Gcreate2(parent, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (child < 0) FAIL("cannot create group level " << i);
      H5Gclose(parent);
      parent = child;
    }
    H5Gclose(parent);
    H5Fclose(file);
  }
  REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(path).clone(), StorageError);
  CHECK_THROWS_WITH(PersistentTensorDict::from_h5(path).clone(),
                    Catch::Contains("deep.h5") && Catch::Contains("nested more than"));
}
