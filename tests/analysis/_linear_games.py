"""Linear games ``v(z) = M z`` for the game_dynamics tests (one jitted program per config).

``M`` is the game Jacobian: ``[[mu I, A], [-A^T, mu I]]`` is the (mu-regularised)
bilinear game, a block-diagonal symmetric positive definite ``M`` a potential
game. ``M`` and the step size are arguments of the jitted program, so every game
of a test file shares one compilation per static configuration.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

import minmaxlab as mml
from minmaxlab import analysis
from tests._xla import CODEGEN, DEFAULTS

N = 5  # parameters per player; the Jacobian is 2N x 2N
# XLA's cheapest compile (these programs run for milliseconds; compiling dominates); under
# MINMAXLAB_TEST_CODEGEN=default (.ci/run's second pass of the order-sensitive tests) XLA's
# default code, so that both code paths' rounding is checked
FAST = (
  DEFAULTS
  if os.environ.get(CODEGEN) == "default"
  else {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
)
ETA = 0.3


def assert_same_spectrum(got, want, atol):
  """Eigenvalues equal as multisets (optimal matching, then max error)."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  cost = np.abs(got[:, None] - want[None, :])
  rows, cols = linear_sum_assignment(cost)
  err = cost[rows, cols].max()
  assert err < atol, (err, np.sort_complex(got), np.sort_complex(want))


def linear_field(params, M):
  """The linear game with Jacobian ``M``: ``v(z) = M z`` (z = (min, max) flattened)."""
  z = jnp.concatenate([params.min, params.max])
  v = M @ z
  return mml.Players(v[:N], v[N:])


def point(key=None):
  k1, k2 = jax.random.split(jax.random.key(7) if key is None else key)
  return mml.Players(jax.random.normal(k1, (N,)), jax.random.normal(k2, (N,)))


@functools.lru_cache
def program(**static):
  """``(params, M, key, step_size) -> GameDynamics``, jitted once per static config."""
  fn = functools.partial(analysis.game_dynamics, linear_field, **static)
  return jax.jit(
    lambda p, M, key, step_size: fn(p, M, key=key, step_size=step_size), compiler_options=FAST
  )


def exact(**kw):
  """Full Krylov spaces (2N iterations) and exact traces: everything to rounding."""
  return program(eigen_iterations=2 * N, radius_iterations=2 * N, num_probes=None, **kw)


def bilinear_jacobian(A, mu=0.0):
  n = A.shape[0]
  return jnp.block([[mu * jnp.eye(n), A], [-A.T, mu * jnp.eye(n)]])


def top_by_modulus(lam, k):
  lam = np.asarray(lam)
  return lam[np.lexsort((-lam.imag, -np.abs(lam)))][:k]
