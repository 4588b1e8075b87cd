r"""Update-operator spectra: numerically from the real transforms, and in closed form.

For a linear game the update of any first-order scheme with an SGD-type inner
transform is an affine map of the parameters (and of the scheme's memory), so
its linear part has a spectrum that decides convergence: the iterates
contract towards the equilibrium at the rate of the spectral radius.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

_METHODS = ("gda", "altgda", "eg", "ogda")


class UpdateOperator(NamedTuple):
  """The linear part of an update map (see :func:`update_operator`).

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
  (``update`` then ``optax.apply_updates``, with the field at the current
  point as ``updates`` and ``vector_field=lambda p, i: field(p, *args)``).
  For a linear game and an SGD-type inner transform (``optax.sgd``, with or
  without momentum) :math:`\Phi` is affine, and its linear part is read off
  column by column from basis perturbations of a base point :math:`w_0`:

  .. math::
    M e_j = (\Phi(w_0 + s e_j) - \Phi(w_0)) / s .

  (For a nonlinear game or an adaptive inner this is a finite-difference
  linearisation with step ``scale``.) What :math:`w` is:

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

  ``augment_state=None`` (default) augments iff the initial state has
  floating-point leaves and the transform is not a lookahead (whose memory,
  the slow weights, is synced to ``z`` at the start of a cycle).

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

  def vf(p, i):
    del i
    return field(p, *args)

  def step(z, state):
    u, state = tx.update(field(z, *args), state, z, vector_field=vf)
    return optax.apply_updates(z, u), state

  def run(z, state, n):
    for _ in range(n):
      z, state = step(z, state)
    return z, state

  maybe_jit = jax.jit if jit else (lambda f: f)
  z0, unravel_z = ravel_pytree(params)
  n = int(z0.shape[0])
  state0 = tx.init(params)
  leaves, treedef, inexact = _split_state(state0)
  if augment_state is None:
    from minmaxlab.transforms import LookaheadMinmaxState  # noqa: PLC0415

    is_la = any(
      isinstance(s, LookaheadMinmaxState)
      for s in jax.tree.leaves(state0, is_leaf=lambda s: isinstance(s, LookaheadMinmaxState))
    )
    augment_state = bool(inexact) and not is_la

  if augment_state:
    warm = num_steps if warmup_steps is None else int(warmup_steps)
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
  else:
    w0 = z0

    def phi(w):
      z = unravel_z(w)
      z, _ = run(z, tx.init(z), num_steps)
      return ravel_pytree(z)[0]

  d = int(w0.shape[0])

  @maybe_jit
  def columns(w0):
    base = phi(w0)
    eye = jnp.eye(d, dtype=w0.dtype)
    images = jax.vmap(phi)(w0 + scale * eye)
    return (images - base).T / scale

  M = np.asarray(columns(w0))
  eigs = np.linalg.eigvals(M)
  return UpdateOperator(M, eigs, float(np.abs(eigs).max()), n)


# ----------------------------------------------------------------------------
# Closed forms (bilinear game x^T A y + linear terms, optionally mu-regularised)
# ----------------------------------------------------------------------------


def _modes(eta, sigma, mu):
  sigma = np.atleast_1d(np.asarray(sigma, np.float64))
  return float(eta), sigma, float(mu)


def _jacobian_eigs(sigma, mu):
  """Eigenvalues mu +- i sigma of the game Jacobian, one conjugate pair per mode."""
  return np.concatenate([mu + 1j * sigma, mu - 1j * sigma])


def _altgda_block(eta, s, mu, max_steps):
  """2x2 AltGDA map on one singular mode (x_j, y_j), AltGAN order (y first)."""
  a = 1.0 - eta * mu
  h = eta * s
  # y <- a y + h x, applied max_steps times at fixed x
  ay = a**max_steps
  gy = h * sum(a**i for i in range(max_steps))
  # y_n = ay y + gy x ; x' = a x - h y_n
  return np.array([[a - h * gy, -h * ay], [gy, ay]])


def _ogda_companion(eta, j):
  """2x2 companion of z_{t+1} = (1 - 2 eta j) z_t + eta j z_{t-1} on (z_t, u_{t-1}).

  With u_t = -eta j z_t (the inner SGD output) and z_{t+1} = z_t + 2u_t - u_{t-1},
  the state (z, u_prev) maps to ((1 - 2 eta j) z - u_prev, -eta j z).
  """
  return np.array([[1.0 - 2.0 * eta * j, -1.0], [-eta * j, 0.0]], dtype=complex)


def gda_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of simultaneous GDA with step ``eta``: :math:`\lambda = 1 - \eta j`.

  ``j = mu +- i sigma`` are the eigenvalues of the game Jacobian of
  :math:`x^\top A y + \tfrac{\mu}{2}(\|x\|^2 - \|y\|^2)` (``sigma`` = singular
  values of ``A``). For ``mu = 0``: :math:`|\lambda| = \sqrt{1 + h^2}`,
  ``h = eta sigma``: GDA diverges for every ``eta > 0``.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  return 1.0 - eta * _jacobian_eigs(sigma, mu)


def eg_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of extragradient (both players extrapolate from the same point).

  :math:`\lambda = 1 - \eta j + \eta^2 j^2`; for ``mu = 0``
  :math:`|\lambda| = \sqrt{1 - h^2 + h^4} < 1` iff ``0 < h < 1``.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  j = _jacobian_eigs(sigma, mu)
  return 1.0 - eta * j + (eta * j) ** 2


def altgda_eigenvalues(eta: float, sigma, mu: float = 0.0, max_steps: int = 1) -> np.ndarray:
  r"""Eigenvalues of alternating GDA (max player first, ``max_steps`` steps).

  On a singular mode with ``h = eta sigma`` and ``mu = 0``, one step maps
  :math:`(x, y)` by :math:`[[1 - n h^2, -h], [n h, 1]]` (``n = max_steps``):
  determinant 1, trace :math:`2 - n h^2`, so :math:`|\lambda| = 1` for
  :math:`n h^2 \le 4` (``h <= 2`` for ``n = 1``): AltGDA cycles, neither
  converging nor diverging. With ``mu > 0`` both players' own terms shrink
  by :math:`1 - \eta\mu` per step.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  return np.concatenate(
    [np.linalg.eigvals(_altgda_block(eta, s, mu, int(max_steps))) for s in sigma]
  )


def ogda_eigenvalues(eta: float, sigma, mu: float = 0.0) -> np.ndarray:
  r"""Eigenvalues of optimistic GDA, :math:`z_{t+1} = z_t - 2\eta v(z_t) + \eta v(z_{t-1})`.

  On a Jacobian eigenvalue ``j`` the two-step recursion has characteristic
  polynomial

  .. math::
    \lambda^2 - (1 - 2\eta j)\lambda - \eta j = 0,

  two roots per ``j``. For ``mu = 0`` (``j = i sigma``, ``h = eta sigma``):
  :math:`\lambda = \tfrac12(1 - 2ih \pm \sqrt{1 - 4h^2})`, so
  :math:`\rho = \sqrt{(1 + \sqrt{1 - 4h^2})/2}` for ``h <= 1/2`` and
  :math:`\rho = \tfrac12\sqrt{1 + (2h + \sqrt{4h^2 - 1})^2}` above:
  OGDA converges iff :math:`0 < h < 1/\sqrt3`.
  """
  eta, sigma, mu = _modes(eta, sigma, mu)
  j = _jacobian_eigs(sigma, mu)
  b = 1.0 - 2.0 * eta * j
  disc = np.sqrt(b * b + 4.0 * eta * j + 0j)
  return np.concatenate([(b + disc) / 2.0, (b - disc) / 2.0])


def lookahead_eigenvalues(base_eigenvalues, sync_period: int, slow_step_size: float) -> np.ndarray:
  r"""Eigenvalues of one Lookahead cycle over a base with eigenvalues ``lambda``.

  The slow weights evolve by :math:`(1-\alpha) I + \alpha F^k`, so

  .. math::
    \mu = 1 - \alpha + \alpha \lambda^k \quad\text{per cycle of } k \text{ steps},

  (spectral mapping; exact for any linear base without memory). The per-step
  rate is :math:`|\mu|^{1/k}` (:func:`per_step_rate`). For OGDA, whose memory
  is not reset at a sync, use :func:`closed_form_eigenvalues` with
  ``method="ogda"``.
  """
  lam = np.asarray(base_eigenvalues, complex)
  a = float(slow_step_size)
  return 1.0 - a + a * lam ** int(sync_period)


def _lookahead_ogda_eigenvalues(eta, sigma, mu, k, alpha):
  """One LA cycle over OGDA on (z, u_prev): the slow weights cover z only.

  From a synced point the cycle maps (z, p) to
  ((1 - alpha) z + alpha [C^k z]_z, [C^k z]_p): M = diag(1 - alpha, 0) + diag(alpha, 1) C^k.
  """
  out = []
  for j in _jacobian_eigs(sigma, mu):
    Ck = np.linalg.matrix_power(_ogda_companion(eta, j), int(k))
    M = np.diag([1.0 - alpha, 0.0]) + np.diag([alpha, 1.0]) @ Ck
    out.append(np.linalg.eigvals(M))
  return np.concatenate(out)


def closed_form_eigenvalues(
  method: str,
  eta: float,
  sigma=1.0,
  mu: float = 0.0,
  sync_period: int | None = None,
  slow_step_size: float = 0.5,
  max_steps: int = 1,
) -> np.ndarray:
  r"""Exact update-operator eigenvalues of a method on the bilinear game.

  Game: :math:`x^\top A y + b^\top x + c^\top y + \tfrac{\mu}{2}(\|x\|^2 -
  \|y\|^2)` with ``A`` square, singular values ``sigma``; both players use
  the same step ``eta`` (``optax.sgd(eta)`` as the inner transform).

  Args:
    method: ``"gda"``, ``"altgda"``, ``"eg"`` or ``"ogda"`` (the base).
    eta: step size.
    sigma: singular values of ``A`` (scalar or array).
    mu: regularisation.
    sync_period: ``k`` for Lookahead over the base (``None``: the base alone).
    slow_step_size: ``alpha`` of Lookahead.
    max_steps: max-player steps of ``altgda``.

  Returns:
    Eigenvalues per step of the base, or per lookahead cycle. For ``ogda``
    they are those of the map on :math:`(z_t, u_{t-1})` (two per Jacobian
    eigenvalue); for lookahead over ``ogda`` they are those of the cycle map
    on :math:`(z, u_{\text{prev}})` (the zeros the slow copy adds are left out).

  References:
    Chavdarova et al., 2021, https://arxiv.org/abs/2006.14567 (section 3);
    Gidel et al., 2019, https://arxiv.org/abs/1807.04740 (AltGDA);
    Mokhtari et al., 2020, https://arxiv.org/abs/1901.08511 (OGDA/EG).
  """
  if method not in _METHODS:
    raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
  if sync_period is not None and int(sync_period) < 1:
    raise ValueError(f"sync_period must be >= 1, got {sync_period}")
  if not 0.0 < float(slow_step_size) <= 1.0:
    raise ValueError(f"slow_step_size must be in (0, 1], got {slow_step_size}")
  if method == "ogda" and sync_period is not None:
    e, s, m = _modes(eta, sigma, mu)
    return _lookahead_ogda_eigenvalues(e, s, m, int(sync_period), float(slow_step_size))
  base = {
    "gda": lambda: gda_eigenvalues(eta, sigma, mu),
    "eg": lambda: eg_eigenvalues(eta, sigma, mu),
    "ogda": lambda: ogda_eigenvalues(eta, sigma, mu),
    "altgda": lambda: altgda_eigenvalues(eta, sigma, mu, max_steps),
  }[method]()
  if sync_period is None:
    return base
  return lookahead_eigenvalues(base, sync_period, slow_step_size)


def spectral_radius(eigenvalues) -> float:
  """``max |eigenvalues|``."""
  return float(np.abs(np.asarray(eigenvalues)).max())


def per_step_rate(cycle_radius, sync_period) -> np.ndarray:
  r"""Per-step contraction rate :math:`\rho^{1/k}` of a ``k``-step cycle."""
  return np.asarray(cycle_radius, np.float64) ** (1.0 / np.asarray(sync_period, np.float64))


class RadiusGrid(NamedTuple):
  """Spectral radii over a grid (see :func:`spectral_radius_grid`).

  Attributes:
    step_sizes, sync_periods, slow_step_sizes: the grid axes (numpy).
    cycle_radius: ``(len(step_sizes), len(sync_periods), len(slow_step_sizes))``
      spectral radius of one lookahead cycle.
    per_step: ``cycle_radius ** (1/k)``, comparable across ``k``.
    base_radius: ``(len(step_sizes),)`` spectral radius of the base method.
  """

  step_sizes: np.ndarray
  sync_periods: np.ndarray
  slow_step_sizes: np.ndarray
  cycle_radius: np.ndarray
  per_step: np.ndarray
  base_radius: np.ndarray

  def best(self):
    """``(eta, k, alpha, per_step_rate)`` minimising the per-step rate."""
    i, j, l = np.unravel_index(np.argmin(self.per_step), self.per_step.shape)
    return (
      float(self.step_sizes[i]),
      int(self.sync_periods[j]),
      float(self.slow_step_sizes[l]),
      float(self.per_step[i, j, l]),
    )


def spectral_radius_grid(
  method: str,
  step_sizes: Sequence[float],
  sync_periods: Sequence[int],
  slow_step_sizes: Sequence[float] = (0.5,),
  sigma=1.0,
  mu: float = 0.0,
  max_steps: int = 1,
) -> RadiusGrid:
  r"""Scan Lookahead(k, alpha) over a base method on a grid of (eta, k, alpha).

  Uses :func:`closed_form_eigenvalues`; the per-step rate
  :math:`\rho_{\text{cycle}}^{1/k}` makes different ``k`` comparable. The best
  ``k`` for GDA is about :math:`\pi / \arg\lambda` (half a turn of the base
  rotation per cycle).

  Args:
    method: base method (``"gda"``, ``"altgda"``, ``"eg"``, ``"ogda"``).
    step_sizes, sync_periods, slow_step_sizes: the grid.
    sigma, mu, max_steps: as in :func:`closed_form_eigenvalues`.

  Returns:
    A :class:`RadiusGrid`.
  """
  etas = np.asarray(step_sizes, np.float64)
  ks = np.asarray(sync_periods, np.int64)
  alphas = np.asarray(slow_step_sizes, np.float64)
  cyc = np.empty((etas.size, ks.size, alphas.size))
  base = np.empty(etas.size)
  for i, eta in enumerate(etas):
    base[i] = spectral_radius(closed_form_eigenvalues(method, eta, sigma, mu, max_steps=max_steps))
    for j, k in enumerate(ks):
      for l, a in enumerate(alphas):
        cyc[i, j, l] = spectral_radius(
          closed_form_eigenvalues(
            method, eta, sigma, mu, sync_period=int(k), slow_step_size=a, max_steps=max_steps
          )
        )
  return RadiusGrid(etas, ks, alphas, cyc, per_step_rate(cyc, ks[None, :, None]), base)
