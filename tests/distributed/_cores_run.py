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


def _digest(tree):
  digest = hashlib.sha256()
  for x in jax.tree.leaves(tree):
    x = jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    digest.update(np.asarray(x).tobytes())
  return digest.hexdigest()


def _run():
  coev = case.coevolution(exchange=backend.exchange)
  init, step = backend.jit(coev)
  return case.run(coev, step, init(jax.random.key(0)))


state, metrics = (None, None) if WHERE_ONLY else _run()
host = None if WHERE_ONLY else backend.to_host(state)
if len(sys.argv) > 2 and not WHERE_ONLY:  # the arrays, for a test that compares more than digests
  keyless = jax.tree.map(
    lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
    host,
  )
  flat = {f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(keyless))}
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
      "state": None if WHERE_ONLY else _digest(host),
      "metrics": None if WHERE_ONLY else _digest(metrics),
      "affinities": sorted(affinities),
      "allowed": sorted(os.sched_getaffinity(0)),
    }
  )
)
