r"""The update operator of ANY transform, measured by running it.

For a linear game the update of any first-order scheme with an SGD-type inner
transform is an affine map of the parameters (and of the scheme's memory), so
its linear part has a spectrum that decides convergence: the iterates
contract towards the equilibrium at the rate of the spectral radius.
:func:`update_operator` differentiates one real ``update`` to get that linear
part; ``_closed_form.py`` has the exact spectra to check it against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree


class UpdateOperator(NamedTuple):
  r"""The linear part of an update map (see :func:`update_operator`).

  What :math:`w` is:

  * ``augment_state=False``: :math:`w = z`, the parameters, and every
    evaluation starts from a fresh ``tx.init(z)``. Right for memoryless
    schemes (GDA = any plain optax transform, ``alternating``,
    ``extragradient``) and for one lookahead cycle from the slow point:
    ``lookahead_minmax(inner, k, alpha)`` with ``num_steps=k`` starts with the
    slow weights at ``z`` and ends at the new slow weights, so ``M`` is
    :math:`(1-\alpha) I + \alpha F^k`.
  * ``augment_state=True``: :math:`w = (z, m)` with ``m`` every floating-point
    leaf of the transform's state (the scheme's memory: the previous update
    of ``optimistic``, the slow weights of lookahead, a momentum trace),
    taken from ``tx.init(params)`` advanced by ``warmup_steps`` updates (so
    the integer counters are past any first-step special case) and
    perturbed together with ``z``. For ``optimistic`` this is the map of the
    two-step recursion on :math:`(z_t, u_{t-1})`; for lookahead it adds
    ``n`` zero eigenvalues to the cycle spectrum.

  Attributes:
    matrix: ``M`` (numpy, ``(d, d)``) with ``w' - w0' = M (w - w0)``.
    eigenvalues: eigenvalues of ``M`` (numpy complex).
    spectral_radius: ``max |eigenvalues|``.
    num_params: how many leading coordinates of ``w`` are the parameters
      (the rest is the scheme's memory, when ``augment_state``).
  """

  matrix: np.ndarray
  eigenvalues: np.ndarray
  spectral_radius: float
  num_params: int


def _split_state(state):
  leaves, treedef = jax.tree.flatten(state)
  inexact = [i for i, x in enumerate(leaves) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
  return leaves, treedef, inexact


def update_operator(
  tx: optax.GradientTransformation,
  field: Callable[..., Any],
  params: Any,
  *args: Any,
  num_steps: int = 1,
  augment_state: bool | None = None,
  warmup_steps: int | None = None,
  scale: float = 1.0,
  jit: bool = False,
) -> UpdateOperator:
  r"""The update map of ANY minmaxlab transform, built by running the transform.

  The map :math:`\Phi` applies the real transform ``num_steps`` times
  (:func:`minmaxlab.game_step` with ``field_fn=lambda p, i: field(p, *args)``:
  ``update`` with the field at the current point as ``updates``, then the
  updates applied, onto the slow weights exactly after a Lookahead sync).
  For a linear game and an SGD-type inner transform (``optax.sgd``, with or
  without momentum) :math:`\Phi` is affine, and its linear part is read off
  column by column from basis perturbations of a base point :math:`w_0`:

  .. math::
    M e_j = (\Phi(w_0 + s e_j) - \Phi(w_0)) / s .

  (For a nonlinear game or an adaptive inner this is a finite-difference
  linearisation with step ``scale``.) :math:`w` is the parameters, or the
  parameters and the scheme's memory with ``augment_state`` (see
  :class:`UpdateOperator`). ``augment_state=None`` (default) augments iff the
  initial state has floating-point leaves and the transform is not a lookahead
  (whose memory, the slow weights, is synced to ``z`` at the start of a cycle).

  Args:
    tx: any optax transform over ``Players`` (plain optax = GDA, or a
      minmaxlab scheme).
    field: ``field(params, *args) -> Players``, the descent field of a linear
      game (e.g. ``minmaxlab.vector_field(game.loss)``).
    params: the base point (any point: the map is affine).
    *args: extra arguments of ``field``.
    num_steps: ``update`` calls per application of the map (``k`` for one
      lookahead cycle).
    augment_state: see above.
    warmup_steps: updates from ``tx.init(params)`` before the base point when
      augmenting (default ``num_steps``: keeps lookahead cycles aligned and
      leaves optimistic's first step behind).
    scale: size of the basis perturbations.
    jit: compile the map. Eager execution (the default) is faster for the
      small games and many operators of a grid scan (each new transform
      would recompile); compile for large games or long cycles.

  Returns:
    An :class:`UpdateOperator` (numpy, in the params' dtype: use float64,
    ``jax.enable_x64``, for comparisons to closed forms).

  Example:
    >>> game = minmaxlab.games.bilinear(jnp.eye(1))
    >>> op = update_operator(optax.sgd(0.3), minmaxlab.vector_field(game.loss),
    ...                      game.equilibrium())
    >>> op.spectral_radius   # sqrt(1 + 0.3**2)
  """
  if int(num_steps) < 1:
    raise ValueError(f"num_steps must be >= 1, got {num_steps}")
  num_steps = int(num_steps)
  tx = optax.with_extra_args_support(tx)
  run = _runner(tx, field, args)
  maybe_jit = jax.jit if jit else (lambda f: f)
  state0 = tx.init(params)
  if augment_state is None:
    augment_state = bool(_split_state(state0)[2]) and not _has_lookahead(state0)
  if augment_state:
    warm = num_steps if warmup_steps is None else int(warmup_steps)
    phi, w0 = _augmented_map(run, params, state0, num_steps, warm, maybe_jit)
  else:
    phi, w0 = _params_map(tx, run, params, num_steps)
  M = np.asarray(_linear_part(phi, w0, scale, maybe_jit))
  eigs = np.linalg.eigvals(M)
  radius, size = float(np.abs(eigs).max()), int(ravel_pytree(params)[0].shape[0])
  return UpdateOperator(matrix=M, eigenvalues=eigs, spectral_radius=radius, num_params=size)


def _runner(tx, field, args):
  """``run(z, state, n)``: ``n`` steps of :func:`minmaxlab.game_step` of ``tx`` on ``field``
  (every evaluation of a step the field at its point)."""
  from minmaxlab.transforms import game_step  # noqa: PLC0415

  def run(z, state, n):
    for _ in range(n):
      z, state, _ = game_step(tx, lambda p, i: field(p, *args), z, state)
    return z, state

  return run


def _has_lookahead(state) -> bool:
  from minmaxlab.transforms import LookaheadMinmaxState  # noqa: PLC0415

  return any(
    isinstance(s, LookaheadMinmaxState)
    for s in jax.tree.leaves(state, is_leaf=lambda s: isinstance(s, LookaheadMinmaxState))
  )


def _augmented_map(run, params, state0, num_steps, warm, maybe_jit):
  """``(phi, w0)`` over ``w = (z, m)``: ``m`` the floating-point leaves of the state after
  ``warm`` steps from ``state0``, ``w0`` that point."""
  z0, unravel_z = ravel_pytree(params)
  n = int(z0.shape[0])
  p_w, state_w = maybe_jit(lambda p, s: run(p, s, warm))(params, state0)
  leaves, treedef, inexact = _split_state(state_w)
  m0, unravel_m = ravel_pytree([leaves[i] for i in inexact])
  w0 = jnp.concatenate([ravel_pytree(p_w)[0], m0])

  def phi(w):
    mem = unravel_m(w[n:])
    new = list(leaves)
    for i, x in zip(inexact, mem, strict=True):
      new[i] = x
    z, state = run(unravel_z(w[:n]), jax.tree.unflatten(treedef, new), num_steps)
    _, _, idx = _split_state(state)
    m, _ = ravel_pytree([jax.tree.leaves(state)[i] for i in idx])
    return jnp.concatenate([ravel_pytree(z)[0], m])

  return phi, w0


def _params_map(tx, run, params, num_steps):
  """``(phi, w0)`` over the parameters alone, each application from a fresh ``tx.init``."""
  w0, unravel_z = ravel_pytree(params)

  def phi(w):
    z = unravel_z(w)
    z, _ = run(z, tx.init(z), num_steps)
    return ravel_pytree(z)[0]

  return phi, w0


def _linear_part(phi, w0, scale, maybe_jit):
  """``M`` with ``M e_j = (phi(w0 + scale e_j) - phi(w0)) / scale``, all columns at once."""
  d = int(w0.shape[0])

  @maybe_jit
  def columns(w0):
    base = phi(w0)
    eye = jnp.eye(d, dtype=w0.dtype)
    images = jax.vmap(phi)(w0 + scale * eye)
    return (images - base).T / scale

  return columns(w0)


# ----------------------------------------------------------------------------
# Closed forms (bilinear game x^T A y + linear terms, optionally mu-regularised)
# ----------------------------------------------------------------------------
