r"""Game dynamics of a live model at a fixed batch: matrix-free and jittable.

:func:`game_dynamics` measures, with Jacobian-vector products only (no dense
Jacobian, no host loop), the three things that decide how a first-order game
optimizer behaves near the current point:

* the outer eigenvalues of the game Jacobian :math:`J` (Arnoldi: the Krylov
  space of ``eigen_iterations`` power iterations, fully re-orthogonalised), by
  modulus and by imaginary part (the rotation frequencies);
* the rotational share :math:`\|A\|_F / (\|S\|_F + \|A\|_F)` of
  :math:`J = S + A` (Hutchinson's estimator with Rademacher probes, or exact
  with the basis vectors);
* the spectral radius of a scheme's update operator at its step sizes: GDA
  :math:`I - \eta J`, extragradient :math:`I - \eta J + (\eta J)^2`,
  alternating GDA (max player first) and Lookahead's cycle
  :math:`I + \alpha(T^k - I)` over each (Arnoldi on the operator, applied
  through JVPs).

:func:`arnoldi_eigenvalues` is the generic piece: Ritz values of any jittable
``matvec``. The ARPACK-based :func:`top_eigenvalues` converges to a requested
tolerance but runs on the host and cannot be jitted; these run a stated number
of iterations inside ``jax.jit``, for logging during training.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from minmaxlab.analysis._arnoldi import arnoldi_eigenvalues
from minmaxlab.games import Players

DynamicsScheme = Literal["gda", "extragradient", "alternating"]
DYNAMICS_SCHEMES: tuple[str, ...] = get_args(DynamicsScheme)


class GameDynamics(NamedTuple):
  """What :func:`game_dynamics` measures (JAX arrays; :meth:`row` for logging).

  Attributes:
    eigenvalues: ``(k,)`` complex Ritz values of the game Jacobian ``J``,
      largest modulus first.
    eigenvalue_residuals: ``(k,)`` their residual norms (small = converged).
    rotational_eigenvalues: ``(k,)`` the Ritz values with the largest
      imaginary parts (the upper half plane: one per conjugate pair), largest
      first.
    max_imag: the largest :math:`|\\Im\\lambda|` over all Ritz values.
    rotation_share: estimate of :math:`\\|A\\|_F / (\\|S\\|_F + \\|A\\|_F)`
      (0 = potential game, 1 = purely rotational).
    frobenius_sq: estimate of :math:`\\|J\\|_F^2`.
    trace_jj: estimate of :math:`\\operatorname{tr}(J J)`.
    frobenius_sq_stderr, trace_jj_stderr: standard errors of the two
      (0 with exact traces).
    spectral_radius: of the scheme's update operator (per Lookahead cycle);
      NaN without a scheme.
    log_spectral_radius: its logarithm, computed from the Ritz values of
      ``T - I`` without cancellation (accurate when the radius is near 1).
    spectral_radius_per_step: ``spectral_radius ** (1 / sync_period)`` with
      Lookahead, else ``spectral_radius``.
    operator_eigenvalues: ``(k,)`` outer Ritz values of the update operator,
      largest modulus first.

  **Eigenvalues of J.** :func:`arnoldi_eigenvalues` on :math:`u \\mapsto Ju`
  with ``eigen_iterations`` products: the ``num_eigenvalues`` Ritz values of
  largest modulus and those of largest imaginary part, with their residuals.
  The outer eigenvalues converge first; the residuals say how far.

  **Rotational share.** With :math:`J = S + A` (:func:`decompose`),
  :math:`\\|S\\|_F^2 = (\\|J\\|_F^2 + \\operatorname{tr} J^2)/2` and
  :math:`\\|A\\|_F^2 = (\\|J\\|_F^2 - \\operatorname{tr} J^2)/2`, and both
  :math:`\\|J\\|_F^2 = E\\|Jv\\|^2` and :math:`\\operatorname{tr} J^2 = E[v^\\top J J v]`
  for Rademacher :math:`v` (Hutchinson): two JVPs per probe. The share is the
  ratio of the square roots of the (clipped at 0) estimates; with
  ``num_probes=None`` the probes are the ``n`` basis vectors and the traces
  exact (small games).

  **Update operator.** The linearisation :math:`T` of one step of ``scheme``
  with SGD steps ``eta`` (exact on a linear game; on a nonlinear game, the
  linear game with :math:`J` at ``params``):

  * ``"gda"``: :math:`T = I - \\eta J`;
  * ``"extragradient"``: :math:`T = I - \\eta J (I - \\eta J)`;
  * ``"alternating"``: ``max_steps`` max-player steps, then the min player at
    the new max point: :math:`T = T_{\\min} T_{\\max}^{n}`, :math:`T_p = I - \\eta P_p J`
    with :math:`P_p` the player's coordinates (``minmaxlab.alternating``);
  * ``sync_period=k``: Lookahead's cycle :math:`I + \\alpha(T^k - I)`
    (``slow_step_size`` :math:`\\alpha`), ``k`` steps of the base per product.

  ``eta`` may differ per coordinate (``step_size``: a scalar, a ``Players`` of
  two scalars, one per player, or per-coordinate values, e.g. Adam's
  effective steps). The radius comes from :func:`arnoldi_eigenvalues` on
  :math:`T - I` (``radius_iterations`` products; Krylov spaces are shift
  invariant, and :math:`\\log\\rho = \\max \\tfrac12 \\log(1 + 2\\Re\\delta + |\\delta|^2)`
  over its Ritz values :math:`\\delta` keeps the digits when
  :math:`\\rho \\approx 1`). The outer eigenvalues converge first; the radius
  is a lower estimate until they have.

  References:
    Balduzzi et al., 2018, https://arxiv.org/abs/1802.05642 (S/A split);
    Hutchinson, 1989 (trace estimator); Berard et al., 2020,
    https://arxiv.org/abs/1906.04848 (Jacobian spectra of GANs);
    Chavdarova et al., 2021, https://arxiv.org/abs/2006.14567 (Lookahead's
    operator).
  """

  eigenvalues: jax.Array
  eigenvalue_residuals: jax.Array
  rotational_eigenvalues: jax.Array
  max_imag: jax.Array
  rotation_share: jax.Array
  frobenius_sq: jax.Array
  trace_jj: jax.Array
  frobenius_sq_stderr: jax.Array
  trace_jj_stderr: jax.Array
  spectral_radius: jax.Array
  log_spectral_radius: jax.Array
  spectral_radius_per_step: jax.Array
  operator_eigenvalues: jax.Array

  def row(self, prefix: str = "dynamics/") -> dict[str, Any]:
    """A metrics row: the scalars as floats (``top_abs`` = :math:`|\\lambda_0|`; the
    radius fields only with a scheme) and the eigenvalues as lists of real and
    imaginary parts (TensorBoard and ``save_metric_curves`` take the scalars only)."""
    g = jax.device_get(self)
    out: dict[str, Any] = {
      "rotation_share": g.rotation_share,
      "max_imag": g.max_imag,
      "top_abs": np.abs(g.eigenvalues[0]),
      "frobenius_sq": g.frobenius_sq,
      "trace_jj": g.trace_jj,
    }
    if not np.isnan(g.spectral_radius):
      out["spectral_radius"] = g.spectral_radius
      out["log_spectral_radius"] = g.log_spectral_radius
      out["spectral_radius_per_step"] = g.spectral_radius_per_step
    out = {k: float(v) for k, v in out.items()}
    lists = {
      "eigenvalues": g.eigenvalues,
      "rotational_eigenvalues": g.rotational_eigenvalues,
      "operator_eigenvalues": g.operator_eigenvalues,
    }
    for name, vals in lists.items():
      if not np.all(np.isnan(vals)):
        out[name + "_re"] = [float(v) for v in np.real(vals)]
        out[name + "_im"] = [float(v) for v in np.imag(vals)]
    out["eigenvalue_residuals"] = [float(v) for v in g.eigenvalue_residuals]
    return {prefix + k: v for k, v in out.items()}


def _per_coordinate(step_size, params, n: int, dtype) -> jax.Array:
  """A flat ``(n,)`` vector of step sizes from a scalar, a ``Players`` of scalars
  (one per player), a flat vector, or a pytree shaped like ``params``."""

  def broadcast(s, tree):
    leaves = jax.tree.leaves(s)
    if len(leaves) == 1 and jnp.ndim(leaves[0]) == 0:
      s = jax.tree.map(lambda x: jnp.full(jnp.shape(x), leaves[0], dtype), tree)
    return ravel_pytree(s)[0]

  if isinstance(step_size, Players) and isinstance(params, Players):
    eta = jnp.concatenate(
      [broadcast(step_size.min, params.min), broadcast(step_size.max, params.max)]
    )
  elif jnp.ndim(step_size) == 0 and not isinstance(step_size, (Players, dict, list, tuple)):
    eta = jnp.full((n,), step_size, dtype)
  elif isinstance(step_size, jax.Array | np.ndarray) and jnp.ndim(step_size) == 1:
    eta = jnp.asarray(step_size, dtype)
  else:
    eta = ravel_pytree(step_size)[0]
  if eta.shape != (n,):
    raise ValueError(f"step_size gives {eta.shape[0]} step sizes for {n} parameters")
  return eta.astype(dtype)


def _increment_operator(jvp, eta, min_mask, scheme, max_steps, sync_period, slow_step_size):
  """``v -> (T - I) v`` of the scheme's linearised update, without forming ``T v - v``."""
  if scheme == "gda":

    def base(v):
      return -eta * jvp(v)
  elif scheme == "extragradient":

    def base(v):
      return -eta * jvp(v - eta * jvp(v))
  elif scheme == "alternating":
    max_mask = 1 - min_mask

    def base(v):  # max_steps max-player steps at the old min point, then the min player
      def step(i, d):
        return d - jnp.where(i < max_steps, max_mask, min_mask) * eta * jvp(v + d)

      return jax.lax.fori_loop(0, max_steps + 1, step, jnp.zeros_like(v))
  else:
    raise ValueError(f"scheme must be one of {DYNAMICS_SCHEMES} or None, got {scheme!r}")
  if sync_period is None:
    return base

  def lookahead(v):  # (T^k - I) v = sum_{j<k} T^j (T - I) v
    def step(_, ws):
      w, s = ws
      w = w + base(w)
      return w, s + w

    w = base(v)
    _, s = jax.lax.fori_loop(0, sync_period - 1, step, (w, w))
    return slow_step_size * s

  return lookahead


def game_dynamics(
  field: Callable[..., Any],
  params: Any,
  *args: Any,
  key: jax.Array,
  num_eigenvalues: int = 4,
  eigen_iterations: int = 20,
  num_probes: int | None = 8,
  scheme: DynamicsScheme | None = "gda",
  step_size: Any = 1e-3,
  max_steps: int = 1,
  sync_period: int | None = None,
  slow_step_size: float = 0.5,
  radius_iterations: int = 20,
) -> GameDynamics:
  r"""Eigenvalues, rotational share and update-operator radius of a game at a point.

  Everything is computed from Jacobian-vector products of ``field`` at
  ``params`` (``jax.linearize``: one forward pass, then one JVP per product),
  with ``args`` (the batch) fixed, so the function can be jitted::

    dyn = jax.jit(functools.partial(game_dynamics, field, scheme="alternating",
                                    step_size=Players(2e-4, 2e-4)))
    out = dyn(params, real, z, key=jax.random.key(0))

  What each estimate is and how it is computed (Arnoldi on ``J``, Hutchinson's rotational
  share, each scheme's update operator and Lookahead's cycle, the radius from the Ritz values
  of ``T - I``): :class:`GameDynamics`.

  Cost in JVPs (each about two field evaluations): ``eigen_iterations`` +
  ``2 num_probes`` + ``radius_iterations`` times (1 GDA, 2 EG,
  ``max_steps + 1`` alternating) times ``sync_period``.

  Args:
    field: ``field(params, *args) -> Players`` (descent directions, e.g.
      ``minmaxlab.vector_field(loss)``).
    params: the point (a ``Players``; ``"alternating"`` needs one).
    *args: the fixed batch (any extra arguments of ``field``).
    key: PRNG key of every random choice (Arnoldi starts, probes).
    num_eigenvalues: ``k`` eigenvalues reported (``<= eigen_iterations``).
    eigen_iterations: Arnoldi steps on ``J``.
    num_probes: Rademacher probes, or ``None`` for exact traces.
    scheme: ``"gda"``, ``"extragradient"``, ``"alternating"`` or ``None``
      (no radius: the radius fields are NaN).
    step_size: the step size(s) ``eta`` (see above).
    max_steps: max-player steps of ``"alternating"``.
    sync_period: Lookahead's ``k`` (``None``: no Lookahead).
    slow_step_size: Lookahead's ``alpha``.
    radius_iterations: Arnoldi steps on the update operator.

  Returns:
    A :class:`GameDynamics`.
  """
  _check_settings(params, scheme, sync_period, max_steps, num_probes)
  w0, unravel = ravel_pytree(params)
  n, dtype = int(w0.shape[0]), w0.dtype
  k = _check_count(num_eigenvalues, eigen_iterations, n)

  def flat_field(w):
    flat, _ = ravel_pytree(field(unravel(w), *args))
    return flat

  _, jvp = jax.linearize(flat_field, w0)
  k_eig, k_probe, k_op = jax.random.split(key, 3)
  ritz = arnoldi_eigenvalues(jvp, n, k_eig, eigen_iterations, dtype)  # eigenvalues of J
  by_imag = jnp.lexsort((-jnp.abs(ritz.values), -ritz.values.imag))
  rotation = _rotation(jvp, n, dtype, k_probe, num_probes)
  step = _Scheme(
    scheme=scheme, step_size=step_size, max_steps=int(max_steps), sync_period=sync_period,
    slow_step_size=slow_step_size, radius_iterations=radius_iterations,
  )  # fmt: skip
  radius = _radius(jvp, params, step, k_op, k, n, dtype, ritz.values.dtype)
  return GameDynamics(
    eigenvalues=ritz.values[:k],
    eigenvalue_residuals=ritz.residuals[:k],
    rotational_eigenvalues=ritz.values[by_imag[:k]],
    max_imag=jnp.max(jnp.abs(ritz.values.imag)),
    **rotation._asdict(),
    **radius._asdict(),
  )


def _check_settings(params, scheme, sync_period, max_steps, num_probes) -> None:
  """``ValueError`` (one line) for a setting :func:`game_dynamics` cannot use."""
  if scheme is not None and scheme not in DYNAMICS_SCHEMES:
    raise ValueError(f"scheme must be one of {DYNAMICS_SCHEMES} or None, got {scheme!r}")
  if scheme == "alternating" and not isinstance(params, Players):
    raise ValueError("scheme='alternating' needs params as a Players")
  if sync_period is not None and int(sync_period) < 1:
    raise ValueError(f"sync_period must be >= 1, got {sync_period}")
  if int(max_steps) < 1:
    raise ValueError(f"max_steps must be >= 1, got {max_steps}")
  if num_probes is not None and int(num_probes) < 1:
    raise ValueError(f"num_probes must be >= 1 or None, got {num_probes}")


def _check_count(num_eigenvalues, eigen_iterations, n: int) -> int:
  """``num_eigenvalues`` as an int, ``ValueError`` unless in ``[1, min(eigen_iterations, n)]``."""
  k = int(num_eigenvalues)
  if not 1 <= k <= min(int(eigen_iterations), n):
    raise ValueError(
      f"num_eigenvalues must be in [1, min(eigen_iterations, n) = "
      f"{min(int(eigen_iterations), n)}], got {num_eigenvalues}"
    )
  return k


class _Rotation(NamedTuple):
  """The rotational share and its two traces (the fields of :class:`GameDynamics`)."""

  rotation_share: jax.Array
  frobenius_sq: jax.Array
  trace_jj: jax.Array
  frobenius_sq_stderr: jax.Array
  trace_jj_stderr: jax.Array


def _rotation(jvp, n: int, dtype, key, num_probes: int | None) -> _Rotation:
  """Hutchinson's estimates of :math:`\\|J\\|_F^2 = E\\|Jv\\|^2` and
  :math:`\\operatorname{tr} J^2 = E[v^\\top J J v]` (Rademacher ``v``, or the ``n`` basis
  vectors with ``num_probes=None``: exact), and the share they give."""
  if num_probes is None:
    probes, scale = jnp.eye(n, dtype=dtype), float(n)
  else:
    probes = jax.random.rademacher(key, (int(num_probes), n), dtype)
    scale = 1.0

  def probe(v):
    jv = jvp(v)
    return jnp.vdot(jv, jv), jnp.vdot(v, jvp(jv))

  f_i, t_i = jax.vmap(probe)(probes)
  f_i, t_i = scale * f_i, scale * t_i
  p = f_i.shape[0]
  frob, trace = jnp.mean(f_i), jnp.mean(t_i)
  if num_probes is None or p < 2:
    f_err = t_err = jnp.zeros((), dtype) if num_probes is None else jnp.full((), jnp.nan, dtype)
  else:
    f_err = jnp.std(f_i, ddof=1) / np.sqrt(p)
    t_err = jnp.std(t_i, ddof=1) / np.sqrt(p)
  a_norm = jnp.sqrt(jnp.maximum((frob - trace) / 2, 0))
  s_norm = jnp.sqrt(jnp.maximum((frob + trace) / 2, 0))
  total = a_norm + s_norm
  share = jnp.where(total > 0, a_norm / jnp.where(total > 0, total, 1), 0)
  return _Rotation(
    rotation_share=share,
    frobenius_sq=frob,
    trace_jj=trace,
    frobenius_sq_stderr=f_err,
    trace_jj_stderr=t_err,
  )


class _Radius(NamedTuple):
  """The update operator's radius fields of :class:`GameDynamics`."""

  spectral_radius: jax.Array
  log_spectral_radius: jax.Array
  spectral_radius_per_step: jax.Array
  operator_eigenvalues: jax.Array


class _Scheme(NamedTuple):
  """The update operator's settings (:func:`game_dynamics`'s arguments of the same names)."""

  scheme: str | None
  step_size: Any
  max_steps: int
  sync_period: int | None
  slow_step_size: float
  radius_iterations: int


def _radius(jvp, params, step: _Scheme, key, k: int, n: int, dtype, complex_dtype) -> _Radius:
  """The spectral radius of the update operator :math:`T` of ``step.scheme`` (NaN without
  one) from the Ritz values :math:`\\delta` of :math:`T - I`: :math:`\\log\\rho = \\max
  \\tfrac12 \\log(1 + 2\\Re\\delta + |\\delta|^2)`, per step with Lookahead."""
  if step.scheme is None:
    nan = jnp.full((), jnp.nan, dtype)
    return _Radius(
      spectral_radius=nan,
      log_spectral_radius=nan,
      spectral_radius_per_step=nan,
      operator_eigenvalues=jnp.full((k,), jnp.nan, complex_dtype),
    )
  eta = _per_coordinate(step.step_size, params, n, dtype)
  n_min = ravel_pytree(params.min)[0].shape[0] if isinstance(params, Players) else n
  min_mask = (jnp.arange(n) < n_min).astype(dtype)
  sync = None if step.sync_period is None else int(step.sync_period)
  increment = _increment_operator(
    jvp, eta, min_mask, step.scheme, step.max_steps, sync, step.slow_step_size
  )
  delta = arnoldi_eigenvalues(increment, n, key, step.radius_iterations, dtype).values
  log_mod = 0.5 * jnp.log1p(2 * delta.real + jnp.abs(delta) ** 2)
  log_radius = jnp.max(log_mod)
  radius = jnp.exp(log_radius)
  per_step = jnp.exp(log_radius / (1 if sync is None else sync))
  op_eigs = (1 + delta)[jnp.argsort(-log_mod, stable=True)[:k]]
  return _Radius(
    spectral_radius=radius,
    log_spectral_radius=log_radius,
    spectral_radius_per_step=per_step,
    operator_eigenvalues=op_eigs,
  )
