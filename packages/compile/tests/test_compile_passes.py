"""sadl.compile's passes, one at a time, and a pass added by a plugin through the hook."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sadl
from compile_models import MLP, cross_entropy
from plan_check import assert_plan_disjoint
from sadl.plugins import version_counter
from sadl_compile import CompilePassDef
from sadl_compile.memory import plan_stats


def calls(compiled, name):
    """How many calls to ``name`` the last trace's graph still makes."""
    return sum(1 for node in compiled.graph.nodes if node.label == name)


def test_constants_are_folded():
    compiled = sadl.compile(lambda x: x + (sadl.ones(3) * 2).exp())
    assert compiled(sadl.zeros(3)).tolist() == pytest.approx([np.exp(2.0)] * 3)
    assert calls(compiled, "exp") == 0 and calls(compiled, "add") == 1
    assert any(n.startswith("fold_constants") for n in compiled.graph.notes)


def test_dead_code_is_removed():
    def fn(x):
        unused = (x * 3).exp()  # noqa: F841
        return x * 2

    compiled = sadl.compile(fn)
    compiled(sadl.ones(2))
    assert calls(compiled, "exp") == 0 and calls(compiled, "multiply") == 1


def test_common_subexpressions_are_computed_once():
    compiled = sadl.compile(lambda x: x.exp() + x.exp() * 2)
    x = sadl.arange(3.0)
    assert np.array_equal(compiled(x).numpy(), (x.exp() + x.exp() * 2).numpy())
    assert calls(compiled, "exp") == 1


def test_a_large_copy_is_made_again_not_kept_for_a_late_reader(monkeypatch):
    # im2col columns: the forward copies a window view, the weight gradient copies it again.
    # Merged, the forward's copy would stay alive until the backward; made again, each copy
    # lives from its making to its one reader. Small copies still merge.
    from sadl_compile import passes

    def fn(x, w):
        first = (x.T.reshape(-1, 4) @ w).sum()  # a copying reshape of a transposed view
        middle = np.exp(x * 2.0).sum()
        return first + middle + (x.T.reshape(-1, 4) @ w).sum()

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3))
    x = rng.standard_normal((256, 512))  # 1 MiB of float64: at the limit
    want = fn(x, w)

    def copies(compiled):
        return sum(1 for n in compiled.graph.nodes if n.label in ("reshape", "copyto"))

    large = sadl.compile(fn, fusion=False)
    assert large(x, w) == want and large(x, w) == want
    monkeypatch.setattr(passes, "COPY_MERGE_LIMIT", x.nbytes + 1)
    small = sadl.compile(fn, fusion=False)
    assert small(x, w) == want
    assert copies(large) == 2 and copies(small) == 1
    assert calls(large, "matmul") == 2 and calls(small, "matmul") == 1


def test_a_recomputation_through_in_place_writes_reads_the_first_result():
    def fn(x):
        a = x * 2.0
        a += 1.0  # an in-place write: plain CSE cannot merge a and b
        b = x * 2.0
        b += 1.0
        return (a * 3.0 + b).sum()

    compiled = sadl.compile(fn, fusion=False)
    x = sadl.arange(4.0)
    for _ in range(2):
        assert compiled(x).item() == fn(x).item()
    assert calls(compiled, "multiply") == 2  # x * 2.0 once, then * 3.0
    assert any(n.startswith("shared_recomputation") for n in compiled.graph.notes)


def test_a_view_of_a_shared_recomputation_is_exact_whether_or_not_it_is_written():
    def fn(x, write):
        a = x * 2.0
        a += 1.0
        b = x * 2.0
        b += 1.0  # b is a's recomputation: its reads may use a
        view = b.reshape(-1)  # a view of b: it moves to a's memory only while nothing writes
        if write:
            view += 5.0  # ... and this write must not reach a
        return (a * 3.0 + view.reshape(x.shape)).sum()

    x = sadl.arange(6.0).reshape(2, 3)
    for write in (False, True):
        compiled = sadl.compile(lambda x, write=write: fn(x, write), fusion=False)
        for _ in range(3):
            assert compiled(x).item() == fn(x, write).item()
        if not write:  # x * 2.0 once (b's and its view's reads use a), then * 3.0
            assert calls(compiled, "multiply") == 2


def test_folded_constants_with_the_same_contents_are_one_for_shared_recomputation():
    def fn(x):
        mask = sadl.ones(x.shape) * 0.5  # folded: a constant
        a = x * mask
        a += 1.0
        b = x * (sadl.ones(x.shape) * 0.5)  # another folded copy of the same contents
        b += 1.0
        return (a * 3.0 + b).sum()

    compiled = sadl.compile(fn, fusion=False)
    x = sadl.arange(4.0)
    for _ in range(2):
        assert compiled(x).item() == fn(x).item()
    assert calls(compiled, "multiply") == 2  # x * mask once, then * 3.0


def test_the_memory_plan_reuses_buffers_and_keeps_results_exact():
    def fn(x):
        y = x
        for _ in range(20):
            y = (y * 1.5).tanh() - 0.25
        return y.sum()

    compiled = sadl.compile(fn, fusion=False)
    x = sadl.Tensor(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    expected = fn(x).item()
    for _ in range(3):
        assert compiled(x).item() == expected
    arena = compiled.graph.meta["arena_bytes"]
    assert 0 < arena <= 2 * x.data.nbytes  # 60 temporaries, two buffers' worth of memory
    assert "out=" in compiled.source


def test_the_memory_plan_packs_the_arena_to_the_busiest_node_and_never_overlaps():
    # a training step of a wider MLP, and chains of temporaries whose sizes grow and shrink (a
    # pool of whole buffers, best fit by size, left 11% of a GPT's arena unused): one arena,
    # no larger than the bytes in use at the busiest node, no two live arrays overlapping
    model = MLP(n_in=64, n_hidden=256, n_out=10)
    opt = sadl.Adam(model.parameters(), lr=1e-3)

    def train_step(x, y):
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def ragged(x):
        total = x.sum()
        for n in (8, 64, 16, 128, 32, 256, 24):
            wide = np.concatenate([x * float(n)] * (n // 8), axis=1)
            total = total + (wide.tanh() * 2.0).sum()
        return total

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    for fn, args in ((train_step, (x, y)), (ragged, (sadl.Tensor(x),))):
        compiled = sadl.compile(fn, fusion=False)
        for _ in range(3):
            compiled(*args)
        stats = plan_stats(compiled.graph)
        assert 0 < stats["busiest_bytes"] <= stats["arena_bytes"]
        assert stats["arena_bytes"] <= 1.05 * stats["busiest_bytes"], stats
        assert assert_plan_disjoint(compiled.graph) > 10


def test_a_reshape_that_copies_writes_into_a_planned_buffer():
    # a.T.reshape(-1) and a window view's reshape copy: into reused buffers, never fresh
    # memory per replay; a copied reshape that is returned stays fresh on every call
    def fn(x, w):
        a = (x * 2.0).T
        cols = np.lib.stride_tricks.sliding_window_view(x + 1.0, (3, 3)).reshape(-1, 9)
        flat = (a.reshape(-1) * 3.0).reshape(4, -1)
        out = (cols @ w).sum() + flat.ravel().sum() + a.flatten().sum()
        return out, (x - 1.0).T.reshape(-1)

    rng = np.random.default_rng(3)
    w = rng.standard_normal((9, 2))
    compiled = sadl.compile(fn, fusion=False)
    results = []
    for _ in range(3):
        x = rng.standard_normal((8, 6))
        got, want = compiled(x, w), fn(x, w)
        assert got[0] == want[0] and np.array_equal(got[1], want[1])
        results.append(got[1])
    assert not np.shares_memory(results[1], results[2])  # returned: fresh each call
    reshapes = [n for n in compiled.graph.nodes if n.label in ("reshape", "ravel", "flatten")]
    copied = [n for n in reshapes if n.outputs and n.outputs[0].storage is not n.reads[0].storage]
    assert len(copied) == 1  # only the returned one is still made anew
    assert calls(compiled, "copyto") == 3  # flat.ravel() is a view: nothing to copy


def test_elementwise_chains_on_large_arrays_are_fused_unless_fusion_is_off():
    def fn(x):
        return ((x * 0.5 + 1.0) * x - x).tanh()

    x = sadl.Tensor(np.random.default_rng(1).standard_normal((512, 256)).astype(np.float32))
    fused, plain = sadl.compile(fn), sadl.compile(fn, fusion=False)
    expected = fn(x).numpy()
    np.testing.assert_allclose(fused(x).numpy(), expected, rtol=1e-6, atol=1e-7)
    assert np.array_equal(plain(x).numpy(), expected)
    assert any(n.startswith("fuse_elementwise") for n in fused.graph.notes)
    assert not any(n.startswith("fuse_elementwise") for n in plain.graph.notes)
    assert "fused[multiply -> add -> multiply -> subtract -> tanh]" in str(fused.graph)


def test_fused_chains_give_the_same_bits_on_one_thread_and_on_two(monkeypatch):
    from sadl_compile import fusion

    def fn(x, y):
        return ((x * 0.5 + y) * x - y).tanh()

    rng = np.random.default_rng(2)
    rows = 2 * fusion.PER_THREAD // 256 + 37  # a partial last block
    x, y = (rng.standard_normal((rows, 256)).astype(np.float32) for _ in range(2))
    ran, results = [], []
    for threads in (1, 2, 3):
        monkeypatch.setattr(fusion, "threads_for", lambda work, per, t=threads: t)
        compiled = sadl.compile(fn)
        for _ in range(2):
            out = compiled(sadl.Tensor(x), sadl.Tensor(y)).numpy()
        results.append(out)
        fused = next(n.func for n in compiled.graph.nodes if repr(n.func).startswith("fused["))
        ran.append(len(fused.run.__globals__["scratch"]))  # one scratch set per thread used
    assert ran == [1, 2, 3]
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])
    np.testing.assert_allclose(results[0], fn(sadl.Tensor(x), sadl.Tensor(y)).numpy(), 1e-6, 1e-7)


def test_small_arrays_are_not_fused():
    compiled = sadl.compile(lambda x: ((x * 0.5 + 1.0) * x).tanh())
    compiled(sadl.ones(100))
    assert calls(compiled, "multiply") == 2


def test_optimizer_steps_run_over_flat_buffers():
    w = sadl.Parameter(np.ones((3, 4), np.float32))
    b = sadl.Parameter(np.zeros(4, np.float32))
    opt = sadl.Adam([w, b], lr=0.1)

    @sadl.compile
    def step(x):
        loss = (x @ w + b).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        step(x)
    assert step.graph.nodes[-1].meta.get("flat") is True
    assert w.data.base is not None and w.data.base is b.data.base  # one buffer for the group
    state = opt.state[w]
    assert state["exp_avg"].base is opt.state[b]["exp_avg"].base
    assert state["step"] == opt.state[b]["step"] == 3
    assert version_counter(w)[0] == 3
    assert "(flat buffers)" in str(step.graph)


def test_choosing_passes_by_name():
    compiled = sadl.compile(lambda x: x.exp() + x.exp(), passes=["dead_code"])
    compiled(sadl.ones(2))
    assert calls(compiled, "exp") == 2
    assert compiled.graph.notes == []


def test_compile_pass_records_are_checked():
    with pytest.raises(ValueError, match="identifier"):
        CompilePassDef("no spaces", lambda g, c: None)
    with pytest.raises(TypeError, match="callable"):
        CompilePassDef("bad", run=3)
    with pytest.raises(TypeError, match="tuple of pass names"):
        CompilePassDef("bad", lambda g, c: None, after="dead_code")
    with pytest.raises(ValueError, match="itself"):
        CompilePassDef("bad", lambda g, c: None, before=("bad",))


def _noop(graph, context):
    """Does nothing."""


def test_passes_run_in_the_order_their_names_declare():
    from sadl_compile.pipeline import pass_order

    registered = {
        "c": CompilePassDef("c", _noop, after=("b",)),
        "a": CompilePassDef("a", _noop),
        "b": CompilePassDef("b", _noop, after=("a",)),
        "early": CompilePassDef("early", _noop, before=("a",)),
    }
    assert [p.name for p in pass_order(registered)] == ["early", "a", "b", "c"]


def test_a_cycle_among_passes_is_refused_with_its_names():
    from sadl_compile.pipeline import PassOrderError, pass_order

    registered = {
        "a": CompilePassDef("a", _noop, after=("c",)),
        "b": CompilePassDef("b", _noop, after=("a",)),
        "c": CompilePassDef("c", _noop, after=("b",)),
    }
    with pytest.raises(PassOrderError, match="cycle: .*a.*b.*c"):
        pass_order(registered)


def test_a_pass_ordered_against_an_unregistered_name_is_refused():
    from sadl_compile.pipeline import PassOrderError, pass_order

    registered = {"a": CompilePassDef("a", _noop, after=("fusoin",))}
    with pytest.raises(PassOrderError, match="'a' runs after \\['fusoin'\\]"):
        pass_order(registered)


def test_the_printed_graph_shows_the_passes_in_the_order_they_ran():
    compiled = sadl.compile(lambda x: x * 2 + 1, fusion=False)
    compiled(sadl.ones(3))
    ran = compiled.graph.passes
    assert ran[:3] == ["fold_constants", "dead_code", "common_subexpressions"]
    assert ran.index("flat_optimizer") < ran.index("dead_code_final") < ran.index("memory_plan")
    assert "fuse_elementwise" not in ran  # fusion=False skips it
    assert "# passes, in order: fold_constants, dead_code," in str(compiled.graph)


PLUGIN_CHECK = """
import json, sadl
from sadl import plugins
passes = plugins.records("compile_passes")
compiled = sadl.compile(lambda x: x * 2 + 1, fusion=False)
compiled(sadl.ones(3))
listed = {p["name"]: p for p in plugins.plugins()}
print(json.dumps({
    "passes": sorted(passes),
    "notes": compiled.graph.notes,
    "fake": listed["compile_pass"]["provides"],
    "compile": listed["compile"]["provides"],
}))
"""


def _with_fake_pass_plugin(tmp_path, *argv):
    """Run ``python *argv`` with the fake pass plugin installed (a dist-info on the path)."""
    dist = tmp_path / "sadl_fake_compile_pass-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sadl-fake-compile-pass\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text("[sadl.plugins]\ncompile_pass = fake_compile_pass\n")
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(here), env.get("PYTHONPATH", "")])
    env["SADL_PLUGINS_STRICT"] = "1"
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_plugin_adds_a_pass_through_register_compile_passes(tmp_path):
    """An installed plugin (a dist-info on the path) implements the hook sadl-compile declares."""
    result = _with_fake_pass_plugin(tmp_path, "-c", PLUGIN_CHECK)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert "count_calls" in found["passes"] and "memory_plan" in found["passes"]
    assert "count_calls: 2 calls (fusion False)" in found["notes"]
    assert found["fake"]["register_compile_passes"] == ["count_calls"]
    assert {"memory_plan", "flat_optimizer"} <= set(found["compile"]["register_compile_passes"])


def test_sadl_plugins_passes_lists_the_passes_in_their_resolved_order_with_their_plugin(tmp_path):
    from sadl_compile.pipeline import pass_order

    result = _with_fake_pass_plugin(tmp_path, "-m", "sadl", "plugins", "--passes", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    names = [p["name"] for p in listed]
    assert names.index("dead_code_final") < names.index("count_calls") < names.index("memory_plan")
    fake = listed[names.index("count_calls")]
    assert fake["plugin"] == "compile_pass" and fake["after"] == ["dead_code_final"]
    assert fake["before"] == ["memory_plan"] and not fake["fusion"]
    assert {p["plugin"] for p in listed if p["name"] == "memory_plan"} == {"compile"}
    ours = [n for n in names if n != "count_calls"]  # this process has no fake plugin
    assert ours == [p.name for p in pass_order(sadl.plugins.records("compile_passes"))]
    table = _with_fake_pass_plugin(tmp_path / "t", "-m", "sadl", "plugins", "--passes")
    assert table.returncode == 0, table.stderr
    rows = [line.split()[1] for line in table.stdout.split("\n\n")[0].splitlines()[1:]]
    assert rows == names


def test_the_graph_records_which_op_and_which_backward_rule_made_each_call():
    """Passes see both levels: each call's node names the op application that made it."""
    functional = pytest.importorskip("sadl_layers.functional")
    w = sadl.Parameter(np.ones(8, np.float32))
    b = sadl.Parameter(np.zeros(8, np.float32))
    x = sadl.Tensor(np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))

    @sadl.compile(fusion=False)
    def step(x):
        y = functional.layer_norm(x, (8,), w, b)
        (y * y).sum().backward()
        return y

    step(x)
    regions = {}
    for node in step.graph.nodes:
        region = node.region
        while region is not None:
            regions.setdefault(region.name, region)
            region = region.parent
    assert {"layer_norm", "layer_norm/backward", "layer_norm_backward"} <= set(regions)
    forward = regions["layer_norm"]
    assert forward.op is sadl.plugins.records("ops")["layer_norm"]
    assert [v.shape for v in forward.inputs] == [(4, 8), (8,), (8,)]
    assert forward.params == {"eps": 1e-05, "normalized_shape": (8,)}
    assert forward.outputs[0].shape == (4, 8)
    assert regions["layer_norm_backward"].parent is regions["layer_norm/backward"]
