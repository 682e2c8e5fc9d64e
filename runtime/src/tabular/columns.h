#pragma once
// What the CSV and JSON readers and writers share: the leaves of a tensordict as columns (write),
// and columns assembled into a tensordict (read), with the element-column scheme of leaves with
// feature dims ("x[0]", "x[1][2]"; docs/tabular.md).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>
#include <tensordict/tabular.h>

namespace tensordict {
namespace tabular {

// ---- Writing ------------------------------------------------------------------------------

/// One leaf as the writers see it.
struct LeafColumns {
  std::string name;                 ///< nested key joined with the separator
  at::Tensor data;                  ///< tensors: CPU, contiguous, [rows, feature dims...]
  std::vector<json::Value> values;  ///< non-tensor data: one value per row
};

struct WriteTable {
  int64_t rows = 0;
  std::vector<LeafColumns> leaves;
};

/// The leaves of `td` in key order, checked: every leaf has `rows` values along its first dim
/// (ShapeError), nested levels need a separator and feature dims need options.feature_dims
/// (ValueError), names are unique and, with feature dims on, none reads back as an element
/// column. `path` names the file in messages.
WriteTable collect_leaves(const TensorDict& td, const TabularWriteOptions& options, const std::string& path);

/// "[i][j]..." of every element of `feature_shape`, row-major: one column name suffix each.
std::vector<std::string> element_suffixes(c10::IntArrayRef feature_shape);

/// numpy's str() of a value of a floating `dtype` (what pandas' to_csv writes): the shortest
/// digits that read back as the same value of that dtype, positional for 1e-4 <= |v| < 1e16,
/// scientific otherwise: 0.1, 1e-05, 1e+16, 123456790.0 (float32), inf, nan.
std::string numpy_float_str(double value, at::ScalarType dtype);

/// Replaces `path` by `text` atomically; StorageError naming it.
void write_output(const std::string& path, const std::string& text);

// ---- Reading ------------------------------------------------------------------------------

/// One column of a file, its type decided by the reader.
struct ReadColumn {
  std::string name;
  at::Tensor tensor;                ///< numeric: int64 / float64 / bool, [rows] or [rows, ...]
  std::vector<json::Value> values;  ///< otherwise: one value per row
  int64_t bad_row = -1;             ///< not numeric: the first row with a value that is not a number
  std::string bad_what;             ///< ... and what is wrong with it ("'abc' is not a number")
};

/// "<path>:5: row 3" / "<path>: record 3": where row `row` is, for messages; row -1: where the
/// column names are ("<path>:1: header").
using RowLocation = std::function<std::string(int64_t row)>;

/// Whether options.non_tensor_columns allows `column` (ValueError at its bad row otherwise).
void check_numeric(const ReadColumn& column, const TabularReadOptions& options, const RowLocation& where);

/// The tensordict of `columns` (each `rows` long): element columns assembled into leaves,
/// names split into nested keys, dtype, batch size, device and auto_batch_size applied.
/// `where_file` names the file, `where` a row, in messages.
TensorDict assemble(std::vector<ReadColumn> columns, int64_t rows, const TabularReadOptions& options,
                    const std::string& where_file, const RowLocation& where);

/// TypeError for batch_size together with auto_batch_size, ValueError for an empty separator.
void check_read_options(const TabularReadOptions& options, const char* function);

/// The contents of `path`; StorageError naming it when it cannot be read.
std::string read_input(const std::string& path);

/// Quoted and escaped for a message: 'a\n'.
std::string quote(std::string_view text);

}  // namespace tabular
}  // namespace tensordict
