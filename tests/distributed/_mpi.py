"""What the distributed tests share: the venv's MPICH ``mpirun`` (and a skip mark where it or
mpi4py/mpi4jax is missing), a run of P ranks, the state and metrics rank 0 wrote, and the
comparison of a run with its single-device reference."""

import os
import shutil
import sys
from pathlib import Path

import chex
import jax
import numpy as np
import pytest

from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
MPIRUN = Path(sys.executable).parent / "mpirun"

# The discrete choices of a generation: equal bit for bit on every backend.
DISCRETE = (
  "best_cell",
  "lineage_g",  # every individual's lineage id (issue 33): the same on every backend
  "lineage_d",
  "loss_index",
  "replaced_g",
  "replaced_d",
  "mixture_accepted",
  "diverged",
  "divergences",
)


def _have_mpi() -> bool:
  try:
    import mpi4jax  # noqa: F401
    import mpi4py  # noqa: F401
  except ImportError:
    return False
  return MPIRUN.exists() or shutil.which("mpirun") is not None


needs_mpi = pytest.mark.skipif(not _have_mpi(), reason="mpi4py/mpi4jax/mpirun not installed")


def mpirun(n, *args, timeout=300):
  cmd = [str(MPIRUN), "-n", str(n), sys.executable, *args]
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  return _procs.run(cmd, cwd=ROOT, env=env, timeout=timeout)


def load_mpi(path, like):
  """(state shaped as ``like``, per-generation metrics, traces) that rank 0 wrote to ``path``."""
  z = np.load(path)
  leaves = [z[f"state_{i}"] for i in range(len(jax.tree.leaves(like)))]
  metrics = [
    {k.split("_", 2)[2]: z[k] for k in z.files if k.startswith(f"metric_{g}_")}
    for g in range(int(z["generations"]))
  ]
  return jax.tree.unflatten(jax.tree.structure(like), leaves), metrics, int(z["traces"])


def assert_same(got_state, got_metrics, want_state, want_metrics, exact):
  """Bitwise, or to 1e-6 where XLA compiles the same per-cell code differently
  inside another program (float rounding only: every discrete choice equal)."""
  if exact:
    chex.assert_trees_all_equal(got_state, want_state)
  else:
    chex.assert_trees_all_close(got_state, want_state, rtol=1e-6, atol=1e-6)
  for gm, wm in zip(got_metrics, want_metrics, strict=True):
    assert set(gm) == set(wm)
    for k in DISCRETE:
      np.testing.assert_array_equal(np.asarray(gm[k]), np.asarray(wm[k]), err_msg=k)
