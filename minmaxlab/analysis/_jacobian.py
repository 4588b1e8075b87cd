"""The game Jacobian: dense for small games, matrix-free (JVP/VJP + ARPACK) for large ones."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

FieldFn = Callable[..., Any]


def _flat_field(field: FieldFn, params: Any):
  """``(w0, f)`` with ``w0`` the flattened params and ``f(w, *args)`` the flattened field."""
  w0, unravel = ravel_pytree(params)

  def f(w, *args):
    out = field(unravel(w), *args)
    flat, _ = ravel_pytree(out)
    if flat.shape != w.shape:
      raise ValueError(
        "field(params, *args) must return a pytree shaped like params (the descent"
        f" field, a Players); got {flat.shape[0]} values for {w.shape[0]} parameters"
      )
    return flat

  return w0, f


@functools.lru_cache(maxsize=32)
def _compiled(field: FieldFn, treedef, leaf_specs, kind: str):
  """Jitted ``jacfwd``/``jvp``/``vjp`` of a field for one params layout.

  Cached on the field and the layout, so repeated analyses of the same game
  (several checkpoints, ARPACK after a dense check) compile once.
  """
  template = jax.tree.unflatten(treedef, [jnp.zeros(s, d) for s, d in leaf_specs])
  _, f = _flat_field(field, template)
  if kind == "jacobian":
    return jax.jit(jax.jacfwd(f))
  if kind == "jvp":
    return jax.jit(lambda w, u, *a: jax.jvp(lambda w_: f(w_, *a), (w,), (u,))[1])
  return jax.jit(lambda w, u, *a: jax.vjp(lambda w_: f(w_, *a), w)[1](u)[0])


def _get(field, params, kind):
  leaves, treedef = jax.tree.flatten(params)
  specs = tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)
  try:
    return _compiled(field, treedef, specs, kind)
  except TypeError:  # an unhashable callable: no caching
    return _compiled.__wrapped__(field, treedef, specs, kind)


def jacobian(field: FieldFn, params: Any, *args: Any) -> jax.Array:
  r"""Dense Jacobian of the descent field over the flattened joint parameters.

  With :math:`z = (x, y)` the joint parameters flattened by
  ``jax.flatten_util.ravel_pytree`` (the ``min`` player first) and
  :math:`v(z)` the descent field (``minmaxlab.vector_field``),

  .. math::
    J(z) = \frac{\partial v}{\partial z} =
    \begin{pmatrix} \nabla^2_{xx} \ell_{\min} & \nabla^2_{xy} \ell_{\min} \\
                    \nabla^2_{yx} \ell_{\max} & \nabla^2_{yy} \ell_{\max}
    \end{pmatrix}.

  For the bilinear game :math:`x^\top A y` it is
  :math:`[[0, A], [-A^\top, 0]]`, eigenvalues :math:`\pm i \sigma_j(A)`.
  Computed by ``jax.jacfwd`` (forward over reverse): one JVP per parameter,
  for small games (up to a few thousand parameters); use
  :func:`top_eigenvalues` for large ones.

  Args:
    field: ``field(params, *args) -> Players`` (descent directions).
    params: the point (a ``Players``).
    *args: extra arguments of ``field`` (a fixed batch, noise...).

  Returns:
    ``J`` of shape ``(n, n)``, ``n`` the number of parameters.

  References:
    Balduzzi et al., 2018, "The Mechanics of n-Player Differentiable Games",
    https://arxiv.org/abs/1802.05642
  """
  w0, _ = ravel_pytree(params)
  return _get(field, params, "jacobian")(w0, *args)


def jvp_operator(field: FieldFn, params: Any, *args: Any) -> Callable[[jax.Array], jax.Array]:
  r"""Matrix-free :math:`u \mapsto J u`, jitted.

  A jitted ``jax.jvp`` of the field (forward over reverse) at ``params``, on
  flat vectors of the ``ravel_pytree`` layout; compiled once, the point and
  ``args`` are passed as arguments (not baked in as constants). Cost per
  product: about two field evaluations.

  Args:
    field: ``field(params, *args) -> Players``.
    params: the point.
    *args: extra arguments of ``field``.

  Returns:
    ``matvec(u) -> J @ u`` on flat vectors of length ``n``.
  """
  w0, _ = ravel_pytree(params)
  jvp = _get(field, params, "jvp")
  return lambda u: jvp(w0, jnp.asarray(u, w0.dtype), *args)


def vjp_operator(field: FieldFn, params: Any, *args: Any) -> Callable[[jax.Array], jax.Array]:
  r"""Matrix-free :math:`u \mapsto J^\top u`, jitted (``jax.vjp`` of the field).

  Args:
    field: ``field(params, *args) -> Players``.
    params: the point.
    *args: extra arguments of ``field``.

  Returns:
    ``rmatvec(u) -> J.T @ u`` on flat vectors of length ``n``.
  """
  w0, _ = ravel_pytree(params)
  vjp = _get(field, params, "vjp")
  return lambda u: vjp(w0, jnp.asarray(u, w0.dtype), *args)


Which = Literal["LM", "LI", "LR"]
_WHICH = {"LM": lambda e: np.abs(e), "LI": lambda e: np.abs(e.imag), "LR": lambda e: e.real}


def top_eigenvalues(
  field: FieldFn,
  params: Any,
  *args: Any,
  k: int = 6,
  which: Which = "LM",
  tol: float | None = None,
  ncv: int | None = None,
  maxiter: int | None = None,
  key: jax.Array | None = None,
  return_eigenvectors: bool = False,
):
  r"""Top-``k`` eigenvalues of the game Jacobian, matrix-free.

  Implicitly restarted Arnoldi (ARPACK, ``scipy.sparse.linalg.eigs``) on a
  ``LinearOperator`` whose ``matvec`` is the jitted JVP of the field
  (:func:`jvp_operator`), in the style of Berard et al. (2020). The game
  Jacobian is not symmetric, so its eigenvalues are complex (conjugate
  pairs). ARPACK runs in float64; the products are computed in the params'
  dtype. Each Arnoldi iteration is one JVP (timings: docs/benchmarks.md).
  ``"LI"`` converges slowly when the ``k``-th eigenvalue sits in a cluster of
  similar imaginary parts: ask for fewer.

  Args:
    field: ``field(params, *args) -> Players``.
    params: the point.
    *args: extra arguments of ``field`` (e.g. a fixed batch and noise).
    k: number of eigenvalues (``< n - 1``).
    which: ``"LM"`` largest magnitude, ``"LI"`` largest imaginary part
      (the most rotational directions), ``"LR"`` largest real part.
    tol: ARPACK relative tolerance of the Ritz values. Default: ``0``
      (machine precision) for float64 params; ``1e-5`` for float32 params,
      whose Jacobian products are only float32-accurate (asking for float64
      precision there makes ARPACK restart until ``maxiter``).
    ncv: Arnoldi basis size (default ``max(2k + 1, 20)``, at most ``n``).
    maxiter: ARPACK restarts limit (default scipy's).
    key: PRNG key for the starting vector (default ``jax.random.key(0)``),
      so the result is reproducible.
    return_eigenvectors: also return the ``(n, k)`` eigenvectors.

  Returns:
    ``eigenvalues`` (numpy complex, sorted by the ``which`` criterion,
    largest first), and the eigenvectors if asked.

  References:
    Berard et al., 2020, "A Closer Look at the Optimization Landscapes of
    Generative Adversarial Networks", https://arxiv.org/abs/1906.04848
  """
  from scipy.sparse.linalg import LinearOperator, eigs  # noqa: PLC0415

  if which not in get_args(Which):
    raise ValueError(f"which must be one of {get_args(Which)}, got {which!r}")
  w0, _ = ravel_pytree(params)
  n = int(w0.shape[0])
  if not 1 <= k < n - 1:
    raise ValueError(f"k must be in [1, {n - 2}] for {n} parameters, got {k}")
  dtype = w0.dtype
  matvec = _float64_matvec(jvp_operator(field, params, *args), dtype)
  op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
  key = jax.random.key(0) if key is None else key
  v0 = np.asarray(jax.random.normal(key, (n,), jnp.float32), np.float64)
  ncv = min(n, max(2 * k + 1, 20)) if ncv is None else ncv
  if tol is None:
    tol = 0.0 if jnp.finfo(dtype).bits >= 64 else 1e-5
  out = eigs(
    op,
    k=k,
    which=which,
    tol=tol,
    ncv=ncv,
    maxiter=maxiter,
    v0=v0,
    return_eigenvectors=return_eigenvectors,
  )
  vals, vecs = out if return_eigenvectors else (out, None)
  order = np.argsort(-_WHICH[which](vals), kind="stable")
  if return_eigenvectors:
    return vals[order], vecs[:, order]
  return vals[order]


def _float64_matvec(matvec_jax, dtype):
  """ARPACK's ``matvec``: float64 (or complex) numpy vectors in and out, the product
  computed by ``matvec_jax`` in ``dtype``."""

  def matvec(u):
    u = np.asarray(u)
    if np.iscomplexobj(u):  # ARPACK may ask for complex products; J is real
      re = np.asarray(matvec_jax(jnp.asarray(u.real, dtype)), np.float64)
      im = np.asarray(matvec_jax(jnp.asarray(u.imag, dtype)), np.float64)
      return re + 1j * im
    return np.asarray(matvec_jax(jnp.asarray(u.reshape(-1), dtype)), np.float64)

  return matvec


def decompose(J: jax.Array) -> tuple[jax.Array, jax.Array]:
  r"""Split a game Jacobian into its potential and rotational parts.

  .. math::
    J = S + A, \qquad S = \tfrac12 (J + J^\top), \qquad A = \tfrac12 (J - J^\top).

  ``S`` (symmetric) is the potential part: with ``A = 0`` the game is a
  potential game and GDA is gradient descent. ``A`` (antisymmetric) is the
  rotational (Hamiltonian) part that makes GDA cycle; the bilinear game is
  purely rotational (``S = 0``).

  Args:
    J: a square matrix.

  Returns:
    ``(S, A)``.

  References:
    Balduzzi et al., 2018, https://arxiv.org/abs/1802.05642
  """
  J = jnp.asarray(J)
  if J.ndim != 2 or J.shape[0] != J.shape[1]:
    raise ValueError(f"J must be a square matrix, got shape {J.shape}")
  return 0.5 * (J + J.T), 0.5 * (J - J.T)


def eigenvalue_angles(eigenvalues) -> np.ndarray:
  r"""Angle of each eigenvalue of ``J`` from the positive real axis, in ``[0, pi]``.

  :math:`\theta = \operatorname{atan2}(|\Im\lambda|, \Re\lambda)`: ``0`` for a
  purely contracting (potential) direction, :math:`\pi/2` for a purely
  rotational one (the bilinear game), above :math:`\pi/2` for an expanding
  one. Gradient descent-ascent with small step ``eta`` contracts a direction
  iff :math:`\theta < \pi/2` (:math:`|1 - \eta\lambda| < 1`), and the
  closer :math:`\theta` is to :math:`\pi/2` the smaller the admissible step.
  """
  e = np.asarray(eigenvalues)
  return np.arctan2(np.abs(e.imag), e.real)


class JacobianSummary(NamedTuple):
  """Summary measures of a game Jacobian (see :func:`summarize_jacobian`).

  Attributes:
    symmetric_norm: :math:`\\|S\\|_F`.
    antisymmetric_norm: :math:`\\|A\\|_F`.
    rotation_ratio: :math:`\\|A\\|_F / (\\|S\\|_F + \\|A\\|_F)` in ``[0, 1]``
      (0 = potential game, 1 = purely rotational, e.g. bilinear).
    eigenvalues: eigenvalues of ``J`` (numpy complex).
    angles: :func:`eigenvalue_angles` of the eigenvalues.
    max_angle: the largest angle (``pi/2`` for a purely rotational game).
  """

  symmetric_norm: float
  antisymmetric_norm: float
  rotation_ratio: float
  eigenvalues: np.ndarray
  angles: np.ndarray
  max_angle: float


def summarize_jacobian(J) -> JacobianSummary:
  r"""Potential vs rotational content of a game Jacobian.

  The rotation ratio

  .. math::
    r = \frac{\|A\|_F}{\|S\|_F + \|A\|_F} \in [0, 1]

  is 0 for a potential game (``J`` symmetric) and 1 for a purely rotational
  game (bilinear: ``S = 0``); for the mu-regularised bilinear game
  :math:`[[\mu I, B], [-B^\top, \mu I]]`, :math:`r = \|B\|_F\sqrt2 /
  (\mu\sqrt{2n} + \|B\|_F\sqrt2)`. The eigenvalue angles (see
  :func:`eigenvalue_angles`) measure rotation direction by direction.

  Args:
    J: the (dense) game Jacobian.

  Returns:
    A :class:`JacobianSummary`.
  """
  S, A = decompose(J)
  s, a = float(jnp.linalg.norm(S)), float(jnp.linalg.norm(A))
  eigs = np.linalg.eigvals(np.asarray(J, np.float64))
  angles = eigenvalue_angles(eigs)
  ratio = a / (s + a) if s + a > 0 else 0.0
  return JacobianSummary(
    symmetric_norm=s,
    antisymmetric_norm=a,
    rotation_ratio=ratio,
    eigenvalues=eigs,
    angles=angles,
    max_angle=float(angles.max(initial=0.0)),
  )
