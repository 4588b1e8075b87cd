"""Run under ``mpirun -n P``: a 4x4 coevolution grid, one block per rank, 3 generations.

  mpirun -n P python tests/_mpi_coevolution.py [--compile=MODE] OUT.npz [neighbourhood]
      [block_rows block_cols]

Rank 0 writes the whole grid's final state and every generation's metrics
(assembled from the ranks) and how often the step was traced. ``MODE``: the compile mode
of the step (``distributed.compiler_options``; default XLA's own).

Each rank compiles its step ahead of time and then waits for the others in a barrier that
sleeps between polls: an MPI call inside the step busy-polls, and a rank spinning there
while its neighbours still compile would take their CPU on a small host.
"""

import sys
import time

import jax
import numpy as np

from minmaxlab import distributed
from tests._coevolution_case import GENERATIONS, RING, coevolution, run


def _quiet_barrier(comm) -> None:
  request = comm.Ibarrier()
  while not request.Test():
    time.sleep(0.01)


def main(*argv):
  mode = "default"
  if argv and argv[0].startswith("--compile="):
    mode, argv = argv[0].split("=", 1)[1], argv[1:]
  out, neighbourhood, blocks = argv[0], (argv[1:] or ("von_neumann",))[0], argv[2:]
  exchange = distributed.MPIExchange(4, 4, blocks=tuple(int(b) for b in blocks) or None)
  coev = coevolution(neighbourhood, exchange=exchange)
  traces = []

  def counted(key, state, data):
    traces.append(1)
    return coev.step(key, state, data)

  # one compiled init: a fresh process dispatching it op by op compiles each op (0.8 vs 0.2 CPU-s)
  state = jax.jit(coev.init)(jax.random.key(0))
  step = jax.jit(counted, compiler_options=distributed.compiler_options(mode))
  step.lower(jax.random.key(1), state, RING).compile()  # the jit's calls reuse this executable
  _quiet_barrier(exchange.comm)
  state, metrics = run(coev, step, state)
  whole = exchange.gather_blocks(jax.device_get(state))
  metrics = [exchange.gather_blocks(m) for m in metrics]
  if exchange.rank == 0:
    leaves = {f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(whole))}
    for g, m in enumerate(metrics):
      leaves.update({f"metric_{g}_{k}": np.asarray(v) for k, v in m.items()})
    np.savez(out, traces=len(traces), generations=GENERATIONS, size=exchange.size, **leaves)


if __name__ == "__main__":
  main(*sys.argv[1:])
