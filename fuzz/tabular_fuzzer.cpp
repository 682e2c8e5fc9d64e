// The tabular readers (from_csv, from_json records and JSON Lines): the input written to a file
// and read with nested keys and element columns on; what reads is written back and read again.
// Only typed errors may escape.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include <tensordict/tabular.h>

#include "fuzz_input.h"

namespace {
void read_and_round_trip(const std::string& path, bool csv, bool lines, const std::string& out) {
  tensordict::TabularReadOptions read;
  read.separator = ".";
  read.lines = lines;
  const tensordict::TensorDict td = csv ? tensordict::from_csv(path, read) : tensordict::from_json(path, read);
  tensordict::TabularWriteOptions write;
  write.separator = ".";
  write.lines = lines;
  if (csv) tensordict::to_csv(td, out, write);
  else tensordict::to_json(td, out, write);
  if (csv) tensordict::from_csv(out, read);
  else tensordict::from_json(out, read);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  fuzz::ScratchDir dir;
  // The first byte picks the reader: CSV, JSON records or JSON Lines.
  const int kind = data[0] % 3;
  const std::string path = (dir.path() / "in").string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  fuzz::expect_typed_errors([&] { read_and_round_trip(path, kind == 0, kind == 2, (dir.path() / "out").string()); });
  return 0;
}
