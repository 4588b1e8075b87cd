"""minmaxlab.distributed: the coevolution grid on a device mesh or MPI ranks.

:func:`make_backend` is the one factory from a ``CoevolutionConfig``: it checks
the grid against the devices or ranks and returns a :class:`Backend` (the
exchange, the jitted ``init``/``step`` for its placement, host transfers).

:func:`grid_mesh`, :func:`shard_grid` and :func:`sharded_step` run the same
jitted generation with the grid's cell axes split across devices (fake CPU
devices in tests, GPUs in production, several hosts after
``jax.distributed.initialize``); :class:`MeshExchange` does the neighbour
exchange explicitly (``shard_map`` + ``ppermute``) and :class:`MPIExchange` over
MPI ranks (``mpi4jax``). The algorithm is the same code on every backend and
the results equal the single-device run.

:func:`split_cpu_cores` (before JAX starts) gives a CPU host one device per core;
``make_backend(config, "auto")`` then runs the grid's cells over the cores.
"""

from minmaxlab.distributed._backend import (
  Backend,
  compiler_options,
  make_backend,
  placement,
)
from minmaxlab.distributed._blocks import BlockExchange
from minmaxlab.distributed._cores import cores_split, grid_split, split_cpu_cores
from minmaxlab.distributed._init import initialize
from minmaxlab.distributed._mesh import (
  MeshExchange,
  check_grid_fits,
  grid_mesh,
  grid_shardings,
  shard_grid,
  sharded_step,
)
from minmaxlab.distributed._mpi import MPIExchange, mpi_blocks

__all__ = [
  "Backend",
  "BlockExchange",
  "MPIExchange",
  "MeshExchange",
  "check_grid_fits",
  "compiler_options",
  "cores_split",
  "grid_mesh",
  "grid_shardings",
  "grid_split",
  "initialize",
  "make_backend",
  "mpi_blocks",
  "placement",
  "shard_grid",
  "sharded_step",
  "split_cpu_cores",
]
