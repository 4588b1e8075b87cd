"""How one program sees the grid: the cells it owns, how neighbours arrive, and
grid-wide reductions.

The generation step (selection, mutation, training, mixture evolution) is the
same code for every backend; only an *exchange* differs:

* :class:`WholeGrid` -- the program holds every cell; neighbours are rolls of the
  grid axes (copies on one device; collective permutes that XLA derives when the
  grid is sharded with ``jax.jit`` shardings).
* block exchanges (``minmaxlab.distributed``: a device mesh, MPI ranks) -- the
  program holds one rectangular block of the torus and receives a halo, as wide
  as the neighbourhood reaches, from the neighbouring blocks.

An exchange has ``rows``, ``cols``, ``block_shape`` (the cells this program
steps), ``local_block`` (``None``, or the ``(row, col)`` of this process's block
when ``init`` must build only that block), ``block_start()``, ``gather(tree,
kind)``, ``members(tree, kind)`` (the same members as a source and per-cell indices into
it) and ``reduce(x, op)``; ``coevolution`` knows nothing else of how it is distributed.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from minmaxlab.coevolution._grid import gather_neighbours, neighbour_indices


class WholeGrid:
  """Every cell in this program (one device, or a grid sharded by ``jax.jit``).

  Args:
    rows, cols: the grid.
  """

  def __init__(self, rows: int, cols: int):
    self.rows, self.cols = int(rows), int(cols)
    self.block_shape = (self.rows, self.cols)

  local_block = None  # the whole grid: nothing to slice

  def block_start(self):
    """``(row, col)`` of this program's first cell (traced or static)."""
    return 0, 0

  def gather(self, tree: Any, kind: str) -> Any:
    return gather_neighbours(tree, kind)

  def members(self, tree: Any, kind: str) -> tuple[Any, np.ndarray]:
    """``(source, index)``: ``tree``'s leaves with the grid axes flattened
    (``(rows * cols, ...)``) and each cell's members' rows of it (``(rows, cols, M)``),
    so that ``source[index[r, c]]`` is cell ``(r, c)``'s slice of :meth:`gather` without
    building the whole ``(rows, cols, M, ...)`` copy."""
    flat = jax.tree.map(lambda x: x.reshape((self.rows * self.cols,) + x.shape[2:]), tree)
    return flat, neighbour_indices(self.rows, self.cols, kind)

  def reduce(self, x: jax.Array, op: str) -> jax.Array:
    """Grid-wide ``"min"`` or ``"sum"`` of a value computed over this program's
    cells (the identity here)."""
    del op
    return x
