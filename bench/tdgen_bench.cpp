// tdgen's C++ frontend, end to end (a tdgen process per run, as a build runs it), against the
// floor: `clang++-14 -fsyntax-only` of the same input, the compiler's own parse without any
// code generation. Three inputs:
//  - Light: one schema header that includes only <tensordict/schema.h> (target <= 50 ms);
//  - ATen: the same header also including <ATen/ATen.h> (target <= 0.6x the floor: tdgen
//    skips function bodies, the floor cannot);
//  - Many/100: 100 schema headers in one run (target < 3 s; the floor parses one file that
//    includes all 100).
// Ratios and the growth from 1 to 100 headers are printed by scripts/bench.sh.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/wait.h>

namespace fs = std::filesystem;

extern char** environ;

namespace {

// Runs argv to completion with stdout and stderr discarded; aborts the benchmark on failure.
void run(const std::vector<std::string>& argv, benchmark::State& state) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    state.SkipWithError(("command failed: " + argv[0]).c_str());
}

struct Inputs {
  fs::path dir;
  std::string light, aten, many_main;
  std::vector<std::string> many;

  Inputs() {
    dir = fs::temp_directory_path() / ("tdgen_bench_" + std::to_string(::getpid()));
    fs::create_directories(dir / "out");
    light = write("light.h", "", "light");
    aten = write("aten.h", "#include <ATen/ATen.h>\n", "aten");
    std::string main;
    for (int i = 0; i < 100; ++i) {
      many.push_back(write("many" + std::to_string(i) + ".h", "", "many" + std::to_string(i)));
      main += "#include \"" + many.back() + "\"\n";
    }
    many_main = (dir / "many_main.h").string();
    std::ofstream(many_main) << main;
  }
  ~Inputs() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // A schema like schemas/rl_transition.h: two classes, inheritance, a nested class.
  std::string write(const std::string& name, const std::string& extra_include, const std::string& ns) {
    const fs::path path = dir / name;
    std::ofstream(path) << "#pragma once\n#include <cstdint>\n#include <tensordict/schema.h>\n" << extra_include
                        << "namespace " << ns << "::schema {\n"
                        << "struct TD_TENSORCLASS Observation {\n"
                        << "  td::schema::Tensor<uint8_t, 84, 84, 3> pixels;\n"
                        << "  td::schema::Tensor<float, td::schema::any_size> state;\n};\n"
                        << "struct TD_TYPED_TENSORDICT Step {\n"
                        << "  td::schema::Tensor<bool> done;\n  td::schema::Tensor<int64_t> step_count;\n};\n"
                        << "struct TD_TYPED_TENSORDICT Transition : Step {\n"
                        << "  Observation obs;\n  td::schema::Tensor<float, 4> action;\n"
                        << "  td::schema::Tensor<float> reward;\n};\n}\n";
    return path.string();
  }
};

Inputs& inputs() {
  static Inputs in;
  return in;
}

std::vector<std::string> include_flags() {
  std::vector<std::string> out{"-I" TDGEN_BENCH_RUNTIME_INCLUDE};
  std::string dirs = TDGEN_BENCH_TORCH_INCLUDES;
  for (size_t start = 0; start < dirs.size();) {
    size_t end = dirs.find(':', start);  // joined with ':' by CMake
    if (end == std::string::npos) end = dirs.size();
    if (end > start) out.push_back("-I" + dirs.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

void tdgen(const std::vector<std::string>& headers, benchmark::State& state) {
  std::vector<std::string> argv{TDGEN_BENCH_TDGEN, "--out", (inputs().dir / "out").string(), "--templates",
                                TDGEN_BENCH_TEMPLATES};
  for (const std::string& f : include_flags()) argv.push_back(f);
  argv.insert(argv.end(), headers.begin(), headers.end());
  for (auto _ : state) run(argv, state);
}

void clang_syntax_only(const std::string& header, benchmark::State& state) {
  std::vector<std::string> argv{TDGEN_BENCH_CLANGXX, "-std=c++17", "-fsyntax-only", "-w"};
  for (const std::string& f : include_flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-x", "c++", header});
  for (auto _ : state) run(argv, state);
}

void BM_Light_Tdgen(benchmark::State& state) { tdgen({inputs().light}, state); }
void BM_Light_Floor(benchmark::State& state) { clang_syntax_only(inputs().light, state); }
void BM_ATen_Tdgen(benchmark::State& state) { tdgen({inputs().aten}, state); }
void BM_ATen_Floor(benchmark::State& state) { clang_syntax_only(inputs().aten, state); }
void BM_Many_Tdgen(benchmark::State& state) {
  const auto& many = inputs().many;
  tdgen(std::vector<std::string>(many.begin(), many.begin() + state.range(0)), state);
}
void BM_Many_Floor(benchmark::State& state) { clang_syntax_only(inputs().many_main, state); }

}  // namespace

BENCHMARK(BM_Light_Tdgen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Light_Floor)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ATen_Tdgen)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_ATen_Floor)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_Many_Tdgen)->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Many_Floor)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
