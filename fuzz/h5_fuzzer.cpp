// The HDF5 reader: the input opened as a file image in memory (the core driver), its keys listed
// (from the object headers, then each dataset opened for its kind and shape), every group walked
// and every leaf read, whole and by rows. A dataset may claim far more than its file holds
// (chunks never written read as fill values): reading one whole that claims more than the
// fuzzer's malloc limit is a legitimate allocation, not a finding, so such files are listed only.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <tensordict/tensordict.h>

#include "backends/hdf5/persistent_impl.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_typed_errors([&] {
    const tensordict::TensorDict td =
        tensordict::h5::open_image("fuzz.h5", std::string_view(reinterpret_cast<const char*>(data), size));
    (void)td.keys(true);
    double claimed = 0;  // bytes of every leaf read whole
    for (const tensordict::NestedKey& key : td.keys(true, true)) {
      std::vector<std::string> prefix(key.parts().begin(), key.parts().end() - 1);
      const tensordict::TensorDict level =
          prefix.empty() ? td : td.get_tensordict(tensordict::NestedKey(std::move(prefix)));
      const tensordict::LeafMeta meta = level.impl()->leaf_meta(key[key.size() - 1]);
      double n = static_cast<double>(c10::elementSize(meta.dtype));
      for (int64_t s : meta.shape) n *= static_cast<double>(s);
      claimed += n;
    }
    if (claimed > 1e9) return;
    (void)td.clone();  // every dataset
    if (td.batch_dims() > 0 && td.batch_size()[0] > 0) (void)td.index({0}).clone();
  });
  return 0;
}
