"""A scheme's transform is optax's pair and nothing more: wrapped in ``optax.chain``,
``transforms.ema`` or ``optax.inject_hyperparams`` it gives ``game_step`` the same params and
values as bare, bit for bit (what a scheme needs it finds in its state, by type: a
``per_player`` inner by its ``PerPlayerState``, Lookahead's exact sync by its
``LookaheadMinmaxState``)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml

GAME = mml.games.random_bilinear(jax.random.key(5), 3)
P = mml.Players(jnp.linspace(-1.0, 1.0, 3), jnp.linspace(0.5, -0.7, 3))


def _loss(p, i):
  scale = 1.0 + 0.25 * i
  return scale * GAME.loss(p) + 0.05 * (p.min @ p.min) - 0.05 * (p.max @ p.max)


_VAF = mml.value_and_vector_field(_loss)


def _ttur():
  return mml.per_player(min=optax.adam(0.05), max=optax.sgd(0.2, momentum=0.5))


# Each scheme as (factory, keyword arguments): `inject_hyperparams(factory)(**kwargs)` wraps it.
SCHEMES = {
  "gda": (optax.sgd, dict(learning_rate=0.1, momentum=0.5)),
  "alternating": (mml.alternating, dict(inner=optax.adam(0.1), max_steps=2)),
  "alternating_per_player": (mml.alternating, dict(inner=_ttur(), max_steps=2)),
  "extragradient": (mml.extragradient, dict(inner=_ttur())),
  "optimistic": (mml.optimistic, dict(inner=optax.adam(0.1))),
  "unrolled": (mml.unrolled, dict(inner=_ttur(), unroll_steps=2)),
  "lookahead_alternating": (
    mml.lookahead_minmax,
    dict(inner=mml.alternating(_ttur()), sync_period=2, slow_step_size=0.5),
  ),
  "nested_lookahead": (
    mml.nested_lookahead_minmax,
    dict(inner=mml.extragradient(optax.sgd(0.1)), sync_periods=(2, 4)),
  ),
}


def _injected(make, kw):
  """``inject_hyperparams(make)(**kw)``, every number static: an injected number is an
  argument of the step, not a constant, and rounds differently whatever the transform
  (``inject_hyperparams(optax.adam)`` against ``optax.adam`` too)."""
  static = tuple(n for n, v in kw.items() if not isinstance(v, optax.GradientTransformation))
  return optax.inject_hyperparams(make, static_args=static)(**kw)


WRAPPERS = {
  "chain": lambda make, kw: optax.chain(make(**kw), optax.identity()),
  "ema": lambda make, kw: mml.transforms.ema(make(**kw), 0.9),
  "inject_hyperparams": _injected,
}


def _run(tx, steps=5):
  extra = {"loss_fn": _loss} if _has_unrolled(tx) else {}

  @jax.jit
  def step(p, s):
    return mml.game_step(tx, lambda q, i: _VAF(q, i), p, s, **extra)

  p, s, out = P, tx.init(P), []
  for _ in range(steps):
    p, s, value = step(p, s)
    out.append((p, value))
  return out


def _has_unrolled(tx):
  kind = mml.transforms.UnrolledState
  leaves = jax.tree.leaves(tx.init(P), is_leaf=lambda x: isinstance(x, kind))
  return any(isinstance(x, kind) for x in leaves)


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_wrapping_never_changes_game_step(scheme, wrapper):
  make, kw = SCHEMES[scheme]
  bare = _run(make(**kw))
  wrapped = _run(WRAPPERS[wrapper](make, kw))
  chex.assert_trees_all_equal(bare, wrapped)
  # The run moved the params (so the comparison is not of two untouched starts).
  assert not np.allclose(np.concatenate(bare[-1][0]), np.concatenate(P))


def test_a_lookahead_sync_lands_on_the_slow_weights_when_wrapped():
  """At the sync step the wrapped Lookahead's params are its slow weights exactly."""
  make, kw = SCHEMES["lookahead_alternating"]
  tx = mml.transforms.ema(make(**kw), 0.9)
  p, s = P, tx.init(P)
  for _ in range(2):
    p, s, _ = jax.jit(lambda p, s: mml.game_step(tx, _VAF, p, s))(p, s)
  slow = mml.lookahead_slow_params(s)
  chex.assert_trees_all_equal(p, slow)


def test_per_player_is_optax_pair():
  tx = mml.per_player(min=optax.sgd(0.1), max=optax.adam(0.2))
  assert type(tx) is optax.GradientTransformationExtraArgs
  assert type(mml.lookahead_minmax(tx)) is optax.GradientTransformationExtraArgs
