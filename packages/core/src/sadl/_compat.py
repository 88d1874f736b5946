"""py-sadl 2.0's names, in one place, so that code written for py-sadl runs unchanged.

``docs/compat.md`` is the table. ``Function`` mixes in :class:`FunctionNames` (``inference()``,
``is_training``, ``devices``, ``copy_to_device``, ``traverse_parameters``, ``load_parameters``);
the grad-mode names are here; ``Module`` is ``Function``'s torch name (``sadl._module``),
``Tensor.copy_to_device`` is ``to`` (``sadl._conversions``), and the optimizers accept
py-sadl's keyword spellings (``friction=``, ``beta_1=``) in their constructors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sadl._grad_mode import _state as _grad_state
from sadl._grad_mode import no_grad
from sadl._tensor import Parameter, Tensor
from sadl.backends import Device

if TYPE_CHECKING:
    from sadl._module import Function

__all__ = ["FunctionNames", "is_global_grad_mode_enabled", "no_grad_fn", "set_global_grad_mode"]

F = TypeVar("F", bound=Callable[..., Any])


class FunctionNames:
    """py-sadl's names for ``Function``'s methods (a mixin of ``sadl.nn.Function``)."""

    def inference(self: Any) -> Function:
        """Evaluation mode: py-sadl's name for ``eval()``."""
        return cast("Function", self.eval())

    @property
    def is_training(self: Any) -> bool:
        """py-sadl's name for the ``training`` flag."""
        return bool(self.training)

    @property
    def devices(self: Any) -> tuple[Device, ...]:
        """The devices holding the parameters, each once (what py-sadl's ``model.device`` was;
        empty without parameters). ``model.device`` is the one device, as in torch's ecosystem.
        """
        return tuple(dict.fromkeys(p.device for p in self.parameters()))

    def copy_to_device(self: Any, device: str | Device | int) -> Function:
        """py-sadl's name for ``to(device)``: move everything in place; returns self."""
        return cast("Function", self.to(device))

    def traverse_parameters(
        self: Any, on_parameter: Callable[[str, Parameter], Parameter | None]
    ) -> None:
        """Call ``on_parameter(name, param)`` for each Parameter; a returned one replaces it."""
        for name, param in list(self.named_parameters()):
            replacement = on_parameter(name, param)
            if replacement is not None and replacement is not param:
                _replace(self, name, replacement)

    def load_parameters(
        self: Any,
        state: Mapping[str, Any] | None = None,
        *,
        parameters: Mapping[str, Any] | None = None,
        match_function_device: bool = False,
        partial: bool = False,
    ) -> Function:
        """py-sadl's ``load_state_dict``: values by parameter name; returns self.

        Names are sadl's (``get_parameters()``'s keys); a py-sadl model file's names
        (``layers[0].W``) are converted by ``sadl.io.load_pysadl``. ``partial`` allows missing
        names; a value on another device is refused unless ``match_function_device``.
        (``parameters=`` is the keyword of earlier py-sadl releases.)
        """
        given = state if state is not None else parameters
        if given is None:
            raise TypeError("load_parameters: pass the parameters by name (a dict)")
        own = dict(self.named_parameters())
        unknown = [k for k in given if k not in own]
        if unknown:
            hint = (
                "; these are py-sadl names: load the file with sadl.io.load_pysadl(path, model)"
                if any("[" in k or k.endswith((".W", ".b")) for k in unknown)
                else ""
            )
            raise KeyError(f"load_parameters: {type(self).__name__} has no {unknown}{hint}")
        missing = [k for k in own if k not in given]
        if missing and not partial:
            raise KeyError(
                f"load_parameters: no values for {missing} (pass partial=True to keep those)"
            )
        moved = [k for k, v in given.items() if isinstance(v, Tensor) and v.device != own[k].device]
        if moved and not match_function_device:
            key = moved[0]
            raise ValueError(
                f"load_parameters: {key!r} is on {given[key].device}, the model's on "
                f"{own[key].device}; pass match_function_device=True to move it"
            )
        self.load_state_dict(dict(given), strict=False)
        return cast("Function", self)


# Grad mode. py-sadl's switch was process-wide; sadl's is per thread.
def no_grad_fn(func: F) -> F:
    """py-sadl's decorator: run ``func`` without recording the graph (``@sadl.no_grad()``)."""
    return no_grad()(func)


def set_global_grad_mode(enabled: bool) -> None:
    """py-sadl's switch: record the graph (True) or not from now on, in this thread."""
    _grad_state.enabled = bool(enabled)


def is_global_grad_mode_enabled() -> bool:
    """py-sadl's name for ``is_grad_enabled()``."""
    return _grad_state.enabled


def _replace(root: Function, name: str, value: Parameter) -> None:
    """Put ``value`` where the dotted ``name`` (as ``named_parameters`` gives it) points."""
    *path, last = name.split(".")
    owner: Any = root
    for part in path:
        if isinstance(owner, list | tuple):
            owner = owner[int(part)]
        elif isinstance(owner, dict):
            owner = owner[part]
        else:
            owner = getattr(owner, part)
    if isinstance(owner, tuple):
        raise TypeError(f"cannot replace {name!r}: it is inside a tuple; use a list")
    if isinstance(owner, list):
        owner[int(last)] = value
    elif isinstance(owner, dict):
        owner[last] = value
    else:
        setattr(owner, last, value)
