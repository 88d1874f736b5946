"""sadl-optim is reached through the plugin registry: sadl.optim.<Name> and sadl.<Name>."""

import pytest
import sadl
import sadl_optim
from sadl_optim import plugin

NAMES = [
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Lion",
    "Muon",
    "LAMB",
    "LRScheduler",
    "StepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LambdaLR",
    "MultiStepLR",
    "CosineWithWarmup",
    "LinearWarmup",
    "OneCycle",
    "ReduceLROnPlateau",
]


@pytest.mark.parametrize("name", NAMES)
def test_names_resolve_through_the_registry(name):
    cls = getattr(sadl_optim, name)
    assert getattr(sadl.optim, name) is cls
    assert getattr(sadl, name) is cls
    assert name in sadl.optim.names()
    assert name in dir(sadl.optim)


def test_plugin_is_loaded_and_attributed():
    (info,) = [p for p in sadl.plugins.plugins() if p["name"] == "optim"]
    assert info["status"] == "ok", info["error"]
    assert info["distribution"] == "sadl-optim"
    assert info["provides"] == {"register_optimizers": sorted(NAMES)}


def test_core_keeps_sgd_and_adam():
    assert "SGD" not in NAMES and "Adam" not in NAMES
    assert sadl.optim.SGD is sadl.SGD and sadl.optim.Adam is sadl.Adam
    records = plugin.register_optimizers()
    assert [r.name for r in records] == [cls.__name__ for cls in plugin.PROVIDED]
    assert {r.name for r in records} == set(NAMES)


def test_check_plugins_steps_muon_on_matrices_and_plateau_with_a_metric():
    # Muon refuses vectors and ReduceLROnPlateau.step needs a metric: their examples give
    # sadl check-plugins matrix shapes and a metric to step with.
    from sadl.plugins import Example
    from sadl.testing import check_optimizer

    records = {r.name: r for r in plugin.register_optimizers()}
    for name in ("Muon", "ReduceLROnPlateau", "LAMB", "MultiStepLR"):
        report = check_optimizer(records[name], raise_exception=False)
        assert report.ok, str(report)
    refused = check_optimizer(records["Muon"], [Example(lr=0.02)], raise_exception=False)
    assert not refused.ok and "not a matrix" in str(refused)
