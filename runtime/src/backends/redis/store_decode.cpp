// Decoding a leaf's stored bytes (a d: value) as its m: hash describes it. Everything here
// comes from the server, so it is untrusted: sizes are checked before anything is allocated.

#include <cstring>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/non_tensor.h>

#include "backends/redis/store_level.h"
#include "core/file_io.h"

namespace tensordict {
namespace redis {

Entry decode_leaf(const LeafMetadata& meta, std::string_view bytes, const std::string& key, c10::IntArrayRef batch,
                  const std::optional<at::Device>& device) {
  if (meta.is_non_tensor) {
    TD_CHECK(meta.encoding != "pickle", StorageError, key,
             ": a pickle-encoded value is refused (unpickling runs code from the server); write it as JSON");
    json::Value value = json::parse(bytes, key);
    if (meta.encoding == "json") return Entry(NonTensorData(std::move(value)));
    TD_CHECK(meta.encoding == "json_array", StorageError, key, ": unknown non-tensor encoding '", meta.encoding, "'");
    TD_CHECK(value.is_array(), StorageError, key, ": a json_array value that is not a JSON list");
    if (meta.per_element) {
      try {
        return Entry(NonTensorData::from_list(value, batch));
      } catch (const Error& e) {
        TD_THROW(StorageError, key, ": per-element values that do not match the batch ", shape_json(batch), ": ", e.what());
      }
    }
    const auto& rows = value.as_array();
    if (batch.empty()) {
      TD_CHECK(rows.size() == 1, StorageError, key, ": a json_array of an unbatched store holds ", rows.size(),
               " values, expected 1");
      return Entry(NonTensorData(rows[0]));
    }
    TD_CHECK(static_cast<int64_t>(rows.size()) == batch[0], StorageError, key, ": a json_array of ", rows.size(),
             " rows for a batch of ", batch[0]);
    // Python's json_array holds one value per row of the first batch dim.
    std::vector<int64_t> view(batch.size(), 1);
    view[0] = batch[0];
    // Every element gets an int64 id: 8 bytes per element, whatever the value holds. Found by
    // the fuzzer: a batch of 2 x 2e13 failed in LibTorch's allocator, and 2 x 4.8e8 took 7.7 GB
    // for two values. Over 2^27 elements (1 GiB of ids) a broadcast value is refused.
    constexpr int64_t kMaxIdBytes = int64_t{8} << 27;
    TD_CHECK(detail::shape_nbytes(batch, at::kLong, key) <= kMaxIdBytes, StorageError, key, ": cannot hold one value id per element of the batch ",
             shape_json(batch), " (a json_array of ", rows.size(), " rows broadcast over more than 2^27 elements)");
    at::Tensor ids = at::arange(batch[0], at::kLong).view(view).expand(batch).contiguous();
    return Entry(NonTensorData::from_ids(std::vector<json::Value>(rows.begin(), rows.end()), ids).compacted());
  }
  return decode_tensor(meta, {bytes}, key, device);
}

Entry decode_tensor(const LeafMetadata& meta, c10::ArrayRef<std::string_view> parts, const std::string& key,
                    const std::optional<at::Device>& device) {
  const int64_t expected = leaf_bytes(meta.shape, meta.dtype, key);
  size_t got = 0;
  for (std::string_view part : parts) got += part.size();
  TD_CHECK(static_cast<int64_t>(got) == expected, StorageError, key, ": holds ", got,
           " bytes, but its metadata say shape ", shape_json(meta.shape), " of ", torch_dtype_name(meta.dtype), " (",
           expected, " bytes)");
  at::Tensor out = at::empty(meta.shape, at::TensorOptions().dtype(meta.dtype));
  char* at = expected > 0 ? static_cast<char*>(out.data_ptr()) : nullptr;
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    std::memcpy(at, part.data(), part.size());
    at += part.size();
  }
  if (device && !device->is_cpu()) out = out.to(*device);
  return Entry(std::move(out));
}

}  // namespace redis
}  // namespace tensordict
