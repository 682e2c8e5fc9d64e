// The store's metadata parsing, as a reader of a shared server meets it: the input is split at
// NUL bytes into `__batch_size__`, then field/value pairs of an `m:` hash, then the `d:` value
// (a tensor's bytes or a non-tensor's json / json_array), and decoded as a leaf.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tensordict/entry.h>

#include "backends/redis/store_layout.h"
#include "backends/redis/store_level.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (size_t cut; (cut = rest.find('\0')) != std::string_view::npos; rest.remove_prefix(cut + 1))
    parts.emplace_back(rest.substr(0, cut));
  parts.emplace_back(rest);
  if (parts.size() < 2) return 0;
  fuzz::expect_typed_errors([&] {
    const std::vector<int64_t> batch = tensordict::redis::parse_shape(parts[0], "__batch_size__");
    std::vector<std::pair<std::string, std::string>> fields;
    for (size_t i = 1; i + 2 < parts.size(); i += 2) fields.emplace_back(parts[i], parts[i + 1]);
    const tensordict::redis::LeafMetadata meta = tensordict::redis::parse_metadata(fields, "m:leaf");
    (void)tensordict::redis::decode_leaf(meta, parts.back(), "d:leaf", batch, std::nullopt);
  });
  return 0;
}
