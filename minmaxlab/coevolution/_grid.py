"""The toroidal grid: neighbourhoods and the neighbour exchange."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# Offsets (drow, dcol); the cell itself comes first.
NEIGHBOURHOODS = {
  "von_neumann": ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)),
  "moore": ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)),
}


def neighbour_offsets(kind: str) -> tuple[tuple[int, int], ...]:
  """``(drow, dcol)`` of every member of a neighbourhood, the cell itself first."""
  if kind not in NEIGHBOURHOODS:
    raise ValueError(f"neighbourhood must be one of {sorted(NEIGHBOURHOODS)}, got {kind!r}")
  return NEIGHBOURHOODS[kind]


def neighbour_indices(rows: int, cols: int, kind: str = "von_neumann") -> np.ndarray:
  """Flat cell index ``r * cols + c`` of every member: ``[rows, cols, M]`` (numpy, static)."""
  offsets = neighbour_offsets(kind)
  r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
  return np.stack([((r + dr) % rows) * cols + (c + dc) % cols for dr, dc in offsets], axis=-1)


def member_mask(rows: int, cols: int, kind: str = "von_neumann") -> np.ndarray:
  """``[rows, cols, M]`` bool: False for a member that repeats an earlier one.

  On small tori several offsets land on the same cell (on 2x2 "up" and "down"
  are one cell; on 1x1 every member is the cell itself). Such copies are kept
  as array slots, for static shapes, but masked out of fitness, selection and
  the mixture, so every distinct neighbour counts once (as in Lipizzaner).
  """
  idx = neighbour_indices(rows, cols, kind)
  mask = np.ones(idx.shape, bool)
  for m in range(1, idx.shape[-1]):
    mask[..., m] = np.all(idx[..., m : m + 1] != idx[..., :m], axis=-1)
  return mask


def gather_neighbours(tree: Any, kind: str = "von_neumann") -> Any:
  """Copy every member's value into each cell: ``(rows, cols, ...)`` leaves
  become ``(rows, cols, M, ...)``, member ``m`` of cell ``(r, c)`` being cell
  ``(r + dr_m, c + dc_m)`` on the torus.

  Written as rolls of the grid axes: on one device they are copies; on a
  device mesh XLA lowers them to collective permutes between shards.
  """
  offsets = neighbour_offsets(kind)

  def one(x):
    return jnp.stack([jnp.roll(x, (-dr, -dc), axis=(0, 1)) for dr, dc in offsets], axis=2)

  return jax.tree.map(one, tree)
