"""Reads, with Python tensordict v0.14, what tests/interop/write_cpp_fixtures.cpp wrote, and
compares every key, batch size, shape, dtype and value with v014_spec. Usage:

    check_cpp_written.py IN_DIR REDIS_SOCKET

REDIS_SOCKET is a server that loaded IN_DIR/store_rich.rdb (the store "cpp-rich"). Prints one
line per artifact and exits 1 when any differs.
"""
import os
import sys
import traceback

import redis.asyncio
import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, PersistentTensorDict, TensorDict
from tensordict.base import _is_leaf_nontensor
from tensordict.store import TensorDictStore

sys.path.insert(0, os.path.dirname(__file__))
import v014_spec  # noqa: E402

# v0.14's from_store closes its client with aclose(), which redis-py has since 5.0.1; Debian 12
# ships 4.3, whose close() is the same coroutine.
if not hasattr(redis.asyncio.Redis, "aclose"):
    redis.asyncio.Redis.aclose = redis.asyncio.Redis.close


def non_tensor_value(td, key):
    value = td.get_non_tensor(key)
    if isinstance(value, list):  # a NonTensorStack
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value.decode() if isinstance(value, bytes) else value


def compare(got, expected, problems, where=""):
    if list(got.batch_size) != list(expected.batch_size):
        problems.append(f"{where}batch_size {list(got.batch_size)} != {list(expected.batch_size)}")
    # Non-tensors count as leaves (v0.14's store lists them with keys(True, True), TensorDict not).
    got_keys = {k if isinstance(k, tuple) else (k,) for k in got.keys(True, True, is_leaf=_is_leaf_nontensor)}
    want_keys = {k if isinstance(k, tuple) else (k,) for k in expected.keys(True, True, is_leaf=_is_leaf_nontensor)}
    if got_keys != want_keys:
        problems.append(f"{where}keys: missing {sorted(want_keys - got_keys)}, extra {sorted(got_keys - want_keys)}")
    for key in sorted(want_keys & got_keys):
        want = expected.get(key)
        if isinstance(want, torch.Tensor):
            have = got.get(key)
            if not isinstance(have, torch.Tensor):
                problems.append(f"{where}{key}: {type(have).__name__}, not a tensor")
            elif have.dtype != want.dtype or have.shape != want.shape:
                problems.append(f"{where}{key}: {have.dtype} {list(have.shape)} != {want.dtype} {list(want.shape)}")
            elif not torch.equal(have.cpu(), want):
                problems.append(f"{where}{key}: values differ")
        else:
            have, value = non_tensor_value(got, key), non_tensor_value(expected, key)
            if have != value:
                problems.append(f"{where}{key}: {have!r} != {value!r}")


# (The store is compared key by key: v0.14's TensorDictStore.to_tensordict() puts non-tensor
# values into a TensorDict as plain values, so an int fails its batch check, its own stores' too.)


def check_lazy(got, problems):
    expected = v014_spec.lazy(TensorDict, LazyStackedTensorDict)
    if not isinstance(got, LazyStackedTensorDict):
        problems.append(f"loaded as {type(got).__name__}, not a LazyStackedTensorDict")
        return
    if got.stack_dim != 0 or len(got.tensordicts) != len(expected.tensordicts):
        problems.append(f"stack_dim {got.stack_dim}, {len(got.tensordicts)} members")
        return
    for i, (g, e) in enumerate(zip(got.tensordicts, expected.tensordicts)):
        compare(g, e, problems, where=f"member {i}: ")


def main(directory, socket):
    rich = v014_spec.rich(TensorDict)
    checks = {
        "memmap_rich": lambda p: compare(TensorDict.load_memmap(os.path.join(directory, "memmap_rich")), rich, p),
        "memmap_lazy": lambda p: check_lazy(TensorDict.load_memmap(os.path.join(directory, "memmap_lazy")), p),
        "memmap_strings": lambda p: compare(TensorDict.load_memmap(os.path.join(directory, "memmap_strings")),
                                            v014_spec.strings(TensorDict, NonTensorStack), p),
        "consolidated_rich.bin": lambda p: compare(
            TensorDict.from_consolidated(os.path.join(directory, "consolidated_rich.bin")), rich, p),
        "h5_rich.h5": lambda p: compare(
            PersistentTensorDict.from_h5(os.path.join(directory, "h5_rich.h5")).to_tensordict(),
            v014_spec.rich(TensorDict, exclude=v014_spec.H5_EXCLUDED), p),
        "store cpp-rich": lambda p: compare(
            TensorDictStore.from_store(unix_socket_path=socket, td_id="cpp-rich"),
            v014_spec.rich(TensorDict, exclude=v014_spec.STORE_EXCLUDED), p),
    }
    failed = False
    for name, check in checks.items():
        problems = []
        try:
            check(problems)
        except Exception:
            problems.append(traceback.format_exc(limit=4).strip().replace("\n", "\n    "))
        failed |= bool(problems)
        print(f"{name}: {'ok' if not problems else 'DIFFERS'}")
        for problem in problems:
            print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
