"""Neighbourhoods of radius > 1 and user-given shapes (issue 17): the member
order, the validation, and the indices and masks on small tori, against lists
written out by hand."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab.coevolution._exchange import WholeGrid

VN2 = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (-2, 0), (2, 0))
VN2 += ((-1, -1), (-1, 1), (1, -1), (1, 1), (0, -2), (0, 2))


def test_member_order_is_documented_and_nested():
  # Radius 1: the historical orders (results of earlier runs stay reproducible).
  assert co.neighbour_offsets("von_neumann") == ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))
  assert co.neighbour_offsets("moore")[5:] == ((-1, -1), (-1, 1), (1, -1), (1, 1))
  assert co.neighbour_offsets("von_neumann:1") == co.neighbour_offsets("von_neumann")
  assert co.neighbour_offsets("moore:1") == co.neighbour_offsets("moore")
  # Radius 2: by the shape's distance, then Manhattan, vertical first, then row-major.
  assert co.neighbour_offsets("von_neumann:2") == VN2
  m2 = co.neighbour_offsets("moore:2")
  assert m2[:9] == co.neighbour_offsets("moore")  # radius 1 is a prefix of radius 2
  assert m2[9:13] == ((-2, 0), (2, 0), (0, -2), (0, 2))
  assert m2[-4:] == ((-2, -2), (-2, 2), (2, -2), (2, 2))
  assert sorted(m2) == [(r, c) for r in range(-2, 3) for c in range(-2, 3)]
  # Radius 3: |drow| + |dcol| <= 3 (25 members) and max(|drow|, |dcol|) <= 3 (49).
  assert len(co.neighbour_offsets("von_neumann:3")) == 25
  assert len(co.neighbour_offsets("moore:3")) == 49
  # User-given shapes keep their order; the string form is the same shape.
  shape = ((0, 0), (1, 1), (-2, 0))
  assert co.neighbour_offsets("custom:0,0;1,1;-2,0") == shape
  assert co.neighbour_offsets([[0, 0], [1, 1], [-2, 0]]) == shape
  assert co.neighbour_offsets(((np.int64(0), 0), (np.int32(2), -1))) == ((0, 0), (2, -1))
  cfg = co.CoevolutionConfig(neighbourhood=[[0, 0], [1, 1], [-2, 0]])
  assert cfg.neighbourhood == shape and cfg.num_members == 3 and hash(cfg)
  assert co.CoevolutionConfig(neighbourhood="moore:2").num_members == 25


@pytest.mark.parametrize(
  "kind,match",
  [
    ("hexagonal", "neighbourhood must be one of .*got 'hexagonal'"),
    ("moore:0", "'moore:0': the radius must be an integer >= 1, got '0'"),
    ("von_neumann:two", "the radius must be an integer >= 1, got 'two'"),
    ("custom:0,0;1", "'1' is not 'drow,dcol'"),
    ("custom:1,1;0,0", r"the first offset must be the cell itself \(0, 0\), got \(1, 1\)"),
    ("custom:0,0;1,-2;1,-2", r"offset \(1, -2\) appears twice"),
    (((0, 0), (1, 0.5)), r"offset \(1, 0.5\) is not a pair of integers"),
    (((0, 0), (True, 1)), r"offset \(True, 1\) is not a pair of integers"),
    (((0, 0), (1, 2, 3)), r"offset \(1, 2, 3\) is not a pair"),
    ((), "non-empty sequence"),
  ],
)
def test_bad_neighbourhoods_raise_one_line(kind, match):
  with pytest.raises(ValueError, match=match) as e:
    co.neighbour_offsets(kind)
  assert "\n" not in str(e.value)
  with pytest.raises(ValueError, match=match):
    co.CoevolutionConfig(neighbourhood=kind)


def test_radius_2_on_a_5x5_torus_every_member_is_distinct():
  # von_neumann:2 of cell (0, 0), in VN2's order: (4,0) (1,0) (0,4) (0,1) (3,0) (2,0)
  # (4,4) (4,1) (1,4) (1,1) (0,3) (0,2), flat r * 5 + c.
  idx = co.neighbour_indices(5, 5, "von_neumann:2")
  assert idx.shape == (5, 5, 13)
  assert idx[0, 0].tolist() == [0, 20, 5, 4, 1, 15, 10, 24, 21, 9, 6, 3, 2]
  # moore:2 of cell (2, 3) covers the whole 5x5 torus once.
  idx = co.neighbour_indices(5, 5, "moore:2")
  want = [13, 8, 18, 12, 14, 7, 9, 17, 19, 3, 23, 11, 10, 2, 4, 22, 24, 6, 5, 16, 15, 1, 0, 21, 20]
  assert idx[2, 3].tolist() == want
  assert sorted(want) == list(range(25))
  assert co.member_mask(5, 5, "von_neumann:2").all() and co.member_mask(5, 5, "moore:2").all()


def test_radius_2_on_a_3x3_torus_masks_the_wrapped_copies():
  # On 3 rows -2 is +1 and +2 is -1: von_neumann:2 of (0, 0) repeats 4 members.
  idx = co.neighbour_indices(3, 3, "von_neumann:2")
  assert idx[0, 0].tolist() == [0, 6, 3, 2, 1, 3, 6, 8, 7, 5, 4, 1, 2]
  mask = co.member_mask(3, 3, "von_neumann:2")
  want = [True] * 5 + [False, False] + [True] * 4 + [False, False]
  assert (mask == np.array(want)).all()  # the same slots in every cell (translation)
  # moore:2 of (1, 1): the 9 cells of radius 1, then 16 copies.
  idx = co.neighbour_indices(3, 3, "moore:2")
  assert idx[1, 1].tolist() == [
    4,
    1,
    7,
    3,
    5,
    0,
    2,
    6,
    8,
    7,
    1,
    5,
    3,
    6,
    8,
    0,
    2,
    2,
    0,
    8,
    6,
    8,
    6,
    2,
    0,
  ]
  assert (co.member_mask(3, 3, "moore:2") == np.array([True] * 9 + [False] * 16)).all()
  # A user-given shape: (-2, 0) is (1, 0) on 3 rows, distinct from (1, 1); on 2 rows
  # it is the cell itself, masked.
  shape = "custom:0,0;1,1;-2,0"
  assert co.neighbour_indices(3, 3, shape)[0, 0].tolist() == [0, 4, 3]
  assert co.member_mask(3, 3, shape).all()
  assert co.neighbour_indices(2, 2, shape)[0, 0].tolist() == [0, 3, 0]
  assert (co.member_mask(2, 2, shape) == np.array([True, True, False])).all()


@pytest.mark.parametrize("kind", ["moore:2", "custom:0,0;1,1;-2,0;0,3"])
def test_gather_neighbours_follows_the_indices(kind):
  x = jnp.arange(15, dtype=jnp.int32).reshape(3, 5)
  got = np.asarray(co.gather_neighbours(x, kind))
  np.testing.assert_array_equal(got, co.neighbour_indices(3, 5, kind))


@pytest.mark.parametrize("kind", ["von_neumann", "moore:2", "custom:0,0;1,1;-2,0;0,3"])
def test_members_source_and_index_rebuild_the_gather(kind):
  """``WholeGrid.members``: each cell's rows of the flat source are its gathered members."""
  rng = np.random.default_rng(0)
  tree = {
    "f": jnp.asarray(rng.normal(size=(3, 5, 2, 4)), jnp.float32),
    "i": jnp.arange(15).reshape(3, 5),
  }
  source, index = WholeGrid(3, 5).members(tree, kind)
  assert index.shape == (3, 5, len(co.neighbour_offsets(kind)))
  want = co.gather_neighbours(tree, kind)
  chex.assert_trees_all_equal(jax.tree.map(lambda leaf: np.asarray(leaf)[index], source), want)
