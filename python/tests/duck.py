"""An object with Python tensordict's interface (batch_size, keys, get), for the tests: what
from_tensordict and the caster accept without importing tensordict."""
import torch


class DuckTensorDict:
    def __init__(self, leaves, batch_size):
        self.leaves, self.batch_size = leaves, torch.Size(batch_size)

    def keys(self, include_nested=False, leaves_only=False):
        return list(self.leaves)

    def get(self, key):
        return self.leaves[key]
