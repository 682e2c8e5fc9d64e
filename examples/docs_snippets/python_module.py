"""The Python blocks of docs/python.md, run by CTest (docs_snippet_python) with the build's
tensordict_cpp and reach_env (examples/python_env) on PYTHONPATH."""
# docs/python.md#the-tensordict_cpp-module
import torch
import tensordict_cpp as tdc

obs = torch.randn(4, 3)
td = tdc.TensorDict({"obs": obs, "next": {"reward": torch.zeros(4)}, "label": "run"}, batch_size=[4])
assert td["obs"].data_ptr() == obs.data_ptr()   # the caller's tensor itself
td["next", "reward"]                             # nested keys as tuples
td[1:3], td[0], td[torch.tensor([3, 0])]         # batch indexing, as Python tensordict
d = td.to_dict()                                 # a nested dict of the very same tensors

# docs/python.md#generated-classes
import reach_env

env = reach_env.ReachEnv(num_envs=8)
step = env.reset()                          # a reach_env.EnvStep, built in C++
assert isinstance(step, reach_env.EnvStep) and step.batch_size == torch.Size([8])
step.obs                                    # float32 [8, 4], shared with C++, not copied
try:
    step.obs = torch.zeros(8, 5)            # the schema says [4]: refused as the C++ setter does
except RuntimeError as error:
    print(error)                            # EnvStep.obs: expected shape [8, 4] ...
later = env.step(torch.ones(8, dtype=torch.long))
history = reach_env.EnvStep.stack([step, later])   # batch [2, 8], still an EnvStep
assert history.reward.shape == (2, 8)
