"""py-sadl model files: their parameter names and layouts, and sadl's (``docs/compat.md``).

py-sadl 2.0 saves ``model.get_parameters()``: names such as ``layers[0].W`` and ``layers[0].b``,
with a Linear's ``W`` stored as (in, out). sadl names the same parameters ``0.weight`` and
``0.bias`` (torch's names) with ``weight`` as (out, in). Both frameworks find parameters by
walking attributes in definition order, so the n-th parameter of a py-sadl model is the n-th of
the equivalent sadl model; the conversion pairs them in that order and checks every pair's name
and shape, so a model that does not match is an error that says where, never a silent mix-up.
The file itself is the same ``.sadl`` format (``load_pysadl`` / ``save_pysadl``, served as
``sadl.io.load_pysadl`` / ``sadl.io.save_pysadl`` too).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import sadl
from sadl import Function, Tensor

__all__ = ["from_pysadl", "load_pysadl", "save_pysadl", "to_pysadl"]

#: py-sadl's leaf names -> sadl's (a Linear's weight is transposed on the way).
_LEAF_NAMES = {"W": "weight", "b": "bias"}


def from_pysadl(params: Mapping[str, Any], model: Function) -> dict[str, Any]:
    """py-sadl's ``{"layers[0].W": ..., ...}`` as a state dict for ``model`` (arrays).

    Pairs py-sadl's parameters with ``model``'s in order; each pair must have matching names
    (``W``/``weight``, ``b``/``bias``, or the same name) and shapes (a ``W`` transposed).
    """
    theirs = list(params.items())
    ours = list(model.named_parameters())
    if len(theirs) != len(ours):
        raise ValueError(
            f"from_pysadl: the py-sadl parameters ({len(theirs)}: {[k for k, _ in theirs]}) do "
            f"not match the {len(ours)} parameters of {type(model).__name__} "
            f"({[k for k, _ in ours]}); build the sadl model that mirrors the py-sadl one"
        )
    state: dict[str, Any] = {}
    for (their_key, value), (our_key, param) in zip(theirs, ours):
        array = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        their_leaf = re.split(r"[.\[{]", their_key)[-1].rstrip("]}")
        our_leaf = our_key.rsplit(".", 1)[-1]
        if _LEAF_NAMES.get(their_leaf, their_leaf) != our_leaf:
            raise ValueError(
                f"from_pysadl: py-sadl's {their_key!r} is paired with {our_key!r} of "
                f"{type(model).__name__}, but their names do not correspond"
            )
        if their_leaf == "W" and array.ndim == 2:
            array = array.T  # py-sadl's Linear keeps W as (in, out); sadl's weight is (out, in)
        if array.shape != param.shape:
            raise ValueError(
                f"from_pysadl: py-sadl's {their_key!r} has shape {array.shape} (as sadl lays it "
                f"out) but {our_key!r} of {type(model).__name__} has {param.shape}"
            )
        state[our_key] = np.ascontiguousarray(array)
    return state


def to_pysadl(model: Function) -> dict[str, Tensor]:
    """``model``'s parameters under py-sadl's names and layouts (what py-sadl would save).

    ``0.weight`` of a Linear becomes ``layers[0].W`` (transposed), ``head.bias`` becomes
    ``head.b``; a list index follows its attribute in brackets, and a model whose parameters
    start with an index (``sadl.Mlp``, a ``Sequential``) keeps its list in ``layers``, as
    py-sadl's ``Mlp`` does.
    """
    linear_weights = {
        f"{prefix}.weight" if prefix else "weight"
        for prefix, module in model.named_modules()
        if type(module).__name__ == "Linear"
    }
    out: dict[str, Tensor] = {}
    for name, param in model.named_parameters():
        *path, leaf = name.split(".")
        data = param.numpy()
        if name in linear_weights and data.ndim == 2:
            leaf, data = "W", data.T
        else:
            leaf = {v: k for k, v in _LEAF_NAMES.items()}.get(leaf, leaf)
        if path and path[0].isdigit():
            path = ["layers", *path]
        key = ""
        for part in path:
            key += f"[{part}]" if part.isdigit() else (f".{part}" if key else part)
        out[f"{key}.{leaf}" if key else leaf] = Tensor(np.ascontiguousarray(data))
    return out


def load_pysadl(path: str | os.PathLike[str], model: Function) -> Function:
    """Load a model file written by py-sadl 2.0 into the equivalent sadl ``model``; returns it.

    The parameters are paired in order and renamed (``layers[0].W`` -> ``0.weight``, a Linear's
    weight transposed); a model that does not match raises, naming the first mismatch.
    """
    params = sadl.load(path, format="sadl")
    if not isinstance(params, dict):
        raise ValueError(f"load_pysadl: {path} holds a single tensor, not a model's parameters")
    model.load_state_dict(from_pysadl(params, model))
    return model


def save_pysadl(model: Function, path: str | os.PathLike[str]) -> None:
    """Write ``model``'s parameters as py-sadl 2.0 would save its equivalent model."""
    sadl.save(to_pysadl(model), path, format="sadl")
