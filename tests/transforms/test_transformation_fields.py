"""What a scheme's transform carries beyond optax's pair: Lookahead's ``update_and_apply``
and ``per_player``'s ``players``. ``_replace``, pytree maps and copies keep it (attributes set
on the tuple after construction were dropped by both), and the transform stays optax's pair:
it unpacks into ``init, update``, so ``optax.chain`` takes it alone (as a third tuple field it
did not: ``zip(*transforms)``)."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import optax

import minmaxlab as mml
from minmaxlab.transforms import LookaheadTransformation, PerPlayerTransformation


def _params():
  return mml.Players(jnp.ones(2), jnp.zeros(2))


def test_lookahead_replace_keeps_update_and_apply():
  tx = mml.lookahead_minmax(optax.sgd(0.1), 2, 0.5)
  init, update = tx  # optax's pair
  assert tx.carried == "update_and_apply"
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
  init, update = tx
  assert tx.carried == "players"
  replaced = tx._replace(update=tx.update)
  assert isinstance(replaced, PerPlayerTransformation)
  assert replaced.players is tx.players
  # alternating steps each player with its own transform: it reads `players`.
  p = _params()
  alt = mml.alternating(replaced)
  field = mml.Players(jnp.ones(2), -jnp.ones(2))
  u, _ = alt.update(field, alt.init(p), p, vector_field=lambda q, i: field)
  assert u.min.shape == (2,)


def test_carrying_transforms_chain_and_copy_like_optax_pairs():
  p = _params()
  field = mml.Players(jnp.ones(2), -jnp.ones(2))
  for tx in (
    mml.lookahead_minmax(optax.sgd(0.1), 2, 0.5),
    mml.per_player(min=optax.sgd(0.1), max=optax.sgd(0.2)),
  ):
    alone = optax.chain(tx)  # zip(*transforms) needs two fields
    u_chain, _ = alone.update(field, alone.init(p), p)
    u_bare, _ = tx.update(field, tx.init(p), p)
    assert jax.tree.all(jax.tree.map(jnp.array_equal, u_chain, u_bare))
    twice = optax.chain(tx, tx)
    twice.update(field, twice.init(p), p)
    for clone in (copy.copy(tx), copy.deepcopy(tx)):
      assert type(clone) is type(tx) and getattr(clone, tx.carried) == getattr(tx, tx.carried)
    assert len(tx) == 2 and tuple(tx) == (tx.init, tx.update)
