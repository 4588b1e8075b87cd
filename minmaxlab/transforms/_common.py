"""Helpers shared by the game transforms: validation, tree arithmetic, player split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players, check_players

# ``vector_field(params, i) -> Players``: the descent field at ``params``; ``i``
# (a Python int) numbers the evaluations made inside one ``update`` call
# (0 = the field passed as ``updates``), so a caller can give each evaluation
# its own minibatch (the optax ``sam(opaque_mode=True)`` ``grad_fn`` precedent).
VectorFieldFn = Callable[[Players, int], Players]

# What to do instead of the compositions that are refused (see ``check_first_field``).
_FIX = (
  "put the processing inside the scheme, e.g. extragradient(optax.chain("
  "optax.clip_by_global_norm(1.0), optax.adam(1e-3))), or wrap the whole"
  " transform: minmaxlab.with_field_processing(tx, optax.clip_by_global_norm(1.0))"
)


class FieldFn:
  """The ``vector_field=`` argument a game scheme works with: the caller's
  ``fn(params, i)``, each result checked against the params' structure, plus
  (when the caller evaluated it itself) the field at the step's params.

  ``first`` is the exact object the caller passed as ``updates``: a scheme that
  fetches more fields compares it by identity with the ``updates`` it receives,
  so a transform chained IN FRONT of the scheme (whose processing the fetched
  fields would skip) is detected at trace time (see ``check_first_field``).
  """

  def __init__(self, fn: Callable[[Any, int], Any], first: Any = None, name: str = ""):
    self.fn, self.first, self.name = fn, first, name

  def __call__(self, params: Any, i: int) -> Players:
    return check_field(self.fn(params, i), params, f"vector_field(params, {i})")


def check_field(field: Any, params: Any, what: str) -> Players:
  """Raise ``ValueError`` unless ``field`` is a ``Players`` tree shaped like ``params``."""
  if not isinstance(field, Players):
    hint = ""
    if isinstance(field, (tuple, list)) and len(field) == 2 and isinstance(field[1], Players):
      hint = (
        "; it looks like (value, field) from value_and_vector_field: return only"
        " the field, e.g. lambda p, i: value_and_field(p, batches[i])[1]"
      )
    raise ValueError(
      f"{what} must return the descent field as minmaxlab.Players(min=..., max=...),"
      f" got {type(field).__name__}{hint}"
    )
  f_def, p_def = jax.tree.structure(field), jax.tree.structure(params)
  if f_def != p_def:
    raise ValueError(
      f"{what} returned a field whose tree differs from the params': field {f_def}, params {p_def}"
    )
  paths = jax.tree_util.tree_leaves_with_path(params)
  for (path, p_leaf), f_leaf in zip(paths, jax.tree.leaves(field)):
    if jnp.shape(f_leaf) != jnp.shape(p_leaf):
      raise ValueError(
        f"{what} returned a field that does not match the params at"
        f" {jax.tree_util.keystr(path)}: field shape {jnp.shape(f_leaf)}, params shape"
        f" {jnp.shape(p_leaf)}"
      )
  return field


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


def require_vector_field(vector_field: Any, scheme: str) -> FieldFn:
  """The caller's ``vector_field`` as a checked :class:`FieldFn`."""
  if vector_field is None:
    raise ValueError(
      f"{scheme} evaluates the game at new points: call"
      " update(updates, state, params, vector_field=fn) with"
      " fn(params, i) -> Players (the descent field; i = 1, 2, ... numbers the"
      " evaluations), or use minmaxlab.game_step; got vector_field=None (if you passed"
      " it, a wrapper around the scheme dropped it, as optax.MultiSteps does: put such"
      " wrappers inside, e.g. extragradient(optax.MultiSteps(adam, k))"
    )
  if isinstance(vector_field, FieldFn):
    return vector_field
  if not callable(vector_field):
    raise ValueError(f"vector_field must be callable, got {vector_field!r}")
  made_by = getattr(vector_field, "_minmaxlab_field_helper", None)
  if made_by is not None:
    raise ValueError(
      f"vector_field= got {made_by}(loss_fn) itself; the keyword is called as"
      " fn(params, i) with i the evaluation number (1, 2, ...), which would reach"
      " loss_fn as its data argument. Pass vector_field=lambda p, i:"
      " field(p, batches[i]) (the field only), or use"
      " minmaxlab.game_step(tx, lambda p, i: field(p, batches[i]), params, opt_state)"
    )
  return FieldFn(vector_field)


def check_first_field(updates: Any, vector_field: FieldFn, scheme: str) -> None:
  """Refuse a transform chained in front of a scheme that fetches more fields.

  ``optax.chain(clip, extragradient(sgd))`` clips only the field passed as
  ``updates``; the field at the extrapolated point comes from ``vector_field``
  and would skip the clip silently. When the caller tells us which object it
  passed as ``updates`` (``minmaxlab.game_step`` and
  ``minmaxlab.with_field_processing`` do), anything else arriving here means
  some transform in front changed it.
  """
  first = vector_field.first
  if first is not None and updates is not first:
    raise ValueError(
      f"{scheme} received a field already changed by a transform chained in front of"
      " it (e.g. optax.chain(clip, " + scheme + "(...)), optax.masked, optax.MultiSteps"
      " or inject_hyperparams around it); the fields it evaluates itself through"
      " vector_field would skip that processing. " + _FIX[0].upper() + _FIX[1:]
    )


def check_updates(updates: Any, scheme: str) -> Players:
  return check_players(updates, f"{scheme}: updates (the descent field)")


def tree_add(a, b):
  return jax.tree.map(jnp.add, a, b)


def tree_sub(a, b):
  return jax.tree.map(jnp.subtract, a, b)


def cond(pred, true_fn, false_fn):
  """``jax.lax.cond(pred, true_fn, false_fn)`` (branches without operands), except that a
  concrete ``pred`` (an update run eagerly, outside ``jit``) calls its branch in Python. An
  eager ``lax.cond`` whose branches are new closures (as the Lookahead's are, over the step's
  values) is traced, lowered and compiled at every call: two or three programs per eager
  Lookahead step. The eager branch runs op by op, as eager code does."""
  if isinstance(pred, jax.core.Tracer):
    return jax.lax.cond(pred, true_fn, false_fn)
  return true_fn() if bool(pred) else false_fn()


def tree_where(cond, a, b):
  """Leafwise ``jnp.where(cond, a, b)`` of two pytrees of one structure."""
  return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)


def tree_all_finite(tree) -> jax.Array:
  """Whether every floating leaf of ``tree`` is finite everywhere (a traced boolean;
  integer leaves are finite by construction, an empty tree is finite)."""
  leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
  if not leaves:
    return jnp.asarray(True)
  # One check per dtype over the concatenated leaves: a reduction per leaf (about 70 in a
  # coevolution cell's networks and optimizer states) compiles to a program twice as large
  # (issue 11: compile time).
  groups: dict = {}
  for x in leaves:
    groups.setdefault(jnp.result_type(x), []).append(jnp.ravel(x))
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(jnp.concatenate(g))) for g in groups.values()]))


def zeros_count() -> jax.Array:
  return jnp.zeros([], jnp.int32)


def as_transform(inner: Any, name: str = "inner") -> optax.GradientTransformationExtraArgs:
  if not isinstance(inner, optax.GradientTransformation):
    raise ValueError(f"{name} must be an optax.GradientTransformation, got {type(inner).__name__}")
  return optax.with_extra_args_support(inner)
