#!/usr/bin/python3
"""Independent reader for memmap directories written by tensordict-cpp (json + numpy only).

Usage: check_written.py DIR

Loads DIR the way Python tensordict v0.14 `load_memmap` does (docs/compatibility.md) and
checks that it is written exactly as Python tensordict writes it: stdlib-json meta.json text,
entry and reserved-field order, leaf fields, canonical dtype names, robust (encoded) file and
directory names, exact file sizes, no file for empty leaves, no stray files, the exact compact
NonTensorStack layout. On success prints the loaded tree as JSON (leaves first, then
sub-collections, as Python orders them) and exits 0; otherwise prints the problem to stderr and
exits 1.
"""
import json
import os
import sys

import numpy as np

from memmap_format import NTD_TYPE, NTS_TYPE, TD_TYPE, encode_key
RESERVED = ["shape", "device", "_type"]
ITEM = {"torch.bool": 1, "torch.uint8": 1, "torch.int8": 1, "torch.int16": 2, "torch.int32": 4,
        "torch.int64": 8, "torch.float16": 2, "torch.float32": 4, "torch.float64": 8,
        "torch.bfloat16": 2, "torch.complex32": 4, "torch.complex64": 8, "torch.complex128": 16}
NUMPY = {"torch.bool": "u1", "torch.uint8": "u1", "torch.int8": "i1", "torch.int16": "<i2",
         "torch.int32": "<i4", "torch.int64": "<i8", "torch.float16": "<f2", "torch.float32": "<f4",
         "torch.float64": "<f8", "torch.complex32": "<f2", "torch.complex64": "<f4",
         "torch.complex128": "<f8"}


class Bad(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Bad(msg)


def read_meta(path, style):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")
    obj = json.loads(text)
    expected = json.dumps(obj) if style == "stdlib" else json.dumps(obj, separators=(",", ":"),
                                                                     ensure_ascii=False)
    check(text == expected, "%s: not written in %s JSON style:\n%s\nexpected\n%s" % (path, style, text, expected))
    return obj


def leaf_values(path, dtype, shape):
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    nbytes = n * ITEM[dtype]
    if n == 0:
        check(not os.path.exists(path), "%s: an empty leaf must have no file" % path)
        return []
    check(os.path.isfile(path), "%s: missing" % path)
    size = os.path.getsize(path)
    check(size == nbytes, "%s: %d bytes, expected exactly %d" % (path, size, nbytes))
    data = np.fromfile(path, dtype="u1", count=nbytes)
    if dtype == "torch.bfloat16":
        vals = (data.view("<u2").astype("<u4") << 16).view("<f4")
        return [float(v) for v in vals]
    arr = data.view(NUMPY[dtype])
    if dtype.startswith("torch.complex"):
        return [float(v) for v in arr]  # interleaved re, im
    if dtype.startswith("torch.float"):
        return [float(v) for v in arr]
    return [int(v) for v in arr]


def load_td(path, seen):
    meta = read_meta(os.path.join(path, "meta.json"), "stdlib")
    seen.add(os.path.join(path, "meta.json"))
    keys = list(meta)
    if keys and keys[-1] == "names" and isinstance(meta["names"], list):
        # Batch-dim names, which v0.14's loader skips (not a dict): one string or null per dim.
        names = meta.pop("names")
        keys.pop()
        check(len(names) == len(meta["shape"]) and all(n is None or isinstance(n, str) for n in names),
              "%s/meta.json: bad names %r for batch %r" % (path, names, meta["shape"]))
    check(keys[-3:] == RESERVED, "%s/meta.json: reserved fields must come last in order %s, got %s"
          % (path, RESERVED, keys[-3:]))
    check(meta["_type"] == TD_TYPE and meta["device"] == "cpu", "%s/meta.json: bad _type/device" % path)
    batch = meta["shape"]
    leaves, colls = [], []
    for key in keys[:-3]:
        entry = meta[key]
        if "type" in entry:
            check(list(entry) == ["type"], "%s: collection entry %r has extra fields" % (path, key))
            name = os.path.join(path, encode_key(key))
            check(os.path.isdir(name), "%s: directory for %r missing" % (name, key))
            colls.append((key, entry["type"], name))
        else:
            check(list(entry) == ["device", "shape", "dtype", "is_nested"],
                  "%s: leaf %r fields %s" % (path, key, list(entry)))
            check(entry["is_nested"] is False and entry["dtype"] in ITEM, "%s: leaf %r: %s" % (path, key, entry))
            check(entry["shape"][:len(batch)] == batch, "%s: leaf %r shape vs batch" % (path, key))
            fname = os.path.join(path, encode_key(key) + ".memmap")
            seen.add(fname)
            leaves.append([key, {"kind": "tensor", "dtype": entry["dtype"], "shape": entry["shape"],
                                 "values": leaf_values(fname, entry["dtype"], entry["shape"])}])
    out = []
    for key, typ, name in colls:
        if typ == "TensorDict":
            out.append([key, load_td(name, seen)])
        elif typ == "NonTensorData":
            m = read_meta(os.path.join(name, "meta.json"), "stdlib")
            seen.add(os.path.join(name, "meta.json"))
            check(list(m) == ["_type", "data", "_metadata"] and m["_type"] == NTD_TYPE and m["_metadata"] is None,
                  "%s: NonTensorData meta %s" % (name, m))
            out.append([key, {"kind": "non_tensor", "data": m["data"]}])
        elif typ == "NonTensorStack":
            m = read_meta(os.path.join(name, "meta.json"), "compact")
            seen.add(os.path.join(name, "meta.json"))
            check(list(m) == ["_type", "stack_dim", "device", "data"] and m["_type"] == NTS_TYPE
                  and m["stack_dim"] == 0 and m["device"] is None, "%s: NonTensorStack meta %s" % (name, m))
            out.append([key, {"kind": "stack", "data": m["data"]}])
        else:
            raise Bad("%s: unknown collection type %r" % (name, typ))
    return {"kind": "td", "batch": batch, "entries": leaves + out}


def main(root):
    seen = set()
    try:
        tree = load_td(root, seen)
        for dirpath, _, files in os.walk(root):
            for f in files:
                p = os.path.join(dirpath, f)
                check(p in seen, "%s: stray file not listed in any meta.json" % p)
    except Bad as e:
        print(str(e), file=sys.stderr)
        return 1
    print(json.dumps(tree))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
