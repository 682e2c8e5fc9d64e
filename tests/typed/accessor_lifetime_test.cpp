// Chained typed accessors (`buf.obs().proprio()`) on every kind of backend, built with
// AddressSanitizer (tests/CMakeLists.txt: typed_asan_tests): a reference into a temporary typed
// object would be a stack-use-after-scope here, which ASan reports and fails the test.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/backends/memmap.h>

#include "replay.td.h"
#include "support/copy_on_read_backend.h"
#include "support/temp_dir.h"

using namespace tensordict;
using replay::Observation;
using replay::Transition;

// LibTorch's start-up allocations are not leaks of ours (and it is not instrumented); every
// other ASan report aborts the program, which fails the test. Built in, so test discovery and
// every run get it without an environment variable.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace {

Transition filled(int64_t n) {
  Observation obs({{"camera", at::zeros({n, 3, 8, 8}, at::kByte)},
                   {"proprio", at::arange(n * 12, at::kFloat).view({n, 12})},
                   {"info", "note"}},
                  {n});
  return Transition({{"obs", obs}, {"action", at::ones({n, 6})}, {"reward", at::arange(n, at::kFloat)},
                     {"done", at::zeros({n}, at::kBool)}},
                    {n});
}

// Every chain a training loop writes, read after the temporaries are gone.
void read_chains(const Transition& buf) {
  const at::Tensor& proprio = buf.obs().proprio();
  const at::Tensor& camera = buf.index({0}).obs().camera();
  const TensorDict& nested = buf.obs().tensordict();
  const at::Tensor& reward = Transition(buf).reward();
  const int64_t n = buf.batch_size()[0];
  CHECK(proprio.sum().item<double>() == static_cast<double>(n * 12 * (n * 12 - 1) / 2));
  CHECK((camera.sizes() == c10::IntArrayRef{3, 8, 8}));
  CHECK(nested.batch_size()[0] == n);
  CHECK(reward.sum().item<double>() == static_cast<double>(n * (n - 1) / 2));
  for (const Transition& row : buf) CHECK(row.obs().proprio().dim() == 1);
}

}  // namespace

TEST_CASE("chained accessors outlive their temporaries - in memory", "[typed][asan]") {
  read_chains(filled(4));
}

TEST_CASE("chained accessors outlive their temporaries - memmap", "[typed][asan]") {
  testing_support::TempDir dir;
  memmap(filled(4), dir / "buf");
  read_chains(Transition::load_memmap(dir / "buf"));
}

TEST_CASE("chained accessors outlive their temporaries - copy-on-read backend", "[typed][asan]") {
  read_chains(Transition::from_tensordict(testing_backends::CopyOnRead::from(filled(4))));
}
