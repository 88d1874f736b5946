"""Fixtures shared by sadl-distributed's in-process tests."""

import pytest
import sadl_distributed as dist


@pytest.fixture
def world_of_one():
    """A fresh in-process world of one rank for the test, shut down after it."""
    dist.shutdown()
    dist.init("local")
    yield
    dist.shutdown()
