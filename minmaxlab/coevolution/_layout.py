"""Lipizzaner's transposed neighbourhoods (``CoevolutionConfig.neighbourhood_layout``).

Lipizzaner's ``Neighbourhood._adjacent_cells`` (f411cb5) places client ``idx`` at
``x = idx % dim, y = idx // dim``, computes the von Neumann neighbours ``(x +- 1, y)``,
``(x, y +- 1)`` and marks them in a ``mask[x, y]`` over the clients reshaped by rows
(``nodes[row, col]``, ``row = y``). The mask is indexed with ``x`` as the row, so a cell gets
the neighbours of its transposed cell: on a square grid, cell ``(r, c)`` is grouped with the
neighbours of ``(c, r)`` (never itself: the two differ in both coordinates off the diagonal).
On 2x2 grids and on the diagonal nothing changes; cell 1 of a 3x3 grid gets {0, 4, 5, 6}.

Here: member 0 is the cell itself, members ``1..M-1`` are those of cell ``(c, r)`` under the
configured offsets (for von Neumann radius 1, the reference's sets exactly; the order of the
members is this library's, the reference's lists them by cell id with the cell last).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from minmaxlab.coevolution._exchange import WholeGrid
from minmaxlab.coevolution._grid import gather_neighbours, neighbour_indices


def transposed_indices(rows: int, cols: int, kind: Any = "von_neumann") -> np.ndarray:
  """``[rows, cols, M]`` flat cell ids of every member under the transposed layout."""
  if rows != cols:
    raise ValueError(f"the transposed layout needs a square grid, got {rows}x{cols}")
  idx = neighbour_indices(rows, cols, kind).transpose(1, 0, 2).copy()
  idx[..., 0] = np.arange(rows * cols).reshape(rows, cols)
  return idx


def gather_transposed(tree: Any, kind: Any = "von_neumann") -> Any:
  """:func:`minmaxlab.coevolution.gather_neighbours` under the transposed layout."""

  def one(x, every):
    return jax.numpy.swapaxes(every, 0, 1).at[:, :, 0].set(x)

  return jax.tree.map(one, tree, gather_neighbours(tree, kind))


class TransposedGrid(WholeGrid):
  """The whole grid in this program, neighbourhoods transposed as Lipizzaner's are."""

  def __init__(self, rows: int, cols: int):
    if rows != cols:
      raise ValueError(f"the transposed layout needs a square grid, got {rows}x{cols}")
    super().__init__(rows, cols)

  def gather(self, tree: Any, kind: Any) -> Any:
    return gather_transposed(tree, kind)

  def members(self, tree: Any, kind: Any) -> tuple[Any, np.ndarray]:
    flat, _ = super().members(tree, kind)
    return flat, transposed_indices(self.rows, self.cols, kind)
