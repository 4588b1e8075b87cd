"""Run under ``mpirun -n P``: a 4x4 coevolution grid, one block per rank, 3 generations.

  mpirun -n P python tests/_mpi_coevolution.py OUT.npz [neighbourhood] [block_rows block_cols]

Rank 0 writes the whole grid's final state and every generation's metrics
(assembled from the ranks) and how often the step was traced.
"""

import sys

import jax
import numpy as np

from minmaxlab import distributed
from tests._coevolution_case import GENERATIONS, coevolution, run


def main(out, neighbourhood="von_neumann", *blocks):
  exchange = distributed.MPIExchange(4, 4, blocks=tuple(int(b) for b in blocks) or None)
  coev = coevolution(neighbourhood, exchange=exchange)
  traces = []

  def counted(key, state, data):
    traces.append(1)
    return coev.step(key, state, data)

  state, metrics = run(coev, jax.jit(counted))
  whole = exchange.gather_blocks(jax.device_get(state))
  metrics = [exchange.gather_blocks(m) for m in metrics]
  if exchange.rank == 0:
    leaves = {f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(whole))}
    for g, m in enumerate(metrics):
      leaves.update({f"metric_{g}_{k}": np.asarray(v) for k, v in m.items()})
    np.savez(out, traces=len(traces), generations=GENERATIONS, size=exchange.size, **leaves)


if __name__ == "__main__":
  main(*sys.argv[1:])
