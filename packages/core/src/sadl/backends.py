"""Devices and array modules: the only place that knows one array library from another.

Engine code never branches on the backend: it asks this module for the array module of some data
(``array_module``), the device it lives on (``device_of``) or to move it (``to_device``). Device
types are ``BackendDef`` records registered through the ``register_backends`` hook: NumPy
(``"cpu"``) and CuPy (``"cuda"``) by core's built-in plugin, any other by a plugin. The plugin
host hands down the registry once (``install_plugin_loader``); this module reads the records
from it, again whenever its ``generation`` changes, and the first question about a device that
is not the CPU makes it discover the plugins.

NumPy arrays never reach the table: every function checks for them first, so the CPU path costs one
``isinstance`` (the autograd kernel checks for them itself and does not call here at all). A tracer
(sadl-compile) sees the copies between devices through ``install_tracer``. A backend's array module
is imported on first need, so ``import sadl`` stays silent and fast where CuPy is absent.

``matmul`` is ``np.matmul`` on the BLAS thread count sadl's policy picks for the product's size
(docs/getting-started.md, "Threads"): the products of plugin ops and of compiled replays call it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from sadl import _tensor_base
from sadl._plugin_records import BackendDef
from sadl._tensor_base import TRACING, TensorBase
from sadl._threads import matmul, on_threads, threads_for

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
    "Tracer",
    "current_tracer",
    "install_plugin_loader",
    "install_tracer",
    "plugin_registry",
    "is_array",
    "match_key",
    "matmul",
    "on_threads",
    "parse_device",
    "scatter_add",
    "synchronize",
    "threads_for",
    "to_device",
    "value_dependent",
    "Where",
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
Where = str | Device | None  # a device spec; None: the CPU, or where the data is


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
    generator=lambda seed, index: np.random.default_rng(seed),
    synchronize=lambda index: None,  # NumPy runs synchronously: nothing is ever queued
)


class Backend:
    """A registered ``BackendDef`` with its array module imported: what the engine talks to.

    ``name`` is the device type it serves (normally the record's name; ``sadl.testing`` can
    serve one device type from another backend), ``module`` the array module.
    """

    __slots__ = ("module", "name", "record", "types")

    def __init__(self, name: str, record: BackendDef, module: ModuleType, types: tuple[type, ...]):
        self.name, self.record, self.module, self.types = name, record, module, types

    def device(self, array: Any) -> Device:
        """The Device ``array`` (one of this backend's arrays) lives on."""
        return Device(self.name, int(self.record.device_index(array)))

    def __repr__(self) -> str:
        return f"<backend {self.name} ({self.record.module})>"


class _Table:
    """The registered backends, and the array types seen so far (filled lazily, under a lock)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.registry: Any = None  # the plugin registry the records were read from
        self.generation = -1  # and its generation then
        self.records: dict[str, BackendDef] = {"cpu": CPU_BACKEND}
        self.aliases: dict[str, str] = {}  # device type -> name of the backend serving it
        self.loaded: dict[str, Backend] = {}  # device type -> Backend, once imported
        self.by_type: dict[type, Backend] = {}  # array type -> Backend
        self.not_arrays: set[type] = set()  # types known to belong to no backend
        self.contested: dict[str, Exception] = {}  # device types two plugins register


_table = _Table()
_plain_kinds: set[type] = set()  # types no backend can own (NumPy's scalars, Python's, Tensors)


def _no_loader() -> None:
    """Stand-in until the plugin host installs the real loader (only the CPU is known)."""


_load_plugins: Callable[[], Any] = _no_loader


class Tracer(Protocol):
    """What a tracer (sadl-compile's ``sadl.compile``) hands :func:`install_tracer`: sadl reports
    to the tracer installed in the current thread, and to no other.

    * ``array_kind``: the type of its stand-ins for device arrays; ``array_of(x)`` is the
      backend's array behind one, ``module_of(x)`` the array module to hand out for it (one
      that records what is called), asked too for host data (and None) in its own thread, so
      what op code makes with ``array_module(x).zeros(...)`` is seen. ``is_array``,
      ``device_of`` and ``to_device`` see the array behind one; the CPU path never meets one
      (traced host arrays are ndarrays).
    * ``on_read(obj, name, value)``: a read of a Tensor's ``data`` or ``grad`` or of a
      Module's ``training``; what it returns is what the reader gets. ``on_write(obj, name,
      value)``: a write of one, told before it happens. A tracer reads and writes the slots
      behind a Tensor's (``_data``, ``_grad``) without being told.
    * ``on_step(optimizer, closure, step)``: ``optimizer.step(closure)``; it must return what
      ``step(optimizer, closure)`` (the step itself) returns.
    * ``on_generator(generator, seeded)``: a ``sadl.random.Generator`` was made (``seeded``:
      by ``sadl.manual_seed``, as the new default); ``on_rng_state(state, setting)``: a call
      of ``sadl.random.get_rng_state`` (``setting`` False, with the state it returns) or of
      ``set_rng_state`` (True, before the state is set).
    * ``on_transfer(copy, data, args)``: every copy between the host and a device; it must
      return ``copy(data, *args)``, so a copy becomes part of the recorded program.
    * ``on_value_dependent(fn, args, kwargs)``: every call of a :func:`value_dependent`
      function; it must return ``fn(*args, **kwargs)``.
    * ``on_draw(generator, method, args, kwargs)``: every draw of a ``sadl.random.Generator``
      and of a device generator handed out meanwhile; it draws the numbers itself
      (``sadl.random.observed_device_generator`` finds a device generator's device).
    """

    @property
    def array_kind(self) -> type: ...
    def array_of(self, x: Any) -> Any: ...
    def module_of(self, x: Any) -> ModuleType: ...
    def on_read(self, obj: Any, name: str, value: Any) -> Any: ...
    def on_write(self, obj: Any, name: str, value: Any) -> None: ...
    def on_step(self, optimizer: Any, closure: Any, step: Callable[..., Any]) -> Any: ...
    def on_generator(self, generator: Any, seeded: bool) -> None: ...
    def on_rng_state(self, state: Any, setting: bool) -> None: ...
    def on_transfer(self, copy: Callable[..., Any], data: Any, args: tuple[Any, ...]) -> Any: ...
    def on_value_dependent(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any: ...
    def on_draw(self, generator: Any, method: str, args: Any, kwargs: Any) -> Any: ...


class _NoTracedArrays:
    """No object is of this type: the stand-in array kind before a tracer is installed."""


# The last installed tracer and its array kind: a traced array can outlive its trace.
_arrays_tracer: Any = None
_traced_kind: type = _NoTracedArrays


def install_tracer(tracer: Tracer | None) -> None:
    """Make ``tracer`` see what this thread does (None: nobody does); other threads are not seen.

    A tracer installs itself while it traces and removes itself afterwards; its array kind
    stays known after that (a traced array that outlives its trace is seen as its array).
    """
    global _arrays_tracer, _traced_kind
    with _table.lock:
        if tracer is not None:
            _arrays_tracer, _traced_kind = tracer, tracer.array_kind
        _tensor_base.watching += (tracer is not None) - (TRACING.tracer is not None)
        TRACING.tracer = tracer


def current_tracer() -> Tracer | None:
    """The tracer installed in this thread (None: none is)."""
    return TRACING.tracer if _tensor_base.watching else None  # type: ignore[no-any-return]


def _transfer(copy: Callable[..., Any], data: Any, *args: Any) -> Any:
    """``copy(data, *args)`` (a backend's ``to_host`` / ``from_host``), seen by the tracer."""
    tracer = current_tracer()
    return copy(data, *args) if tracer is None else tracer.on_transfer(copy, data, args)


def plugin_registry() -> Any:
    """The plugin registry (discovering plugins on first use): its ``records(kind)`` and
    ``generation`` (bumped by every reload); the NumPy dispatch reads its op table here, and
    this module its device backends.
    """
    return _load_plugins()


def value_dependent(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that ``fn`` (an op's forward or backward helper) branches on its inputs' values.

    Eager calls run ``fn`` as it is. A tracer (``sadl.compile``, see :func:`install_tracer`)
    records each call of ``fn`` whole, as one call it makes again on every replay, instead of
    freezing the branches the first call took.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            return fn(*args, **kwargs)
        return tracer.on_value_dependent(fn, args, kwargs)

    return call


def install_plugin_loader(loader: Callable[[], Any]) -> None:
    """Called once by the plugin host: ``loader()`` is the registry (discovering plugins on
    first use), whose ``records("backends")`` this module reads.
    """
    global _load_plugins
    _load_plugins = loader


def _sync() -> None:
    """Read the backends from the plugin registry again when it changed (a discovery, a reload).

    Never called with the table's lock held: asking for the registry may run discovery, which
    takes the plugin host's lock (and a plugin being imported may ask about a device).
    """
    reg = _load_plugins()
    if reg is None or (reg is _table.registry and reg.generation == _table.generation):
        return  # None: the plugin host is not imported yet, only the CPU is known
    with _table.lock:
        _table.records = {"cpu": CPU_BACKEND, **reg.records("backends")}
        _table.contested = {name: why for name, (_, why) in reg.unserved("backends").items()}
        _table.aliases, _table.loaded, _table.by_type, _table.not_arrays = {}, {}, {}, set()
        _table.registry, _table.generation = reg, reg.generation


def backend_names() -> list[str]:
    """The registered device types (``["cpu", "cuda", ...]``)."""
    _sync()
    hidden = set(_table.aliases.values()) - set(_table.aliases)
    names = [n for n in _table.records if n not in hidden]
    return names + [a for a in _table.aliases if a not in names]


def _record_for(name: str) -> BackendDef:
    if name in _table.aliases:
        return _table.records[_table.aliases[name]]
    if name in set(_table.aliases.values()):
        alias = next(a for a, b in _table.aliases.items() if b == name)
        raise ValueError(f"device type {name!r} is serving {alias!r} at the moment")
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


def backend(device_type: str) -> Backend:
    """The backend serving ``device_type``, its array module imported (a clear error if absent)."""
    _sync()
    found = _table.loaded.get(device_type)
    if found is not None:
        return found
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
    if kind in _plain_kinds:
        return None
    if kind.__module__.partition(".")[0] in ("numpy", "builtins") or issubclass(kind, TensorBase):
        _plain_kinds.add(kind)  # NumPy scalars, Python values, Tensors: no plugin is asked
        return None
    _sync()
    found = _table.by_type.get(kind)
    if found is not None or kind in _table.not_arrays:
        return found
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
            found = next((b for t, b in _table.by_type.items() if issubclass(kind, t)), None)
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
    _sync()
    _record_for(name)
    return Device(name, int(number) if colon else 0)


def is_array(value: Any) -> bool:
    """True for an array of any registered backend (a NumPy or CuPy ndarray, ...)."""
    if isinstance(value, _ndarray):
        return True
    kind = type(value)
    if kind is _traced_kind:
        return True
    if kind in _plain_kinds:  # scalars, Tensors, None: the common answer, looked up once
        return False
    return _backend_of_type(kind) is not None


def array_module(data: Any) -> ModuleType:
    """The array module owning ``data``, an array or a Tensor (``numpy`` for anything else;
    None: the host).

    This is the one way op code picks its functions and makes its arrays: ``xp =
    array_module(x)``, then ``xp.zeros``, ``xp.arange``, ``xp.eye``..., so nothing is made on
    the host for a device computation (backward rules receive Tensors under
    ``create_graph=True``), and a tracer sees what is made: in a thread where one is installed,
    host data gets the tracer's ``module_of(data)`` (test for the host with
    ``xp.__name__ == "numpy"``, not ``xp is np``).
    """
    if isinstance(data, _host_types) or data is None:
        # In a tracing thread the tracer hands out NumPy too: what op code allocates is seen.
        tracer = TRACING.tracer if _tensor_base.watching else None
        return np if tracer is None else tracer.module_of(data)
    if type(data) is _traced_kind:
        module: ModuleType = _arrays_tracer.module_of(data)
        return module
    found = _backend_of_type(type(data))
    if found is None:
        return array_module(data.data) if isinstance(data, TensorBase) else np
    return found.module


def _owned(data: Any) -> tuple[Any, Backend | None]:
    """``data`` (the array behind a traced stand-in) and the backend owning it (or None)."""
    if type(data) is _traced_kind:
        data = _arrays_tracer.array_of(data)
    return data, _backend_of_type(type(data))


def device_of(data: Any) -> Device:
    """The Device an array or Tensor lives on (the CPU for NumPy data and anything else)."""
    if isinstance(data, _host_types):
        return CPU
    data, found = _owned(data)
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
    if source is None and type(data) is _traced_kind:
        source = _backend_of_type(type(_arrays_tracer.array_of(data)))
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
    like, found = _owned(like)
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
    array_module(target).add.at(target, key, values)  # CuPy >= 12 has add.at too


@functools.cache
def cupy_or_none() -> ModuleType | None:
    """CuPy if it imports, else None (checked once, silently)."""
    try:
        return importlib.import_module("cupy")
    except Exception:
        return None


@contextlib.contextmanager
def _serve_as(device_type: str, name: str) -> Iterator[None]:
    """Serve ``device_type`` devices from backend ``name`` (``sadl.testing.serve_device_as``)."""
    _sync()
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
