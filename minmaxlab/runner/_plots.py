"""Sample grids, 2-D scatter plots and metric curves as PNG files (matplotlib, Agg)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import numpy as np


def _figure(figsize):
  # A Figure with an Agg canvas: no pyplot global state, no GUI backend.
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  fig = Figure(figsize=figsize)
  FigureCanvasAgg(fig)
  return fig


def image_grid(images: np.ndarray, ncols: int | None = None, pad: int = 1) -> np.ndarray:
  """Tile ``images [N, H, W, C]`` in ``[-1, 1]`` into one ``uint8`` image ``[H', W', C]``."""
  x = np.asarray(images, np.float32)
  if x.ndim == 3:
    x = x[..., None]
  n, h, w, c = x.shape
  ncols = ncols or int(math.ceil(math.sqrt(n)))
  nrows = int(math.ceil(n / ncols))
  grid = np.ones((nrows * (h + pad) + pad, ncols * (w + pad) + pad, c), np.float32)
  for i in range(n):
    r, q = divmod(i, ncols)
    grid[
      pad + r * (h + pad) : pad + r * (h + pad) + h, pad + q * (w + pad) : pad + q * (w + pad) + w
    ] = x[i]
  grid = np.clip((grid + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
  return grid[..., 0] if c == 1 else grid


def save_image_grid(path: str | os.PathLike, images: np.ndarray, ncols: int | None = None) -> None:
  """Save a grid of images in ``[-1, 1]`` as a PNG."""
  import matplotlib.image

  grid = image_grid(images, ncols)
  matplotlib.image.imsave(
    os.fspath(path), grid, cmap="gray" if grid.ndim == 2 else None, vmin=0, vmax=255
  )


def save_scatter(
  path: str | os.PathLike, samples: np.ndarray, modes: np.ndarray | None = None, title: str = ""
) -> None:
  """Save a scatter plot of 2-D ``samples`` (and the mixture's ``modes``) as a PNG."""
  fig = _figure((4, 4))
  ax = fig.add_subplot()
  s = np.asarray(samples)
  ax.scatter(s[:, 0], s[:, 1], s=2, alpha=0.4, label="samples")
  if modes is not None:
    m = np.asarray(modes)
    ax.scatter(m[:, 0], m[:, 1], s=30, c="red", marker="x", label="modes")
  ax.set_aspect("equal")
  ax.set_title(title)
  fig.savefig(os.fspath(path), dpi=100, bbox_inches="tight")


def save_metric_curves(
  path: str | os.PathLike,
  rows: Sequence[dict],
  keys: Sequence[str] | None = None,
  ncols: int = 3,
  step_key: str | None = None,
  titles: Mapping[str, str] | None = None,
) -> list[str]:
  """Plot every numeric metric (or ``keys``) of JSONL ``rows`` against their counter:
  ``step_key``, by default ``"generation"`` when the rows have it, else ``"step"``. Each
  panel is titled ``titles[key]`` where given (e.g. the metric in words and which direction
  is better), else by the key.

  Returns:
    The keys that were plotted (one panel each).
  """
  if step_key is None:
    step_key = "generation" if any("generation" in r for r in rows) else "step"
  counters = {step_key, "step"}
  if keys is None:
    keys = sorted(
      {
        k
        for r in rows
        for k, v in r.items()
        if k not in counters and isinstance(v, (int, float)) and not isinstance(v, bool)
      }
    )
  keys = list(keys)
  if not keys:
    return keys
  ncols = min(ncols, len(keys))
  nrows = int(math.ceil(len(keys) / ncols))
  fig = _figure((4 * ncols, 2.6 * nrows))
  for i, k in enumerate(keys):
    ax = fig.add_subplot(nrows, ncols, i + 1)
    pts = [
      (r.get(step_key, r.get("step")), r[k]) for r in rows if isinstance(r.get(k), (int, float))
    ]
    if pts:
      st, v = zip(*pts)
      ax.plot(st, v, marker="." if len(pts) < 30 else None)
    # a fixed title height (y=1): matplotlib otherwise measures the axis' tick labels to place
    # it, a third of the drawing; four ticks an axis (a tick is several artists to draw)
    ax.set_title((titles or {}).get(k, k), fontsize=9, y=1.0, pad=4)
    ax.set_xlabel(step_key, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.locator_params(nbins=4)
  # Fixed margins (in inches, for the fonts above): tight_layout would draw the figure once
  # more only to measure its labels, about as costly as the drawing itself.
  width, height = fig.get_size_inches()
  fig.subplots_adjust(
    left=0.55 / width,
    right=1 - 0.15 / width,
    bottom=0.45 / height,
    top=1 - 0.3 / height,
    wspace=0.25,
    hspace=0.6,
  )
  fig.savefig(os.fspath(path), dpi=90)
  return keys
