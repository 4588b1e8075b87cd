"""A child process of test_cells_over_cores.py: the shared 4x4 coevolution case through
``make_backend(config)`` (the default, ``"auto"``), after
``split_cpu_cores(2)`` when argv[1] starts with ``split``; argv[2]: an .npz for the state
and metrics, or ``--where``: the backend only, no generation run (for a test of where a run
would go, which a run does not change). Prints one JSON line: where it ran, digests (of a
run), the threads' affinities."""

import hashlib
import json
import os
import sys

import jax
import numpy as np

from minmaxlab import distributed

grid = (3, 3) if sys.argv[1] == "split_3x3" else (4, 4)
made = distributed.split_cpu_cores(2, grid=grid) if sys.argv[1].startswith("split") else 0

from tests import _coevolution_case as case  # noqa: E402 (after the split: nothing ran yet)

WHERE_ONLY = sys.argv[2:3] == ["--where"]
backend = distributed.make_backend(case.coevolution().config)
jax.devices()  # JAX's backends start here, as a run's first array would start them


def _keyless(tree):
  """``tree`` with every PRNG key as its raw key data."""
  return jax.tree.map(
    lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
    tree,
  )


def _digest(tree):
  digest = hashlib.sha256()
  for x in jax.tree.leaves(_keyless(tree)):
    digest.update(np.asarray(x).tobytes())
  return digest.hexdigest()


digests = {"state": None, "metrics": None}
if not WHERE_ONLY:
  coev = case.coevolution(exchange=backend.exchange)
  init, step = backend.jit(coev)
  state, metrics = case.run(coev, step, init(jax.random.key(0)))
  host = backend.to_host(state)
  digests = {"state": _digest(host), "metrics": _digest(metrics)}
  if len(sys.argv) > 2:  # the arrays, for a test that compares more than digests
    flat = {f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(_keyless(host)))}
    for g, m in enumerate(metrics):
      flat |= {f"metric_{g}_{k}": np.asarray(v) for k, v in m.items()}
    np.savez(sys.argv[2], **flat)
affinities = set()
for task in os.listdir("/proc/self/task"):
  try:
    affinities.add(tuple(sorted(os.sched_getaffinity(int(task)))))
  except OSError:
    pass
print(
  json.dumps(
    {
      "made": made,
      "split": distributed.cores_split(),
      "where": backend.where(),
      **digests,
      "affinities": sorted(affinities),
      "allowed": sorted(os.sched_getaffinity(0)),
    }
  )
)
