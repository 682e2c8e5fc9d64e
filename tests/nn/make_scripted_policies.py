"""Writes the TorchScript modules script_test.cpp loads, and what Python computes with them.

Usage: make_scripted_policies.py OUT_DIR (Debian's /usr/bin/python3 with python3-torch).
  positional.pt  forward(x, y) -> (linear(x) + y.sum(-1, keepdim=True), tanh(x))
  dict_policy.pt forward(Dict[str, Tensor]) -> Dict[str, Tensor] over "obs.state"
  fixture.pt     the inputs and Python's outputs, as attributes of a scripted module
"""
import sys
from typing import Dict, Tuple

import torch
from torch import Tensor, nn


class Positional(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        return self.linear(x) + y.sum(-1, keepdim=True), torch.tanh(x)


class DictPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
        self.action = nn.Linear(16, 2)
        self.value = nn.Linear(16, 1)

    def forward(self, td: Dict[str, Tensor]) -> Dict[str, Tensor]:
        h = self.body(td["obs.state"])
        return {"action": torch.tanh(self.action(h)), "value": self.value(h).squeeze(-1)}


class Fixture(nn.Module):
    def __init__(self, tensors: Dict[str, Tensor]):
        super().__init__()
        for name, t in tensors.items():
            self.register_buffer(name, t)


def main(out):
    torch.manual_seed(0)
    positional, policy = Positional(), DictPolicy()
    x, y, state = torch.randn(5, 4), torch.randn(5, 3), torch.randn(5, 4)
    with torch.no_grad():
        p0, p1 = positional(x, y)
        out_td = policy({"obs.state": state})
    torch.jit.save(torch.jit.script(positional), f"{out}/positional.pt")
    torch.jit.save(torch.jit.script(policy), f"{out}/dict_policy.pt")
    tensors = {"x": x, "y": y, "state": state, "p0": p0, "p1": p1, "action": out_td["action"],
               "value": out_td["value"]}
    torch.jit.save(torch.jit.script(Fixture(tensors)), f"{out}/fixture.pt")


if __name__ == "__main__":
    main(sys.argv[1])
