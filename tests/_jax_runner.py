"""Run a minmaxlab transform on a game under ``lax.scan`` (shared by the tests)."""

import jax
import optax

import minmaxlab as mml


def trajectory(tx, loss, params, steps):
  """Iterates after each of ``steps`` full steps of ``tx`` on a deterministic game."""
  field = mml.vector_field(loss)
  tx = optax.with_extra_args_support(tx)

  def body(carry, _):
    p, s = carry
    u, s = tx.update(field(p), s, p, vector_field=lambda q, i: field(q))
    p = optax.apply_updates(p, u)
    return (p, s), p

  _, out = jax.jit(lambda p: jax.lax.scan(body, (p, tx.init(p)), None, length=steps))(params)
  return out
