"""Neighbourhoods wider than one cell across blocks (issue 17): the halo
exchange carries as many rows and columns as the neighbourhood reaches, in
several hops when a block is narrower than the halo, and a generation with
a user-given radius-2 shape gives the single-device numbers on a 4-device mesh
and on 2 MPI ranks."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.distributed._blocks import halo_widths
from tests._coevolution_case import coevolution, run
from tests.distributed._mpi import assert_same, load_mpi, mpirun, needs_mpi

CUSTOM = "custom:0,0;1,1;-2,0;0,3"
# Radius 2 with a corner (1, 2) and, on a 4x4 torus, a masked copy ((2, 0) is (-2, 0)):
# 5 members, so the generation compiles as fast as von Neumann's (moore:2 has 25).
WIDE = "custom:0,0;-2,0;1,2;2,0;-1,-2"
# The radius-2 runs (one device, the mesh, the MPI ranks) compile in the "fastest" mode: half
# the compile of each generation, and the same equalities hold (the ranks' bit for bit).
FASTEST = "fastest"


def test_halo_widths_per_side():
  assert halo_widths("von_neumann") == ((1, 1), (1, 1))
  assert halo_widths("moore:2") == ((2, 2), (2, 2))
  assert halo_widths(CUSTOM) == ((2, 1), (0, 3))  # 2 rows above, 1 below, 3 columns right
  assert halo_widths(((0, 0), (0, -1))) == ((0, 0), (1, 0))


@pytest.mark.parametrize(
  "kind,grid,mesh_shape",
  [
    ("moore:2", (4, 4), (2, 2)),  # 2x2 blocks, 2-wide halos: one hop, corners across 4 blocks
    ("moore:2", (4, 6), (4, 1)),  # 1-row blocks: 2 hops each way (the 2nd from 2 devices away)
    ("von_neumann:2", (2, 6), (2, 2)),  # 2 row blocks: the 2nd hop is the block itself
    (CUSTOM, (3, 4), (1, 2)),  # 3 columns right of 2-column blocks; rows wrap locally
  ],
)
def test_wide_halos_equal_the_whole_grid_gather(kind, grid, mesh_shape):
  """``MeshExchange.gather`` on the tiles equals ``gather_neighbours`` on the whole
  grid, for two dtypes at once (one message per dtype and hop)."""
  rows, cols = grid
  n = mesh_shape[0] * mesh_shape[1]
  mesh = distributed.grid_mesh(mesh_shape, jax.devices()[:n])
  ex = distributed.MeshExchange(mesh, rows, cols)
  rng = np.random.default_rng(0)
  tree = {
    "f": jnp.asarray(rng.normal(size=(rows, cols, 2)), jnp.float32),
    "i": jnp.arange(rows * cols, dtype=jnp.int32).reshape(rows, cols),
  }
  spec = jax.sharding.PartitionSpec("rows", "cols")
  gathered = jax.jit(
    jax.shard_map(lambda t: ex.gather(t, kind), mesh=mesh, in_specs=spec, out_specs=spec)
  )(tree)
  chex.assert_trees_all_equal(gathered, co.gather_neighbours(tree, kind))
  np.testing.assert_array_equal(np.asarray(gathered["i"]), co.neighbour_indices(rows, cols, kind))


@pytest.fixture(scope="module")
def reference_wide():
  """The single-device run of the shared 4x4 case with the ``WIDE`` shape."""
  assert (co.member_mask(4, 4, WIDE) == np.array([True, True, True, False, True])).all()
  coev = coevolution(WIDE)
  return run(coev, jax.jit(coev.step, compiler_options=distributed.compiler_options(FASTEST)))


@pytest.mark.slow  # two compiles of a whole generation (one device, the mesh's shard_map)
def test_radius_2_on_a_4_device_mesh_matches_one_device(reference_wide):
  """1-row blocks on a (4, 1) mesh: every row halo takes 2 hops."""
  mesh = distributed.grid_mesh((4, 1), jax.devices()[:4])
  coev = coevolution(WIDE, exchange=distributed.MeshExchange(mesh, 4, 4))
  state = distributed.shard_grid(coev.init(jax.random.key(0)), mesh, 4, 4)
  step = distributed.sharded_step(coev, mesh, state, distributed.compiler_options(FASTEST))
  got, got_m = run(coev, step, state)
  assert_same(got, got_m, *reference_wide, exact=False)


@pytest.mark.slow  # 2 MPI ranks start JAX and compile a generation each
@needs_mpi
def test_radius_2_on_2_mpi_ranks_matches_one_device_bitwise(reference_wide, tmp_path):
  """2 blocks of 2 rows (a 2-row halo: the whole other block) and rows, columns
  and corners crossing ranks; bit for bit, as the radius-1 MPI runs."""
  want_state, want_m = reference_wide
  out = tmp_path / "out.npz"
  r = mpirun(2, "-m", "tests._mpi_coevolution", f"--compile={FASTEST}", str(out), WIDE)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  got, got_m, traces = load_mpi(out, want_state)
  assert traces == 1
  assert_same(got, got_m, want_state, want_m, exact=True)
