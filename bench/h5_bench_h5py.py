"""h5py's times for the reads of bench/h5_bench.cpp, for the table in docs/performance.md.

Run by hand with Debian's interpreter (it has h5py): /usr/bin/python3 bench/h5_bench_h5py.py
Writes the same 1 GiB file ([262144, 1024] float32 "obs") in a temporary directory, then times
each read (and the key listings of files of n small datasets) (median of 5 rounds, each round as many calls as fit in 0.2 s) and prints
`op rows microseconds`. h5py needs increasing, distinct indices: the random read sorts them,
reads, and puts the rows back in the asked order, as users must.
"""
import os
import statistics
import tempfile
import time

import h5py
import numpy as np

ROWS, COLS = 262144, 1024


def timed(fn, min_time=0.2, rounds=5):
    results = []
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        results.append(elapsed / n)
    return statistics.median(results) * 1e6


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.h5")
        rng = np.random.default_rng(0)
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("obs", (ROWS, COLS), dtype="float32")
            for r in range(0, ROWS, 4096):
                ds[r:r + 4096] = rng.standard_normal((4096, COLS), dtype=np.float32)

        for rows in (64, 4096, 65536):
            def open_slice():
                with h5py.File(path, "r") as f:
                    f["obs"][0:rows]
            print(f"open_slice {rows} {timed(open_slice):.1f}")

        f = h5py.File(path, "r")
        ds = f["obs"]
        for rows in (64, 4096):
            idx = rng.permutation(ROWS)[:rows]

            def random_rows():
                order = np.argsort(idx)
                block = ds[np.sort(idx)]
                out = np.empty_like(block)
                out[order] = block
                return out
            print(f"random_rows {rows} {timed(random_rows):.1f}")
        print(f"full_read {ROWS} {timed(lambda: ds[...], rounds=3):.1f}")
        f.close()

        # h5_bench's Keys/<n>: n datasets [16, 4] at the root of an open file. h5py's keys()
        # lists link names alone; telling leaves from strings reads each dataset's dtype.
        for n in (100, 1000, 10000):
            keys_path = os.path.join(d, f"keys{n}.h5")
            with h5py.File(keys_path, "w", track_order=True) as f:
                for i in range(n):
                    f.create_dataset(f"x{i}", data=np.ones((16, 4), np.float32))
            with h5py.File(keys_path, "r") as f:
                print(f"keys {n} {timed(lambda: list(f.keys())):.1f}")
                leaf_keys = lambda: [k for k, v in f.items() if v.dtype.kind not in "SOU"]
                print(f"leaf_keys {n} {timed(leaf_keys):.1f}")


if __name__ == "__main__":
    main()
