// A writer process for the store tests.
//
//   store_writer SOCKET TD_ID FIRST COUNT    reconnects to the store and fills rows FIRST..
//                                            FIRST+COUNT one by one, as an actor filling a
//                                            shared replay buffer does: row i gets obs = i
//                                            (every element), reward = i and label "r<i>";
//   store_writer replace SOCKET TD_ID VALUE  uploads a new tensordict over the store TD_ID
//                                            (from_tensordict): 4096 rows of 1024 floats, every
//                                            one VALUE, and a label "vVALUE".
//
// Exits 0 when everything was written.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: store_writer SOCKET TD_ID FIRST COUNT | store_writer replace SOCKET TD_ID VALUE\n";
    return 2;
  }
  try {
    if (std::string(argv[1]) == "replace") {
      tensordict::StoreOptions options;
      options.unix_socket = argv[2];
      options.td_id = argv[3];
      options.overwrite = true;  // each run replaces the store the last one wrote
      const std::string value = argv[4];
      tensordict::TensorDict td({{"obs", at::full({4096, 1024}, std::stof(value))}, {"label", "v" + value}}, {4096});
      tensordict::TensorDictStore::from_tensordict(td, options);
      return 0;
    }
    tensordict::StoreOptions options;
    options.unix_socket = argv[1];
    tensordict::TensorDictStore store = tensordict::TensorDictStore::from_store(argv[2], options);
    const int64_t first = std::atoll(argv[3]), count = std::atoll(argv[4]);
    for (int64_t i = first; i < first + count; ++i) {
      const float v = static_cast<float>(i);
      store.index_put_({i}, tensordict::TensorDict({{"obs", at::full({6}, v)},
                                                    {"reward", at::scalar_tensor(v)},
                                                    {"label", "r" + std::to_string(i)}},
                                                   {}));
    }
  } catch (const std::exception& e) {
    std::cerr << "store_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
