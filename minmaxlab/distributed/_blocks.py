"""Block exchanges: a program holds one rectangular block of the coevolution
torus and receives a one-cell-wide halo from the 4 neighbouring blocks (rows
first, then columns of the row-extended block, so the corners needed by the
Moore neighbourhood arrive too).

A halo exchange packs the edges of every leaf into one buffer per dtype, so a
generation sends 2 messages per dtype and split axis, whatever the networks'
structure.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.coevolution import neighbour_offsets


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
  ``edge``) and ``reduce(x, op)``.
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

  def gather(self, tree: Any, kind: str) -> Any:
    offsets = neighbour_offsets(kind)
    lr, lc = self.block_shape
    leaves, treedef = jax.tree.flatten(tree)
    for i, x in enumerate(leaves):
      if x.shape[:2] != (lr, lc):
        raise ValueError(f"leaf {i} has shape {x.shape}; expected leading axes {(lr, lc)}")
    # Extend the block by a one-cell halo along every split axis (rows first, so the
    # column halos carry the corners); an unsplit axis wraps around locally (rolls).
    for axis in (0, 1):
      if self.blocks[axis] == 1:
        continue
      n = leaves[0].shape[axis] if leaves else 0
      firsts = [jax.lax.slice_in_dim(x, 0, 1, axis=axis) for x in leaves]
      lasts = [jax.lax.slice_in_dim(x, n - 1, n, axis=axis) for x in leaves]
      before = self._edges_from_neighbour(lasts, axis, -1)  # previous block's last slice
      after = self._edges_from_neighbour(firsts, axis, +1)  # next block's first slice
      leaves = [
        jnp.concatenate([b, x, a], axis=axis) for b, x, a in zip(before, leaves, after, strict=True)
      ]

    def member(x, dr, dc):
      for axis, d, size in ((0, dr, lr), (1, dc, lc)):
        if self.blocks[axis] == 1:
          x = jnp.roll(x, -d, axis=axis)
        else:
          x = jax.lax.slice_in_dim(x, 1 + d, 1 + d + size, axis=axis)
      return x

    out = [jnp.stack([member(x, dr, dc) for dr, dc in offsets], axis=2) for x in leaves]
    return jax.tree.unflatten(treedef, out)
