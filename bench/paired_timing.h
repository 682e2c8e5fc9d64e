#pragma once
// Paired timing of an op against its floor (`ops_bench --paired`, scripts/bench.sh with
// BENCH_PAIRED=1). On a shared VM a single median moves by up to 2x within minutes, and Google
// Benchmark times an op's repetitions apart from its floor's, so one slow minute lands on one side
// of a ratio. Here every round times a batch of the op right next to a batch of its floor (the
// order alternating from round to round), and an op's ratio is the median of its rounds' ratios:
// a disturbance that lasts longer than a round (a few milliseconds) divides out.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bench_paired {

using Body = std::function<void()>;

// "cpp/<op>" and "floor/<op>" bodies, in registration order.
inline std::vector<std::pair<std::string, Body>>& registry() {
  static std::vector<std::pair<std::string, Body>> bodies;
  return bodies;
}

/// True when the command line asks for paired timing (`--paired`, removed from argv).
inline bool take_flag(int& argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--paired") == 0) {
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      return true;
    }
  }
  return false;
}

inline double seconds_of(const Body& body, long calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

/// Times every registered op against its floor: `rounds` rounds of batches of about `round_ms`
/// milliseconds a side. Prints `op cpp_us floor_us ratio (p25-p75)` per op, then the median and
/// worst ratio.
inline void run(int rounds, double round_ms, const std::string& filter) {
  std::map<std::string, Body> floors;
  for (const auto& [name, body] : registry()) {
    if (name.rfind("floor/", 0) == 0) floors[name.substr(6)] = body;
  }
  std::vector<std::pair<std::string, double>> ratios;
  for (const auto& [name, cpp] : registry()) {
    if (name.rfind("cpp/", 0) != 0) continue;
    const std::string op = name.substr(4);
    if (floors.count(op) == 0 || op.find(filter) == std::string::npos) continue;
    const Body& floor = floors[op];
    for (int i = 0; i < 3; ++i) {
      cpp();
      floor();
    }
    long calls = 1;  // per batch: the slower side takes about round_ms
    while (std::max(seconds_of(cpp, calls), seconds_of(floor, calls)) * 1e3 < round_ms && calls < (1L << 24)) calls *= 2;
    std::vector<double> cpp_us, floor_us, ratio;
    for (int r = 0; r < rounds; ++r) {
      double c, f;
      if (r % 2 == 0) {
        c = seconds_of(cpp, calls);
        f = seconds_of(floor, calls);
      } else {
        f = seconds_of(floor, calls);
        c = seconds_of(cpp, calls);
      }
      cpp_us.push_back(c * 1e6 / static_cast<double>(calls));
      floor_us.push_back(f * 1e6 / static_cast<double>(calls));
      ratio.push_back(c / f);
    }
    const double median = quantile(ratio, 0.5);
    std::printf("%s %.3f %.3f %.3f  (rounds %.3f-%.3f)\n", op.c_str(), quantile(cpp_us, 0.5), quantile(floor_us, 0.5),
                median, quantile(ratio, 0.25), quantile(ratio, 0.75));
    std::fflush(stdout);
    ratios.emplace_back(op, median);
  }
  if (ratios.empty()) return;
  std::vector<double> values;
  for (const auto& r : ratios) values.push_back(r.second);
  const auto worst = *std::max_element(ratios.begin(), ratios.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
  std::printf("paired: median ratio %.3f, worst ratio %.3f (%s), %d rounds of ~%.0f ms a side\n", quantile(values, 0.5),
              worst.second, worst.first.c_str(), rounds, round_ms);
}

}  // namespace bench_paired
