"""Trajectories of the real transforms against an independent numpy implementation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from tests import _numpy_reference as ref
from tests._jax_runner import trajectory

STEPS = 120


def _game(seed=0, n=6, m=4):
  rng = np.random.default_rng(seed)
  A = rng.normal(size=(n, m)) / np.sqrt(n)
  b, c = rng.normal(size=n) / 3, rng.normal(size=m) / 3
  x0, y0 = rng.normal(size=n), rng.normal(size=m)
  return A, b, c, x0, y0


def _jax_tx(method, inner, *, max_steps=1, la=None, shared=False):
  base = {
    "gda": lambda: inner,
    "alt": lambda: mml.alternating(inner, max_steps=max_steps),
    "eg": lambda: mml.extragradient(inner, shared_state=shared),
    "ogda": lambda: mml.optimistic(inner),
  }[method]()
  if la is None:
    return base
  k, alpha, lazy = la
  return mml.lookahead_minmax(base, k, alpha, slow_init="lazy" if lazy else "params")


INNERS = {
  "sgd": (lambda: optax.sgd(0.2), lambda: ref.SGD(0.2)),
  "adam": (lambda: optax.adam(0.05), lambda: ref.Adam(0.05)),
  "adam_b1": (lambda: optax.adam(0.02, b1=-0.3), lambda: ref.Adam(0.02, b1=-0.3)),
}

CASES = [
  dict(method="gda"),
  dict(method="alt"),
  dict(method="alt", max_steps=3),
  dict(method="eg"),
  dict(method="eg", shared=True),
  dict(method="ogda"),
  dict(method="gda", la=(5, 0.5, False)),
  dict(method="alt", la=(6, 0.4, False)),
  dict(method="alt", max_steps=3, la=(4, 0.5, True)),
  dict(method="eg", la=(5, 0.5, False)),
  dict(method="eg", shared=True, la=(7, 0.3, True)),
  dict(method="ogda", la=(5, 0.5, False)),
]


def _name(case):
  return "-".join(f"{k}={v}" for k, v in case.items())


@pytest.mark.parametrize("inner", list(INNERS))
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_trajectory_matches_numpy(x64, inner, case):
  A, b, c, x0, y0 = _game()
  make_jax, make_np = INNERS[inner]
  tx = _jax_tx(
    case["method"],
    make_jax(),
    max_steps=case.get("max_steps", 1),
    la=case.get("la"),
    shared=case.get("shared", False),
  )
  game = mml.games.bilinear(jnp.asarray(A), jnp.asarray(b), jnp.asarray(c))
  params = mml.Players(jnp.asarray(x0), jnp.asarray(y0))
  got = trajectory(tx, game.loss, params, STEPS)
  want = ref.run(
    case["method"],
    ref.Bilinear(A, b, c),
    make_np(),
    x0,
    y0,
    STEPS,
    max_steps=case.get("max_steps", 1),
    la=case.get("la"),
    shared=case.get("shared", False),
  )
  want_x = np.stack([w[0] for w in want])
  want_y = np.stack([w[1] for w in want])
  assert got.min.dtype == jnp.float64
  scale = max(1.0, np.abs(want_x).max(), np.abs(want_y).max())
  np.testing.assert_allclose(got.min, want_x, rtol=1e-8, atol=1e-10 * scale)
  np.testing.assert_allclose(got.max, want_y, rtol=1e-8, atol=1e-10 * scale)


def test_per_player_matches_numpy(x64):
  """Different optimizers per player (alternating with TTUR-style inners)."""
  A, b, c, x0, y0 = _game(seed=1)
  tx = mml.alternating(mml.per_player(min=optax.sgd(0.1), max=optax.adam(0.03)), max_steps=2)
  game = mml.games.bilinear(jnp.asarray(A), jnp.asarray(b), jnp.asarray(c))
  got = trajectory(tx, game.loss, mml.Players(jnp.asarray(x0), jnp.asarray(y0)), 50)
  g = ref.Bilinear(A, b, c)
  gx_opt, gy_opt = ref.SGD(0.1), ref.Adam(0.03)
  x, y, sx, sy = x0.copy(), y0.copy(), None, gy_opt.init(y0.size)
  for t in range(50):
    for _ in range(2):
      uy, sy = gy_opt.step(g.gy(x, y), sy)
      y = y + uy
    ux, sx = gx_opt.step(g.gx(x, y), sx)
    x = x + ux
    np.testing.assert_allclose(got.min[t], x, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(got.max[t], y, rtol=1e-8, atol=1e-12)


def test_nested_lookahead_matches_numpy(x64):
  """Two-level lookahead: every K steps the super-slow weights move and reset all."""
  A, b, c, x0, y0 = _game(seed=2)
  (k, a), (K, aa) = (3, 0.5), (12, 0.4)
  tx = mml.nested_lookahead_minmax(optax.sgd(0.3), (k, K), (a, aa))
  game = mml.games.bilinear(jnp.asarray(A), jnp.asarray(b), jnp.asarray(c))
  got = trajectory(tx, game.loss, mml.Players(jnp.asarray(x0), jnp.asarray(y0)), 60)
  g = ref.Bilinear(A, b, c)
  z = np.concatenate([x0, y0])
  slow, super_slow = z.copy(), z.copy()
  n = x0.size
  for t in range(1, 61):
    x, y = z[:n], z[n:]
    z = z - 0.3 * np.concatenate([g.gx(x, y), g.gy(x, y)])
    if t % k == 0:
      slow = slow + a * (z - slow)
      z = slow.copy()
    if t % K == 0:
      super_slow = super_slow + aa * (z - super_slow)
      z, slow = super_slow.copy(), super_slow.copy()
    np.testing.assert_allclose(got.min[t - 1], z[:n], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(got.max[t - 1], z[n:], rtol=1e-8, atol=1e-12)


def test_reset_state_reinitialises_inner(x64):
  A, b, c, x0, y0 = _game(seed=3)
  tx = mml.lookahead_minmax(optax.adam(0.05), 4, 0.5, reset_state=True)
  game = mml.games.bilinear(jnp.asarray(A), jnp.asarray(b), jnp.asarray(c))
  got = trajectory(tx, game.loss, mml.Players(jnp.asarray(x0), jnp.asarray(y0)), 40)
  g, opt = ref.Bilinear(A, b, c), ref.Adam(0.05)
  x, y = x0.copy(), y0.copy()
  slow = (x.copy(), y.copy())
  sx, sy = opt.init(x.size), opt.init(y.size)
  for t in range(1, 41):
    gx, gy = g.gx(x, y), g.gy(x, y)
    ux, sx = opt.step(gx, sx)
    uy, sy = opt.step(gy, sy)
    x, y = x + ux, y + uy
    if t % 4 == 0:
      slow = (slow[0] + 0.5 * (x - slow[0]), slow[1] + 0.5 * (y - slow[1]))
      x, y = slow[0].copy(), slow[1].copy()
      sx, sy = opt.init(x.size), opt.init(y.size)
    np.testing.assert_allclose(got.min[t - 1], x, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(got.max[t - 1], y, rtol=1e-8, atol=1e-12)


def test_averages_match_numpy(x64):
  A, b, c, x0, y0 = _game(seed=4)
  game = mml.games.bilinear(jnp.asarray(A), jnp.asarray(b), jnp.asarray(c))
  params = mml.Players(jnp.asarray(x0), jnp.asarray(y0))
  field = mml.vector_field(game.loss)
  la = lambda: mml.lookahead_minmax(optax.sgd(0.2), 5, 0.5)
  txs = {
    "ema": mml.transforms.ema(la(), decay=0.9),
    "uniform": mml.transforms.uniform(la(), start_step=7),
    "slow": mml.transforms.slow_ema(la(), decay=0.8),
  }
  traj = ref.run("gda", ref.Bilinear(A, b, c), ref.SGD(0.2), x0, y0, 33, la=(5, 0.5, False))
  zs = [np.concatenate([x0, y0])] + [np.concatenate(t) for t in traj]
  ema = zs[0].copy()
  for z in zs[1:]:
    ema = 0.9 * ema + 0.1 * z
  uni = np.mean(zs[7:], axis=0)
  slow = zs[0].copy()
  for t in range(5, 34, 5):
    slow = 0.8 * slow + 0.2 * zs[t]
  want = {"ema": ema, "uniform": uni, "slow": slow}
  for name, tx in txs.items():
    p, s = params, tx.init(params)
    step = jax.jit(
      lambda p, s, tx=tx: (lambda u_s: (optax.apply_updates(p, u_s[0]), u_s[1]))(
        tx.update(field(p), s, p)
      )
    )
    for _ in range(33):
      p, s = step(p, s)
    avg = mml.transforms.averaged_params(s)
    np.testing.assert_allclose(np.concatenate(avg), want[name], rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(np.concatenate(p), zs[-1], rtol=1e-10)
