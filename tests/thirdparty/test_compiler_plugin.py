"""A third-party compiler plugin (sadl-opkernel, beside sadl-core and sadl-compile, from wheels):
its kernel replaces the recorded applications of its op by name, its passes run where their
names put them (the docs/compile.md example)."""

import numpy as np
import pytest


def _step():
    import sadl

    x = sadl.Parameter(np.linspace(-2.0, 2.0, 12).reshape(3, 4))

    def step(x):
        y = sadl.ops.opkernel_cube(x) + 1.0
        y.sum().backward()
        return y

    return x, step


def test_the_kernel_replaces_each_application_of_its_op_and_results_are_eager_bits():
    import sadl

    x, step = _step()
    eager = step(x).numpy()
    eager_grad = x.grad.copy()
    x.grad = None
    compiled = sadl.compile(step)
    compiled(x)
    x.grad = None
    got = compiled(x).numpy()
    np.testing.assert_array_equal(got, eager)
    np.testing.assert_array_equal(x.grad, eager_grad)
    graph = str(compiled.graph)
    assert "kernel[opkernel_cube]" in graph and "opkernel: 1 cube kernels" in graph
    others = [p for p in sadl.plugins.records("compile_passes") if p != "opkernel_cube"]
    without = sadl.compile(step, passes=others)
    without(x)
    # the op's two calls are gone (the kernel does them); the backward's stay
    assert str(without.graph).count("multiply(") == graph.count("multiply(") + 2


def test_the_passes_run_in_the_order_their_names_declare():
    import sadl

    x, step = _step()
    compiled = sadl.compile(step)
    compiled(x)
    ran = compiled.graph.passes
    assert ran.index("common_subexpressions") < ran.index("opkernel_cube")
    assert ran.index("opkernel_count") < ran.index("opkernel_cube") < ran.index("memory_plan")
    assert "opkernel: ops add, opkernel_cube" in compiled.graph.notes
    assert "# passes, in order: " in str(compiled.graph)


def test_a_pass_ordered_against_a_missing_pass_is_refused_by_name():
    from sadl_compile import CompilePassDef, PassOrderError
    from sadl_compile.pipeline import pass_order
    from sadl_opkernel.plugin import cube_kernel

    stray = CompilePassDef("stray", cube_kernel, after=("no_such_pass",))
    with pytest.raises(PassOrderError, match="'stray' runs after \\['no_such_pass'\\]"):
        pass_order({"stray": stray})
