// Key encoding and reserved names of the memmap format (docs/compatibility.md).

#include "backends/memmap/format.h"

#include <cctype>

#include <tensordict/backends/memmap.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>

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

namespace memmap_detail {

NonTensorMeta non_tensor_meta(const NonTensorData& data) {
  if (data.is_stack()) {
    json::Object stack{{"_type", kNonTensorStackType}, {"stack_dim", 0}, {"device", nullptr}, {"data", data.tolist()}};
    return {"NonTensorStack", json::Value(std::move(stack)).dump(), "pickle.pkl"};
  }
  json::Object single{{"_type", kNonTensorDataType}, {"data", data.value()}, {"_metadata", nullptr}};
  return {"NonTensorData", json::Value(std::move(single)).dump_stdlib(), "other.pickle"};
}

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

json::Value shape_json(c10::IntArrayRef shape) {
  json::Array out;
  out.reserve(shape.size());
  for (int64_t s : shape) out.emplace_back(s);
  return json::Value(std::move(out));
}

}  // namespace memmap_detail
}  // namespace tensordict
