// The consolidated format: from_bytes of the input, and from_consolidated of it as a file.
#include <cstdint>
#include <fstream>
#include <string_view>

#include <tensordict/backends/consolidated.h>
#include <tensordict/tensordict.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] { (void)tensordict::from_bytes(bytes).clone(); });
  fuzz::ScratchDir dir;
  const std::string file = (dir.path() / "td.bin").string();
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  fuzz::expect_typed_errors([&] { (void)tensordict::from_consolidated(file).clone(); });
  return 0;
}
