"""Optimizer states by player: label, split and merge them, and write hyperparameters into
them (``inject_hyperparams`` states)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

SHARED, MIN, MAX = 0, 1, 2


def _label(path) -> int:
  for key in reversed(path):
    if isinstance(key, jax.tree_util.GetAttrKey) and key.name in ("min", "max"):
      return MIN if key.name == "min" else MAX
  return SHARED


def player_labels(tree: Any) -> Any:
  """Which player each leaf of a game-transform state belongs to.

  Every minmaxlab transform keeps a player's quantities under a ``.min`` /
  ``.max`` attribute (``Players``, ``PerPlayerState``, the Adam moments of a
  ``Players`` tree, ...); leaves under neither (step counters, sync flags) are
  shared. This lets a population select generators and discriminators
  independently while each keeps its own optimizer state.
  """
  return jax.tree_util.tree_map_with_path(lambda p, _: _label(p), tree)


def merge_by_player(labels: Any, min_tree: Any, max_tree: Any, shared_tree: Any) -> Any:
  """Leaves of ``min_tree`` where the label is MIN, of ``max_tree`` for MAX,
  of ``shared_tree`` otherwise."""
  pick = lambda l, a, b, c: a if l == MIN else (b if l == MAX else c)
  return jax.tree.map(pick, labels, min_tree, max_tree, shared_tree)


def _is_learning_rate(path) -> bool:
  last = path[-1] if path else None
  return isinstance(last, jax.tree_util.DictKey) and last.key == "learning_rate"


def count_learning_rates(opt_state: Any) -> tuple[int, int, int]:
  """How many injected ``learning_rate`` leaves each of (shared, min, max) holds."""
  counts = [0, 0, 0]
  for path, _ in jax.tree_util.tree_leaves_with_path(opt_state):
    if _is_learning_rate(path):
      counts[_label(path)] += 1
  return tuple(counts)


_PLAYERS = {"min": MIN, "max": MAX}


def set_hyperparams(
  opt_state: Any, targets: Mapping[str, tuple[str, str]], hparams: Mapping[str, jax.Array]
) -> Any:
  """Write hyperparameter values into the ``inject_hyperparams`` states of a
  game-transform state.

  The path-based labelling of :func:`player_labels` tells which player an
  injected leaf belongs to, so
  ``targets={"lr_d": ("max", "learning_rate"), "b1_g": ("min", "b1")}`` writes
  ``hparams["lr_d"]`` into every ``learning_rate`` of the max player's
  injected optimizers (inside ``per_player``, ``alternating``,
  ``lookahead_minmax``, ...). Pure and traceable: vmap it over a population
  (``minmaxlab.pbt`` and ``minmaxlab.coevolution`` do).

  Args:
    opt_state: a game-transform state whose optimizers are wrapped in
      ``optax.inject_hyperparams``.
    targets: name -> ``(player, injected hyperparameter)``, player ``"min"``
      or ``"max"``.
    hparams: name -> value (a scalar, cast to the leaf's dtype).

  Returns:
    ``opt_state`` with the values written in.

  Raises:
    ValueError: a target names an unknown player, no injected leaf matches it,
      or a matching leaf is shared by both players (build the scheme with
      ``per_player`` so each player has its own optimizer).
  """
  wanted = {}
  for hp, (player, leaf_name) in targets.items():
    if player not in _PLAYERS:
      raise ValueError(f"{hp}: player must be 'min' or 'max', got {player!r}")
    wanted[(_PLAYERS[player], leaf_name)] = hp
  labels = player_labels(opt_state)
  found = set()

  def visit(path, label, leaf):
    if not (path and isinstance(path[-1], jax.tree_util.DictKey)):
      return leaf
    name = path[-1].key
    if label == SHARED and any(n == name for _, n in wanted):
      raise ValueError(
        f"the injected {name!r} is shared by both players; build the scheme with"
        " minmaxlab.per_player(min=..., max=...)"
      )
    hp = wanted.get((label, name))
    if hp is None:
      return leaf
    found.add(hp)
    return jnp.asarray(hparams[hp], jnp.result_type(leaf)).reshape(jnp.shape(leaf))

  out = jax.tree_util.tree_map_with_path(visit, labels, opt_state)
  missing = set(targets) - found
  if missing:
    raise ValueError(
      f"no inject_hyperparams leaf for {sorted(missing)}; wrap the optimizers with"
      " optax.inject_hyperparams"
    )
  return out


_LEARNING_RATES = {"lr_min": ("min", "learning_rate"), "lr_max": ("max", "learning_rate")}


def set_learning_rates(opt_state: Any, lr_min: jax.Array, lr_max: jax.Array) -> Any:
  """Write the players' learning rates into every injected ``learning_rate``
  (``optax.inject_hyperparams``) of a game-transform state: :func:`set_hyperparams`
  with ``targets={"lr_min": ("min", "learning_rate"), "lr_max": ("max", "learning_rate")}``."""
  return set_hyperparams(opt_state, _LEARNING_RATES, {"lr_min": lr_min, "lr_max": lr_max})
