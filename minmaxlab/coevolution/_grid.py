"""The toroidal grid: neighbourhoods and the neighbour exchange.

A neighbourhood is a tuple of ``(drow, dcol)`` offsets, the cell itself
``(0, 0)`` first. It is given as

* a name: ``"von_neumann"`` (Manhattan distance <= 1: cell + 4), ``"moore"``
  (Chebyshev distance <= 1: cell + 8), or either with a radius,
  ``"von_neumann:2"`` (cell + 12), ``"moore:2"`` (cell + 24);
* ``"custom:0,0;1,1;-2,0"`` (the string form, for config files and flags), or
  the tuple itself, ``((0, 0), (1, 1), (-2, 0))``: any distinct integer offsets,
  ``(0, 0)`` first, kept in the order given.

Member order of the named shapes (so runs are reproducible, and the radius
``r - 1`` shape is a prefix of the radius ``r`` one): the cell, then by the
shape's own distance (Manhattan for von Neumann, Chebyshev for Moore), then by
Manhattan distance, then vertical before horizontal (``|dcol|`` ascending),
then ``drow``, then ``dcol``. Radius 1 gives the historical orders:
``(0,0) (-1,0) (1,0) (0,-1) (0,1)`` and, for Moore, those then
``(-1,-1) (-1,1) (1,-1) (1,1)``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

SHAPES = ("von_neumann", "moore")


def _shape(name: str, radius: int) -> tuple[tuple[int, int], ...]:
  def distance(dr, dc):
    return abs(dr) + abs(dc) if name == "von_neumann" else max(abs(dr), abs(dc))

  span = range(-radius, radius + 1)
  members = [(dr, dc) for dr in span for dc in span if distance(dr, dc) <= radius]
  return tuple(
    sorted(members, key=lambda o: (distance(*o), abs(o[0]) + abs(o[1]), abs(o[1]), o[0], o[1]))
  )


# The radius-1 shapes by name (the cell itself first); see the module docstring.
NEIGHBOURHOODS = {name: _shape(name, 1) for name in SHAPES}


def _check_offsets(offsets: Any, given: Any) -> tuple[tuple[int, int], ...]:
  def bad(why):
    raise ValueError(f"neighbourhood {given!r}: {why}")

  if isinstance(offsets, str | bytes) or not isinstance(offsets, Sequence) or not offsets:
    bad("expected a name or a non-empty sequence of (drow, dcol) offsets")
  out = []
  for o in offsets:
    ok = isinstance(o, Sequence) and not isinstance(o, str | bytes) and len(o) == 2
    if not ok or not all(isinstance(d, int | np.integer) and not isinstance(d, bool) for d in o):
      bad(f"offset {o!r} is not a pair of integers (drow, dcol)")
    out.append((int(o[0]), int(o[1])))
  if out[0] != (0, 0):
    bad(f"the first offset must be the cell itself (0, 0), got {out[0]}")
  seen = set()
  for o in out:
    if o in seen:
      bad(f"offset {o} appears twice")
    seen.add(o)
  return tuple(out)


@functools.lru_cache(maxsize=64)
def _parse(kind: str) -> tuple[tuple[int, int], ...]:
  if kind in NEIGHBOURHOODS:
    return NEIGHBOURHOODS[kind]
  name, sep, arg = kind.partition(":")
  if sep and name in SHAPES:
    if not arg.isdigit() or int(arg) < 1:
      raise ValueError(f"neighbourhood {kind!r}: the radius must be an integer >= 1, got {arg!r}")
    return _shape(name, int(arg))
  if sep and name == "custom":
    pairs = []
    for part in arg.split(";"):
      try:
        dr, dc = (int(v) for v in part.split(","))
      except ValueError:
        raise ValueError(
          f"neighbourhood {kind!r}: {part!r} is not 'drow,dcol' (expected e.g."
          " 'custom:0,0;1,1;-2,0')"
        ) from None
      pairs.append((dr, dc))
    return _check_offsets(pairs, kind)
  raise ValueError(
    f"neighbourhood must be one of {list(SHAPES)}, 'NAME:RADIUS' (e.g. 'moore:2'),"
    f" 'custom:drow,dcol;...' or a tuple of (drow, dcol) offsets, got {kind!r}"
  )


def neighbour_offsets(kind: str | Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
  """``(drow, dcol)`` of every member of a neighbourhood, the cell itself first.

  Args:
    kind: ``"von_neumann"``, ``"moore"``, ``"von_neumann:R"``, ``"moore:R"``
      (radius ``R >= 1``), ``"custom:0,0;1,1;-2,0"`` or a tuple of offsets
      (``(0, 0)`` first, distinct integers). Member order: see the module docstring.

  Raises:
    ValueError: one line naming the bad value.
  """
  if isinstance(kind, str):
    return _parse(kind)
  return _check_offsets(kind, kind)


def neighbour_indices(rows: int, cols: int, kind: str = "von_neumann") -> np.ndarray:
  """Flat cell index ``r * cols + c`` of every member: ``[rows, cols, M]`` (numpy, static)."""
  offsets = neighbour_offsets(kind)
  r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
  return np.stack([((r + dr) % rows) * cols + (c + dc) % cols for dr, dc in offsets], axis=-1)


def member_mask(rows: int, cols: int, kind: str = "von_neumann") -> np.ndarray:
  """``[rows, cols, M]`` bool: False for a member that repeats an earlier one.

  On small tori several offsets land on the same cell (on 2x2 "up" and "down"
  are one cell; on 1x1 every member is the cell itself; with radius 2 on a 3x3
  torus ``-2`` and ``+1`` are one row). Such copies are kept as array slots,
  for static shapes, but masked out of fitness, selection and the mixture, so
  every distinct neighbour counts once (as in Lipizzaner).
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


def net_weights_dist(params: Any, kind: str = "von_neumann") -> jax.Array:
  """``[rows, cols]``: each cell's mean L2 distance between the weights of every pair of
  individuals in its neighbourhood (Lipizzaner's ``Population.net_weights_dist``, which
  logs the distance of each pair of the neighbourhood's networks every iteration; here
  the mean over the pairs).

  ``params`` is one player's ``(rows, cols, P, ...)`` pytree (e.g. ``state.params.min``).
  The distance of two individuals is ``sqrt(sum over all leaves of (a - b)^2)``. Members
  that repeat an earlier one on a small torus (:func:`member_mask`) are left out, so
  each distinct individual counts once; a neighbourhood of one individual gives 0.
  Diversity falls to 0 when one lineage has copied itself over the neighbourhood.
  """
  leaves = jax.tree.leaves(params)
  rows, cols, pop = leaves[0].shape[:3]
  flat = jnp.concatenate([x.reshape(rows, cols, pop, -1) for x in leaves], axis=-1)
  every = gather_neighbours(flat, kind)  # [rows, cols, M, P, D]
  m = every.shape[2]
  every = every.reshape(rows, cols, m * pop, -1)
  keep = jnp.repeat(jnp.asarray(member_mask(rows, cols, kind)), pop, axis=-1)  # [rows, cols, MP]
  pairs = [(i, j) for i in range(m * pop) for j in range(i + 1, m * pop)]
  if not pairs:
    return jnp.zeros((rows, cols), flat.dtype)
  # one pair at a time (differences, not a Gram matrix: no cancellation for near-copies)
  dist = jnp.stack(
    [jnp.sqrt(jnp.sum(jnp.square(every[:, :, i] - every[:, :, j]), -1)) for i, j in pairs], -1
  )
  pair = jnp.stack([keep[..., i] & keep[..., j] for i, j in pairs], -1)
  n = jnp.sum(pair, axis=-1)
  total = jnp.sum(jnp.where(pair, dist, 0.0), axis=-1)
  return jnp.where(n > 0, total / jnp.maximum(n, 1), 0.0)
