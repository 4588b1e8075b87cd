"""Matplotlib helpers for the game analysis (each draws on a given ``Axes`` and returns it).

matplotlib is imported lazily, so ``import minmaxlab.analysis`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np


def _axes(ax):
  if ax is None:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    _, ax = plt.subplots()
  return ax


def plot_eigenvalues(
  eigenvalues,
  ax=None,
  *,
  label: str | None = None,
  unit_circle: bool = False,
  **scatter_kwargs: Any,
):
  """Scatter eigenvalues in the complex plane.

  Args:
    eigenvalues: complex array.
    ax: matplotlib ``Axes`` (a new figure when ``None``).
    label: legend label.
    unit_circle: draw the unit circle (for update operators: inside = contraction);
      otherwise the imaginary axis (for Jacobians: on it = pure rotation).
    **scatter_kwargs: passed to ``ax.scatter``.

  Returns:
    The ``Axes``.
  """
  ax = _axes(ax)
  e = np.asarray(eigenvalues)
  if unit_circle:
    t = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(t), np.sin(t), color="0.6", lw=0.8, zorder=0)
    ax.set_aspect("equal")
  else:
    ax.axvline(0.0, color="0.6", lw=0.8, zorder=0)
  ax.axhline(0.0, color="0.85", lw=0.6, zorder=0)
  scatter_kwargs.setdefault("s", 14)
  ax.scatter(e.real, e.imag, label=label, **scatter_kwargs)
  ax.set_xlabel(r"Re $\lambda$")
  ax.set_ylabel(r"Im $\lambda$")
  return ax


def plot_radius_heatmap(
  step_sizes,
  sync_periods,
  radius,
  ax=None,
  *,
  title: str | None = None,
  vmin: float | None = None,
  vmax: float | None = None,
  colorbar: bool = True,
):
  """Heat map of a spectral radius (or per-step rate) over ``(eta, k)``.

  The contour ``rho = 1`` separates convergence (below) from divergence.

  Args:
    step_sizes: ``(E,)`` step sizes (y axis).
    sync_periods: ``(K,)`` sync periods (x axis).
    radius: ``(E, K)`` array, e.g. ``RadiusGrid.per_step[:, :, l]``.
    ax: matplotlib ``Axes``.
    title: axes title.
    vmin: colour scale minimum (default ``min(radius)``).
    vmax: colour scale maximum (default ``max(radius)`` capped at 1.2).
    colorbar: add a colour bar.

  Returns:
    The ``Axes``.
  """
  ax = _axes(ax)
  r = np.asarray(radius, np.float64)
  etas, ks = np.asarray(step_sizes), np.asarray(sync_periods)
  vmax = min(float(r.max()), 1.2) if vmax is None else vmax
  mesh = ax.pcolormesh(ks, etas, r, shading="nearest", cmap="viridis", vmin=vmin, vmax=vmax)
  if r.min() < 1.0 < r.max() and min(r.shape) > 1:
    ax.contour(ks, etas, r, levels=[1.0], colors="w", linewidths=1.2)
  if colorbar:
    ax.figure.colorbar(mesh, ax=ax, label=r"$\rho$")
  ax.set_xlabel("sync period k")
  ax.set_ylabel(r"step size $\eta$")
  if title:
    ax.set_title(title)
  return ax


def plot_phase_portrait(
  paths: Mapping[str, tuple[Any, Any]],
  ax=None,
  *,
  field: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
  limits: float = 1.5,
  equilibrium: tuple[float, float] = (0.0, 0.0),
):
  """Phase portrait of 2-D game dynamics (e.g. ``f(x, y) = x y``).

  Args:
    paths: ``{label: (x_t, y_t)}`` iterates to draw as lines.
    ax: matplotlib ``Axes``.
    field: optional ``field(X, Y) -> (U, V)`` drawn as a quiver of the descent
      directions (for ``x y``: ``(Y, -X)``, the negative field of
      ``minmaxlab.vector_field`` is the motion direction of GDA).
    limits: half-width of the plotted square.
    equilibrium: marked with a star.

  Returns:
    The ``Axes``.
  """
  ax = _axes(ax)
  if field is not None:
    g = np.linspace(-limits, limits, 15)
    X, Y = np.meshgrid(g, g)
    U, V = field(X, Y)
    ax.quiver(X, Y, U, V, color="0.75", angles="xy", width=0.003)
  for label, (x, y) in paths.items():
    x, y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    (line,) = ax.plot(x, y, lw=1.0, label=label)
    ax.plot(x[:1], y[:1], "o", color=line.get_color(), ms=4)
  ax.plot(*equilibrium, "*", color="k", ms=10)
  ax.set_xlim(-limits, limits)
  ax.set_ylim(-limits, limits)
  ax.set_aspect("equal")
  ax.set_xlabel("x (min player)")
  ax.set_ylabel("y (max player)")
  return ax


Spread = Literal["std", "half_std", "minmax"]


def plot_distance_curves(
  curves: Mapping[str, tuple[Any, Any]],
  ax=None,
  *,
  spread: Spread = "std",
  log: bool = True,
  ylabel: str = r"$\|x - x^*\| + \|y - y^*\|$",
):
  """Distance to the equilibrium vs passes, mean over seeds with a spread band.

  The x axis is field evaluations ("passes"), so methods of different cost
  per step compare fairly: extragradient counts 2 per step,
  ``alternating(max_steps=n)`` ``n + 1`` (see
  :func:`minmaxlab.analysis.field_evaluations_per_step`).

  Args:
    curves: ``{label: (passes, distances)}`` with ``passes`` of shape ``(T,)``
      and ``distances`` of shape ``(seeds, T)`` (or ``(T,)``).
    ax: matplotlib ``Axes``.
    spread: ``"std"`` (mean +- std), ``"half_std"`` (the paper's mean +- std/2)
      or ``"minmax"``.
    log: logarithmic y axis.
    ylabel: y axis label.

  Returns:
    The ``Axes``.
  """
  if spread not in get_args(Spread):
    raise ValueError(f"spread must be one of {get_args(Spread)}, got {spread!r}")
  ax = _axes(ax)
  for label, (passes, dist) in curves.items():
    x = np.asarray(passes)
    d = np.atleast_2d(np.asarray(dist, np.float64))
    mean = d.mean(0)
    if spread == "minmax":
      lo, hi = d.min(0), d.max(0)
    else:
      s = d.std(0) * (0.5 if spread == "half_std" else 1.0)
      lo, hi = mean - s, mean + s
    if log:
      lo = np.maximum(lo, np.finfo(np.float64).tiny)
    (line,) = ax.plot(x, mean, lw=1.2, label=label)
    if d.shape[0] > 1:
      ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
  if log:
    ax.set_yscale("log")
  ax.set_xlabel("passes (field evaluations; extragradient = 2 per step)")
  ax.set_ylabel(ylabel)
  return ax


def plot_radius_vs_step_size(
  step_sizes: Sequence[float],
  radii: Mapping[str, Any],
  ax=None,
):
  """Spectral radius of several methods against the step size, with ``rho = 1``.

  Args:
    step_sizes: ``(E,)``.
    radii: ``{label: (E,) radii}``.
    ax: matplotlib ``Axes``.

  Returns:
    The ``Axes``.
  """
  ax = _axes(ax)
  for label, r in radii.items():
    ax.plot(step_sizes, np.asarray(r), label=label)
  ax.axhline(1.0, color="k", lw=0.8, ls="--")
  ax.set_xlabel(r"step size $\eta$ ($\sigma = 1$)")
  ax.set_ylabel(r"spectral radius $\rho$")
  return ax
