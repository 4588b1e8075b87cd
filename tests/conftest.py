"""Test set-up: 4 fake CPU devices before JAX starts, and shared fixtures."""

import os

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def x64():
  """Run a test in float64 (for comparisons with numpy references)."""
  with jax.enable_x64(True):
    yield


@pytest.fixture
def key():
  return jax.random.key(0)
