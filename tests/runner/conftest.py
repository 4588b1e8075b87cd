"""Fixtures of the runner tests."""

import jax
import pytest

from minmaxlab.runner import _cache_folder


@pytest.fixture
def library_cache_threshold():
  """JAX's persistent cache keeps only programs whose compile takes longer than the library's
  threshold (``runner.enable_compilation_cache``) during the test, as in a user's run.

  The test session stores every program (tests/conftest.py), and ``runner.stored_program``
  stores only an executable its process compiled, never one JAX's cache handed it (XLA:CPU
  cannot serialize that one again). A test's small probe program compiled once already (for
  its reference output, or by an earlier test) would then come back from JAX's cache and not
  be stored. Under the library's threshold the probes are never cached."""
  saved = jax.config.jax_persistent_cache_min_compile_time_secs
  jax.config.update("jax_persistent_cache_min_compile_time_secs", _cache_folder.MIN_COMPILE_TIME_S)
  try:
    yield
  finally:
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved)
