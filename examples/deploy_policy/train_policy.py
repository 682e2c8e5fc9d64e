"""Trains a small policy over Dict[str, Tensor] in Python and saves it as TorchScript, for
deploy_policy.cpp to run from C++.

Usage: train_policy.py OUT_DIR (Debian's /usr/bin/python3 with python3-torch). Writes
OUT_DIR/policy.pt. The policy reads "obs.state" (a point mass: position 2, velocity 2) and
returns {"action": [n, 2] in [-1, 1], "value": [n]}; it is trained a few hundred steps on
synthetic states to imitate a damped spring controller, action = tanh(-pos - vel).
"""
import sys
from typing import Dict

import torch
from torch import Tensor, nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
        self.action = nn.Linear(32, 2)
        self.value = nn.Linear(32, 1)

    def forward(self, td: Dict[str, Tensor]) -> Dict[str, Tensor]:
        h = self.body(td["obs.state"])
        return {"action": torch.tanh(self.action(h)), "value": self.value(h).squeeze(-1)}


def main(out):
    torch.manual_seed(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for step in range(300):
        state = torch.randn(256, 4)
        target = torch.tanh(-state[:, :2] - state[:, 2:])
        out_td = policy({"obs.state": state})
        loss = (out_td["action"] - target).pow(2).mean() + out_td["value"].pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in (0, 299):
            print(f"train_policy: step {step} loss {loss.item():.4f}")
    torch.jit.save(torch.jit.script(policy), f"{out}/policy.pt")


if __name__ == "__main__":
    main(sys.argv[1])
