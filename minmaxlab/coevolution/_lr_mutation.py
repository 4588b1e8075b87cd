"""Lipizzaner's learning-rate mutation before every update (``CoevolutionConfig.lr_mutation``
``"reference"`` and ``"reference_as_run"``), wrapped around the training steps.

Lipizzaner (``lipizzaner_gan_trainer.py``: ``mutate_hyperparams`` then ``update_genomes``,
called for the generators on every batch and for the discriminators on the batches where
they step) mutates each attacker's learning rate before its update,

    with probability p:  lr <- max(0, lr + alpha * N(-lr0 / 10, lr0)),

``lr0`` the initial learning rate (``default_adam_learning_rate``), ``alpha`` the config's
``alpha``; then it builds ``torch.optim.Adam(lr=lr)`` and, when the individual has a saved
optimizer state (from its previous update), ``load_state_dict(saved)``. PyTorch's
``Optimizer.state_dict()`` holds each param group's ``lr`` and ``load_state_dict`` puts the
saved groups in place of the new optimizer's, so the update uses the saved ``lr``: the one of
the individual's first update. Here the tracked learning rate is ``CoevolutionState.
learning_rates`` and the one an update uses is the ``learning_rate`` injected into the
individual's scheme state; ``"reference"`` writes the mutated value there before every
update, ``"reference_as_run"`` only before the individual's first (its injected ``count`` is
0: a fresh optimizer, as Lipizzaner's ``optimizer_state is None``).

Random numbers: the mutation before a pair's update on a batch draws from
``fold_in(fold_in(pair key, 0), 4)`` (generator) or ``... 5)`` (discriminator), the pair key
being ``PairDraws.key`` of ``minmaxlab.coevolution._training``; from that key ``(k_hit,
k_step) = split(key)``, ``hit = uniform(k_hit) < p``, ``N(0, 1) = normal(k_step)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.games import Players
from minmaxlab.transforms import player_labels, set_hyperparams

SALTS = {"min": 4, "max": 5}  # fold_in(fold_in(pair key, 0), salt): see the module docstring


class PerUpdate(NamedTuple):
  """The per-update mutation a training phase applies.

  Attributes:
    learning_rates: ``Players`` of the tracked learning rates ``[P]`` (as the phase starts).
    probability: ``p`` (``CoevolutionParams.mutation_probability``).
    scale: ``alpha`` (``CoevolutionParams.mutation_scale``).
    lr0: the initial learning rate (``CoevolutionConfig.learning_rate``, static).
    as_run: static; True for ``"reference_as_run"`` (the update uses the restored value).
  """

  learning_rates: Players
  probability: Any
  scale: Any
  lr0: float
  as_run: bool


def reference_mutation(key: jax.Array, lr: jax.Array, probability, scale, lr0: float):
  """One mutation: with probability ``probability``, ``max(0, lr + scale * N(-lr0/10, lr0))``
  (``(k_hit, k_step) = split(key)``: ``uniform(k_hit) < probability`` hits)."""
  k_hit, k_step = jax.random.split(key)
  hit = jax.random.uniform(k_hit, jnp.shape(lr)) < probability
  delta = -lr0 / 10 + lr0 * jax.random.normal(k_step, jnp.shape(lr), jnp.result_type(lr))
  return jnp.where(hit, jnp.maximum(lr + scale * delta, 0.0), lr)


def injected(opt_state: Any, side: str) -> tuple[jax.Array, jax.Array]:
  """``(count, learning_rate)`` of ``side``'s (``"min"``/``"max"``) first injected optimizer
  in a game-transform state (``optax.inject_hyperparams``: ``count`` its updates so far)."""
  want = 1 if side == "min" else 2  # minmaxlab.transforms' MIN and MAX labels
  labels = jax.tree.leaves(player_labels(opt_state))
  leaves = jax.tree_util.tree_leaves_with_path(opt_state)
  by_path = {path: leaf for path, leaf in leaves}
  for (path, leaf), label in zip(leaves, labels, strict=True):
    last = path[-1] if path else None
    if label == want and isinstance(last, jax.tree_util.DictKey) and last.key == "learning_rate":
      count = by_path.get(path[:-2] + (jax.tree_util.GetAttrKey("count"),))
      if count is None:
        raise ValueError(f"the {side} player's injected learning rate has no update count")
      return count, leaf
  raise ValueError(f"no injected learning rate for the {side} player")


def before_update(opt, lr: Players, key: jax.Array, sides: tuple, m: PerUpdate):
  """One pair before its update on a batch where ``sides`` step: each side's tracked
  learning rate mutated and the one its update uses written into ``opt``.
  Returns ``(opt, lr)``."""
  kk = jax.random.fold_in(key, 0)
  for side in sides:
    tracked = reference_mutation(
      jax.random.fold_in(kk, SALTS[side]), getattr(lr, side), m.probability, m.scale, m.lr0
    )
    used = tracked
    if m.as_run:  # load_state_dict restores the lr saved at the first update
      count, stored = injected(opt, side)
      used = jnp.where(count == 0, tracked, stored)
    opt = set_hyperparams(opt, {"lr": (side, "learning_rate")}, {"lr": used})
    lr = lr._replace(**{side: tracked})
  return opt, lr


def wrap(step: Callable, sides: tuple, m: PerUpdate, batched: Callable) -> Callable:
  """``step((params, opt), x)`` of the training loop as ``step(((params, opt), lr), x)``:
  the mutation of :func:`before_update` first (``batched`` over the population, the pair keys
  ``x.pairs.key``)."""

  def wrapped(carry, x):
    (p, o), lr = carry
    o, lr = batched(lambda o, lr, k: before_update(o, lr, k, sides, m))(o, lr, x.pairs.key)
    (p, o), out = step((p, o), x)
    return ((p, o), lr), out

  return wrapped
