"""Shard the coevolution grid over a device mesh (SPMD, one compiled step)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

GRID_AXES = ("rows", "cols")


def grid_mesh(shape: tuple[int, int] | None = None, devices=None) -> Mesh:
  """A 2-D ``("rows", "cols")`` mesh over ``devices`` (default: all devices).

  ``shape`` defaults to ``(num_devices, 1)``: blocks of grid rows per device.
  """
  devices = list(jax.devices() if devices is None else devices)
  shape = (len(devices), 1) if shape is None else tuple(int(s) for s in shape)
  if len(shape) != 2 or shape[0] * shape[1] != len(devices) or min(shape) < 1:
    raise ValueError(f"mesh shape {shape} does not fit {len(devices)} devices")
  return Mesh(np.array(devices).reshape(shape), GRID_AXES, axis_types=(AxisType.Auto,) * 2)


def check_grid_fits(rows: int, cols: int, mesh: Mesh) -> None:
  """Raise ``ValueError`` unless the mesh's axes divide the grid's."""
  mr, mc = mesh.shape["rows"], mesh.shape["cols"]
  if rows % mr or cols % mc:
    raise ValueError(
        f"a {rows}x{cols} grid cannot be split into {mr}x{mc} device blocks:"
        f" rows must be a multiple of {mr} and cols of {mc}")


def grid_shardings(tree: Any, mesh: Mesh, rows: int, cols: int) -> Any:
  """``NamedSharding`` for every leaf: the leading ``(rows, cols)`` axes are split
  over the mesh, anything else (scalars, shared data) is replicated."""

  def one(x):
    shape = np.shape(x)
    if len(shape) >= 2 and shape[:2] == (rows, cols):
      return NamedSharding(mesh, P("rows", "cols"))
    return NamedSharding(mesh, P())

  return jax.tree.map(one, tree)


def shard_grid(tree: Any, mesh: Mesh, rows: int, cols: int) -> Any:
  """Place a grid pytree (e.g. a ``CoevolutionState``) on the mesh."""
  check_grid_fits(rows, cols, mesh)
  return jax.device_put(tree, grid_shardings(tree, mesh, rows, cols))


def sharded_step(coevolution, mesh: Mesh, state_example: Any):
  """Compile ``coevolution.step`` once for a grid sharded over ``mesh``.

  The cells' leading axes are split across devices with ``NamedSharding``; the
  neighbour exchange (rolls of the grid axes) becomes collective permutes
  between neighbouring blocks, derived by XLA. The algorithm code is the same
  as on one device, and so are the numbers: every random choice is keyed by the
  cell's index.

  Args:
    coevolution: a ``minmaxlab.coevolution.Coevolution`` built with
      ``cell_strategy="vmap"`` (a sequential map over cells would serialise
      the devices).
    mesh: from :func:`grid_mesh`.
    state_example: a state (or its abstract shape) to derive the shardings from.

  Returns:
    ``step(key, state, data) -> (state, metrics)``, jitted, with the state's
    sharding kept from generation to generation.
  """
  c = coevolution.config
  check_grid_fits(c.rows, c.cols, mesh)
  if coevolution.cell_strategy != "vmap":
    raise ValueError(
        "sharded coevolution needs cell_strategy='vmap' (got"
        f" {coevolution.cell_strategy!r}): a sequential map over cells would run"
        " every device's cells one after another")
  state_sharding = grid_shardings(state_example, mesh, c.rows, c.cols)
  replicated = NamedSharding(mesh, P())
  return jax.jit(coevolution.step, in_shardings=(replicated, state_sharding, replicated),
                 out_shardings=(state_sharding, replicated))
