"""Frechet distance between Gaussians fitted to features (FID's core)."""

from __future__ import annotations

import numpy as np


def gaussian_statistics(features) -> tuple[np.ndarray, np.ndarray]:
  """Mean ``[F]`` and unbiased covariance ``[F, F]`` of ``features [N, F]`` (float64)."""
  x = np.asarray(features, np.float64)
  if x.ndim != 2 or x.shape[0] < 2:
    raise ValueError(f"features must be [N >= 2, F], got shape {x.shape}")
  return x.mean(axis=0), np.cov(x, rowvar=False)


def _sym_sqrt(c: np.ndarray) -> np.ndarray:
  """Square root of a symmetric PSD matrix by eigendecomposition."""
  w, v = np.linalg.eigh((c + c.T) / 2)
  return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance(mu1, cov1, mu2, cov2) -> float:
  r"""Frechet (2-Wasserstein) distance between :math:`N(\mu_1, C_1)` and :math:`N(\mu_2, C_2)`.

  .. math::
    d^2 = \|\mu_1 - \mu_2\|^2 + \operatorname{tr}(C_1 + C_2 - 2 (C_1 C_2)^{1/2}).

  :math:`C_1 C_2` is not symmetric, which is why reference code calls
  ``scipy.linalg.sqrtm`` (a Schur method, sometimes complex). We use
  :math:`\operatorname{tr}(C_1 C_2)^{1/2} = \operatorname{tr}(C_1^{1/2} C_2 C_1^{1/2})^{1/2}`
  (the two matrices are similar): one symmetric eigendecomposition for
  :math:`C_1^{1/2}`, then the eigenvalues of the symmetric PSD
  :math:`C_1^{1/2} C_2 C_1^{1/2}`; always real, in float64 numpy.

  Args:
    mu1, cov1: mean ``[F]`` and covariance ``[F, F]`` of the first set.
    mu2, cov2: the same for the second set.

  Returns:
    The distance :math:`d^2` (as FID reports it: the squared distance).

  References:
    Heusel et al., 2017, "GANs Trained by a Two Time-Scale Update Rule
    Converge to a Local Nash Equilibrium", https://arxiv.org/abs/1706.08500
  """
  mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
  cov1, cov2 = (
    np.atleast_2d(np.asarray(cov1, np.float64)),
    np.atleast_2d(np.asarray(cov2, np.float64)),
  )
  if mu1.shape != mu2.shape or cov1.shape != cov2.shape or cov1.shape != (mu1.size, mu1.size):
    raise ValueError(f"shape mismatch: mu {mu1.shape}/{mu2.shape}, cov {cov1.shape}/{cov2.shape}")
  s1 = _sym_sqrt(cov1)
  m = s1 @ cov2 @ s1
  eig = np.linalg.eigvalsh((m + m.T) / 2)
  tr_sqrt = np.sum(np.sqrt(np.clip(eig, 0.0, None)))
  diff = mu1 - mu2
  return float(diff @ diff + np.trace(cov1) + np.trace(cov2) - 2.0 * tr_sqrt)
