"""``net_weights_dist``: Lipizzaner's L2 distance between the weights of every pair of a
neighbourhood's individuals, against a brute-force loop over the pairs."""

import itertools

import jax
import numpy as np
import pytest

from minmaxlab.coevolution import neighbour_indices, net_weights_dist


def _brute_force(params, rows, cols, pop, kind):
  idx = neighbour_indices(rows, cols, kind)
  out = np.zeros((rows, cols))
  for r in range(rows):
    for c in range(cols):
      cells = list(dict.fromkeys(idx[r, c].tolist()))  # each distinct neighbour once
      nets = [
        np.concatenate([params[k][cell // cols, cell % cols, p].ravel() for k in sorted(params)])
        for cell in cells
        for p in range(pop)
      ]
      d = [np.linalg.norm(a - b) for a, b in itertools.combinations(nets, 2)]
      out[r, c] = np.mean(d) if d else 0.0
  return out


@pytest.mark.parametrize(
  "rows,cols,pop,kind",
  [(3, 3, 1, "von_neumann"), (2, 2, 2, "von_neumann"), (3, 4, 1, "moore"), (1, 1, 3, "moore")],
)
def test_matches_a_loop_over_the_pairs(rows, cols, pop, kind):
  rng = np.random.default_rng(rows * 10 + cols + pop)
  params = {
    "b": rng.normal(size=(rows, cols, pop, 2)).astype(np.float32),
    "w": rng.normal(size=(rows, cols, pop, 3, 2)).astype(np.float32),
  }
  got = jax.jit(net_weights_dist, static_argnums=1)(params, kind)
  np.testing.assert_allclose(got, _brute_force(params, rows, cols, pop, kind), rtol=1e-5)


def test_one_lineage_everywhere_is_zero_and_a_lone_cell_has_no_pairs():
  w = np.random.default_rng(0).normal(size=(1, 1, 1, 50)).astype(np.float32) * 100
  copies = {"w": np.broadcast_to(w, (3, 3, 1, 50))}  # large weights, identical copies
  assert np.all(np.asarray(net_weights_dist(copies)) == 0.0)
  assert float(net_weights_dist({"w": w})[0, 0]) == 0.0  # 1x1, one individual
  moved = {"w": np.array(copies["w"])}
  moved["w"][1, 1, 0, 0] += 3.0  # one cell differs by 3 in one weight
  d = np.asarray(net_weights_dist(moved))
  # cell (1,1)'s neighbourhood: 4 of its 10 pairs involve it; its 4 neighbours: 4 of 10 each
  np.testing.assert_allclose(d[1, 1], 4 * 3.0 / 10, rtol=1e-6)
  np.testing.assert_allclose(d[0, 1], 4 * 3.0 / 10, rtol=1e-6)
  assert d[0, 0] == 0.0  # (1,1) is not a von Neumann neighbour of (0,0)
