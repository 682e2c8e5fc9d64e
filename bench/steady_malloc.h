#pragma once
// glibc adapts its mmap threshold and trims the heap as large blocks come and go, so the same
// op's allocations alternate between the heap and fresh, page-faulting mappings from one pass to
// the next (cat16's floor moved between 150 and 1100 us; building a level of 10k keys from empty
// took 0.57 ms or 4.6 ms depending on whether the heap had been trimmed after the previous pass).
// Fixed thresholds give both sides of a comparison the same, steady allocator. What the default
// heuristics cost is in docs/performance.md ("Scaling with the number of keys").

#include <malloc.h>

namespace bench_malloc {

inline void steady() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace bench_malloc
