"""Reads the rollout deploy_policy.cpp stored as a memory-mapped directory (Python tensordict's
v0.14 layout: meta.json plus one raw .memmap file per leaf) and checks that Python's policy
computes the actions and values C++ recorded, to 1e-6.

Usage: check_rollout.py OUT_DIR (Debian's /usr/bin/python3 with python3-torch and numpy).
"""
import json
import os
import sys

import numpy as np
import torch

DTYPES = {"torch.float32": np.float32, "torch.int64": np.int64, "torch.bool": np.bool_}


def load(path):
    """The directory's leaves as {nested key tuple: numpy array}, read without tensordict."""
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    out = {}
    for key, entry in meta.items():
        if key in ("shape", "device", "_type") or not isinstance(entry, dict):
            continue
        if "dtype" in entry:
            data = np.fromfile(os.path.join(path, key + ".memmap"), dtype=DTYPES[entry["dtype"]])
            out[(key,)] = data.reshape(entry["shape"])
        elif os.path.isdir(os.path.join(path, key)):
            for sub, value in load(os.path.join(path, key)).items():
                out[(key,) + sub] = value
    return out


def main(out):
    rollout = load(os.path.join(out, "rollout"))
    state = torch.from_numpy(rollout[("obs", "state")].copy())
    steps, envs = state.shape[:2]
    policy = torch.jit.load(os.path.join(out, "policy.pt"))
    with torch.no_grad():
        expected = policy({"obs.state": state.reshape(-1, 4)})
    diff_action = (torch.from_numpy(rollout[("action",)].copy()).reshape(-1, 2) - expected["action"]).abs().max()
    diff_value = (torch.from_numpy(rollout[("value",)].copy()).reshape(-1) - expected["value"]).abs().max()
    reward = rollout[("reward",)]
    print(f"check_rollout: {steps} steps x {envs} envs; max |C++ - Python|: action {diff_action:.2e}, "
          f"value {diff_value:.2e}; mean reward first step {reward[0].mean():.3f}, last {reward[-1].mean():.3f}")
    if diff_action > 1e-6 or diff_value > 1e-6:
        sys.exit("check_rollout: C++ and Python disagree by more than 1e-6")
    if not reward[-1].mean() > reward[0].mean():
        sys.exit("check_rollout: the trained policy did not bring the masses closer to the origin")


if __name__ == "__main__":
    main(sys.argv[1])
