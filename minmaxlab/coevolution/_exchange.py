"""How one program sees the grid: the cells it owns, how neighbours arrive, and
grid-wide reductions.

The generation step (selection, mutation, training, mixture evolution) is the
same code for every backend; only an *exchange* differs:

* :class:`WholeGrid` -- the program holds every cell; neighbours are rolls of the
  grid axes (copies on one device; collective permutes that XLA derives when the
  grid is sharded with ``jax.jit`` shardings).
* :class:`BlockExchange` subclasses -- the program holds one rectangular block of
  the torus and receives a one-cell-wide halo from the 4 neighbouring blocks
  (rows first, then columns of the row-extended block, so the corners needed by
  the Moore neighbourhood arrive too). ``minmaxlab.distributed`` gives one over
  a device mesh (``jax.shard_map`` + ``lax.ppermute``) and one over MPI ranks
  (``mpi4jax.sendrecv``).

A halo exchange packs every leaf of the state into one buffer per dtype, so a
generation sends 4 messages per dtype whatever the networks' structure.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution._grid import gather_neighbours, neighbour_offsets


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

  def reduce(self, x: jax.Array, op: str) -> jax.Array:
    """Grid-wide ``"min"`` or ``"sum"`` of a value computed over this program's
    cells (the identity here)."""
    del op
    return x


class BlockExchange:
  """This program holds a ``block_shape`` block of a ``blocks = (br, bc)`` tiling
  of the torus; subclasses say how edges travel between blocks.

  Subclasses implement ``block_start()``, ``_from_neighbour(edge, axis,
  direction)`` (the edge that the neighbouring block in ``direction`` (+1: next
  block along ``axis``; -1: previous) sends, given that every block sends
  ``edge``) and ``reduce(x, op)``.
  """

  def __init__(self, rows: int, cols: int, blocks: tuple[int, int]):
    br, bc = (int(b) for b in blocks)
    if br < 1 or bc < 1 or rows % br or cols % bc:
      raise ValueError(
          f"a {rows}x{cols} grid cannot be split into {br}x{bc} blocks:"
          f" rows must be a multiple of {br} and cols of {bc}")
    self.rows, self.cols = int(rows), int(cols)
    self.blocks = (br, bc)
    self.block_shape = (rows // br, cols // bc)

  local_block = None

  def _from_neighbour(self, edge, axis: int, direction: int):
    raise NotImplementedError

  def _halo(self, x, axis: int):
    """``x`` extended by one slice on both sides of ``axis`` with the
    neighbouring blocks' edges (this block's own, wrapped, when the axis is not
    split)."""
    first = jax.lax.slice_in_dim(x, 0, 1, axis=axis)
    last = jax.lax.slice_in_dim(x, x.shape[axis] - 1, x.shape[axis], axis=axis)
    if self.blocks[axis] == 1:
      before, after = last, first
    else:
      before = self._from_neighbour(last, axis, -1)  # the previous block's last slice
      after = self._from_neighbour(first, axis, +1)  # the next block's first slice
    return jnp.concatenate([before, x, after], axis=axis)

  def gather(self, tree: Any, kind: str) -> Any:
    offsets = neighbour_offsets(kind)
    lr, lc = self.block_shape
    leaves, treedef = jax.tree.flatten(tree)
    groups: dict[Any, list[int]] = {}
    for i, x in enumerate(leaves):
      if x.shape[:2] != (lr, lc):
        raise ValueError(f"leaf {i} has shape {x.shape}; expected leading axes {(lr, lc)}")
      groups.setdefault(jnp.dtype(x.dtype), []).append(i)
    out: list[Any] = [None] * len(leaves)
    for idx in groups.values():
      sizes = [int(np.prod(leaves[i].shape[2:], dtype=int)) for i in idx]
      packed = jnp.concatenate([leaves[i].reshape(lr, lc, -1) for i in idx], axis=-1)
      ext = self._halo(self._halo(packed, 0), 1)  # (lr + 2, lc + 2, K)
      members = jnp.stack([ext[1 + dr:1 + dr + lr, 1 + dc:1 + dc + lc] for dr, dc in offsets],
                          axis=2)  # (lr, lc, M, K)
      parts = jnp.split(members, np.cumsum(sizes)[:-1], axis=-1)
      for i, part in zip(idx, parts, strict=True):
        out[i] = part.reshape((lr, lc, len(offsets)) + leaves[i].shape[2:])
    return jax.tree.unflatten(treedef, out)
