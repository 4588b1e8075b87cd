"""runner.stored_program: a compiled executable kept on disk and loaded without tracing,
bit-identical to the compile; damaged or stale files fall back to compiling."""

import io
import pickle
import sys
from pathlib import Path
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import pytest

from minmaxlab import runner
from minmaxlab.runner import _stored_programs
from tests import _procs, _xla


class State(NamedTuple):
  w: jax.Array
  count: jax.Array


TRACES = []  # one entry per trace of _step
# every test here runs under the library's cache threshold (tests/runner/conftest.py)
pytestmark = pytest.mark.usefixtures("library_cache_threshold")


def _step(key, state, data):
  TRACES.append(1)
  noise = jax.random.normal(key, state.w.shape)
  w = state.w - 0.1 * jnp.tanh(data @ state.w) @ data + 1e-3 * noise
  return State(w, state.count + 1), {"loss": jnp.sum(w**2)}


def _args():
  state = State(jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32), jnp.zeros((), jnp.int32))
  data = jnp.arange(24, dtype=jnp.float32).reshape(3, 8) / 24.0
  return jax.random.key(3), state, data


def _program(tmp_path, key="cfg", stream=None, sources=()):
  return runner.stored_program(
    jax.jit(_step), "probe", key, sources=sources, directory=tmp_path, stream=stream
  )


def test_stored_then_loaded_without_tracing_bit_identical(tmp_path):
  args = _args()
  plain = jax.jit(_step)(*args)
  first = _program(tmp_path)
  out = first(*args)
  assert first.how == "stored" and first.path.exists() and first.path.parent == tmp_path
  chex.assert_trees_all_equal(out, plain)
  again = first(args[0], out[0], args[2])  # later calls reuse the executable
  assert isinstance(again[0], State)
  TRACES.clear()
  second = _program(tmp_path)  # as a new process would: loads the file
  out2 = second(*args)
  assert second.how == "loaded" and TRACES == []  # nothing traced
  chex.assert_trees_all_equal(out2, plain)
  # Other argument types than the stored program's: the jit traces and runs them.
  out3 = second(args[0], State(args[1].w[:4], args[1].count), args[2][:, :4])
  assert out3[0].w.shape == (4,) and TRACES == [1]


def test_key_sources_and_argument_types_select_the_file(tmp_path):
  args = _args()
  src = tmp_path / "src"
  src.mkdir()
  (src / "m.py").write_text("x = 1\n")
  d = _stored_programs.program_digest
  base = d("probe", "cfg", [src], args)
  assert d("probe", "cfg", [src], args) == base
  assert d("probe", "cfg2", [src], args) != base  # another config
  assert d("probe", "cfg", [src], (args[0], args[1], args[2][:2])) != base  # other shapes
  (src / "m.py").write_text("x = 2\n")
  assert d("probe", "cfg", [src], args) != base  # edited source: never a stale program
  base = d("probe", "cfg", [src], args)
  key, state, data = args
  assert d("probe", "cfg", [src], (key, state, data.astype(jnp.bfloat16))) != base  # dtypes
  assert d("probe", "cfg", [src], (key, tuple(state), data)) != base  # the tree's structure
  other = jax.device_put(data, jax.devices()[-1])  # another device: another sharding
  assert len(jax.devices()) > 1 and d("probe", "cfg", [src], (key, state, other)) != base
  with pytest.MonkeyPatch.context() as m:  # the same arguments on another backend
    m.setattr(jax, "default_backend", lambda: "gpu")
    assert d("probe", "cfg", [src], args) != base
  # JAX's LLVM -O0 switch (a flag, not a jax.config attribute): other machine code
  with _xla.jax_low_effort(not jax.config.values[_xla.LOW_EFFORT_FLAG]):
    assert d("probe", "cfg", [src], args) != base
  assert d("probe", "cfg", [src], args) == base
  store = tmp_path / "store"
  a, b = _program(store, "cfg"), _program(store, "other")
  a(*args), b(*args)
  assert a.how == b.how == "stored" and a.path != b.path
  assert sorted(p.name for p in store.glob("*.exe")) == sorted([a.path.name, b.path.name])


def test_damaged_file_falls_back_to_compiling_with_one_line(tmp_path):
  args = _args()
  first = _program(tmp_path)
  expected = first(*args)
  first.path.write_bytes(b"not a pickle")
  stream = io.StringIO()
  second = _program(tmp_path, stream=stream)
  out = second(*args)
  chex.assert_trees_all_equal(out, expected)
  lines = stream.getvalue().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"stored program {first.path.name} unusable")
  assert second.how == "stored"  # compiled again and written afresh
  third = _program(tmp_path)
  chex.assert_trees_all_equal(third(*args), expected)
  assert third.how == "loaded"


class _Payload:
  """Unpickled, it would write ``marker``: code run from a planted program file."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (Path.write_text, (self.marker, "the payload ran"))


def test_planted_program_file_is_never_unpickled(tmp_path):
  """Issue 37: a file in the program folder that this library did not write (its SHA-256
  is not the one recorded in index.json) is never unpickled, even under the right name."""
  args = _args()
  first = _program(tmp_path)
  expected = first(*args)
  marker = tmp_path / "marker"
  first.path.write_bytes(pickle.dumps(_Payload(marker)))
  stream = io.StringIO()
  second = _program(tmp_path, stream=stream)
  chex.assert_trees_all_equal(second(*args), expected)
  assert not marker.exists()
  (line,) = stream.getvalue().splitlines()
  assert "unusable (UnrecordedProgram" in line and second.how == "stored"
  assert _program(tmp_path)(*args) is not None and not marker.exists()
  index = _stored_programs.recorded_digests(tmp_path)
  assert list(index) == [first.path.name]  # the rewritten file, recorded again
  # A stored program of an older version (no index) is compiled again, not read.
  (tmp_path / _stored_programs.INDEX).unlink()
  first.path.write_bytes(pickle.dumps(_Payload(marker)))
  third = _program(tmp_path, stream=io.StringIO())
  chex.assert_trees_all_equal(third(*args), expected)
  assert third.how == "stored" and not marker.exists()


def test_without_a_folder_it_is_the_jit(tmp_path):
  saved = jax.config.jax_compilation_cache_dir
  jax.config.update("jax_compilation_cache_dir", None)
  try:
    p = runner.stored_program(jax.jit(_step), "probe", "cfg")
    chex.assert_trees_all_equal(p(*_args()), jax.jit(_step)(*_args()))
    assert p.how == "jit"
  finally:
    jax.config.update("jax_compilation_cache_dir", saved)


def test_old_files_pruned_and_cache_hits_not_stored(tmp_path, monkeypatch):
  args = _args()
  for i in range(_stored_programs.KEEP_PER_NAME + 2):
    _program(tmp_path, key=f"cfg{i}")(*args)
  assert len(list(tmp_path.glob("probe-*.exe"))) == _stored_programs.KEEP_PER_NAME

  class Hit:  # as if every compile were loaded from JAX's persistent cache
    n = 0

    def count(self):
      self.n += 1
      return self.n

  monkeypatch.setattr(_stored_programs, "_HITS", Hit())
  p = _program(tmp_path / "hits")
  chex.assert_trees_all_equal(p(*args), jax.jit(_step)(*args))
  assert p.how == "compiled" and not (tmp_path / "hits").exists()


# A program holding an MPI collective (mpi4jax's ordered effect: the executable takes a
# runtime token besides its arguments), stored and called three times in one process.
_MPI_CHILD = """
import sys
import jax, jax.numpy as jnp, mpi4jax
from mpi4py import MPI
from minmaxlab import runner

def f(state, x):
  total = mpi4jax.allreduce(x, op=MPI.SUM, comm=MPI.COMM_WORLD)
  return {k: v + total for k, v in state.items()}

p = runner.stored_program(jax.jit(f), "mpi_probe", "k", directory=sys.argv[1])
state = {str(i): jnp.float32(i) for i in range(24)}
for i in range(3):
  state = p(state, jnp.float32(1.0))
print(float(state["0"]), float(state["23"]), p.how)
"""


def test_program_with_an_mpi_collective_runs_every_call_cold_and_warm(tmp_path):
  """Issue 49: ``backend=mpi`` in one process printed ``Execution supplied 25 arguments but
  compiled program expected 26`` at every call after the first: JAX's fast path for an
  ahead-of-time compiled program leaves out the token of an ordered effect (25 arrays for
  an executable of 24 arguments and a token). A program with effects runs through its jit,
  never stored, so cold and warm runs call it without an error."""
  pytest.importorskip("mpi4jax")
  for _ in range(2):  # cold, then with the folder as the first run left it
    r = _procs.run([sys.executable, "-c", _MPI_CHILD, str(tmp_path)], timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Execution supplied" not in r.stderr and "expected" not in r.stderr, r.stderr
    assert r.stdout.split() == ["3.0", "26.0", "jit"]
  assert not list(tmp_path.glob("*.exe"))
