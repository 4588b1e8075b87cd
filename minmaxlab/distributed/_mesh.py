"""Shard the coevolution grid over a device mesh (SPMD, one compiled step)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from minmaxlab.distributed._blocks import BlockExchange, check_blocks

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
  check_blocks(rows, cols, (mesh.shape["rows"], mesh.shape["cols"]), "device blocks")


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


class MeshExchange(BlockExchange):
  """Each device of a ``("rows", "cols")`` mesh holds one block of the grid
  inside ``jax.shard_map``; halos travel by ``lax.ppermute`` between
  neighbouring devices, reductions are ``lax.pmin`` / ``lax.psum``.

  Use with :func:`sharded_step`. Every device runs the same per-cell code as
  one device does, so with the same ``cell_strategy`` every discrete choice is
  the single-device one and the numbers agree to float rounding (1e-6 in the
  tests; XLA may fuse the same code differently inside another program, so
  not always bit for bit: MPI ranks, each compiling the one-device program, are).

  Args:
    mesh: from :func:`grid_mesh`.
    rows, cols: the grid (each a multiple of the mesh's axis).
  """

  def __init__(self, mesh: Mesh, rows: int, cols: int):
    super().__init__(rows, cols, (mesh.shape["rows"], mesh.shape["cols"]))
    self.mesh = mesh

  def block_start(self):
    lr, lc = self.block_shape
    return jax.lax.axis_index("rows") * lr, jax.lax.axis_index("cols") * lc

  def _from_neighbour(self, edge, axis, direction):
    n = self.blocks[axis]
    # Receiving from the previous block means every block sends to the next one.
    perm = [(i, (i - direction) % n) for i in range(n)]
    return jax.lax.ppermute(edge, GRID_AXES[axis], perm)

  def reduce(self, x, op):
    if op == "min":
      return jax.lax.pmin(x, GRID_AXES)
    if op == "sum":
      return jax.lax.psum(x, GRID_AXES)
    raise ValueError(f"op must be 'min' or 'sum', got {op!r}")


def sharded_step(
  coevolution,
  mesh: Mesh,
  state_example: Any,
  compiler_options: dict | None = None,
  donate: bool = False,
):
  """Compile ``coevolution.step`` once for a grid sharded over ``mesh``.

  Two ways, chosen by the coevolution's exchange:

  * ``Coevolution(..., exchange=MeshExchange(mesh, rows, cols))``: the step runs
    inside ``jax.shard_map``; each device steps its own block of cells with the
    same code as one device (``cell_strategy`` "map" or "vmap") and receives
    halos as wide as the neighbourhood reaches (one cell for von Neumann and
    Moore; several hops when a block is narrower) by ``lax.ppermute``. With the
    same ``cell_strategy`` the numbers equal the single-device run to float
    rounding (see :class:`MeshExchange`).
  * the default whole-grid exchange with ``cell_strategy="vmap"``: the step is
    jitted with ``NamedSharding`` in/out shardings and XLA derives collective
    permutes from the rolls of the grid axes (a sequential map over cells
    would serialise the devices, so it is refused).

  Args:
    coevolution: a ``minmaxlab.coevolution.Coevolution``.
    mesh: from :func:`grid_mesh`.
    state_example: a state (or its abstract shape) to derive the shardings from.
    compiler_options: XLA options of the compile (``jax.jit(compiler_options=...)``,
      e.g. :func:`minmaxlab.distributed.compiler_options`); ``None``: XLA's defaults.
    donate: donate the input state's buffers to the step (``donate_argnums=1``): the
      state passed in is deleted by the call, and its memory holds the new state.

  Returns:
    ``step(key, state, data) -> (state, metrics)``, jitted once, keeping the
    state's sharding from generation to generation.
  """
  c = coevolution.config
  state_sharding = grid_shardings(state_example, mesh, c.rows, c.cols)
  replicated = NamedSharding(mesh, P())
  jit_options = dict(compiler_options=compiler_options, donate_argnums=(1,) if donate else ())
  if isinstance(coevolution.exchange, MeshExchange):
    return _shard_mapped_step(coevolution, mesh, state_sharding, jit_options)
  check_grid_fits(c.rows, c.cols, mesh)  # no exchange checked it
  if coevolution.cell_strategy != "vmap":
    raise ValueError(
      "sharded coevolution over the whole-grid exchange needs cell_strategy='vmap' (got"
      f" {coevolution.cell_strategy!r}): a sequential map over cells would run every"
      " device's cells one after another; use exchange=MeshExchange(...) to map cells"
      " within each device"
    )
  return jax.jit(
    coevolution.step,
    in_shardings=(replicated, state_sharding, replicated),
    out_shardings=(state_sharding, replicated),
    **jit_options,
  )


def _shard_mapped_step(coevolution, mesh: Mesh, state_sharding, jit_options: dict):
  """:func:`sharded_step` with a ``MeshExchange``: the step inside ``jax.shard_map``,
  jitted once per data structure (``jit_options``: ``jax.jit``'s compile options)."""
  if coevolution.exchange.mesh.shape != mesh.shape:
    raise ValueError(
      f"the coevolution's MeshExchange is for a mesh of shape"
      f" {dict(coevolution.exchange.mesh.shape)}, got {dict(mesh.shape)}"
    )
  replicated = NamedSharding(mesh, P())
  state_specs = jax.tree.map(lambda s: s.spec, state_sharding)
  compiled = {}

  def shard(metric_specs):
    return jax.shard_map(
      coevolution.step,
      mesh=mesh,
      in_specs=(P(), state_specs, P()),
      out_specs=(state_specs, metric_specs),
      check_vma=False,
    )

  def step(key, state, data):
    tree = jax.tree.structure(data)
    if tree not in compiled:
      # Metrics: per-cell arrays are split like the grid, grid scalars (already
      # reduced over all devices) replicated.
      _, local = jax.eval_shape(shard(P()), key, state, data)
      specs = jax.tree.map(lambda m: P("rows", "cols") if m.ndim >= 2 else P(), local)
      compiled[tree] = jax.jit(
        shard(specs),
        in_shardings=(replicated, state_sharding, replicated),
        out_shardings=(state_sharding, None),
        **jit_options,
      )
    return compiled[tree](key, state, data)

  return step
