"""minmaxlab.pbt vectorized mode: operators on hand-made values, end-to-end runs."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab
from minmaxlab import pbt

ADAM = optax.inject_hyperparams(optax.adam)
TARGETS = {"lr_min": ("min", "learning_rate"), "lr_max": ("max", "learning_rate")}
SPACE = {"lr_min": pbt.Continuous(low=1e-4, high=0.5), "lr_max": pbt.Continuous(low=1e-4, high=0.5)}


def test_truncation_size():
  assert pbt.truncation_size(8, 0.25) == 2
  assert pbt.truncation_size(10, 0.25) == 3
  assert pbt.truncation_size(3, 0.5) == 1
  assert pbt.truncation_size(5, 0.5) == 2
  for bad in (0.0, 0.6):
    with pytest.raises(ValueError, match="fraction"):
      pbt.truncation_size(8, bad)
  with pytest.raises(ValueError, match="at least 2"):
    pbt.truncation_size(1, 0.5)


def test_truncation_exploit_hand_made():
  fitness = jnp.array([5.0, 1.0, 7.0, 3.0, jnp.nan, 2.0, 6.0, 4.0])
  ready = jnp.ones(8, bool)
  seen = set()
  for i in range(40):
    source, copied = pbt.truncation_exploit(jax.random.key(i), fitness, ready, 0.25)
    # NaN (member 4) ranks last, then member 1: they are the bottom 2 of 8
    np.testing.assert_array_equal(copied, np.isin(np.arange(8), [1, 4]))
    assert set(np.asarray(source)[[1, 4]]) <= {2, 6}  # the top 2
    np.testing.assert_array_equal(
      np.asarray(source)[~np.asarray(copied)], np.arange(8)[~np.asarray(copied)]
    )
    seen |= set(np.asarray(source)[[1, 4]].tolist())
  assert seen == {2, 6}
  # a member that is not ready keeps itself
  source, copied = pbt.truncation_exploit(jax.random.key(0), fitness, ready.at[4].set(False), 0.25)
  assert not copied[4] and source[4] == 4 and copied[1]


def test_tournament_exploit_hand_made():
  P = 6
  fitness = jnp.arange(P, dtype=jnp.float32)
  counts = np.zeros(P)
  n = 400
  draw = jax.jit(jax.vmap(lambda k: pbt.tournament_exploit(k, fitness, jnp.ones(P, bool))))
  sources, copies = draw(jax.random.split(jax.random.key(0), n))
  for source, copied in zip(sources, copies):
    source, copied = np.asarray(source), np.asarray(copied)
    assert np.all(np.where(copied, fitness[source] > fitness, source == np.arange(P)))
    counts += copied
  # member i meets a uniformly drawn other member: copies with probability (P-1-i)/(P-1)
  np.testing.assert_allclose(counts / n, (P - 1 - np.arange(P)) / (P - 1), atol=0.08)
  assert counts[-1] == 0
  source, copied = pbt.tournament_exploit(jax.random.key(0), fitness, jnp.zeros(P, bool))
  assert not copied.any() and np.all(source == np.arange(P))


def test_explore_bounds_and_moves():
  space = {
    "lr": pbt.Continuous(low=1e-3, high=1.0),
    "w": pbt.Continuous(low=-1.0, high=1.0, log=False),
    "loss": pbt.Categorical(3),
  }
  P = 64
  h = pbt.sample_prior(jax.random.key(0), space, (P,))
  for name, dim in space.items():
    if isinstance(dim, pbt.Continuous):
      assert h[name].dtype == jnp.float32 and np.all((h[name] >= dim.low) & (h[name] <= dim.high))
  assert h["loss"].dtype == jnp.int32
  mask = jnp.arange(P) % 2 == 0
  # perturb only: values are x*0.8 or x*1.2 clipped; categorical moves by one, clipped
  new = pbt.explore(jax.random.key(1), h, mask, space, resample_probability=0.0)
  m = np.asarray(mask)
  for name in ("lr", "w"):
    lo, hi = space[name].low, space[name].high
    x, y = np.asarray(h[name]), np.asarray(new[name])
    np.testing.assert_array_equal(y[~m], x[~m])
    ok = np.isclose(y, np.clip(0.8 * x, lo, hi)) | np.isclose(y, np.clip(1.2 * x, lo, hi))
    assert ok[m].all()
  dl = np.asarray(new["loss"]) - np.asarray(h["loss"])
  assert np.all(dl[~m] == 0) and np.all(np.abs(dl[m]) <= 1)
  assert np.all((np.asarray(new["loss"]) >= 0) & (np.asarray(new["loss"]) <= 2))
  # repeated exploration never leaves the bounds
  x = h
  step = jax.jit(lambda k, x: pbt.explore(k, x, jnp.ones(P, bool), space, 0.25))
  for i in range(30):
    x = step(jax.random.key(10 + i), x)
    for name, dim in space.items():
      hi = dim.high if isinstance(dim, pbt.Continuous) else dim.num_choices - 1
      lo = dim.low if isinstance(dim, pbt.Continuous) else 0
      assert np.all((np.asarray(x[name]) >= lo) & (np.asarray(x[name]) <= hi)), name
  # resampling always: the values are fresh draws, not x*0.8 / x*1.2
  new = pbt.explore(jax.random.key(2), h, jnp.ones(P, bool), space, resample_probability=1.0)
  x, y = np.asarray(h["lr"]), np.asarray(new["lr"])
  assert not np.any(np.isclose(y, 0.8 * x) | np.isclose(y, 1.2 * x))


def test_explore_values_matches_bounds():
  rng = np.random.default_rng(0)
  space = {"lr": pbt.Continuous(low=1e-3, high=1.0), "loss": pbt.Categorical(2)}
  v = pbt.sample_values(rng, space)
  for _ in range(200):
    v = pbt.explore_values(rng, v, space)
    assert 1e-3 <= v["lr"] <= 1.0 and v["loss"] in (0, 1)
  v2 = pbt.explore_values(rng, {"lr": 0.5, "loss": 0, "other": 7}, space, resample_probability=0.0)
  assert v2["other"] == 7 and np.isclose(v2["lr"], 0.4) | np.isclose(v2["lr"], 0.6)


def _scheme():
  return minmaxlab.lookahead_minmax(
    minmaxlab.per_player(min=ADAM(1e-3), max=ADAM(1e-3)), sync_period=2
  )


def test_set_hyperparams_by_player():
  tx = _scheme()
  p = minmaxlab.Players(jnp.zeros(3), jnp.zeros(2))
  o = pbt.set_hyperparams(tx.init(p), TARGETS, {"lr_min": 0.1, "lr_max": 0.2})
  lrs = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(o):
    if isinstance(path[-1], jax.tree_util.DictKey) and path[-1].key == "learning_rate":
      lrs[jax.tree_util.keystr(path)] = float(leaf)
  assert sorted(lrs.values()) == pytest.approx([0.1, 0.2])
  assert minmaxlab.transforms.count_learning_rates(o) == (0, 1, 1)
  with pytest.raises(ValueError, match="shared by both players"):
    pbt.set_hyperparams(ADAM(1e-3).init(p), TARGETS, {"lr_min": 0.1, "lr_max": 0.2})
  with pytest.raises(ValueError, match="no inject_hyperparams leaf"):
    pbt.set_hyperparams(tx.init(p), {"m": ("min", "momentum")}, {"m": 0.5})
  with pytest.raises(ValueError, match="player"):
    pbt.set_hyperparams(tx.init(p), {"b": ("gen", "b1")}, {"b": 0.5})


def test_gather_copies_params_and_optimizer_state():
  tx = _scheme()
  P = 4
  params = minmaxlab.Players(jnp.arange(P * 3.0).reshape(P, 3), -jnp.arange(P * 2.0).reshape(P, 2))
  opt_state = jax.vmap(tx.init)(params)

  def step(p, o):  # two steps: moments and the lookahead slow weights differ per member
    for _ in range(3):
      u, o = tx.update(jax.tree.map(jnp.sin, p), o, p)
      p = optax.apply_updates(p, u)
    return p, o

  params, opt_state = jax.vmap(step)(params, opt_state)
  source = jnp.array([2, 1, 2, 0])
  gp, go = pbt.gather_members((params, opt_state), source)
  want = jax.tree.map(lambda a: np.asarray(a)[np.asarray(source)], (params, opt_state))
  chex.assert_trees_all_equal((gp, go), want)
  slow = minmaxlab.lookahead_slow_params(go)
  np.testing.assert_array_equal(slow.min[0], minmaxlab.lookahead_slow_params(opt_state).min[2])


def _quadratic_pbt(**kw):
  kw = {"exploit": "truncation", **kw}  # the cases below were recorded with truncation
  A = jax.random.normal(jax.random.key(3), (4, 4))
  game = minmaxlab.games.quadratic(A, 0.2, jnp.ones(4), -jnp.ones(4))
  tx = _scheme()
  vf = minmaxlab.vector_field(game.loss)
  traces = []

  def init_member(key, h):
    p = minmaxlab.Players(0.1 * jax.random.normal(key, (4,)), jnp.zeros(4))
    return p, tx.init(p)

  def train_step(key, p, o, h):
    traces.append(1)
    u, o = tx.update(vf(p), o, p)
    return optax.apply_updates(p, u), o, {"grad_norm": optax.tree.norm(vf(p))}

  def evaluate(key, p, o, h):
    return -jnp.log10(game.distance(p)["joint"] + 1e-12)

  return pbt.vectorized_pbt(
    init_member, train_step, evaluate, SPACE, steps=10, targets=TARGETS, **kw
  ), traces


def _run(p, rounds, seed=0):
  s = p.init(jax.random.key(seed), 8)
  history = []
  for r in range(rounds):
    s, m = p.step(jax.random.fold_in(jax.random.key(seed + 1), r), s)
    history.append(m)
  return s, history


def test_end_to_end_improves_deterministic_no_retrace():
  p, traces = _quadratic_pbt()
  s1, h1 = _run(p, 12)
  n_traces = len(traces)
  s2, h2 = _run(p, 12)
  assert len(traces) == n_traces  # second run: no retrace at all
  chex.assert_trees_all_equal((s1, h1), (s2, h2))
  # the same members without exploitation (burn-in never reached)
  q, _ = _quadratic_pbt(burn_in=10**9)
  s0, h0 = _run(q, 12)
  assert all(int(m["num_copied"]) == 0 for m in h0)
  assert sum(int(m["num_copied"]) for m in h1) >= 12 * 2  # the bottom 2 of 8 copy every round
  np.testing.assert_array_equal(h0[0]["fitness"], h1[0]["fitness"])  # same start
  assert float(jnp.mean(h1[-1]["fitness"])) > float(jnp.mean(h0[-1]["fitness"])) + 0.1
  assert float(h1[-1]["best_fitness"]) >= float(h0[-1]["best_fitness"])
  assert float(h1[-1]["best_fitness"]) > float(h1[0]["best_fitness"])
  # injected learning rates follow the hyperparameter arrays
  lr = [
    x
    for path, x in jax.tree_util.tree_leaves_with_path(s1.opt_state)
    if isinstance(path[-1], jax.tree_util.DictKey) and path[-1].key == "learning_rate"
  ]
  assert len(lr) == 2
  assert any(np.array_equal(np.asarray(x), np.asarray(s1.hparams["lr_min"])) for x in lr)
  for name, dim in SPACE.items():
    assert np.all((s1.hparams[name] >= dim.low) & (s1.hparams[name] <= dim.high))


def test_tournament_ready_and_burn_in():
  p, _ = _quadratic_pbt(exploit="tournament", ready=20, burn_in=30)
  s, h = _run(p, 5)
  copied = [np.asarray(m["copied"]) for m in h]
  assert not copied[0].any() and not copied[1].any()  # steps 10, 20 < burn_in 30
  assert copied[2].any()
  # a member that copied at round 3 (step 30) is not ready at step 40 (10 < 20 steps)
  assert not np.any(copied[2] & copied[3])
  for m in h:
    f, src, c = np.asarray(m["fitness"]), np.asarray(m["source"]), np.asarray(m["copied"])
    assert np.all(f[src[c]] > f[c])


def test_vectorized_pbt_validation():
  f = lambda *a: None
  with pytest.raises(ValueError, match="exploit"):
    pbt.vectorized_pbt(f, f, f, SPACE, steps=1, exploit="roulette")
  with pytest.raises(ValueError, match="target"):
    pbt.vectorized_pbt(f, f, f, SPACE, steps=1, targets={"nope": ("min", "learning_rate")})
  with pytest.raises(ValueError, match="steps"):
    pbt.vectorized_pbt(f, f, f, SPACE, steps=0)
  with pytest.raises(ValueError, match="low must be"):
    pbt.vectorized_pbt(f, f, f, {"a": pbt.Continuous(low=1.0, high=0.5)}, steps=1)


@pytest.mark.slow
def test_members_sharded_across_devices_give_the_one_device_numbers():
  devices = jax.devices()[:4]
  assert len(devices) == 4  # conftest: JAX_NUM_CPU_DEVICES=4 (fake CPU devices)
  one, _ = _quadratic_pbt()
  four, _ = _quadratic_pbt(devices=devices)
  s1, h1 = _run(one, 4)
  s4, h4 = _run(four, 4)
  for leaf in jax.tree.leaves((s4.params, s4.opt_state, s4.hparams, s4.fitness)):
    assert leaf.sharding.device_set == set(devices)  # members stay split over the 4 devices
    assert leaf.addressable_shards[0].data.shape[0] == 2  # 8 members / 4 devices
  for a, b in zip(h1, h4):
    for k in ("source", "copied", "best_member", "num_copied"):  # every discrete choice
      np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)
  chex.assert_trees_all_close((s1, h1), (s4, h4), rtol=1e-6, atol=1e-7)
  with pytest.raises(ValueError, match="multiple of the 4 devices"):
    four.init(jax.random.key(0), 6)
  with pytest.raises(ValueError, match="devices"):
    _quadratic_pbt(devices="remote")
