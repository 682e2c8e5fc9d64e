// tdtool, run as a process on fixtures and on bad input.

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "support/catch_torch.h"

#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {
std::pair<int, std::string> tdtool(const std::string& args) {
  return run(quoted(TDTOOL_PATH) + " " + args + " 2>&1");
}
const std::string kExample = std::string(TENSORDICT_SOURCE_DIR) + "/tests/data/python-tensordict/mmap_example";
}  // namespace

TEST_CASE("tdtool info prints the stored tree in the repr layout", "[tdtool]") {
  auto [code, out] = tdtool("info " + quoted(kExample));
  CHECK(code == 0);
  CHECK(out == load_memmap(kExample).repr() + "\n");
  CHECK_THAT(out, Catch::Contains("batch_size=torch.Size([2, 1])") && Catch::Contains("dtype=torch.bfloat16") &&
                      Catch::Contains("int64: MemoryMappedTensor(shape=torch.Size([2, 1])"));
}

TEST_CASE("tdtool info --stats adds sum, min and max of every numeric leaf", "[tdtool]") {
  auto [code, out] = tdtool("info " + quoted(kExample) + " --stats");
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("stats:\n  nested.int64: sum=3, min=1, max=2\n  nested.bfloat16: sum=2, min=1, max=1\n"));
  auto [code2, out2] = tdtool("info " + quoted(fixtures() + "/empty") + " --stats");
  CHECK(code2 == 0);
  CHECK_THAT(out2, Catch::Contains("  e: empty\n") && Catch::Contains("  g: sum=15, min=0, max=5\n"));
}

TEST_CASE("tdtool info lists lazy stacks with their exclusive keys and walks members for stats", "[tdtool][lazy]") {
  TempDir dir;
  TensorDict m0({{"x", at::ones({2, 3})}, {"cam", at::zeros({2, 4})}}, {2});
  TensorDict m1({{"x", at::full({2, 5}, 2.0)}, {"lidar", at::ones({2, 8})}}, {2});
  TensorDict m2({{"x", at::ones({2, 1})}, {"cam", at::ones({2, 4})}, {"lidar", at::ones({2, 8})}}, {2});
  memmap(lazy_stack({m0, m1, m2}, 1), dir / "ls");
  auto [code, out] = tdtool("info " + quoted(dir / "ls") + " --stats");
  CHECK(code == 0);
  CHECK_THAT(out, Catch::StartsWith(load_memmap(dir / "ls").repr() + "\n"));
  CHECK_THAT(out, Catch::Contains("lazy stacks:\n  (root): 3 members along dim 1; exclusive keys: cam (member 0, 2), "
                                  "lidar (member 1, 2)\n"));
  // Ragged 'x' (3, 5 and 1 columns) cannot be stacked: stats go member by member.
  CHECK_THAT(out, Catch::Contains("stats:\n  [0].x: sum=6, min=1, max=1\n  [0].cam: sum=0, min=0, max=0\n"
                                  "  [1].x: sum=20, min=2, max=2\n"));

  // A lazy stack nested in a tensordict is found and named by its key.
  TensorDict outer({{"envs", lazy_stack({m0, m1})}, {"w", at::ones({2})}}, {2});
  memmap(outer, dir / "outer");
  auto [code2, out2] = tdtool("info " + quoted(dir / "outer"));
  CHECK(code2 == 0);
  CHECK_THAT(out2, Catch::Contains("lazy stacks:\n  envs: 2 members along dim 0; exclusive keys: cam (member 0), "
                                   "lidar (member 1)\n"));
  auto [code3, out3] = tdtool("info " + quoted(kExample));
  CHECK_THAT(out3, !Catch::Contains("lazy stacks:"));
}

TEST_CASE("tdtool convert copies a memmap directory to a new one", "[tdtool]") {
  TempDir dir;
  for (const char* fixture : {"nested", "non_tensor", "encoded_keys"}) {
    INFO(fixture);
    const std::string dst = dir / fixture;
    auto [code, out] = tdtool("convert " + quoted(fixtures() + "/" + fixture) + " " + quoted(dst) + " --threads 2");
    CHECK(code == 0);
    CHECK(out.empty());  // no progress bar: stderr is not a terminal
    TensorDict src = load_memmap(fixtures() + "/" + fixture);
    TensorDict copy = load_memmap(dst);
    CHECK(copy.keys(true) == src.keys(true));
    for (auto& [key, entry] : src.items(true, true)) CHECK(at::equal(copy.get(key), entry.tensor()));
    CHECK(memmap_path(copy) != memmap_path(src));
  }
}

TEST_CASE("tdtool convert shows a progress bar when stderr is a terminal", "[tdtool]") {
  TempDir dir;
  // script(1) runs tdtool on a pseudo-terminal; the bar's delay is set to 0 for the test.
  const std::string cmd = "TDTOOL_PROGRESS_AFTER_MS=0 " + quoted(TDTOOL_PATH) + " convert " +
                          quoted(fixtures() + "/nested") + " " + quoted(dir / "copy");
  auto [code, out] = run("script -qec " + quoted(cmd) + " /dev/null");
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("[########################################] 100%") && Catch::Contains("MiB"));
}

TEST_CASE("tdtool reports bad input on one line with a non-zero exit code", "[tdtool]") {
  TempDir dir;
  auto [code, out] = tdtool("info " + quoted(dir / "missing"));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::StartsWith("tdtool: error: ") && Catch::Contains("no such file or directory"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  fs::create_directories(dir / "bad");
  std::FILE* f = std::fopen((dir / "bad/meta.json").c_str(), "w");
  std::fputs("{\"shape\": [2,", f);
  std::fclose(f);
  std::tie(code, out) = tdtool("info " + quoted(dir / "bad"));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::StartsWith("tdtool: error: ") && Catch::Contains("bad/meta.json:1:") &&
                      Catch::Contains("malformed"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  std::tie(code, out) = tdtool("convert " + quoted(kExample) + " " + quoted(dir / "bad"));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("already exists"));

  std::tie(code, out) = tdtool("frobnicate");
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Contains("unknown command") && Catch::Contains("usage: tdtool"));
}
