// JSON records: to_json writes what Python tensordict v0.14 writes without pandas (its stdlib
// path: json.dumps of a list of records, floats as Python's repr of item()); from_json types
// each column as np.array(values) does there. The project's json.h does both ends: it keeps key
// order (the columns' order) and writes Python's stdlib style.

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/tabular.h>

#include "tabular/columns.h"

namespace tensordict {

using namespace tabular;

namespace {

// ---- Writing ------------------------------------------------------------------------------

// Element `flat` of a contiguous CPU tensor as Python's item() gives it.
json::Value element(const at::Tensor& data, int64_t flat) {
  const void* base = data.data_ptr();
  switch (data.scalar_type()) {
    case at::kBool: return json::Value(static_cast<const bool*>(base)[flat]);
    case at::kByte: return json::Value(int64_t{static_cast<const uint8_t*>(base)[flat]});
    case at::kChar: return json::Value(int64_t{static_cast<const int8_t*>(base)[flat]});
    case at::kShort: return json::Value(int64_t{static_cast<const int16_t*>(base)[flat]});
    case at::kInt: return json::Value(int64_t{static_cast<const int32_t*>(base)[flat]});
    case at::kLong: return json::Value(static_cast<const int64_t*>(base)[flat]);
    case at::kHalf: return json::Value(static_cast<double>(static_cast<float>(static_cast<const c10::Half*>(base)[flat])));
    case at::kBFloat16:
      return json::Value(static_cast<double>(static_cast<float>(static_cast<const c10::BFloat16*>(base)[flat])));
    case at::kFloat: return json::Value(static_cast<double>(static_cast<const float*>(base)[flat]));
    default: return json::Value(static_cast<const double*>(base)[flat]);
  }
}

// Row `row` of a leaf with feature dims as nested lists (Python's tolist()).
json::Value nested(const at::Tensor& data, c10::IntArrayRef feature_shape, int64_t& flat) {
  if (feature_shape.empty()) return element(data, flat++);
  json::Array out;
  out.reserve(static_cast<size_t>(feature_shape[0]));
  for (int64_t i = 0; i < feature_shape[0]; ++i) out.push_back(nested(data, feature_shape.slice(1), flat));
  return json::Value(std::move(out));
}

// ---- Reading ------------------------------------------------------------------------------

// What np.array makes of one column's values: a numeric array (bool < int64 < float64, nested
// equal-shape lists give feature dims) or nothing (an object array: the values stay values).
class NumericColumn {
 public:
  // Adds one row; false once the column cannot be numeric (`why` says what broke it).
  bool add(const json::Value& value) {
    std::vector<int64_t> shape;
    if (!shape_of(value, shape)) {
      why_ = describe(value) + " is not a number";
      return false;
    }
    if (rows_ == 0) {
      shape_ = shape;
    } else if (shape != shape_) {
      why_ = describe(value) + " has another shape than the rows before it";
      return false;
    }
    ++rows_;
    flatten(value);
    return true;
  }
  const std::string& why() const { return why_; }

  at::Tensor tensor() const {
    std::vector<int64_t> sizes{rows_};
    sizes.insert(sizes.end(), shape_.begin(), shape_.end());
    if (kind_ == json::Kind::Bool && !ints_.empty()) {
      std::vector<uint8_t> bytes(ints_.begin(), ints_.end());
      return at::tensor(bytes, at::kByte).to(at::kBool).reshape(sizes);
    }
    if (kind_ == json::Kind::Int) return at::tensor(ints_, at::kLong).reshape(sizes);
    return at::tensor(doubles_, at::kDouble).reshape(sizes);  // also empty lists: numpy's default
  }

 private:
  static std::string describe(const json::Value& value) {
    std::string text = value.dump(true);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return quote(text);
  }

  // The rectangular shape of nested lists of numbers and bools; false for anything else.
  static bool shape_of(const json::Value& value, std::vector<int64_t>& shape) {
    if (value.is_number() || value.is_bool()) return true;
    if (!value.is_array()) return false;
    const auto& items = value.as_array();
    shape.push_back(static_cast<int64_t>(items.size()));
    if (items.empty()) return true;
    std::vector<int64_t> first;
    if (!shape_of(items[0], first)) return false;
    for (size_t i = 1; i < items.size(); ++i) {
      std::vector<int64_t> other;
      if (!shape_of(items[i], other) || other != first) return false;
    }
    shape.insert(shape.end(), first.begin(), first.end());
    return true;
  }

  void flatten(const json::Value& value) {
    if (value.is_array()) {
      for (const auto& item : value.as_array()) flatten(item);
      return;
    }
    if (value.is_double()) {
      if (kind_ != json::Kind::Double) {
        doubles_.assign(ints_.begin(), ints_.end());
        kind_ = json::Kind::Double;
      }
      doubles_.push_back(value.as_double());
      return;
    }
    const int64_t i = value.is_bool() ? int64_t{value.as_bool()} : value.as_int();
    if (kind_ == json::Kind::Double) {
      doubles_.push_back(static_cast<double>(i));
      return;
    }
    if (value.is_int()) kind_ = json::Kind::Int;
    ints_.push_back(i);
  }

  int64_t rows_ = 0;
  std::vector<int64_t> shape_;
  json::Kind kind_ = json::Kind::Bool;
  std::vector<int64_t> ints_;
  std::vector<double> doubles_;
  std::string why_;
};

struct Records {
  std::vector<json::Value> records;
  std::vector<int64_t> lines;  // JSON Lines: 1-based line of each record
};

Records parse_records(const std::string& path, const std::string& text, bool lines) {
  Records out;
  if (lines) {
    // Python: text.strip().splitlines(), blank lines skipped.
    size_t pos = 0;
    int64_t line = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      ++line;
      const std::string_view body(text.data() + pos, end - pos);
      if (body.find_first_not_of(" \t\r\f\v") != std::string_view::npos) {
        out.records.push_back(json::parse(body, path + ":" + std::to_string(line)));
        out.lines.push_back(line);
      }
      pos = end + 1;
    }
    return out;
  }
  json::Value data = json::parse(text, path);
  TD_CHECK(data.is_array(), ValueError, path, ": JSON file must contain an array of records for tabular import "
           ", not a JSON ", json::kind_name(data.kind()), " (for one nested object, build the tensordict from it)");
  out.records = data.as_array();
  return out;
}

// Where the column names come from: the first record.
std::string where_columns(const std::string& path, const Records& parsed, bool lines) {
  if (!lines || parsed.lines.empty()) return path + ": record 0";
  return path + ":" + std::to_string(parsed.lines.front()) + ": record 0";
}

}  // namespace

TensorDict from_json(const std::string& path, const TabularReadOptions& options) {
  check_read_options(options, "from_json");
  const Records parsed = parse_records(path, read_input(path), options.lines);
  const auto& records = parsed.records;
  const auto rows = static_cast<int64_t>(records.size());
  const RowLocation where = [&](int64_t row) {
    if (row < 0) return where_columns(path, parsed, options.lines);
    if (!options.lines) return path + ": record " + std::to_string(row);
    return path + ":" + std::to_string(parsed.lines[static_cast<size_t>(row)]) + ": record " + std::to_string(row);
  };
  for (int64_t r = 0; r < rows; ++r) {
    TD_CHECK(records[static_cast<size_t>(r)].is_object(), ValueError, where(r), ": a record must be an object, not ",
             json::kind_name(records[static_cast<size_t>(r)].kind()));
  }
  // The columns are the first record's keys (Python's rule); a key only later records have would
  // be dropped silently there, so it is an error here. A missing key is None (r.get(key)).
  std::vector<ReadColumn> columns;
  std::unordered_map<std::string_view, size_t> column_of;
  if (rows > 0) {
    for (const auto& [key, value] : records[0].as_object()) {
      column_of.emplace(key, columns.size());
      columns.push_back(ReadColumn{key, {}, std::vector<json::Value>(records.size()), -1, {}});
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (const auto& [key, value] : records[static_cast<size_t>(r)].as_object()) {
      const auto it = column_of.find(key);
      TD_CHECK(it != column_of.end(), ValueError, where(r), ", column ", quote(key),
               ": the first record has no such key (its keys are the columns)");
      columns[it->second].values[static_cast<size_t>(r)] = value;
    }
  }
  for (ReadColumn& column : columns) {
    NumericColumn numeric;
    for (int64_t r = 0; r < rows && column.bad_row < 0; ++r) {
      if (!numeric.add(column.values[static_cast<size_t>(r)])) {
        column.bad_row = r;
        column.bad_what = numeric.why();
      }
    }
    if (column.bad_row < 0) {
      column.tensor = numeric.tensor();
      column.values.clear();
    }
  }
  return assemble(std::move(columns), rows, options, path, where);
}

void to_json(const TensorDict& td, const std::string& path, const TabularWriteOptions& options) {
  const WriteTable table = collect_leaves(td, options, path);
  std::vector<c10::IntArrayRef> feature_shapes;
  for (const auto& leaf : table.leaves) {
    feature_shapes.push_back(leaf.data.defined() ? leaf.data.sizes().slice(1) : c10::IntArrayRef());
  }
  std::string text;
  json::Array records;
  records.reserve(static_cast<size_t>(table.rows));
  for (int64_t r = 0; r < table.rows; ++r) {
    json::Object record;
    record.reserve(table.leaves.size());
    for (size_t i = 0; i < table.leaves.size(); ++i) {
      const LeafColumns& leaf = table.leaves[i];
      if (!leaf.data.defined()) {
        record.emplace_back(leaf.name, leaf.values[static_cast<size_t>(r)]);
        continue;
      }
      int64_t flat = r * (leaf.data.numel() / std::max<int64_t>(table.rows, 1));
      record.emplace_back(leaf.name, nested(leaf.data, feature_shapes[i], flat));
    }
    if (options.lines) {
      if (r) text += '\n';  // Python joins the lines: no newline after the last
      text += json::Value(std::move(record)).dump_stdlib();
    } else {
      records.emplace_back(std::move(record));
    }
  }
  if (!options.lines) text = json::Value(std::move(records)).dump_stdlib();
  write_output(path, text);
}

}  // namespace tensordict
