"""Writes the h5py-side fixtures of the HDF5 tests: usage h5py_write.py KIND PATH.

KIND is "mixed" (nested groups, bool, ints, floats, complex, a string, a gzip dataset, a 3-D
dataset, opaque numpy scalars as Python tensordict stores non-tensors), "auto_batch" (Python's
test_auto_batch_size layout: root [3, 4], group b [3, 4, 5]), "uint16" (a dtype LibTorch 1.13
lacks) "strings" (per-row strings: a str array and a fixed-length bytes array next to a
tensor of the same rows) "bad_batch" (stored batch sizes its datasets and groups contradict), or a root batch size
attribute that is not one: "attr_negative" (int array with -2), "attr_float" (a float array),
"attr_text" (JSON text that is not a list of sizes), or "layouts" (the same [6, 5] float32
values stored contiguously, big-endian, chunked, compact, in an external file and never
written, next to contiguous bool, int16 and complex64 datasets: each read directly or through
HDF5). Run with Debian's /usr/bin/python3 (python3-h5py, python3-numpy).
"""
import sys

import h5py
import numpy as np

kind, path = sys.argv[1], sys.argv[2]
with h5py.File(path, "w") as f:
    if kind == "mixed":
        f.create_dataset("b", data=np.array([[True, False, True], [False, False, True]]))
        f.create_dataset("i8", data=np.arange(6, dtype=np.int8).reshape(2, 3))
        f.create_dataset("i64", data=np.arange(2, dtype=np.int64) * 1000000000000)
        f.create_dataset("u8", data=np.array([[1, 2, 255], [0, 7, 9]], dtype=np.uint8))
        f.create_dataset("f16", data=np.array([0.5, -2.0], dtype=np.float16))
        f.create_dataset("f64", data=np.linspace(0, 1, 6).reshape(2, 3))
        f.create_dataset("c64", data=(np.arange(2) + 1j * np.arange(2, 4)).astype(np.complex64))
        f.create_dataset("cube", data=np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4))
        f.create_dataset("gz", data=np.arange(2 * 100, dtype=np.int32).reshape(2, 100), compression="gzip",
                         compression_opts=9)
        f.create_dataset("s", data="a string!")
        for name, value in (("oi", 7), ("of", 2.5), ("ob", True)):
            a = np.array(value)
            f.create_dataset(name, data=a.astype(h5py.opaque_dtype(a.dtype)))
        g = f.create_group("nested")
        g.create_dataset("x", data=np.ones((2, 5), dtype=np.float32))
        g.create_group("deeper").create_dataset("y", data=np.full((2,), 3, dtype=np.int16))
    elif kind == "auto_batch":
        f.create_dataset("a", data=np.zeros((3, 4, 5)))
        f.create_dataset("c", data=np.zeros((3, 4)))
        f.create_dataset("b/d", data=np.zeros((3, 4, 5, 6)))
        f.create_dataset("b/e", data=np.zeros((3, 4, 5)))
    elif kind == "strings":
        f.create_dataset("x", data=np.arange(3, dtype=np.float32))
        f.create_dataset("tags", data=np.array(["a", "bb", "a"], dtype=object), dtype=h5py.string_dtype())
        f.create_dataset("codes", data=np.array([b"x", b"yy", b"z"]))
    elif kind == "bad_batch":
        f.attrs["tensordict_batch_size"] = "[4]"
        f.create_dataset("ok", data=np.zeros((4, 2), dtype=np.float32))
        f.create_dataset("short", data=np.zeros((3, 2), dtype=np.float32))
        f.create_group("g").attrs["tensordict_batch_size"] = "[5]"
    elif kind == "attr_negative":
        f.attrs["tensordict_batch_size"] = np.array([3, -2], dtype=np.int64)
    elif kind == "attr_float":
        f.attrs["tensordict_batch_size"] = np.array([3.0])
    elif kind == "attr_text":
        f.attrs["tensordict_batch_size"] = '{"a": 1}'
    elif kind == "layouts":
        values = np.arange(30, dtype=np.float32).reshape(6, 5)
        f.create_dataset("contiguous", data=values)
        f.create_dataset("big_endian", data=values.astype(">f4"))
        f.create_dataset("chunked", data=values, chunks=(2, 5))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        compact = h5py.h5d.create(f.id, b"compact", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple((6, 5)), dcpl=dcpl)
        compact.write(h5py.h5s.ALL, h5py.h5s.ALL, values)
        f.create_dataset("external", data=values, external=[(path + ".raw", 0, h5py.h5f.UNLIMITED)])
        f.create_dataset("unwritten", shape=(6, 5), dtype=np.float32)
        f.create_dataset("flags", data=(values.astype(np.int64) % 3) == 0)
        f.create_dataset("short", data=values.astype(np.int16) - 7)
        f.create_dataset("complex", data=(values + 1j * -values).astype(np.complex64))
    elif kind == "uint16":
        f.create_dataset("u16", data=np.arange(4, dtype=np.uint16))
    else:
        raise SystemExit(f"unknown kind {kind}")
