// Key encoding and dtype names of the memmap format (storage-formats.md §0, §1.3).

#include "memmap/format.h"

#include <cctype>

#include <torch/version.h>

#include <tensordict/errors.h>
#include <tensordict/memmap.h>

namespace tensordict {

namespace {

bool needs_escape(unsigned char c) {
  switch (c) {
    case '/': case '<': case '>': case ':': case '"': case '|': case '?': case '*':
    case '\\': case ' ': case '%':
      return true;
    default:
      return c < 0x20 || c == 0x7F;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct DtypeName {
  at::ScalarType dtype;
  const char* name;
};

// The dtypes Python tensordict loads back (_STR_DTYPE_TO_DTYPE) that this LibTorch has,
// quantized ones excepted (their files need quantizer parameters the format does not store).
constexpr DtypeName kDtypes[] = {
    {at::kBool, "torch.bool"},
    {at::kByte, "torch.uint8"},
    {at::kChar, "torch.int8"},
    {at::kShort, "torch.int16"},
    {at::kInt, "torch.int32"},
    {at::kLong, "torch.int64"},
    {at::kHalf, "torch.float16"},
    {at::kFloat, "torch.float32"},
    {at::kDouble, "torch.float64"},
    {at::kBFloat16, "torch.bfloat16"},
    {at::kComplexHalf, "torch.complex32"},
    {at::kComplexFloat, "torch.complex64"},
    {at::kComplexDouble, "torch.complex128"},
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
    {at::kUInt16, "torch.uint16"},
    {at::kUInt32, "torch.uint32"},
    {at::kUInt64, "torch.uint64"},
#endif
};

}  // namespace

std::string encode_key_for_filesystem(const std::string& key) {
  if (key.empty()) return "%";
  if (key == ".") return "%2E";
  if (key == "..") return "%2E%2E";
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (unsigned char c : key) {
    if (needs_escape(c)) {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string decode_key_from_filesystem(const std::string& name) {
  if (name == "%") return "";
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size()) {
      int hi = hex_value(name[i + 1]);
      int lo = hex_value(name[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += name[i];
  }
  return out;
}

std::string dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  TD_THROW(NotImplementedError, "dtype ", c10::toString(dtype),
           " cannot be stored in a memmap directory: Python tensordict could not load it back");
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

namespace memmap_detail {

bool is_reserved_meta_key(const std::string& key) {
  return key == "shape" || key == "device" || key == "_type";
}

bool is_safe_legacy_key(const std::string& key, bool collection) {
  if (key.find('/') != std::string::npos || key.find('\\') != std::string::npos) return false;
  if (key.find('\0') != std::string::npos) return false;
  if (key.size() >= 2 && std::isalpha(static_cast<unsigned char>(key[0])) && key[1] == ':') return false;
  if (collection && (key.empty() || key == "." || key == "..")) return false;
  return true;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace memmap_detail
}  // namespace tensordict
