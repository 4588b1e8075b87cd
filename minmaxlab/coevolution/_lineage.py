"""Lineage ids: where and when an individual (a generator or a discriminator) was born.

An individual's lineage id is one int32, ``cell * 2**16 + generation``: the flat index
``row * cols + col`` of the cell that created it and the number of generations the grid
had taken when it was created. :meth:`Coevolution.init` gives every individual
``(its cell, 0)``; a cell re-seeded with fresh networks (no finite neighbour to copy)
gives them ``(that cell, the generation being taken)``. Nothing else creates a lineage:
selection, the neighbour exchange, training, mutation, replacement, the repair from a
neighbour and checkpoints copy the id with the individual, so the number of distinct
ids on the grid counts the lineages still alive (one when one lineage has taken over).

Limits: at most ``2**15`` cells (``Coevolution`` refuses a larger grid); a generation of
birth above ``2**16 - 1`` is stored as ``2**16 - 1``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

CELL_SHIFT = 16  # lineage id = cell << CELL_SHIFT | generation of birth
MAX_CELLS = 2**15  # cell << 16 stays a non-negative int32
MAX_GENERATION = 2**CELL_SHIFT - 1


def lineage_id(cell, generation) -> jax.Array:
  """The int32 id of an individual born in ``cell`` (flat index) at ``generation``
  (saturated at ``2**16 - 1``); broadcasts."""
  cell = jnp.asarray(cell, jnp.int32)
  generation = jnp.minimum(jnp.asarray(generation, jnp.int32), MAX_GENERATION)
  return cell * (1 << CELL_SHIFT) + generation


def lineage_origin(ids) -> tuple[np.ndarray, np.ndarray]:
  """``(cell, generation)`` of birth of lineage ids (numpy int arrays, same shape)."""
  ids = np.asarray(ids, np.int64)
  return ids >> CELL_SHIFT, ids & MAX_GENERATION
