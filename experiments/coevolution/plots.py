"""The picture of a generation: every cell's samples on one PNG (matplotlib, Agg)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from minmaxlab import runner


def _figure(figsize):
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  fig = Figure(figsize=figsize)
  FigureCanvasAgg(fig)
  return fig


def save_mixture(path: Path, x, *, modes: np.ndarray | None, title: str) -> None:
  """Samples ``x`` of a mixture: a scatter over the 2-D data's ``modes``, else a grid of
  (at most 64) images."""
  path.parent.mkdir(parents=True, exist_ok=True)
  if modes is not None:
    runner.save_scatter(path, x, modes, title=title)
  else:
    runner.save_image_grid(path, x[:64])


def save_cell_grid(
  path: str | os.PathLike,
  samples: np.ndarray,
  *,
  modes: np.ndarray | None = None,
  cell_metrics: dict | None = None,
  weights: np.ndarray | None = None,
  best_cell: int | None = None,
  title: str = "",
  images_per_cell: int = 16,
) -> None:
  """One panel per cell of the torus, laid out as the grid.

  Args:
    path: the PNG to write (its folder is created).
    samples: ``[rows, cols, n, 2]`` points (drawn over ``modes``) or
      ``[rows, cols, n, H, W, C]`` images in ``[-1, 1]`` (the first
      ``images_per_cell`` are tiled).
    modes: ``[K, 2]`` mixture modes (2-D data).
    cell_metrics: per-cell ``modes_covered`` / ``high_quality_rate`` arrays for the titles.
    weights: ``[rows, cols, M]`` mixture weights (the cell's own weight is shown).
    best_cell: flat index of the best-scoring cell (framed in red).
    title: the figure's title.
  """
  samples = np.asarray(samples)
  rows, cols = samples.shape[:2]
  points = samples.ndim == 4 and samples.shape[-1] == 2
  fig = _figure((2.3 * cols, 2.4 * rows + 0.4))
  if points and modes is not None:
    lo, hi = np.min(modes, 0), np.max(modes, 0)
    pad = 0.35 * np.max(hi - lo) + 0.5
    xlim, ylim = (lo[0] - pad, hi[0] + pad), (lo[1] - pad, hi[1] + pad)
  for r in range(rows):
    for c in range(cols):
      ax = fig.add_subplot(rows, cols, r * cols + c + 1)
      if points:
        s = samples[r, c]
        if modes is not None:
          ax.scatter(modes[:, 0], modes[:, 1], s=25, c="red", marker="x", linewidths=1, zorder=3)
          ax.set_xlim(*xlim)
          ax.set_ylim(*ylim)
        ax.scatter(s[:, 0], s[:, 1], s=1.5, alpha=0.35, c="tab:blue", rasterized=True)
        ax.set_aspect("equal")
      else:
        grid = runner.image_grid(samples[r, c, :images_per_cell])
        ax.imshow(grid, cmap="gray" if grid.ndim == 2 else None, vmin=0, vmax=255)
      ax.set_xticks([])
      ax.set_yticks([])
      label = f"({r},{c})"
      if cell_metrics is not None:
        k = int(np.asarray(cell_metrics["modes_covered"])[r, c])
        hq = float(np.asarray(cell_metrics["high_quality_rate"])[r, c])
        label += f" modes {k} HQ {hq:.0%}"
      if weights is not None:
        label += f" w0 {float(weights[r, c, 0]):.2f}"
      ax.set_title(label, fontsize=7)
      if best_cell is not None and r * cols + c == best_cell:
        for spine in ax.spines.values():
          spine.set_edgecolor("red")
          spine.set_linewidth(2)
  if title:
    fig.suptitle(
      title + ("  (red frame: best mixture's cell)" if best_cell is not None else ""), fontsize=9
    )
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
  fig.savefig(os.fspath(path), dpi=90)


def save_comparison(
  path: str | os.PathLike,
  panels: list[tuple[np.ndarray, str]],
  *,
  modes: np.ndarray | None = None,
  title: str = "",
  images_per_panel: int = 64,
  lineages: tuple[np.ndarray, np.ndarray, int] | None = None,
) -> None:
  """Side by side: one panel per ``(samples, title)``, e.g. the grid's mixture beside a lone
  GAN's samples, drawn over the ``modes`` (2-D points) or tiled (images in ``[-1, 1]``);
  with ``lineages = (generations, counts, cells)`` a last panel draws the number of
  distinct lineages among the grid's generators over the generations (``cells`` the
  count at the start)."""
  n = len(panels) + (lineages is not None)
  fig = _figure((3.2 * n, 3.9))
  if lineages is not None:
    _lineage_panel(fig.add_subplot(1, n, n), *lineages)
  for i, (samples, label) in enumerate(panels):
    ax = fig.add_subplot(1, n, i + 1)
    s = np.asarray(samples)
    if s.ndim == 2 and s.shape[-1] == 2:
      ax.scatter(s[:, 0], s[:, 1], s=1.5, alpha=0.3, c="tab:blue", rasterized=True)
      if modes is not None:
        ax.scatter(modes[:, 0], modes[:, 1], s=30, c="red", marker="x", linewidths=1, zorder=3)
        lo, hi = np.min(modes, 0), np.max(modes, 0)
        pad = 0.35 * np.max(hi - lo) + 0.1
        ax.set_xlim(lo[0] - pad, hi[0] + pad)
        ax.set_ylim(lo[1] - pad, hi[1] + pad)
      ax.set_aspect("equal")
    else:
      grid = runner.image_grid(s[:images_per_panel])
      ax.imshow(grid, cmap="gray" if grid.ndim == 2 else None, vmin=0, vmax=255)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(label, fontsize=8)
  if title:
    fig.suptitle(title, fontsize=9)
  fig.tight_layout(rect=(0, 0, 1, 0.93) if title else None)
  os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
  fig.savefig(os.fspath(path), dpi=80)


def _lineage_panel(ax, generations, counts, cells: int) -> None:
  ax.step(np.asarray(generations), np.asarray(counts), where="post", c="tab:purple")
  ax.set_ylim(0, cells + 0.5)
  for axis in (ax.xaxis, ax.yaxis):
    axis.get_major_locator().set_params(integer=True)
  ax.set_xlabel("generation", fontsize=8)
  ax.set_title(f"lineages among the grid's generators\n(of {cells} at the start)", fontsize=8)
  ax.tick_params(labelsize=7)
