"""Helpers shared by the game transforms: validation, tree arithmetic, player split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games._players import Players, check_players

# ``vector_field(params, i) -> Players``: the descent field at ``params``; ``i``
# (a Python int) numbers the evaluations made inside one ``update`` call
# (0 = the field passed as ``updates``), so a caller can give each evaluation
# its own minibatch (the optax ``sam(opaque_mode=True)`` ``grad_fn`` precedent).
VectorFieldFn = Callable[[Players, int], Players]


def check_in(name: str, value: Any, ok: Callable[[Any], bool], expected: str) -> None:
  """Raise ``ValueError`` naming ``value`` when a concrete value fails ``ok``.

  Traced values (e.g. hyperparameters injected by ``optax.inject_hyperparams``
  under ``jit``) cannot be checked and pass through.
  """
  if isinstance(value, jax.core.Tracer):
    return
  try:
    good = not isinstance(value, (str, bytes)) and bool(ok(value))
  except (TypeError, ValueError):
    good = False
  if not good:
    raise ValueError(f"{name} must be {expected}, got {value!r}")


def check_int_at_least(name: str, value: Any, low: int) -> None:
  def ok(v):
    if isinstance(v, (str, bytes, bool)):
      return False
    return float(v) == int(v) and int(v) >= low
  check_in(name, value, ok, f"an integer >= {low}")


def require_params(params: Any, scheme: str) -> Players:
  if params is None:
    raise ValueError(f"{scheme}.update needs params (the current Players), got None")
  return check_players(params)


def require_vector_field(vector_field: Any, scheme: str) -> VectorFieldFn:
  if vector_field is None:
    raise ValueError(
        f"{scheme} evaluates the game at new points: call"
        " update(updates, state, params, vector_field=fn) with"
        " fn(params, i) -> Players (the descent field); got vector_field=None"
    )
  if not callable(vector_field):
    raise ValueError(f"vector_field must be callable, got {vector_field!r}")
  return vector_field


def check_updates(updates: Any, scheme: str) -> Players:
  return check_players(updates, f"{scheme}: updates (the descent field)")


def tree_add(a, b):
  return jax.tree.map(jnp.add, a, b)


def tree_sub(a, b):
  return jax.tree.map(jnp.subtract, a, b)


def tree_where(cond, a, b):
  return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)


def zeros_count() -> jax.Array:
  return jnp.zeros([], jnp.int32)


class PlayerTransforms(NamedTuple):
  """The transforms of the two players (see :func:`per_player`)."""

  min: optax.GradientTransformationExtraArgs
  max: optax.GradientTransformationExtraArgs


class PerPlayerTransformation(optax.GradientTransformationExtraArgs):
  """A transform over :class:`Players` that knows each player's own transform,
  so schemes that step the players at different times (``alternating``) can
  step one player alone."""

  players: PlayerTransforms


def player_transforms(inner: optax.GradientTransformation) -> PlayerTransforms:
  """Each player's transform: the parts of a :func:`per_player`, or ``inner``
  for both (each player then keeps its own state of it)."""
  if not isinstance(inner, optax.GradientTransformation):
    raise ValueError(
        f"inner must be an optax.GradientTransformation, got {type(inner).__name__}"
    )
  parts = getattr(inner, "players", None)
  if isinstance(parts, PlayerTransforms):
    return parts
  inner = optax.with_extra_args_support(inner)
  return PlayerTransforms(inner, inner)


def as_transform(inner: Any, name: str = "inner") -> optax.GradientTransformationExtraArgs:
  if not isinstance(inner, optax.GradientTransformation):
    raise ValueError(
        f"{name} must be an optax.GradientTransformation, got {type(inner).__name__}"
    )
  return optax.with_extra_args_support(inner)
