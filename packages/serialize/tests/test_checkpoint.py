"""Checkpoints: a run resumed from a file follows the uninterrupted run bit for bit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize import SadlFormatError


class TinyNet(sadl.Module):
    """Two layers of plain Parameters and core ops."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.w1 = sadl.Parameter((rng.standard_normal((4, 16)) * 0.5).astype(np.float32))
        self.b1 = sadl.Parameter(np.zeros(16, np.float32))
        self.w2 = sadl.Parameter((rng.standard_normal((16, 1)) * 0.5).astype(np.float32))

    def forward(self, x):
        return (x @ self.w1 + self.b1).tanh() @ self.w2


class HalvingLR:
    """A minimal scheduler (sadl-optim is not a dependency): halves lr every ``every`` steps."""

    def __init__(self, optimizer, every: int = 3):
        self.optimizer = optimizer
        self.every = every
        self.count = 0

    def step(self):
        self.count += 1
        if self.count % self.every == 0:
            for group in self.optimizer.param_groups:
                group["lr"] *= 0.5

    def state_dict(self):
        return {"every": self.every, "count": self.count}

    def load_state_dict(self, state):
        self.every = state["every"]
        self.count = state["count"]


def _train(model, optimizer, scheduler, rng, steps):
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((32, 4)).astype(np.float32)
        y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
        noise = sadl.randn(32, 1, rng=rng) * 0.01  # draws from the same generator
        loss = ((model(sadl.tensor(x)) - sadl.tensor(y) + noise) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


OPTIMIZERS = {
    "adam": lambda params: sadl.Adam(params, lr=1e-2, betas=(0.8, 0.99), weight_decay=1e-4),
    "sgd": lambda params: sadl.SGD(params, lr=5e-2, momentum=0.9, nesterov=True),
}


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_resumed_training_follows_the_uninterrupted_run_exactly(tmp_path, opt):
    make = OPTIMIZERS[opt]
    # The reference: 12 steps without interruption.
    model = TinyNet(seed=0)
    optimizer = make(model.parameters())
    reference = _train(model, optimizer, HalvingLR(optimizer), np.random.default_rng(1), 12)
    final = {k: v.numpy().copy() for k, v in model.state_dict().items()}

    # The same run, stopped after 5 steps and written to a file.
    model = TinyNet(seed=0)
    optimizer = make(model.parameters())
    scheduler = HalvingLR(optimizer)
    rng = np.random.default_rng(1)
    first = _train(model, optimizer, scheduler, rng, 5)
    assert first == reference[:5]
    path = tmp_path / "ckpt.sadl"
    ss.save_checkpoint(
        path,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        step=5,
        rng=rng,
        extra={"losses": first, "config": {"opt": opt, "hidden": (16,)}},
    )
    del model, optimizer, scheduler, rng

    # A fresh process state: other weights, other lr, other random stream - all overwritten.
    model = TinyNet(seed=99)
    optimizer = make(model.parameters())
    for group in optimizer.param_groups:
        group["lr"] = 123.0
    scheduler = HalvingLR(optimizer, every=100)
    rng = np.random.default_rng(12345)
    info = ss.load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler, rng=rng)
    assert info["step"] == 5
    assert info["extra"] == {"losses": first, "config": {"opt": opt, "hidden": (16,)}}
    rest = _train(model, optimizer, scheduler, rng, 7)

    assert first + rest == reference  # exact float equality, step for step
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), final[key])


def test_the_checkpoint_is_one_sadl_file_of_tensors_and_json(tmp_path):
    model = TinyNet(seed=0)
    optimizer = sadl.Adam(model.parameters(), lr=1e-3)
    _train(model, optimizer, HalvingLR(optimizer), np.random.default_rng(0), 2)
    path = tmp_path / "c.sadl"
    ss.save_checkpoint(path, model=model, optimizer=optimizer, step=2)
    entries = sadl.load(path)
    assert list(entries)[:4] == ["__meta__", "model.w1", "model.b1", "model.w2"]
    assert "optimizer.state.0.exp_avg" in entries
    meta = json.loads(entries["__meta__"].numpy().tobytes())
    assert meta["format"] == "sadl-checkpoint" and meta["step"] == 2
    assert meta["optimizer"]["param_groups"][0]["betas"] == {"__tuple__": [0.9, 0.999]}
    assert b"pickle" not in path.read_bytes()


def test_optimizer_state_round_trips_with_exact_types(tmp_path):
    model = TinyNet(seed=3)
    optimizer = sadl.Adam(model.parameters(), lr=1e-3, amsgrad=True)
    _train(model, optimizer, HalvingLR(optimizer), np.random.default_rng(0), 3)
    path = tmp_path / "o.sadl"
    ss.save_checkpoint(path, optimizer=optimizer)
    saved = optimizer.state_dict()
    restored = ss.load_checkpoint(path)["optimizer"]
    assert restored["param_groups"] == saved["param_groups"]
    assert type(restored["param_groups"][0]["betas"]) is tuple
    assert sorted(restored["state"]) == sorted(saved["state"])
    for index, state in saved["state"].items():
        for key, value in state.items():
            got = restored["state"][index][key]
            assert type(got) is type(value), key
            np.testing.assert_array_equal(got, value)


def test_extra_values_keep_their_types(tmp_path):
    extra = {
        "int": 3,
        "big": 2**70,
        "float": 0.1,
        "neg_zero": -0.0,
        "nan": math.nan,
        "inf": -math.inf,
        "none": None,
        "bool": True,
        "text": "größe 🙂",
        "tuple": (1, (2.5, "x")),
        "list": [1, [2, {"a": None}]],
        "int_keys": {0: "a", 1: "b"},
        "tuple_keys": {(1, 2): "pair"},
        "tag_like": {"__tuple__": [1], "__tensor__": "not a tensor"},
        "array": np.arange(3, dtype=np.int16),
        "tensor": sadl.tensor([1.0, 2.0]),
        "np_scalar": np.float32(1.25),
        "np_key": {np.int64(7): "seven"},
    }
    path = tmp_path / "e.sadl"
    ss.save_checkpoint(path, extra=extra, step=np.int64(4))
    info = ss.load_checkpoint(path)
    got = info["extra"]
    assert info["step"] == 4 and type(info["step"]) is int
    for key in ("int", "big", "float", "none", "bool", "text", "tuple", "list", "int_keys"):
        assert got[key] == extra[key] and type(got[key]) is type(extra[key]), key
    assert math.copysign(1, got["neg_zero"]) == -1
    assert math.isnan(got["nan"]) and got["inf"] == -math.inf
    assert got["tuple_keys"] == {(1, 2): "pair"}
    assert got["tag_like"] == extra["tag_like"]
    assert isinstance(got["array"], np.ndarray) and got["array"].dtype == np.int16
    np.testing.assert_array_equal(got["array"], [0, 1, 2])
    assert isinstance(got["tensor"], sadl.Tensor)
    assert type(got["np_scalar"]) is np.float32 and got["np_scalar"] == np.float32(1.25)
    assert got["np_key"] == {7: "seven"}


def test_other_bit_generators_and_the_default_generator(tmp_path):
    path = tmp_path / "r.sadl"
    mt = np.random.Generator(np.random.MT19937(5))
    mt.random(3)
    ss.save_checkpoint(path, rng=mt)
    expected = mt.random(4)
    fresh = np.random.Generator(np.random.MT19937(0))
    ss.load_checkpoint(path, rng=fresh)
    np.testing.assert_array_equal(fresh.random(4), expected)
    with pytest.raises(ValueError, match="cannot restore the MT19937 state"):
        ss.load_checkpoint(path, rng=np.random.default_rng())

    sadl.manual_seed(7)
    ss.save_checkpoint(path, rng=sadl.default_generator())
    expected = sadl.randn(3).numpy()
    ss.load_checkpoint(path, rng=sadl.default_generator())
    np.testing.assert_array_equal(sadl.randn(3).numpy(), expected)


def test_errors_name_what_is_wrong(tmp_path):
    path = tmp_path / "x.sadl"
    with pytest.raises(TypeError, match=r"cannot store extra.fn \(function\).*never pickle"):
        ss.save_checkpoint(path, extra={"fn": lambda: None})
    with pytest.raises(TypeError, match="state_dict"):
        ss.save_checkpoint(path, model=object())
    with pytest.raises(TypeError, match="step must be an int"):
        ss.save_checkpoint(path, step=1.5)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        ss.save_checkpoint(path, rng=np.random.RandomState(0))
    with pytest.raises(TypeError, match="array or Tensor as a dict key"):
        ss.save_checkpoint(path, extra={sadl.tensor(1.0): 1})
    assert not path.exists()

    ss.save_checkpoint(path, step=1)
    with pytest.raises(ValueError, match="holds no model state"):
        ss.load_checkpoint(path, model=TinyNet(0))
    with pytest.raises(ValueError, match="holds no rng state"):
        ss.load_checkpoint(path, rng=np.random.default_rng())
    ss.save_checkpoint(path, scheduler={"a": 1})  # a plain state dict is accepted too
    assert ss.load_checkpoint(path)["scheduler"] == {"a": 1}
    with pytest.raises(TypeError, match="needs an object with load_state_dict"):
        ss.load_checkpoint(path, scheduler=object())

    plain = tmp_path / "plain.sadl"
    sadl.save({"w": np.ones(2)}, plain)
    with pytest.raises(SadlFormatError, match="invalid sadl checkpoint file: it has no"):
        ss.load_checkpoint(plain)
    sadl.save({"__meta__": np.frombuffer(b"{not json", np.uint8)}, plain)
    with pytest.raises(SadlFormatError, match="not valid JSON"):
        ss.load_checkpoint(plain)
    doc = json.dumps({"format": "sadl-checkpoint", "version": 9}).encode()
    sadl.save({"__meta__": np.frombuffer(doc, np.uint8)}, plain)
    with pytest.raises(SadlFormatError, match="version 9 is not supported"):
        ss.load_checkpoint(plain)
    doc = json.dumps(
        {
            "format": "sadl-checkpoint",
            "version": 1,
            "extra": {"__tensor__": "gone", "type": "array"},
        }
    ).encode()
    sadl.save({"__meta__": np.frombuffer(doc, np.uint8)}, plain)
    with pytest.raises(SadlFormatError, match="corrupt checkpoint metadata"):
        ss.load_checkpoint(plain)


def test_model_strictness_is_passed_through(tmp_path):
    path = tmp_path / "m.sadl"
    ss.save_checkpoint(path, model={"w1": np.zeros((4, 16), np.float32)})
    with pytest.raises(KeyError, match="missing keys"):
        ss.load_checkpoint(path, model=TinyNet(0))
    model = TinyNet(0)
    ss.load_checkpoint(path, model=model, strict=False)
    assert float(np.abs(model.w1.numpy()).sum()) == 0.0
