"""An independent reader and writer of the TensorDictStore layout, written from the layout
documentation (docs/backends.md, "Redis stores"; Python tensordict v0.14's format) with
redis-py and numpy only: no tensordict code.

  check_store_layout.py read SOCKET TD_ID    checks the store store_test.cpp wrote
  check_store_layout.py write SOCKET TD_ID   writes a store as Python tensordict v0.14 does

Exits 0 and prints OK when everything matches; otherwise prints what differs and exits 1.
"""
import json
import sys

import numpy as np
import redis

DTYPES = {"torch.float32": np.float32, "torch.float64": np.float64, "torch.int64": np.int64,
          "torch.int32": np.int32, "torch.uint8": np.uint8, "torch.bool": np.bool_}


def key(td_id, suffix):
    return f"tensordict:{{{td_id}}}:{suffix}"


def read_leaf(r, td_id, path):
    meta = {k.decode(): v.decode() for k, v in r.hgetall(key(td_id, "m:" + path)).items()}
    data = r.get(key(td_id, "d:" + path))
    if meta.get("is_non_tensor") == "1":
        assert meta["encoding"] in ("json", "json_array"), meta
        return json.loads(data)
    shape = json.loads(meta["shape"])
    return np.frombuffer(bytearray(data), dtype=DTYPES[meta["dtype"]]).reshape(shape)


def check_read(r, td_id):
    problems = []
    expect = lambda ok, what: ok or problems.append(what)
    expect(json.loads(r.get(key(td_id, "__batch_size__"))) == [4], "batch size")
    expect(r.get(key(td_id, "__device__")) == b"", "device")
    leaves = sorted(m.decode() for m in r.smembers(key(td_id, "__keys__")))
    expect(leaves == ["done", "label", "next.reward", "obs", "rows"], f"keys {leaves}")
    expect(np.array_equal(read_leaf(r, td_id, "obs"), np.arange(24, dtype=np.float32).reshape(4, 6)), "obs")
    expect(read_leaf(r, td_id, "done").tolist() == [True, False, True, False], "done")
    expect(np.array_equal(read_leaf(r, td_id, "next.reward"), np.arange(4, dtype=np.float64)), "next.reward")
    expect(read_leaf(r, td_id, "label") == "episode", "label")
    expect(read_leaf(r, td_id, "rows") == ["a", "b", "c", "d"], "rows (json_array)")
    return problems


def write(r, td_id):
    # What v0.14's from_tensordict sends (tensordict/store/_store.py): globals, then per leaf
    # d: bytes, m: hash, and the path in __keys__.
    r.set(key(td_id, "__batch_size__"), json.dumps([3]))
    r.set(key(td_id, "__device__"), "")
    leaves = {"obs": np.arange(6, dtype=np.int64).reshape(3, 2), "nested.flag": np.array([True, False, True])}
    for path, array in leaves.items():
        r.set(key(td_id, "d:" + path), array.tobytes())
        r.hset(key(td_id, "m:" + path), mapping={"shape": json.dumps(list(array.shape)),
                                                 "dtype": "torch." + {"int64": "int64", "bool": "bool"}[array.dtype.name]})
        r.sadd(key(td_id, "__keys__"), path)
    r.set(key(td_id, "d:names"), json.dumps(["x", None, "z"]))
    r.hset(key(td_id, "m:names"), mapping={"is_non_tensor": "1", "encoding": "json_array"})
    r.sadd(key(td_id, "__keys__"), "names")


def main():
    mode, socket, td_id = sys.argv[1:4]
    r = redis.Redis(unix_socket_path=socket)
    if mode == "write":
        write(r, td_id)
    else:
        problems = check_read(r, td_id)
        if problems:
            print("layout differs:", ", ".join(problems))
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
