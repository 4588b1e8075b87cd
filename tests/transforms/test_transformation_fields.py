"""The methods a scheme's transform carries beyond optax's pair are NamedTuple fields:
Lookahead's ``update_and_apply`` and ``per_player``'s ``players``. ``_replace`` and pytree maps
keep them (attributes set on the tuple after construction were dropped by both)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

import minmaxlab as mml
from minmaxlab.transforms import LookaheadTransformation, PerPlayerTransformation


def _params():
  return mml.Players(jnp.ones(2), jnp.zeros(2))


def test_lookahead_replace_keeps_update_and_apply():
  tx = mml.lookahead_minmax(optax.sgd(0.1), 2, 0.5)
  assert tx._fields == ("init", "update", "update_and_apply")
  assert isinstance(tx, optax.GradientTransformationExtraArgs)
  wrapped = tx._replace(init=lambda p: tx.init(p))
  assert isinstance(wrapped, LookaheadTransformation)
  assert wrapped.update_and_apply is tx.update_and_apply
  mapped = jax.tree.map(lambda f: f, tx)
  assert mapped.update_and_apply is tx.update_and_apply
  p = _params()
  field = mml.Players(jnp.ones(2), -jnp.ones(2))
  new, state = wrapped.update_and_apply(field, wrapped.init(p), p)
  assert int(state.count) == 1 and new.min.shape == (2,)


def test_per_player_replace_keeps_players():
  tx = mml.per_player(min=optax.sgd(0.1), max=optax.adam(0.2))
  assert tx._fields == ("init", "update", "players")
  replaced = tx._replace(update=tx.update)
  assert isinstance(replaced, PerPlayerTransformation)
  assert replaced.players is tx.players
  # alternating steps each player with its own transform: it reads `players`.
  p = _params()
  alt = mml.alternating(replaced)
  field = mml.Players(jnp.ones(2), -jnp.ones(2))
  u, _ = alt.update(field, alt.init(p), p, vector_field=lambda q, i: field)
  assert u.min.shape == (2,)
