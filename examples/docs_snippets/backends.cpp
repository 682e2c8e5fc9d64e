// The snippets of docs/backends.md, one function per section (docs/backends.md#in-memory),
// run in order by main() in a temporary directory.
#include <filesystem>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>

#include "game.td.h"

namespace td = tensordict;

namespace {

// docs/backends.md#in-memory
void in_memory() {
  td::TensorDict data({{"obs", at::randn({16, 3})}, {"reward", at::zeros({16})}}, /*batch_size=*/{16});
  std::cout << data.type_name() << " " << data.is_memmap() << "\n";
}

// docs/backends.md#memory-mapped-directories
void memory_mapped(const std::string& dir) {
  td::TensorDict data({{"obs", at::randn({16, 3})},
                       {"agent", {{"pos", at::zeros({16, 2})}}},
                       {"env", "CartPole"}},
                      /*batch_size=*/{16});
  td::TensorDict stored = td::memmap(data, dir);   // writes dir/, returns a locked, mapped copy
  stored.set_("obs", at::zeros({16, 3}));          // in place: writes through to dir/obs.memmap
  stored.get({"agent", "pos"}).index_put_({0}, 1); // also through to the file

  td::TensorDict loaded = td::load_memmap(dir);    // maps the files; reads nothing yet
  std::cout << loaded.get({"agent", "pos"}).sum().item<float>() << "\n";  // 2
  try {
    loaded.set("new_key", at::zeros({16}));        // a memmapped tensordict is locked
  } catch (const td::LockedError& e) {
    std::cout << e.what() << "\n";
  }
}

// docs/backends.md#options
void options(const std::string& dir) {
  td::TensorDict data({{"obs", at::randn({1000, 64})}}, /*batch_size=*/{1000});
  td::MemmapOptions write;
  write.num_threads = 4;      // leaves written in parallel
  write.existsok = true;      // reuse existing files (the default)
  td::memmap(data, dir, write);

  td::LoadMemmapOptions read;
  read.writable = false;      // map copy-on-write: writes stay in this process
  td::TensorDict loaded = td::load_memmap(dir, read);
  std::cout << td::memmap_path(loaded) << "\n";
}

// docs/backends.md#preallocating-with-memmap_like
void preallocate(const std::string& dir) {
  td::TensorDict layout({{"obs", at::empty({100000, 8})}, {"done", at::empty({100000}, at::kBool)}},
                        /*batch_size=*/{100000});
  td::TensorDict buffer = td::memmap_like(layout, dir);  // zero-filled files, nothing copied
  buffer.index_put_({at::indexing::Slice(0, 2)},
                    td::TensorDict({{"obs", at::ones({2, 8})}, {"done", at::ones({2}, at::kBool)}}, {2}));
  std::cout << buffer.get("obs").sum().item<float>() << "\n";  // 16
}

// docs/backends.md#typed-classes-over-a-memmap-directory
void typed_memmap(const std::string& dir) {
  game::Transition batch({{"done", at::zeros({8}, at::kBool)},
                          {"state", at::randn({8, 5})},
                          {"action", at::zeros({8}, at::kLong)},
                          {"reward", at::ones({8})}},
                         /*batch_size=*/{8});
  td::memmap(batch, dir);
  game::Transition replay = game::Transition::from_tensordict(td::load_memmap(dir));
  replay.reward().mul_(2);  // writes to dir/reward.memmap
  std::cout << replay.is_memmap() << " " << replay.reward().sum().item<float>() << "\n";  // 1 16
}

}  // namespace

// docs/backends.md#lazy-stacks
void lazy_stacks() {
  td::TensorDict env0({{"obs", at::zeros({3})}, {"pixels", at::zeros({8, 8})}});
  td::TensorDict env1({{"obs", at::ones({3})}, {"lidar", at::zeros({16})}});
  td::LazyStackedTensorDict envs = td::lazy_stack({env0, env1});
  std::cout << envs.get("obs").sizes() << " " << envs.index({0}).is_same(env0) << "\n";  // [2, 3] 1
  std::cout << envs.exclusive_keys().size() << "\n";                                  // 2
}

int main() {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / "tensordict_docs_backends";
  std::filesystem::remove_all(root);
  in_memory();
  memory_mapped((root / "memmap").string());
  options((root / "options").string());
  preallocate((root / "preallocated").string());
  typed_memmap((root / "typed").string());
  lazy_stacks();
  std::filesystem::remove_all(root);
  return 0;
}
