// docs/memmap.md#api: the API summary block, verbatim. Compiled, not run: it writes under /data.
// The block starts with its #include, so it sits at column 0 inside a function (the header was
// included above; #pragma once makes the repeat a no-op).
#include <cstdint>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

// Called by nobody: the point is that the documented calls compile as written.
void memmap_api_summary(tensordict::TensorDict td, const std::string& dir) {
#include <tensordict/tensordict.h>
using namespace tensordict;

TensorDict mm = memmap(td, "/data/run1");            // new locked CPU tensordict of file mappings
memmap_(td, "/data/run1");                           // in place: td's leaves become the mappings
TensorDict pre = memmap_like(td, "/data/buf");       // same tree, zero-filled (sparse) files
TensorDict back = load_memmap("/data/run1");         // lazy: files are mapped, not read
save(td, dir); load(dir);                            // aliases
memmap_refresh_(mm);                                 // reload entries other writers added
memmap_path(mm);                                     // "/data/run1"

MemmapOptions o;  o.existsok = false;  o.copy_existing = true;  o.num_threads = 4;
o.progress = [](int64_t done, int64_t total) { std::cerr << done << "/" << total << "\r"; };
LoadMemmapOptions l;  l.subpath = {"obs"};  l.device = at::kCUDA;  l.writable = false;
}
