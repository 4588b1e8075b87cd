"""The two-player parameter container and the game's descent vector field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Players(NamedTuple):
  """Parameters of a two-player game: ``min`` minimises, ``max`` maximises.

  A NamedTuple, hence a pytree: every optax transform, ``jax.tree.map`` and
  ``ravel_pytree`` treat it as the joint parameter vector ``z = (min, max)``.
  Each field may be any pytree (an array, a dict of flax parameters, ...).
  """

  min: Any
  max: Any


class NotPlayersError(ValueError):
  """A ``Players`` tree was expected and something else was given."""


def check_players(params: Any, what: str = "params") -> Players:
  """Raise ``ValueError`` (a :class:`NotPlayersError`) unless ``params`` is a :class:`Players`."""
  if not isinstance(params, Players):
    raise NotPlayersError(
      f"{what} must be minmaxlab.Players(min=..., max=...), got"
      f" {type(params).__name__}: {params!r:.200}"
    )
  return params


_LOSS_OUTPUT = "loss_fn must return a scalar f (zero-sum) or a pair (loss_min, loss_max)"


def split_losses(out: Any, has_aux: bool) -> tuple[jax.Array, jax.Array] | None:
  """``(loss_min, loss_max)`` from a loss output, ``None`` for a zero-sum scalar."""
  aux_hint = "" if has_aux else "; to return more, return (losses, aux) and pass has_aux=True"
  if isinstance(out, (tuple, list)):
    if len(out) != 2:
      raise ValueError(f"{_LOSS_OUTPUT}; got a sequence of length {len(out)}{aux_hint}")
    for name, x in zip(("loss_min", "loss_max"), out):
      if not _is_scalar(x):
        raise ValueError(f"{_LOSS_OUTPUT}; got {name} = {_what(x)}{aux_hint}")
    return out[0], out[1]
  if not _is_scalar(out):
    raise ValueError(f"{_LOSS_OUTPUT}; got {_what(out)}{aux_hint}")
  return None


def _is_scalar(x: Any) -> bool:
  if isinstance(x, (int, float)) and not isinstance(x, bool):
    return True
  return hasattr(x, "shape") and hasattr(x, "dtype") and tuple(x.shape) == ()


def _what(x: Any) -> str:
  if isinstance(x, dict):
    return f"a dict with keys {sorted(map(str, x))}"
  if hasattr(x, "shape"):
    return f"an array of shape {tuple(x.shape)}"
  return f"a {type(x).__name__}"


def value_and_vector_field(
  loss_fn: Callable[..., Any], has_aux: bool = False
) -> Callable[..., Any]:
  r"""Losses and descent vector field of a two-player game.

  For a game where ``min`` minimises :math:`\ell_{\min}(z)` and ``max``
  minimises :math:`\ell_{\max}(z)` (equivalently maximises
  :math:`-\ell_{\max}`), the descent field is

  .. math::
    v(z) = (\nabla_{\min} \ell_{\min}(z),\ \nabla_{\max} \ell_{\max}(z)).

  For a zero-sum game given by one scalar :math:`f` (``min`` minimises it,
  ``max`` maximises it) :math:`\ell_{\min} = f`, :math:`\ell_{\max} = -f` and
  :math:`v = (\nabla_{\min} f, -\nabla_{\max} f)`. This is the only place in
  the library where the max player's gradient is negated: everything
  downstream (any optax transform) simply descends :math:`v`.

  One forward pass is shared by both players (a single ``jax.vjp``).

  Args:
    loss_fn: ``loss_fn(params: Players, *args) -> f`` or ``(loss_min,
      loss_max)``; with ``has_aux`` it returns ``(that, aux)``.
    has_aux: whether ``loss_fn`` also returns auxiliary data.

  Returns:
    ``fn(params, *args) -> (losses, field)`` (``((losses, aux), field)`` with
    ``has_aux``), where ``losses = (loss_min, loss_max)`` (``(f, -f)`` for a
    zero-sum scalar) and ``field`` is a :class:`Players` of descent directions.
  """

  def fn(params, *args):
    check_players(params)
    if has_aux:
      out, vjp, aux = jax.vjp(lambda p: loss_fn(p, *args), params, has_aux=True)
    else:
      out, vjp = jax.vjp(lambda p: loss_fn(p, *args), params)
    pair = split_losses(out, has_aux)
    if pair is None:
      (grad,) = vjp(jnp.ones_like(out))
      field = Players(grad.min, jax.tree.map(jnp.negative, grad.max))
      losses = (out, -out)
    else:
      loss_min, loss_max = pair
      one_min, zero_min = jnp.ones_like(loss_min), jnp.zeros_like(loss_min)
      one_max, zero_max = jnp.ones_like(loss_max), jnp.zeros_like(loss_max)
      (grad_min,) = vjp(_like(out, one_min, zero_max))
      (grad_max,) = vjp(_like(out, zero_min, one_max))
      field = Players(grad_min.min, grad_max.max)
      losses = (loss_min, loss_max)
    if has_aux:
      return (losses, aux), field
    return losses, field

  fn._minmaxlab_field_helper = "minmaxlab.value_and_vector_field"
  return fn


def _like(out, first, second):
  return type(out)((first, second)) if isinstance(out, tuple) else [first, second]


def vector_field(loss_fn: Callable[..., Any], has_aux: bool = False) -> Callable[..., Any]:
  r"""Descent vector field :math:`v(z)` of a two-player game.

  See :func:`value_and_vector_field` for the definition and conventions.

  Example:
    >>> import jax.numpy as jnp, minmaxlab as mml
    >>> field = mml.vector_field(lambda p: p.min * p.max)   # f = x y
    >>> field(mml.Players(jnp.array(2.0), jnp.array(3.0)))
    Players(min=Array(3., ...), max=Array(-2., ...))

  Args:
    loss_fn: ``loss_fn(params: Players, *args) -> f`` (zero-sum scalar) or
      ``(loss_min, loss_max)``.
    has_aux: whether ``loss_fn`` returns ``(losses, aux)``.

  Returns:
    ``field(params, *args) -> Players`` (``(Players, aux)`` with ``has_aux``).
  """
  value_and_field = value_and_vector_field(loss_fn, has_aux=has_aux)

  def field(params, *args):
    out, v = value_and_field(params, *args)
    if has_aux:
      return v, out[1]
    return v

  field._minmaxlab_field_helper = "minmaxlab.vector_field"
  return field
