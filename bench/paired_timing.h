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

struct PairTiming {
  double cpp_us, other_us;  // per call, medians of the rounds
  double ratio, p25, p75;   // cpp / other: median and quartiles of the rounds
};

/// `rounds` rounds of a batch of `cpp` right next to a batch of `other` (about `round_ms`
/// milliseconds for the slower), the order alternating from round to round.
inline PairTiming time_pair(const Body& cpp, const Body& other, int rounds, double round_ms) {
  for (int i = 0; i < 3; ++i) {
    cpp();
    other();
  }
  long calls = 1;
  while (std::max(seconds_of(cpp, calls), seconds_of(other, calls)) * 1e3 < round_ms && calls < (1L << 24)) calls *= 2;
  std::vector<double> cpp_us, other_us, ratio;
  for (int r = 0; r < rounds; ++r) {
    double c, o;
    if (r % 2 == 0) {
      c = seconds_of(cpp, calls);
      o = seconds_of(other, calls);
    } else {
      o = seconds_of(other, calls);
      c = seconds_of(cpp, calls);
    }
    cpp_us.push_back(c * 1e6 / static_cast<double>(calls));
    other_us.push_back(o * 1e6 / static_cast<double>(calls));
    ratio.push_back(c / o);
  }
  return {quantile(cpp_us, 0.5), quantile(other_us, 0.5), quantile(ratio, 0.5), quantile(ratio, 0.25),
          quantile(ratio, 0.75)};
}

/// Times every registered "cpp/<op>" whose name holds `filter` against "<side>/<op>", for each
/// of `sides` registered for it. Prints `op cpp_us side_us cpp/side (p25-p75)` per pair (the
/// side's name after the op when there are several sides), then the median and worst ratio
/// against the first side.
inline void run(int rounds, double round_ms, const std::string& filter,
                const std::vector<std::string>& sides = {"floor"}) {
  std::map<std::string, Body> others;  // "<side>/<op>" -> body
  for (const auto& [name, body] : registry()) {
    if (name.rfind("cpp/", 0) != 0) others[name] = body;
  }
  std::vector<std::pair<std::string, double>> ratios;
  for (const auto& [name, cpp] : registry()) {
    if (name.rfind("cpp/", 0) != 0) continue;
    const std::string op = name.substr(4);
    if (op.find(filter) == std::string::npos) continue;
    for (const std::string& side : sides) {
      const auto other = others.find(side + "/" + op);
      if (other == others.end()) continue;
      const PairTiming t = time_pair(cpp, other->second, rounds, round_ms);
      const std::string label = sides.size() > 1 ? op + " " + side : op;
      std::printf("%s %.3f %.3f %.3f  (rounds %.3f-%.3f)\n", label.c_str(), t.cpp_us, t.other_us, t.ratio, t.p25,
                  t.p75);
      std::fflush(stdout);
      if (side == sides.front()) ratios.emplace_back(op, t.ratio);
    }
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
