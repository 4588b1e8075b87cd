"""tests/_xla.py: the test session's XLA code generation (flags built from the library's
"fastest" options, the user's flags kept, both ways out) and the proof that
``DEFAULTS`` restores XLA's default code inside a session that compiles another way."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import distributed
from tests import _xla


def test_session_is_the_librarys_fastest_mode_generated_on_one_thread():
  assert _xla.FASTEST == distributed.compiler_options("fastest", "cpu")
  assert _xla.SESSION == {**_xla.FASTEST, "xla_cpu_parallel_codegen_split_count": 1}
  assert set(_xla.DEFAULTS) == set(_xla.SESSION)
  assert _xla.as_flags(_xla.SESSION) == [
    "--xla_backend_optimization_level=1",
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_cpu_parallel_codegen_split_count=1",
  ]


def test_session_flags_keep_the_users_and_can_be_turned_off():
  ours = " ".join(_xla.as_flags(_xla.SESSION))
  assert _xla.session_flags({}) == ours
  assert _xla.session_flags({"XLA_FLAGS": "--xla_dump_to=/x"}) == "--xla_dump_to=/x " + ours
  assert _xla.session_flags({"XLA_FLAGS": ours}) is None  # a worker: already set
  assert _xla.session_flags({"XLA_FLAGS": "--xla_backend_optimization_level=2"}) is None
  assert _xla.session_flags({_xla.CODEGEN: "default"}) is None
  with pytest.raises(ValueError, match="MINMAXLAB_TEST_CODEGEN must be 'fastest' or 'default'"):
    _xla.session_flags({_xla.CODEGEN: "fast"})


def test_default_env_takes_out_only_the_sessions_flags():
  ours = " ".join(_xla.as_flags(_xla.SESSION))
  assert "XLA_FLAGS" not in _xla.default_env({"XLA_FLAGS": ours, "A": "1"})
  assert _xla.default_env({"XLA_FLAGS": "--xla_dump_to=/x " + ours}) == {
    "XLA_FLAGS": "--xla_dump_to=/x"
  }
  if _xla.session_flags({k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}):
    assert os.environ["XLA_FLAGS"].endswith(ours)  # this session compiles the quicker code


def test_defaults_override_the_sessions_flags(tmp_path):
  """A program compiled with ``DEFAULTS`` records XLA's default values of both options, and
  one compiled without options the session's (XLA's dump of non-default options)."""

  def f(x):
    return jnp.tanh(x @ x.T).sum(0) * 1.5

  x = jnp.linspace(-1.0, 1.0, 64).reshape(8, 8)
  dumps = {}
  for name, options in (("session", {}), ("defaults", _xla.DEFAULTS)):
    folder = tmp_path / name
    compiled = jax.jit(f).lower(x).compile({**options, "xla_dump_to": str(folder)})
    # eager f and the compiled program may take other tanh/matmul code: a few ulp apart
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(f(x)), rtol=2e-5)
    dumps[name] = "".join(p.read_text() for p in folder.glob("*debug_options"))
  assert "xla_backend_optimization_level" not in dumps["defaults"]  # XLA's own value
  assert "xla_cpu_use_fusion_emitters" not in dumps["defaults"]
  assert "xla_cpu_parallel_codegen_split_count" not in dumps["defaults"]
  if "xla_backend_optimization_level=1" in os.environ.get("XLA_FLAGS", ""):
    assert "xla_backend_optimization_level: 1" in dumps["session"]
  if "xla_cpu_parallel_codegen_split_count=1" in os.environ.get("XLA_FLAGS", ""):
    assert "xla_cpu_parallel_codegen_split_count: 1" in dumps["session"]
