// CSV: to_csv writes what pandas' DataFrame.to_csv(index=False) writes for the same columns
// (Python tensordict v0.14's to_csv); from_csv parses with libcsv and types each column as
// pandas' read_csv does (int64, float64 with NaN for missing values, bool, else strings).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <tensordict/errors.h>
#include <tensordict/tabular.h>

#include "tabular/columns.h"

#ifdef TENSORDICT_HAVE_LIBCSV
#include <csv.h>
#endif

namespace tensordict {

using namespace tabular;

namespace {

void check_delimiter(char delimiter) {
  TD_CHECK(delimiter != '"' && delimiter != '\n' && delimiter != '\r' && delimiter != '\0', ValueError,
           "CSV delimiter ", quote(std::string_view(&delimiter, 1)), " is a quote, a line break or NUL");
}

// ---- Writing ------------------------------------------------------------------------------

// Python's csv writer (QUOTE_MINIMAL, doublequote): quotes a field holding the delimiter, a quote
// or a line break. A bare \r is quoted too, as CPython does since 3.11.9 / 3.12.3 (older
// versions left it bare, and readers then split the row).
void append_field(std::string& out, std::string_view field, char delimiter) {
  const bool quoted = std::any_of(field.begin(), field.end(),
                                  [&](char c) { return c == delimiter || c == '"' || c == '\n' || c == '\r'; });
  if (!quoted) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// One element of a tensor leaf as pandas writes it: numpy's str(), NaN as the empty string.
std::string tensor_cell(const at::Tensor& data, int64_t flat) {
  const void* base = data.data_ptr();
  switch (data.scalar_type()) {
    case at::kBool: return static_cast<const bool*>(base)[flat] ? "True" : "False";
    case at::kByte: return std::to_string(static_cast<const uint8_t*>(base)[flat]);
    case at::kChar: return std::to_string(static_cast<const int8_t*>(base)[flat]);
    case at::kShort: return std::to_string(static_cast<const int16_t*>(base)[flat]);
    case at::kInt: return std::to_string(static_cast<const int32_t*>(base)[flat]);
    case at::kLong: return std::to_string(static_cast<const int64_t*>(base)[flat]);
    default: break;
  }
  double v = 0;
  switch (data.scalar_type()) {
    case at::kHalf: v = static_cast<float>(static_cast<const c10::Half*>(base)[flat]); break;
    case at::kBFloat16: v = static_cast<float>(static_cast<const c10::BFloat16*>(base)[flat]); break;
    case at::kFloat: v = static_cast<const float*>(base)[flat]; break;
    default: v = static_cast<const double*>(base)[flat]; break;
  }
  return std::isnan(v) ? std::string() : numpy_float_str(v, data.scalar_type());
}

// A non-tensor value as pandas writes an object column: str(value), None and NaN empty.
std::string value_cell(const json::Value& value) {
  if (value.is_null() || (value.is_double() && std::isnan(value.as_double()))) return {};
  if (value.is_string()) return value.as_string();
  return value.python_str();
}

struct OutColumn {
  const LeafColumns* leaf;
  int64_t element;  // index into the leaf's row of elements
  int64_t width;    // elements per row
};

// ---- Reading ------------------------------------------------------------------------------

// pandas' default missing-value spellings (read_csv's na_values).
bool is_missing(std::string_view s) {
  static const std::unordered_set<std::string_view> kMissing = {
      "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
      "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"};
  return kMissing.count(s) > 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view unsigned_text(std::string_view s) {
  s = trim(s);
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  return s;
}

bool parse_int(std::string_view s, int64_t& out) {
  s = unsigned_text(s);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_float(std::string_view s, double& out) {
  s = unsigned_text(s);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out, std::chars_format::general);
  // Out of range: from_chars leaves `out`; Python's float() gives inf or 0.
  if (r.ec == std::errc::result_out_of_range && r.ptr == s.data() + s.size()) {
    out = std::strtod(std::string(s).c_str(), nullptr);
    return true;
  }
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

int bool_word(std::string_view s) {  // 1 true, 0 false, -1 neither (read_csv's true/false values)
  if (s == "True" || s == "TRUE" || s == "true") return 1;
  if (s == "False" || s == "FALSE" || s == "false") return 0;
  return -1;
}

// The cells of one column, packed into one buffer.
struct TextColumn {
  std::string text;
  std::vector<size_t> ends;
  std::string_view cell(size_t row) const {
    const size_t begin = row == 0 ? 0 : ends[row - 1];
    return std::string_view(text).substr(begin, ends[row] - begin);
  }
};

// The type of a column, as read_csv decides it.
ReadColumn infer(std::string name, const TextColumn& column, int64_t rows) {
  ReadColumn out;
  out.name = std::move(name);
  bool can_int = true, can_float = true, can_bool = true, any = false;
  int64_t first_missing = -1, first_not_number = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const std::string_view cell = column.cell(static_cast<size_t>(r));
    if (is_missing(cell)) {
      if (first_missing < 0) first_missing = r;
      continue;
    }
    any = true;
    int64_t i = 0;
    double d = 0;
    if (can_int && !parse_int(cell, i)) can_int = false;
    if (!can_int && can_float && !parse_float(cell, d)) {
      can_float = false;
      first_not_number = r;
    }
    if (can_bool && bool_word(cell) < 0) can_bool = false;
  }
  const auto n = static_cast<size_t>(rows);
  if (!any || (can_float && (!can_int || first_missing >= 0))) {  // float64, missing values NaN
    std::vector<double> values(n, std::numeric_limits<double>::quiet_NaN());
    for (size_t r = 0; r < n; ++r) {
      if (!is_missing(column.cell(r))) parse_float(column.cell(r), values[r]);
    }
    out.tensor = at::tensor(values, at::kDouble);
  } else if (can_int) {
    std::vector<int64_t> values(n);
    for (size_t r = 0; r < n; ++r) parse_int(column.cell(r), values[r]);
    out.tensor = at::tensor(values, at::kLong);
  } else if (can_bool && first_missing < 0) {
    std::vector<uint8_t> values(n);
    for (size_t r = 0; r < n; ++r) values[r] = static_cast<uint8_t>(bool_word(column.cell(r)));
    out.tensor = at::tensor(values, at::kByte).to(at::kBool);
  } else {  // strings (bools where a value is missing), missing values null
    out.values.reserve(n);
    for (size_t r = 0; r < n; ++r) {
      const std::string_view cell = column.cell(r);
      if (is_missing(cell)) {
        out.values.emplace_back();
      } else if (can_bool) {
        out.values.emplace_back(bool_word(cell) == 1);
      } else {
        out.values.emplace_back(cell);
      }
    }
    out.bad_row = can_bool ? first_missing : first_not_number;
    out.bad_what = can_bool ? "a value is missing in a bool column"
                            : quote(column.cell(static_cast<size_t>(first_not_number))) + " is not a number";
  }
  return out;
}

#ifdef TENSORDICT_HAVE_LIBCSV

struct ParseState {
  std::vector<std::string> header;
  bool in_header = true;
  size_t field = 0;
  std::vector<TextColumn> columns;
  std::vector<int64_t> row_lines;  // 1-based line of each data row
  int64_t line = 0;                // the line being fed
  int64_t row_line = 0;            // the line the current row starts on
  bool row_started = false;
  int64_t header_line = 0;
  int64_t last_row_line = 0;
  std::string error;               // set by a callback: libcsv's C frames must not be unwound
};

void on_field(void* data, size_t size, void* state_ptr) {
  auto& st = *static_cast<ParseState*>(state_ptr);
  if (!st.error.empty()) return;
  const std::string_view value(static_cast<const char*>(data), data ? size : 0);
  if (st.in_header) {
    st.header.emplace_back(value);
  } else if (st.field >= st.columns.size()) {
    st.error = ": row " + std::to_string(st.row_lines.size()) + " has more fields than the header's " +
               std::to_string(st.columns.size());
  } else {
    TextColumn& column = st.columns[st.field];
    column.text += value;
    column.ends.push_back(column.text.size());
  }
  ++st.field;
}

void on_row(int, void* state_ptr) {
  auto& st = *static_cast<ParseState*>(state_ptr);
  if (!st.error.empty()) return;
  st.last_row_line = st.line;
  st.row_started = false;
  if (st.in_header) {
    st.in_header = false;
    st.header_line = st.row_line;
    st.columns.resize(st.header.size());
  } else if (st.field != st.columns.size()) {
    st.error = ": row " + std::to_string(st.row_lines.size()) + " has " + std::to_string(st.field) +
               " field(s), the header has " + std::to_string(st.columns.size());
  } else {
    st.row_lines.push_back(st.row_line);
  }
  st.field = 0;
}

// Fields keep their spaces (pandas keeps them; libcsv trims by default).
int no_space(unsigned char) { return 0; }

struct Parser {
  csv_parser p;
  Parser(unsigned char options) { TD_CHECK(csv_init(&p, options) == 0, RuntimeError, "csv_init failed"); }
  ~Parser() { csv_free(&p); }
};

void parse_csv(const std::string& path, const std::string& text, char delimiter, ParseState& st) {
  Parser parser(CSV_STRICT | CSV_STRICT_FINI);
  csv_set_delim(&parser.p, static_cast<unsigned char>(delimiter));
  csv_set_space_func(&parser.p, no_space);
  auto fail = [&](int64_t line) {
    if (csv_error(&parser.p) == CSV_EPARSE) {
      TD_THROW(ValueError, path, ":", line, ": malformed quoting: a quote inside an unquoted field, or text "
               "after a closing quote");
    }
    TD_THROW(StorageError, path, ":", line, ": ", csv_strerror(csv_error(&parser.p)));
  };
  size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 BOM, which pandas skips
  // Line by line, so callbacks know the line and an error stops the parse where it is.
  while (pos < text.size()) {
    const size_t newline = text.find('\n', pos);
    const size_t end = newline == std::string::npos ? text.size() : newline + 1;
    ++st.line;
    if (!st.row_started && text.find_first_not_of("\r\n", pos) < end) {  // blank lines start no row
      st.row_line = st.line;
      st.row_started = true;
    }
    if (csv_parse(&parser.p, text.data() + pos, end - pos, on_field, on_row, &st) != end - pos) fail(st.line);
    TD_CHECK(st.error.empty(), ValueError, path, ":", st.row_line, st.error);
    pos = end;
  }
  if (csv_fini(&parser.p, on_field, on_row, &st) != 0 || csv_error(&parser.p) != CSV_SUCCESS) {
    TD_THROW(ValueError, path, ": a quoted field after line ", st.last_row_line, " is not closed before the end of the file");
  }
  TD_CHECK(st.error.empty(), ValueError, path, ":", st.row_line, st.error);
}

#endif  // TENSORDICT_HAVE_LIBCSV

}  // namespace

TensorDict from_csv(const std::string& path, const TabularReadOptions& options) {
  check_read_options(options, "from_csv");
  check_delimiter(options.delimiter);
#ifdef TENSORDICT_HAVE_LIBCSV
  const std::string text = read_input(path);
  ParseState st;
  parse_csv(path, text, options.delimiter, st);
  const auto rows = static_cast<int64_t>(st.row_lines.size());
  std::unordered_set<std::string_view> names;
  for (const auto& name : st.header) {
    TD_CHECK(names.insert(name).second, ValueError, path, ":", st.header_line, ": column ", quote(name), " appears twice");
  }
  std::vector<ReadColumn> columns;
  columns.reserve(st.header.size());
  for (size_t c = 0; c < st.header.size(); ++c) {
    columns.push_back(infer(st.header[c], st.columns[c], rows));
    st.columns[c] = TextColumn();  // free the text as soon as the column is typed
  }
  const RowLocation where = [&](int64_t row) {
    if (row < 0) return path + ":" + std::to_string(st.header_line) + ": header";
    return path + ":" + std::to_string(st.row_lines[static_cast<size_t>(row)]) + ": row " + std::to_string(row);
  };
  return assemble(std::move(columns), rows, options, path, where);
#else
  (void)infer;
  TD_THROW(NotImplementedError, "from_csv(", path, "): this tensordict-cpp was built without libcsv "
           "(apt-get install libcsv-dev, then reconfigure)");
#endif
}

void to_csv(const TensorDict& td, const std::string& path, const TabularWriteOptions& options) {
  check_delimiter(options.delimiter);
  const WriteTable table = collect_leaves(td, options, path);
  std::vector<std::string> names;
  std::vector<OutColumn> columns;
  for (const LeafColumns& leaf : table.leaves) {
    if (!leaf.data.defined()) {
      names.push_back(leaf.name);
      columns.push_back({&leaf, 0, 1});
      continue;
    }
    const auto suffixes = element_suffixes(leaf.data.sizes().slice(1));
    for (size_t i = 0; i < suffixes.size(); ++i) {
      names.push_back(leaf.name + suffixes[i]);
      columns.push_back({&leaf, static_cast<int64_t>(i), static_cast<int64_t>(suffixes.size())});
    }
  }
  std::string text;
  if (!columns.empty()) {
    auto end_row = [&](const std::string& only_field) {
      if (columns.size() == 1 && only_field.empty()) text += "\"\"";  // Python's csv: a lone empty field
      text += '\n';
    };
    for (size_t c = 0; c < names.size(); ++c) {
      if (c) text += options.delimiter;
      append_field(text, names[c], options.delimiter);
    }
    end_row(names[0]);
    std::string cell;
    for (int64_t r = 0; r < table.rows; ++r) {
      for (size_t c = 0; c < columns.size(); ++c) {
        const OutColumn& column = columns[c];
        cell = column.leaf->data.defined() ? tensor_cell(column.leaf->data, r * column.width + column.element)
                                           : value_cell(column.leaf->values[static_cast<size_t>(r)]);
        if (c) text += options.delimiter;
        append_field(text, cell, options.delimiter);
      }
      end_row(cell);
    }
  }
  write_output(path, text);
}

}  // namespace tensordict
