// How per-key operations scale with the size of a level: the cost per key of get, set of a new
// key, erase (from the end and from the front), pop, rename_key_, select_ and exclude_ on one
// level of N = 1k, 10k and 100k keys, and load_memmap of a stored level of N (empty) leaves. Each op is measured through tensordict-cpp ("cpp/<op>") and
// through the hand-written floor a C++ user would write without tensordict ("floor/<op>"): a
// std::unordered_map from key to tensor plus a std::vector of keys for the order, with the same
// work per key. scripts/bench.sh prints the cost per key at every N, its growth from 1k to 100k
// (target: at most 2x) and the ratio to the floor.
//
// Every timed region covers one pass of the op over all keys (or all kept/dropped keys); the
// level is rebuilt, untimed, before each pass of a mutating op (manual timing); get reads one
// level built once per run.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

namespace {

using tensordict::NestedKey;
using tensordict::TensorDict;
using Clock = std::chrono::steady_clock;

const std::vector<std::string>& keys_for(int64_t n) {
  static std::unordered_map<int64_t, std::vector<std::string>> cache;
  auto& keys = cache[n];
  if (keys.empty()) {
    keys.reserve(static_cast<size_t>(n));
    // The same length at every N (short-string storage throughout), so only N changes.
    char name[32];
    for (int64_t i = 0; i < n; ++i) {
      std::snprintf(name, sizeof(name), "obs_%06lld", static_cast<long long>(i));
      keys.emplace_back(name);
    }
  }
  return keys;
}

const at::Tensor& leaf() {
  static const at::Tensor t = at::zeros({1});
  return t;
}

TensorDict make_td(int64_t n) {
  TensorDict td;
  for (const auto& k : keys_for(n)) td.set(k, leaf());
  return td;
}

// The floor: what one writes by hand for an ordered dict of tensors.
struct Floor {
  std::unordered_map<std::string, at::Tensor> map;
  std::vector<std::string> order;
};

Floor make_floor(int64_t n) {
  Floor f;
  f.map.reserve(static_cast<size_t>(n));
  for (const auto& k : keys_for(n)) {
    f.map.emplace(k, leaf());
    f.order.push_back(k);
  }
  return f;
}

// Runs `pass(subject)` on a fresh `make(n)` per iteration, timing only the pass.
template <typename Make, typename Pass>
void timed(benchmark::State& state, Make make, Pass pass) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    auto subject = make(n);
    const auto start = Clock::now();
    pass(subject, keys_for(n));
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    benchmark::DoNotOptimize(subject);
  }
  state.counters["keys"] = static_cast<double>(n);
}

// For a read-only pass: one subject per benchmark run, so every pass reads the same warm level
// (rebuilding it per pass would measure where the allocator happened to put it).
template <typename Make, typename Pass>
void timed_read(benchmark::State& state, Make make, Pass pass) {
  const int64_t n = state.range(0);
  const auto subject = make(n);
  for (auto _ : state) {
    const auto start = Clock::now();
    pass(subject, keys_for(n));
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  state.counters["keys"] = static_cast<double>(n);
}

// ---- tensordict-cpp ---------------------------------------------------------------------------

void cpp_get(benchmark::State& state) {
  timed_read(state, make_td, [](const TensorDict& td, const std::vector<std::string>& keys) {
    for (const auto& k : keys) benchmark::DoNotOptimize(td.get(k));
  });
}
void cpp_set_new(benchmark::State& state) {
  timed(state, [](int64_t) { return TensorDict(); },
        [](TensorDict& td, const std::vector<std::string>& keys) {
          for (const auto& k : keys) td.set(k, leaf());
        });
}
void cpp_erase_back(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) td.erase(*it);
  });
}
void cpp_erase_front(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    for (const auto& k : keys) td.erase(k);
  });
}
void cpp_pop(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    for (const auto& k : keys) benchmark::DoNotOptimize(td.pop(k));
  });
}
void cpp_rename(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    for (const auto& k : keys) td.rename_key_(k, k + "_r");
  });
}
// select_ keeps every tenth key; exclude_ drops every other key. Cost per key of the level.
void cpp_select_(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    std::vector<NestedKey> kept;
    for (size_t i = 0; i < keys.size(); i += 10) kept.emplace_back(keys[i]);
    td.select_(kept);
  });
}
void cpp_exclude_(benchmark::State& state) {
  timed(state, make_td, [](TensorDict& td, const std::vector<std::string>& keys) {
    std::vector<NestedKey> dropped;
    for (size_t i = 0; i < keys.size(); i += 2) dropped.emplace_back(keys[i]);
    td.exclude_(dropped);
  });
}

// ---- the floor ----------------------------------------------------------------------------------

// Erasing from an ordered map by hand: the map entry, and the key from the order vector (found
// from the end, as erase-from-the-back and pop of recent keys do in practice).
void floor_erase_one(Floor& f, const std::string& k) {
  f.map.erase(k);
  for (size_t i = f.order.size(); i-- > 0;) {
    if (f.order[i] == k) {
      f.order.erase(f.order.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

void floor_get(benchmark::State& state) {
  timed_read(state, make_floor, [](const Floor& f, const std::vector<std::string>& keys) {
    // get returns a tensor handle, so the floor takes one too (as ops_bench's get_nested does).
    for (const auto& k : keys) {
      at::Tensor t = f.map.find(k)->second;
      benchmark::DoNotOptimize(t);
    }
  });
}
void floor_set_new(benchmark::State& state) {
  timed(state, [](int64_t) { return Floor(); },
        [](Floor& f, const std::vector<std::string>& keys) {
          for (const auto& k : keys) {
            f.map.emplace(k, leaf());
            f.order.push_back(k);
          }
        });
}
void floor_erase_back(benchmark::State& state) {
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) floor_erase_one(f, *it);
  });
}
void floor_erase_front(benchmark::State& state) {
  // From the front, the order vector is searched from its start.
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    for (const auto& k : keys) {
      f.map.erase(k);
      f.order.erase(f.order.begin());
    }
  });
}
void floor_pop(benchmark::State& state) {
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    for (const auto& k : keys) {
      auto it = f.map.find(k);
      benchmark::DoNotOptimize(at::Tensor(std::move(it->second)));
      f.map.erase(it);
      f.order.erase(f.order.begin());
    }
  });
}
void floor_rename(benchmark::State& state) {
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto node = f.map.extract(keys[i]);
      node.key() = keys[i] + "_r";
      f.map.insert(std::move(node));
      f.order[i] = keys[i] + "_r";
    }
  });
}
void floor_select_(benchmark::State& state) {
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    Floor kept;
    for (size_t i = 0; i < keys.size(); i += 10) {
      kept.map.emplace(keys[i], std::move(f.map[keys[i]]));
      kept.order.push_back(keys[i]);
    }
    f = std::move(kept);
  });
}
void floor_exclude_(benchmark::State& state) {
  timed(state, make_floor, [](Floor& f, const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); i += 2) f.map.erase(keys[i]);
    std::vector<std::string> order;
    for (auto& k : f.order) {
      if (f.map.count(k)) order.push_back(std::move(k));
    }
    f.order = std::move(order);
  });
}

// ---- load: a stored level's metadata read back --------------------------------------------------

// A memmap directory whose one level holds n empty leaves: no data files, only its meta.json (n
// entries), so a load's cost is the metadata's. Made once per n, removed at exit.
class LoadDirs {
 public:
  const std::string& dir_for(int64_t n) {
    std::string& dir = dirs_[n];
    if (dir.empty()) {
      dir = (std::filesystem::temp_directory_path() /
             ("td_scaling_load_" + std::to_string(::getpid()) + "_" + std::to_string(n)))
                .string();
      TensorDict td;
      for (const auto& k : keys_for(n)) td.set(k, at::empty({0}));
      tensordict::memmap(td, dir);
    }
    return dir;
  }
  ~LoadDirs() {
    std::error_code ignored;
    for (const auto& [n, dir] : dirs_) std::filesystem::remove_all(dir, ignored);
  }

 private:
  std::unordered_map<int64_t, std::string> dirs_;
};
LoadDirs& load_dirs() {
  static LoadDirs dirs;
  return dirs;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// load_memmap of the level: its meta.json read and parsed, the level built. (Per key: the
// parse of a JSON object once scanned every earlier key for a duplicate, quadratic in n.)
void cpp_load(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& dir = load_dirs().dir_for(n);
  for (auto _ : state) {
    const auto start = Clock::now();
    TensorDict td = tensordict::load_memmap(dir);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    benchmark::DoNotOptimize(td);
  }
  state.counters["keys"] = static_cast<double>(n);
}
// By hand, knowing the keys: the same meta.json read, and the floor's dict of the n keys built
// with an empty tensor each (no metadata parsed: a lower bound, not the same work).
void floor_load(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string meta = load_dirs().dir_for(n) + "/meta.json";
  for (auto _ : state) {
    const auto start = Clock::now();
    Floor f;
    const std::string text = read_file(meta);
    f.map.reserve(static_cast<size_t>(n));
    for (const auto& k : keys_for(n)) {
      f.map.emplace(k, at::empty({0}));
      f.order.push_back(k);
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    benchmark::DoNotOptimize(text);
    benchmark::DoNotOptimize(f);
  }
  state.counters["keys"] = static_cast<double>(n);
}

void configure(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(10000)->Arg(100000)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

#define TENSORDICT_SCALING_BENCH(op)                                           \
  BENCHMARK(cpp_##op)->Name("cpp/" #op)->Apply(configure);                     \
  BENCHMARK(floor_##op)->Name("floor/" #op)->Apply(configure);
TENSORDICT_SCALING_BENCH(get)
TENSORDICT_SCALING_BENCH(set_new)
TENSORDICT_SCALING_BENCH(erase_back)
TENSORDICT_SCALING_BENCH(erase_front)
TENSORDICT_SCALING_BENCH(pop)
TENSORDICT_SCALING_BENCH(rename)
TENSORDICT_SCALING_BENCH(select_)
TENSORDICT_SCALING_BENCH(exclude_)
TENSORDICT_SCALING_BENCH(load)
#undef TENSORDICT_SCALING_BENCH
