"""Linear games with closed-form equilibria: bilinear, quadratic, stochastic bilinear."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.games._players import Players, check_players


def _check_matrix(A: jax.Array) -> None:
  if jnp.ndim(A) != 2:
    raise ValueError(f"A must be a 2-D matrix, got shape {jnp.shape(A)}")


def _distances(params: Players, star: Players) -> dict[str, jax.Array]:
  dx = jnp.linalg.norm(params.min - star.min)
  dy = jnp.linalg.norm(params.max - star.max)
  return {"joint": jnp.sqrt(dx**2 + dy**2), "sum": dx + dy, "min": dx, "max": dy}


class BilinearGame(NamedTuple):
  r"""Zero-sum bilinear game :math:`f(x, y) = x^\top A y + b^\top x + c^\top y`.

  ``x = params.min`` (shape ``(n,)``) minimises, ``y = params.max`` (shape
  ``(m,)``) maximises. The descent field is
  :math:`v = (A y + b,\ -A^\top x - c)`, its Jacobian
  :math:`[[0, A], [-A^\top, 0]]` has eigenvalues :math:`\pm i\sigma_j(A)`.
  The equilibrium solves :math:`A y^* = -b`, :math:`A^\top x^* = -c`
  (least squares / minimum norm when ``A`` is singular).

  A NamedTuple of arrays: a batch of games is a leading axis and ``jax.vmap``
  maps over it.
  """

  A: jax.Array
  b: jax.Array
  c: jax.Array

  def loss(self, params: Players) -> jax.Array:
    x, y = params
    return x @ self.A @ y + self.b @ x + self.c @ y

  def equilibrium(self) -> Players:
    y = -jnp.linalg.pinv(self.A) @ self.b
    x = -jnp.linalg.pinv(self.A.T) @ self.c
    return Players(x, y)

  def distance(self, params: Players) -> dict[str, jax.Array]:
    """Distances to the equilibrium: joint ``||z-z*||``, ``sum`` (the paper's
    ``||x-x*|| + ||y-y*||``) and per player."""
    return _distances(check_players(params), self.equilibrium())


def bilinear(A, b=None, c=None) -> BilinearGame:
  """Bilinear game ``x^T A y + b^T x + c^T y``; ``b``, ``c`` default to zero."""
  A = jnp.asarray(A)
  _check_matrix(A)
  n, m = A.shape
  b = jnp.zeros(n, A.dtype) if b is None else jnp.asarray(b, A.dtype)
  c = jnp.zeros(m, A.dtype) if c is None else jnp.asarray(c, A.dtype)
  if b.shape != (n,) or c.shape != (m,):
    raise ValueError(
      f"b must have shape {(n,)} and c shape {(m,)} for A of shape"
      f" {A.shape}; got {b.shape} and {c.shape}"
    )
  return BilinearGame(A=A, b=b, c=c)


def random_bilinear(
  key: jax.Array,
  n: int,
  m: int | None = None,
  linear_terms: bool = True,
  dtype=None,
) -> BilinearGame:
  """Random bilinear game with ``A ~ N(0, 1/n)`` entries and ``N(0, 1/n)`` linear terms."""
  m = n if m is None else m
  if n < 1 or m < 1:
    raise ValueError(f"dimensions must be >= 1, got n={n}, m={m}")
  dtype = dtype or jnp.zeros(()).dtype
  ka, kb, kc = jax.random.split(key, 3)
  A = jax.random.normal(ka, (n, m), dtype) / jnp.sqrt(n)
  scale = 1.0 if linear_terms else 0.0
  b = scale * jax.random.normal(kb, (n,), dtype) / jnp.sqrt(n)
  c = scale * jax.random.normal(kc, (m,), dtype) / jnp.sqrt(n)
  return BilinearGame(A=A, b=b, c=c)


class QuadraticGame(NamedTuple):
  r"""The mu-regularised bilinear game
  :math:`f = x^\top A y + b^\top x + c^\top y + \tfrac{\mu}{2}(\|x\|^2 - \|y\|^2)`.

  The Jacobian of the descent field is :math:`[[\mu I, A], [-A^\top, \mu I]]`
  with eigenvalues :math:`\mu \pm i\sigma_j(A)`: ``mu > 0`` adds a potential
  (contracting) part to the purely rotational bilinear game. The equilibrium
  solves :math:`\mu x + A y = -b`, :math:`A^\top x - \mu y = -c`.
  """

  A: jax.Array
  b: jax.Array
  c: jax.Array
  mu: jax.Array

  def loss(self, params: Players) -> jax.Array:
    x, y = params
    return x @ self.A @ y + self.b @ x + self.c @ y + 0.5 * self.mu * (x @ x - y @ y)

  def equilibrium(self) -> Players:
    n, m = self.A.shape
    K = jnp.block(
      [
        [self.mu * jnp.eye(n, dtype=self.A.dtype), self.A],
        [self.A.T, -self.mu * jnp.eye(m, dtype=self.A.dtype)],
      ]
    )
    z = jnp.linalg.lstsq(K, -jnp.concatenate([self.b, self.c]))[0]
    return Players(z[:n], z[n:])

  def distance(self, params: Players) -> dict[str, jax.Array]:
    return _distances(check_players(params), self.equilibrium())


def quadratic(A, mu, b=None, c=None) -> QuadraticGame:
  """mu-regularised bilinear game; see :class:`QuadraticGame`."""
  g = bilinear(A, b, c)
  return QuadraticGame(A=g.A, b=g.b, c=g.c, mu=jnp.asarray(mu, g.A.dtype))


class StochasticBilinearGame(NamedTuple):
  r"""Finite-sum bilinear game of Chavdarova et al. (2019, 2021).

  Components :math:`f_i(x, y) = x^\top e_i e_i^\top y + a_i^\top x + b_i^\top
  y`, :math:`i = 1..n`, with ``n = d``. The minibatch oracle SUMS the sampled
  components (as the paper's code does), so the full batch is
  :math:`x^\top y + (\sum_i a_i)^\top x + (\sum_i b_i)^\top y` and a batch of
  size ``B`` has expected field ``(B/n)`` times the full field. The
  equilibrium is :math:`x^* = -\sum_i b_i`, :math:`y^* = -\sum_i a_i`.

  ``loss(params, indices)`` sums the components in ``indices`` (an int array;
  ``None`` = full batch).
  """

  a: jax.Array  # (n, d)
  b: jax.Array  # (n, d)

  @property
  def num_components(self) -> int:
    return self.a.shape[0]

  def loss(self, params: Players, indices: jax.Array | None = None) -> jax.Array:
    x, y = params
    if indices is None:
      return x @ y + jnp.sum(self.a, 0) @ x + jnp.sum(self.b, 0) @ y
    return jnp.sum(x[indices] * y[indices] + self.a[indices] @ x + self.b[indices] @ y)

  def sample(self, key: jax.Array, batch_size: int) -> jax.Array:
    """Indices of a minibatch drawn uniformly without replacement."""
    n = self.num_components
    if not 1 <= batch_size <= n:
      raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    return jax.random.choice(key, n, (batch_size,), replace=False)

  def equilibrium(self) -> Players:
    return Players(-jnp.sum(self.b, 0), -jnp.sum(self.a, 0))

  def distance(self, params: Players) -> dict[str, jax.Array]:
    return _distances(check_players(params), self.equilibrium())


def stochastic_bilinear(a, b) -> StochasticBilinearGame:
  """Finite-sum bilinear game from component vectors ``a, b`` of shape ``(d, d)``."""
  a, b = jnp.asarray(a), jnp.asarray(b)
  if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape != b.shape:
    raise ValueError(
      "a and b must both have shape (d, d) (one component per coordinate);"
      f" got {a.shape} and {b.shape}"
    )
  return StochasticBilinearGame(a, b)


def random_stochastic_bilinear(key: jax.Array, d: int = 100, dtype=None):
  """The paper's stochastic problem: ``a_i, b_i ~ N(0, I/d)``, plus a start
  point ``Players(x0, y0)`` with ``x0, y0 ~ N(0, I/d)``."""
  if d < 1:
    raise ValueError(f"d must be >= 1, got {d}")
  dtype = dtype or jnp.zeros(()).dtype
  ka, kb, kx, ky = jax.random.split(key, 4)
  s = 1.0 / jnp.sqrt(d)
  game = StochasticBilinearGame(
    s * jax.random.normal(ka, (d, d), dtype), s * jax.random.normal(kb, (d, d), dtype)
  )
  start = Players(s * jax.random.normal(kx, (d,), dtype), s * jax.random.normal(ky, (d,), dtype))
  return game, start
