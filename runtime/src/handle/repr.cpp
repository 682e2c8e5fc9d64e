// Printing in Python tensordict's repr layout (tensordict/base.py __repr__, _td_fields).

#include <algorithm>
#include <ostream>
#include <sstream>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include <tensordict/dtype.h>

#include "core/format.h"

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

std::string tensor_repr(const at::Tensor& t, const char* class_name) {
  std::ostringstream os;
  os << class_name << "(shape=" << detail::size_str(t.sizes()) << ", device=" << t.device().str()
     << ", dtype=" << torch_dtype_name(t.scalar_type())
     << ", is_shared=" << (t.is_cuda() ? "True" : "False") << ")";
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

std::string TensorDict::repr() const {
  std::vector<std::string> fields;
  fields.reserve(impl_->num_entries());
  const char* leaf_class = impl_->leaf_class_name();
  impl_->for_each([&](const std::string& key, const Entry& entry) {
    std::string value;
    switch (entry.kind()) {
      case Entry::Kind::Tensor: value = tensor_repr(entry.tensor_unchecked(), leaf_class); break;
      case Entry::Kind::TensorDict: value = entry.tensordict_unchecked().repr(); break;
      case Entry::Kind::NonTensor: value = non_tensor_repr(entry.non_tensor(), *this); break;
      case Entry::Kind::Undefined: break;
    }
    fields.push_back(key + ": " + value);
  });
  std::sort(fields.begin(), fields.end());
  std::string joined = "\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) joined += ",\n";
    joined += fields[i];
  }
  const bool shared = is_shared() || (device().has_value() && device()->is_cuda());
  std::string body = indent("fields={" + indent(joined, 4) + "}", 4) + ",\n" +
                     indent("batch_size=" + detail::size_str(batch_size()), 4) + ",\n" +
                     indent("device=" + device_str(device()), 4) + ",\n" +
                     indent(std::string("is_shared=") + (shared ? "True" : "False"), 4);
  return std::string(type_name()) + "(\n" + body + ")";
}

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

}  // namespace tensordict
