"""Which first-party package provides which name, and a command that installs it from here.

A missing name (``sadl.optim.AdamW`` without sadl-optim, ``sadl train`` without sadl-models) is
answered with the package that provides it and a command that works where the user is: the
packages are not on PyPI yet, so from a checkout of the repository the command installs the
package's directory (``python -m pip install packages/optim``), and nothing ever suggests a PyPI
name that does not resolve. Once a distribution is published, list it in ``PUBLISHED``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

_LAYERS = """
Sequential Mlp ModuleList ModuleDict Linear Embedding LayerNorm RMSNorm BatchNorm1d BatchNorm2d
Dropout Flatten Identity ReLU GELU SiLU Tanh Sigmoid Softmax LogSoftmax LeakyReLU ELU SELU CELU
Mish Softplus LogSigmoid Hardtanh ReLU6 Hardsigmoid Hardswish
MultiHeadAttention CausalSelfAttention Conv1d Conv2d ConvTranspose1d ConvTranspose2d MaxPool1d
MaxPool2d AvgPool1d AvgPool2d AdaptiveAvgPool1d AdaptiveAvgPool2d Upsample UpsamplingNearest2d
UpsamplingBilinear2d RNN LSTM GRU RNNCell LSTMCell GRUCell CrossEntropyLoss MSELoss L1Loss
NLLLoss BCEWithLogitsLoss
"""
_LAYER_OPS = """
cross_entropy nll_loss mse_loss l1_loss binary_cross_entropy_with_logits gelu silu leaky_relu
mish softplus_beta logsigmoid elu selu celu hardtanh hardsigmoid hardswish
layer_norm rms_norm scaled_dot_product_attention attention_qkv conv2d conv_transpose2d conv1d
conv_transpose1d max_pool2d avg_pool2d max_pool1d avg_pool1d interpolate adaptive_avg_pool1d
adaptive_avg_pool2d rnn_sequence lstm_sequence gru_sequence dropout linear embedding batch_norm
erf erfc erfinv ndtr gather scatter scatter_add scatter_reduce cummax cummin topk argwhere nonzero
one_hot
"""
_OPTIM = "AdamW RMSprop Adagrad Lion LRScheduler StepLR CosineWithWarmup LinearWarmup OneCycle"

KNOWN_PROVIDERS: dict[str, dict[str, str]] = {
    "layers": {**dict.fromkeys(_LAYERS.split(), "sadl-layers"), "GPT": "sadl-models"},
    "ops": dict.fromkeys(_LAYER_OPS.split(), "sadl-layers"),
    "optimizers": dict.fromkeys(_OPTIM.split(), "sadl-optim"),
    "models": {"gpt": "sadl-models", "mlp": "sadl-models"},
    "formats": {"sadl": "sadl-serialize", "safetensors": "sadl-serialize"},
}

#: Attributes of ``sadl`` that a first-party plugin serves: name -> (distribution, module).
KNOWN_ATTRIBUTES = {
    "checkpoint": ("sadl-layers", "sadl_layers"),
    "compile": ("sadl-compile", "sadl_compile"),
    "CompiledFunction": ("sadl-compile", "sadl_compile"),
}

#: Subcommands of ``sadl`` that first-party plugins add.
KNOWN_COMMANDS = {
    "check-plugins": "sadl-check",
    "train": "sadl-models",
    "generate": "sadl-models",
    "inspect": "sadl-serialize",
    "launch": "sadl-distributed",
}

#: First-party distributions that ``pip install NAME`` finds on PyPI (none yet).
PUBLISHED: frozenset[str] = frozenset()

#: Where each first-party distribution lives in a checkout of the repository.
CHECKOUT_DIRS = {
    "sadl-core": "packages/core",
    "sadl-layers": "packages/layers",
    "sadl-optim": "packages/optim",
    "sadl-serialize": "packages/serialize",
    "sadl-models": "packages/models",
    "sadl-distributed": "packages/distributed",
    "sadl-compile": "packages/compile",
    "sadl-check": "packages/check",
}


def known_provider(kind: str, name: str) -> tuple[str, str] | None:
    """``(distribution, exact name)`` for ``name``: in ``kind``, in any kind, then ignoring case."""
    found = KNOWN_PROVIDERS.get(kind, {}).get(name)
    if found is not None:
        return found, name
    for names in KNOWN_PROVIDERS.values():
        if name in names:
            return names[name], name
    folded = name.casefold()
    for names in (KNOWN_PROVIDERS.get(kind, {}), *KNOWN_PROVIDERS.values()):
        for known, distribution in names.items():
            if known.casefold() == folded:
                return distribution, known
    return None


def install_command(distribution: str, extra: str | None = None) -> str:
    """A command that installs ``distribution`` (with ``extra``) into the running Python.

    From a checkout it names the package's directory; a published distribution is named as is;
    otherwise the command is the one to run in a clone of the repository.
    """
    where = CHECKOUT_DIRS.get(distribution)
    root = checkout_root()
    if distribution in PUBLISHED or where is None:
        target = distribution
    elif root is not None:
        target = _shorten(root / where)
    else:
        target = where
    if extra:
        target = f"'{target}[{extra}]'"
    command = f"{_installer()} {target}"
    if root is None and distribution not in PUBLISHED and where is not None:
        return f"{command} (run it in a clone of the sadl repository)"
    return command


def checkout_root() -> Path | None:
    """The repository this sadl-core was installed from (or runs from), if it is still there."""
    candidates = []
    try:
        text = metadata.distribution("sadl-core").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text:
        try:
            url = json.loads(text).get("url", "")
        except ValueError:
            url = ""
        parsed = urlparse(url)
        if parsed.scheme == "file":
            candidates.append(Path(unquote(parsed.path)).parent.parent)
    # Running from the source tree itself (editable install, PYTHONPATH): .../packages/core/src/sadl
    candidates.append(Path(__file__).resolve().parents[4])
    for root in candidates:
        if (root / "packages" / "core" / "pyproject.toml").is_file():
            return root
    return None


def _shorten(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return relative if not relative.startswith("..") else str(path)


def _installer() -> str:
    """``python -m pip install`` for the running interpreter (``uv pip`` in a venv without pip)."""
    python = _python()
    if importlib.util.find_spec("pip") is not None:
        return f"{python} -m pip install"
    if shutil.which("uv"):
        active = os.environ.get("VIRTUAL_ENV")
        if active and os.path.abspath(active) == os.path.abspath(sys.prefix):
            return "uv pip install"  # uv installs into the active virtual environment
        return f"uv pip install --python {python}"
    return f"{python} -m ensurepip && {python} -m pip install"


def _python() -> str:
    """How to name this interpreter: ``python`` when that is the one on PATH, else its path."""
    for name in ("python", "python3"):
        found = shutil.which(name)
        if found and os.path.abspath(found) == os.path.abspath(sys.executable):
            return name
    return sys.executable
