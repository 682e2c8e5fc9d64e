// Printing in Python tensordict's repr layout (tensordict/base.py __repr__, _td_fields).

#include <algorithm>
#include <ostream>
#include <sstream>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include <tensordict/dtype.h>

#include "core/format.h"
#include "handle/repr_fields.h"

namespace tensordict {

namespace {

// textwrap.indent: prefixes every line that is not blank.
std::string indent(const std::string& text, size_t n) {
  std::string pad(n, ' ');
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    bool blank = std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
    if (!blank) out += pad;
    out += line;
    if (end == std::string::npos) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::string device_str(const std::optional<at::Device>& device) {
  return device.has_value() ? device->str() : "None";
}

std::string tensor_repr(const LeafMeta& t, const char* class_name) {
  std::ostringstream os;
  os << class_name << "(shape=" << detail::size_str(t.shape) << ", device=" << t.device.str()
     << ", dtype=" << torch_dtype_name(t.dtype) << ", is_shared=" << (t.device.is_cuda() ? "True" : "False")
     << ")";
  return os.str();
}

std::string non_tensor_repr(const NonTensorData& data, const TensorDict& parent) {
  if (data.is_stack()) {
    return "NonTensorStack(\n    " + data.tolist().python_str() + ",\n    batch_size=" +
           detail::size_str(data.ids().sizes()) + ",\n    device=" + device_str(parent.device()) + ")";
  }
  return "NonTensorData(data=" + data.value().python_str() + ", batch_size=" +
         detail::size_str(parent.batch_size()) + ", device=" + device_str(parent.device()) + ")";
}

}  // namespace

namespace detail {

std::string fields_repr(const TensorDict& td, const std::vector<std::string>& keys) {
  const TensorDictBase& impl = *td.impl();
  std::vector<std::string> fields;
  fields.reserve(keys.size());
  const char* leaf_class = impl.leaf_class_name();
  for (const std::string& key : keys) {
    std::string value;
    switch (impl.kind(key)) {
      case EntryKind::Tensor: value = tensor_repr(impl.leaf_meta(key), leaf_class); break;
      case EntryKind::TensorDict: value = impl.get(key).tensordict_unchecked().repr(); break;
      case EntryKind::NonTensor: value = non_tensor_repr(impl.get(key).non_tensor(), td); break;
      case EntryKind::Undefined: break;
    }
    fields.push_back(key + ": " + value);
  }
  std::sort(fields.begin(), fields.end());
  std::string joined = "\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) joined += ",\n";
    joined += fields[i];
  }
  return joined;
}

std::string indent_lines(const std::string& text, size_t n) { return indent(text, n); }

}  // namespace detail

std::string TensorDict::repr() const {
  const bool shared = is_shared() || (device().has_value() && device()->is_cuda());
  std::vector<std::string> parts = {
      "fields={" + indent(detail::fields_repr(*this, impl_->keys()), 4) + "}",
      "batch_size=" + detail::size_str(batch_size()),
      "device=" + device_str(device()),
      std::string("is_shared=") + (shared ? "True" : "False"),
  };
  impl_->repr_parts(parts);
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) body += ",\n";
    body += indent(parts[i], 4);
  }
  return std::string(type_name()) + "(\n" + body + ")";
}

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

}  // namespace tensordict
