"""Devices and array modules: the only place that knows one array library from another.

Engine code never branches on the backend: it asks this module for the array module of some data
(``array_module``), the device it lives on (``device_of``) or to move it (``to_device``). Device
types are ``BackendDef`` records registered through the ``register_backends`` hook: NumPy
(``"cpu"``) and CuPy (``"cuda"``) by core's built-in plugin, any other by a plugin. The plugin
host hands the records down when it loads (``install_backends``); until then, the first question
about a device that is not the CPU makes it load (``install_plugin_loader``).

NumPy arrays never reach the table: every function checks for them first, so the CPU path costs
one ``isinstance``. A backend's array module is imported on first need, so ``import sadl`` stays
silent and fast where CuPy is absent.

``matmul`` is ``np.matmul`` on the BLAS thread count sadl's policy picks for the product's size
(docs/getting-started.md, "Threads"): the products of plugin ops and of compiled replays call it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from sadl._plugin_records import BackendDef
from sadl._tensor_base import TensorBase
from sadl._threads import matmul, on_threads

__all__ = [
    "CPU_BACKEND",
    "Backend",
    "Device",
    "array_module",
    "backend",
    "backend_names",
    "cupy_or_none",
    "device_of",
    "ensure_same_device",
    "install_backends",
    "install_plugin_loader",
    "plugin_registry",
    "install_traced_array",
    "install_transfer_observer",
    "install_value_dependent_observer",
    "is_array",
    "match_key",
    "matmul",
    "on_threads",
    "parse_device",
    "scatter_add",
    "synchronize",
    "to_device",
    "value_dependent",
]

_ndarray = np.ndarray
_host_types = (np.ndarray, np.generic)


@dataclass(frozen=True)
class Device:
    """Where a tensor's data lives: ``Device("cpu")`` or ``Device("cuda", 0)``."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device('{self}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str | int) and not isinstance(other, bool):
            try:
                other = parse_device(other)
            except ValueError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))


CPU = Device("cpu")


def _numpy_generator(seed: int | None, index: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _no_sync(index: int) -> None:
    """NumPy runs synchronously: nothing is ever queued."""


#: NumPy on the host. Core's built-in plugin registers it; the functions here never consult it
#: for NumPy arrays (they check for those first), it is there so "cpu" is a device like others.
CPU_BACKEND = BackendDef(
    "cpu",
    module="numpy",
    array_types=("numpy.ndarray",),
    to_host=np.asarray,
    from_host=lambda array, index: array,
    device_index=lambda array: 0,
    device_count=lambda: 1,
    generator=_numpy_generator,
    synchronize=_no_sync,
)


class Backend:
    """A registered ``BackendDef`` with its array module imported: what the engine talks to.

    ``name`` is the device type it serves (normally the record's name; ``sadl.testing`` can
    serve one device type from another backend), ``module`` the array module.
    """

    __slots__ = ("module", "name", "record", "types")

    def __init__(self, name: str, record: BackendDef, module: ModuleType, types: tuple[type, ...]):
        self.name = name
        self.record = record
        self.module = module
        self.types = types

    def device(self, array: Any) -> Device:
        """The Device ``array`` (one of this backend's arrays) lives on."""
        return Device(self.name, int(self.record.device_index(array)))

    def __repr__(self) -> str:
        return f"<backend {self.name} ({self.record.module})>"


class _Table:
    """The registered backends, and the array types seen so far (filled lazily, under a lock)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.installed = False
        self.records: dict[str, BackendDef] = {"cpu": CPU_BACKEND}
        self.aliases: dict[str, str] = {}  # device type -> name of the backend serving it
        self.loaded: dict[str, Backend] = {}  # device type -> Backend, once imported
        self.by_type: dict[type, Backend] = {}  # array type -> Backend
        self.not_arrays: set[type] = set()  # types known to belong to no backend
        self.contested: dict[str, Exception] = {}  # device types two plugins register


_table = _Table()


def _no_loader() -> None:
    """Stand-in until the plugin host installs the real loader (only the CPU is known)."""


_load_plugins: Callable[[], object] = _no_loader


class _NoTracedArrays:
    """No object is of this type: the stand-in array kind before a tracer installs one."""


class _Traced:
    """How a tracer's stand-ins for device arrays (sadl-compile's, say) are seen.

    A traced device array wraps a backend's array; ``array_of(x)`` is that array and
    ``module_of(x)`` the array module to hand out for it (one that records what is called).
    """

    __slots__ = ("array_of", "kind", "module_of")

    def __init__(self) -> None:
        self.kind: type = _NoTracedArrays
        self.array_of: Callable[[Any], Any] = lambda x: x
        self.module_of: Callable[[Any], ModuleType] = lambda x: np


_traced = _Traced()
#: Called as ``observer(copy, data, args)`` for each host/device copy while installed.
TransferObserver = Callable[[Callable[..., Any], Any, tuple[Any, ...]], Any]
_transfer_observer: TransferObserver | None = None


def install_traced_array(
    kind: type, array_of: Callable[[Any], Any], module_of: Callable[[Any], ModuleType]
) -> None:
    """Called once by a tracer (sadl-compile): objects of ``kind`` stand for a device array.

    ``is_array``, ``device_of`` and ``to_device`` see the array behind one (``array_of``),
    ``array_module`` answers ``module_of(x)``. The CPU path never meets one (traced host arrays
    are ndarrays).
    """
    _traced.kind = kind
    _traced.array_of = array_of
    _traced.module_of = module_of


def install_transfer_observer(observer: TransferObserver | None) -> None:
    """Route every copy between the host and a device through ``observer`` (None: copy).

    ``observer(copy, data, args)`` must return ``copy(data, *args)``; a tracer (sadl-compile)
    installs one while it traces, so a copy becomes part of the recorded program.
    """
    global _transfer_observer
    _transfer_observer = observer


def _transfer(copy: Callable[..., Any], data: Any, *args: Any) -> Any:
    """``copy(data, *args)`` (a backend's ``to_host`` / ``from_host``), seen by the observer."""
    observer = _transfer_observer
    return copy(data, *args) if observer is None else observer(copy, data, args)


def plugin_registry() -> Any:
    """The plugin registry (discovering plugins on first use): its ``records(kind)`` and
    ``generation`` (bumped by every reload); the NumPy dispatch reads its op table here.
    """
    return _load_plugins()


def value_dependent(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that ``fn`` (an op's forward or backward helper) branches on its inputs' values.

    Eager calls run ``fn`` as it is. A tracer (``sadl.compile``) that installed an observer
    (:func:`install_value_dependent_observer`) records each call of ``fn`` whole, as one call it
    makes again on every replay, instead of freezing the branches the first call took.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        observer = _value_dependent_observer
        return fn(*args, **kwargs) if observer is None else observer(fn, args, kwargs)

    return call


def install_value_dependent_observer(observer: Callable[..., Any] | None) -> None:
    """Route every call of a :func:`value_dependent` function through ``observer(fn, args,
    kwargs)`` (None: call it), which must return ``fn(*args, **kwargs)``.
    """
    global _value_dependent_observer
    _value_dependent_observer = observer


_value_dependent_observer: Callable[..., Any] | None = None


def install_plugin_loader(loader: Callable[[], object]) -> None:
    """Called once by the plugin host: ``loader()`` discovers plugins (which fills the table)."""
    global _load_plugins
    _load_plugins = loader


def install_backends(
    records: Mapping[str, BackendDef], contested: Mapping[str, Exception] | None = None
) -> None:
    """Called by the plugin host after each discovery: the backends by device type, and why
    each device type that plugins contest is served by none of them.
    """
    with _table.lock:
        _table.records = {"cpu": CPU_BACKEND, **records}
        _table.contested = dict(contested or {})
        _table.aliases = {}
        _table.loaded = {}
        _table.by_type = {}
        _table.not_arrays = set()
        _table.installed = True


def _ensure_installed() -> None:
    # Never called with the table's lock held: loading takes the plugin host's lock, and the
    # host, once loaded, takes the table's lock to install the records.
    if not _table.installed:
        _load_plugins()


def backend_names() -> list[str]:
    """The registered device types (``["cpu", "cuda", ...]``)."""
    _ensure_installed()
    hidden = set(_table.aliases.values()) - set(_table.aliases)
    names = [n for n in _table.records if n not in hidden]
    return names + [a for a in _table.aliases if a not in names]


def _record_for(name: str) -> BackendDef:
    if name in _table.aliases:
        return _table.records[_table.aliases[name]]
    if name in set(_table.aliases.values()):
        raise ValueError(f"device type {name!r} is serving {_alias_of(name)!r} at the moment")
    record = _table.records.get(name)
    if record is None and name in _table.contested:
        raise _table.contested[name]
    if record is None:
        known = ", ".join(repr(n) for n in backend_names())
        raise ValueError(
            f"unknown device type {name!r}: the registered device types are {known} (plugins "
            "add more through the register_backends hook)"
        )
    return record


def _alias_of(name: str) -> str:
    return next(a for a, b in _table.aliases.items() if b == name)


def backend(device_type: str) -> Backend:
    """The backend serving ``device_type``, its array module imported (a clear error if absent)."""
    found = _table.loaded.get(device_type)
    if found is not None:
        return found
    _ensure_installed()
    with _table.lock:
        record = _record_for(device_type)
        try:
            module = importlib.import_module(record.module)
            types = tuple(_import_attribute(path) for path in record.array_types)
        except ImportError as exc:
            text = record.install_hint() if callable(record.install_hint) else record.install_hint
            hint = f": {text}" if text else ""
            raise RuntimeError(
                f"device type {device_type!r} needs the array module {record.module!r}, which "
                f"does not import ({exc}){hint}"
            ) from exc
        found = Backend(device_type, record, module, types)
        _table.loaded[device_type] = found
        for t in types:
            _table.by_type[t] = found
        _table.not_arrays.clear()
        return found


def _import_attribute(path: str) -> Any:
    module_name, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def _backend_of_type(kind: type) -> Backend | None:
    """The backend owning arrays of type ``kind`` (None for anything else), cached per type."""
    found = _table.by_type.get(kind)
    if found is not None or kind in _table.not_arrays:
        return found
    if kind.__module__.partition(".")[0] in ("numpy", "builtins") or issubclass(kind, TensorBase):
        _table.not_arrays.add(kind)  # NumPy scalars, Python values, Tensors: no plugin needed
        return None
    _ensure_installed()
    with _table.lock:
        # Only libraries already imported can have made this object: load their backends.
        served = {**{n: n for n in _table.records}, **_table.aliases}
        hidden = set(_table.aliases.values()) - set(_table.aliases)
        for device_type, name in served.items():
            if device_type in hidden or device_type in _table.loaded:
                continue
            roots = {p.split(".")[0] for p in _table.records[name].array_types}
            if all(root in sys.modules for root in roots):
                backend(device_type)
        found = _table.by_type.get(kind)
        if found is None:
            found = next(
                (b for t, b in _table.by_type.items() if issubclass(kind, t)),
                None,
            )
        if found is None:
            _table.not_arrays.add(kind)
        else:
            _table.by_type[kind] = found
        return found


def parse_device(spec: str | Device | int | None) -> Device:
    """Turn ``"cpu"``, ``"cuda"``, ``"cuda:1"`` (or a Device) into a Device; reject the rest.

    Any registered device type works the same way (``"name"`` means ``"name:0"``); an int ``N``
    means ``"cuda:N"``, as torch and py-sadl read it.
    """
    if spec is None:
        return CPU
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return Device("cuda", spec)
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
    text = spec.strip().lower()
    if text == "cpu":
        return CPU
    name, colon, number = text.partition(":")
    if (colon and not number.isdigit()) or not name.isidentifier():
        raise ValueError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")
    if name == "cpu":
        raise ValueError(f"unknown device {spec!r}: the CPU has no index, write 'cpu'")
    _ensure_installed()
    _record_for(name)
    return Device(name, int(number) if colon else 0)


def is_array(value: Any) -> bool:
    """True for an array of any registered backend (a NumPy or CuPy ndarray, ...)."""
    if isinstance(value, _ndarray):
        return True
    kind = type(value)
    if kind is _traced.kind:
        return True
    if kind in _table.not_arrays:  # scalars, Tensors, None: the common answer, looked up once
        return False
    return _backend_of_type(kind) is not None


def array_module(data: Any) -> ModuleType:
    """The array module owning ``data``, an array or a Tensor (``numpy`` for anything else).

    This is the one way device code picks its functions: ``xp = array_module(x)``, then
    ``xp.zeros_like``, ``xp.arange``, ``xp.eye``..., so nothing is made on the host for a
    device computation (backward rules receive Tensors under ``create_graph=True``).
    """
    if isinstance(data, _host_types):
        return np
    found = _backend_of_type(type(data))
    if found is None:
        if type(data) is _traced.kind:
            return _traced.module_of(data)
        return array_module(data.data) if isinstance(data, TensorBase) else np
    return found.module


def device_of(data: Any) -> Device:
    """The Device an array or Tensor lives on (the CPU for NumPy data and anything else)."""
    if isinstance(data, _host_types):
        return CPU
    if type(data) is _traced.kind:
        data = _traced.array_of(data)
    found = _backend_of_type(type(data))
    if found is None:
        return device_of(data.data) if isinstance(data, TensorBase) else CPU
    return found.device(data)


def ensure_same_device(arrays: tuple[Any, ...] | list[Any], what: str) -> None:
    """Raise a clear error when ``arrays`` (plain values are ignored) span several devices."""
    seen: Device | None = None
    for data in arrays:
        if not is_array(data):
            continue
        dev = device_of(data)
        if seen is None:
            seen = dev
        elif dev != seen:
            raise RuntimeError(
                f"{what}: expected all tensors on one device, found {seen} and {dev}; "
                "move them with .to(device) first"
            )


def to_device(data: Any, device: str | Device | int) -> Any:
    """Copy ``data`` to ``device`` (no copy when it is already there)."""
    target = parse_device(device)
    source = None if isinstance(data, _host_types) else _backend_of_type(type(data))
    if source is None and type(data) is _traced.kind:
        source = _backend_of_type(type(_traced.array_of(data)))
    if target.type == "cpu":
        if isinstance(data, _ndarray):
            return data
        return np.asarray(data if source is None else _transfer(source.record.to_host, data))
    dest = backend(target.type)
    index = target.index or 0
    if source is dest and device_of(data).index == index:
        return data
    count = dest.record.device_count()
    if index >= count:
        raise RuntimeError(
            f"device {target} is not available: found {count} {target.type} device(s)"
        )
    host = np.asarray(data if source is None else _transfer(source.record.to_host, data))
    return _transfer(dest.record.from_host, host, index)


def synchronize(device: str | Device) -> None:
    """Wait until the work queued on ``device`` is done (a no-op on the CPU)."""
    target = parse_device(device)
    if target.type != "cpu":
        backend(target.type).record.synchronize(target.index or 0)


def match_key(key: Any, like: Any) -> Any:
    """``key`` ready to index ``like``: on a device, Tensors in it replaced by their arrays and
    NumPy index arrays copied there (a no-op on the CPU, where NumPy reads both itself).
    """
    if isinstance(like, _ndarray):
        return key
    if type(like) is _traced.kind:
        like = _traced.array_of(like)
    found = _backend_of_type(type(like))
    if found is None:
        return key
    index = int(found.record.device_index(like))

    def fit(k: Any) -> Any:
        if isinstance(k, TensorBase):
            k = k.data  # type: ignore[attr-defined]
        return _transfer(found.record.from_host, k, index) if isinstance(k, _ndarray) else k

    return tuple(fit(k) for k in key) if isinstance(key, tuple) else fit(key)


def scatter_add(target: Any, key: Any, values: Any) -> None:
    """``target[key] += values`` where repeated indices in ``key`` all accumulate."""
    if isinstance(target, _ndarray):
        np.add.at(target, key, values)
        return
    array_module(target).add.at(target, key, values)  # CuPy >= 12 has add.at too


_cupy: ModuleType | None = None
_cupy_checked = False


def cupy_or_none() -> ModuleType | None:
    """CuPy if it imports, else None (checked once, silently)."""
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            _cupy = importlib.import_module("cupy")
        except Exception:
            _cupy = None
    return _cupy


@contextlib.contextmanager
def _serve_as(device_type: str, name: str) -> Iterator[None]:
    """Serve ``device_type`` devices from backend ``name`` (``sadl.testing.serve_device_as``)."""
    _ensure_installed()
    with _table.lock:
        if name not in _table.records:
            _record_for(name)  # raises, naming the registered device types
        saved = (dict(_table.aliases), _table.loaded, _table.by_type, _table.not_arrays)
        _table.aliases = {**_table.aliases, device_type: name}
        _table.loaded, _table.by_type, _table.not_arrays = {}, {}, set()
    try:
        yield
    finally:
        with _table.lock:
            _table.aliases, _table.loaded, _table.by_type, _table.not_arrays = saved
