"""2-D Gaussian mixtures: the classic mode-collapse test sets."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Mixture(NamedTuple):
  r"""An equal-weight mixture of isotropic Gaussians in the plane.

  .. math:: p(x) = \frac1K \sum_{k=1}^K \mathcal N(x;\ m_k, s^2 I)

  A NamedTuple (a pytree): pass it into ``jit``-compiled functions as an
  argument, or close over it.

  Attributes:
    modes: ``[K, 2]`` mode centres :math:`m_k`.
    std: the common standard deviation :math:`s` (a scalar).
  """

  modes: jax.Array
  std: jax.Array

  def sample(self, key: jax.Array, n: int) -> jax.Array:
    """``n`` samples ``[n, 2]``: a uniform mode index, then Gaussian noise.

    ``n`` must be a Python int (it fixes the output shape); jit-able.
    """
    k_mode, k_noise = jax.random.split(key)
    modes = jnp.asarray(self.modes)
    index = jax.random.randint(k_mode, (n,), 0, modes.shape[0])
    noise = jax.random.normal(k_noise, (n, modes.shape[1]), modes.dtype)
    return modes[index] + jnp.asarray(self.std, modes.dtype) * noise


def ring8(radius: float = 2.0, std: float = 0.02) -> Mixture:
  r"""8 Gaussians evenly spaced on a circle: modes
  :math:`r(\cos\frac{2\pi k}{8}, \sin\frac{2\pi k}{8})`, :math:`k = 0..7`.

  Defaults (radius 2, std 0.02) are the values of Metz et al. (2017),
  "Unrolled Generative Adversarial Networks" (https://arxiv.org/abs/1611.02163,
  the 2-D mixture experiment), reused by VEEGAN and PacGAN.
  """
  if not (radius > 0 and std > 0):
    raise ValueError(f"radius and std must be positive, got {radius}, {std}")
  angles = 2 * np.pi * np.arange(8) / 8
  modes = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
  return Mixture(jnp.asarray(modes, jnp.float32), jnp.asarray(std, jnp.float32))


def grid25(spacing: float = 2.0, std: float = 0.05) -> Mixture:
  r"""25 Gaussians on a 5x5 grid: modes :math:`(i\,d, j\,d)`, :math:`i, j \in
  \{-2, \dots, 2\}` (with the default spacing :math:`d = 2`: the lattice
  :math:`\{-4, -2, 0, 2, 4\}^2`).

  Defaults (spacing 2, std 0.05) are the 2D-grid values of Srivastava et al.
  (2017), "VEEGAN" (https://arxiv.org/abs/1705.07761), also used by Lin et
  al. (2018), "PacGAN" (https://arxiv.org/abs/1712.04086).
  """
  if not (spacing > 0 and std > 0):
    raise ValueError(f"spacing and std must be positive, got {spacing}, {std}")
  ticks = spacing * np.arange(-2, 3)
  modes = np.stack(np.meshgrid(ticks, ticks, indexing="ij"), axis=-1).reshape(25, 2)
  return Mixture(jnp.asarray(modes, jnp.float32), jnp.asarray(std, jnp.float32))
