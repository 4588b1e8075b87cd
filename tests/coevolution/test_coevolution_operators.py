"""Grid, neighbourhoods and the evolutionary operators on hand-made values."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from minmaxlab import coevolution as co


def test_von_neumann_indices_3x3():
  idx = co.neighbour_indices(3, 3)
  # cell (1, 0) = 3: itself, up (0,0)=0, down (2,0)=6, left (1,2)=5, right (1,1)=4
  assert idx[1, 0].tolist() == [3, 0, 6, 5, 4]
  assert idx[0, 0].tolist() == [0, 6, 3, 2, 1]
  assert co.member_mask(3, 3).all()


def test_indices_2x3_and_moore():
  idx = co.neighbour_indices(2, 3)
  assert idx[0, 2].tolist() == [2, 5, 5, 1, 0]
  mask = co.member_mask(2, 3)
  assert mask[0, 2].tolist() == [True, True, False, True, True]
  moore = co.neighbour_indices(4, 4, "moore")
  assert sorted(moore[0, 0].tolist()) == sorted([0, 12, 4, 3, 1, 15, 13, 7, 5])
  assert co.member_mask(4, 4, "moore").all()


def test_small_tori_mask_duplicates():
  assert co.member_mask(1, 1).tolist() == [[[True, False, False, False, False]]]
  m = co.member_mask(2, 2)
  assert m.sum(-1).tolist() == [[3, 3], [3, 3]]  # Lipizzaner: 2 neighbours + self on 2x2
  assert co.member_mask(3, 3, "moore").sum(-1).min() == 9
  with pytest.raises(ValueError, match="neighbourhood"):
    co.neighbour_indices(2, 2, "hex")


@pytest.mark.parametrize(
  "rows,cols,kind", [(3, 3, "von_neumann"), (2, 4, "von_neumann"), (3, 5, "moore"), (1, 3, "moore")]
)
def test_gather_matches_indices(rows, cols, kind):
  grid = jnp.arange(rows * cols).reshape(rows, cols)
  tree = {"a": grid, "b": jnp.stack([grid, -grid], -1)}
  got = co.gather_neighbours(tree, kind)
  want = co.neighbour_indices(rows, cols, kind)
  np.testing.assert_array_equal(got["a"], want)
  np.testing.assert_array_equal(got["b"][..., 1], -want)


def test_tournament_on_hand_made_fitness():
  fitness = jnp.array([5.0, 1.0, 3.0, 0.5, 2.0])
  usable = jnp.array([True, True, True, False, True])
  key = jax.random.key(0)
  # A tournament over many candidates finds the best usable one (index 1, not the unusable 3).
  wins = co.tournament(key, fitness, usable, 64, 50)
  assert set(np.asarray(wins).tolist()) == {1}
  # Size 1: uniform over the usable individuals, never the unusable one.
  wins = np.asarray(co.tournament(key, fitness, usable, 4000, 1))
  counts = np.bincount(wins, minlength=5)
  assert counts[3] == 0
  np.testing.assert_allclose(counts[[0, 1, 2, 4]] / 4000, 0.25, atol=0.03)
  # Size 2: P(win) of the k-th best of n=4 is ((n-k+1)^2 - (n-k)^2) / n^2.
  wins = np.asarray(co.tournament(key, fitness, usable, 8000, 2))
  freq = np.bincount(wins, minlength=5)[[1, 4, 2, 0]] / 8000
  np.testing.assert_allclose(freq, np.array([7, 5, 3, 1]) / 16, atol=0.02)


def test_tournament_without_replacement_draws_distinct_candidates():
  # Lipizzaner's random.sample: size 2 of the n = 4 usable individuals, distinct, so the
  # k-th best wins the C(n - k, 1) pairs in which it is the better one: (n - k) / C(n, 2),
  # and the worst never wins (with replacement it wins 1/16 of the time, above).
  fitness = jnp.array([5.0, 1.0, 3.0, 0.5, 2.0])
  usable = jnp.array([True, True, True, False, True])
  key = jax.random.key(1)
  wins = np.asarray(co.tournament(key, fitness, usable, 12000, 2, replace=False))
  freq = np.bincount(wins, minlength=5)[[1, 4, 2, 0, 3]] / 12000
  np.testing.assert_allclose(freq, np.array([3, 2, 1, 0, 0]) / 6, atol=0.02)
  assert freq[3] == 0.0 and freq[4] == 0.0  # the worst usable one and the unusable one
  # Larger than the pool: every usable individual takes part, so the best always wins.
  wins = co.tournament(key, fitness, usable, 64, 50, replace=False)
  assert set(np.asarray(wins).tolist()) == {1}
  # With one usable individual it wins every tournament.
  only = jnp.array([False, False, True, False, False])
  assert set(np.asarray(co.tournament(key, fitness, only, 32, 2, False)).tolist()) == {2}


def test_tournament_sampling_is_a_validated_config_field():
  assert co.CoevolutionConfig().tournament_sampling == "with_replacement"
  co.CoevolutionConfig(tournament_sampling="without_replacement")
  with pytest.raises(ValueError, match="tournament_sampling must be one of"):
    co.CoevolutionConfig(tournament_sampling="sometimes")


def test_replacement_on_hand_made_fitness():
  local = jnp.array([1.0, 5.0, 3.0])
  trained = jnp.array([4.0, 0.5, 2.0])
  # n=1: worst local (5.0, slot 1) <- best trained (0.5, index 1).
  assert co.replacement_sources(local, trained, 1).tolist() == [-1, 1, -1]
  # n=2: slots 1 and 2 (5.0, 3.0) <- trained 1 and 2 (0.5, 2.0): both better.
  assert co.replacement_sources(local, trained, 2).tolist() == [-1, 1, 2]
  # n=3: slot 0 (1.0) would get trained 0 (4.0): worse, kept.
  assert co.replacement_sources(local, trained, 3).tolist() == [-1, 1, 2]
  # Never replaced by a worse or diverged (inf) individual.
  assert co.replacement_sources(jnp.array([1.0]), jnp.array([jnp.inf]), 1).tolist() == [-1]
  assert co.replacement_sources(jnp.array([1.0]), jnp.array([1.0]), 1).tolist() == [-1]


def test_aggregate_fitness_modes():
  losses = jnp.array([[1.0, 2.0, 9.0], [4.0, jnp.nan, 0.0]])
  valid = jnp.array([True, True, False])
  np.testing.assert_allclose(co.aggregate_fitness(losses, valid, "average"), [1.5, np.inf])
  np.testing.assert_allclose(co.aggregate_fitness(losses[:1], valid, "worst"), [2.0])
  np.testing.assert_allclose(co.aggregate_fitness(losses[:1], valid, "best"), [1.0])
  with pytest.raises(ValueError, match="mode"):
    co.aggregate_fitness(losses, valid, "median")


def test_mutation_statistics_and_positivity():
  lr = jnp.full((200_000,), 2e-4)
  new = co.mutate_learning_rates(jax.random.key(1), lr, 0.5, 1e-4, 1e-7)
  changed = np.asarray(new != lr)
  assert abs(changed.mean() - 0.5) < 0.01
  delta = np.asarray(new - lr)[changed]
  clipped = np.asarray(new)[changed] <= 1e-7
  assert abs(delta[~clipped].std() - 1e-4) < 0.1e-4  # truncated a little by the clip
  assert np.asarray(new).min() >= 1e-7
  # Mass below -lr/scale = -2 sigma is clipped at min_learning_rate: P(Z < -2) = 2.3%.
  assert abs(clipped.mean() - 0.0228) < 0.003
  assert np.array_equal(co.mutate_learning_rates(jax.random.key(2), lr, 0.0, 1e-4, 1e-7), lr)


def test_mixture_es_stays_on_simplex_and_only_improves():
  target = jnp.array([0.5, 0.0, 0.3, 0.2, 0.0])
  usable = jnp.array([True, True, True, True, False])
  score = lambda w: jnp.sum((w - target) ** 2)
  w = jnp.array([0.25, 0.25, 0.25, 0.25, 0.0])
  step = jax.jit(lambda k, w: co.mixture_es_step(k, w, usable, 0.05, score))
  prev = float(score(w))
  accepted = 0
  for i in range(300):
    w, s, acc = step(jax.random.key(i), w)
    assert float(s) <= prev + 1e-7
    np.testing.assert_allclose(float(s), float(score(w)), rtol=1e-6, atol=1e-9)
    assert float(jnp.min(w)) >= 0.0 and abs(float(jnp.sum(w)) - 1.0) < 1e-5
    assert float(w[4]) == 0.0
    prev, accepted = float(s), accepted + int(acc)
  assert 0 < accepted < 300
  assert prev < 0.01


def _scheme():
  return co.default_scheme(1e-3)


def test_player_labels_and_learning_rates():
  p = mml.Players(jnp.ones(2), {"w": jnp.ones(3)})
  state = _scheme().init(p)
  labels = jax.tree.leaves(mml.transforms.player_labels(state))
  assert set(labels) == {0, 1, 2}
  assert mml.transforms.count_learning_rates(state) == (0, 1, 1)
  state = mml.transforms.set_learning_rates(state, 0.1, 0.2)
  assert float(state.inner_state.min.hyperparams["learning_rate"]) == pytest.approx(0.1)
  assert float(state.inner_state.max.hyperparams["learning_rate"]) == pytest.approx(0.2)
  a, b = state, jax.tree.map(lambda x: x + 1 if x.dtype != bool else x, state)
  merged = mml.transforms.merge_by_player(mml.transforms.player_labels(state), a, b, a)
  assert float(merged.slow[0].max["w"][0]) == 2.0 and float(merged.slow[0].min[0]) == 1.0
  shared = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).init(p)
  with pytest.raises(ValueError, match="per_player"):
    mml.transforms.set_learning_rates(shared, 0.1, 0.2)


@pytest.mark.parametrize(
  "field,value",
  [
    ("rows", 0),
    ("population_size", -1),
    ("n_replacements", 2),
    ("neighbourhood", "hex"),
    ("fitness_mode", "median"),
    ("mutation_probability", 1.5),
    ("learning_rate", 0.0),
    ("cell_strategy", "pmap"),
    ("opponents", "all"),
    ("steps_per_generation", 2.5),
    ("d_every", 0),
    ("d_every", 601),
    ("d_every", 2.0),
    ("d_every", True),
  ],
)
def test_config_validation(field, value):
  with pytest.raises(ValueError, match=field) as err:
    co.CoevolutionConfig(**{field: value})
  assert repr(value) in str(err.value)
