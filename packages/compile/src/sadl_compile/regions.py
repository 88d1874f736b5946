"""Op applications in a trace: which registered op (and which backward rule) made which calls.

While a function is traced, core's ``sadl.plugins.application_hook`` brackets every op
application and backward rule; :class:`OpRecorder` marks the nodes recorded inside each with an
:class:`~sadl_compile.ir.OpRegion` (``Node.region``, the innermost one), so a pass sees both
levels: the NumPy calls, and the op (``layer_norm``) or rule (``layer_norm/backward``) that made
them, with its inputs, parameters and outputs as values. Nothing is recorded at replay.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sadl.plugins import application_hook

from sadl_compile.ir import OpRegion, Value
from sadl_compile.traced import TracedArray, TracedDeviceArray
from sadl_compile.tracer import Tracer

__all__ = ["OpRecorder"]


class OpRecorder:
    """The application hook of one trace: a region per op application, nested as they ran."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.current: OpRegion | None = None

    def installed(self) -> AbstractContextManager[None]:
        """The hook, installed in this thread for the block."""
        return application_hook(self.apply)

    def _value(self, x: Any) -> Any:
        """The value of a traced array (the tree mapped); anything else as it is."""
        if type(x) is TracedArray or type(x) is TracedDeviceArray:
            v = x._v
            return v if v is not None and self.tracer.owns(v) else None
        if isinstance(x, tuple | list):
            return type(x)(self._value(i) for i in x)
        if isinstance(x, dict):
            return {k: self._value(i) for k, i in x.items()}
        data = getattr(x, "data", None)  # a Tensor (a backward rule may be given Tensors)
        if type(data) is TracedArray:
            return self._value(data)
        return x

    def apply(
        self, op: Any, phase: str, run: Callable[[], Any], args: Any, params: dict[str, Any]
    ) -> Any:
        """Run one application, recording the region its calls belong to."""
        nodes = self.tracer.nodes
        start = len(nodes)
        region = OpRegion(op, phase, self._value(tuple(args)), self._value(dict(params)))
        region.parent = self.current
        self.current = region
        try:
            result = run()
        finally:
            self.current = region.parent
        for node in nodes[start:]:
            if node.region is None:
                node.region = region
        outs = result if isinstance(result, tuple | list) else (result,)
        region.outputs = tuple(v if type(v) is Value else None for v in map(self._value, outs))
        return result
