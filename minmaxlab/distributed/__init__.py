"""minmaxlab.distributed: the coevolution grid on a device mesh.

:func:`grid_mesh`, :func:`shard_grid` and :func:`sharded_step` run the same
jitted generation with the grid's cell axes split across devices (fake CPU
devices in tests, GPUs in production, several hosts after
``jax.distributed.initialize``); :class:`MeshExchange` does the neighbour
exchange explicitly (``shard_map`` + ``ppermute``) and :class:`MPIExchange` over
MPI ranks (``mpi4jax``). The algorithm is the same code on every backend and
the results equal the single-device run.
"""

from minmaxlab.distributed._exchange import MeshExchange, MPIExchange, mpi_blocks
from minmaxlab.distributed._init import initialize
from minmaxlab.distributed._mesh import (
  check_grid_fits,
  grid_mesh,
  grid_shardings,
  shard_grid,
  sharded_step,
)

__all__ = [
  "MPIExchange",
  "MeshExchange",
  "check_grid_fits",
  "grid_mesh",
  "grid_shardings",
  "initialize",
  "mpi_blocks",
  "shard_grid",
  "sharded_step",
]
