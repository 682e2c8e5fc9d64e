// The writer processes of the reliability tests.
//
//   writer_process WRITER DEST GENERATION
//       WRITER is memmap, memmap_, h5 or consolidate; DEST the destination (an existing one is
//       replaced). Builds reliability::payload(GENERATION), prints "writing" on stdout, writes,
//       prints "done". The crash-consistency tests kill it at random points.
//   writer_process rows memmap|h5 DEST WORKER WORKERS
//       Opens the stored payload at DEST for writing and sets every row r with
//       r % WORKERS == WORKER to r (every leaf, "tag" aside), one row at a time: one of several
//       processes writing disjoint rows.
//
// Exits 0 when written, 1 on a typed error (its message on stderr), 2 on bad usage.
#include <iostream>
#include <string>

#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif

#include "reliability/payload.h"

namespace {

int write_rows(const std::string& backend, const std::string& dest, int64_t worker, int64_t workers) {
  tensordict::TensorDict td;
  if (backend == "memmap") {
    td = tensordict::load_memmap(dest);
#ifdef TENSORDICT_TEST_HDF5
  } else if (backend == "h5") {
    td = tensordict::PersistentTensorDict::from_h5(dest, "r+");
#endif
  } else {
    std::cerr << "writer_process: unknown backend " << backend << "\n";
    return 2;
  }
  for (int64_t r = worker; r < td.batch_size()[0]; r += workers) td.index_put_({r}, reliability::row_of(r));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "rows") {
    try {
      return write_rows(argv[2], argv[3], std::stoll(argv[4]), std::stoll(argv[5]));
    } catch (const tensordict::Error& e) {
      std::cerr << "writer_process: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc != 4) {
    std::cerr << "usage: writer_process memmap|memmap_|h5|consolidate DEST GENERATION\n"
                 "       writer_process rows memmap|h5 DEST WORKER WORKERS\n";
    return 2;
  }
  const std::string writer = argv[1], dest = argv[2];
  try {
    tensordict::TensorDict td = reliability::payload(std::stoi(argv[3]));
    tensordict::MemmapOptions replace;
    replace.overwrite = true;
    std::cout << "writing" << std::endl;
    if (writer == "memmap") {
      tensordict::memmap(td, dest, replace);
    } else if (writer == "memmap_") {
      tensordict::memmap_(td, dest, replace);
    } else if (writer == "consolidate") {
      tensordict::ConsolidateOptions options;
      options.filename = dest;
      tensordict::consolidate(td, options);
#ifdef TENSORDICT_TEST_HDF5
    } else if (writer == "h5") {
      tensordict::H5Options replace_h5;
      replace_h5.overwrite = true;  // each run replaces the last one's file
      tensordict::PersistentTensorDict::to_h5(td, dest, replace_h5).close();
#endif
    } else {
      std::cerr << "writer_process: unknown writer " << writer << "\n";
      return 2;
    }
    std::cout << "done" << std::endl;
  } catch (const tensordict::Error& e) {
    std::cerr << "writer_process: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
