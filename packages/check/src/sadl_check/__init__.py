"""sadl-check: what a plugin author runs on a plugin, and a picture of the autograd graph.

* ``check_op``, ``check_layer``, ``check_optimizer``: the conformance battery for one registered
  record (gradients in float64 against central differences, derived variants, dtypes, devices);
  ``sadl check-plugins`` runs them on everything every installed plugin registers.
* device-test helpers: ``available_devices``, ``move``, ``project``, ``assert_close``,
  ``serve_device_as``.
* ``sadl_check.torch_parity``: PyTorch as the reference for an op, in float64 (forward, gradient,
  double backward, singular points); torch is imported only when one of its checks is called.
* ``sadl_check.viz``: the graph behind a tensor as Graphviz DOT text (``sadl.viz``).
* ``sadl_check.calls.count_calls``: the calls a step makes, a load-independent overhead budget.

Installed, every name is also served under its old home in core: ``sadl.testing.check_op``,
``sadl.viz.to_dot``. ``sadl.testing.gradcheck`` itself stays in core.

    >>> import numpy as np, sadl
    >>> from sadl_check import check_op
    >>> check_op(sadl.ops.get("tanh")).ok
    True
"""

from __future__ import annotations

from sadl_check import viz
from sadl_check.checks import (
    CheckResult,
    OpReport,
    assert_close,
    available_devices,
    check_layer,
    check_op,
    check_optimizer,
    materialize,
    move,
    project,
    serve_device_as,
)

__all__ = [
    "CheckResult",
    "OpReport",
    "assert_close",
    "available_devices",
    "check_layer",
    "check_op",
    "check_optimizer",
    "materialize",
    "move",
    "project",
    "serve_device_as",
    "viz",
]
