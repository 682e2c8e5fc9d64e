"""Prints what h5py reads from an HDF5 file, as JSON: for every dataset its path, numpy dtype,
shape, values (flattened; complex as [real, imag] pairs, strings decoded), compression and
chunks, plus each object's attributes. Usage: h5py_read.py PATH (Debian's /usr/bin/python3)."""
import json
import sys

import h5py
import numpy as np

out = {}


def value_of(arr):
    if arr.dtype.kind in "OS":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in arr.reshape(-1)]
    if arr.dtype.kind == "c":
        return [[float(v.real), float(v.imag)] for v in arr.reshape(-1)]
    if arr.dtype.kind == "b":
        return [bool(v) for v in arr.reshape(-1)]
    if arr.dtype.kind in "iu":
        return [int(v) for v in arr.reshape(-1)]
    return [float(v) for v in arr.reshape(-1)]


def visit(name, obj):
    entry = {"attrs": {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in obj.attrs.items()}}
    if isinstance(obj, h5py.Dataset):
        entry["dtype"] = str(obj.dtype)
        entry["shape"] = list(obj.shape)
        entry["compression"] = obj.compression
        entry["chunks"] = list(obj.chunks) if obj.chunks else None
        data = obj[()]
        if isinstance(data, bytes):
            entry["value"] = data.decode()
        elif obj.dtype.kind == "V":
            entry["value"] = data.tolist() if hasattr(data, "tolist") else repr(data)
        else:
            entry["value"] = value_of(np.asarray(data))
    out[name] = entry


with h5py.File(sys.argv[1], "r") as f:
    visit("/", f)
    f.visititems(visit)
print(json.dumps(out, sort_keys=True))
