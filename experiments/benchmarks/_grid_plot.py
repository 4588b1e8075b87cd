"""The plot of ``grid_scaling.py``'s JSON lines: per-cell cost, compile, memory and the
exchange's share against the number of cells, one line per placement."""

from __future__ import annotations

from pathlib import Path

MARKERS = {"single": "o-", "mpi2": "s--", "mpi4": "^--", "mesh4": "d:"}
COLORS = {"single": "C0", "mpi2": "C1", "mpi4": "C2", "mesh4": "C3"}  # the same in every panel


def _series(records: list[dict], placement: str, get) -> tuple[list, list]:
  rows = sorted(
    (r["cells"], get(r)) for r in records if r["placement"] == placement and "error" not in r
  )
  rows = [(c, v) for c, v in rows if v is not None]
  return [c for c, _ in rows], [v for _, v in rows]


def _panel(ax, records, get, ylabel, title, scale=1.0):
  for placement, marker in MARKERS.items():
    x, y = _series(records, placement, get)
    if x:
      ax.plot(x, [v * scale for v in y], marker, color=COLORS[placement], label=placement)
  ax.set_xscale("log")
  ax.set_xlabel("cells")
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  if ax.lines:
    ax.legend(fontsize=7)


def plot(records: list[dict], path: str | Path) -> None:
  """Four panels (CPU ms per cell-batch, compile CPU seconds, peak RSS, exchange share) to
  ``path``."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  _panel(
    axes[0, 0],
    records,
    lambda r: r["cpu_s_per_cell_batch_median"],
    "CPU ms per cell-batch (all processes)",
    "per-cell cost (CPU seconds: robust to other jobs' load)",
    1e3,
  )
  _panel(
    axes[0, 1], records, lambda r: r["compile_cpu_s"], "CPU seconds", "compile (cold, process CPU)"
  )
  _panel(
    axes[1, 0],
    records,
    lambda r: r["peak_rss_bytes_all_processes"],
    "GiB",
    "peak RSS (sum over processes)",
    2.0**-30,
  )
  _panel(
    axes[1, 1],
    records,
    lambda r: r.get("exchange", {}).get("share_median"),
    "share of a generation",
    "halo exchange alone / generation (wall)",
  )
  batches = {r.get("batches_per_generation") for r in records}
  fig.suptitle(f"grid_scaling: Lipizzaner MNIST MLP pair, {sorted(batches)} batches per generation")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
