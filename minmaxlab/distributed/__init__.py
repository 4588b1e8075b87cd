"""minmaxlab.distributed: the coevolution grid on a device mesh.

:func:`grid_mesh`, :func:`shard_grid` and :func:`sharded_step` run the same
jitted generation with the grid's cell axes split across devices (fake CPU
devices in tests, GPUs in production); results equal the single-device run.
"""

from minmaxlab.distributed._mesh import (
    check_grid_fits,
    grid_mesh,
    grid_shardings,
    shard_grid,
    sharded_step,
)

__all__ = ["check_grid_fits", "grid_mesh", "grid_shardings", "shard_grid", "sharded_step"]
