// A writer process for the store tests: reconnects to a store and fills its rows one by one,
// as an actor filling a shared replay buffer does.
//
//   store_writer SOCKET TD_ID FIRST COUNT
//
// Row i gets obs = i (every element) and reward = i. Exits 0 when every row was written.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: store_writer SOCKET TD_ID FIRST COUNT\n";
    return 2;
  }
  try {
    tensordict::StoreOptions options;
    options.unix_socket = argv[1];
    tensordict::TensorDictStore store = tensordict::TensorDictStore::from_store(argv[2], options);
    const int64_t first = std::atoll(argv[3]), count = std::atoll(argv[4]);
    for (int64_t i = first; i < first + count; ++i) {
      const float v = static_cast<float>(i);
      store.index_put_({i}, tensordict::TensorDict({{"obs", at::full({6}, v)}, {"reward", at::scalar_tensor(v)}}, {}));
    }
  } catch (const std::exception& e) {
    std::cerr << "store_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
