"""Block exchanges: a program holds one rectangular block of the coevolution
torus and receives a halo from the neighbouring blocks, as wide on each side
as the neighbourhood reaches (:func:`halo_widths`: one cell for von Neumann and
Moore, two for ``"moore:2"``, whatever a user-given shape needs), rows first,
then columns of the row-extended block, so the corners needed by Moore-like
shapes arrive too.

A halo wider than a block is gathered in several hops: the block ``k`` blocks
away sends its slice directly (a ``ppermute`` or ``sendrecv`` over distance
``k``), so any block size works, down to one cell, and the torus wraps around
(a block at a distance that is a multiple of the number of blocks is this
block itself: no message).

A halo exchange packs the slices of every leaf into one buffer per dtype, so a
generation sends, per dtype and split axis, one message per hop and side
(2 for a halo no wider than the blocks), whatever the networks' structure.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution import neighbour_offsets


def halo_widths(kind) -> tuple[tuple[int, int], tuple[int, int]]:
  """``((above, below), (left, right))``: how many rows before and after a block,
  and columns left and right of it, a block needs to see every member of its
  cells (``max(-drow, 0)`` over the neighbourhood's offsets, and so on)."""
  offsets = np.asarray(neighbour_offsets(kind))
  lo, hi = np.maximum(-offsets.min(axis=0), 0), np.maximum(offsets.max(axis=0), 0)
  return (int(lo[0]), int(hi[0])), (int(lo[1]), int(hi[1]))


def check_blocks(rows: int, cols: int, blocks: tuple[int, int], what: str = "blocks") -> None:
  """The one check that a ``rows x cols`` grid splits into ``blocks`` (``ValueError``)."""
  br, bc = (int(b) for b in blocks)
  if br < 1 or bc < 1 or rows % br or cols % bc:
    raise ValueError(
      f"a {rows}x{cols} grid cannot be split into {br}x{bc} {what}:"
      f" rows must be a multiple of {br} and cols of {bc}"
    )


class BlockExchange:
  """This program holds a ``block_shape`` block of a ``blocks = (br, bc)`` tiling
  of the torus; subclasses say how edges travel between blocks.

  Subclasses implement ``block_start()``, ``_from_neighbour(edge, axis,
  direction)`` (the edge that the neighbouring block in ``direction`` (+1: next
  block along ``axis``; -1: previous) sends, given that every block sends
  ``edge``; ``direction`` is a signed distance in blocks: -2 is the block two
  before this one, wrapping around the torus) and ``reduce(x, op)``.
  """

  def __init__(self, rows: int, cols: int, blocks: tuple[int, int]):
    check_blocks(rows, cols, blocks)
    br, bc = (int(b) for b in blocks)
    self.rows, self.cols = int(rows), int(cols)
    self.blocks = (br, bc)
    self.block_shape = (rows // br, cols // bc)

  local_block = None

  def _from_neighbour(self, edge, axis: int, direction: int):
    raise NotImplementedError

  def _edges_from_neighbour(self, edges: list, axis: int, direction: int) -> list:
    """Every block sends ``edges`` (one slice per leaf); returns what the
    neighbouring block in ``direction`` sent: one message per dtype."""
    out: list[Any] = [None] * len(edges)
    groups: dict[Any, list[int]] = {}
    for i, e in enumerate(edges):
      groups.setdefault(jnp.dtype(e.dtype), []).append(i)
    for idx in groups.values():
      buf = jnp.concatenate([edges[i].reshape(-1) for i in idx])
      got = self._from_neighbour(buf, axis, direction)
      parts = jnp.split(got, np.cumsum([edges[i].size for i in idx])[:-1])
      for i, part in zip(idx, parts, strict=True):
        out[i] = part.reshape(edges[i].shape)
    return out

  def _extended(self, tree: Any, kind) -> tuple[list, Any]:
    """``tree``'s leaves (and treedef), each block extended by its halo along every
    split axis (rows first, so the column halos carry the corners)."""
    widths = halo_widths(kind)
    lr, lc = self.block_shape
    leaves, treedef = jax.tree.flatten(tree)
    for i, x in enumerate(leaves):
      if x.shape[:2] != (lr, lc):
        raise ValueError(f"leaf {i} has shape {x.shape}; expected leading axes {(lr, lc)}")
    for axis in (0, 1):
      if self.blocks[axis] == 1 or not leaves:
        continue
      before, after = widths[axis]
      size = self.block_shape[axis]
      pieces_before = self._halo(leaves, axis, before, -1, size)
      pieces_after = self._halo(leaves, axis, after, +1, size)
      leaves = [
        jnp.concatenate([*(p[i] for p in pieces_before), x, *(p[i] for p in pieces_after)], axis)
        for i, x in enumerate(leaves)
      ]
    return leaves, treedef

  def gather(self, tree: Any, kind) -> Any:
    """Every member's value in each cell of this block, like
    ``coevolution.gather_neighbours`` on the whole grid: ``(lr, lc, ...)`` leaves
    become ``(lr, lc, M, ...)``."""
    offsets = neighbour_offsets(kind)
    widths = halo_widths(kind)
    lr, lc = self.block_shape
    # an unsplit axis wraps around locally (rolls)
    leaves, treedef = self._extended(tree, kind)

    def member(x, dr, dc):
      for axis, d, size in ((0, dr, lr), (1, dc, lc)):
        if self.blocks[axis] == 1:
          x = jnp.roll(x, -d, axis=axis)
        else:
          start = widths[axis][0] + d
          x = jax.lax.slice_in_dim(x, start, start + size, axis=axis)
      return x

    out = [jnp.stack([member(x, dr, dc) for dr, dc in offsets], axis=2) for x in leaves]
    return jax.tree.unflatten(treedef, out)

  def members(self, tree: Any, kind) -> tuple[Any, np.ndarray]:
    """``(source, index)`` as ``WholeGrid.members``: the halo-extended block with its
    two grid axes flattened, and each cell's members' rows of it (an unsplit axis
    wraps around locally), so no ``(lr, lc, M, ...)`` copy is built."""
    offsets = np.asarray(neighbour_offsets(kind))
    widths = halo_widths(kind)
    lr, lc = self.block_shape
    leaves, treedef = self._extended(tree, kind)
    pos = []
    for axis, size in ((0, lr), (1, lc)):
      cells = np.arange(size)[:, None] + offsets[None, :, axis]  # [size, M]
      pos.append(cells % size if self.blocks[axis] == 1 else cells + widths[axis][0])
    ext_cols = lc if self.blocks[1] == 1 else lc + sum(widths[1])
    index = pos[0][:, None, :] * ext_cols + pos[1][None, :, :]  # [lr, lc, M]
    flat = [x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]) for x in leaves]
    return jax.tree.unflatten(treedef, flat), index

  def _halo(self, leaves: list, axis: int, width: int, side: int, size: int) -> list[list]:
    """The ``width`` slices along ``axis`` next to this block on ``side`` (-1:
    before it, +1: after it), in grid order: a list of hops, each one list of
    slices per leaf. Hop ``k`` comes from the block ``k`` away: all of it but
    for the farthest hop, which sends only the part that is needed."""
    hops = []
    for k in range(1, -(-width // size) + 1):  # ceil(width / size) hops
      n = min(size, width - (k - 1) * size)
      lo = size - n if side < 0 else 0  # the last n slices going back, the first n forward
      part = [jax.lax.slice_in_dim(x, lo, lo + n, axis=axis) for x in leaves]
      if (k % self.blocks[axis]) != 0:  # else the block k away is this one: no message
        part = self._edges_from_neighbour(part, axis, side * k)
      hops.append(part)
    return hops[::-1] if side < 0 else hops
