#pragma once
// Tabular files: a tensordict as a table of one row per batch element (Python tensordict v0.14's
// from_csv / to_csv / from_json / to_json). docs/tabular.md gives the column rules, the element
// columns of leaves with feature dims, and what differs from Python.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {

/// Keyword arguments of Python's from_csv / from_json, plus the C++ extensions.
struct TabularReadOptions {
  /// Column names are split at it into nested keys ("obs.x" -> {"obs", "x"}); none: flat keys.
  std::optional<std::string> separator;
  /// Every numeric and bool column is cast to it (default: int64, float64 or bool as read).
  std::optional<at::ScalarType> dtype;
  /// Default: [number of rows].
  std::optional<std::vector<int64_t>> batch_size;
  /// auto_batch_size_(batch_dims) on the result; TypeError together with batch_size.
  bool auto_batch_size = false;
  std::optional<int64_t> batch_dims;
  std::optional<at::Device> device;
  /// JSON only: one record per line (JSON Lines) instead of one array of records.
  bool lines = false;
  /// Columns "x[0]", "x[1]", ... (and "x[i][j]") are assembled into one leaf "x" of shape
  /// [rows, 2] ([rows, I, J]); false: such names are plain keys (Python v0.14's reading).
  bool feature_dims = true;
  /// A column that is not numeric or bool becomes a non-tensor stack of its values (Python's
  /// rule); false: it is a ValueError naming the file, line and column of the first such value.
  bool non_tensor_columns = true;
  /// CSV only: the field delimiter (pandas' `sep`).
  char delimiter = ',';
};

/// Keyword arguments of Python's to_csv / to_json, plus the C++ extensions.
struct TabularWriteOptions {
  /// Nested keys are joined with it into column names; none: a nested tensordict is a ValueError.
  std::optional<std::string> separator;
  /// JSON only: JSON Lines (records separated by newlines) instead of one array.
  bool lines = false;
  /// Leaves with dims past the first (shape [rows, 3]) are written as element columns
  /// ("x[0]", "x[1]", "x[2]") in CSV and as nested arrays in JSON; false: they are a ValueError,
  /// as in Python v0.14.
  bool feature_dims = true;
  /// CSV only: the field delimiter.
  char delimiter = ',';
};

/// Reads a CSV file with a header row: numeric columns become int64 / float64 / bool tensors of
/// shape [rows], the others non-tensor stacks. NotImplementedError when the runtime was built
/// without libcsv.
TensorDict from_csv(const std::string& path, const TabularReadOptions& options = {});
/// Writes one row per element of the first batch dim, as pandas' `to_csv(index=False)` does.
void to_csv(const TensorDict& td, const std::string& path, const TabularWriteOptions& options = {});
/// Reads a JSON array of records (or JSON Lines with `options.lines`); keys of the first record
/// are the columns.
TensorDict from_json(const std::string& path, const TabularReadOptions& options = {});
/// Writes the records as Python tensordict v0.14 does without pandas (stdlib `json.dumps`).
void to_json(const TensorDict& td, const std::string& path, const TabularWriteOptions& options = {});

}  // namespace tensordict
