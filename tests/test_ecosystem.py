"""Every package installed; everything is reached through sadl's namespaces, i.e. entry points.

No test here imports a plugin package directly: if a name works, it came through discovery.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sadl
from sadl.cli import main

FIRST_PARTY = {
    "layers": "sadl-layers",
    "optim": "sadl-optim",
    "serialize": "sadl-serialize",
    "models": "sadl-models",
    "distributed": "sadl-distributed",
    "kernels": "sadl-kernels",
}


def sadl_cli(*args, **env):
    return subprocess.run(
        [sys.executable, "-m", "sadl", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def test_every_first_party_plugin_loads_strictly_and_provides_something():
    result = sadl_cli("plugins", "--json", SADL_PLUGINS_STRICT="1")
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    for name, dist in FIRST_PARTY.items():
        assert plugins[name]["status"] == "ok", plugins[name]["error"]
        assert plugins[name]["distribution"] == dist
        assert plugins[name]["provides"], f"{name} provides nothing"
    assert plugins["sadl"]["builtin"]


def test_names_resolve_through_every_namespace():
    assert sadl.nn.Linear is sadl.Linear
    assert sadl.optim.AdamW is sadl.AdamW
    assert callable(sadl.ops.cross_entropy) and callable(sadl.ops.scaled_dot_product_attention)
    assert {"gpt", "mlp"} <= set(sadl.models.names())
    assert sadl.nn.GPT is not None
    for name in ("Linear", "LayerNorm", "Conv2d", "Sequential", "GPT"):
        assert name in dir(sadl.nn)
    for name in ("AdamW", "CosineWithWarmup", "SGD", "Adam"):
        assert name in dir(sadl.optim)


def test_py_sadl_quick_start():
    model = sadl.Mlp(
        [sadl.Linear(dim_in=2, dim_out=4), sadl.ReLU(), sadl.Linear(dim_in=4, dim_out=1)]
    )
    optimizer = sadl.SGD(model.get_parameters(), lr=0.01)
    x = sadl.tensor(np.random.default_rng(0).normal(size=(16, 2)), dtype=np.float32)
    before = [p.numpy().copy() for p in model.get_parameters().values()]
    loss = (model(x) ** 2).mean()
    optimizer.backward(loss)
    optimizer.step()
    after = model.get_parameters().values()
    assert any(not np.array_equal(b, p.numpy()) for b, p in zip(before, after))


def test_train_with_layers_and_optim_then_save_and_reload(tmp_path):
    sadl.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 2)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    model = sadl.nn.Sequential(sadl.nn.Linear(2, 32), sadl.nn.GELU(), sadl.nn.Linear(32, 2))
    optimizer = sadl.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    schedule = sadl.optim.CosineWithWarmup(optimizer, warmup_steps=10, total_steps=200)
    xt = sadl.tensor(x)
    for _ in range(200):
        loss = sadl.ops.cross_entropy(model(xt), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    accuracy = (model(xt).numpy().argmax(-1) == y).mean()
    assert accuracy > 0.9

    for suffix in (".sadl", ".safetensors"):
        path = tmp_path / f"model{suffix}"
        sadl.save(model.state_dict(), path)
        clone = sadl.nn.Sequential(sadl.nn.Linear(2, 32), sadl.nn.GELU(), sadl.nn.Linear(32, 2))
        clone.load_state_dict(sadl.load(path))
        np.testing.assert_array_equal(clone(xt).numpy(), model(xt).numpy())


def test_gpt_from_the_registry_learns_and_generates():
    sadl.manual_seed(0)
    model = sadl.models.create("gpt", vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)
    optimizer = sadl.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = np.arange(200) % 11  # a cycle: perfectly predictable
    losses = []
    for step in range(60):
        x, y = sadl.data.windows(tokens, block_size=8, batch_size=8, rng=step)
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    out = model.generate(np.array([[0, 1, 2]]), max_new_tokens=5, top_k=1)
    assert out.shape == (1, 8)


#: Plugins whose whole battery their own package's tests run already, record by record: core's
#: 141 ops (sadl-check's test_check_plugins_runs_the_battery_over_core) and sadl-layers' ops and
#: layers (its test_ops.py::test_check_op and test_layer_examples.py). Run again here, the same
#: battery over the same records took 130 of the ecosystem session's CPU seconds.
BATTERY_RUN_IN_ITS_PACKAGE = {"sadl", "layers"}


def test_check_plugins_passes_for_every_other_installed_plugin(capsys):
    names = sorted(p["name"] for p in sadl.plugins.plugins() if p["status"] == "ok")
    others = [n for n in names if n not in BATTERY_RUN_IN_ITS_PACKAGE]
    assert {"optim", "models", "serialize", "compile"} <= set(others), names
    assert main(["check-plugins", *(f"--plugin={n}" for n in others)]) == 0
    out = capsys.readouterr().out
    assert " 0 failed" in out
    for row in ("AdamW", "inspect"):  # a record of sadl-optim's and one of sadl-serialize's
        assert row in out, out


def test_plugin_subcommands_are_listed():
    result = sadl_cli("--help")
    assert result.returncode == 0
    for command in ("plugins", "ops", "info", "inspect", "train", "generate"):
        assert command in result.stdout


@pytest.mark.parametrize("blocked", list(FIRST_PARTY))
def test_blocking_one_plugin_keeps_the_others(blocked):
    code = (
        "import sadl, json; print(json.dumps({p['name']: p['status'] "
        "for p in sadl.plugins.plugins()}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "SADL_DISABLE_PLUGINS": blocked, "SADL_PLUGINS_STRICT": "0"},
    )
    status = json.loads(result.stdout)
    assert status[blocked] == "blocked"
    others = [n for n in FIRST_PARTY if n != blocked]
    # models depends on layers/optim/serialize: blocking one of those only hides their names;
    # sadl-models still imports them as libraries, so it loads.
    assert all(status[n] == "ok" for n in others), status


def test_known_providers_name_exactly_what_first_party_plugins_register():
    # A missing name's hint ("provided by sadl-optim") comes from core's static table; it must
    # list every first-party name, and nothing that is no longer provided.
    known = sadl.plugins.known_providers()
    plugins = [p for p in sadl.plugins.plugins() if p["distribution"] in FIRST_PARTY.values()]
    hooks = {
        "register_ops": "ops",
        "register_layers": "layers",
        "register_optimizers": "optimizers",
    }
    hooks |= {"register_models": "models", "register_formats": "formats"}
    registered = {
        (kind, name, p["distribution"])
        for p in plugins
        for hook, kind in hooks.items()
        for name in p["provides"].get(hook, [])
    }
    listed = {
        (kind, name, dist)
        for kind, names in known.items()
        for name, dist in names.items()
        if dist in FIRST_PARTY.values()
    }
    assert registered - listed == set(), "missing from sadl/_known.py"
    assert listed - registered == set(), "listed in sadl/_known.py but not registered"
