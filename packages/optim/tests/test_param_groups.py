"""param_groups_for_weight_decay: decay for matrices, none for biases and norm weights."""

import numpy as np
import pytest
import sadl
from sadl_optim import AdamW, Lion, param_groups_for_weight_decay


class Block(sadl.Module):
    def __init__(self):
        self.embedding = sadl.Parameter(np.ones((10, 4)))
        self.weight = sadl.Parameter(np.ones((3, 4)))
        self.bias = sadl.Parameter(np.zeros(3))
        self.norm = {"weight": sadl.Parameter(np.ones(4)), "bias": sadl.Parameter(np.zeros(4))}
        self.kernel = sadl.Parameter(np.ones((2, 1, 3, 3)))
        self.scale = sadl.Parameter(np.array(1.0))


class Tied(sadl.Module):
    def __init__(self):
        self.block = Block()
        self.head = [self.block.embedding]  # shared with block.embedding


def names(groups, model):
    by_id = {id(p): n for n, p in model.named_parameters()}
    return [sorted(by_id[id(p)] for p in g["params"]) for g in groups]


def test_split_by_ndim_from_a_module():
    model = Block()
    groups = param_groups_for_weight_decay(model, 0.1)
    assert [g["name"] for g in groups] == ["decay", "no_decay"]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert names(groups, model) == [
        ["embedding", "kernel", "weight"],
        ["bias", "norm.bias", "norm.weight", "scale"],
    ]


def test_other_inputs_give_the_same_groups():
    model = Block()
    expected = names(param_groups_for_weight_decay(model, 0.1), model)
    for source in (
        model.named_parameters(),
        dict(model.named_parameters()),
        list(model.parameters()),
    ):
        assert names(param_groups_for_weight_decay(source, 0.1), model) == expected


def test_shared_parameter_once_and_frozen_tensors_left_out():
    model = Tied()
    groups = param_groups_for_weight_decay(model, 0.1)
    assert sum(len(g["params"]) for g in groups) == 7
    pairs = [*model.named_parameters(), ("copy", model.block.weight)]
    frozen = sadl.tensor(np.ones((2, 2)))
    groups = param_groups_for_weight_decay([*pairs, ("frozen", frozen)], 0.1)
    assert sum(len(g["params"]) for g in groups) == 7
    assert all(p is not frozen for g in groups for p in g["params"])


@pytest.mark.parametrize("cls", [AdamW, Lion, sadl.SGD])
def test_groups_feed_an_optimizer_and_decay_only_matrices(cls):
    model = Block()
    opt = cls(param_groups_for_weight_decay(model, 0.5), lr=0.1)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.5, 0.0]
    for p in model.parameters():
        p.grad = np.zeros_like(p.data)
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    opt.step()
    for name, p in model.named_parameters():
        shrunk = not np.array_equal(p.data, before[name])
        assert shrunk == (p.ndim >= 2 and np.any(before[name] != 0)), name


def test_bad_arguments():
    model = Block()
    with pytest.raises(ValueError, match=r"param_groups_for_weight_decay: invalid weight_decay=-1"):
        param_groups_for_weight_decay(model, -1)
    with pytest.raises(TypeError, match=r"item 0 is a str"):
        param_groups_for_weight_decay(["weight"], 0.1)
