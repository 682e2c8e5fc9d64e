"""Writes the fixtures of tests/data/python-tensordict/v0.14 with Python tensordict v0.14
(tests/interop/README.md says how it is run). Usage:

    write_v014_fixtures.py OUT_DIR REDIS_SOCKET

OUT_DIR gets memmap_rich/, memmap_lazy/ and memmap_strings/ (TensorDict.memmap), consolidated_rich.bin
(consolidate(filename=)), h5_rich.h5 (to_h5) and store_rich.rdb: the server at REDIS_SOCKET
after TensorDictStore.from_dict(td_id="v014-rich"), saved with SAVE.
"""
import json
import os
import shutil
import sys

import redis
import tensordict
import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict
from tensordict.store import TensorDictStore

sys.path.insert(0, os.path.dirname(__file__))
import v014_spec  # noqa: E402


def main(out, socket):
    os.makedirs(out, exist_ok=True)
    rich = v014_spec.rich(TensorDict)
    rich.memmap(os.path.join(out, "memmap_rich"))
    v014_spec.lazy(TensorDict, LazyStackedTensorDict).memmap(os.path.join(out, "memmap_lazy"))
    v014_spec.strings(TensorDict, NonTensorStack).memmap(os.path.join(out, "memmap_strings"))
    rich.consolidate(filename=os.path.join(out, "consolidated_rich.bin"))
    v014_spec.rich(TensorDict, exclude=v014_spec.H5_EXCLUDED).to_h5(os.path.join(out, "h5_rich.h5"))

    client = redis.Redis(unix_socket_path=socket)
    client.flushall()
    stored = v014_spec.rich(TensorDict, exclude=v014_spec.STORE_EXCLUDED)
    TensorDictStore.from_dict(stored, unix_socket_path=socket, td_id="v014-rich")
    client.save()
    directory = client.config_get("dir")["dir"]
    filename = client.config_get("dbfilename")["dbfilename"]
    shutil.copy(os.path.join(directory, filename), os.path.join(out, "store_rich.rdb"))

    with open(os.path.join(out, "written_by.json"), "w") as f:
        json.dump({"tensordict": tensordict.__version__, "torch": torch.__version__,
                   "redis_server": client.info("server")["redis_version"]}, f, indent=1)
    print("wrote", sorted(os.listdir(out)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
