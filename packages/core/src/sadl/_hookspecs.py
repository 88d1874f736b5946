"""What a sadl plugin may do: the hook specifications, the single source of truth.

A plugin is a module (named by an entry point in the group ``sadl.plugins``) with functions
decorated by ``sadl.plugins.hookimpl`` and named after the hooks below. Each ``register_*`` hook
takes no arguments and returns an iterable of frozen records; sadl collects them per plugin, so
every name is attributed to the plugin that provides it. Core registers its own ops, optimizers
and commands through these same hooks.

The docstrings below are the hook reference: ``docs/hooks.md`` is generated from them
(``python tools/gen_hooks_doc.py``) and a docs test fails when the page is out of date.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import pluggy

from sadl._plugin_records import BackendDef, FormatDef, LayerDef, ModelDef, OptimizerDef
from sadl._records import OpDef

__all__ = ["KINDS", "RecordKind", "hookimpl", "hookspec", "records_hookspec"]

hookspec = pluggy.HookspecMarker("sadl")
hookimpl = pluggy.HookimplMarker("sadl")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RecordKind:
    """One kind of record: the hook that returns it, its type, and its name in messages."""

    hook: str
    record_type: type[Any]
    label: str

    @property
    def kind(self) -> str:
        """The registry name: the hook's name without ``register_`` (``compile_passes``)."""
        return self.hook.removeprefix("register_")


def records_hookspec(record_type: type, label: str) -> Callable[[F], F]:
    """Declare a ``register_<kind>`` hook of a plugin's own that returns ``record_type`` records.

    Use it instead of ``hookspec`` in the module a plugin adds through ``add_hookspecs``. sadl
    then collects the records like its own kinds: each one checked against ``record_type`` (a
    frozen dataclass with a ``name``), attributed to its plugin, conflicts reported, listed by
    ``sadl plugins``; ``sadl.plugins.records("<kind>")`` returns them by name. ``label`` names
    one record in messages (``"compile pass"``).
    """

    def declare(func: F) -> F:
        if not func.__name__.startswith("register_"):
            raise ValueError(f"records_hookspec: {func.__name__} must be named register_<kind>")
        func.sadl_records = RecordKind(func.__name__, record_type, label)  # type: ignore[attr-defined]
        return hookspec(func)  # type: ignore[no-any-return]

    return declare


@records_hookspec(OpDef, "op")
def register_ops() -> Iterable[OpDef]:
    """Return the ops this plugin provides, as ``OpDef`` records.

    ``OpDef(name, forward, backward, numpy_funcs=(), doc="", differentiable=True,
    composite=False, double_backward=True, examples=(), singular_points=())``. Each op is served as
    ``sadl.ops.<name>``; calling it with a Tensor records it on the autograd graph.

    * ``forward(*inputs, **params)`` receives plain arrays (NumPy or CuPy) and returns one array.
      Positional parameters of ``forward`` are the op's inputs; keyword-only ones are its
      (non-differentiable) params.
    * ``backward(grad, out, *inputs, **params)`` returns one gradient (or None) per input, at the
      broadcast output shape: the engine sums broadcast axes away and casts to the input dtype.
      It may also be a tuple of per-input rules, each returning that input's gradient only, so
      nobody pays for a gradient nobody needs. A single rule that declares a keyword parameter
      ``needs_input_grad`` receives one bool per input.
    * Written in NumPy vocabulary (``np.*`` functions and operators on the arguments), a rule runs
      unchanged on CuPy arrays and, under ``create_graph=True``, on Tensors: that is how
      higher-order gradients come for free. A rule that is not differentiable declares
      ``double_backward=False``; differentiating through it then raises a clear error.
      A matrix product written ``sadl.backends.matmul(a, b)`` (same arguments as ``np.matmul``)
      runs on the BLAS threads sadl picks for its size, as sadl's own products do.
    * ``numpy_funcs`` lists NumPy callables the op implements under dispatch, so ``np.tanh(t)``
      reaches it. Two ops claiming one NumPy callable is a conflict.
    * ``differentiable=False`` marks ops whose results never require grad (``argmax``,
      comparisons); ``composite=True`` marks an op written with other ops on Tensors (no
      ``backward``: the gradient flows through the ops it calls).
    * ``examples`` are ``Example(*inputs, domain=(lo, hi), **params)`` sample calls: a tuple of
      ints is a shape filled with random float64 values from ``domain``, a float array is used
      as given (both differentiated), anything else is a constant. ``sadl.testing.check_op`` and
      ``sadl check-plugins`` run gradcheck and gradgradcheck on every example and on the
      variants they derive from it (negative axes, 0-d inputs, an empty dimension, strided and
      transposed inputs, a broadcast input), in float64, float32 and the default dtype.
    * ``singular_points`` are ``Example`` calls at the points where the op is not smooth or a
      naive rule would divide by zero (``norm`` at 0, ``std`` of a constant, ``max`` with ties,
      ``x ** 0`` at 0). ``check_op`` requires a finite gradient there (never 0/0 = NaN) that
      lies between the one-sided difference quotients where the op is defined on both sides;
      compare it with PyTorch's in your tests where it is installed.

    Example::

        import numpy as np
        from sadl.plugins import Example, OpDef, hookimpl


        @hookimpl
        def register_ops():
            cube = OpDef(
                "cube",
                lambda x: x**3,
                (lambda g, out, x: 3 * g * x * x,),
                examples=(Example((3,)),),
            )
            return [cube]
    """
    raise NotImplementedError


@records_hookspec(LayerDef, "layer")
def register_layers() -> Iterable[LayerDef]:
    """Return layer classes as ``LayerDef(name, cls, examples=())`` records.

    ``cls`` is a ``sadl.nn.Module`` subclass; it is served as ``sadl.nn.<name>`` and, for the
    Quick Start style, ``sadl.<name>``. Name parameters and their shapes after ``torch.nn`` so a
    PyTorch ``state_dict`` loads by name.

    ``examples`` are what ``sadl check-plugins`` (``sadl.testing.check_layer``) builds and runs:
    in each ``Example`` the positional inputs go to the forward pass (a tuple of ints is a shape
    of random floats, an integer array a constant such as token ids) and the keywords go to the
    constructor. The check builds the layer, runs it forward and backward, requires a finite
    gradient of the right shape and dtype on every parameter, compares sampled elements of the
    gradients with float64 central differences (in eval mode), and checks that nothing is
    recorded under ``no_grad``. A layer without examples fails the check, saying so::

        import numpy as np
        import sadl
        from sadl.plugins import Example, LayerDef, hookimpl
        from sadl.testing import check_layer


        class Scale(sadl.nn.Module):
            def __init__(self, num_features):
                super().__init__()
                self.weight = sadl.Parameter(np.ones(num_features, np.float32))

            def forward(self, x):
                return x * self.weight


        @hookimpl
        def register_layers():
            return [LayerDef("Scale", Scale, examples=(Example((4, 3), num_features=3),))]


        assert check_layer(register_layers()[0]).ok
    """
    raise NotImplementedError


@records_hookspec(OptimizerDef, "optimizer")
def register_optimizers() -> Iterable[OptimizerDef]:
    """Return optimizers and schedulers as ``OptimizerDef(name, cls, examples=())`` records.

    The classes are served as ``sadl.optim.<name>`` and ``sadl.<name>``. An optimizer subclasses
    ``sadl.optim.Optimizer``, passes ``super().__init__(params, defaults)`` its hyperparameters
    (``defaults``, a dict) and implements one method; the base class owns the loop, the param
    groups, ``zero_grad``, ``state_dict`` and ``load_state_dict``.

    ``update(param, grad, state, group) -> None``, the contract:

    * ``step()`` calls it once per parameter that has a gradient, under ``no_grad``; frozen
      parameters and parameters without a gradient are skipped.
    * ``param`` is the Parameter: change ``param.data`` in place (``param.data -= ...``) and keep
      its dtype and device. Never rebind it to a new array of another dtype; the base class bumps
      its version counter afterwards.
    * ``grad`` is a plain array (NumPy or CuPy) of the parameter's shape, dtype and device.
    * ``state`` is this parameter's dict, empty on the first call and kept in
      ``optimizer.state[param]``; whatever ``update`` puts there (arrays, numbers) is what
      ``state_dict()`` saves, so put everything the next step needs there.
    * ``group`` is the parameter's param group: ``defaults`` overridden per group and by
      schedulers. Read hyperparameters from ``group`` (``group["lr"]``), never from ``self``.
    * Reject bad hyperparameters in ``check_hyperparameters(group)`` (call ``super()`` first).

    A scheduler is any other class; it takes the optimizer as its first argument and changes
    ``group["lr"]`` in ``step()``. ``examples`` hold constructor keywords for ``sadl
    check-plugins`` (``sadl.testing.check_optimizer``: the defaults when there are none), which
    takes two steps on float32 and float64 parameters and checks the dtype, that a parameter
    without gradient is untouched, and that stepping on after ``state_dict`` and
    ``load_state_dict`` gives the same result::

        import numpy as np
        import sadl
        from sadl.plugins import Example, OptimizerDef, hookimpl
        from sadl.testing import check_optimizer


        class SignSGD(sadl.optim.Optimizer):
            def __init__(self, params, lr=0.01):
                super().__init__(params, {"lr": lr})

            def update(self, param, grad, state, group):
                param.data -= float(group["lr"]) * np.sign(grad)


        @hookimpl
        def register_optimizers():
            return [OptimizerDef("SignSGD", SignSGD, examples=(Example(lr=0.1),))]


        assert check_optimizer(register_optimizers()[0]).ok
    """
    raise NotImplementedError


@records_hookspec(ModelDef, "model")
def register_models() -> Iterable[ModelDef]:
    """Return model factories as ``ModelDef(name, factory, config=None)`` records.

    ``sadl.models.create(name, **overrides)`` calls ``factory(**{**config, **overrides})``;
    ``sadl.models.default_config(name)`` returns a copy of ``config``.
    """
    raise NotImplementedError


@records_hookspec(FormatDef, "format")
def register_formats() -> Iterable[FormatDef]:
    """Return file formats as ``FormatDef(name, suffixes, save, load, magic=None)`` records.

    ``sadl.save(obj, path)`` picks the format whose ``suffixes`` contain the path's suffix and
    calls ``save(obj, path)``; ``sadl.load(path, device=None)`` does the same, falling back to
    the file's first bytes (``magic``) when the suffix is unknown, and calls
    ``load(path, device=device)``.
    """
    raise NotImplementedError


@records_hookspec(BackendDef, "backend")
def register_backends() -> Iterable[BackendDef]:
    """Return device types as ``BackendDef`` records: where arrays live and how to reach them.

    ``BackendDef(name, module, array_types, to_host, from_host, device_index, device_count,
    generator, synchronize, install_hint="")``. Core registers ``"cpu"`` (NumPy) and ``"cuda"``
    (CuPy) this way; a plugin adds another array library (dpnp, an XLA-backed one) without
    touching core. Once registered, ``t.to("name:1")``, ``sadl.zeros(3, device="name")``,
    ``sadl.load(path, device="name")`` and every op work on its arrays, because op rules are
    written in NumPy vocabulary and run on whatever array module owns their inputs.

    * ``name`` is the device type in device strings; ``module`` the import name of an array
      module that speaks NumPy's vocabulary; ``array_types`` the dotted names of its array
      classes. Neither is imported before a tensor goes to that device type.
    * ``to_host(array)`` returns a NumPy array; ``from_host(array, index)`` puts a NumPy
      array on device ``index``; ``device_index(array)`` says where an array lives;
      ``device_count()`` how many devices are usable (0, not an exception, when none is).
    * ``generator(seed, index)`` returns a generator drawing on device ``index`` with the
      ``numpy.random.Generator`` methods ``random``, ``standard_normal``, ``integers`` and
      ``uniform`` (size and dtype arguments as NumPy's). ``sadl.manual_seed(n)`` seeds every
      device's generator with ``n``: runs are reproducible per device type, and a device type
      draws its own numbers (CuPy's stream differs from NumPy's, as in torch).
    * ``synchronize(index)`` waits for the device's queued work (``sadl.cuda.synchronize``
      and the benchmarks use it).
    * ``install_hint`` is shown when ``module`` does not import.

    An array library qualifies when its arrays refuse nothing sadl's op rules do with NumPy
    arrays: NumPy's ufuncs and functions (``__array_ufunc__``/``__array_function__``),
    in-place operators, ``astype``, ``copy``, ``reshape``, indexing and ``base``.
    ``sadl.testing.check_op(op, device="name")`` then runs any op on it against the CPU.

    A complete backend plugin, a strict NumPy-backed stand-in for CuPy that sadl's own tests
    use, is ``tests/fixtures/plugins/sadl-strictcuda``. The shape of one::

        from sadl.plugins import BackendDef, hookimpl


        def _lib():
            import mirror_arrays  # the array library served (imported on first use only)

            return mirror_arrays


        @hookimpl
        def register_backends():
            return [
                BackendDef(
                    "mirror",
                    module="mirror_arrays",
                    array_types=("mirror_arrays.ndarray",),
                    to_host=lambda a: a.get(),
                    from_host=lambda a, index: _lib().asarray(a, device=index),
                    device_index=lambda a: a.device.id,
                    device_count=lambda: _lib().device_count(),
                    generator=lambda seed, index: _lib().random.default_rng(seed),
                    synchronize=lambda index: _lib().synchronize(index),
                    install_hint="pip install mirror-arrays",
                )
            ]
    """
    raise NotImplementedError


@hookspec
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add subcommands to the ``sadl`` command line.

    ``subparsers`` is the ``argparse`` sub-parser action of ``sadl``. Add a parser and set
    ``func`` to a handler that takes the parsed arguments and returns the exit status (None means
    0). Core's own commands (``plugins``, ``ops``, ``info``, ``check-plugins``) come through this
    hook too. Example::

        from sadl.plugins import hookimpl


        @hookimpl
        def register_commands(subparsers):
            parser = subparsers.add_parser("hello", help="say hello")
            parser.set_defaults(func=lambda args: print("hello") or 0)
    """
    raise NotImplementedError


@hookspec(historic=True)
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications of your own with ``pluginmanager.add_hookspecs(module)``.

    Historic: it is called for every plugin, including ones registered later, so other plugins
    can implement the new hooks whatever the installation order.
    """


#: Every record kind of core by registry name, in the order sadl collects them (defined).
KINDS: dict[str, RecordKind] = {
    f.sadl_records.kind: f.sadl_records for f in list(vars().values()) if hasattr(f, "sadl_records")
}
