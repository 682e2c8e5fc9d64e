"""<tensordict/python/caster.h> in a user's own pybind11 module (caster_module.cpp): it accepts a
tensordict_cpp.TensorDict, a dict or a tensordict-like object, shares their tensors, and returns
a tensordict_cpp.TensorDict."""
import torch

import tensordict_caster_test as user
import tensordict_cpp as tdc
from duck import DuckTensorDict


def test_caster_takes_every_kind_and_shares_tensors():
    obs = torch.randn(4, 3)
    td = tdc.TensorDict({"obs": obs}, batch_size=[4])
    assert user.obs_ptr(td) == obs.data_ptr()
    assert user.obs_ptr({"obs": obs}) == obs.data_ptr()  # a dict: batch size []
    assert user.batch({"obs": obs}) == []
    assert user.obs_ptr(DuckTensorDict({"obs": obs}, [4])) == obs.data_ptr()
    assert user.batch(DuckTensorDict({"obs": obs}, [4])) == [4]
    out = user.scaled(td, 2.0)
    assert isinstance(out, tdc.TensorDict)
    assert torch.equal(out["obs"], obs * 2)
