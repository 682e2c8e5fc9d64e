"""The tensordicts both sides of the Python tensordict v0.14 interoperability check write and
expect (tests/interop/README.md). rich_fixture.h builds the same ones in C++: change both.

Values follow the flat element index i of each leaf, so every dtype holds distinct, exactly
representable numbers: bool i % 3 == 0; uint8 i % 97; other integers (i % 97) - 20; floating
((i % 97) - 20) / 4; complex the same real part with i / 2 as the imaginary part.
"""
import math

import torch

BATCH = [3, 2]

# (key path, dtype, shape after the batch dims)
RICH_LEAVES = [
    (("f32",), torch.float32, [4]),
    (("f64",), torch.float64, []),
    (("i64",), torch.int64, [1]),
    (("flag",), torch.bool, []),
    (("nested", "f16"), torch.float16, [2]),
    (("nested", "bf16"), torch.bfloat16, [3]),
    (("nested", "i8"), torch.int8, []),
    (("nested", "u8"), torch.uint8, [5]),
    (("nested", "i16"), torch.int16, []),
    (("nested", "i32"), torch.int32, [2]),
    (("nested", "c64"), torch.complex64, []),
    (("nested", "empty"), torch.float32, [0]),
    (("nested", "deeper", "x"), torch.float32, [2, 2]),
]

# (key path, value) of NonTensorData shared by the whole batch
RICH_NON_TENSORS = [
    (("name",), "run-7"),
    (("nested", "note"), "h\u00e9llo \u2713"),
    (("meta_int",), 7),
    (("nested", "meta_list"), [1, 2.5, "x"]),
]

# What an HDF5 file holds: h5py cannot store bfloat16, and v0.14 writes non-string values as
# opaque numpy objects.
H5_EXCLUDED = [("nested", "bf16"), ("meta_int",), ("nested", "meta_list")]

# What a Redis store holds: v0.14's store converts leaves through numpy, which has no bfloat16
# (TypeError on write), and reads a 0-byte value with np.frombuffer, which refuses it (ValueError).
STORE_EXCLUDED = [("nested", "bf16"), ("nested", "empty")]

# Members of the ragged lazy stack (stacked on dim 0): batch [2], obs [2, k], a string per member.
LAZY_WIDTHS = [1, 2, 3]


# A NonTensorStack of one string per batch element, beside a tensor leaf (batch [3]).
STRINGS = ["a", "b\u00e9", "c"]


def leaf(shape, dtype):
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        t = i % 3 == 0
    elif dtype.is_complex:
        t = torch.complex(((i % 97) - 20).double() / 4, i.double() / 2).to(dtype)
    elif dtype.is_floating_point:
        t = (((i % 97) - 20).double() / 4).to(dtype)
    elif dtype == torch.uint8:
        t = (i % 97).to(dtype)
    else:
        t = ((i % 97) - 20).to(dtype)
    return t.reshape(shape)


def rich(td_cls, exclude=()):
    td = td_cls({}, batch_size=BATCH)
    for key, dtype, feature in RICH_LEAVES:
        if key not in exclude:
            td.set(key, leaf(BATCH + feature, dtype))
    for key, value in RICH_NON_TENSORS:
        if key not in exclude:
            td.set_non_tensor(key, value)
    return td


def lazy(td_cls, lazy_cls):
    members = []
    for k, width in enumerate(LAZY_WIDTHS):
        member = td_cls({"obs": leaf([2, width], torch.float32), "id": leaf([2], torch.int64) + k}, batch_size=[2])
        member.set_non_tensor("label", f"m{k}")
        members.append(member)
    return lazy_cls(*members, stack_dim=0)


def strings(td_cls, stack_cls):
    td = td_cls({"x": leaf([3, 2], torch.float32)}, batch_size=[3])
    td["s"] = stack_cls.from_list(STRINGS)
    return td
