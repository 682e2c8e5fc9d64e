// docs/tabular.md#api: the snippet, verbatim, run by CTest (docs_snippet_tabular) in a temporary
// directory; what its comments state is checked after it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <unistd.h>

#include <ATen/ATen.h>
#include <tensordict/tabular.h>
#include <tensordict/tensordict.h>

namespace td = tensordict;

namespace {
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "docs/tabular.md: " << what << "\n";
    std::exit(1);
  }
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}
}  // namespace

int main() {
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("docs_snippet_tabular_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  const std::string dir = tmp.string();

  td::TensorDict data({{"reward", at::tensor({0.5, 1.0, -0.25})},
                       {"obs", {{"pos", at::rand({3, 2})}}},  // a leaf with a feature dim
                       {"split", "train"}},                    // one value for every row
                      /*batch_size=*/{3});
  td::TabularWriteOptions w;
  w.separator = ".";                                        // nested keys: "obs.pos"
  td::to_csv(data, dir + "/rollout.csv", w);                // reward,obs.pos[0],obs.pos[1],split
  td::to_json(data, dir + "/rollout.json", w);              // [{"reward": 0.5, "obs.pos": [..., ...], ...

  td::TabularReadOptions r;
  r.separator = ".";
  r.dtype = at::kFloat;                                     // numeric columns as float32
  td::TensorDict back = td::from_csv(dir + "/rollout.csv", r);  // batch [3]; ("obs", "pos") is [3, 2]

  expect(first_line(dir + "/rollout.csv") == "reward,obs.pos[0],obs.pos[1],split", "CSV header");
  expect(first_line(dir + "/rollout.json").rfind("[{\"reward\": 0.5, \"obs.pos\": [", 0) == 0, "JSON records");
  expect(back.batch_size() == c10::IntArrayRef({3}), "batch [3]");
  expect(back.get({"obs", "pos"}).sizes() == c10::IntArrayRef({3, 2}), "obs.pos [3, 2]");
  expect(back.get("reward").scalar_type() == at::kFloat, "dtype float32");
  expect(at::allclose(back.get({"obs", "pos"}), data.get({"obs", "pos"})), "obs.pos values");
  expect(back.get_non_tensor("split").tolist() == td::json::Value(td::json::Array{"train", "train", "train"}), "split");
  std::filesystem::remove_all(tmp);
  std::cout << back << "\n";
}
