"""Where a coevolution grid runs: one factory from the coevolution config.

:func:`make_backend` is the one place that checks the grid against the devices
or the MPI ranks (before anything compiles) and builds the exchange; the
:class:`Backend` it returns jits ``Coevolution.init``/``step`` for its
placement and moves whole-grid pytrees (checkpoints, pictures) to and from it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from minmaxlab.coevolution import CoevolutionConfig
from minmaxlab.distributed._cores import cores_split, grid_split
from minmaxlab.distributed._mesh import (
  MeshExchange,
  check_grid_fits,
  grid_mesh,
  grid_shardings,
  sharded_step,
)

BackendName = Literal["auto", "single", "mesh", "mpi"]
ExchangeMode = Literal["shard_map", "roll"]
CompileMode = Literal["default", "fast", "fastest"]
BACKENDS = get_args(BackendName)
MESH_EXCHANGES = get_args(ExchangeMode)
COMPILE_MODES = get_args(CompileMode)

# XLA CPU options of the compile modes (measured by experiments/benchmarks/compile_time.py,
# each mode compiled in a fresh process, generations interleaved): "fast" runs LLVM at -O1
# (the generation no slower in our configs), "fastest" also uses the classic elemental
# emitters instead of the MLIR fusion emitters (the compile of a small program roughly halved;
# elementwise loops a few percent slower).
_LEVEL = "xla_backend_optimization_level"
_CPU_OPTIONS = {
  "fast": {_LEVEL: 1},
  "fastest": {_LEVEL: 1, "xla_cpu_use_fusion_emitters": False},
}


def compiler_options(mode: CompileMode = "default", platform: str | None = None) -> dict | None:
  """The XLA ``compiler_options`` of ``jax.jit`` for a compile ``mode``.

  ``"default"``: ``None`` (XLA's own). On CPU, ``"fast"``: LLVM at ``-O1`` (a shorter
  compile); ``"fastest"``: also XLA's classic elemental emitters (a shorter compile still,
  slower elementwise kernels; docs/benchmarks.md). Results are as deterministic as with
  ``"default"`` but not bit-identical to it (other machine code). On other platforms every
  mode is XLA's default. A mode never raises the optimization level JAX was asked for:
  under ``jax_disable_most_optimizations`` (``JAX_DISABLE_MOST_OPTIMIZATIONS=1``: LLVM at
  -O0) ``"fast"`` adds nothing and ``"fastest"`` only the classic emitters.

  Args:
    mode: ``"default"``, ``"fast"`` or ``"fastest"``.
    platform: ``"cpu"``, ``"gpu"``, ...; default ``jax.default_backend()``.

  Raises:
    ValueError: for an unknown mode.
  """
  if mode not in COMPILE_MODES:
    raise ValueError(f"compile must be one of {COMPILE_MODES}, got {mode!r}")
  platform = jax.default_backend() if platform is None else platform
  if mode == "default" or platform != "cpu":
    return None
  options = dict(_CPU_OPTIONS[mode])
  if jax.config.values.get("jax_disable_most_optimizations", False):
    # JAX was asked for LLVM at -O0 (JAX_DISABLE_MOST_OPTIMIZATIONS): a program's options
    # override it, so the mode must not raise the level back to -O1
    del options[_LEVEL]
  return options or None


@dataclasses.dataclass(frozen=True)
class Backend:
  """Where the grid of ``config`` runs. The step's state is whole (``single``),
  sharded over a device mesh (``mesh``, possibly across processes) or this rank's
  block (``mpi``); checkpoints, metrics and pictures always see the whole grid.

  Attributes:
    name: ``"single"``, ``"mesh"`` or ``"mpi"``.
    config: the coevolution config to build the ``Coevolution`` with (the grid's
      one source; ``cell_strategy`` resolved to ``"vmap"`` for XLA-derived halos).
    exchange: the ``exchange=`` of ``Coevolution`` (``None``: the whole grid).
    writer: whether this process writes files (logs, pictures, checkpoints).
    processes: processes (or MPI ranks) taking part.
    to_host: step-side tree -> whole-grid numpy tree (collective: every process calls).
    from_host: whole-grid tree -> step-side tree.
    barrier: waits for every process.
    mesh: the device mesh (``mesh`` backend), else ``None``.
    compiler_options: XLA options of every program :meth:`jit` compiles (see
      :func:`compiler_options`), else ``None``.
    donate: whether :meth:`jit`'s ``step`` donates its input state (``donate_argnums``):
      the new state then reuses the old one's memory (one whole state less at the peak),
      and the state passed in is deleted by the call (read nothing from it afterwards).
      The same numbers either way.
  """

  name: BackendName
  config: CoevolutionConfig
  exchange: Any
  writer: bool
  processes: int
  to_host: Callable
  from_host: Callable
  barrier: Callable[[], None]
  mesh: Any = None
  compiler_options: dict | None = None
  donate: bool = False

  def jit(self, coevolution) -> tuple[Callable, Callable]:
    """``(init, step)`` of ``coevolution`` jitted for this backend: ``init(key)``
    gives this program's (placed) cells, ``step(key, state, data)`` one generation."""
    opts, donate = self.compiler_options, (1,) if self.donate else ()
    if self.mesh is None:
      return (
        jax.jit(coevolution.init, compiler_options=opts),
        jax.jit(coevolution.step, compiler_options=opts, donate_argnums=donate),
      )
    abstract = jax.eval_shape(coevolution.init, jax.random.key(0))
    shardings = grid_shardings(abstract, self.mesh, self.config.rows, self.config.cols)
    init = jax.jit(coevolution.init, out_shardings=shardings, compiler_options=opts)
    step = sharded_step(coevolution, self.mesh, abstract, opts, donate=self.donate)
    return init, step

  @property
  def devices(self) -> int:
    """Devices running the grid: the mesh's, one per MPI rank, else one."""
    if self.mesh is not None:
      return int(self.mesh.devices.size)
    return self.processes if self.name == "mpi" else 1

  def where(self) -> str:
    """Where the grid runs, for a run's first line, e.g. ``backend mesh: 4 cpu devices, 1
    process`` or ``backend mpi: 2 NVIDIA H200 devices (gpu), 2 ranks``."""
    return placement(
      self.name, self.devices, self.processes, "rank" if self.name == "mpi" else "process"
    )

  def put_data(self, data: Any) -> Any:
    """The step's ``data`` placed for this backend (replicated over a mesh)."""
    if self.mesh is None:
      return data
    replicated = NamedSharding(self.mesh, P())
    return jax.tree.map(lambda x: _from_callback(x, replicated), data)


def placement(backend: str, devices: int, processes: int, unit: str = "process") -> str:
  """``backend <backend>: <devices> <kind> device(s) [(<platform>)], <processes> <unit>(s)``:
  the device kind of this process's first device, its platform when the kind does not
  name it (``cpu`` does)."""
  kind, platform = jax.devices()[0].device_kind, jax.default_backend()
  what = kind if kind.lower() == platform.lower() else f"{kind} ({platform})"
  plural = {"process": "processes"}.get(unit, unit + "s")
  return (
    f"backend {backend}: {devices} {what} device{'' if devices == 1 else 's'},"
    f" {processes} {unit if processes == 1 else plural}"
  )


def _warn_if_alone(backend: Backend) -> None:
  """One line on stderr when a distributed backend found one device or one rank: the run
  goes on as ``single`` would, and says so."""
  if backend.name == "single" or backend.devices > 1 or not backend.writer:
    return
  if backend.name == "mesh":
    how = "for several CPU devices set JAX_NUM_CPU_DEVICES=N (or run on several GPUs)"
    found = "1 device"
  else:
    how = "start it with mpirun -n N (N ranks dividing the grid's rows or columns)"
    found = "1 rank"
  print(
    f"warning: backend {backend.name} found {found}: the grid runs on one device, as with"
    f" backend single; {how}",
    file=sys.stderr,
    flush=True,
  )


def _from_callback(x, sharding):
  x = np.asarray(x)
  return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])


def make_backend(
  config: CoevolutionConfig,
  name: BackendName = "auto",
  *,
  mesh_shape: tuple[int, int] | None = None,
  mesh_exchange: ExchangeMode = "shard_map",
  mpi_blocks: tuple[int, int] | None = None,
  compile: CompileMode = "default",
  donate: bool = False,
) -> Backend:
  """The :class:`Backend` of ``name`` for the grid of ``config``.

  Args:
    config: the coevolution config (its ``rows``, ``cols`` and ``cell_strategy``).
    name: ``"single"`` (one device), ``"mesh"`` (cells sharded over every device of
      every process), ``"mpi"`` (one block of cells per MPI rank) or ``"auto"``: cells
      over cores where :func:`split_cpu_cores` made one CPU device per core in this
      process (a ``mesh`` over as many of them as the grid's rows and columns
      split into, e.g. 2 of 2 for a 2x2 grid, 1 of 2 for 3x3), else ``single``.
    mesh_shape: ``(rows, cols)`` of the device mesh (default ``(devices, 1)``).
    mesh_exchange: ``"shard_map"`` (explicit ``ppermute`` halos) or ``"roll"``
      (XLA derives them from the whole-grid rolls; needs ``cell_strategy="vmap"``,
      which ``"auto"`` becomes).
    mpi_blocks: ``(block_rows, block_cols)`` of the ranks' tiling (default: see
      :func:`mpi_blocks`).
    compile: ``"default"``, ``"fast"`` or ``"fastest"``: the XLA options of the programs
      :meth:`Backend.jit` compiles (:func:`compiler_options`).
    donate: :attr:`Backend.donate` (the step donates its input state).

  A ``mesh`` that finds one device, or ``mpi`` with one rank (a run not started by
  ``mpirun``), runs as ``single`` would after one warning line on stderr.

  Raises:
    ValueError: before any work, when the grid cannot be split over the devices
      or ranks, or for an unknown name or compile mode.
  """
  if not isinstance(config, CoevolutionConfig):
    raise ValueError(f"config must be a CoevolutionConfig, got {type(config).__name__}")
  opts = compiler_options(compile)
  if name == "auto":
    backend = _auto_backend(config, opts)
  elif name == "single":
    backend = _single_backend(config, opts)
  elif name == "mesh":
    backend = _mesh_backend(config, mesh_shape, mesh_exchange, opts)
  elif name == "mpi":
    backend = _mpi_backend(config, mpi_blocks, opts)
  else:
    raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
  backend = dataclasses.replace(backend, donate=bool(donate))
  _warn_if_alone(backend)
  return backend


def _auto_backend(config: CoevolutionConfig, opts) -> Backend:
  cores = cores_split()
  shape = grid_split(config.rows, config.cols, cores) if cores > 1 else (1, 1)
  if shape == (1, 1) or jax.process_count() > 1:
    return _single_backend(config, opts)
  devices = jax.devices("cpu")[: shape[0] * shape[1]]
  return _mesh_backend(config, shape, "shard_map", opts, devices=devices)


def _single_backend(config: CoevolutionConfig, opts) -> Backend:
  # The state is already whole and readable here: no round trip through the host.
  return Backend(
    name="single",
    config=config,
    exchange=None,
    writer=True,
    processes=1,
    to_host=lambda t: t,
    from_host=lambda t: jax.tree.map(jnp.asarray, t),
    barrier=_no_wait,
    compiler_options=opts,
  )


def _mesh_backend(
  config: CoevolutionConfig, mesh_shape, mesh_exchange, opts, devices=None
) -> Backend:
  from jax.experimental import multihost_utils

  rows, cols = config.rows, config.cols
  if mesh_exchange not in MESH_EXCHANGES:
    raise ValueError(f"mesh_exchange must be one of {MESH_EXCHANGES}, got {mesh_exchange!r}")
  mesh = grid_mesh(tuple(mesh_shape) if mesh_shape else None, devices)
  exchange = None
  if mesh_exchange == "shard_map":
    exchange = MeshExchange(mesh, rows, cols)  # checks the grid against the mesh
  else:
    check_grid_fits(rows, cols, mesh)
    if config.cell_strategy == "auto":
      config = dataclasses.replace(config, cell_strategy="vmap")  # XLA-derived halos need vmap
  multi = jax.process_count() > 1

  def to_host(t):
    if multi:
      return jax.tree.map(np.asarray, multihost_utils.process_allgather(t, tiled=True))
    return jax.device_get(t)

  def from_host(t):
    shardings = grid_shardings(t, mesh, rows, cols)
    return jax.tree.map(_from_callback, t, shardings)

  def barrier():
    if multi:
      multihost_utils.sync_global_devices("minmaxlab.coevolution")

  writer = jax.process_index() == 0
  return Backend(
    name="mesh",
    config=config,
    exchange=exchange,
    writer=writer,
    processes=jax.process_count(),
    to_host=to_host,
    from_host=from_host,
    barrier=barrier,
    mesh=mesh,
    compiler_options=opts,
  )


def _mpi_backend(config: CoevolutionConfig, mpi_blocks, opts) -> Backend:
  from minmaxlab.distributed._mpi import MPIExchange

  # MPIExchange checks the ranks' tiling against the grid (mpi_blocks).
  exchange = MPIExchange(config.rows, config.cols, blocks=tuple(mpi_blocks) if mpi_blocks else None)
  return Backend(
    name="mpi",
    config=config,
    exchange=exchange,
    writer=exchange.rank == 0,
    processes=exchange.size,
    to_host=lambda t: exchange.gather_blocks(jax.device_get(t)),
    from_host=lambda t: jax.tree.map(jnp.asarray, exchange.local(t)),
    barrier=exchange.comm.Barrier,
    compiler_options=opts,
  )


def _no_wait() -> None:
  return None
