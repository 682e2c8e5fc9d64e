"""tensordict_cpp from Python on fixture F of bench/ops.md (3 groups g0..g2 of 10 leaves x0..x9,
[64, 16] float32, batch [64]): crossing the boundary both ways, and the issue's ops. Each op is
timed with timeit (best of 5 repeats of the median-sized loop), in microseconds; the same op
through Python tensordict is printed beside it when `tensordict` is importable, else n/a.

Usage: PYTHONPATH=<build>/python /usr/bin/python3 bench/python_bench.py
Prints `python op cpp_us tensordict_us` lines. A benchmark, not a test.
"""
import shutil
import tempfile
import timeit

import torch

import tensordict_cpp as tdc

try:
    import tensordict as ptd
except ImportError:
    ptd = None


def fixture_dict():
    torch.manual_seed(0)
    return {f"g{g}": {f"x{i}": torch.randn(64, 16) for i in range(10)} for g in range(3)}


def best_us(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main():
    source = fixture_dict()
    td = tdc.TensorDict(source, batch_size=[64])
    py = ptd.TensorDict(source, batch_size=[64]) if ptd else None
    tmp = tempfile.mkdtemp()
    counter = [0]

    def memmap_cpp():
        counter[0] += 1
        td.memmap(f"{tmp}/c{counter[0]}")

    def memmap_py():
        counter[0] += 1
        if hasattr(py, "memmap"):
            py.memmap(f"{tmp}/p{counter[0]}")
        else:  # before v0.2: only the in-place form, on a shallow copy
            py.clone(recurse=False).memmap_(prefix=f"{tmp}/p{counter[0]}")

    # Versions of Python tensordict before the arithmetic operators (v0.1) and before
    # tensordict.stack take the equivalent spelling.
    mul_py = (lambda: py * 0.5) if py is not None and hasattr(type(py), "__mul__") else (
        lambda: py.apply(lambda x: x * 0.5))
    # torch.stack of tensordicts was lazy before v0.2 (a LazyStackedTensorDict): made dense there.
    stack_py = getattr(ptd, "stack", torch.stack) if ptd else None

    def dense_stack_py(items):
        out = stack_py(items)
        return out.contiguous() if type(out).__name__ == "LazyStackedTensorDict" else out

    def lazy_stack_py(items):
        lazy = getattr(getattr(ptd, "LazyStackedTensorDict", None), "lazy_stack", None)
        return lazy(items) if lazy is not None else torch.stack(items)

    ops = [
        ("from_dict (30 leaves, 3 levels)", lambda: tdc.TensorDict.from_dict(source, batch_size=[64]),
         (lambda: ptd.TensorDict(source, batch_size=[64])) if py is not None else None, 2000),
        ("to_dict", lambda: td.to_dict(), (lambda: py.to_dict()) if py is not None else None, 2000),
        ('td["g0", "x0"]', lambda: td["g0", "x0"], (lambda: py["g0", "x0"]) if py is not None else None, 20000),
        ("td[5]", lambda: td[5], (lambda: py[5]) if py is not None else None, 2000),
        ("td * 0.5", lambda: td * 0.5, mul_py if py is not None else None, 1000),
        ("stack of 16", lambda: tdc.stack([td] * 16), (lambda: dense_stack_py([py] * 16)) if py is not None else None, 50),
        ("lazy_stack of 16", lambda: tdc.lazy_stack([td] * 16),
         (lambda: lazy_stack_py([py] * 16)) if py is not None else None, 500),
        ("memmap", memmap_cpp, memmap_py if py is not None else None, 20),
    ]
    version = (getattr(ptd, "__version__", None) or f"from {ptd.__file__}") if ptd else "not importable"
    print(f"python reference: tensordict {version}, torch {torch.__version__}")
    for name, cpp, ref, number in ops:
        c = best_us(cpp, number)
        r = f"{best_us(ref, number):.1f}" if ref else "n/a"
        print(f"python {name}: {c:.1f} us, tensordict {r}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
