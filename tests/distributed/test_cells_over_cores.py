"""Issue 49 item 6: cells over cores. ``split_cpu_cores`` starts JAX's CPU client with one
device per core (the devices share XLA's thread pool; no thread's affinity narrowed); the default
backend ``"auto"`` then shards a grid's cells over those devices (a ``mesh``: the one-device
numbers to float rounding, every discrete choice equal, as every mesh run; the shared 4x4
case's parameters bit for bit); without the split (devices fixed by the user, as in this test
session) ``"auto"`` is ``single``."""

import json
import os
import sys

import jax
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from tests import _procs
from tests.distributed._mpi import assert_same


def _child(mode: str, devices: str | None, out="--where") -> dict:
  """The child's JSON line; ``out``: an .npz for its state and metrics, or ``"--where"``
  (the default): where it would run, no generation run (nothing that tests read)."""
  env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
  if devices is not None:
    env["JAX_NUM_CPU_DEVICES"] = devices
  env["JAX_PLATFORMS"] = "cpu"
  cmd = [sys.executable, "-m", "tests.distributed._cores_run", mode, str(out)]
  r = _procs.run(cmd, 300, env=env)
  assert r.returncode == 0, r.stderr[-3000:]
  return json.loads(r.stdout.strip().splitlines()[-1])


def _arrays(path):
  with np.load(path) as z:
    state = [z[f"state_{i}"] for i in range(sum(k.startswith("state_") for k in z.files))]
    metrics = {}
    for k in z.files:
      if k.startswith("metric_"):
        _, g, name = k.split("_", 2)
        metrics.setdefault(int(g), {})[name] = z[k]
  return state, [metrics[g] for g in sorted(metrics)]


@pytest.mark.slow  # runs in fresh processes, each compiling a generation
def test_cells_over_cores_give_the_one_device_numbers(tmp_path):
  split = _child("split", None, tmp_path / "split.npz")
  one = _child("none", "1", tmp_path / "one.npz")
  assert split["made"] == 2 and split["split"] == 2
  assert split["where"] == "backend mesh: 2 cpu devices, 1 process"
  assert one["split"] == 0 and one["where"] == "backend single: 1 cpu device, 1 process"
  (got, got_m), (want, want_m) = _arrays(tmp_path / "split.npz"), _arrays(tmp_path / "one.npz")
  assert_same(got, got_m, want, want_m, exact=False)
  # the individuals' weights: each network's parameters (one vector each), Adam's two
  # moments and the slow weights, of both players
  params = [i for i, x in enumerate(want) if x.ndim >= 4]
  assert len(params) == 8
  for i in params:
    np.testing.assert_array_equal(got[i], want[i])
  # every thread, XLA's included, may run on every core
  assert split["affinities"] == [split["allowed"]]


def test_a_grid_that_cannot_fill_the_cores_keeps_one_device():
  held = _child("split_3x3", None)  # 3x3 on 2 cores: XLA's threads on one device
  assert held["made"] == 0 and held["split"] == 0
  assert held["where"] == "backend single: 1 cpu device, 1 process"


def test_a_user_fixed_device_count_is_left_alone():
  fixed = _child("split", "2")  # JAX_NUM_CPU_DEVICES=2: the user's devices, not split
  assert fixed["made"] == 0 and fixed["split"] == 0
  assert fixed["where"] == "backend single: 1 cpu device, 1 process"


def test_auto_without_a_split_is_single_and_grid_split_picks_the_largest_fit():
  assert distributed.cores_split() == 0  # the test session fixes JAX_NUM_CPU_DEVICES
  assert distributed.make_backend(co.CoevolutionConfig(rows=2, cols=2)).name == "single"
  assert distributed.split_cpu_cores() == 0  # JAX has started here: nothing changes
  assert len(jax.devices()) == int(os.environ["JAX_NUM_CPU_DEVICES"])
  assert distributed.grid_split(2, 2, 2) == (2, 1)
  assert distributed.grid_split(3, 3, 2) == (1, 1)
  assert distributed.grid_split(3, 3, 4) == (3, 1)
  assert distributed.grid_split(4, 4, 16) == (4, 4)
  assert distributed.grid_split(2, 3, 4) == (1, 3)
  assert distributed.grid_split(5, 5, 1) == (1, 1)
  with pytest.raises(ValueError, match="rows, cols, devices >= 1"):
    distributed.grid_split(0, 2, 2)
  # not a grid: no split, so the run's own check names the bad value (rows must be ...)
  assert distributed.split_cpu_cores(2, grid=(0, 2)) == 0
