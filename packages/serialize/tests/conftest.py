"""Shared test setup for sadl-serialize: plugin isolation and Hypothesis profiles."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The fuzz tests run thousands of examples locally and a few hundred in CI (CI=1 / CI=true).
_in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if _in_ci else "dev"))
