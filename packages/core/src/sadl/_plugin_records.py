"""The records a plugin returns besides ops: layers, optimizers, models, formats, backends.

Each record is plain data: the registry validates it, the namespaces (``sadl.nn``,
``sadl.optim``, ``sadl.models``) serve it, and nothing else about a plugin needs to be known.
(``OpDef`` and ``Example``, what the autograd kernel runs, are in ``sadl._records``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sadl._records import Example, _check_name

__all__ = ["BackendDef", "FormatDef", "LayerDef", "ModelDef", "OptimizerDef"]


def _require(record: Any, ok: bool, what: str, error: type[Exception] = TypeError) -> None:
    """Refuse ``record`` unless ``ok``, saying which record and ``what`` it must be."""
    if not ok:
        raise error(f"{type(record).__name__} {record.name!r}: {what}")


def _checked(record: Any, callables: tuple[str, ...] = (), tuples: tuple[str, ...] = ()) -> None:
    """Check ``record``'s name and that its ``callables`` fields are; make its ``tuples`` fields
    tuples (a string given alone, or a list, becomes one).
    """
    _check_name(record, record.name)
    for name in callables:
        _require(record, callable(getattr(record, name)), f"{name} must be callable")
    for name in tuples:
        value = getattr(record, name)
        value = (value,) if isinstance(value, str) else value
        object.__setattr__(record, name, tuple(value) if isinstance(value, Iterable) else value)


@dataclass(frozen=True)
class _ClassDef:
    """A class a namespace serves by name: LayerDef's and OptimizerDef's fields and checks."""

    name: str
    cls: type
    examples: tuple[Example, ...] = ()

    def __post_init__(self) -> None:
        _checked(self, tuples=("examples",))
        _require(self, isinstance(self.cls, type), f"cls must be a class, got {self.cls!r}")
        for example in self.examples:
            got = f"examples must be Example(...) records, got {example!r}"
            _require(self, isinstance(example, Example), got)


class LayerDef(_ClassDef):
    """A layer (or loss module) class, served as ``sadl.nn.<name>`` and ``sadl.<name>``.

    ``examples`` (optional, beyond the design contract) are what ``sadl check-plugins`` builds
    and runs: in an :class:`Example`, the positional inputs are the forward pass's inputs (a
    tuple of ints is a shape of random floats) and the keyword arguments go to the constructor,
    e.g. ``LayerDef("Scale", Scale, examples=(Example((4, 3), num_features=3),))``.
    """


class OptimizerDef(_ClassDef):
    """An optimizer or learning-rate scheduler class, served as ``sadl.optim.<name>``.

    ``examples`` (optional) hold constructor keyword arguments for ``sadl check-plugins``, e.g.
    ``Example(lr=0.1)``; without any, the class is built with its defaults.
    """


@dataclass(frozen=True)
class ModelDef:
    """A model factory, built by ``sadl.models.create(name, **config)``.

    ``config`` holds the default keyword arguments; ``create`` merges the caller's on top.
    """

    name: str
    factory: Callable[..., Any]
    config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _checked(self, ("factory",))


@dataclass(frozen=True)
class FormatDef:
    """A file format for ``sadl.save`` / ``sadl.load``.

    ``save(obj, path)`` writes a Tensor or a mapping of Tensors; ``load(path, device=None)`` reads
    it back. ``suffixes`` (like ``(".sadl",)``) pick the format on save and load; ``magic`` (the
    file's first bytes) picks it on load when the suffix is unknown.
    """

    name: str
    suffixes: tuple[str, ...]
    save: Callable[..., Any]
    load: Callable[..., Any]
    magic: bytes | None = None

    def __post_init__(self) -> None:
        _checked(self, ("save", "load"), ("suffixes",))
        dotted = tuple(s.lower() if s.startswith(".") else "." + s.lower() for s in self.suffixes)
        object.__setattr__(self, "suffixes", dotted)


@dataclass(frozen=True)
class BackendDef:
    """A device type: the array library behind it and how sadl reaches it.

    ``name`` is the device type as written in device strings (``"cuda"`` in ``"cuda:1"``).
    ``module`` is the import name of the array module, which speaks NumPy's vocabulary
    (``zeros_like``, ``sqrt``, ``asarray``, ufuncs with ``out=``); ``array_types`` are the dotted
    names of its array classes. Both are imported on first need, never at registration, so a
    backend whose library is missing costs nothing until a tensor is sent there.

    * ``to_host(array) -> numpy.ndarray`` copies an array to the host.
    * ``from_host(array, index)`` copies a NumPy array to device ``index``.
    * ``device_index(array) -> int`` says which device an array lives on.
    * ``device_count() -> int`` is the number of usable devices (0 when none is, never raising).
    * ``generator(seed, index)`` returns a random generator that draws on device ``index``,
      seeded with ``seed`` (an int, or None for fresh entropy). It offers the methods of
      ``numpy.random.Generator`` that CuPy's generator has too: ``random(size, dtype)``,
      ``standard_normal(size, dtype)``, ``integers(low, high, size, dtype)`` and
      ``uniform(low, high, size, dtype)``.
    * ``synchronize(index)`` waits until the work queued on device ``index`` is done.
    * ``install_hint`` says what to install when ``module`` does not import (a string, or a
      function returning one when the message is built).
    """

    name: str
    module: str
    array_types: tuple[str, ...]
    to_host: Callable[[Any], Any]
    from_host: Callable[[Any, int], Any]
    device_index: Callable[[Any], int]
    device_count: Callable[[], int]
    generator: Callable[[int | None, int], Any]
    synchronize: Callable[[int], None]
    install_hint: str | Callable[[], str] = ""

    def __post_init__(self) -> None:
        functions = ("to_host", "from_host", "device_index", "device_count", "generator")
        _checked(self, (*functions, "synchronize"), ("array_types",))
        _require(self, self.name == self.name.lower(), "device types are lowercase", ValueError)
        types = self.array_types
        dotted = bool(types) and all(isinstance(t, str) and "." in t for t in types)
        what = "array_types must name the array classes as dotted paths like 'cupy.ndarray'"
        _require(self, dotted, f"{what}, got {types!r}")
