"""Containers: ``Sequential`` (alias ``Mlp``), ``ModuleList`` and ``ModuleDict``.

Children are stored as attributes named ``"0"``, ``"1"``, ... (or by key), so parameter names are
``0.weight``, ``blocks.3.attn.c_attn.bias`` ... exactly as in a PyTorch ``state_dict``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from sadl.nn import Module

from sadl_layers.modules._base import Layer

__all__ = ["Sequential", "Mlp", "ModuleList", "ModuleDict"]


def _check_module(owner: str, where: str, value: Any) -> Module:
    if not isinstance(value, Module):
        raise TypeError(
            f"{owner}: {where} must be a layer (a sadl.nn.Module), got {type(value).__name__}"
        )
    return value


class _Indexed(Layer):
    """Children kept as attributes ``"0"``, ``"1"``, ... in order."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        self._size = 0
        for m in modules:
            self.append(m)

    def _index(self, index: int) -> int:
        if not isinstance(index, int):
            raise TypeError(f"{type(self).__name__} indices must be integers, got {index!r}")
        n = self._size
        if not -n <= index < n:
            raise IndexError(f"{type(self).__name__}: index {index} out of range for {n} layers")
        return index % n

    def append(self, module: Module) -> _Indexed:
        """Add a layer at the end."""
        _check_module(type(self).__name__, f"item {self._size}", module)
        setattr(self, str(self._size), module)
        self._size += 1
        return self

    def extend(self, modules: Iterable[Module]) -> _Indexed:
        """Add several layers at the end."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert a layer before ``index``."""
        _check_module(type(self).__name__, f"item {index}", module)
        items = list(self)
        index = max(0, min(len(items), index if index >= 0 else len(items) + index))
        items.insert(index, module)
        self._reset(items)

    def _reset(self, items: list[Module]) -> None:
        for i in range(self._size):
            delattr(self, str(i))
        self._size = 0
        self.extend(items)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Module]:
        return (getattr(self, str(i)) for i in range(self._size))

    def __setitem__(self, index: int, module: Module) -> None:
        _check_module(type(self).__name__, f"item {index}", module)
        setattr(self, str(self._index(index)), module)

    def __delitem__(self, index: int) -> None:
        items = list(self)
        del items[self._index(index)]
        self._reset(items)

    def extra_repr(self) -> str:
        """Nothing beyond the children."""
        return ""


class Sequential(_Indexed):
    """Layers applied one after the other: ``Sequential(a, b, c)`` or ``Sequential([a, b, c])``.

    ``Mlp`` is the same class under SADL's name. Indexing gives a layer, slicing a new
    ``Sequential`` sharing the layers.
    """

    def __init__(self, *layers: Any) -> None:
        if len(layers) == 1 and isinstance(layers[0], list | tuple):
            layers = tuple(layers[0])
        super().__init__()
        for i, layer in enumerate(layers):
            _check_module("Sequential", f"layer {i}", layer)
            self.append(layer)

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module:
        """The layer at ``index``, or a Sequential of a slice of them."""
        if isinstance(index, slice):
            return Sequential(list(self)[index])
        return getattr(self, str(self._index(index)))  # type: ignore[no-any-return]

    def forward(self, x: Any) -> Any:
        """Feed ``x`` through every layer in order."""
        for layer in self:
            x = layer(x)
        return x


Mlp = Sequential


class ModuleList(_Indexed):
    """A list of layers whose parameters are found (``blocks.0.weight``); it has no forward."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__(modules)

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> ModuleList: ...

    def __getitem__(self, index: int | slice) -> Module:
        """The layer at ``index``, or a ModuleList of a slice of them."""
        if isinstance(index, slice):
            return ModuleList(list(self)[index])
        return getattr(self, str(self._index(index)))  # type: ignore[no-any-return]


class ModuleDict(Layer):
    """Layers by name (``heads.policy.weight``); keys are strings without dots."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        self._keys: list[str] = []
        if modules is not None:
            self.update(modules)

    def _check_key(self, key: Any) -> str:
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ModuleDict: keys must be non-empty strings without '.', got {key!r}")
        if key not in self._keys and (key in vars(self) or hasattr(type(self), key)):
            raise KeyError(f"ModuleDict: key {key!r} would shadow an attribute of the dict")
        return key

    def __setitem__(self, key: str, module: Module) -> None:
        key = self._check_key(key)
        _check_module("ModuleDict", f"value of {key!r}", module)
        if key not in self._keys:
            self._keys.append(key)
        setattr(self, key, module)

    def __getitem__(self, key: str) -> Module:
        if key not in self._keys:
            raise KeyError(f"ModuleDict: no layer named {key!r} (have {self._keys})")
        return getattr(self, key)  # type: ignore[no-any-return]

    def __delitem__(self, key: str) -> None:
        self[key]
        self._keys.remove(key)
        delattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._keys)

    def values(self) -> list[Module]:
        """The layers, in insertion order."""
        return [getattr(self, k) for k in self._keys]

    def items(self) -> list[tuple[str, Module]]:
        """(name, layer) pairs, in insertion order."""
        return [(k, getattr(self, k)) for k in self._keys]

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add or replace layers from a mapping or (name, layer) pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module

    def extra_repr(self) -> str:
        """Nothing beyond the children."""
        return ""
