"""``sadl.compile``: trace a function once per signature, then replay the recorded array calls.

The first call with a new *signature* (the arguments' shapes, dtypes, devices, layouts,
``requires_grad``; Python values among the arguments; grad mode and default dtype) runs the
function for real under the tracer and compiles what it recorded; later calls with the same
signature replay it. Before a replay the assumptions the trace made are checked (parameters still
hold the same arrays, modules' training flags are unchanged, ``.grad`` fields are still None or
not): when one fails the function is traced again. Entries are kept in a small LRU cache, and a
function that keeps retracing gets a ``CompileWarning`` saying why.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sadl import CompileWarning, Function, Optimizer, Tensor, get_default_dtype, is_grad_enabled
from sadl.backends import device_of, is_array

from sadl_compile import show  # noqa: F401  (installs str(graph))
from sadl_compile.capture import Capture
from sadl_compile.codegen import GuardFailedError, Program, StaleTraceError, generate
from sadl_compile.cudagraph import generate_graphed, unsupported
from sadl_compile.hooks import tracing
from sadl_compile.ir import Graph
from sadl_compile.pipeline import Options, run_passes
from sadl_compile.regions import OpRecorder
from sadl_compile.traced import ACTIVE

__all__ = ["CompiledFunction", "compile"]

_ndarray = np.ndarray
_COLLECT_ABOVE = 32 << 20  # bytes of temporaries
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def compile(
    fn: Callable[..., Any] | None = None,
    *,
    fusion: bool = True,
    passes: Sequence[str] | None = None,
    cache_size: int = 8,
    warn_after: int = 8,
    cuda_graph: bool = False,
) -> Any:
    """Compile ``fn`` (a function of tensors and arrays) into a traced, replayed program.

    Usable as ``sadl.compile(fn)``, ``@sadl.compile`` or ``@sadl.compile(fusion=False)``.
    ``fusion=False`` turns off the passes that change how results are computed (elementwise
    fusion): replays are then identical to eager bit for bit. ``passes`` names the passes to run
    (default: every registered one, in order). ``cache_size`` bounds the signatures kept;
    ``warn_after`` traces of one function raise a ``CompileWarning``. ``cuda_graph=True`` replays
    a trace of CuPy array calls as one CUDA graph where the trace allows it (the notes at the end
    of ``compiled.graph`` say whether it does and why not).
    """
    if fn is None:
        return functools.partial(
            compile,
            fusion=fusion,
            passes=passes,
            cache_size=cache_size,
            warn_after=warn_after,
            cuda_graph=cuda_graph,
        )
    if not callable(fn):
        raise TypeError(f"sadl.compile: expected a function, got {type(fn).__name__}")
    if cache_size < 1:
        raise ValueError(f"sadl.compile: cache_size must be at least 1, got {cache_size}")
    options = Options(
        fusion=bool(fusion),
        passes=tuple(passes) if passes is not None else None,
        cuda_graph=bool(cuda_graph),
    )
    return CompiledFunction(fn, options, cache_size, warn_after)


@dataclass
class _Entry:
    """One compiled signature: its graph and replay program."""

    graph: Graph
    program: Program
    calls: int = 0
    fallbacks: int = 0


@dataclass
class CompileStats:
    """How a compiled function has been used (``compiled.stats``)."""

    traces: int = 0
    replays: int = 0
    fallbacks: int = 0
    reasons: list[str] = field(default_factory=list)  #: why each trace happened


class CompiledFunction:
    """The result of ``sadl.compile(fn)``: call it like ``fn``.

    ``graph`` is the IR of the most recent trace (``print(compiled.graph)``), ``source`` the
    generated replay code, ``stats`` the counts of traces, replays and eager fallbacks.
    """

    def __init__(
        self, fn: Callable[..., Any], options: Options, cache_size: int, warn_after: int
    ) -> None:
        functools.update_wrapper(self, fn)
        self.__name__: str = getattr(fn, "__name__", type(fn).__name__)
        self.fn = fn
        self.options = options
        self.cache_size = cache_size
        self.warn_after = warn_after
        self.stats = CompileStats()
        # signature -> the traces made for it (variants differ in what their guards assume:
        # a module's training flag, whether a .grad was None ...), most recent first
        self._cache: OrderedDict[Any, list[_Entry]] = OrderedDict()
        self._last: _Entry | None = None
        self._lock = threading.Lock()
        self._warned = False

    @property
    def graph(self) -> Graph | None:
        """The IR of the most recently traced (or replayed) signature."""
        return None if self._last is None else self._last.graph

    @property
    def source(self) -> str:
        """The generated replay function of the most recent signature."""
        return "" if self._last is None else self._last.program.source

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE.tracer is not None:  # inside another trace: part of that one
            return self.fn(*args, **kwargs)
        arrays: list[Any] = []
        tensors: list[Any] = []
        key = (
            _signature(args, arrays, tensors),
            _signature(kwargs, arrays, tensors),
            is_grad_enabled(),
            get_default_dtype(),
            _aliasing(arrays),
        )
        with self._lock:
            variants = self._cache.get(key)
            if variants is None:
                reason = "first call" if not self._cache else "a new signature"
                return self._trace(key, args, kwargs, reason)
            self._cache.move_to_end(key)
            reason = ""
            for entry in variants:
                try:
                    result = entry.program.run(arrays, tensors)
                except StaleTraceError as stale:
                    reason = str(stale)
                    continue
                except GuardFailedError:
                    entry.fallbacks += 1
                    self.stats.fallbacks += 1
                    return self.fn(*args, **kwargs)
                entry.calls += 1
                self.stats.replays += 1
                self._last = entry
                return result
            return self._trace(key, args, kwargs, reason)

    def _trace(self, key: Any, args: Any, kwargs: Any, reason: str) -> Any:
        self.stats.traces += 1
        self.stats.reasons.append(reason)
        if self.stats.traces > self.warn_after and not self._warned:
            self._warned = True
            warnings.warn(
                f"sadl.compile: {self.__name__} was traced {self.stats.traces} times (the last "
                f"because of {reason}); tracing costs more than it saves. Keep the arguments' "
                "shapes and the modules' modes steady, or leave this function uncompiled.",
                CompileWarning,
                stacklevel=3,
            )
        capture = Capture(getattr(self.fn, "__name__", "fn"))
        with tracing(capture), OpRecorder(capture).installed():
            try:
                # What the names the function reads hold at entry, read with the tracer
                # installed: sadl's own tracer slots (sadl.backends) then hold what every later
                # call finds there, so they never look rebound.
                names = name_guards(self.fn)
                traced_args = capture.adopt_arguments(args)
                traced_kwargs = capture.adopt_arguments(kwargs)
                capture.adopt_names(names)  # after the arguments: an argument stays one
                result = self.fn(*traced_args, **traced_kwargs)
                graph, first = capture.finish(result)
            finally:
                capture.restore()
        graph.meta["name_guards"] = names
        # The trace's arrays held in cycles are freed before the plan's buffers come, for a
        # lower peak; a full collection costs ~80 ms at a GPT's object count, too much for a
        # small graph whose trace left little memory behind.
        if sum(v.nbytes for v in graph.values if v.storage.kind == "temp") > _COLLECT_ABOVE:
            gc.collect()
            _return_freed_memory()
        run_passes(graph, self.options)
        entry = _Entry(graph, _program(graph, self.options))
        self._cache.setdefault(key, []).insert(0, entry)
        self._cache.move_to_end(key)
        while sum(len(v) for v in self._cache.values()) > self.cache_size:
            oldest = next(iter(self._cache))
            self._cache[oldest].pop()
            if not self._cache[oldest]:
                del self._cache[oldest]
        self._last = entry
        return first

    def __repr__(self) -> str:
        traces = sum(len(v) for v in self._cache.values())
        return f"<sadl.compile {self.__name__}: {traces} traces kept>"


def _program(graph: Graph, options: Options) -> Program:
    """The replay program of ``graph``: through a CUDA graph when asked for and possible."""
    if options.cuda_graph:
        reason = unsupported(graph)
        if reason is None:
            return generate_graphed(graph)
        graph.notes.append(f"cuda_graph: not used: {reason}")
    return generate(graph)


def _return_freed_memory() -> None:
    """Ask glibc to hand freed memory back to the system (where there is a glibc).

    The traced call allocated every temporary of an eager step; without this, memory it freed
    stays in the process and the memory plan's buffers come on top of it (peak RSS).
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim: Any = None


#: What a name guard watches: state (tensors, arrays, modules, optimizers) and Python numbers.
_WATCHED: tuple[type, ...] = (Tensor, np.ndarray, np.generic, Function, Optimizer, *_SCALARS)


def name_guards(fn: Any, depth: int = 3) -> list[tuple[str, Any, Any, Any]]:
    """Guards on the names ``fn`` reads: globals and closure cells holding state, and the
    attributes (parameters, buffers, submodules) of the modules among them, followed through the
    functions and bound methods they name (``depth`` levels). A replay checks each still holds the
    same object (``G = G + x``, ``lin.weight = Parameter(...)`` retrace).
    """
    found: list[tuple[str, Any, Any, Any]] = []
    seen: set[int] = set()

    def watch(kind: str, holder: Any, key: Any, obj: Any, level: int) -> None:
        if isinstance(obj, _WATCHED):
            found.append((kind, holder, key, obj))
            if isinstance(obj, Function) and id(obj) not in seen:
                seen.add(id(obj))
                for module in obj.modules():
                    for name, value in vars(module).items():
                        if isinstance(value, Tensor | Function | np.ndarray):
                            found.append(("attr", module, name, value))
        elif isinstance(obj, dict | list) and level and id(obj) not in seen:
            seen.add(id(obj))  # a container the function reads from: its items are names too
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            for k, v in list(items)[:64]:
                watch("item", obj, k, v, level - 1)
        elif level and (callable(obj) or hasattr(obj, "__func__")):
            visit(obj, level - 1)

    def visit(f: Any, level: int) -> None:
        if id(f) in seen:
            return
        seen.add(id(f))
        owner = getattr(f, "__self__", None)
        if owner is not None and not isinstance(owner, type(np)):
            watch("self", f, None, owner, level)
        f = getattr(f, "__func__", f)
        if isinstance(f, Function):
            watch("self", f, None, f, level)
            f = type(f).forward
        code = getattr(f, "__code__", None)
        if code is None:
            return
        scope = getattr(f, "__globals__", {})
        for name in _code_names(code):
            if name in scope:
                watch("global", scope, name, scope[name], level)
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                watch("cell", cell, name, cell.cell_contents, level)
            except ValueError:  # an empty cell
                continue

    visit(fn, depth)
    return found


def _code_names(code: Any) -> set[str]:
    """Global names a code object (and the functions defined in it) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _aliasing(arrays: list[Any]) -> tuple[int, ...] | None:
    """Which argument arrays are one array passed again (None when all are distinct)."""
    if len(arrays) < 2 or len({id(a) for a in arrays}) == len(arrays):
        return None
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(a), i) for i, a in enumerate(arrays))


def _signature(tree: Any, arrays: list[Any], tensors: list[Any]) -> Any:
    """A hashable key of the arguments; collects their arrays and tensors in walking order."""
    if isinstance(tree, Tensor):
        data = tree.data
        arrays.append(data)
        tensors.append(tree)
        return (
            "T",
            type(tree),
            data.shape,
            data.dtype,
            data.strides,
            type(data),
            tree.requires_grad,
            tree.grad_fn is not None,
            None if type(data) is _ndarray else device_of(data),
        )
    kind = type(tree)
    if kind is _ndarray:
        arrays.append(tree)
        return ("A", tree.shape, tree.dtype, tree.strides)
    if kind is tuple or kind is list:
        return (kind, *(_signature(x, arrays, tensors) for x in tree))
    if kind is dict:
        return (dict, *((k, _signature(v, arrays, tensors)) for k, v in tree.items()))
    if kind is float or kind is complex:  # 0.0 and -0.0 differ; a nan equals itself
        return (kind, repr(tree))
    if isinstance(tree, _SCALARS):
        return (kind, tree)
    if is_array(tree):  # a device array
        arrays.append(tree)
        return ("D", kind, tree.shape, tree.dtype, tree.strides, device_of(tree))
    return ("O", tree)  # any other object: compared by identity (held by the cache)
