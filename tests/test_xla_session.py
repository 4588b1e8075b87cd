"""tests/_xla.py: the test session's XLA code generation (flags built from the library's
"fastest" options, the user's flags kept, both ways out; -O0 but in files marked
``optimized_code``) and the proof that ``DEFAULTS`` restores XLA's default code inside a
session that compiles another way."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import distributed
from tests import _xla


def test_session_is_the_librarys_fastest_mode_generated_on_one_thread():
  with _xla.optimized_code():  # the mode's own options (under -O0 it leaves the level out)
    assert _xla.FASTEST == distributed.compiler_options("fastest", "cpu")
  assert _xla.SESSION == {**_xla.FASTEST, "xla_cpu_parallel_codegen_split_count": 1}
  assert set(_xla.SESSION) < set(_xla.DEFAULTS)
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
  assert _xla.LOW_EFFORT not in _xla.default_env({_xla.LOW_EFFORT: "1", "A": "1"})
  if _xla.session_flags({k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}):
    assert os.environ["XLA_FLAGS"].endswith(ours)  # this session compiles the quicker code


def test_low_effort_is_the_sessions_unless_turned_off_or_set_by_the_user():
  assert _xla.low_effort({})
  assert not _xla.low_effort({_xla.CODEGEN: "default"})
  assert not _xla.low_effort({_xla.LOW_EFFORT: "0"})  # the user's own setting stays
  if _xla.low_effort({k: v for k, v in os.environ.items() if k != _xla.LOW_EFFORT}):
    assert os.environ[_xla.LOW_EFFORT] == "1"  # this file is not marked optimized_code
    assert jax.config.read(_xla.LOW_EFFORT_FLAG)


def _debug_options(f, x, folder, options=None) -> str:
  """The non-default debug options XLA recorded when compiling ``f(x)`` (with ``options``)."""
  jax.jit(f).lower(x).compile({**(options or {}), "xla_dump_to": str(folder)})
  return "".join(p.read_text() for p in folder.glob("*debug_options"))


def test_optimized_code_compiles_at_o1_inside_and_o0_outside(tmp_path):
  """``optimized_code`` (a marked file's block) turns ``LOW_EFFORT`` off in this process and
  in the environment its children inherit, and back on after."""
  if os.environ.get(_xla.LOW_EFFORT) != "1":
    pytest.skip("the session does not compile at -O0 (MINMAXLAB_TEST_CODEGEN=default)")
  x = jnp.arange(6.0)
  outside = _debug_options(lambda v: jnp.sin(v) * 2.0, x, tmp_path / "outside")
  with _xla.optimized_code():
    assert os.environ[_xla.LOW_EFFORT] == "0" and not jax.config.read(_xla.LOW_EFFORT_FLAG)
    inside = _debug_options(lambda v: jnp.sin(v) * 3.0, x, tmp_path / "inside")
  assert os.environ[_xla.LOW_EFFORT] == "1" and jax.config.read(_xla.LOW_EFFORT_FLAG)
  assert "xla_backend_optimization_level: 0" in outside
  assert "xla_llvm_disable_expensive_passes: true" in outside
  assert "xla_backend_optimization_level: 0" not in inside
  assert "xla_llvm_disable_expensive_passes" not in inside
  if "xla_backend_optimization_level=1" in os.environ.get("XLA_FLAGS", ""):
    assert "xla_backend_optimization_level: 1" in inside


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
  assert "xla_llvm_disable_expensive_passes" not in dumps["defaults"]
  if os.environ.get(_xla.LOW_EFFORT) == "1":  # this file is not marked optimized_code
    assert "xla_backend_optimization_level: 0" in dumps["session"]
  elif "xla_backend_optimization_level=1" in os.environ.get("XLA_FLAGS", ""):
    assert "xla_backend_optimization_level: 1" in dumps["session"]
  if "xla_cpu_parallel_codegen_split_count=1" in os.environ.get("XLA_FLAGS", ""):
    assert "xla_cpu_parallel_codegen_split_count: 1" in dumps["session"]
