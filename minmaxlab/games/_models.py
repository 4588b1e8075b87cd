"""Two model objects (flax.nnx modules or equinox modules) as the game's ``Players`` of
trainable arrays, and back: what lets the game optimizers, ``game_step`` and the analysis
functions work on the models people write."""

from __future__ import annotations

import sys
from typing import Any, Literal, NamedTuple

from minmaxlab.games._players import Players


class ModelDef(NamedTuple):
  """What :func:`split_models` keeps of one model besides its trainable arrays.

  Attributes:
    kind: ``"nnx"`` (a ``flax.nnx.Module``) or ``"equinox"`` (any other pytree, split by
      ``equinox.partition`` with ``equinox.is_inexact_array``).
    static: ``(graphdef, rest)`` of ``nnx.split(model, nnx.Param, ...)`` for ``"nnx"``; the
      static half of ``equinox.partition`` for ``"equinox"``.
  """

  kind: Literal["nnx", "equinox"]
  static: Any


def _nnx_module(model: Any) -> bool:
  # A flax.nnx model means flax.nnx is imported already: no import for other models.
  nnx = sys.modules.get("flax.nnx")
  return nnx is not None and isinstance(model, nnx.Module)


def _equinox(what: str) -> Any:
  try:
    import equinox  # noqa: PLC0415 (optional: only for models that are not nnx modules)
  except ImportError:
    raise ImportError(
      f"{what} is not a flax.nnx.Module, and splitting other models needs equinox, which is"
      " not installed (pip install equinox)"
    ) from None
  return equinox


def _split_one(model: Any, what: str) -> tuple[ModelDef, Any]:
  if isinstance(model, Players):
    raise ValueError(f"{what} is already minmaxlab.Players: pass the two models themselves")
  if _nnx_module(model):
    from flax import nnx  # noqa: PLC0415

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return ModelDef("nnx", (graphdef, rest)), params
  eqx = _equinox(what)
  params, static = eqx.partition(model, eqx.is_inexact_array)
  return ModelDef("equinox", static), params


def split_models(min_model: Any, max_model: Any) -> tuple[Players, Players]:
  r"""The trainable arrays of two models as the game's :class:`Players`, and their rest.

  For a ``flax.nnx.Module`` the trainable arrays are its ``nnx.Param`` state
  (``nnx.split(model, nnx.Param, ...)``); for an equinox module (or any pytree) they are
  its floating-point arrays (``equinox.partition(model, equinox.is_inexact_array)``,
  equinox's own convention). The two models may come from different frameworks.

  The params are a pytree: pass them to ``tx.init``, :func:`minmaxlab.game_step` and the
  analysis functions. Rebuild the models from them with :func:`merge_models` inside the
  loss; close over ``defs`` (it holds the models' structure, not traced arrays). What is
  not a parameter (nnx batch statistics or RNG counters, equinox's non-float fields) is
  kept as it was at the split: models whose forward pass updates such state are not
  covered. To write trained params back into live nnx modules: ``nnx.update(model,
  params.min)``.

  Example:
    >>> defs, params = minmaxlab.split_models(generator, discriminator)
    >>> def loss_fn(params, real, z):
    ...   g, d = minmaxlab.merge_models(defs, params)
    ...   return gan_losses(d(real), d(g(z)))

  Args:
    min_model: the minimising player's model (e.g. the generator).
    max_model: the maximising player's model (e.g. the discriminator).

  Returns:
    ``(defs, params)``: two ``Players``, the first of :class:`ModelDef`, the second of the
    trainable arrays (an ``nnx.State``, or the model with ``None`` for every other leaf).
  """
  def_min, p_min = _split_one(min_model, "min_model")
  def_max, p_max = _split_one(max_model, "max_model")
  return Players(def_min, def_max), Players(p_min, p_max)


def _merge_one(model_def: Any, params: Any, what: str) -> Any:
  if not isinstance(model_def, ModelDef):
    raise ValueError(
      f"defs.{what} must be the ModelDef that split_models returned, got {type(model_def).__name__}"
    )
  if model_def.kind == "nnx":
    from flax import nnx  # noqa: PLC0415

    graphdef, rest = model_def.static
    return nnx.merge(graphdef, params, rest)
  return _equinox(f"defs.{what}").combine(params, model_def.static)


def merge_models(defs: Players, params: Players) -> Players:
  """The two models of :func:`split_models`'s ``defs`` with the arrays of ``params``.

  ``nnx.merge`` (a new module object; the originals are not changed) or
  ``equinox.combine``; works inside ``jit`` and under ``jax.grad``.

  Args:
    defs: the first output of :func:`split_models`.
    params: ``Players`` shaped like its second output (e.g. the params being trained).

  Returns:
    ``Players(min=model, max=model)``; unpack it as ``g, d = merge_models(defs, params)``.
  """
  if not isinstance(defs, Players) or not isinstance(params, Players):
    raise ValueError(
      "merge_models(defs, params) takes the two minmaxlab.Players that split_models"
      f" returned and the params, got {type(defs).__name__} and {type(params).__name__}"
    )
  return Players(_merge_one(defs.min, params.min, "min"), _merge_one(defs.max, params.max, "max"))
