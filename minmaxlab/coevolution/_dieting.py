"""Data dieting (Lipizzaner's ``sampling_ratio``): every cell trains on its own subset."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def diet_size(size: int, ratio: float) -> int:
  """Rows of a cell's subset: ``round(ratio * size)``, at least 1."""
  if not 0.0 < ratio <= 1.0:
    raise ValueError(f"sampling_ratio must be in (0, 1], got {ratio!r}")
  return max(1, int(round(ratio * size)))


def diet_indices(key: jax.Array, cell_id, size: int, ratio: float) -> jax.Array:
  """The rows of a ``size``-row data set that cell ``cell_id`` trains on.

  ``diet_size(size, ratio)`` distinct rows: the head of a random permutation keyed by
  ``fold_in(key, cell_id)``, so a cell keeps its subset for the whole run and cells
  differ (Lipizzaner seeds each cell's subset with ``seed + cell id``). ``cell_id``
  may be traced; ``size`` and ``ratio`` are static. ``ratio = 1``: every row, in order.
  """
  m = diet_size(size, ratio)
  if m == size:
    return jnp.arange(size, dtype=jnp.int32)
  k = jax.random.fold_in(key, jnp.asarray(cell_id, jnp.uint32))
  # argsort of uniforms: a uniform random permutation (cheaper to compile than permutation).
  return jnp.argsort(jax.random.uniform(k, (size,)))[:m].astype(jnp.int32)


def diet_rows(key: jax.Array, cell_id, rows: jax.Array, ratio: float) -> jax.Array:
  """``rows[diet_indices(key, cell_id, len(rows), ratio)]``: a cell's own data set."""
  return rows[diet_indices(key, cell_id, rows.shape[0], ratio)]
