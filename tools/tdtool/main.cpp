// tdtool: inspect and convert stored tensordicts.
//
//   tdtool info PATH [--stats]        the tree in the repr layout, then its lazy stacks and their
//                                     exclusive keys; --stats adds sum/min/max
//   tdtool convert SRC DST [--to FORMAT] [--threads N]
//                                     FORMAT is memmap or h5; without --to, a DST named *.h5,
//                                     *.hdf5 or *.hdf is an HDF5 file, anything else a directory
//
// PATH and SRC are memmap directories or HDF5 files (found by their signature, not their name).
//
// Exit status: 0 on success, 1 on bad input (one line on stderr), 2 on bad usage.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

#include "formats.h"
#include "leaf_stats.h"

namespace {

namespace fs = std::filesystem;
using tensordict::LazyStackedTensorDict;
using tensordict::TensorDict;

constexpr const char* kUsage =
    "usage: tdtool info PATH [--stats]\n"
    "       tdtool convert SRC DST [--to memmap|h5] [--threads N]\n"
    "PATH, SRC: a memmap directory or an HDF5 file. Without --to, DST named *.h5, *.hdf5 or *.hdf\n"
    "is written as an HDF5 file, anything else as a memmap directory.\n";

struct UsageError {
  std::string message;
};

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

void print_leaf_stats(const std::string& name, const at::Tensor& t) {
  std::cout << "  " << name << ": ";
  if (at::isComplexType(t.scalar_type())) {
    std::cout << "complex (no min/max)\n";
    return;
  }
  if (t.numel() == 0) {
    std::cout << "empty\n";
    return;
  }
  const LeafStats s = leaf_stats(t);
  std::cout << "sum=" << format_number(s.sum) << ", min=" << format_number(s.min) << ", max=" << format_number(s.max)
            << "\n";
}

// sum, min and max of every real-valued leaf, one line per leaf. One pass per chunk of a leaf:
// the mapped bytes are read once, in cache-sized pieces, with no converted copy of the leaf.
// A lazy stack is walked member by member (`[i].key`): its leaves may be ragged, and stacking
// them would copy what the members already hold.
void print_level_stats(const TensorDict& td, const std::string& prefix) {
  if (LazyStackedTensorDict::is_lazy_stack(td)) {
    const LazyStackedTensorDict ls = LazyStackedTensorDict::from(td);
    for (int64_t i = 0; i < ls.num_members(); ++i)
      print_level_stats(ls.member(i), prefix + "[" + std::to_string(i) + "].");
    return;
  }
  for (const auto& [key, entry] : td.items(/*include_nested=*/false)) {
    const std::string name = prefix + key.join(".");
    if (entry.is_tensor()) print_leaf_stats(name, entry.tensor());
    else if (entry.is_tensordict()) print_level_stats(entry.tensordict(), name + ".");
  }
}

// One line per lazy stack in the tree: where it is, its members and its exclusive keys (the
// keys only some members hold, which the stack's own keys do not list).
void print_lazy_stacks(const TensorDict& td, const std::string& where, bool& header) {
  if (LazyStackedTensorDict::is_lazy_stack(td)) {
    const LazyStackedTensorDict ls = LazyStackedTensorDict::from(td);
    if (!header) std::cout << "lazy stacks:\n";
    header = true;
    std::cout << "  " << (where.empty() ? "(root)" : where) << ": " << ls.num_members() << " members along dim "
              << ls.stack_dim() << "; exclusive keys: ";
    const std::vector<std::string> exclusive = ls.exclusive_keys();
    if (exclusive.empty()) std::cout << "none";
    for (size_t k = 0; k < exclusive.size(); ++k) {
      std::cout << (k ? ", " : "") << exclusive[k] << " (member";
      const char* sep = " ";
      for (int64_t i = 0; i < ls.num_members(); ++i) {
        if (!ls.member(i).contains(exclusive[k])) continue;
        std::cout << sep << i;
        sep = ", ";
      }
      std::cout << ")";
    }
    std::cout << "\n";
    for (int64_t i = 0; i < ls.num_members(); ++i)
      print_lazy_stacks(ls.member(i), where + "[" + std::to_string(i) + "]", header);
    return;
  }
  for (const auto& [key, entry] : td.items(/*include_nested=*/false)) {
    if (entry.is_tensordict())
      print_lazy_stacks(entry.tensordict(), where.empty() ? key.join(".") : where + "." + key.join("."), header);
  }
}

// A progress bar on stderr when it is a terminal and the work takes more than a moment.
class ProgressBar {
 public:
  ProgressBar() : enabled_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {
    // TDTOOL_PROGRESS_AFTER_MS overrides the delay before the bar appears (tests use 0).
    if (const char* after = std::getenv("TDTOOL_PROGRESS_AFTER_MS")) delay_ = std::chrono::milliseconds(std::atoi(after));
  }
  ~ProgressBar() {
    if (shown_) std::fputc('\n', stderr);
  }
  void update(int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    auto elapsed = std::chrono::steady_clock::now() - start_;
    if (!shown_ && elapsed < delay_) return;
    shown_ = true;
    const int width = 40;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%s%s] %3d%% %.1f/%.1f MiB", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), static_cast<int>(100 * done / total),
                 done / 1048576.0, total / 1048576.0);
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::milliseconds delay_{300};
};

int cmd_info(const std::vector<std::string>& args) {
  std::string path;
  bool stats = false;
  for (const auto& a : args) {
    if (a == "--stats") stats = true;
    else if (a.rfind("--", 0) == 0) throw UsageError{"unknown option " + a};
    else if (path.empty()) path = a;
    else throw UsageError{"info takes one PATH"};
  }
  if (path.empty()) throw UsageError{"info needs a PATH"};
  const auto& format = tdtool::detect_format(path);
  TensorDict td = format.load(path);
  std::cout << td.repr() << "\n";
  bool header = false;
  print_lazy_stacks(td, "", header);
  if (stats) {
    std::cout << "stats:\n";
    print_level_stats(td, "");
  }
  return 0;
}

int cmd_convert(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  std::string to;
  int threads = 0;  // MemmapOptions::num_threads: 0 is the inter-op pool's size
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--to" || args[i] == "--threads") {
      if (i + 1 == args.size()) throw UsageError{args[i] + " needs a value"};
      if (args[i] == "--to") to = args[++i];
      else {
        try {
          threads = std::stoi(args[++i]);
        } catch (const std::exception&) {
          throw UsageError{"--threads needs an integer"};
        }
      }
    } else if (args[i].rfind("--", 0) == 0) {
      throw UsageError{"unknown option " + args[i]};
    } else {
      paths.push_back(args[i]);
    }
  }
  if (paths.size() != 2) throw UsageError{"convert needs SRC and DST"};
  const auto& src_format = tdtool::detect_format(paths[0]);
  const auto& dst_format = to.empty() ? tdtool::format_for_destination(paths[1]) : tdtool::format_named(to);
  TD_CHECK(!fs::exists(paths[1]), ValueError, paths[1], ": destination already exists (refusing to overwrite it)");
  TensorDict td = src_format.load(paths[0]);
  ProgressBar bar;
  dst_format.save(td, paths[1], threads, [&](int64_t done, int64_t total) { bar.update(done, total); });
  return 0;
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    const std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "info") return cmd_info(args);
    if (cmd == "convert") return cmd_convert(args);
    throw UsageError{"unknown command '" + cmd + "'"};
  } catch (const UsageError& e) {
    std::cerr << "tdtool: " << e.message << "\n" << kUsage;
    return 2;
  } catch (const tensordict::Error& e) {
    std::cerr << "tdtool: error: " << one_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tdtool: error: " << one_line(e.what()) << "\n";
    return 1;
  }
}
