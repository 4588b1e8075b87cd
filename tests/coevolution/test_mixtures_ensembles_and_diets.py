"""Lipizzaner's features beyond the generation step (issue 17), on small hand-computed cases:
exact-proportion mixture sampling, the end-of-run mixture ES and the GECCO'20 ensemble
searches."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed
from minmaxlab.gan import data, metrics, models

# ------------------------------------------------------------ sampling modes


@pytest.mark.parametrize(
  "weights, n, expected",
  [
    ([0.5, 0.3, 0.2], 10, [5, 3, 2]),  # exact
    ([1 / 3, 1 / 3, 1 / 3], 10, [4, 3, 3]),  # 3.33 each: the leftover 1 to index 0 (tie)
    ([0.15, 0.15, 0.7], 10, [2, 1, 7]),  # 1.5, 1.5, 7: the leftover to index 0 (tie)
    ([0.26, 0.34, 0.4], 10, [3, 3, 4]),  # 2.6, 3.4, 4: floors 2, 3, 4; leftover to .6
    ([2.0, 0.0, 6.0], 4, [1, 0, 3]),  # unnormalised weights are normalised
    ([0.05, 0.05, 0.9], 3, [0, 0, 3]),  # 0.15, 0.15, 2.7: leftover to the .7
  ],
)
def test_exact_proportion_counts_by_hand(weights, n, expected):
  counts = co.exact_proportion_counts(jnp.asarray(weights), n)
  assert counts.dtype == jnp.int32
  np.testing.assert_array_equal(counts, expected)


def test_exact_proportion_counts_round_and_sum_to_n():
  key = jax.random.key(0)
  ws = jax.random.dirichlet(key, jnp.ones(7), (6,))
  for i, w in enumerate(ws):
    n = 13 + 17 * i
    c = np.asarray(co.exact_proportion_counts(w, n))
    assert c.sum() == n
    exact = np.asarray(w, np.float64) / float(np.sum(w)) * n
    assert np.all((c == np.floor(exact)) | (c == np.ceil(exact)))


def _offset_generators(m):
  """Generator ``i`` maps any latent to the point ``(i, 0)``: a sample names its generator."""
  apply = lambda p, z: jnp.stack([jnp.full(z.shape[0], p), 0.0 * z[:, 0]], -1)  # noqa: E731
  return apply, jnp.arange(m, dtype=jnp.float32)


def test_exact_proportion_sampling_gives_the_counts():
  apply, gens = _offset_generators(3)
  which = co.mixture_assignment(
    jax.random.key(0), jnp.asarray([0.5, 0.3, 0.2]), 10, "exact_proportion"
  )
  np.testing.assert_array_equal(which, [0, 0, 0, 0, 0, 1, 1, 1, 2, 2])
  x = co.sample_mixture(
    jax.random.key(1), apply, gens, jnp.asarray([0.26, 0.34, 0.4]), 10, 2, "exact_proportion"
  )
  np.testing.assert_array_equal(np.bincount(np.asarray(x[:, 0], int), minlength=3), [3, 3, 4])


def test_independent_sampling_frequencies_and_keys():
  apply, gens = _offset_generators(3)
  w = jnp.asarray([0.5, 0.3, 0.2])
  n = 20000
  x = co.sample_mixture(jax.random.key(2), apply, gens, w, n, 2)
  freq = np.bincount(np.asarray(x[:, 0], int), minlength=3) / n
  np.testing.assert_allclose(freq, w, atol=4 * math.sqrt(0.25 / n))
  # The key split: k1 assigns the generators, k2 draws the latents.
  k1, _ = jax.random.split(jax.random.key(2))
  which = jax.random.categorical(k1, jnp.log(w), shape=(n,))
  np.testing.assert_array_equal(np.asarray(x[:, 0], int), which)
  with pytest.raises(ValueError, match="mode must be one of"):
    co.mixture_assignment(jax.random.key(0), w, 4, "proportional")


def test_exact_proportion_score_scores_the_drawn_sample():
  # Two modes at (+-1, 0); generator 0 puts every sample on mode 0, generator 1 on mode 1.
  mixture = data.Mixture(modes=jnp.asarray([[-1.0, 0.0], [1.0, 0.0]]), std=0.05)
  s = 10
  samples = jnp.stack(
    [jnp.tile(jnp.asarray([[-1.0, 0.0]]), (s, 1)), jnp.tile(jnp.asarray([[1.0, 0.0]]), (s, 1))]
  )
  exact = co.exact_proportion_score(metrics.mode_tvd_score)
  # weights (0.55, 0.45) of 10 samples: 5.5, 4.5 -> (6, 4): histogram (0.6, 0.4), TVD 0.1;
  # the weighted score sees (0.55, 0.45): TVD 0.05.
  w = jnp.asarray([0.55, 0.45])
  assert float(exact(mixture, samples, w)) == pytest.approx(0.1, abs=1e-6)
  assert float(metrics.mode_tvd_score(mixture, samples, w)) == pytest.approx(0.05, abs=1e-6)
  # Generator 0's samples after its 3rd are far away: with 3 of 10 samples (w 0.3) the
  # exact-proportion mixture never uses them; the weighted score counts 0.3 * 7/10 as misses.
  far = samples.at[0, 3:].set(jnp.asarray([9.0, 9.0]))
  w = jnp.asarray([0.3, 0.7])
  assert float(exact(mixture, far, w)) == pytest.approx(0.5 * (0.2 + 0.2), abs=1e-6)
  expected_weighted = 0.5 * (abs(0.09 - 0.5) + abs(0.7 - 0.5) + 0.21)
  assert float(metrics.mode_tvd_score(mixture, far, w)) == pytest.approx(
    expected_weighted, abs=1e-6
  )


def test_class_tvd_score_matches_metrics_class_tvd():
  logits_fn = lambda d, x: x  # noqa: E731  (samples are their own logits)
  score = metrics.class_tvd_score(logits_fn)
  key = jax.random.key(3)
  x = jax.random.normal(key, (1, 50, 4))
  assert float(score(None, x, jnp.ones(1))) == pytest.approx(
    metrics.class_tvd(np.asarray(x[0])), abs=1e-6
  )
  # Two generators: one always class 0, one always class 1, weights (0.75, 0.25):
  # histogram (0.75, 0.25, 0, 0) -> 0.5 * (0.5 + 0 + 0.25 + 0.25) = 0.5.
  two = jnp.stack([jnp.tile(jnp.eye(4)[0], (8, 1)), jnp.tile(jnp.eye(4)[1], (8, 1))])
  assert float(score(None, two, jnp.asarray([0.75, 0.25]))) == pytest.approx(0.5, abs=1e-6)


# ------------------------------------------------------------- mixture ES


def test_optimize_mixture_first_step_by_hand():
  w0 = jnp.asarray([0.5, 0.3, 0.2])
  key, sigma = jax.random.key(4), 0.1
  _, k_steps = jax.random.split(key)
  noise = jax.random.normal(jax.random.split(k_steps, 1)[0], (3,))
  proposal = np.maximum(np.asarray(w0) + sigma * np.asarray(noise), 0)
  proposal /= proposal.sum()
  toward = lambda w: jnp.sum((w - jnp.asarray(proposal)) ** 2)  # noqa: E731
  away = lambda w: -toward(w)  # noqa: E731
  got = co.optimize_mixture(key, toward, w0, generations=1, sigma=sigma)
  np.testing.assert_allclose(got.weights, proposal, rtol=1e-5)
  assert bool(got.accepted[0]) and float(got.score) == pytest.approx(0.0, abs=1e-12)
  assert float(got.initial_score) == pytest.approx(float(toward(w0)), rel=1e-6)
  kept = co.optimize_mixture(key, away, w0, generations=1, sigma=sigma)
  np.testing.assert_allclose(kept.weights, w0, rtol=1e-6)
  assert not bool(kept.accepted[0]) and float(kept.score) == float(kept.initial_score)


def test_optimize_mixture_converges_and_never_gets_worse():
  target = jnp.asarray([0.2, 0.3, 0.5, 0.0])
  score = lambda w: jnp.sum((w - target) ** 2)  # noqa: E731
  usable = jnp.asarray([True, True, True, False])
  out = jax.jit(
    lambda k: co.optimize_mixture(
      k, score, jnp.full(4, 0.25), generations=300, sigma=0.05, usable=usable
    )
  )(jax.random.key(5))
  scores = np.asarray(out.scores)
  assert np.all(np.diff(scores) <= 0) and scores[-1] == float(out.score)
  # Start: the usable uniform (1/3, 1/3, 1/3, 0): score 0.0466...
  assert float(out.initial_score) == pytest.approx(
    (2 / 15) ** 2 + (1 / 30) ** 2 + (1 / 6) ** 2, rel=1e-5
  )
  assert float(out.weights[3]) == 0.0 and float(jnp.sum(out.weights)) == pytest.approx(
    1.0, abs=1e-6
  )
  np.testing.assert_allclose(out.weights, target, atol=0.02)
  assert int(np.sum(out.accepted)) == int(np.sum(np.diff(np.r_[out.initial_score, scores]) < 0))


def test_optimize_mixture_random_init_and_arguments():
  key = jax.random.key(6)
  k_init, _ = jax.random.split(key)
  u = jax.random.uniform(k_init, (3,))
  out = co.optimize_mixture(key, jnp.sum, jnp.ones(3) / 3, generations=0, random_init=True)
  np.testing.assert_allclose(out.weights, u / jnp.sum(u), rtol=1e-6)
  assert out.scores.shape == (0,)
  with pytest.raises(ValueError, match="generations must be an integer >= 0, got -1"):
    co.optimize_mixture(key, jnp.sum, jnp.ones(3), generations=-1)
  with pytest.raises(ValueError, match="sigma must be >= 0"):
    co.optimize_mixture(key, jnp.sum, jnp.ones(3), sigma=-0.1)


# ------------------------------------------------------ GECCO'20 ensembles


@pytest.mark.parametrize("size, precision", [(1, 10), (2, 3), (3, 2), (4, 5)])
def test_weight_grid_is_every_composition(size, precision):
  grid = co.weight_grid(size, precision)
  assert grid.shape == (math.comb(precision + size - 1, size - 1), size)
  units = {tuple(int(round(v)) for v in row) for row in grid * precision}
  expected = {
    c for c in itertools.product(range(precision + 1), repeat=size) if sum(c) == precision
  }
  assert units == expected
  np.testing.assert_allclose(grid.sum(1), 1.0)


def test_greedy_ensemble_by_hand():
  # Target mixture (0.6, 0, 0.4, 0). Iterative order, precision 10:
  #   {0}: w (1): (0.4)^2 + 0.4^2 = 0.32, kept;
  #   {0, 1}: best (0.8, 0.2): 0.2^2 + 0.2^2 + 0.16 = 0.24 < 0.32, kept;
  #   {0, 1, 2}: (0.6, 0, 0.4): 0, kept;
  #   {0, 1, 2, 3}: 0 again, not strictly better: rejected; candidates exhausted.
  target = jnp.asarray([0.6, 0.0, 0.4, 0.0])
  score = lambda w: jnp.sum((w - target) ** 2)  # noqa: E731
  out = co.greedy_ensemble(jax.random.key(0), score, 4, max_size=5, patience=3)
  assert out.members == (0, 2)
  np.testing.assert_allclose(out.weights, target, atol=1e-7)
  assert out.score == pytest.approx(0.0, abs=1e-12)
  assert out.evaluations == 1 + 11 + 66 + 286
  np.testing.assert_allclose(out.history, [0.32, 0.24, 0.0, 0.0], atol=1e-6)
  # max_size=2 stops after {0, 1}; patience=1 stops at the first rejection.
  two = co.greedy_ensemble(jax.random.key(0), score, 4, max_size=2)
  assert two.members == (0, 1) and two.evaluations == 12
  np.testing.assert_allclose(two.weights, [0.8, 0.2, 0, 0], atol=1e-7)
  linear = lambda w: -jnp.dot(w, jnp.asarray([1.0, 3.0, 2.0, 5.0]))  # noqa: E731
  one = co.greedy_ensemble(jax.random.key(0), linear, 4, patience=1)
  # {0}: -1; {0, 1}: -3 (all weight on 1); {0, 1, 2}: -3 rejected -> stop.
  assert one.members == (1,) and one.evaluations == 1 + 11 + 66 and one.score == -3.0


def test_greedy_random_order_is_keyed():
  score = lambda w: jnp.sum(w**2)  # noqa: E731  (uniform is best: every candidate helps)
  a = co.greedy_ensemble(jax.random.key(7), score, 6, max_size=3, order="random", precision=6)
  b = co.greedy_ensemble(jax.random.key(7), score, 6, max_size=3, order="random", precision=6)
  first = np.asarray(jax.random.permutation(jax.random.key(7), 6))[:3]
  assert a.members == b.members == tuple(sorted(int(i) for i in first))
  np.testing.assert_allclose(a.weights[first], 1 / 3, atol=1e-7)
  with pytest.raises(ValueError, match="order must be"):
    co.greedy_ensemble(jax.random.key(0), score, 3, order="best")


def test_ga_crossover_keeps_a_permutation():
  from minmaxlab.coevolution._genetic_ensemble import _crossover_one

  perm, units = jnp.asarray([0, 1, 2, 3]), jnp.asarray([9, 9, 9, 9])
  p, u = _crossover_one(perm, units, jnp.asarray([2, 3, 0, 1]), jnp.asarray([1, 2, 3, 4]), 0, 2)
  np.testing.assert_array_equal(p, [2, 3, 0, 1])
  np.testing.assert_array_equal(u, [1, 2, 9, 9])
  p, u = _crossover_one(perm, units, jnp.asarray([3, 2, 1, 0]), jnp.asarray([1, 2, 3, 4]), 1, 2)
  np.testing.assert_array_equal(p, [0, 2, 1, 3])
  np.testing.assert_array_equal(u, [9, 2, 9, 9])


@pytest.mark.slow  # two GA compilations: 8-40 s with this CPU's load
def test_ga_ensemble_finds_the_best_single_generator_and_reports_consistently():
  values = jnp.asarray([0.1, 0.7, 0.3, 0.9, 0.2])
  linear = lambda w: -jnp.dot(w, values)  # noqa: E731
  out = co.ga_ensemble(jax.random.key(8), linear, 5, min_size=1, max_size=1, generations=15)
  assert out.members == (3,) and out.score == pytest.approx(-0.9, rel=1e-6)
  assert out.evaluations == 5 * 16 and len(out.history) == 16
  assert np.all(np.diff(out.history) <= 0)
  # Variable size (NREO-GEN): the reported weights score what is reported.
  target = jnp.asarray([0.5, 0.0, 0.5, 0.0, 0.0, 0.0])
  quad = lambda w: jnp.sum((w - target) ** 2)  # noqa: E731
  out = co.ga_ensemble(
    jax.random.key(9), quad, 6, min_size=1, max_size=4, population_size=8, generations=10
  )
  assert float(quad(jnp.asarray(out.weights, jnp.float32))) == pytest.approx(out.score, rel=1e-5)
  assert 1 <= len(out.members) <= 4 and out.weights.sum() == pytest.approx(1.0)
  assert out.history[-1] == out.score < out.history[0]
  with pytest.raises(ValueError, match="crossover_probability must be in"):
    co.ga_ensemble(jax.random.key(0), quad, 6, crossover_probability=2.0)


# ------------------------------------------- on a finished run (experiments)


@pytest.mark.slow
def test_post_training_ensembles_on_a_smoke_run(tmp_path):
  import json

  from experiments.coevolution import ensembles, train
  from experiments.coevolution.configs import smoke
  from minmaxlab import runner

  config = smoke.get_config()
  config.progress = False
  # A run directory as train.train leaves it, holding a fresh grid (the searches do not care
  # whether the generators were trained; compiling the smoke step would take most of the test).
  runner.write_config(tmp_path, config, module=train.__name__)
  state = jax.jit(train.build(config).coev.init)(train.keys(config)[0])
  run_key = np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  runner.CheckpointManager(tmp_path / "checkpoints").save(0, {"state": state, "key": run_key})
  config.ensembles.methods = ("es", "greedy", "ga")
  config.ensembles.es.generations = 20
  config.ensembles.es.sigma = 0.05
  config.ensembles.greedy.max_size = 2
  config.ensembles.greedy.precision = 4
  config.ensembles.ga.generations = 3
  config.ensembles.ga.min_size = 1
  config.ensembles.ga.max_size = 3
  lines = ensembles.after_training(config, tmp_path)
  assert [ln.split(":")[0] for ln in lines] == ["es", "greedy", "ga"]
  run = runner.load_run(tmp_path)
  exp = train.build(run.config)
  state = jax.tree.map(jnp.asarray, run.state["state"])
  pair = exp.coev.pair
  # The scores are re-computed here from the records: the run's TVD on the same latents.
  z = jax.random.normal(jax.random.split(jax.random.key(config.seed), 4)[0], (64, pair.latent_dim))
  draw = jax.vmap(pair.generator.apply, (0, None))
  records = {
    m: json.loads((tmp_path / f"ensemble_{m}.json").read_text()) for m in ("es", "greedy", "ga")
  }
  es = records["es"]
  assert es["score"] == "tvd" and es["evaluations"] == 21
  assert es["score_after"] <= es["score_before"]
  cell = es["cell"][0] * config.cols + es["cell"][1]
  gens, _ = exp.coev.mixture(state, cell)
  w = jnp.asarray(es["weights"], jnp.float32)
  assert float(metrics.mode_tvd_score(exp.mixture, draw(gens, z), w)) == pytest.approx(
    es["score_after"], abs=1e-4
  )
  usable = co.member_mask(config.rows, config.cols)[es["cell"][0], es["cell"][1]]
  assert np.all(np.asarray(es["weights"])[~usable] == 0.0)
  every = draw(ensembles.cell_best_generators(state), z)
  for m in ("greedy", "ga"):
    rec = records[m]
    w = jnp.asarray(rec["weights"], jnp.float32)
    assert float(metrics.mode_tvd_score(exp.mixture, every, w)) == pytest.approx(
      rec["score_after"], abs=1e-4
    )
    assert 1 <= len(rec["members"]) <= (2 if m == "greedy" else 3) and sum(
      rec["weights"]
    ) == pytest.approx(1.0, abs=1e-5)
    assert set(rec["metrics_ensemble"]) >= {"modes_covered", "high_quality_rate"}
  # The greedy search keeps candidate 0 alone unless a larger ensemble scores better.
  alone = float(metrics.mode_tvd_score(exp.mixture, every, jnp.eye(4)[0]))
  assert records["greedy"]["score_after"] <= alone + 1e-6
  assert records["ga"]["evaluations"] == 5 * 4


# ------------------------------------------------------------- data dieting


def test_diet_indices_are_a_fixed_distinct_subset_per_cell():
  diet_indices, diet_rows, diet_size = co.diet_indices, co.diet_rows, co.diet_size
  assert diet_size(10, 0.5) == 5 and diet_size(10, 0.04) == 1 and diet_size(7, 1.0) == 7
  key = jax.random.key(0)
  a = np.asarray(diet_indices(key, 3, 10, 0.5))
  assert len(a) == 5 and len(set(a.tolist())) == 5 and a.min() >= 0 and a.max() < 10
  # The head of the permutation that argsorts the cell's uniforms (fold_in(key, cell id)).
  u = jax.random.uniform(jax.random.fold_in(key, jnp.uint32(3)), (10,))
  np.testing.assert_array_equal(a, np.argsort(np.asarray(u), kind="stable")[:5])
  np.testing.assert_array_equal(jax.jit(diet_indices, static_argnums=(2, 3))(key, 3, 10, 0.5), a)
  assert not np.array_equal(np.sort(a), np.sort(np.asarray(diet_indices(key, 4, 10, 0.5))))
  np.testing.assert_array_equal(diet_indices(key, 3, 6, 1.0), np.arange(6))
  rows = jnp.arange(20.0).reshape(10, 2)
  np.testing.assert_array_equal(diet_rows(key, 3, rows, 0.5), np.asarray(rows)[a])
  with pytest.raises(ValueError, match="sampling_ratio must be in"):
    diet_size(10, 0.0)


@pytest.mark.slow  # compiles one generation of a 2x2 grid (in the "fastest" mode: half the compile)
def test_each_cell_samples_and_scores_its_own_diet():
  # Rows are (i, 0) for i < 40; a cell's real samples and mixture score see its subset only:
  # the score is the mean first coordinate of the cell's rows, so every cell's mixture
  # score is the mean index of its own diet (the ES keeps a constant score).
  rows = jnp.stack([jnp.arange(40.0), jnp.zeros(40)], -1)
  diet_key = jax.random.key(11)
  config = co.CoevolutionConfig(
    rows=2, cols=2, batch_size=8, steps_per_generation=2, fitness_samples=8, mixture_samples=8
  )
  coev = co.Coevolution(
    config,
    models.make_pair("mlp", (2,), latent_dim=4, hidden=(8,)),
    sample_real=lambda d, k, n: d[jax.random.randint(k, (n,), 0, d.shape[0])],
    score_fn=lambda d, samples, w: jnp.mean(d[:, 0]),
    cell_data=lambda d, i: co.diet_rows(diet_key, i, d, 0.25),
  )
  state = coev.init(jax.random.key(0))
  fastest = distributed.compiler_options("fastest")
  _, m = jax.jit(coev.step, compiler_options=fastest)(jax.random.key(1), state, rows)
  expected = [float(np.mean(np.asarray(co.diet_indices(diet_key, i, 40, 0.25)))) for i in range(4)]
  np.testing.assert_allclose(np.asarray(m["mixture_score"]).reshape(-1), expected, rtol=1e-6)
  assert len(set(expected)) == 4


def test_experiment_sampling_ratio_gives_each_cell_its_subset():
  from experiments.coevolution import experiment
  from experiments.coevolution.configs import smoke

  config = smoke.get_config()
  assert experiment.build(config).coev.cell_data is None  # sampling_ratio 1: the whole data
  config.sampling_ratio = 0.25
  config.dataset_size = 40
  exp = experiment.build(config)
  assert isinstance(exp.data, experiment.DietedMixture) and exp.data.rows.shape == (40, 2)
  config.diet_seed = 3
  exp = experiment.build(config)
  key = jax.random.fold_in(jax.random.key(3), experiment.DIET_SALT)
  np.testing.assert_array_equal(exp.data.rows, exp.mixture.sample(key, 40))
  cells = [np.asarray(exp.coev.cell_data(exp.data, i).rows) for i in range(4)]
  for i, rows in enumerate(cells):
    idx = co.diet_indices(jax.random.fold_in(key, 1), i, 40, 0.25)
    np.testing.assert_array_equal(rows, np.asarray(exp.data.rows)[np.asarray(idx)])
  assert len({r.tobytes() for r in cells}) == 4
  config.sampling_ratio = 1.5
  with pytest.raises(ValueError, match="sampling_ratio must be in"):
    experiment.build(config)


def test_experiment_mixture_sampling_exact_proportion():
  from experiments.coevolution import experiment
  from experiments.coevolution.configs import smoke

  config = smoke.get_config()
  config.mixture_sampling = "exact_proportion"
  exp = experiment.build(config)
  modes = jnp.asarray(exp.mixture.modes)
  # Generator 0 on mode 0, generator 1 on mode 1, 10 samples each, weights (0.55, 0.45):
  # the exact-proportion sample is 6 + 4 points (TVD of 8 modes: 0.5 (0.6 - 1/8 + 0.4 - 1/8
  # + 6/8) = 0.75); the weighted score sees 0.55 + 0.45 (the same 0.75 here, but not below).
  samples = jnp.stack([jnp.tile(modes[0], (10, 1)), jnp.tile(modes[1], (10, 1))])
  w = jnp.asarray([0.55, 0.45])
  assert float(exp.coev.score_fn(exp.data, samples, w)) == pytest.approx(0.75, abs=1e-6)
  far = samples.at[0, 3:].set(jnp.asarray([9.0, 9.0]))  # only 3 of generator 0's are used
  w = jnp.asarray([0.3, 0.7])
  exact = 0.5 * (0.3 - 0.125 + 0.7 - 0.125 + 6 * 0.125)
  assert float(exp.coev.score_fn(exp.data, far, w)) == pytest.approx(exact, abs=1e-6)
  weighted = float(metrics.mode_tvd_score(exp.mixture, far, w))
  assert weighted == pytest.approx(0.5 * (0.125 - 0.09 + 0.7 - 0.125 + 6 * 0.125 + 0.21), abs=1e-6)
  config.mixture_sampling = "proportional"
  with pytest.raises(ValueError, match="config.mixture_sampling must be one of"):
    experiment.build(config)
