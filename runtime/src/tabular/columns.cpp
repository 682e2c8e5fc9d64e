// Tabular files, the part CSV and JSON share: leaves to columns (write), columns to a tensordict
// (read), element columns of leaves with feature dims, numpy's float text.

#include "tabular/columns.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/accumulate.h>
#include <c10/util/Half.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/non_tensor.h>

#include "core/file_io.h"
#include "core/format.h"

namespace tensordict {
namespace tabular {

std::string quote(std::string_view text) { return "'" + detail::printable(text) + "'"; }

namespace {

std::string shape_str(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// "x[1][0]" -> base "x", index {1, 0}. Only canonical indices count ("x[01]" is a plain name), so
// one element has one spelling.
bool parse_element_name(const std::string& name, std::string& base, std::vector<int64_t>& index) {
  std::vector<int64_t> reversed;
  size_t end = name.size();
  while (end > 0 && name[end - 1] == ']') {
    const size_t open = name.rfind('[', end - 1);
    if (open == std::string::npos) break;
    const std::string_view digits(name.data() + open + 1, end - 1 - open - 1);
    if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      break;
    }
    reversed.push_back(std::atoll(std::string(digits).c_str()));
    end = open;
  }
  if (reversed.empty() || end == 0) return false;
  base = name.substr(0, end);
  index.assign(reversed.rbegin(), reversed.rend());
  return true;
}

bool writable_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBool: case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong:
    case at::kHalf: case at::kBFloat16: case at::kFloat: case at::kDouble:
      return true;
    default:
      return false;
  }
}

// Whether decimal text, rounded to `dtype` (half or bfloat16), gives `value` back.
bool reads_back(const char* begin, const char* end, double value, at::ScalarType dtype) {
  double parsed = 0;
  std::from_chars(begin, end, parsed);
  const float f = static_cast<float>(parsed);
  if (dtype == at::kHalf) return static_cast<float>(c10::Half(f)) == static_cast<float>(value);
  return static_cast<float>(c10::BFloat16(f)) == static_cast<float>(value);
}

class Collector {
 public:
  Collector(const TabularWriteOptions& options, const std::string& path) : options_(options), path_(path) {}

  WriteTable run(const TensorDict& td) {
    table_.rows = td.batch_dims() > 0 ? td.batch_size()[0] : -1;
    if (table_.rows >= 0) rows_from_ = "batch size " + shape_str(td.batch_size());
    visit(td, {});
    if (!uniform_.empty() && table_.rows < 0) {
      TD_THROW(ShapeError, path_, ": non-tensor leaf ", uniform_.front().second.repr(),
               " holds one value and the tensordict has no batch dim and no other leaf: the number of rows is unknown");
    }
    if (table_.rows < 0) table_.rows = 0;
    for (auto& [index, key] : uniform_) {
      auto& values = table_.leaves[index].values;
      const json::Value value = values.front();
      values.assign(static_cast<size_t>(table_.rows), value);
    }
    return std::move(table_);
  }

 private:
  void visit(const TensorDict& level, const std::vector<std::string>& parts) {
    for (const auto& [key, entry] : level.items()) {
      std::vector<std::string> key_parts = parts;
      key_parts.push_back(key.back());
      const NestedKey full(key_parts);
      if (entry.is_tensordict()) {
        TD_CHECK(options_.separator.has_value(), ValueError, path_, ": nested tensordict at key ", full.repr(),
                 " needs a separator to name its columns (TabularWriteOptions::separator, e.g. \".\")");
        visit(entry.tensordict(), key_parts);
        continue;
      }
      LeafColumns leaf;
      leaf.name = full.join(options_.separator.value_or(""));
      if (entry.is_tensor()) {
        at::Tensor t = entry.tensor().detach();
        TD_CHECK(writable_dtype(t.scalar_type()), TypeError, path_, ": leaf ", full.repr(), " has dtype ",
                 t.scalar_type(), ", which a table cannot hold (bool, integer and float leaves can)");
        TD_CHECK(t.dim() > 0, ShapeError, path_, ": leaf ", full.repr(),
                 " is 0-dim: a column needs one value per row along its first dim");
        expect_rows(t.size(0), full, "leaf ", t.sizes());
        if (t.dim() > 1) {
          TD_CHECK(options_.feature_dims, ValueError, path_, ": cannot write tensor with shape ", shape_str(t.sizes()),
                   " at key ", full.repr(), " as one column: only 1-D leaves are (TabularWriteOptions::feature_dims "
                   "writes one column per element)");
          TD_CHECK(c10::multiply_integers(t.sizes().slice(1)) > 0, ValueError, path_, ": leaf ", full.repr(), " of shape ", shape_str(t.sizes()),
                   " has no element per row: it would write no column");
        }
        leaf.data = t.cpu().contiguous();
      } else {
        const NonTensorData& data = entry.non_tensor();
        if (!data.is_stack()) {
          leaf.values.push_back(data.value());  // repeated once the row count is known
          uniform_.emplace_back(table_.leaves.size(), full);
        } else {
          const auto shape = data.shape();
          TD_CHECK(shape.size() == 1 && !data.is_ragged(), ShapeError, path_, ": non-tensor stack at key ",
                   full.repr(), " has shape ", shape_str(shape), ": a column holds one value per row ([rows])");
          expect_rows(shape[0], full, "non-tensor stack ", shape);
          leaf.values = data.tolist().as_array();
        }
      }
      add_name(leaf.name, full);
      table_.leaves.push_back(std::move(leaf));
    }
  }

  void expect_rows(int64_t n, const NestedKey& key, const char* what, c10::IntArrayRef shape) {
    if (table_.rows < 0) {
      table_.rows = n;
      rows_from_ = "leaf " + key.repr();
      return;
    }
    TD_CHECK(n == table_.rows, ShapeError, path_, ": ", what, key.repr(), " has shape ", shape_str(shape),
             ": its first dim must be the number of rows, ", table_.rows, " (from the ", rows_from_, ")");
  }

  void add_name(const std::string& name, const NestedKey& key) {
    std::string base;
    std::vector<int64_t> index;
    TD_CHECK(!options_.feature_dims || !parse_element_name(name, base, index), ValueError, path_, ": column ",
             quote(name), " of leaf ", key.repr(), " would read back as an element of a leaf ", quote(base),
             ": rename the key, or write and read with feature_dims = false");
    auto [it, added] = names_.emplace(name, key.repr());
    TD_CHECK(added, ValueError, path_, ": leaves ", it->second, " and ", key.repr(), " both give the column ",
             quote(name), "; choose another separator");
  }

  const TabularWriteOptions& options_;
  const std::string& path_;
  WriteTable table_;
  std::string rows_from_;
  std::unordered_map<std::string, std::string> names_;
  std::vector<std::pair<size_t, NestedKey>> uniform_;
};

}  // namespace

WriteTable collect_leaves(const TensorDict& td, const TabularWriteOptions& options, const std::string& path) {
  TD_CHECK(!options.separator || !options.separator->empty(), ValueError, "empty separator");
  return Collector(options, path).run(td);
}

std::vector<std::string> element_suffixes(c10::IntArrayRef feature_shape) {
  std::vector<std::string> out{""};
  for (int64_t size : feature_shape) {
    std::vector<std::string> next;
    next.reserve(out.size() * static_cast<size_t>(size));
    for (const auto& prefix : out) {
      for (int64_t i = 0; i < size; ++i) next.push_back(prefix + "[" + std::to_string(i) + "]");
    }
    out = std::move(next);
  }
  return out;
}

std::string numpy_float_str(double value, at::ScalarType dtype) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest round-trip digits of the value in its own dtype, as d.ddde+XX.
  char buf[64];
  char* end = buf;
  if (dtype == at::kDouble) {
    end = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific).ptr;
  } else if (dtype == at::kFloat) {
    end = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(value), std::chars_format::scientific).ptr;
  } else {  // half, bfloat16: no shortest mode, so the fewest digits that read back
    for (int precision = 0; precision < 9; ++precision) {
      end = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific, precision).ptr;
      if (reads_back(buf, end, value, dtype)) break;
    }
  }
  const std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  // numpy decides by the value, not by its digits (float32 1e-4 is 9.99999974e-05: "1e-04").
  const long double magnitude = std::fabs(static_cast<long double>(value));
  if (magnitude == 0 || (magnitude < 1e16L && magnitude >= 1e-4L)) {
    if (exponent >= 0) {
      const size_t whole = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= whole) {
        out += digits + std::string(whole - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, whole) + "." + digits.substr(whole);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int magnitude_exp = std::abs(exponent);
  out += exponent < 0 ? "e-" : "e+";
  if (magnitude_exp < 10) out += '0';
  return out + std::to_string(magnitude_exp);
}

void write_output(const std::string& path, const std::string& text) {
  detail::replace_file(path, text.data(), text.size());
}

std::string read_input(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TD_CHECK(fd >= 0, StorageError, "cannot read ", path, ": ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TD_THROW(StorageError, "cannot read ", path, ": not a regular file");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      TD_THROW(StorageError, "cannot read ", path, ": ", std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// ---- Reading ------------------------------------------------------------------------------

void check_read_options(const TabularReadOptions& options, const char* function) {
  TD_CHECK(!(options.auto_batch_size && options.batch_size), TypeError, "Conflicting batch sizes in ", function,
           ": batch_size and auto_batch_size cannot be both specified.");
  TD_CHECK(!options.separator || !options.separator->empty(), ValueError, function, ": empty separator");
}

void check_numeric(const ReadColumn& column, const TabularReadOptions& options, const RowLocation& where) {
  if (options.non_tensor_columns || column.tensor.defined()) return;
  TD_THROW(ValueError, where(column.bad_row), ", column ", quote(column.name), ": ", column.bad_what,
           " (non_tensor_columns is off: every column must be numeric or bool)");
}

namespace {

// One leaf of the result: a column, or the element columns of a leaf with feature dims.
struct Leaf {
  std::string name;
  at::Tensor tensor;
  std::vector<json::Value> values;
};

struct Group {
  std::vector<std::vector<int64_t>> indices;
  std::vector<size_t> columns;
  size_t leaf = 0;  // its place among the leaves
};

// The first element index of the grid `shape` that `present` (sorted, unique, inside it) lacks.
std::vector<int64_t> first_missing(std::vector<std::vector<int64_t>> present, const std::vector<int64_t>& shape) {
  std::sort(present.begin(), present.end());
  std::vector<int64_t> at(shape.size(), 0);
  for (const auto& index : present) {
    if (index != at) break;
    for (size_t d = shape.size(); d-- > 0;) {  // row-major successor
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
  }
  return at;
}

std::string element_name(const std::string& base, const std::vector<int64_t>& index) {
  std::string out = base;
  for (int64_t i : index) out += "[" + std::to_string(i) + "]";
  return out;
}

at::Tensor assemble_group(const std::string& base, const Group& group, std::vector<ReadColumn>& columns, int64_t rows,
                          const RowLocation& where) {
  const std::string header = where(-1);
  const size_t depth = group.indices.front().size();
  std::vector<int64_t> shape(depth, 0);
  for (size_t i = 0; i < group.indices.size(); ++i) {
    const auto& index = group.indices[i];
    TD_CHECK(index.size() == depth, ValueError, header, ": columns ", quote(columns[group.columns[0]].name), " and ",
             quote(columns[group.columns[i]].name), " give leaf ", quote(base), " different numbers of feature dims");
    for (size_t d = 0; d < depth; ++d) shape[d] = std::max(shape[d], index[d] + 1);
  }
  // Complete when the grid holds exactly the columns there are (names are unique).
  int64_t total = 1;  // capped, so a hostile index cannot overflow it
  for (int64_t s : shape) total = std::min<int64_t>(total * s, static_cast<int64_t>(columns.size()) + 1);
  if (total != static_cast<int64_t>(group.columns.size())) {
    TD_THROW(ValueError, header, ": leaf ", quote(base), " has element columns up to feature shape ", shape_str(shape),
             " but no column ", quote(element_name(base, first_missing(group.indices, shape))));
  }
  std::vector<at::Tensor> elements(static_cast<size_t>(total));
  at::ScalarType dtype = at::kBool;
  for (size_t i = 0; i < group.columns.size(); ++i) {
    ReadColumn& column = columns[group.columns[i]];
    if (!column.tensor.defined()) {
      TD_THROW(ValueError, where(column.bad_row), ", column ", quote(column.name), ": ",
               column.bad_what, " (an element of leaf ", quote(base), ", which must be numeric)");
    }
    TD_CHECK(column.tensor.dim() == 1, ValueError, header, ", column ", quote(column.name),
             ": holds arrays; an element column holds one number per row");
    int64_t flat = 0;
    for (size_t d = 0; d < depth; ++d) flat = flat * shape[d] + group.indices[i][d];
    elements[static_cast<size_t>(flat)] = column.tensor;
    dtype = c10::promoteTypes(dtype, column.tensor.scalar_type());
  }
  for (auto& t : elements) t = t.to(dtype);
  std::vector<int64_t> sizes{rows};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  return at::stack(elements, 1).reshape(sizes);
}

}  // namespace

TensorDict assemble(std::vector<ReadColumn> columns, int64_t rows, const TabularReadOptions& options,
                    const std::string& file, const RowLocation& where) {
  std::vector<Leaf> leaves;
  std::map<std::string, Group> groups;
  std::unordered_map<std::string, size_t> plain;  // name -> leaf
  std::string base;
  std::vector<int64_t> index;
  for (size_t c = 0; c < columns.size(); ++c) {
    ReadColumn& column = columns[c];
    if (options.feature_dims && parse_element_name(column.name, base, index)) {
      auto [it, added] = groups.try_emplace(base);
      if (added) {
        it->second.leaf = leaves.size();
        leaves.push_back(Leaf{base, {}, {}});
      }
      it->second.indices.push_back(index);
      it->second.columns.push_back(c);
      continue;
    }
    check_numeric(column, options, where);
    TD_CHECK(plain.emplace(column.name, leaves.size()).second, ValueError, where(-1), ": column ", quote(column.name),
             " appears twice");
    leaves.push_back(Leaf{column.name, std::move(column.tensor), std::move(column.values)});
  }
  for (auto& [name, group] : groups) {
    TD_CHECK(plain.count(name) == 0, ValueError, where(-1), ": column ", quote(name), " and element column ",
             quote(columns[group.columns[0]].name), " both name leaf ", quote(name));
    leaves[group.leaf].tensor = assemble_group(name, group, columns, rows, where);
  }

  // Nested keys: no key may be both a leaf and a level (Python raises for one order only).
  std::map<std::vector<std::string>, std::pair<bool, std::string>> seen;  // key -> (is leaf, column)
  std::vector<NestedKey> keys;
  keys.reserve(leaves.size());
  for (const Leaf& leaf : leaves) {
    NestedKey key = options.separator ? NestedKey::split(leaf.name, *options.separator) : NestedKey(leaf.name);
    std::vector<std::string> prefix;
    for (size_t i = 0; i + 1 < key.size(); ++i) {
      prefix.push_back(key[i]);
      auto [it, added] = seen.try_emplace(prefix, false, leaf.name);
      TD_CHECK(added || !it->second.first, ValueError, where(-1), ": Key conflict: ", quote(key[i]),
               " is both a leaf (column ", quote(it->second.second), ") and a prefix (column ", quote(leaf.name), ")");
    }
    auto [it, added] = seen.try_emplace(key.parts(), true, leaf.name);
    TD_CHECK(added, ValueError, where(-1), ": Key conflict: ", quote(leaf.name), " is both a leaf and a prefix (column ",
             quote(it->second.second), ")");
    keys.push_back(std::move(key));
  }

  const std::vector<int64_t> batch = options.batch_size.value_or(std::vector<int64_t>{rows});
  TensorDict td = TensorDict::empty_with(batch, options.device);
  for (size_t i = 0; i < leaves.size(); ++i) {
    Leaf& leaf = leaves[i];
    try {
      if (leaf.tensor.defined()) {
        td.set(keys[i], options.dtype ? leaf.tensor.to(*options.dtype) : leaf.tensor);
      } else if (td.batch_dims() == 0) {
        td.set_non_tensor(keys[i], json::Value(std::move(leaf.values)));
      } else {
        td.set(keys[i], EntryInit(NonTensorData::from_list(json::Value(std::move(leaf.values)), {rows})));
      }
    } catch (Error& e) {
      e.add_context("while reading column " + quote(leaf.name) + " of " + file);
      throw;
    }
  }
  if (options.auto_batch_size) td.auto_batch_size_(options.batch_dims);
  return td;
}

}  // namespace tabular
}  // namespace tensordict
