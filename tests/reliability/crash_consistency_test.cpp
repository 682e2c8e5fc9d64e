// Writers killed with SIGKILL at random points: whatever instant the kill lands on, the
// destination loads with one whole generation of the data (the old one or the new one) or, when
// there was none before, is refused with a typed error. Never a mix, never a partial leaf.
#include "support/catch_torch.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif

#include "support/child_process.h"
#include "reliability/payload.h"
#include "support/temp_dir.h"

using namespace tensordict;
using testing_support::ChildProcess;
using testing_support::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int kRuns = 20;

// -1: refused with a typed error; otherwise the generation it holds whole (a mix fails the
// test inside generation_of).
int load_generation(const std::function<TensorDict()>& load) {
  try {
    return reliability::generation_of(load());
  } catch (const tensordict::Error&) {
    return -1;
  }
}

// What the directory holds besides `keep`: a killed writer's temporary that was never cleaned.
std::vector<std::string> leftovers(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != keep) out.push_back(e.path().filename().string());
  }
  return out;
}

using Clock = std::chrono::steady_clock;

// Runs `argv` to completion; the seconds its write took, from "writing" to "done" (for a program
// that does not say, from its start to its exit).
double time_one_run(const std::vector<std::string>& argv, bool says_writing) {
  ChildProcess child(argv);
  if (says_writing) REQUIRE(child.wait_for_line("writing"));
  const auto start = Clock::now();
  if (says_writing) REQUIRE(child.wait_for_line("done"));
  const auto end = Clock::now();
  const int status = child.wait();
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return std::chrono::duration<double>((says_writing ? end : Clock::now()) - start).count();
}

struct KillFigures {
  int before_commit = 0;  // the old generation (or nothing) survived the kill
  int after_commit = 0;   // killed after the new generation was in place
  int finished = 0;       // the kill came after the writer exited
};

// Kills `argv_for(generation)` kRuns times at random points of its write; after each kill the
// destination must hold one whole generation (or, when `fresh`, may be refused). A writer
// that copies a fixed source (tdtool) writes generation 0 every time.
KillFigures kill_at_random_points(const std::function<std::vector<std::string>(int)>& argv_for,
                                  const std::function<TensorDict()>& load, bool says_writing, bool fresh,
                                  const std::function<void()>& clear, bool copies_generation_0 = false) {
  const double seconds = time_one_run(argv_for(0), says_writing);
  int current = reliability::generation_of(load());
  REQUIRE(current == 0);
  if (fresh) clear();
  std::mt19937 random(20261124);
  std::uniform_real_distribution<double> when(0.0, seconds * 1.2);
  KillFigures figures;
  for (int run = 1; run <= kRuns; ++run) {
    const int generation = copies_generation_0 ? 0 : run;
    ChildProcess child(argv_for(run));
    if (says_writing) REQUIRE(child.wait_for_line("writing"));
    std::this_thread::sleep_for(std::chrono::duration<double>(when(random)));
    child.kill();
    const int status = child.wait();
    const bool exited = WIFEXITED(status);
    if (exited) REQUIRE(WEXITSTATUS(status) == 0);
    const int got = load_generation(load);
    INFO("run " << run << ": " << (exited ? "finished" : "killed") << ", destination holds " << got);
    if (exited) {
      CHECK(got == generation);
      ++figures.finished;
    } else if (got == generation) {
      ++figures.after_commit;
    } else {
      CHECK(got == (fresh ? -1 : current));  // what was there before, whole
      ++figures.before_commit;
    }
    if (got >= 0) current = got;
    if (fresh) clear();
  }
  return figures;
}

void report(const std::string& writer, const KillFigures& f) {
  // The figures docs/reliability.md quotes.
  WARN(writer << ": " << kRuns << " kills: " << f.before_commit << " before the commit, " << f.after_commit
              << " after it, " << f.finished << " after the writer finished");
  CHECK(f.before_commit + f.after_commit + f.finished == kRuns);
}

}  // namespace

TEST_CASE("memmap killed at random points leaves the old directory or the new one", "[reliability][crash]") {
  TempDir dir;
  const std::string dest = dir / "td";
  auto figures = kill_at_random_points([&](int g) { return std::vector<std::string>{WRITER_PROCESS_PATH, "memmap", dest, std::to_string(g)}; },
                                       [&] { return load_memmap(dest); }, true, false, {});
  report("memmap", figures);
  REQUIRE(time_one_run({WRITER_PROCESS_PATH, "memmap", dest, "99"}, true) > 0);
  CHECK(reliability::generation_of(load_memmap(dest)) == 99);
  CHECK(leftovers(dir.path(), "td").empty());  // killed writers' staging directories swept
}

TEST_CASE("memmap_ over an existing directory killed at random points keeps one whole generation",
          "[reliability][crash]") {
  TempDir dir;
  const std::string dest = dir / "td";
  auto figures = kill_at_random_points([&](int g) { return std::vector<std::string>{WRITER_PROCESS_PATH, "memmap_", dest, std::to_string(g)}; },
                                       [&] { return load_memmap(dest); }, true, false, {});
  report("memmap_", figures);
}

TEST_CASE("consolidate to a file killed at random points leaves the old file or the new one",
          "[reliability][crash]") {
  TempDir dir;
  const std::string dest = dir / "td.bin";
  auto figures = kill_at_random_points([&](int g) { return std::vector<std::string>{WRITER_PROCESS_PATH, "consolidate", dest, std::to_string(g)}; },
                                       [&] { return from_consolidated(dest); }, true, false, {});
  report("consolidate(filename)", figures);
  REQUIRE(time_one_run({WRITER_PROCESS_PATH, "consolidate", dest, "99"}, true) > 0);
  CHECK(leftovers(dir.path(), "td.bin").empty());
}

#ifdef TENSORDICT_TEST_HDF5
TEST_CASE("to_h5 killed at random points leaves the old file or the new one", "[reliability][crash]") {
  TempDir dir;
  const std::string dest = dir / "td.h5";
  auto figures = kill_at_random_points([&](int g) { return std::vector<std::string>{WRITER_PROCESS_PATH, "h5", dest, std::to_string(g)}; },
                                       [&] { return TensorDict(PersistentTensorDict::from_h5(dest, "r")); }, true, false, {});
  report("to_h5", figures);
  REQUIRE(time_one_run({WRITER_PROCESS_PATH, "h5", dest, "99"}, true) > 0);
  CHECK(leftovers(dir.path(), "td.h5").empty());
}

TEST_CASE("tdtool convert killed at random points leaves a whole destination or none", "[reliability][crash]") {
  TempDir dir;
  const std::string source_dir = dir / "source", source_h5 = dir / "source.h5";
  memmap(reliability::payload(0), source_dir);
  PersistentTensorDict::to_h5(reliability::payload(0), source_h5).close();
  const std::string to_h5 = dir / "out.h5", to_dir = dir / "out";
  auto clear = [&] {
    fs::remove_all(to_h5);
    fs::remove_all(to_dir);
  };
  SECTION("memmap directory to HDF5") {
    // Every run converts generation 0 to a fresh destination: whole, or refused.
    auto figures = kill_at_random_points([&](int) { return std::vector<std::string>{TDTOOL_PATH, "convert", source_dir, to_h5}; },
                                         [&] { return TensorDict(PersistentTensorDict::from_h5(to_h5, "r")); }, false, true, clear, true);
    report("tdtool convert (memmap to h5)", figures);
  }
  SECTION("HDF5 to a memmap directory") {
    auto figures = kill_at_random_points([&](int) { return std::vector<std::string>{TDTOOL_PATH, "convert", source_h5, to_dir}; },
                                         [&] { return load_memmap(to_dir); }, false, true, clear, true);
    report("tdtool convert (h5 to memmap)", figures);
  }
}
#endif
