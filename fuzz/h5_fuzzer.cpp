// The HDF5 reader: the input opened as a file image in memory (the core driver), every group
// walked and every leaf read, whole and by rows.
#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>

#include <tensordict/tensordict.h>

#include "backends/hdf5/persistent_impl.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_typed_errors([&] {
    const tensordict::TensorDict td =
        tensordict::h5::open_image("fuzz.h5", std::string_view(reinterpret_cast<const char*>(data), size));
    (void)td.clone();  // every dataset
    if (td.batch_dims() > 0 && td.batch_size()[0] > 0) (void)td.index({0}).clone();
  });
  return 0;
}
