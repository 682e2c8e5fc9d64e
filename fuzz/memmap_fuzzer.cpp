// A memmap directory (meta.json files and leaf files of any size) unpacked from the input
// (fuzz_input.h), loaded and read whole: every leaf, every non-tensor value.
#include <cstdint>
#include <string_view>

#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ScratchDir dir;
  fuzz::unpack_image(std::string_view(reinterpret_cast<const char*>(data), size), dir.path());
  fuzz::expect_typed_errors([&] {
    const tensordict::TensorDict td = tensordict::load_memmap(dir.path().string());
    (void)td.clone();  // reads every leaf
    (void)td.repr();
  });
  return 0;
}
