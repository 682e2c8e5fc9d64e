"""tensordict_cpp from Python (issue 32, first part): construction from dicts, keys, indexing,
zero-copy both ways, and errors as Python tensordict's exception kinds. Run by CTest
(python_tests) with Debian's python3-pytest."""

import pytest
import torch

import tensordict_cpp as tdc
from duck import DuckTensorDict
from memory import rss_kib


def sample():
    return tdc.TensorDict({"obs": torch.arange(12.0).reshape(4, 3), "next": {"reward": torch.zeros(4)},
                           "label": "episode"}, batch_size=[4])


def test_keys_batch_size_and_repr():
    td = sample()
    assert td.batch_size == torch.Size([4])
    assert td.keys() == ["obs", "next", "label"]
    assert td.keys(include_nested=True, leaves_only=True) == ["obs", ("next", "reward")]  # tensor leaves
    assert ("next", "reward") in td and "missing" not in td
    assert td["label"] == "episode"
    assert "TensorDict(" in repr(td) and "batch_size=torch.Size([4])" in repr(td)


def test_zero_copy_both_ways():
    obs = torch.randn(4, 3)
    td = tdc.TensorDict.from_dict({"obs": obs, "n": {"x": torch.ones(4)}}, batch_size=[4])
    assert td["obs"].data_ptr() == obs.data_ptr()
    back = td.to_dict()
    assert back["obs"].data_ptr() == obs.data_ptr()
    assert back["n"]["x"].data_ptr() == td["n", "x"].data_ptr()
    td["obs"].add_(1)  # a write through one side is seen by the other
    assert torch.equal(obs, back["obs"])


def test_indexing_and_writes():
    td = sample()
    assert torch.equal(td[1]["obs"], torch.tensor([3.0, 4.0, 5.0]))
    assert td[1:3].batch_size == torch.Size([2])
    assert td[torch.tensor([True, False, True, False])].batch_size == torch.Size([2])
    assert td[torch.tensor([3, 0])]["obs"][0, 0].item() == 9.0
    td["new"] = torch.ones(4, 2)
    td[0] = tdc.TensorDict({"obs": torch.full((3,), 7.0), "new": torch.zeros(2)}, batch_size=[])
    assert td["obs"][0].tolist() == [7.0, 7.0, 7.0]
    assert td["new"].sum().item() == 6.0
    view = td[2]
    view["obs"].zero_()  # an int index gives views, as in Python tensordict
    assert td["obs"][2].sum().item() == 0.0


def test_errors_are_python_tensordicts_kinds():
    td = sample()
    with pytest.raises(KeyError, match="missing"):
        td["missing"]
    with pytest.raises(IndexError):
        td[7]
    with pytest.raises(RuntimeError):
        td["bad"] = torch.zeros(5)
    with pytest.raises(TypeError):
        td[1.5]


def test_conversions_do_not_leak():
    # 10,000 round trips through C++ keep the process's memory flat (reference counts balance).
    td = sample()
    for _ in range(1000):  # warm-up: allocator pools, import caches
        tdc.TensorDict.from_dict(td.to_dict(), batch_size=[4])
    before = rss_kib()
    for _ in range(10000):
        tdc.TensorDict.from_dict(td.to_dict(), batch_size=[4])
    assert rss_kib() - before < 2048


def test_shape_ops_arithmetic_and_locking():
    td = sample()
    stacked = tdc.stack([td, td], 0)
    assert stacked.batch_size == torch.Size([2, 4])
    assert tdc.cat([td, td], 0).batch_size == torch.Size([8])
    lazy = tdc.lazy_stack([td, td[0:2]], 0)
    assert lazy.batch_size == torch.Size([2, -1])
    parts = td.unbind(0)
    assert len(parts) == 4 and parts[3]["obs"].tolist() == [9.0, 10.0, 11.0]
    doubled = td * 2.0
    assert torch.equal(doubled["obs"], td["obs"] * 2)
    assert torch.equal((td + td)["next", "reward"], torch.zeros(4))
    assert td.to(torch.float64)["obs"].dtype == torch.float64
    assert [k for k, _ in td.items()] == ["obs", "next", "label"]
    td.lock_()
    assert td.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["x"] = torch.zeros(4)
    td.unlock_()


def test_every_arithmetic_operator_and_comparison():
    a = tdc.TensorDict({"x": torch.tensor([1.0, 2.0, 3.0]), "n": {"i": torch.tensor([1, 2, 3])}}, batch_size=[3])
    x, i = a["x"], a["n", "i"]
    assert torch.equal((a - 1)["x"], x - 1) and torch.equal((1 - a)["x"], 1 - x)
    assert torch.equal((a / 2)["x"], x / 2) and torch.equal((6 / a)["x"], 6 / x)
    assert torch.equal((a + a)["x"], x + x) and torch.equal((a - a)["x"], torch.zeros(3))
    assert torch.equal((2 * a)["x"], 2 * x) and torch.equal((a * torch.tensor(3.0))["x"], x * 3)
    assert torch.equal((-a)["x"], -x)
    assert (a * 2)["n", "i"].dtype == torch.int64          # an int keeps integer leaves integer
    assert torch.equal((a == a)["x"], torch.ones(3, dtype=torch.bool))
    assert torch.equal((a > 2)["x"], x > 2) and torch.equal((a <= 2)["n", "i"], i <= 2)
    assert torch.equal((a != a * 2)["x"], torch.ones(3, dtype=torch.bool))
    assert torch.equal((a < a + 1)["x"], torch.ones(3, dtype=torch.bool)) and not (a >= a + 1)["x"].any()
    b = tdc.TensorDict({"x": x}, batch_size=[3])
    before = b
    b += 1
    b *= 2
    b -= 2
    b /= 2
    assert b is before and b["x"].data_ptr() == x.data_ptr()   # in place, the same object and storage
    assert torch.equal(x, torch.tensor([1.0, 2.0, 3.0]))


def test_device_clone_contiguous_values():
    td = sample()
    assert td.device is None and td.batch_dims == 1
    on_cpu = tdc.TensorDict({"x": torch.zeros(2)}, batch_size=[2], device="cpu")
    assert on_cpu.device == torch.device("cpu") and td.to("cpu").device == torch.device("cpu")
    copy = td.clone()
    assert copy["obs"].data_ptr() != td["obs"].data_ptr() and torch.equal(copy["obs"], td["obs"])
    transposed = tdc.TensorDict({"x": torch.zeros(3, 2).t()}, batch_size=[2])
    assert not transposed["x"].is_contiguous() and transposed.contiguous()["x"].is_contiguous()
    values = td.values()
    assert len(values) == 3 and values[0].data_ptr() == td["obs"].data_ptr() and values[2] == "episode"


def test_structure_methods():
    td = sample()
    z = td.new_zeros(2, 5)
    assert z.batch_size == torch.Size([2, 5]) and z["obs"].shape == (2, 5, 3) and not z["obs"].any()
    assert td.new_ones([2])["next", "reward"].shape == (2,) and td.new_full([1], 7.0)["obs"].eq(7).all()
    assert td.dtype == torch.float32 and td.depth == 1 and td.sorted_keys == ["label", "next", "obs"]
    assert td.is_contiguous() and not td.is_shared()
    assert td.filter_non_tensor_data().keys() == ["obs", "next"]
    key, value = td.popitem()
    assert key == "label" and value == "episode" and "label" not in td
    td.share_memory_()
    assert td.is_shared() and td.is_locked
    td.unlock_()
    td.clear()
    assert td.keys() == [] and td.batch_size == torch.Size([4])


def test_memmap_round_trip(tmp_path):
    td = tdc.TensorDict({"obs": torch.arange(8.0).reshape(4, 2), "n": {"r": torch.ones(4)}}, batch_size=[4])
    mapped = td.memmap(str(tmp_path / "buf"))
    assert mapped.is_locked
    back = tdc.load_memmap(str(tmp_path / "buf"))
    assert torch.equal(back["obs"], td["obs"]) and torch.equal(back["n", "r"], torch.ones(4))


def test_from_tensordict_shares_any_tensordict_like_object():
    obs, reward = torch.randn(3, 2), torch.zeros(3)
    duck = DuckTensorDict({"obs": obs, ("next", "reward"): reward}, [3])
    td = tdc.TensorDict.from_tensordict(duck)
    assert td.batch_size == torch.Size([3])
    assert td["obs"].data_ptr() == obs.data_ptr()
    assert td["next", "reward"].data_ptr() == reward.data_ptr()
    out = td.to_tensordict()  # tensordict is not installed here: a nested dict of the same tensors
    assert out["next"]["reward"].data_ptr() == reward.data_ptr()


def test_memmap_releases_the_gil(tmp_path):
    import threading

    counter, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    td = tdc.TensorDict({"big": torch.ones(64, 1 << 20)}, batch_size=[64])  # 256 MiB
    thread = threading.Thread(target=count)
    thread.start()
    before = counter[0]
    td.memmap(str(tmp_path / "big"))
    during = counter[0] - before
    stop.set()
    thread.join()
    assert during > 1000  # the counting thread ran while C++ wrote the files


@pytest.mark.skipif(not hasattr(tdc, "from_h5"), reason="built without HDF5")
def test_h5_round_trip(tmp_path):
    td = tdc.TensorDict({"obs": torch.arange(6.0).reshape(3, 2), "n": {"r": torch.ones(3)}}, batch_size=[3])
    path = str(tmp_path / "td.h5")
    tdc.close_h5(tdc.to_h5(td, path))
    with pytest.raises(RuntimeError, match="already exists"):
        tdc.to_h5(td, path)
    back = tdc.from_h5(path)
    assert torch.equal(back["obs"], td["obs"]) and torch.equal(back["n", "r"], torch.ones(3))
    assert torch.equal(back[1]["obs"], torch.tensor([2.0, 3.0]))


def _redis_answers(sock_path):
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            s.connect(sock_path)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis_socket(tmp_path):
    import shutil
    import subprocess
    import time

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    sock = str(tmp_path / "redis.sock")
    proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL)
    try:
        # Ready when it answers PING: the socket file appears at bind(), before listen(), and a
        # connect in between is refused.
        deadline = time.monotonic() + 10
        while not _redis_answers(sock):
            if proc.poll() is not None:
                pytest.fail(f"redis-server exited with {proc.returncode} before it listened on {sock}")
            if time.monotonic() > deadline:
                pytest.fail(f"redis-server did not answer PING on {sock} within 10 s")
            time.sleep(0.01)
        yield sock
    finally:
        proc.terminate()
        proc.wait()


@pytest.mark.skipif(not hasattr(tdc, "from_store"), reason="built without hiredis")
def test_store_writes_are_live(redis_socket):
    td = tdc.TensorDict({"obs": torch.zeros(4, 2), "label": "run"}, batch_size=[4])
    store = tdc.store_from_tensordict(td, unix_socket=redis_socket, td_id="buffer")
    other = tdc.from_store("buffer", unix_socket=redis_socket)
    store[1] = tdc.TensorDict({"obs": torch.ones(2)}, batch_size=[])
    assert other["obs"].sum().item() == 2.0
    assert tdc.store_id(other) == "buffer"
    with pytest.raises(RuntimeError, match="already exists"):
        tdc.store_from_tensordict(td, unix_socket=redis_socket, td_id="buffer")
    with pytest.raises(KeyError):
        tdc.from_store("nothing", unix_socket=redis_socket)
