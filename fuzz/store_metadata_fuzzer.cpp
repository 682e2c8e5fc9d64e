// The store's metadata parsing, as a reader of a shared server meets it: the input is split at
// NUL bytes into `__batch_size__`, then field/value pairs of an `m:` hash, then the `d:` value
// (a tensor's bytes or a non-tensor's json / json_array), and decoded as a leaf. A leaf with a
// `row_offset` reads the same pairs as the per-row layout's `__rows__` header and the value as
// its records.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tensordict/entry.h>

#include "backends/redis/store_layout.h"
#include "backends/redis/store_level.h"
#include "backends/redis/store_records.h"
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
    if (!tensordict::redis::Layout::in_records(meta)) {
      (void)tensordict::redis::decode_leaf(meta, parts.back(), "d:leaf", batch, std::nullopt);
      return;
    }
    const tensordict::redis::Layout::Records records = tensordict::redis::parse_records(fields, "__rows__");
    tensordict::redis::check_record_leaf(meta, records, "m:leaf");
    const std::string_view value = parts.back();
    if (records.row_bytes == 0 || value.size() / static_cast<size_t>(records.row_bytes) != static_cast<size_t>(records.rows) ||
        value.size() % static_cast<size_t>(records.row_bytes) != 0)
      return;  // the reader checks each record's size before this (record_views)
    std::vector<std::string_view> rows;
    for (int64_t r = 0; r < records.rows; ++r)
      rows.push_back(value.substr(static_cast<size_t>(r * records.row_bytes), static_cast<size_t>(records.row_bytes)));
    (void)tensordict::redis::record_leaf(meta, rows, "d:leaf", std::nullopt);
  });
  return 0;
}
