"""Split and merge optimizer states by player, and write learning rates into them."""

from __future__ import annotations

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


def set_learning_rates(opt_state: Any, lr_min: jax.Array, lr_max: jax.Array) -> Any:
  """Write the players' learning rates into every injected ``learning_rate``
  (``optax.inject_hyperparams``) of a game-transform state."""

  def visit(path, leaf):
    if not _is_learning_rate(path):
      return leaf
    label = _label(path)
    if label == SHARED:
      raise ValueError(
        "a learning_rate is shared by both players; build the scheme with"
        " minmaxlab.per_player(min=..., max=...) so each player has its own"
      )
    return jnp.asarray(lr_min if label == MIN else lr_max, leaf.dtype)

  return jax.tree_util.tree_map_with_path(visit, opt_state)
