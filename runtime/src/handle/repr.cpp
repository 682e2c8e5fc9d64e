// Printing in Python tensordict's repr layout (tensordict/base.py __repr__, _td_fields).

#include <algorithm>
#include <ostream>
#include <sstream>

#include <c10/util/Exception.h>

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
           detail::size_str(data.shape()) + ",\n    device=" + device_str(parent.device()) + ")";
  }
  return "NonTensorData(data=" + data.value().python_str() + ", batch_size=" +
         detail::size_str(parent.batch_size()) + ", device=" + device_str(parent.device()) + ")";
}

// What prints in place of an entry that could not be read.
std::string unreadable(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return std::string("<unreadable: ") + (c10_error ? c10_error->what_without_backtrace() : e.what()) + ">";
}

}  // namespace

namespace detail {

std::string fields_repr(const TensorDict& td, const std::vector<std::string>& keys, const NestedRepr& nested_repr) {
  const TensorDictBase& impl = *td.impl();
  std::vector<std::string> fields;
  fields.reserve(keys.size());
  const char* leaf_class = impl.leaf_class_name();
  for (const std::string& key : keys) {
    std::string value;
    // Printing never throws: an entry the backend cannot read (a server gone, a file
    // truncated) prints the reason in its place.
    try {
      switch (impl.kind(key)) {
        case EntryKind::Tensor: value = tensor_repr(impl.leaf_meta(key), leaf_class); break;
        case EntryKind::TensorDict: {
          const TensorDict child = impl.get(key).tensordict_unchecked();
          value = nested_repr ? nested_repr(key, child) : child.repr();
          break;
        }
        case EntryKind::NonTensor: value = non_tensor_repr(impl.get(key).non_tensor(), td); break;
        case EntryKind::Undefined: break;
      }
    } catch (const std::exception& e) {
      value = unreadable(e);
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

std::string TensorDict::repr() const { return detail::repr_as(*this, type_name(), {}); }

namespace detail {

std::string repr_as(const TensorDict& td, const char* class_name, const NestedRepr& nested_repr) {
  const TensorDictBase* impl_ = td.impl();
  const bool shared = td.is_shared() || (td.device().has_value() && td.device()->is_cuda());
  std::vector<std::string> keys;
  try {
    keys = impl_->keys();
  } catch (const std::exception& e) {
    return std::string(class_name) + "(" + unreadable(e) + ")";
  }
  std::vector<std::string> parts = {
      "fields={" + indent(detail::fields_repr(td, keys, nested_repr), 4) + "}",
      "batch_size=" + detail::size_str(td.batch_size()),
      "device=" + device_str(td.device()),
      std::string("is_shared=") + (shared ? "True" : "False"),
  };
  try {
    impl_->repr_parts(parts);
  } catch (const std::exception& e) {
    parts.push_back(unreadable(e));
  }
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) body += ",\n";
    body += indent(parts[i], 4);
  }
  return std::string(class_name) + "(\n" + body + ")";
}

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

}  // namespace tensordict
