"""Generated classes in Python (tensordict_generate PYTHON): schemas/observation.yaml and
schemas/rl_transition.yaml bound as tensordict_typed_test. Every check a C++ setter runs runs on
the Python property; indexing, clone and from_tensordict keep the class; tensors are shared."""
import pytest
import torch

import tensordict_cpp as tdc
import tensordict_typed_test as rl
from duck import DuckTensorDict
from memory import rss_kib


def observation(n=4, **extra):
    return rl.Observation(pixels=torch.zeros(n, 84, 84, 3, dtype=torch.uint8), state=torch.randn(n, 7),
                          batch_size=[n], **extra)


def transition(n=4):
    return rl.Transition(done=torch.zeros(n, dtype=torch.bool), step_count=torch.arange(n),
                         obs=observation(n), action=torch.randn(n, 4), reward=torch.ones(n), batch_size=[n])


def test_fields_are_the_callers_tensors():
    state = torch.randn(4, 7)
    obs = rl.Observation(pixels=torch.zeros(4, 84, 84, 3, dtype=torch.uint8), state=state, label="cam",
                         batch_size=[4])
    assert obs.state.data_ptr() == state.data_ptr()
    assert obs.label == "cam"
    assert obs.batch_size == torch.Size([4]) and len(obs) == 4
    assert obs.tensordict["state"].data_ptr() == state.data_ptr()   # the shared TensorDict
    new_state = torch.zeros(4, 7)
    obs.state = new_state
    assert obs.state.data_ptr() == new_state.data_ptr()


def test_setters_check_like_cpp():
    obs = observation()
    with pytest.raises(TypeError, match=r"Observation\.state.*float32"):
        obs.state = torch.zeros(4, 7, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"Observation\.pixels: expected shape"):
        obs.pixels = torch.zeros(4, 84, 84, 4, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match=r"Observation\.state"):
        obs.state = torch.zeros(5, 7)   # batch dims
    with pytest.raises(TypeError, match=r"Observation\.label"):
        obs.label = 3                    # a string field
    with pytest.raises(TypeError, match=r"Observation\.state: expected a tensor"):
        obs.state = "not a tensor"
    with pytest.raises(AttributeError):
        obs.undeclared = torch.zeros(4)
    with pytest.raises(AttributeError, match="no nested field 'state'"):
        obs["state", "x"] = torch.zeros(4)   # a TensorClass holds only its fields
    assert obs.state.dtype == torch.float32  # nothing written by the refused sets


def test_constructor_checks():
    with pytest.raises(TypeError, match="pixels"):
        rl.Observation(state=torch.randn(4, 7), batch_size=[4])             # a required field missing
    with pytest.raises((TypeError, AttributeError), match="colour"):
        observation(colour=torch.zeros(4))                                 # an undeclared one
    assert observation(label=None).label is None                           # optional, not set


def test_repr_names_the_class():
    text = repr(observation())
    assert text.startswith("Observation(") and "batch_size=torch.Size([4])" in text
    assert repr(transition()).startswith("Transition(")
    assert "obs: Observation(" in repr(transition())   # the nested field as its class


def test_typed_tensordict_is_a_tensordict_and_nests_the_class():
    t = transition()
    assert isinstance(t, rl.Transition) and isinstance(t, rl.Step) and isinstance(t, tdc.TensorDict)
    assert isinstance(t.obs, rl.Observation)
    assert t.obs.state.data_ptr() == t["obs", "state"].data_ptr()
    assert t.keys() == ["done", "step_count", "obs", "action", "reward"]
    with pytest.raises(TypeError, match=r"Transition\.reward.*float32"):
        t.reward = torch.ones(4, dtype=torch.int64)
    # A nested value is checked against its class, which C++ gets from the type system.
    with pytest.raises(RuntimeError, match=r"Observation\.pixels"):
        t.obs = tdc.TensorDict({"pixels": torch.zeros(4, 2), "state": torch.zeros(4, 7)}, batch_size=[4])
    t.obs = observation()   # the right class passes
    t["extra"] = torch.zeros(4)   # a TypedTensorDict takes undeclared keys as Python's does
    assert "extra" in t
    t["obs", "state"] = torch.ones(4, 7)   # a nested key writes the nested level, not "obs"
    assert isinstance(t.obs, rl.Observation) and torch.equal(t.obs.state, torch.ones(4, 7))


def test_indexing_clone_and_stack_keep_the_class():
    t = transition()
    part = t[1:3]
    assert isinstance(part, rl.Transition) and part.batch_size == torch.Size([2])
    assert isinstance(t[0].obs, rl.Observation)
    assert isinstance(t.clone(), rl.Transition)
    assert t.clone().action.data_ptr() != t.action.data_ptr()
    rows = t.unbind(0)
    assert len(rows) == 4 and all(isinstance(r, rl.Transition) for r in rows)
    stacked = rl.Transition.stack(rows)
    assert isinstance(stacked, rl.Transition) and torch.equal(stacked.action, t.action)
    t[0] = t[3]
    assert torch.equal(t.action[0], t.action[3])


def test_from_tensordict_wraps_live_and_checks():
    source = tdc.TensorDict({"pixels": torch.zeros(2, 84, 84, 3, dtype=torch.uint8),
                             "state": torch.randn(2, 7)}, batch_size=[2])
    obs = rl.Observation.from_tensordict(source)
    assert obs.state.data_ptr() == source["state"].data_ptr()
    obs.state = torch.ones(2, 7)
    assert torch.equal(source["state"], torch.ones(2, 7))   # live: the write reached the source
    with pytest.raises(ValueError, match="extra"):
        rl.Observation.from_tensordict(tdc.TensorDict({"extra": torch.zeros(2)}, batch_size=[2]))
    with pytest.raises(TypeError, match=r"Observation\.state"):
        rl.Observation.from_tensordict({"state": torch.zeros(7, dtype=torch.int32)})
    duck = DuckTensorDict({"state": torch.randn(3, 7)}, [3])    # a Python tensordict's interface
    assert rl.Observation.from_tensordict(duck).state.data_ptr() == duck.leaves["state"].data_ptr()


def test_memmap_round_trip(tmp_path):
    t = transition()
    saved = t.memmap(str(tmp_path / "t"))
    assert isinstance(saved, rl.Transition)
    loaded = rl.Transition.load_memmap(str(tmp_path / "t"))
    assert isinstance(loaded.obs, rl.Observation) and torch.equal(loaded.reward, t.reward)
    with pytest.raises(Exception, match="Transition"):
        rl.Transition.load_memmap(str(tmp_path / "t" / "obs"))    # an Observation is no Transition


def test_typed_conversions_do_not_leak():
    # 10,000 wraps, field reads and nested reads keep the process's memory flat.
    t = transition()
    source = t.tensordict

    def round_trip():
        wrapped = rl.Transition.from_tensordict(source)
        return wrapped.obs.state, wrapped.reward, wrapped[1]

    for _ in range(1000):   # warm-up: allocator pools, import caches
        round_trip()
    before = rss_kib()
    for _ in range(10000):
        round_trip()
    assert rss_kib() - before < 2048
