"""``Function`` (alias ``Module``): the base class of layers and models (py-sadl's names for its
methods are in ``sadl._compat``).

Parameters are found by looking at attributes, so a subclass needs no registration calls (and
need not even call ``super().__init__()``): attributes that are Parameters, Functions, or
lists/tuples/dicts of them are walked in definition order. A subclass defines its forward pass as
``__call__`` (SADL's contract) or as ``forward`` (torch's; ``__call__`` then calls it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from sadl import _tensor_base
from sadl._compat import FunctionNames
from sadl._tensor import Parameter, Tensor
from sadl._tensor_base import seen, told
from sadl.backends import Device, is_array, parse_device, to_device

__all__ = ["Function", "IncompatibleKeys", "Module"]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` skipped."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Function(FunctionNames):
    """Base class of every layer and model: parameter traversal, modes, devices, state dicts.

    >>> import numpy as np, sadl
    >>> class Scale(sadl.Module):
    ...     def __init__(self):
    ...         self.w = sadl.Parameter(np.ones(2))
    ...     def forward(self, x):
    ...         return x * self.w
    >>> model = Scale()
    >>> model(sadl.tensor([1.0, 2.0]))
    Tensor([1., 2.], dtype=float64, grad_fn=<multiply>)
    >>> [name for name, _ in model.named_parameters()]
    ['w']
    """

    @property
    def training(self) -> bool:
        """Training mode (``train()``, ``eval()``); a tracer in this thread sees each read."""
        flag: bool = self.__dict__.get("training", True)
        return flag if not _tensor_base.watching else seen(self, "training", flag)  # type: ignore[no-any-return]

    @training.setter
    def training(self, flag: bool) -> None:
        self.__dict__["training"] = (
            flag if not _tensor_base.watching else told(self, "training", flag)
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "backward" in cls.__dict__:
            # The engine differentiates the ops that forward runs; a Module's own backward
            # would never be called, and the gradient would be silently the ops' one.
            raise TypeError(
                f"{cls.__name__} defines backward(), which a Module never calls (its gradient "
                "comes from the ops its forward uses). For a custom gradient subclass "
                "sadl.autograd.Function (torch.autograd.Function's contract: staticmethods "
                "forward(ctx, ...) and backward(ctx, grad), called as .apply) or register an "
                "OpDef (docs/plugins.md)"
            )

    def __init__(self) -> None:
        self.training = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        forward = type(self).forward
        if forward is Function.forward:
            raise NotImplementedError(
                f"{type(self).__name__} defines neither forward() nor __call__()"
            )
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The forward pass (define this or ``__call__`` in a subclass)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ traversal
    def named_children(self) -> Iterator[tuple[str, Function]]:
        """Direct sub-Functions with their attribute names (``blocks.0`` for list items)."""
        for name, value in _walk(self, "", include_tensors=False, recurse=False):
            if isinstance(value, Function):
                yield name, value

    def children(self) -> Iterator[Function]:
        """Direct sub-Functions."""
        yield from (child for _, child in self.named_children())

    def named_modules(
        self, memo: set[Any] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Function]]:
        """This Function and every sub-Function, depth first, each once (torch's order)."""
        seen: set[int] = set()
        stack: list[tuple[str, Function]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate and id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            kids = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()]
            stack.extend(reversed(kids))

    def modules(self) -> Iterator[Function]:
        """This Function and every sub-Function."""
        yield from (module for _, module in self.named_modules())

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Every Parameter with its dotted name; a parameter shared by two layers appears once
        (unless ``remove_duplicate=False``); ``recurse=False``: this module's own only.
        """
        seen: set[int] = set()
        for name, value in _walk(self, prefix, include_tensors=True, recurse=recurse):
            if isinstance(value, Parameter) and (not remove_duplicate or id(value) not in seen):
                seen.add(id(value))
                yield name, value

    @property
    def parameters(self) -> ParameterView:
        """Every Parameter, each once: ``model.parameters()`` as in torch.

        Also iterable without the call, ``list(model.parameters)``, as py-sadl's property was.

        >>> import numpy as np, sadl
        >>> class Two(sadl.Module):
        ...     def __init__(self):
        ...         self.a, self.b = sadl.Parameter(np.ones(1)), sadl.Parameter(np.ones(2))
        >>> [p.shape for p in Two().parameters()]
        [(1,), (2,)]
        """
        return ParameterView(self)

    def get_parameters(self, to_device: str | Device | int | None = None) -> dict[str, Parameter]:
        """Every Parameter by dotted name (SADL's name; ``to_device`` gives moved copies)."""
        found = dict(self.named_parameters())
        if to_device is None:
            return found
        return {name: p.copy_to_device(to_device) for name, p in found.items()}

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Registered buffers (running statistics and the like) with their dotted names."""
        modules = self.named_modules(prefix=prefix) if recurse else iter([(prefix, self)])
        seen: set[int] = set()
        for mod_name, module in modules:
            for name in getattr(module, "_buffer_names", ()):
                value = getattr(module, name, None)
                if isinstance(value, Tensor) and (not remove_duplicate or id(value) not in seen):
                    seen.add(id(value))
                    yield (f"{mod_name}.{name}" if mod_name else name), value

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Registered buffers."""
        yield from (value for _, value in self.named_buffers(recurse=recurse))

    def register_buffer(self, name: str, value: Tensor | None, persistent: bool = True) -> None:
        """Keep a non-trainable tensor as state: moved by ``to()``, saved when ``persistent``."""
        names = self.__dict__.setdefault("_buffer_names", [])
        transient: set[str] = self.__dict__.setdefault("_transient_buffers", set())
        if name not in names:
            names.append(name)
        (transient.discard if persistent else transient.add)(name)
        object.__setattr__(self, name, value)

    def num_parameters(self) -> int:
        """Total number of trainable scalars."""
        return sum(p.size for p in self.parameters())

    # ------------------------------------------------------------------ modes and devices
    def train(self, mode: bool = True) -> Function:
        """Training mode (dropout active, batch norm uses batch statistics)."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Function:
        """Evaluation mode."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient."""
        for p in self.parameters():
            p.grad = None if set_to_none or p.grad is None else p.grad * 0

    def to(self, device: str | Device | int | None = None, dtype: Any = None) -> Function:
        """Move (and/or cast) every parameter and buffer in place; returns self.

        As in torch, ``model.to(sadl.float64)`` casts: a dtype given first is the dtype.
        """
        if isinstance(device, type | np.dtype):
            device, dtype = None, device
        for p in self.parameters():
            _move(p, device, dtype, floating_only=False)
        for module in self.modules():
            for value in vars(module).values():
                if isinstance(value, Tensor) and not isinstance(value, Parameter):
                    _move(value, device, dtype, floating_only=True)
        return self

    def apply(self, fn: Callable[[Function], Any]) -> Function:
        """Call ``fn`` on every sub-Function, then on self: each child's subtree in turn, in
        torch's order (a module reached twice is visited twice, as in torch).
        """
        stack: list[tuple[Function, bool]] = [(self, False)]
        while stack:  # iterative post-order: no recursion limit for deep models
            module, expanded = stack.pop()
            if expanded:
                fn(module)
                continue
            stack.append((module, True))
            stack.extend((child, False) for child in reversed(list(module.children())))
        return self

    def half(self) -> Function:
        """Cast floating parameters and buffers to float16 in place."""
        return self.to(dtype=np.float16)

    def float(self) -> Function:
        """Cast floating parameters and buffers to float32 in place."""
        return self.to(dtype=np.float32)

    def double(self) -> Function:
        """Cast floating parameters and buffers to float64 in place."""
        return self.to(dtype=np.float64)

    @property
    def device(self) -> Device:
        """The one device holding every parameter (CPU without any); mixed devices raise."""
        found = self.devices
        if len(found) > 1:
            raise RuntimeError(
                f"{type(self).__name__} has parameters on several devices {found}; "
                "model.devices lists them"
            )
        return found[0] if found else parse_device("cpu")

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (flat; detached, sharing memory).

        >>> import numpy as np, sadl
        >>> class One(sadl.Module):
        ...     def __init__(self):
        ...         self.w = sadl.Parameter(np.ones(2))
        >>> list(One().state_dict())
        ['w']
        """
        state: dict[str, Tensor] = {}
        shared = {id(p): name for name, p in self.named_parameters()}
        # torch's order: each module's own parameters, then its buffers, then its children's.
        for mod_name, module in self.named_modules():
            dot = f"{mod_name}." if mod_name else ""
            for name, p in module.named_parameters(recurse=False, remove_duplicate=False):
                if shared.get(id(p)) == f"{dot}{name}":
                    state[f"{dot}{name}"] = p.detach()
            transient: set[str] = getattr(module, "_transient_buffers", set())
            for name in getattr(module, "_buffer_names", ()):
                value = getattr(module, name, None)
                if isinstance(value, Tensor) and name not in transient:
                    state[f"{dot}{name}"] = value.detach()
        return state

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the parameters and buffers by name (shapes must match).

        Values may be Tensors, NumPy arrays or anything ``np.asarray`` accepts (a CPU
        ``torch.Tensor`` too). With ``strict`` a missing or unexpected key raises. Every value
        is checked (shape, a dtype that casts within its kind: no complex into float) before
        any is copied, so a bad state dict leaves the module as it was.
        """
        name = type(self).__name__
        if not isinstance(state, Mapping):
            raise TypeError(f"load_state_dict for {name}: expected a mapping, got {type(state)}")
        own = self.state_dict()
        targets: dict[str, Tensor] = dict(self.named_parameters())
        targets.update(self.named_buffers())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(
                f"load_state_dict for {name}: missing keys {missing}, "
                f"unexpected keys {unexpected} (pass strict=False to skip them)"
            )
        checked: list[tuple[Tensor, Any]] = []
        for key, value in state.items():
            if key in targets:
                checked.append((targets[key], _checked_value(name, key, value, targets[key])))
        for target, array in checked:
            moved = to_device(array, target.device)
            target.data[...] = moved.astype(target.dtype, copy=False)
            target._version[0] += 1
        return IncompatibleKeys(missing, unexpected)

    def __repr__(self) -> str:
        children = [f"  ({n}): " + repr(c).replace("\n", "\n  ") for n, c in self.named_children()]
        lines = [f"{type(self).__name__}(", *children]
        extra = self.extra_repr()
        if len(lines) == 1:
            return f"{type(self).__name__}({extra})"
        if extra:
            lines.insert(1, f"  {extra}")
        return "\n".join([*lines, ")"])

    def extra_repr(self) -> str:
        """Extra text for ``repr`` (layers show their sizes here)."""
        return ""

    # ------------------------------------------------------------------ freezing
    @property
    def requires_grad(self) -> bool:
        """True when every parameter requires grad (is trainable)."""
        return all(p.requires_grad for p in self.parameters())

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Function:
        """Freeze (False) or unfreeze every parameter: ``model.requires_grad = False`` too.

        A frozen parameter gets no gradient, so optimizers leave it unchanged.
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self


Module = Function


class ParameterView:
    """What ``model.parameters`` is: call it (torch) or iterate it (py-sadl's property)."""

    __slots__ = ("_module",)

    def __init__(self, module: Function) -> None:
        self._module = module

    def __call__(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every Parameter of the module, each once (``recurse=False``: its own only)."""
        yield from (p for _, p in self._module.named_parameters(recurse=recurse))

    def __iter__(self) -> Iterator[Parameter]:
        return self()

    def __len__(self) -> int:
        return sum(1 for _ in self())

    def __repr__(self) -> str:
        return f"<parameters of {type(self._module).__name__}: {len(self)}>"


def _checked_value(owner: str, key: str, value: Any, target: Tensor) -> Any:
    """``value`` as an array that can be copied into ``target``, or an error naming ``key``."""
    array = value.data if isinstance(value, Tensor) else value
    if not is_array(array):
        try:
            array = np.asarray(array)  # lists, NumPy scalars, CPU torch tensors
        except Exception as exc:
            raise TypeError(
                f"load_state_dict for {owner}: {key!r} is not an array ({type(value).__name__})"
            ) from exc
    if tuple(array.shape) != target.shape:
        raise ValueError(
            f"load_state_dict for {owner}: {key!r} has shape {tuple(array.shape)} in the state "
            f"dict but {target.shape} in the model"
        )
    if not np.can_cast(array.dtype, target.dtype, casting="same_kind"):
        raise TypeError(
            f"load_state_dict for {owner}: {key!r} is {array.dtype} in the state dict, which "
            f"does not convert to the model's {target.dtype}"
        )
    return array


_INTERNAL = frozenset({"_buffer_names", "_transient_buffers", "training"})


def _walk(
    owner: Any, prefix: str, *, include_tensors: bool, recurse: bool
) -> Iterator[tuple[str, Any]]:
    """(dotted name, value) for Functions and Parameters reachable from ``owner``'s attributes."""
    seen_modules: set[int] = {id(owner)}
    stack: list[tuple[str, Any]] = []
    items = [(k, v) for k, v in vars(owner).items() if k not in _INTERNAL]
    stack.extend((f"{prefix}.{k}" if prefix else k, v) for k, v in reversed(items))
    while stack:
        name, value = stack.pop()
        if isinstance(value, Parameter):
            if include_tensors:
                yield name, value
        elif isinstance(value, Function):
            if id(value) in seen_modules:
                continue
            seen_modules.add(id(value))
            yield name, value
            if recurse:
                sub = [(k, v) for k, v in vars(value).items() if k not in _INTERNAL]
                stack.extend((f"{name}.{k}", v) for k, v in reversed(sub))
        elif isinstance(value, list | tuple):
            stack.extend((f"{name}.{i}", v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, dict):
            stack.extend((f"{name}.{k}", v) for k, v in reversed(list(value.items())))


def _move(t: Tensor, device: Any, dtype: Any, *, floating_only: bool) -> None:
    data = t.data
    if dtype is not None and (not floating_only or data.dtype.kind == "f"):
        data = data.astype(dtype)
    if device is not None:
        data = to_device(data, device)
    if data is not t.data:
        t.data = data
        if t.grad is not None and not isinstance(t.grad, Tensor):
            grad = t.grad.astype(data.dtype) if dtype is not None else t.grad
            t.grad = to_device(grad, device) if device is not None else grad
