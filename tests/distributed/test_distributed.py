"""Distributed coevolution: the same numbers on one device, on a device mesh
(shard_map halos and XLA-derived rolls), on MPI ranks, and across backends
through checkpoints.

The MPI tests run the real thing: the venv's MPICH ``mpirun`` launching 2 and 4
processes that exchange halos with ``mpi4jax`` inside the jitted step.
"""

import dataclasses
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from tests import _xla
from tests._coevolution_case import PAIR, RING, coevolution, run
from tests.distributed._mpi import assert_same, load_mpi, mpirun, needs_mpi

RING_DATA = RING


@pytest.fixture(scope="module")
def reference():
  """The single-device run (WholeGrid exchange, sequential map over cells)."""
  coev = coevolution()
  return run(coev, jax.jit(coev.step))


@pytest.fixture(scope="module")
def reference_moore():
  """The Moore run on one device, compiled in the "fastest" mode (as its MPI ranks are)."""
  coev = coevolution("moore")
  return run(coev, jax.jit(coev.step, compiler_options=distributed.compiler_options("fastest")))


# ---------------------------------------------------------------- halo exchange
@pytest.mark.parametrize("kind", ["von_neumann", "moore"])
@pytest.mark.parametrize(
  "grid,mesh_shape", [((4, 4), (2, 2)), ((4, 6), (4, 1)), ((2, 6), (1, 3)), ((6, 2), (2, 1))]
)
def test_shard_map_halos_equal_rolls(kind, grid, mesh_shape):
  """Block halos (ppermute between devices; wrapped locally on unsplit axes)
  rebuild exactly every member of every neighbourhood, for every dtype."""
  rows, cols = grid
  n = mesh_shape[0] * mesh_shape[1]
  mesh = distributed.grid_mesh(mesh_shape, jax.devices()[:n])
  ex = distributed.MeshExchange(mesh, rows, cols)
  rng = np.random.default_rng(0)
  tree = {
    "f": jnp.asarray(rng.normal(size=(rows, cols, 3, 2)), jnp.float32),
    "i": jnp.arange(rows * cols, dtype=jnp.int32).reshape(rows, cols),
    "g": jnp.asarray(rng.normal(size=(rows, cols)), jnp.float32),
  }
  spec = jax.sharding.PartitionSpec("rows", "cols")
  gathered = jax.jit(
    jax.shard_map(lambda t: ex.gather(t, kind), mesh=mesh, in_specs=spec, out_specs=spec)
  )(tree)
  want = co.gather_neighbours(tree, kind)
  chex.assert_trees_all_equal(gathered, want)
  # The flat cell ids say it independently: member m of (r, c) is neighbour_indices[r, c, m].
  np.testing.assert_array_equal(np.asarray(gathered["i"]), co.neighbour_indices(rows, cols, kind))

  # members (what map cells take): each cell's rows of the block's source are the gather's
  def members(t):
    source, index = ex.members(t, kind)
    return jax.tree.map(lambda x: x[jnp.asarray(index)], source)

  picked = jax.jit(jax.shard_map(members, mesh=mesh, in_specs=spec, out_specs=spec))(tree)
  chex.assert_trees_all_equal(picked, want)


def test_bad_blocks_raise_before_work():
  with pytest.raises(ValueError, match="3 MPI ranks cannot split a 4x4 grid"):
    distributed.mpi_blocks(3, 4, 4)
  with pytest.raises(ValueError, match="need 4 ranks, got 2"):
    distributed.mpi_blocks(2, 4, 4, (2, 2))
  assert distributed.mpi_blocks(2, 3, 4) == (1, 2)
  mesh = distributed.grid_mesh((2, 2), jax.devices()[:4])
  with pytest.raises(ValueError, match="3x4 grid cannot be split into 2x2 blocks"):
    distributed.MeshExchange(mesh, 3, 4)
  with pytest.raises(ValueError, match="exchange is for a 4x4 grid"):
    co.Coevolution(
      co.CoevolutionConfig(rows=2, cols=2),
      PAIR,
      sample_real=None,
      score_fn=None,
      exchange=distributed.MeshExchange(mesh, 4, 4),
    )
  # The backend factory: one check of the grid against the devices, before any work.
  cfg = co.CoevolutionConfig(rows=3, cols=4, cell_strategy="auto")
  n = len(jax.devices())  # the factory's mesh spans every device
  with pytest.raises(ValueError, match=f"3x4 grid cannot be split into {n}x1 device blocks"):
    distributed.make_backend(cfg, "mesh", mesh_exchange="roll")
  with pytest.raises(ValueError, match=f"3x4 grid cannot be split into {n}x1 blocks"):
    distributed.make_backend(cfg, "mesh")
  with pytest.raises(ValueError, match="mesh_exchange must be one of"):
    distributed.make_backend(cfg, "mesh", mesh_exchange="halo")
  with pytest.raises(ValueError, match="backend must be one of"):
    distributed.make_backend(cfg, "gpu")
  for bad in ("localhost", "h:1/2", "h:x/2/0", "h:1/2/2"):
    with pytest.raises(ValueError, match="distributed"):
      distributed.initialize(bad)


def test_backend_factory_builds_each_placement():
  n = len(jax.devices())  # the factory's mesh spans every device
  cfg = co.CoevolutionConfig(rows=n, cols=2, cell_strategy="auto")
  single = distributed.make_backend(cfg)
  assert (single.name, single.exchange, single.writer, single.processes) == (
    "single",
    None,
    True,
    1,
  )
  assert single.config is cfg and single.mesh is None and single.put_data(RING_DATA) is RING_DATA
  shard = distributed.make_backend(cfg, "mesh", mesh_shape=(n, 1))
  assert isinstance(shard.exchange, distributed.MeshExchange) and shard.exchange.blocks == (n, 1)
  assert shard.config.cell_strategy == "auto"  # each device maps or vmaps its own cells
  roll = distributed.make_backend(cfg, "mesh", mesh_shape=(n, 1), mesh_exchange="roll")
  assert roll.exchange is None and roll.config.cell_strategy == "vmap"  # XLA-derived halos
  whole = {"x": np.arange(2.0 * n).reshape(n, 2), "s": np.float32(1.0)}
  placed = roll.from_host(whole)
  assert len(placed["x"].sharding.device_set) == n
  chex.assert_trees_all_equal(roll.to_host(placed), whole)


# ----------------------------------------------------------------- device mesh
# 2x2 blocks: rows and columns split, corners across devices. Row blocks with the columns
# wrapped on each device, (2, 1), are the same exchange code as the halo tests above (every
# mesh shape) and the radius-2 generation on a (4, 1) mesh (test_distributed_neighbourhoods).
@pytest.mark.parametrize("mesh_shape", [(2, 2)])
def test_shard_map_mesh_matches_single_device(reference, mesh_shape):
  n = mesh_shape[0] * mesh_shape[1]
  mesh = distributed.grid_mesh(mesh_shape, jax.devices()[:n])
  coev = coevolution(exchange=distributed.MeshExchange(mesh, 4, 4))
  state = distributed.shard_grid(coev.init(jax.random.key(0)), mesh, 4, 4)
  traces, plain = [], coev.step

  def counted(key, s, d):
    traces.append(1)
    return plain(key, s, d)

  coev.step = counted  # count the traces of the shard_mapped step
  try:
    step = distributed.sharded_step(coev, mesh, state)
    got, got_m = run(coev, step, state)
  finally:
    del coev.step
  assert len(traces) <= 2  # one abstract evaluation (metric specs) + one compile, then none
  assert len(jax.tree.leaves(got.params)[0].sharding.device_set) == n
  assert_same(got, got_m, *reference, exact=False)


# ---------------------------------------------------------------- MPI ranks
@pytest.mark.slow  # mpirun: each rank starts JAX and compiles a generation
@needs_mpi
@pytest.mark.parametrize(
  "n,kind,blocks,mode", [(2, "von_neumann", (), "default"), (4, "moore", (2, 2), "fastest")]
)
def test_mpi_ranks_match_single_device_bitwise(request, tmp_path, n, kind, blocks, mode):
  """4x4 grid, 3 generations: mpirun -n 2 (2 row blocks) and -n 4 with 2x2 blocks
  (Moore: rows, columns and corners cross ranks) give the single-device state
  bit for bit, including mixture weights and mutated learning rates; every
  rank traces its step once. The 4 ranks and their reference compile in the "fastest"
  mode (half the compile of 5 programs; bit for bit in either mode), the 2 in "default" (no
  options of its own: XLA's defaults, or a test session's flags, tests/_xla.py)."""
  want_state, want_m = request.getfixturevalue(
    "reference" if kind == "von_neumann" else "reference_moore"
  )
  out = tmp_path / "out.npz"
  args = [f"--compile={mode}", str(out), kind, *map(str, blocks)]
  r = mpirun(n, "-m", "tests._mpi_coevolution", *args)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  got, got_m, traces = load_mpi(out, want_state)
  assert traces == 1
  assert_same(got, got_m, want_state, want_m, exact=True)
  if kind == "von_neumann":  # the lineage ids compared have moved between cells (and ranks)
    assert len(np.unique(want_state.lineage.min)) < 16
  assert not np.allclose(np.asarray(got.learning_rates.min), 2e-3)  # mutation happened
  np.testing.assert_array_equal(
    np.asarray(got.mixture_weights), np.asarray(want_state.mixture_weights)
  )


# "fastest" only: "fast" takes the same path (make_backend -> compiler_options(mode) ->
# backend.jit) with a subset of its options (their values are checked below), and in a test
# session, whose XLA_FLAGS hold "fastest"'s options (tests/_xla.py), both runs compile alike.
@pytest.mark.parametrize("mode", ["fastest"])
def test_fast_compile_modes_reach_xla_and_agree_to_rounding(reference, mode, tmp_path):
  """``make_backend(compile=mode)``: the options go to every program the backend jits, and
  the run is the same run (every discrete choice equal, floats to rounding). The proof that
  they reached XLA is XLA's own record: with ``xla_dump_to`` added, each compiled module's
  ``debug_options`` dump lists the non-default options it was compiled with (and the dump
  exists only because the backend's options reached XLA). (Differing bits
  are no proof: ``"fastest"`` gave the defaults' bits on one CI host and not on another.)
  Compiled without the session's -O0 (tests/_xla.py), which a mode leaves alone (below)."""
  with _xla.optimized_code():
    _check_compile_mode(reference, mode, tmp_path)


def _check_compile_mode(reference, mode, tmp_path):
  assert distributed.compiler_options("default") is None
  assert distributed.compiler_options("fast", "gpu") is None  # CPU-only options
  assert distributed.compiler_options("fast", "cpu") == {"xla_backend_optimization_level": 1}
  fastest = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}
  assert distributed.compiler_options("fastest", "cpu") == fastest
  with pytest.raises(ValueError, match="compile must be one of"):
    distributed.make_backend(co.CoevolutionConfig(), compile="quick")
  coev = coevolution()
  backend = distributed.make_backend(coev.config, compile=mode)
  assert backend.compiler_options == distributed.compiler_options(mode)
  dump = tmp_path / "xla"
  backend = dataclasses.replace(
    backend, compiler_options={**backend.compiler_options, "xla_dump_to": str(dump)}
  )
  init, step = backend.jit(coev)
  state, metrics = run(coev, step, state=init(jax.random.key(0)))
  records = {p.name: p.read_text() for p in dump.glob("*debug_options")}
  names = " ".join(records)
  assert "jit_init" in names and "jit_step" in names, sorted(records)
  want_lines = {"xla_backend_optimization_level: 1"} | (
    {"xla_cpu_use_fusion_emitters: false"} if mode == "fastest" else set()
  )
  for name, text in records.items():
    assert want_lines <= set(text.splitlines()), (name, text)
  if mode == "fast" and "fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    # (a test session's own flags name it: tests/_xla.py; "fast" runs where it is a parameter)
    assert not any("fusion_emitters" in text for text in records.values())
  want_state, want_metrics = reference
  assert_same(state, metrics, want_state, want_metrics, exact=False)


def test_a_compile_mode_keeps_jaxs_low_effort(tmp_path):
  """Under ``jax_disable_most_optimizations`` (LLVM at -O0) a mode does not raise the level
  back to -O1 (a program's options override JAX's): ``"fast"`` adds nothing, ``"fastest"``
  only the classic emitters, and XLA's record of a program compiled with them says so."""
  with _xla.jax_low_effort(True):
    assert distributed.compiler_options("fast", "cpu") is None
    assert distributed.compiler_options("fastest", "cpu") == {"xla_cpu_use_fusion_emitters": False}
    assert distributed.compiler_options("fastest", "gpu") is None
    options = {**distributed.compiler_options("fastest"), "xla_dump_to": str(tmp_path)}
    jax.jit(lambda x: jnp.sin(x) * 3.0, compiler_options=options)(jnp.arange(5.0))
  records = [p.read_text().splitlines() for p in tmp_path.glob("*debug_options")]
  assert records
  for lines in records:
    assert "xla_cpu_use_fusion_emitters: false" in lines, lines
    assert "xla_backend_optimization_level: 0" in lines, lines  # JAX's -O0 kept
  with _xla.jax_low_effort(False):  # without it, the modes' -O1
    assert distributed.compiler_options("fast", "cpu") == {"xla_backend_optimization_level": 1}
