"""``sadl.save`` / ``sadl.load`` of nested objects, the PyTorch way but without pickle.

Nested dicts, lists and tuples of tensors, arrays, state dicts and plain Python values come back
with their types; anything else is a TypeError naming its key path; a flat dict of tensors keeps
the layout py-sadl 2.0.0 reads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize import SadlFormatError


def model_and_optimizer():
    model = sadl.nn.Module()
    model.w = sadl.Parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
    model.b = sadl.Parameter(np.zeros(3, dtype=np.float32))
    optimizer = sadl.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.9))
    (model.w.sum() + model.b.sum()).backward()
    optimizer.step()
    return model, optimizer


def test_a_checkpoint_dict_round_trips_with_its_types(tmp_path):
    model, optimizer = model_and_optimizer()
    obj = {
        "model": model.state_dict(),
        "opt": optimizer.state_dict(),
        "epoch": 3,
        "lr": 0.5,
        "name": "run-1",
        "done": False,
        "best": None,
        "shape": (2, 3),
        "history": [1.0, math.inf, (4, "x")],
        "array": np.arange(3, dtype=np.int16),
        "scalar": np.float32(1.5),
        "nested": {"a": [{"b": sadl.tensor([1.0, 2.0])}]},
        7: "an int key",
    }
    path = tmp_path / "ckpt.sadl"
    sadl.save(obj, path)
    back = sadl.load(path)
    assert list(back) == list(obj)
    assert back["epoch"] == 3 and type(back["epoch"]) is int
    assert back["lr"] == 0.5 and back["name"] == "run-1" and back["done"] is False
    assert back["best"] is None and back["shape"] == (2, 3) and type(back["shape"]) is tuple
    assert back["history"] == [1.0, math.inf, (4, "x")] and back[7] == "an int key"
    assert type(back["array"]) is np.ndarray and back["array"].dtype == np.int16
    assert type(back["scalar"]) is np.float32 and back["scalar"] == 1.5
    assert isinstance(back["nested"]["a"][0]["b"], sadl.Tensor)
    assert back["nested"]["a"][0]["b"].tolist() == [1.0, 2.0]
    restored, restored_opt = model_and_optimizer()
    restored.load_state_dict(back["model"])
    restored_opt.load_state_dict(back["opt"])
    np.testing.assert_array_equal(restored.w.numpy(), model.w.numpy())
    assert restored_opt.param_groups[0]["betas"] == (0.8, 0.9)
    saved_state, loaded_state = optimizer.state_dict()["state"], restored_opt.state_dict()["state"]
    assert set(saved_state) == set(loaded_state)  # int keys stay ints
    for index, moments in saved_state.items():
        for name, value in moments.items():
            np.testing.assert_array_equal(np.asarray(loaded_state[index][name]), np.asarray(value))


@pytest.mark.parametrize("obj", [[1, 2], (sadl.tensor(1.0), "a"), 3, "text", None, {}])
def test_any_root_round_trips(tmp_path, obj):
    path = tmp_path / "o.sadl"
    sadl.save(obj, path)
    back = sadl.load(path)
    assert type(back) is type(obj)
    if isinstance(obj, tuple):
        assert back[0].item() == 1.0 and back[1] == "a"
    else:
        assert back == obj


def test_a_flat_dict_of_tensors_keeps_the_py_sadl_layout(tmp_path):
    flat = {"w": np.ones((2, 2), np.float32), "b": sadl.tensor([1.0])}
    path = tmp_path / "flat.sadl"
    sadl.save(flat, path)
    assert [i.key for i in ss.read_index(path)] == ["w", "b"]  # no document entry
    assert ss.dumps(flat) == path.read_bytes()


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        ({"model": {"fn": lambda: 1}}, r"model\.fn \(function\)"),
        ({"a": [1, {"b": object()}]}, r"a\.1\.b \(object\)"),
        ((1, {2, 3}), r"1 \(set\)"),
        (object(), r"the object \(object\)"),
    ],
)
def test_anything_else_is_a_type_error_naming_its_key_path(tmp_path, obj, where):
    path = tmp_path / "bad.sadl"
    with pytest.raises(TypeError, match=rf"sadl.save: cannot store {where}.*never pickle"):
        sadl.save(obj, path)
    assert not path.exists()


def test_a_nested_object_is_a_plain_sadl_file_with_a_document(tmp_path):
    path = tmp_path / "o.sadl"
    sadl.save({"model": {"w": np.zeros(2)}, "epoch": 1}, path)
    entries = ss.load_entries(path)  # what py-sadl 2.0.0 reads: the entries as stored
    assert list(entries) == ["__object__", "model.w"]
    assert entries["__object__"].dtype == np.uint8


def test_no_single_bit_flip_anywhere_in_a_saved_object_loads(tmp_path):
    path = tmp_path / "o.sadl"
    sadl.save({"w": [np.arange(3, dtype=np.float32)], "step": (1, 2.5)}, path)
    raw = path.read_bytes()
    loaded = []
    for at in range(len(raw)):
        for bit in range(8):
            damaged = bytearray(raw)
            damaged[at] ^= 1 << bit
            try:
                back = ss.loads(bytes(damaged))
            except SadlFormatError:
                continue
            # The one change that is not a checked file: the document's key itself, which
            # makes it a plain file of entries, never the object (a dict of other keys).
            assert isinstance(back, dict) and "__object__" not in back and "w" not in back
            loaded.append(at)
    key_at = raw.index(b"__object__")
    assert set(loaded) <= set(range(key_at, key_at + 10))


def test_load_checkpoint_and_sadl_load_tell_the_two_documents_apart(tmp_path):
    path = tmp_path / "o.sadl"
    sadl.save({"epoch": 1}, path)
    with pytest.raises(SadlFormatError, match="saved with sadl.save: read it with sadl.load"):
        ss.load_checkpoint(path)
    ss.save_checkpoint(path, step=4)
    assert "__meta__" in sadl.load(path)  # a checkpoint stays a dict of its entries


def test_save_checkpoint_and_load_checkpoint_are_reachable_from_sadl(tmp_path):
    path = tmp_path / "c.sadl"
    model, optimizer = model_and_optimizer()
    sadl.save_checkpoint(path, model=model, optimizer=optimizer, step=5)
    fresh, fresh_opt = model_and_optimizer()
    assert sadl.load_checkpoint(path, model=fresh, optimizer=fresh_opt)["step"] == 5
    from sadl import load_checkpoint, save_checkpoint

    assert save_checkpoint is ss.save_checkpoint and load_checkpoint is ss.load_checkpoint
