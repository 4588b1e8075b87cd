"""Composing game transforms with gradient processing: issue 13's table, rerun.

``f = 100 x.y`` at ``x = y = (1, 1)``, one ``minmaxlab.game_step`` of each
composition with ``clip_by_global_norm(1.0)`` and ``sgd(1.0)``. Prints, per
composition, the global norm of the update and the largest joint norm of a
field that reached the optimizer (the processing's bound holds on every field
used), or the error raised. Prints a markdown table (``--json`` for JSON).

  python -m experiments.bilinear.composition_table
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import optax

import minmaxlab as mml


def compositions() -> dict:
  clip = lambda: optax.clip_by_global_norm(1.0)  # noqa: E731
  sgd = lambda: optax.sgd(1.0)  # noqa: E731
  return {
    "optax.chain(clip, sgd) (GDA)": lambda o: optax.chain(clip(), o(sgd())),
    "optax.chain(clip, extragradient(sgd))": lambda o: optax.chain(
      clip(), mml.extragradient(o(sgd()))
    ),
    "extragradient(optax.chain(clip, sgd))": lambda o: mml.extragradient(
      optax.chain(clip(), o(sgd()))
    ),
    "with_field_processing(extragradient(sgd), clip)": lambda o: mml.with_field_processing(
      mml.extragradient(o(sgd())), clip()
    ),
    "optax.chain(clip, alternating(sgd))": lambda o: optax.chain(clip(), mml.alternating(o(sgd()))),
    "alternating(optax.chain(clip, sgd)) (per player)": lambda o: mml.alternating(
      optax.chain(clip(), o(sgd()))
    ),
    "with_field_processing(alternating(sgd), clip) (joint)": lambda o: mml.with_field_processing(
      mml.alternating(o(sgd())), clip()
    ),
  }


def observed(log: list):
  """Wrap an optimizer so every field reaching it is appended to ``log``."""

  def wrap(tx):
    def update_fn(updates, state, params=None, **extra):
      jax.debug.callback(lambda g: log.append(g), updates)
      return tx.update(updates, state, params, **extra)

    return optax.GradientTransformationExtraArgs(tx.init, update_fn)

  return wrap


def _norm(tree) -> float:
  return float(jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(tree))))


def run(name, make) -> dict:
  field = mml.vector_field(lambda p: 100.0 * p.min @ p.max)
  params = mml.Players(jnp.ones(2), jnp.ones(2))
  log: list = []
  tx = make(observed(log))
  try:
    new, _, _ = mml.game_step(tx, lambda p, i: field(p), params, tx.init(params))
  except ValueError as err:
    return {"composition": name, "error": str(err).split(" (")[0]}
  jax.effects_barrier()
  # Fields reaching the optimizer: Players (GDA, EG) or one player's half (alternating).
  return {
    "composition": name,
    "update_norm": round(_norm(jax.tree.map(jnp.subtract, new, params)), 3),
    "max_field_norm_used": round(max(_norm(g) for g in log), 3),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--json", action="store_true")
  args = parser.parse_args()
  rows = [run(name, make) for name, make in compositions().items()]
  if args.json:
    print(json.dumps(rows))
    return
  print("| composition | global norm of the update | largest field norm the optimizer saw |")
  print("|---|---|---|")
  for r in rows:
    if "error" in r:
      print(f"| `{r['composition']}` | ValueError: {r['error']} | |")
    else:
      print(f"| `{r['composition']}` | {r['update_norm']} | {r['max_field_norm_used']} |")


if __name__ == "__main__":
  main()
