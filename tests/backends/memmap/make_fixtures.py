#!/usr/bin/python3
"""Writes memmap directories in Python tensordict's (v0.14) format, independently of the C++
code: json + numpy only, following docs/compatibility.md.

Usage: make_fixtures.py OUTDIR

Every tensor leaf of shape S holds arange(numel(S)) % 7 cast to its dtype (bool: % 2; complex:
real part that value, imaginary part its negation), so the C++ test can rebuild the expected
values from the shape and dtype alone.
"""
import json
import os
import sys

import numpy as np

from memmap_format import NTD_TYPE, NTS_TYPE, TD_TYPE, encode_key

# dtype name -> (numpy dtype of one stored component, components per element)
DTYPES = {
    "torch.bool": ("u1", 1), "torch.uint8": ("u1", 1), "torch.int8": ("i1", 1),
    "torch.int16": ("<i2", 1), "torch.int32": ("<i4", 1), "torch.int64": ("<i8", 1),
    "torch.float16": ("<f2", 1), "torch.float32": ("<f4", 1), "torch.float64": ("<f8", 1),
    "torch.bfloat16": ("bf16", 1), "torch.complex32": ("<f2", 2),
    "torch.complex64": ("<f4", 2), "torch.complex128": ("<f8", 2),
}


def leaf_bytes(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    base = np.arange(n, dtype=np.int64) % (2 if dtype == "torch.bool" else 7)
    comp, per = DTYPES[dtype]
    if comp == "bf16":
        # bfloat16 = the upper 16 bits of the float32 (exact for small integers)
        return (base.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    if per == 2:
        pairs = np.stack([base, -base], axis=-1).astype(comp)
        return pairs.tobytes()
    return base.astype(comp).tobytes()


def dumps(obj, style):
    if style == "stdlib":
        return json.dumps(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)  # orjson style


class Dir:
    """One TensorDict level being written."""

    def __init__(self, path, batch, style="stdlib", legacy=False):
        self.path, self.batch, self.style, self.legacy = path, list(batch), style, legacy
        self.meta = {}
        os.makedirs(path, exist_ok=True)

    def name(self, key):
        return key if self.legacy else encode_key(key)

    def leaf(self, key, dtype, shape, tail=b"", write_file=True):
        self.meta[key] = {"device": "cpu", "shape": list(shape), "dtype": dtype, "is_nested": False}
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if n == 0 or not write_file:
            return  # empty leaves have no file
        with open(os.path.join(self.path, self.name(key) + ".memmap"), "wb") as f:
            f.write(leaf_bytes(dtype, shape) + tail)

    def sub(self, key, batch, **kw):
        self.meta[key] = {"type": "TensorDict"}
        kw.setdefault("style", self.style)
        kw.setdefault("legacy", self.legacy)
        return Dir(os.path.join(self.path, self.name(key)), batch, **kw)

    def non_tensor(self, key, data):
        self.meta[key] = {"type": "NonTensorData"}
        d = os.path.join(self.path, self.name(key))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "meta.json"), "w") as f:
            f.write(dumps({"_type": NTD_TYPE, "data": data, "_metadata": None}, self.style))

    def non_tensor_stack(self, key, data):
        self.meta[key] = {"type": "NonTensorStack"}
        d = os.path.join(self.path, self.name(key))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "meta.json"), "w") as f:
            f.write(json.dumps({"_type": NTS_TYPE, "stack_dim": 0, "device": None, "data": data},
                               separators=(",", ":")))

    def close(self):
        meta = dict(self.meta)
        meta["shape"] = self.batch
        meta["device"] = "cpu"
        meta["_type"] = TD_TYPE
        with open(os.path.join(self.path, "meta.json"), "w") as f:
            f.write(dumps(meta, self.style))


def main(out):
    # Every loadable dtype, batch [2], leaves [2, 3]; stdlib and orjson JSON styles.
    for style in ("stdlib", "orjson"):
        d = Dir(os.path.join(out, "all_dtypes_" + style), [2], style)
        for dtype in DTYPES:
            d.leaf(dtype.split(".")[1], dtype, [2, 3])
        d.close()

    # Nesting: batch [3]; sub-collection with a longer batch; a third level; keys out of order.
    d = Dir(os.path.join(out, "nested"), [3])
    d.leaf("x", "torch.float32", [3, 2])
    s = d.sub("sub", [3, 4])
    s.leaf("y", "torch.int64", [3, 4])
    deep = s.sub("deep", [3, 4])
    deep.leaf("z", "torch.float64", [3, 4, 5])
    deep.close()
    s.leaf("w", "torch.int16", [3, 4, 2])
    s.close()
    d.leaf("a", "torch.uint8", [3])
    d.close()

    # 0-dim leaves, batch [].
    d = Dir(os.path.join(out, "scalars"), [])
    d.leaf("f", "torch.float32", [])
    d.leaf("i", "torch.int64", [])
    d.leaf("b", "torch.bool", [])
    d.close()

    # Empty leaves (no file), next to a non-empty one; and a zero-size batch.
    d = Dir(os.path.join(out, "empty"), [2])
    d.leaf("e", "torch.int64", [2, 0])
    d.leaf("g", "torch.float32", [2, 3])
    z = d.sub("zero", [2, 0])
    z.leaf("h", "torch.float64", [2, 0, 4])
    z.close()
    d.close()

    # Non-tensor data: uniform values of every JSON kind and a stack.
    d = Dir(os.path.join(out, "non_tensor"), [2])
    d.leaf("t", "torch.float32", [2])
    d.non_tensor("text", "h\u00e9llo \U0001F600")
    d.non_tensor("cfg", {"lr": 0.5, "layers": [1, 2], "ok": True})
    d.non_tensor("none", None)
    d.non_tensor_stack("names", ["a", "b"])
    d.close()

    # Encoded key names (robust keys), including a nested collection whose name needs encoding.
    keys = ["a/b", "../outside", "", ".", "..", "%", "key:colon", "sp ace", "tab\tx", "\u00fcn\u00efcode", "a.b"]
    d = Dir(os.path.join(out, "encoded_keys"), [2])
    for k in keys:
        d.leaf(k, "torch.int32", [2])
    s = d.sub("sub/dir", [2])
    s.leaf("..", "torch.int32", [2])
    s.close()
    d.close()

    # Legacy (<= 0.12) raw file and directory names.
    d = Dir(os.path.join(out, "legacy"), [2], legacy=True)
    d.leaf("my key", "torch.int64", [2])
    s = d.sub("old dir", [2])
    s.leaf("v x", "torch.float32", [2])
    s.close()
    d.close()

    # Extra bytes after the data (stale tails, hand edits): ignored by readers.
    d = Dir(os.path.join(out, "tails"), [2])
    d.leaf("x", "torch.int64", [2], tail=b"\x00")
    d.leaf("y", "torch.bfloat16", [2], tail=b"\n\x00")
    d.close()

    # A LazyStackedTensorDict: element dirs 0/, 1/ and the stack dim, no shape.
    root = os.path.join(out, "lazy_stack")
    os.makedirs(root, exist_ok=True)
    for i in range(2):
        e = Dir(os.path.join(root, str(i)), [3])
        e.leaf("x", "torch.int64", [3, 2])
        e.close()
    with open(os.path.join(root, "meta.json"), "w") as f:
        f.write(json.dumps({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 1}))

    # PersistentTensorDict.memmap(): no is_nested, its own _type; older saves' "None" device.
    d = os.path.join(out, "persistent")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "x.memmap"), "wb") as f:
        f.write(leaf_bytes("torch.float32", [2]))
    with open(os.path.join(d, "meta.json"), "w") as f:
        f.write(json.dumps({"x": {"device": "cpu", "shape": [2], "dtype": "torch.float32"}, "shape": [2],
                            "device": "None", "_type": "<class 'tensordict.persistent.PersistentTensorDict'>"}))


if __name__ == "__main__":
    main(sys.argv[1])
