"""PyTorch's spellings of Module methods and top-level functions, with torch's results."""

from __future__ import annotations

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch", reason="torch's Module is the reference")


class Leaf(sadl.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = sadl.Parameter(np.ones(n))
        self.register_buffer("count", sadl.tensor(np.zeros(1)))


class Tree(sadl.Module):
    """A child defined before an own parameter and a buffer: the case where orders differ."""

    def __init__(self):
        super().__init__()
        self.first = Leaf(2)
        self.scale = sadl.Parameter(np.ones(1))
        self.register_buffer("steps", sadl.tensor(np.zeros(1)))
        self.second = Leaf(3)
        self.register_buffer("scratch", sadl.tensor(np.zeros(1)), persistent=False)


class TorchLeaf(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.register_buffer("count", torch.zeros(1))


class TorchTree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = TorchLeaf(2)
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.register_buffer("steps", torch.zeros(1))
        self.second = TorchLeaf(3)
        self.register_buffer("scratch", torch.zeros(1), persistent=False)


def test_state_dict_keys_come_in_torchs_order():
    assert list(Tree().state_dict()) == list(TorchTree().state_dict())


def test_named_buffers_and_modules_match_torch():
    ours, theirs = Tree(), TorchTree()
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert len(list(ours.buffers())) == len(list(theirs.buffers()))
    own = [n for n, _ in ours.named_parameters(recurse=False)]
    assert own == [n for n, _ in theirs.named_parameters(recurse=False)]
    assert len(list(ours.parameters(recurse=False))) == 1


def test_apply_visits_in_torchs_order():
    class Deep(sadl.Module):
        def __init__(self):
            super().__init__()
            self.a = Tree()
            self.b = Leaf(1)

    class TorchDeep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = TorchTree()
            self.b = TorchLeaf(1)

    ours, theirs = [], []
    Deep().apply(lambda m: ours.append(type(m).__name__))
    TorchDeep().apply(lambda m: theirs.append(type(m).__name__.removeprefix("Torch")))
    assert ours == theirs


def test_half_float_double_and_to_a_dtype_cast_in_place():
    tree = Tree()
    assert tree.half() is tree and tree.scale.dtype == np.float16
    assert tree.float().first.weight.dtype == np.float32
    assert tree.double().second.count.dtype == np.float64
    tree.to(sadl.float32)  # a dtype given first is the dtype, as torch's Module.to
    assert tree.scale.dtype == np.float32 and tree.steps.dtype == np.float32


def test_model_device_is_the_one_device():
    tree = Tree()
    assert tree.device == "cpu" and tree.device == sadl.device("cpu")
    assert tree.devices == ("cpu",)  # py-sadl's tuple, under its own name now
    assert sadl.Module().device == "cpu"


def test_zero_grad_set_to_none_and_requires_grad_():
    tree = Tree()
    (tree.first.weight.sum() * tree.scale.sum()).backward()
    tree.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(tree.first.weight.grad, np.zeros(2))
    tree.zero_grad()
    assert tree.first.weight.grad is None
    assert tree.requires_grad_(False) is tree and not tree.scale.requires_grad


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("float32", np.float32),
        ("float", np.float32),
        ("float64", np.float64),
        ("double", np.float64),
        ("half", np.float16),
        ("long", np.int64),
        ("int64", np.int64),
        ("int", np.int32),
        ("int32", np.int32),
        ("bool", np.bool_),
        ("uint8", np.uint8),
    ],
)
def test_dtype_names_work_wherever_a_dtype_is(name, expected):
    dtype = getattr(sadl, name)
    assert np.dtype(dtype) == torch.zeros(1, dtype=getattr(torch, name)).numpy().dtype
    assert sadl.zeros(2, dtype=dtype).dtype == expected
    assert sadl.arange(0, 3, dtype=dtype).dtype == expected
    assert sadl.tensor([1, 0], dtype=dtype).astype(sadl.float64).dtype == np.float64
    assert sadl.ones(1, dtype=dtype).dtype == dtype  # compares as torch's t.dtype == torch.long


def test_top_level_functions_take_torchs_arguments():
    a, b = sadl.tensor([[1.0, 5.0]]), sadl.tensor([[3.0, 2.0]])
    ta, tb = torch.tensor([[1.0, 5.0]]), torch.tensor([[3.0, 2.0]])
    np.testing.assert_array_equal(sadl.cat((a, b), dim=1).numpy(), torch.cat((ta, tb), 1).numpy())
    np.testing.assert_array_equal(sadl.stack([a, b], 1).numpy(), torch.stack([ta, tb], 1).numpy())
    got = sadl.argmax(sadl.cat([a, b]), dim=1, keepdim=True).numpy()
    np.testing.assert_array_equal(got, torch.argmax(torch.cat([ta, tb]), 1, keepdim=True).numpy())
    x = np.arange(24.0).reshape(2, 3, 4)
    assert sadl.flatten(sadl.tensor(x), 1).shape == tuple(torch.flatten(torch.tensor(x), 1).shape)
    assert sadl.numel(sadl.tensor(x)) == 24 and sadl.is_tensor(a) and not sadl.is_tensor(x)


def test_from_numpy_shares_memory():
    array = np.zeros(3, dtype=np.float32)
    t = sadl.from_numpy(array)
    array[0] = 7.0
    assert t.numpy()[0] == 7.0
    with pytest.raises(TypeError, match="numpy.ndarray"):
        sadl.from_numpy([1.0, 2.0])


def test_inference_mode_is_no_grad_as_context_and_decorator():
    w = sadl.tensor([1.0], requires_grad=True)
    with sadl.inference_mode():
        assert not (w * 2).requires_grad

    @sadl.inference_mode()
    def double(x):
        return x * 2

    assert not double(w).requires_grad
    assert (w * 2).requires_grad


def test_multinomial_draws_follow_the_weights():
    sadl.manual_seed(0)
    draws = sadl.multinomial(sadl.tensor([0.1, 0.6, 0.3]), 4000, replacement=True).numpy()
    assert draws.dtype == np.int64 and draws.shape == (4000,)
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 4000, [0.1, 0.6, 0.3], atol=0.03)
    rows = sadl.multinomial(sadl.tensor([[0.0, 1.0, 1.0], [5.0, 0.0, 1.0]]), 2).numpy()
    assert rows.shape == (2, 2)
    assert sorted(rows[0]) == [1, 2] and sorted(rows[1]) == [0, 2]  # no repeats, no zero weights
    sadl.manual_seed(5)
    first = sadl.multinomial(sadl.tensor([[0.2, 0.8]]), 1).numpy()
    sadl.manual_seed(5)
    np.testing.assert_array_equal(sadl.multinomial(sadl.tensor([[0.2, 0.8]]), 1).numpy(), first)
    with pytest.raises(ValueError, match="without replacement"):
        sadl.multinomial(sadl.tensor([1.0, 0.0]), 2)
    with pytest.raises(ValueError, match="non-negative"):
        sadl.multinomial(sadl.tensor([1.0, -1.0]), 1)


def test_randperm_is_a_permutation():
    sadl.manual_seed(1)
    p = sadl.randperm(10)
    assert p.dtype == np.int64 and sorted(p.numpy()) == list(range(10))


def test_a_torch_name_sadl_lacks_names_the_nearest_spelling():
    with pytest.raises(AttributeError, match=r"bfloat16.*sadl\.float16"):
        sadl.bfloat16  # noqa: B018
    with pytest.raises(AttributeError, match=r"sadl\.compile"):
        sadl.jit  # noqa: B018
    with pytest.raises(AttributeError, match="im2col"):
        sadl.unfold  # noqa: B018
