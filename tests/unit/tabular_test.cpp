// Tabular files (tabular.h): CSV and JSON records both ways, element columns of leaves with
// feature dims, the options, every error a file or a tensordict can cause, and Python v0.14
// compatibility checked by an independent stdlib reader and writer (tabular_python.py).
#include "support/catch_torch.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include <sys/wait.h>

#include <tensordict/tabular.h>
#include <tensordict/tensordict.h>

#include "backends/memmap/support.h"
#include "support/exception_message.h"
#include "support/temp_dir.h"

using namespace tensordict;
using Catch::Matchers::Contains;
using testing_support::message_of;
using memmap_test::read_file;
using testing_support::TempDir;

namespace {

// Runs tabular_python.py with Debian's python3; its exit status and output (stderr included).
std::pair<int, std::string> run_python(const std::string& mode, const std::string& dir) {
  return memmap_test::run("/usr/bin/python3 '" + std::string(TENSORDICT_SOURCE_DIR) + "/tests/unit/tabular_python.py' " +
                          mode + " '" + dir + "' 2>&1");
}

bool same(const at::Tensor& a, const at::Tensor& b) {  // dtype, shape and values, NaN equal to NaN
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         (a.is_floating_point() ? at::allclose(a, b, 0, 0, /*equal_nan=*/true) : at::equal(a, b));
}

TabularWriteOptions dotted() {
  TabularWriteOptions o;
  o.separator = ".";
  return o;
}

TabularReadOptions dotted_read() {
  TabularReadOptions o;
  o.separator = ".";
  return o;
}

const double kNaN = std::nan("");

at::Tensor longs(const std::vector<int64_t>& values) { return at::tensor(values, at::kLong); }
// (LibTorch 1.13 has no at::tensor of bools.)
at::Tensor bools(const std::vector<uint8_t>& values) { return at::tensor(values, at::kByte).to(at::kBool); }

// The table of rows the round trips use: every column kind, nested, and a leaf [4, 3].
TensorDict sample() {
  TensorDict td({{"id", longs({3, -7, int64_t{1} << 40, 0})},
                 {"score", at::tensor({0.5, kNaN, -1e-7, 1e300}, at::kDouble)},
                 {"done", bools({true, false, false, true})},
                 {"agent", {{"pos", at::arange(12, at::kDouble).reshape({4, 3}) / 4}}}},
                {4});
  td.set("name", EntryInit(NonTensorData::from_list(json::Value(json::Array{"a", "b,c", "say \"hi\"", "x\ny"}), {4})));
  return td;
}

void check_sample(const TensorDict& back) {
  REQUIRE(back.batch_size() == c10::IntArrayRef({4}));
  CHECK(same(back.get("id"), longs({3, -7, int64_t{1} << 40, 0})));
  CHECK(same(back.get("score"), at::tensor({0.5, kNaN, -1e-7, 1e300}, at::kDouble)));
  CHECK(same(back.get("done"), bools({true, false, false, true})));
  CHECK(same(back.get({"agent", "pos"}), at::arange(12, at::kDouble).reshape({4, 3}) / 4));
  CHECK(back.get_non_tensor("name").tolist() == json::Value(json::Array{"a", "b,c", "say \"hi\"", "x\ny"}));
  std::vector<std::string> keys;
  for (const auto& key : back.keys()) keys.push_back(key.front());
  CHECK(keys == std::vector<std::string>{"id", "score", "done", "agent", "name"});
}

}  // namespace

TEST_CASE("CSV and JSON round trips keep int, float, bool, string and nested columns", "[tabular]") {
  TempDir dir;
  const TensorDict td = sample();
  to_json(td, dir / "t.json", dotted());
  check_sample(from_json(dir / "t.json", dotted_read()));
  TabularWriteOptions lines = dotted();
  lines.lines = true;
  to_json(td, dir / "t.jsonl", lines);
  TabularReadOptions read_lines = dotted_read();
  read_lines.lines = true;
  check_sample(from_json(dir / "t.jsonl", read_lines));
#ifdef TENSORDICT_TEST_CSV
  to_csv(td, dir / "t.csv", dotted());
  check_sample(from_csv(dir / "t.csv", dotted_read()));
  // Without a separator the names stay flat keys.
  TensorDict flat = from_csv(dir / "t.csv");
  CHECK(flat.contains("agent.pos"));
  CHECK(flat.get("agent.pos").sizes() == c10::IntArrayRef({4, 3}));
#else
  CHECK_THROWS_AS(from_csv(dir / "t.csv"), NotImplementedError);
#endif
}

TEST_CASE("CSV text is pandas' to_csv(index=False) text", "[tabular]") {
  TempDir dir;
  TensorDict td({{"f32", at::tensor({0.1f, 1e-4f, 123456789.125f})},
                 {"f64", at::tensor({0.1, kNaN, 1e16})},
                 {"half", at::tensor({0.1, 65504.0, -0.0}).to(at::kHalf)},
                 {"i8", at::tensor({-1, 0, 1}, at::kChar)},
                 {"b", bools({true, false, true})},
                 {"s", "same"}},
                {3});
  td.set("t", EntryInit(NonTensorData::from_list(json::Value(json::Array{"cr\rhere", nullptr, 2.5}), {3})));
  to_csv(td, dir / "a.csv");
  CHECK(read_file(dir / "a.csv") ==
        "f32,f64,half,i8,b,s,t\n"
        "0.1,0.1,0.1,-1,True,same,\"cr\rhere\"\n"
        "1e-04,,65500.0,0,False,same,\n"
        "123456790.0,1e+16,-0.0,1,True,same,2.5\n");
  // One column: an empty field is written "" (Python's csv writer), so the row is not blank.
  to_csv(TensorDict({{"x", at::tensor({1.0, kNaN})}}, {2}), dir / "one.csv");
  CHECK(read_file(dir / "one.csv") == "x\n1.0\n\"\"\n");
  TabularWriteOptions semicolons;
  semicolons.delimiter = ';';
  to_csv(TensorDict({{"a", at::tensor({1, 2})}, {"b", "x;y"}}, {2}), dir / "semi.csv", semicolons);
  CHECK(read_file(dir / "semi.csv") == "a;b\n1;\"x;y\"\n2;\"x;y\"\n");
}

TEST_CASE("JSON text is v0.14's stdlib json.dumps of the records", "[tabular]") {
  TempDir dir;
  TensorDict td({{"a", at::tensor({1, 2})}, {"f", at::tensor({0.1f, kNaN}, at::kFloat)}, {"s", "\xc3\xa9"}}, {2});
  to_json(td, dir / "a.json");
  CHECK(read_file(dir / "a.json") ==
        "[{\"a\": 1, \"f\": 0.10000000149011612, \"s\": \"\\u00e9\"}, {\"a\": 2, \"f\": NaN, \"s\": \"\\u00e9\"}]");
  TabularWriteOptions lines;
  lines.lines = true;
  to_json(td, dir / "a.jsonl", lines);
  CHECK(read_file(dir / "a.jsonl") ==
        "{\"a\": 1, \"f\": 0.10000000149011612, \"s\": \"\\u00e9\"}\n{\"a\": 2, \"f\": NaN, \"s\": \"\\u00e9\"}");
  to_json(TensorDict({{"m", at::arange(4).reshape({1, 2, 2})}}, {1}), dir / "m.json");
  CHECK(read_file(dir / "m.json") == "[{\"m\": [[0, 1], [2, 3]]}]");
}

TEST_CASE("leaves with feature dims become element columns and come back in shape", "[tabular]") {
  TempDir dir;
  TensorDict td({{"obs", {{"pos", at::arange(6, at::kFloat).reshape({2, 3})}}},
                 {"x", at::arange(8).reshape({2, 2, 2})},
                 {"m", bools({true, false, false, true}).reshape({2, 2})}},
                {2});
  to_json(td, dir / "f.json", dotted());
  TensorDict back = from_json(dir / "f.json", dotted_read());
  CHECK(same(back.get({"obs", "pos"}), at::arange(6, at::kDouble).reshape({2, 3})));
  CHECK(same(back.get("x"), td.get("x")));
  CHECK(same(back.get("m"), td.get("m")));
#ifdef TENSORDICT_TEST_CSV
  to_csv(td, dir / "f.csv", dotted());
  const std::string text = read_file(dir / "f.csv");
  CHECK(text.substr(0, text.find('\n')) ==
        "obs.pos[0],obs.pos[1],obs.pos[2],x[0][0],x[0][1],x[1][0],x[1][1],m[0],m[1]");
  back = from_csv(dir / "f.csv", dotted_read());
  CHECK(same(back.get({"obs", "pos"}), at::arange(6, at::kDouble).reshape({2, 3})));
  CHECK(same(back.get("x"), td.get("x")));
  CHECK(same(back.get("m"), td.get("m")));
  // Element columns in any order, and of mixed types: promoted (int and float give float).
  const std::string shuffled = dir.write("s.csv", "v[1],k,v[0]\n2.5,a,1\n3,b,4\n");
  back = from_csv(shuffled);
  CHECK(same(back.get("v"), at::tensor({1.0, 2.5, 4.0, 3.0}, at::kDouble).reshape({2, 2})));
  std::vector<std::string> keys;
  for (const auto& key : back.keys()) keys.push_back(key.front());
  CHECK(keys == std::vector<std::string>{"v", "k"});
  // feature_dims off: the names are plain keys, as Python v0.14 reads them.
  TabularReadOptions plain;
  plain.feature_dims = false;
  back = from_csv(shuffled, plain);
  CHECK(back.contains("v[1]"));
  CHECK(back.get("v[0]").sizes() == c10::IntArrayRef({2}));
#endif
  // No rows: the header still names every element column.
  to_json(TensorDict({{"x", at::zeros({0, 3})}}, {0}), dir / "empty.json");
  CHECK(read_file(dir / "empty.json") == "[]");
  to_csv(TensorDict({{"x", at::zeros({0, 3})}}, {0}), dir / "empty.csv");
  CHECK(read_file(dir / "empty.csv") == "x[0],x[1],x[2]\n");
#ifdef TENSORDICT_TEST_CSV
  CHECK(from_csv(dir / "empty.csv").get("x").sizes() == c10::IntArrayRef({0, 3}));
#endif
  CHECK_THROWS_AS(to_csv(TensorDict({{"x", at::zeros({2, 0})}}, {2}), dir / "none.csv"), ValueError);
  TabularWriteOptions python_only = dotted();
  python_only.feature_dims = false;
  CHECK_THAT(message_of<ValueError>([&] { to_json(td, dir / "g.json", python_only); }),
             Contains("cannot write tensor with shape [2, 3] at key ('obs', 'pos') as one column"));
}

TEST_CASE("read options: dtype, batch_size, auto_batch_size, device", "[tabular]") {
  TempDir dir;
  const std::string path = dir.write("o.json", R"([{"a": 1, "b": 0.5, "c": true, "s": "x"}, {"a": 2, "b": 1.5, "c": false, "s": "y"}])");
  TabularReadOptions o;
  o.dtype = at::kFloat;
  o.device = at::Device(at::kCPU);
  TensorDict td = from_json(path, o);
  CHECK(td.get("a").scalar_type() == at::kFloat);
  CHECK(td.get("c").scalar_type() == at::kFloat);  // bool columns too, as Python casts them
  CHECK(td.get_non_tensor("s").tolist() == json::Value(json::Array{"x", "y"}));
  REQUIRE(td.device().has_value());
  CHECK(td.device()->is_cpu());

  TabularReadOptions unbatched;
  unbatched.batch_size = std::vector<int64_t>{};
  td = from_json(path, unbatched);
  CHECK(td.batch_size().empty());
  CHECK(td.get("a").sizes() == c10::IntArrayRef({2}));
  CHECK(td.get_non_tensor("s").value() == json::Value(json::Array{"x", "y"}));  // one value: the list

  const std::string wide = dir.write("w.json", R"([{"p": [1, 2]}, {"p": [3, 4]}])");
  TabularReadOptions automatic;
  automatic.auto_batch_size = true;
  CHECK(from_json(wide, automatic).batch_size() == c10::IntArrayRef({2, 2}));
  automatic.batch_dims = 1;
  CHECK(from_json(wide, automatic).batch_size() == c10::IntArrayRef({2}));
  automatic.batch_size = std::vector<int64_t>{2};
  CHECK_THAT(message_of<TypeError>([&] { from_json(wide, automatic); }),
             Contains("Conflicting batch sizes in from_json"));

  TabularReadOptions wrong;
  wrong.batch_size = std::vector<int64_t>{3};
  CHECK_THAT(message_of<Error>([&] { from_json(path, wrong); }), Contains("while reading column 'a' of " + path));
}

TEST_CASE("JSON typing follows np.array: ints, floats, bools, lists; anything else stays values", "[tabular]") {
  TempDir dir;
  const std::string path = dir.write("t.jsonl",
                                     "{\"i\": 1, \"mix\": 1, \"bi\": true, \"n\": 1, \"o\": {\"k\": 1}, \"r\": [1, 2]}\n"
                                     "\n"
                                     "{\"i\": 2, \"mix\": 2.5, \"bi\": 3, \"n\": null, \"o\": 2, \"r\": [3]}\n");
  TabularReadOptions o;
  o.lines = true;
  TensorDict td = from_json(path, o);
  CHECK(same(td.get("i"), at::tensor({1, 2}, at::kLong)));
  CHECK(same(td.get("mix"), at::tensor({1.0, 2.5}, at::kDouble)));
  CHECK(same(td.get("bi"), at::tensor({1, 3}, at::kLong)));
  CHECK(td.get_non_tensor("n").tolist() == json::Value(json::Array{1, nullptr}));
  CHECK(td.get_non_tensor("o").tolist() == json::Value(json::Array{json::Object{{"k", 1}}, 2}));
  CHECK(td.get_non_tensor("r").tolist() == json::Value(json::Array{json::Array{1, 2}, json::Array{3}}));
  // A key missing from a later record is None there (Python's r.get(key)).
  const std::string missing = dir.write("m.json", R"([{"a": 1, "b": 2}, {"a": 3}])");
  CHECK(from_json(missing).get_non_tensor("b").tolist() == json::Value(json::Array{2, nullptr}));
  // No records: no columns, batch [0].
  CHECK(from_json(dir.write("e.json", "[]")).batch_size() == c10::IntArrayRef({0}));
}

#ifdef TENSORDICT_TEST_CSV
TEST_CASE("CSV typing follows pandas' read_csv", "[tabular]") {
  TempDir dir;
  const std::string path = dir.write("t.csv",
                                     "\xEF\xBB\xBFi,f,b,s,na,e,big,sp\r\n"
                                     "1,1,True,x,,,99999999999999999999, a \r\n"
                                     "\r\n"
                                     "+2,inf,false,NA,NaN,,1,b\r\n"
                                     "-3,1e3,TRUE,\"q,\"\"\",,,2,\"\"\r\n");
  TensorDict td = from_csv(path);
  CHECK(td.batch_size() == c10::IntArrayRef({3}));
  CHECK(same(td.get("i"), at::tensor({1, 2, -3}, at::kLong)));
  CHECK(same(td.get("f"), at::tensor({1.0, INFINITY, 1000.0}, at::kDouble)));
  CHECK(same(td.get("b"), bools({true, false, true})));
  CHECK(td.get_non_tensor("s").tolist() == json::Value(json::Array{"x", nullptr, "q,\""}));
  CHECK(same(td.get("na"), at::full({3}, kNaN, at::kDouble)));  // all missing: float64 NaN
  CHECK(same(td.get("e"), at::full({3}, kNaN, at::kDouble)));
  CHECK(same(td.get("big"), at::tensor({1e20, 1.0, 2.0}, at::kDouble)));  // past int64: float64
  CHECK(td.get_non_tensor("sp").tolist() == json::Value(json::Array{" a ", "b", nullptr}));  // spaces kept
  // Ints with a missing value become float64; bools with one stay values.
  td = from_csv(dir.write("m.csv", "i,b\n1,True\n,\n"));
  CHECK(same(td.get("i"), at::tensor({1.0, kNaN}, at::kDouble)));
  CHECK(td.get_non_tensor("b").tolist() == json::Value(json::Array{true, nullptr}));
  // Header only: float64 columns of no rows; an empty file: nothing.
  CHECK(from_csv(dir.write("h.csv", "a,b\n")).get("a").sizes() == c10::IntArrayRef({0}));
  CHECK(from_csv(dir.write("z.csv", "")).num_keys() == 0);
}
#endif

TEST_CASE("write errors name the file and the leaf", "[tabular]") {
  TempDir dir;
  const std::string out = dir / "out.csv";
  TensorDict nested({{"obs", {{"x", at::zeros({2})}}}}, {2});
  CHECK_THAT(message_of<ValueError>([&] { to_csv(nested, out); }),
             Contains(out + ": nested tensordict at key 'obs' needs a separator"));
  CHECK_THAT(message_of<ValueError>([&] { to_json(nested, dir / "o.json"); }), Contains("needs a separator"));
  // No batch dim: the first leaf fixes the row count, a leaf of another length is refused.
  TensorDict ragged({{"a", at::zeros({3})}, {"b", at::zeros({4, 2})}}, {});
  CHECK_THAT(message_of<ShapeError>([&] { to_csv(ragged, out); }),
             Contains(out + ": leaf 'b' has shape [4, 2]: its first dim must be the number of rows, 3 (from the leaf 'a')"));
  TensorDict scalar({{"a", at::zeros({})}}, {});
  CHECK_THAT(message_of<ShapeError>([&] { to_json(scalar, dir / "o.json"); }), Contains("leaf 'a' is 0-dim"));
  TensorDict stack({{"a", at::zeros({3})}, {"n", TensorDict({}, {4})}}, {});
  stack.set({"n", "s"}, EntryInit(NonTensorData::from_list(json::Value(json::Array{1, 2, 3, 4}), {4})));
  CHECK_THAT(message_of<ShapeError>([&] { to_csv(stack, out, dotted()); }),
             Contains(out + ": non-tensor stack ('n', 's') has shape [4]: its first dim must be the number of rows, 3"));
  TensorDict grid({{"g", at::zeros({2, 3})}}, {2, 3});
  grid.set("s", EntryInit(NonTensorData::from_list(json::Value(json::Array{json::Array{1, 2, 3}, json::Array{4, 5, 6}}), {2, 3})));
  CHECK_THAT(message_of<ShapeError>([&] { to_csv(grid, out); }),
             Contains("non-tensor stack at key 's' has shape [2, 3]: a column holds one value per row"));
  // Names that would not read back as written.
  TensorDict clash({{"a.b", at::zeros({2})}, {"a", {{"b", at::zeros({2})}}}}, {2});
  CHECK_THAT(message_of<ValueError>([&] { to_csv(clash, out, dotted()); }),
             Contains("leaves 'a.b' and ('a', 'b') both give the column 'a.b'"));
  TensorDict bracket({{"x[0]", at::zeros({2})}}, {2});
  CHECK_THAT(message_of<ValueError>([&] { to_csv(bracket, out); }),
             Contains("column 'x[0]' of leaf 'x[0]' would read back as an element of a leaf 'x'"));
  TabularWriteOptions python_only;
  python_only.feature_dims = false;
  to_csv(bracket, out, python_only);  // Python's names, read back the same way with feature_dims off
  TensorDict complex({{"c", at::zeros({2}, at::kComplexFloat)}}, {2});
  CHECK_THROWS_AS(to_csv(complex, out), TypeError);
  CHECK_THROWS_AS(to_csv(TensorDict({{"a", at::zeros({2})}}, {2}), dir / "missing/dir/x.csv"), StorageError);
}

TEST_CASE("JSON read errors name the file, the record and the column", "[tabular]") {
  TempDir dir;
  CHECK_THAT(message_of<StorageError>([&] { from_json(dir / "nope.json"); }), Contains(dir / "nope.json"));
  CHECK_THAT(message_of<StorageError>([&] { from_json(dir.path()); }), Contains("not a regular file"));
  const std::string object = dir.write("o.json", R"({"a": [1, 2]})");
  CHECK_THAT(message_of<ValueError>([&] { from_json(object); }), Contains("must contain an array of records"));
  const std::string scalar = dir.write("s.json", R"([{"a": 1}, 2])");
  CHECK_THAT(message_of<ValueError>([&] { from_json(scalar); }),
             Contains(scalar + ": record 1: a record must be an object"));
  const std::string extra = dir.write("x.json", R"([{"a": 1}, {"a": 2, "b": 3}])");
  CHECK_THAT(message_of<ValueError>([&] { from_json(extra); }),
             Contains(extra + ": record 1, column 'b': the first record has no such key"));
  const std::string broken = dir.write("b.jsonl", "{\"a\": 1}\n{\"a\": }\n");
  TabularReadOptions lines;
  lines.lines = true;
  CHECK_THAT(message_of<ValueError>([&] { from_json(broken, lines); }), Contains(broken + ":2"));
  const std::string text = dir.write("t.jsonl", "{\"a\": 1, \"s\": 1}\n\n{\"a\": 2, \"s\": \"abc\"}\n");
  lines.non_tensor_columns = false;
  CHECK_THAT(message_of<ValueError>([&] { from_json(text, lines); }),
             Contains(text + ":3: record 1, column 's': '\"abc\"' is not a number"));
  const std::string element = dir.write("e.json", R"([{"p[0]": 1, "p[1]": 2}, {"p[0]": 1, "p[1]": "x"}])");
  CHECK_THAT(message_of<ValueError>([&] { from_json(element); }),
             Contains(element + ": record 1, column 'p[1]': '\"x\"' is not a number (an element of leaf 'p'"));
  const std::string conflict = dir.write("c.json", R"([{"a.b": 1, "a": 2}])");
  CHECK_THAT(message_of<ValueError>([&] { from_json(conflict, dotted_read()); }),
             Contains("Key conflict: 'a' is both a leaf and a prefix (column 'a.b')"));
  TabularReadOptions empty_separator;
  empty_separator.separator = "";
  CHECK_THROWS_AS(from_json(conflict, empty_separator), ValueError);
}

#ifdef TENSORDICT_TEST_CSV
TEST_CASE("CSV read errors name the file, the line, the row and the column", "[tabular]") {
  TempDir dir;
  CHECK_THAT(message_of<StorageError>([&] { from_csv(dir / "nope.csv"); }),
             Contains("cannot read " + dir / "nope.csv"));
  const std::string longer = dir.write("l.csv", "a,b\n1,2\n\n3,4,5\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(longer); }),
             Contains(longer + ":4: row 1 has more fields than the header's 2"));
  const std::string shorter = dir.write("s.csv", "a,b\n1,2\n3\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(shorter); }), Contains(shorter + ":3: row 1 has 1 field(s), the header has 2"));
  const std::string text = dir.write("t.csv", "a,b\n1,2\n\"x\ny\",3\n4,oops\n");
  TabularReadOptions strict;
  strict.non_tensor_columns = false;
  CHECK_THAT(message_of<ValueError>([&] { from_csv(text, strict); }),
             Contains(text + ":3: row 1, column 'a': 'x\\ny' is not a number"));
  const std::string bools = dir.write("n.csv", "a\nTrue\n\"\"\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(bools, strict); }),
             Contains(bools + ":3: row 1, column 'a': a value is missing in a bool column"));
  const std::string element = dir.write("e.csv", "p[0],p[1]\n1,2\n3,n/a4\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(element); }),
             Contains(element + ":3: row 1, column 'p[1]': 'n/a4' is not a number (an element of leaf 'p'"));
  const std::string missing = dir.write("m.csv", "x[0][0],x[0][1],x[1][1]\n1,2,3\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(missing); }),
             Contains(missing + ":1: header: leaf 'x' has element columns up to feature shape [2, 2] but no column 'x[1][0]'"));
  const std::string depth = dir.write("d.csv", "x[0],x[1][0]\n1,2\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(depth); }), Contains("different numbers of feature dims"));
  const std::string both = dir.write("both.csv", "x,x[0]\n1,2\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(both); }),
             Contains("column 'x' and element column 'x[0]' both name leaf 'x'"));
  const std::string twice = dir.write("2.csv", "a,b,a\n1,2,3\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(twice); }), Contains(twice + ":1: column 'a' appears twice"));
  const std::string quotes = dir.write("q.csv", "a,b\n1,x\"y\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(quotes); }), Contains(quotes + ":2: malformed quoting"));
  const std::string open = dir.write("u.csv", "a,b\n1,2\n3,\"never closed\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(open); }),
             Contains(open + ": a quoted field after line 2 is not closed"));
  const std::string conflict = dir.write("c.csv", "a,a.b\n1,2\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(conflict, dotted_read()); }),
             Contains("Key conflict: 'a' is both a leaf (column 'a') and a prefix (column 'a.b')"));
  const std::string huge = dir.write("h.csv", "x[999999999]\n1\n");
  CHECK_THAT(message_of<ValueError>([&] { from_csv(huge); }), Contains("but no column 'x[0]'"));
}
#endif

TEST_CASE("Python v0.14 compatibility: files checked and written by a stdlib reader", "[tabular]") {
  TempDir dir;
  // The table tabular_python.py describes (TABLE there), nested under "obs".
  TensorDict td({{"i64", longs({3, -7, int64_t{1} << 40, 0, 9})},
                 {"i32", at::tensor({1, 2, -3, 2147483647, 0}, at::kInt)},
                 {"u8", at::tensor({0, 255, 7, 1, 2}, at::kByte)},
                 {"f64", at::tensor({0.1, -2.5e-7, 1e16, kNaN, 1.0 / 3}, at::kDouble)},
                 {"f32", at::tensor({0.1f, 1e-4f, 3.4028235e38f, -0.0f, 123456789.125f}, at::kFloat)},
                 {"f16", at::tensor({0.1, 65504.0, 1e-5, 1.0, -2.5}, at::kDouble).to(at::kHalf)},
                 {"flag", bools({true, false, true, true, false})}},
                {5});
  td.set("name", EntryInit(NonTensorData::from_list(
                     json::Value(json::Array{"plain", "a,b", "say \"hi\"", "line\nbreak", "na\xc3\xafve \xe2\x9c\x93"}), {5})));
  const at::Tensor vel = at::tensor({0.25f, -1.0f, 2.5f, 3.0f, 0.1f, 0.2f, 1e-5f, 1e20f, 0.0f, -0.0f}).reshape({5, 2});
  td.set({"obs", "pos"}, at::tensor({0.5, 1.5, INFINITY, -INFINITY, 2.0}, at::kDouble));
  td.set({"obs", "vel"}, vel);
  TabularWriteOptions lines = dotted();
  lines.lines = true;
  to_json(td, dir / "cpp.json", dotted());
  to_json(td, dir / "cpp.jsonl", lines);
  to_csv(td, dir / "cpp.csv", dotted());
  auto [checked, report] = run_python("check", dir.path());
  INFO(report);
  CHECK(checked == 0);

  auto [written, out] = run_python("write", dir.path());
  INFO(out);
  REQUIRE(written == 0);
  TabularReadOptions read_lines = dotted_read();
  read_lines.lines = true;
  std::vector<TensorDict> back{from_json(dir / "py.json", dotted_read()), from_json(dir / "py.jsonl", read_lines)};
#ifdef TENSORDICT_TEST_CSV
  back.push_back(from_csv(dir / "py.csv", dotted_read()));
#endif
  for (const TensorDict& got : back) {
    // Integers come back int64, floats float64 (CSV and JSON keep no dtype): equal once cast.
    for (const char* key : {"i64", "i32", "u8"}) CHECK(same(got.get(key), td.get(key).to(at::kLong)));
    CHECK(same(got.get("f64"), td.get("f64")));
    for (const char* key : {"f32", "f16"}) CHECK(same(got.get(key).to(td.get(key).scalar_type()), td.get(key)));
    CHECK(same(got.get("flag"), td.get("flag")));
    CHECK(got.get_non_tensor("name").tolist() == td.get_non_tensor("name").tolist());
    CHECK(same(got.get({"obs", "pos"}), td.get({"obs", "pos"})));
    CHECK(same(got.get({"obs", "vel"}).to(at::kFloat), vel));
  }
}
