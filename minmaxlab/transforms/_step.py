"""One game step (field, update, apply), field processing for every evaluation,
and reading an injected hyperparameter out of a game-scheme state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import optax

from minmaxlab.games import Players
from minmaxlab.transforms._common import (
  FieldFn,
  as_transform,
  check_field,
  check_first_field,
  check_updates,
  require_params,
  require_vector_field,
)
from minmaxlab.transforms._lookahead import apply_lookahead_updates
from minmaxlab.transforms._opt_state import merge_by_player, player_labels


def _split_output(out: Any, params: Any) -> tuple[Any, Players]:
  """``(value, field)`` from ``fn(params, i)``: a ``Players`` field alone, or ``(value, field)``."""
  if isinstance(out, Players):
    return None, check_field(out, params, "field_fn(params, 0)")
  if isinstance(out, (tuple, list)) and len(out) == 2:
    return out[0], check_field(out[1], params, "field_fn(params, 0)")
  raise ValueError(
    "field_fn(params, i) must return the descent field (minmaxlab.Players) or"
    f" (value, field) as minmaxlab.value_and_vector_field does, got {type(out).__name__}"
  )


def _keyed(
  field_fn: Callable[[Players, jax.Array], Any], key: Any
) -> Callable[[Players, int], Any]:
  """``field_fn(params, key)`` as ``fn(params, i)``: evaluation ``i`` gets ``fold_in(key, i)``."""
  typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  raw = isinstance(key, jax.Array) and key.dtype == jnp.uint32 and key.shape == (2,)
  if not (typed or raw):
    raise ValueError(f"key must be a jax.random key (jax.random.key(seed)), got {key!r}")
  return lambda p, i: field_fn(p, jax.random.fold_in(key, i))


def _masked(field: Players, player: str) -> Players:
  """``field`` with the part of the player that does not move set to zero."""
  other = "max" if player == "min" else "min"
  return field._replace(**{other: jax.tree.map(jnp.zeros_like, getattr(field, other))})


def _evaluations(field_fn, params, key, player):
  """``(value, field, later)``: evaluation 0 of ``field_fn`` at ``params`` split into its
  value and field, and ``later(p, i)`` the field of evaluation ``i``; with ``key`` every
  evaluation gets a fresh key, with ``player`` every field the other player's part zero."""
  if player not in (None, "min", "max"):
    raise ValueError(f"player must be None, 'min' or 'max', got {player!r}")
  if key is not None:
    field_fn = _keyed(field_fn, key)
  mask = (lambda f: f) if player is None else (lambda f: _masked(f, player))
  value, field = _split_output(field_fn(params, 0), params)

  def later(p, i):
    return mask(_split_output(field_fn(p, i), p)[1])

  return value, mask(field), later


def _one_player_moved(player, params, new_params, opt_state, new_state):
  """``player``'s new params and state leaves; the other player's as they came in
  (``player_labels``), the shared state (step counters, sync flags) new."""
  other = "max" if player == "min" else "min"
  kept = new_params._replace(**{other: getattr(params, other)})
  mins, maxs = (new_state, opt_state) if player == "min" else (opt_state, new_state)
  return kept, merge_by_player(player_labels(new_state), mins, maxs, new_state)


def game_step(
  tx: optax.GradientTransformation,
  field_fn: Callable[[Players, int], Any],
  params: Players,
  opt_state: Any,
  *,
  key: jax.Array | None = None,
  player: Literal["min", "max"] | None = None,
  **extra_args: Any,
) -> tuple[Players, Any, Any]:
  r"""One full game step: the field at ``params``, ``tx.update``, ``apply_updates``.

  ``field_fn(params, i)`` returns the descent field at ``params`` for the
  ``i``-th field evaluation of the step (``i = 0`` at the step's params; the
  schemes that evaluate the game at new points ask for ``i = 1, 2, ...``, up to
  :func:`num_field_evaluations` ``(tx) - 1``, so a caller can give each
  evaluation its own minibatch), as a ``Players`` or as ``(value, field)`` (from
  :func:`value_and_vector_field`); the value of evaluation 0 (e.g. the losses) is
  returned. Index stacked minibatches with :func:`take_batch`, which raises past
  the stack (a plain ``batches[i]`` under ``jit`` silently reuses the last one).
  With ``key`` (minibatches sampled in the step), ``field_fn(params, key_i)``
  gets a fresh ``key_i = jax.random.fold_in(key, i)`` per evaluation instead.

  Every field is checked against the params' structure, and a transform chained
  IN FRONT of a scheme that fetches more fields
  (``optax.chain(clip, extragradient(adam))``, whose clip the fetched fields
  would skip) raises, naming the fix: processing goes inside the scheme
  (``extragradient(optax.chain(clip, adam))``) or around it
  (:func:`with_field_processing`).

  Example:
    >>> vaf = minmaxlab.value_and_vector_field(loss_fn)    # loss_fn(params, batch)
    >>> tx = minmaxlab.extragradient(optax.adam(1e-3))
    >>> params, opt_state, losses = minmaxlab.game_step(
    ...     tx, lambda p, i: vaf(p, minmaxlab.take_batch(batches, i)), params, opt_state)
    >>> params, opt_state, losses = minmaxlab.game_step(     # loss_fn(params, key)
    ...     tx, vaf, params, opt_state, key=jax.random.fold_in(key, step))

  The updates are applied with :func:`~minmaxlab.transforms.apply_lookahead_updates`:
  ``optax.apply_updates``, but after a Lookahead sync (found in the new state by type,
  so wrapped or not) the params are set exactly to the slow weights.

  With ``player="min"`` (or ``"max"``) that player alone moves (one phase of an
  alternating schedule, e.g. coevolution's generator step): every field ``tx`` sees
  has the other player's part set to zero, and the other player's params and its
  state (the leaves :func:`~minmaxlab.transforms.player_labels` gives it) come back
  as they came in; the shared state (step counters, Lookahead's sync) advances.

  With flax's ``TrainState`` (whose ``apply_gradients`` has no way to pass
  ``vector_field``) use :func:`apply_game_step`.

  Args:
    tx: any optax transform over ``Players`` (a game scheme or a plain optimizer).
    field_fn: ``field_fn(params, i) -> Players`` or ``-> (value, Players)``;
      ``field_fn(params, key_i)`` when ``key`` is given.
    params: the current ``Players``.
    opt_state: ``tx``'s state.
    key: a ``jax.random`` key: ``field_fn`` then receives one fresh key per evaluation.
    player: ``None`` (both players move), ``"min"`` or ``"max"`` (that player alone).
    **extra_args: more keyword arguments for ``tx.update`` (e.g. ``unrolled``'s ``loss_fn``).

  Returns:
    ``(new_params, new_opt_state, value)``; ``value`` is ``None`` when
    ``field_fn`` returns the field alone.
  """
  if not callable(field_fn):
    raise ValueError(f"field_fn must be callable as field_fn(params, i), got {field_fn!r}")
  tx = as_transform(tx, "tx")
  value, field, later = _evaluations(field_fn, params, key, player)
  vector_field = FieldFn(later, first=field)
  updates, state = tx.update(field, opt_state, params, vector_field=vector_field, **extra_args)
  new_params = apply_lookahead_updates(params, updates, state)
  if player is not None:
    new_params, state = _one_player_moved(player, params, new_params, opt_state, state)
  return new_params, state, value


def num_field_evaluations(
  tx: optax.GradientTransformation,
  params: Players | None = None,
  field_fn: Callable[[Players, int], Any] | None = None,
  **extra_args: Any,
) -> int:
  """How many times one step of ``tx`` evaluates the game's field.

  :func:`game_step` calls ``field_fn(params, i)`` for ``i = 0, 1, ..., n - 1``
  with ``n`` this number: GDA and optimistic 1, :func:`extragradient` 2,
  ``alternating(max_steps=m)`` ``m + 1``; Lookahead and field processing add
  none. Stack ``n`` minibatches per step (and read them with
  :func:`take_batch`), or pass ``key=`` to :func:`game_step`.

  Counted, not assumed: one ``update`` is traced (``jax.eval_shape``, nothing
  is computed), on ``params`` (default: two scalars) with ``field_fn``
  (default: a zero field); give both when ``tx`` depends on the params'
  structure (masks, per-leaf labels).

  Args:
    tx: any optax transform over ``Players``.
    params: a point of the game (only shapes matter).
    field_fn: ``field_fn(params, i) -> Players`` (a field alone).
    **extra_args: more keyword arguments for ``tx.update`` (``unrolled``'s ``loss_fn``).

  Returns:
    The number of field evaluations per step.
  """
  tx = optax.with_extra_args_support(as_transform(tx, "tx"))
  if params is None:
    params = Players(jnp.zeros(()), jnp.zeros(()))
  if field_fn is None:
    field_fn = lambda p, i: jax.tree.map(jnp.zeros_like, p)
  calls = [0]

  def counting(p, i):
    calls[0] += 1
    return field_fn(p, i)

  def one(p):
    return tx.update(field_fn(p, 0), tx.init(p), p, vector_field=counting, **extra_args)

  jax.eval_shape(one, params)
  return 1 + calls[0]


def take_batch(batches: Any, i: Any) -> Any:
  """Minibatch ``i`` of a stack (every leaf's leading axis), checked against its length.

  For ``field_fn(params, i)``: ``lambda p, i: value_and_field(p, take_batch(batches, i))``.
  Under ``jit`` a plain ``batches[i]`` past the end silently returns the last minibatch
  again (JAX clamps out-of-range indices); here an ``i`` known when tracing (the game
  schemes pass Python ints) outside ``0 .. len - 1`` raises ``IndexError``, naming
  :func:`num_field_evaluations`. A traced ``i`` cannot be checked and is clamped as usual.

  Args:
    batches: an array or a pytree of arrays with a common leading axis (``n`` minibatches).
    i: the evaluation's index.

  Returns:
    ``batches`` with every leaf indexed by ``i``.
  """
  leaves = jax.tree.leaves(batches)
  lengths = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in leaves}
  if not leaves or len(lengths) != 1 or None in lengths:
    raise ValueError(
      "take_batch needs an array or pytree of arrays with one common leading axis (the"
      f" minibatches), got leading lengths {sorted(lengths, key=str)}"
    )
  (n,) = lengths
  if not isinstance(i, jax.core.Tracer):
    index = int(i)
    if not 0 <= index < n:
      raise IndexError(
        f"field evaluation {index} needs minibatch {index}, but batches holds {n} (leading"
        " axis): one step evaluates the field minmaxlab.num_field_evaluations(tx) times;"
        " stack that many minibatches, or pass key= to game_step"
      )
  return jax.tree.map(lambda x: x[i], batches)


def apply_game_step(
  train_state: Any, field_fn: Callable[[Players, Any], Any], *, key: jax.Array | None = None
) -> tuple[Any, Any]:
  """:func:`game_step` on a flax ``TrainState`` (or any object with ``step``,
  ``params``, ``tx``, ``opt_state`` and ``replace``); ``key`` as in :func:`game_step`.

  Example:
    >>> from flax.training import train_state
    >>> state = train_state.TrainState.create(apply_fn=None, params=params, tx=tx)
    >>> state, losses = minmaxlab.apply_game_step(state, lambda p, i: vaf(p, batches[i]))

  Returns:
    ``(new_train_state, value)`` with ``step`` advanced by one.
  """
  for name in ("step", "params", "tx", "opt_state", "replace"):
    if not hasattr(train_state, name):
      raise ValueError(
        "apply_game_step needs a flax TrainState-like object with step, params, tx,"
        f" opt_state and replace; {type(train_state).__name__} has no {name!r}"
      )
  params, opt_state, value = game_step(
    train_state.tx, field_fn, train_state.params, train_state.opt_state, key=key
  )
  new = train_state.replace(step=train_state.step + 1, params=params, opt_state=opt_state)
  return new, value


def with_field_processing(
  tx: optax.GradientTransformation, processing: optax.GradientTransformation
) -> optax.GradientTransformationExtraArgs:
  r"""Pass EVERY field a step uses through ``processing`` before ``tx`` sees it.

  ``processing`` is applied to the whole :class:`Players` field at each point
  where the game is evaluated: to the ``updates`` argument and to every field
  ``tx`` fetches through ``vector_field``. It is therefore joint over the two
  players: ``with_field_processing(alternating(sgd), clip_by_global_norm(c))``
  clips the norm of both players' fields at each evaluation point (inside
  ``alternating``'s ``inner`` the clip would be per player).

  ``processing`` must be stateless (``clip``, ``clip_by_global_norm``,
  ``masked`` of those, ``scale``, ...): with several evaluations per step a
  state (a schedule's count, ``apply_if_finite``'s counters) would have no
  single meaning. Stateful processing belongs in the scheme's ``inner``
  transform, where each optimizer state sees its own stream of fields.

  Args:
    tx: the scheme (or any transform over ``Players``).
    processing: a stateless optax transform.

  Returns:
    An ``optax.GradientTransformationExtraArgs`` with ``tx``'s state.
  """
  tx = as_transform(tx, "tx")
  processing = as_transform(processing, "processing")

  def empty_state(params):
    state = processing.init(params)
    if jax.tree.leaves(state):
      raise ValueError(
        "with_field_processing needs a stateless processing (clip,"
        " clip_by_global_norm, masked(clip), ...), got one whose state holds"
        f" {len(jax.tree.leaves(state))} arrays: {type(state).__name__}. Put stateful"
        " processing (schedules, apply_if_finite, MultiSteps, inject_hyperparams) into"
        " the scheme's inner transform, e.g. extragradient(optax.chain(processing, adam))"
      )
    return state

  def init_fn(params):
    params = require_params(params, "with_field_processing")
    empty_state(params)
    return tx.init(params)

  def update_fn(updates, state, params=None, *, vector_field=None, **extra_args):
    updates = check_updates(updates, "with_field_processing")
    params = require_params(params, "with_field_processing")
    empty = empty_state(params)

    def process(field, at):
      return processing.update(field, empty, at)[0]

    first = process(updates, params)
    if vector_field is not None:
      raw = require_vector_field(vector_field, "with_field_processing")

      def fetched(p, i):
        # Checked only when ``tx`` fetches a field: a transform in front of this
        # wrapper is harmless over GDA, but the fetched fields would skip it.
        check_first_field(updates, raw, "with_field_processing")
        return process(raw(p, i), p)

      extra_args["vector_field"] = FieldFn(fetched, first=first)
    return tx.update(first, state, params, **extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def hyperparam(opt_state: Any, name: str = "learning_rate") -> jax.Array:
  """The value of an injected hyperparameter (``optax.inject_hyperparams``) in a game state.

  Game schemes keep several copies of the inner state (``extragradient``: one
  for the extrapolation and one for the update; ``alternating``: one per
  player), so ``optax.tree_utils.tree_get(state, name)`` finds several and
  raises; ``optax.tree_utils.tree_set(state, **{name: v})`` sets every copy.
  This returns the value when every copy holds the same one (checked when the
  values are concrete) and raises, naming the copies, when they differ (e.g.
  per-player learning rates: read them from ``state.inner_state.min`` /
  ``.max``, write them with ``minmaxlab.transforms.set_learning_rates``).
  """
  found = []

  def visit(path, leaf):
    last = path[-1] if path else None
    if isinstance(last, jax.tree_util.DictKey) and last.key == name:
      found.append((jax.tree_util.keystr(path), leaf))

  jax.tree_util.tree_map_with_path(visit, opt_state)
  if not found:
    raise ValueError(
      f"opt_state holds no injected hyperparameter {name!r}; build the inner optimizer"
      f" with optax.inject_hyperparams(...)({name}=...)"
    )
  value = found[0][1]
  concrete = not any(isinstance(v, jax.core.Tracer) for _, v in found)
  if concrete and any(not bool(jnp.all(jnp.asarray(v) == jnp.asarray(value))) for _, v in found):
    where = ", ".join(f"{path} = {v}" for path, v in found)
    raise ValueError(f"the copies of {name!r} in opt_state differ: {where}")
  return jnp.asarray(value)
