"""The Dirac-GAN of Mescheder, Geiger and Nowozin (2018)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.games._players import Players, check_players


class DiracGAN(NamedTuple):
  r"""Dirac-GAN: real data is a point mass at 0, the generator a point mass at
  :math:`\theta`, the discriminator linear, :math:`D_\psi(x) = \psi x`.

  .. math::
    L(\theta, \psi) = h(\psi\theta) + h(0), \qquad h(t) = -\log(1 + e^{-t}),

  ``min`` = :math:`\theta` minimises :math:`L`, ``max`` = :math:`\psi`
  maximises it; with ``gamma > 0`` the discriminator also pays the
  zero-centred gradient penalty :math:`\tfrac{\gamma}{2}\psi^2` (R1), so
  ``loss`` returns ``(L, -L + gamma/2 psi^2)``. The unique equilibrium is
  :math:`(0, 0)`; there the Jacobian of the descent field is
  :math:`[[0, h'(0)], [-h'(0), \gamma]]` with :math:`h'(0) = 1/2`: purely
  rotational for ``gamma = 0``.

  References:
    Mescheder et al., 2018, "Which Training Methods for GANs do actually
    Converge?" https://arxiv.org/abs/1801.04406
  """

  gamma: jax.Array

  def loss(self, params: Players):
    theta, psi = check_players(params)
    h = lambda t: -jax.nn.softplus(-t)
    value = h(psi * theta) + h(jnp.zeros_like(theta))
    return value, -value + 0.5 * self.gamma * psi**2

  def equilibrium(self, dtype=None) -> Players:
    z = jnp.zeros((), dtype or jnp.asarray(self.gamma).dtype)
    return Players(z, z)

  def distance(self, params: Players) -> dict[str, jax.Array]:
    dx, dy = jnp.abs(params.min), jnp.abs(params.max)
    return {"joint": jnp.sqrt(dx**2 + dy**2), "sum": dx + dy, "min": dx, "max": dy}


def dirac_gan(gamma: float = 0.0) -> DiracGAN:
  """Dirac-GAN with R1 penalty weight ``gamma`` (``>= 0``)."""
  if not gamma >= 0:
    raise ValueError(f"gamma must be >= 0, got {gamma}")
  return DiracGAN(jnp.asarray(gamma, jnp.zeros(()).dtype))
