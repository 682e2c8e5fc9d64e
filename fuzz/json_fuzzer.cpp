// The JSON parser (meta.json of memmap directories, in Python's json.dumps and orjson styles;
// consolidated metadata; store metadata). What parses must also write back and parse to the
// same text, in both writer styles.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <tensordict/json.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] {
    const tensordict::json::Value value = tensordict::json::parse(text, "fuzz.json");
    const std::string compact = value.dump(/*allow_nan=*/true);
    if (tensordict::json::parse(compact).dump(true) != compact) std::abort();
    const std::string stdlib = value.dump_stdlib();
    if (tensordict::json::parse(stdlib).dump_stdlib() != stdlib) std::abort();
  });
  return 0;
}
