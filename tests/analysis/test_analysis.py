"""minmaxlab.analysis: Jacobians, spectra of the real transforms vs closed forms, trajectories."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.optimize import linear_sum_assignment

import minmaxlab as mml
from minmaxlab import analysis, games
from tests.analysis._tiny_gan import tiny_gan


def assert_same_spectrum(got, want, atol):
  """Eigenvalues equal as multisets (optimal matching, then max error)."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  cost = np.abs(got[:, None] - want[None, :])
  rows, cols = linear_sum_assignment(cost)
  err = cost[rows, cols].max()
  assert err < atol, (err, np.sort_complex(got), np.sort_complex(want))


def square_game(key, n=3, mu=None):
  g = games.random_bilinear(key, n)
  if mu is not None:
    g = games.quadratic(g.A, mu, g.b, g.c)
  sigma = np.linalg.svd(np.asarray(g.A), compute_uv=False)
  return g, sigma


# ----------------------------------------------------------------------------- Jacobian


@pytest.mark.parametrize("shape", [(4, 4), (3, 5)])
def test_bilinear_jacobian_is_purely_rotational(x64, key, shape):
  n, m = shape
  A = jax.random.normal(key, shape)
  game = games.bilinear(A, jnp.ones(n), -jnp.ones(m))
  params = mml.Players(jnp.arange(n) * 0.3, jnp.arange(m) * -0.2)
  J = analysis.jacobian(mml.vector_field(game.loss), params)
  np.testing.assert_allclose(
    J, np.block([[np.zeros((n, n)), A], [-A.T, np.zeros((m, m))]]), atol=1e-14
  )
  S, Asym = analysis.decompose(J)
  np.testing.assert_allclose(S, 0.0, atol=1e-14)
  np.testing.assert_allclose(Asym, J, atol=1e-14)
  sigma = np.linalg.svd(np.asarray(A), compute_uv=False)
  want = np.concatenate([1j * sigma, -1j * sigma, np.zeros(abs(n - m))])
  assert_same_spectrum(np.linalg.eigvals(np.asarray(J)), want, 1e-10)
  summary = analysis.summarize_jacobian(J)
  assert summary.rotation_ratio == pytest.approx(1.0)
  assert summary.symmetric_norm == pytest.approx(0.0, abs=1e-14)
  np.testing.assert_allclose(
    summary.angles[np.abs(summary.eigenvalues) > 1e-8], np.pi / 2, atol=1e-10
  )


def test_regularised_bilinear_real_parts_equal_mu(x64, key):
  mu, n = 0.1, 10
  game, sigma = square_game(key, n, mu=mu)
  J = analysis.jacobian(mml.vector_field(game.loss), game.equilibrium())
  eigs = np.linalg.eigvals(np.asarray(J))
  np.testing.assert_allclose(eigs.real, mu, atol=1e-12)
  assert_same_spectrum(eigs, np.concatenate([mu + 1j * sigma, mu - 1j * sigma]), 1e-10)
  S, A = analysis.decompose(J)
  np.testing.assert_allclose(S, mu * np.eye(2 * n), atol=1e-14)
  summary = analysis.summarize_jacobian(J)
  a_norm = np.sqrt(2.0) * np.linalg.norm(np.asarray(game.A))
  assert summary.symmetric_norm == pytest.approx(mu * np.sqrt(2 * n))
  assert summary.antisymmetric_norm == pytest.approx(a_norm)
  assert summary.rotation_ratio == pytest.approx(a_norm / (mu * np.sqrt(2 * n) + a_norm))
  np.testing.assert_allclose(
    np.sort(summary.angles), np.sort(np.arctan2(sigma, mu).repeat(2)), atol=1e-12
  )


def test_decompose_validates_and_reconstructs(x64, key):
  J = jax.random.normal(key, (5, 5))
  S, A = analysis.decompose(J)
  np.testing.assert_allclose(S + A, J, atol=1e-14)
  np.testing.assert_allclose(S, S.T)
  np.testing.assert_allclose(A, -A.T)
  with pytest.raises(ValueError, match="square"):
    analysis.decompose(jnp.ones((2, 3)))


@pytest.fixture(scope="module")
def gan():
  """A tiny float64 MLP GAN (shared, so the jitted Jacobian products compile once)."""
  with jax.enable_x64(True):
    yield tiny_gan(jax.random.key(0))


def test_jvp_vjp_operators_match_dense_jacobian(x64, gan):
  field, params, args = gan
  J = np.asarray(analysis.jacobian(field, params, *args))
  u = np.asarray(jax.random.normal(jax.random.key(3), (J.shape[0],)))
  np.testing.assert_allclose(
    analysis.jvp_operator(field, params, *args)(u), J @ u, rtol=1e-10, atol=1e-12
  )
  np.testing.assert_allclose(
    analysis.vjp_operator(field, params, *args)(u), J.T @ u, rtol=1e-10, atol=1e-12
  )
  # A general-sum GAN is not antisymmetric: it has a potential part.
  assert 0.0 < analysis.summarize_jacobian(J).rotation_ratio < 1.0


@pytest.mark.parametrize("which", ["LM", "LI"])
def test_krylov_top_eigenvalues_match_dense(x64, gan, which):
  field, params, args = gan
  J = np.asarray(analysis.jacobian(field, params, *args))
  dense = np.linalg.eigvals(J)
  score = np.abs(dense) if which == "LM" else np.abs(dense.imag)
  k = 6
  got = analysis.top_eigenvalues(field, params, *args, k=k, which=which)
  assert got.shape == (k,)
  # Every Krylov eigenvalue is a dense eigenvalue, and they are the top-k by the criterion.
  for e in got:
    assert np.min(np.abs(dense - e)) <= 1e-5 * np.abs(e)
  got_score = np.abs(got) if which == "LM" else np.abs(got.imag)
  np.testing.assert_allclose(np.sort(got_score)[::-1], np.sort(score)[::-1][:k], rtol=1e-5)
  vals, vecs = analysis.top_eigenvalues(
    field, params, *args, k=2, which=which, return_eigenvectors=True
  )
  np.testing.assert_allclose(J @ vecs, vecs * vals, atol=1e-8 * np.abs(vals).max())


def test_top_eigenvalues_validates(x64, gan):
  field, params, args = gan
  with pytest.raises(ValueError, match="which"):
    analysis.top_eigenvalues(field, params, *args, which="SM")
  with pytest.raises(ValueError, match="k must be"):
    analysis.top_eigenvalues(field, params, *args, k=10_000)


# ----------------------------------------------------------------------------- update operators


def base_transform(method, eta, max_steps=1):
  sgd = optax.sgd(eta)
  return {
    "gda": lambda: sgd,
    "alternating": lambda: mml.alternating(sgd, max_steps=max_steps),
    "extragradient": lambda: mml.extragradient(sgd),
    "optimistic": lambda: mml.optimistic(sgd),
  }[method]()


def test_scalar_closed_forms_match_formulas():
  for h in [0.05, 0.3, 0.5, 0.55, 0.9, 1.7, 2.0]:
    rho = analysis.spectral_radius
    assert rho(analysis.gda_eigenvalues(h, 1.0)) == pytest.approx(np.sqrt(1 + h * h), rel=1e-13)
    assert rho(analysis.extragradient_eigenvalues(h, 1.0)) == pytest.approx(
      np.sqrt(1 - h**2 + h**4), rel=1e-13
    )
    assert rho(analysis.alternating_eigenvalues(h, 1.0)) == pytest.approx(1.0, abs=1e-7)
    if h <= 0.5:
      ogda = np.sqrt((1 + np.sqrt(1 - 4 * h * h)) / 2)
    else:
      ogda = 0.5 * np.sqrt(1 + (2 * h + np.sqrt(4 * h * h - 1)) ** 2)
    assert rho(analysis.optimistic_eigenvalues(h, 1.0)) == pytest.approx(ogda, rel=1e-12)
  assert analysis.spectral_radius(analysis.alternating_eigenvalues(2.5, 1.0)) > 1.0
  # OGDA converges iff h < 1/sqrt(3).
  edge = 1 / np.sqrt(3)
  assert analysis.spectral_radius(analysis.optimistic_eigenvalues(edge, 1.0)) == pytest.approx(1.0)


# Reference values of research/lookahead_minmax.md section 7 (sigma = 1, numpy float64).
TABLE = [  # eta, method, rho(F), LA k=5 a=.5, per step, k=6 a=.5, k=6 a=.4, k=15 a=.3
  (0.1, "gda", 1.0049875621, 0.9813269142, 0.9962371714, None, None, None),
  (0.1, "alternating", 1.0, 0.9688866162, 0.9936984019, None, None, None),
  (0.1, "extragradient", 0.9950376877, 0.9566060768, 0.9911665274, None, None, None),
  (0.2, "gda", 1.0198039027, 0.9263709978, 0.9848202953, 0.8822118536, 0.8751801660, 0.3124436848),
  (0.2, "alternating", 1.0, 0.8771809246, 0.9741320577, 0.8247680000, 0.8324857739, 0.4048588689),
  (
    0.2,
    "extragradient",
    0.9806120538,
    0.8307386401,
    0.9635913267,
    0.7715287685,
    0.7925887525,
    0.4769486134,
  ),
  (0.3, "gda", 1.0440306509, 0.8395867964, 0.9656352699, 0.7447553476, 0.7199347871, 0.7416874755),
  (0.3, "alternating", 1.0, 0.7297491341, 0.9389332476, 0.6189355000, 0.6385592432, 0.7060294881),
  (
    0.3,
    "extragradient",
    0.9581753493,
    0.6359344174,
    0.9134451327,
    0.5203040013,
    0.5761746185,
    0.7274696994,
  ),
  (0.5, "gda", 1.1180339887, 0.6474484173, 0.9167291363, None, None, None),
  (0.5, "extragradient", 0.9013878189, 0.2168392106, 0.7365929596, None, None, None),
]


@pytest.mark.parametrize("row", TABLE, ids=lambda r: f"{r[1]}-{r[0]}")
def test_reference_table(x64, row):
  eta, method, rho, la5, step5, la6, la6b, la15 = row
  cf = lambda **kw: analysis.spectral_radius(analysis.closed_form_eigenvalues(method, eta, **kw))
  assert cf() == pytest.approx(rho, abs=1e-9)
  assert cf(sync_period=5, slow_step_size=0.5) == pytest.approx(la5, abs=1e-9)
  assert analysis.per_step_rate(la5, 5) == pytest.approx(step5, abs=1e-9)
  for want, k, a in [(la6, 6, 0.5), (la6b, 6, 0.4), (la15, 15, 0.3)]:
    if want is not None:
      assert cf(sync_period=k, slow_step_size=a) == pytest.approx(want, abs=1e-9)
  # ... and the real transform, run on f = x y.
  game = games.bilinear(jnp.eye(1))
  vf = mml.vector_field(game.loss)
  start = mml.Players(jnp.ones(1), -jnp.ones(1))
  la = mml.lookahead_minmax(base_transform(method, eta), sync_period=5, slow_step_size=0.5)
  op = analysis.update_operator(la, vf, start, num_steps=5)
  assert op.spectral_radius == pytest.approx(la5, abs=1e-9)


@pytest.mark.parametrize("method", ["gda", "alternating", "extragradient", "optimistic"])
def test_numeric_operators_of_real_transforms_match_closed_forms(x64, method):
  """The update maps of the REAL transforms (one update / one lookahead cycle)
  against the closed forms, on a random 3x3 bilinear game with linear terms."""
  game, sigma = square_game(jax.random.key(7), 3)
  vf = mml.vector_field(game.loss)
  start = mml.Players(jnp.array([0.3, -1.0, 0.5]), jnp.array([1.2, 0.1, -0.4]))
  n = 6
  for eta in [0.15, 0.8]:
    op = analysis.update_operator(base_transform(method, eta), vf, start)
    want = analysis.closed_form_eigenvalues(method, eta, sigma)
    assert_same_spectrum(op.eigenvalues, want, 1e-10)
    assert op.spectral_radius == pytest.approx(analysis.spectral_radius(want), abs=1e-10)
    assert op.matrix.shape == ((2 * n, 2 * n) if method == "optimistic" else (n, n))
    for k, alpha in [(2, 0.5), (5, 0.3)]:
      la = mml.lookahead_minmax(base_transform(method, eta), sync_period=k, slow_step_size=alpha)
      want = analysis.closed_form_eigenvalues(
        method, eta, sigma, sync_period=k, slow_step_size=alpha
      )
      if method == "optimistic":  # memory on (z, slow, u_prev): the slow copy adds n zeros
        op = analysis.update_operator(la, vf, start, num_steps=k, augment_state=True)
        want = np.concatenate([want, np.zeros(n)])
      else:
        op = analysis.update_operator(la, vf, start, num_steps=k)
      assert_same_spectrum(op.eigenvalues, want, 1e-10)
      assert op.spectral_radius == pytest.approx(analysis.spectral_radius(want), abs=1e-10)


def test_numeric_operators_regularised_game_and_max_steps(x64):
  game, sigma = square_game(jax.random.key(8), 2, mu=0.2)
  vf = mml.vector_field(game.loss)
  start = game.equilibrium()
  for method, max_steps in [
    ("gda", 1),
    ("extragradient", 1),
    ("optimistic", 1),
    ("alternating", 1),
    ("alternating", 3),
  ]:
    eta = 0.35
    op = analysis.update_operator(base_transform(method, eta, max_steps), vf, start)
    want = analysis.closed_form_eigenvalues(method, eta, sigma, mu=0.2, max_steps=max_steps)
    assert_same_spectrum(op.eigenvalues, want, 1e-10)
  la = mml.lookahead_minmax(mml.alternating(optax.sgd(0.35), max_steps=3), sync_period=4)
  op = analysis.update_operator(la, vf, start, num_steps=4)
  want = analysis.closed_form_eigenvalues(
    "alternating", 0.35, sigma, mu=0.2, max_steps=3, sync_period=4
  )
  assert_same_spectrum(op.eigenvalues, want, 1e-10)


def test_update_operator_augmented_lookahead_adds_zeros(x64):
  game, sigma = square_game(jax.random.key(9), 2)
  vf = mml.vector_field(game.loss)
  la = mml.lookahead_minmax(mml.extragradient(optax.sgd(0.3)), sync_period=4)
  plain = analysis.update_operator(la, vf, game.equilibrium(), num_steps=4)
  aug = analysis.update_operator(
    la, vf, game.equilibrium(), num_steps=4, augment_state=True, jit=True
  )
  assert aug.matrix.shape == (8, 8) and aug.num_params == 4
  assert_same_spectrum(aug.eigenvalues, np.concatenate([plain.eigenvalues, np.zeros(4)]), 1e-10)


def test_spectral_radius_grid_reference_values():
  """research/lookahead_minmax.md section 7: LA-GDA with alpha = 0.5."""
  grid = analysis.spectral_radius_grid("gda", [0.1, 0.3], np.arange(1, 61), [0.5])
  per_step = grid.per_step[:, :, 0]
  ks = grid.sync_periods
  assert ks[np.argmin(per_step[1])] == 10
  assert per_step[1].min() == pytest.approx(0.887673, abs=1e-6)
  assert ks[np.argmin(per_step[0])] == 31
  np.testing.assert_array_equal(ks[per_step[1] < 1], np.arange(3, 16))
  np.testing.assert_array_equal(ks[per_step[0] < 1], np.arange(3, 53))
  assert grid.best()[:2] == (0.3, 10)
  np.testing.assert_allclose(grid.base_radius, np.sqrt(1 + np.array([0.1, 0.3]) ** 2))
  for method in ["alternating", "extragradient"]:
    g = analysis.spectral_radius_grid(method, [0.1, 0.3], np.arange(1, 61), [0.5])
    assert (g.per_step < 1).all()


def test_closed_form_validates():
  with pytest.raises(ValueError, match="method"):
    analysis.closed_form_eigenvalues("sgd", 0.1)
  with pytest.raises(ValueError, match="slow_step_size"):
    analysis.closed_form_eigenvalues("gda", 0.1, sync_period=5, slow_step_size=1.5)
  with pytest.raises(ValueError, match="num_steps"):
    analysis.update_operator(optax.sgd(0.1), lambda p: p, mml.Players(1.0, 1.0), num_steps=0)


# ----------------------------------------------------------------------------- trajectories


def test_field_evaluations_per_step():
  game = games.bilinear(jnp.eye(2))
  vf = mml.vector_field(game.loss)
  p = game.equilibrium()
  count = lambda tx: analysis.field_evaluations_per_step(tx, vf, p)
  sgd = optax.sgd(0.1)
  assert count(sgd) == 1
  assert count(mml.optimistic(sgd)) == 1
  assert count(mml.extragradient(sgd)) == 2
  assert count(mml.alternating(sgd)) == 2
  assert count(mml.alternating(sgd, max_steps=4)) == 5
  assert count(mml.lookahead_minmax(mml.extragradient(optax.adam(1e-3)), sync_period=3)) == 2


def test_run_game_rates_match_spectral_radius(x64, key):
  """A = I is a normal operator: the joint distance shrinks by exactly rho per
  step (GDA) or per lookahead cycle (LA-GDA, LA-EG), research notes section 7."""
  d = 4
  game = games.bilinear(jnp.eye(d), jnp.linspace(-1, 1, d), jnp.ones(d))
  start = mml.Players(jax.random.normal(key, (d,)), jnp.zeros(d))
  gda = analysis.run_game(optax.sgd(0.3), game, start, 7)
  ratios = gda.distances["joint"][1:] / gda.distances["joint"][:-1]
  np.testing.assert_allclose(ratios, np.sqrt(1.09), rtol=1e-12)
  np.testing.assert_array_equal(gda.passes, np.arange(8))
  for inner, rho, per in [
    (optax.sgd(0.3), 0.8395867964, 1),
    (mml.extragradient(optax.sgd(0.3)), 0.6359344174, 2),
  ]:
    t = analysis.run_game(mml.lookahead_minmax(inner, sync_period=5), game, start, 20)
    dist = np.asarray(t.distances["joint"])
    np.testing.assert_allclose(dist[5::5][1:] / dist[5::5][:-1], rho, rtol=1e-9)
    np.testing.assert_array_equal(t.passes, per * np.arange(21))
  slow = analysis.run_game(
    mml.lookahead_minmax(optax.sgd(0.3), sync_period=5),
    game,
    start,
    10,
    point="slow",
    keep_iterates=True,
  )
  np.testing.assert_allclose(slow.iterates.min[5], slow.iterates.min[9])  # slow weights fixed
  assert slow.iterates.min.shape == (11, d)


def test_run_games_vmaps_seeds_and_stochastic_minibatches(x64):
  d, seeds = 6, 3
  made = [games.random_stochastic_bilinear(jax.random.key(s), d) for s in range(seeds)]
  batch = jax.tree.map(lambda *a: jnp.stack(a), *[g for g, _ in made])
  starts = jax.tree.map(lambda *a: jnp.stack(a), *[p for _, p in made])
  keys = jax.random.split(jax.random.key(1), seeds)
  tx = mml.extragradient(optax.sgd(0.2))
  many = analysis.run_games(tx, batch, starts, 30, keys=keys, batch_size=2)
  assert many.distances["sum"].shape == (seeds, 31)
  np.testing.assert_array_equal(many.passes, 2 * np.arange(31))
  for s in range(seeds):  # vmap = one run per seed
    one = analysis.run_game(tx, made[s][0], made[s][1], 30, key=keys[s], batch_size=2)
    np.testing.assert_allclose(many.distances["sum"][s], one.distances["sum"], rtol=1e-12)
  # Minibatches differ between keys; a "minibatch" of all d components is the full batch.
  other = analysis.run_game(tx, made[0][0], made[0][1], 30, key=jax.random.key(5), batch_size=2)
  assert not np.allclose(other.distances["sum"], many.distances["sum"][0])
  full = analysis.run_game(tx, made[0][0], made[0][1], 30, key=keys[0], batch_size=d)
  exact = analysis.run_game(tx, made[0][0], made[0][1], 30)
  np.testing.assert_allclose(full.distances["sum"], exact.distances["sum"], rtol=1e-10)
  with pytest.raises(ValueError, match="key"):
    analysis.run_game(tx, made[0][0], made[0][1], 3, batch_size=2)


def test_plot_helpers_draw(x64):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 5)
  analysis.plot_eigenvalues(analysis.gda_eigenvalues(0.3, [1.0, 0.5]), axes[0], unit_circle=True)
  grid = analysis.spectral_radius_grid("gda", [0.1, 0.2, 0.3], [2, 5, 10, 20])
  analysis.plot_radius_heatmap(grid.step_sizes, grid.sync_periods, grid.per_step[:, :, 0], axes[1])
  analysis.plot_phase_portrait(
    {"gda": (np.linspace(0, 1, 5), np.ones(5))}, axes[2], field=lambda X, Y: (-Y, X)
  )
  analysis.plot_distance_curves({"a": (np.arange(4), np.ones((3, 4)))}, axes[3], spread="half_std")
  analysis.plot_radius_vs_step_size([0.1, 0.2], {"gda": [1.1, 1.2]}, axes[4])
  assert len(axes[0].collections) == 1 and len(axes[3].lines) == 1
  with pytest.raises(ValueError, match="spread"):
    analysis.plot_distance_curves({}, axes[3], spread="iqr")
  plt.close(fig)


def test_public_surface():
  assert set(analysis.__all__) == {n for n in dir(analysis) if not n.startswith("_")} - {
    "annotations"
  }
