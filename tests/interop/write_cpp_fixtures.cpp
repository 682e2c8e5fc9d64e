// Writes what Python tensordict v0.14 reads back in check_cpp_written.py (tests/interop/README.md):
//
//   write_cpp_fixtures OUT_DIR [REDIS_SOCKET]
//
// OUT_DIR gets memmap_rich/, memmap_lazy/, memmap_strings/, consolidated_rich.bin and h5_rich.h5; with a socket,
// the server there gets the store "cpp-rich" (run_v014.sh saves it as store_rich.rdb).

#include <cstdio>
#include <exception>
#include <string>

#include "interop/write_fixtures.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [REDIS_SOCKET]\n", argv[0]);
    return 2;
  }
  try {
    interop::write_files(argv[1]);
#ifdef TENSORDICT_TEST_REDIS
    if (argc > 2) interop::write_store(argv[2], "cpp-rich");
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_cpp_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}
