#include "backends/redis/store_layout.h"

#include "core/file_io.h"

#include <cstdio>
#include <random>

#include <tensordict/dtype.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>

namespace tensordict {
namespace redis {

StoreKeys::StoreKeys(std::string prefix, std::string td_id)
    : td_id_(std::move(td_id)), base_(std::move(prefix) + ":{" + td_id_ + "}:") {}

std::string new_td_id() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device());
  uint64_t hi = gen(), lo = gen();
  hi = (hi & ~uint64_t{0xF000}) | uint64_t{0x4000};          // version 4
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return text;
}

namespace {

// Key parts are joined with '.', as Python does; a part holding '.' or '%', or an empty part,
// is escaped so that every key reads back as it was written ('%' -> "%25", '.' -> "%2E", ""
// -> "%"). Keys without those characters are Python's byte for byte.
std::string encode_part(std::string_view part) {
  if (part.empty()) return "%";
  std::string out;
  for (char c : part) {
    if (c == '%') out += "%25";
    else if (c == '.') out += "%2E";
    else out += c;
  }
  return out;
}

std::string decode_part(std::string_view part) {
  if (part == "%") return "";
  std::string out;
  for (size_t i = 0; i < part.size(); ++i) {
    if (part.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else if (part.substr(i, 3) == "%2E") {
      out += '.';
      i += 2;
    } else {
      out += part[i];
    }
  }
  return out;
}

}  // namespace

std::string leaf_path(KeyRef key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (i) out += '.';
    out += encode_part(key[i]);
  }
  return out;
}

std::string key_part(std::string_view part) { return encode_part(part); }

NestedKey split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.push_back(decode_part(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return NestedKey(std::move(parts));
}

std::string key_name(std::string_view part) { return decode_part(part); }

std::string shape_json(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::vector<int64_t> parse_shape(std::string_view text, const std::string& where) {
  json::Value value;
  try {
    value = json::parse(text, where);
  } catch (const Error& e) {
    TD_THROW(StorageError, where, ": not a JSON list of sizes: ", e.what());
  }
  TD_CHECK(value.is_array(), StorageError, where, ": expected a JSON list of sizes, got '", std::string(text.substr(0, 64)), "'");
  std::vector<int64_t> shape;
  for (const json::Value& dim : value.as_array()) {
    TD_CHECK(dim.is_int() && dim.as_int() >= 0, StorageError, where, ": expected a JSON list of sizes >= 0, got '",
             std::string(text.substr(0, 64)), "'");
    shape.push_back(dim.as_int());
  }
  // Found by the fuzzer: a shape whose element count overflows reached LibTorch as a c10::Error
  // when a value was broadcast to it. Every element must have an int64 id.
  detail::shape_nbytes(shape, at::kLong, where);
  return shape;
}

LeafMetadata parse_metadata(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key) {
  auto find = [&](const char* name) -> const std::string* {
    for (const auto& [field, value] : fields)
      if (field == name) return &value;
    return nullptr;
  };
  LeafMetadata meta;
  TD_CHECK(!fields.empty(), StorageError, key, ": the leaf's metadata hash is missing");
  if (const std::string* flag = find("is_non_tensor"); flag != nullptr && *flag == "1") {
    meta.is_non_tensor = true;
    const std::string* encoding = find("encoding");
    TD_CHECK(encoding != nullptr, StorageError, key, ": non-tensor metadata without an 'encoding' field");
    meta.encoding = *encoding;
    const std::string* elements = find("elements");
    meta.per_element = elements != nullptr && *elements == "1";
    return meta;
  }
  const std::string* shape = find("shape");
  const std::string* dtype = find("dtype");
  TD_CHECK(shape != nullptr, StorageError, key, ": tensor metadata without a 'shape' field");
  TD_CHECK(dtype != nullptr, StorageError, key, ": tensor metadata without a 'dtype' field");
  meta.shape = parse_shape(*shape, key + " (field 'shape')");
  const std::optional<c10::ScalarType> parsed = dtype_from_torch_name(*dtype);
  TD_CHECK(parsed.has_value(), StorageError, key, ": unknown dtype '", dtype->substr(0, 64), "'");
  meta.dtype = *parsed;
  leaf_bytes(meta.shape, meta.dtype, key);  // refuse sizes that overflow before anyone allocates
  if (const std::string* offset = find("row_offset")) {
    const std::vector<int64_t> parsed_offset = parse_shape("[" + *offset + "]", key + " (field 'row_offset')");
    TD_CHECK(parsed_offset.size() == 1 && !meta.shape.empty(), StorageError, key,
             ": 'row_offset' must be one integer >= 0, on a leaf with a row dim");
    meta.row_offset = parsed_offset[0];
  }
  return meta;
}

int64_t leaf_bytes(c10::IntArrayRef shape, c10::ScalarType dtype, const std::string& key) {
  int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t dim : shape) {
    TD_CHECK(dim == 0 || bytes <= INT64_MAX / dim, StorageError, key, ": shape ", shape_json(shape),
             " holds more bytes than int64 can count");
    bytes *= dim;
  }
  return bytes;
}

}  // namespace redis
}  // namespace tensordict
