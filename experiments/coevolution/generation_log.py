"""What each generation of a coevolution run logs (issue 33): the grid means and per-cell
arrays of ``Coevolution.step``'s metrics, the lineage counts, Lipizzaner's ``net_weights_dist``
and, on 2-D data, every cell's mode count; ``train.train`` writes them to ``metrics.jsonl``
and TensorBoard."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments.coevolution.experiment import Programs, keys
from minmaxlab import coevolution as co
from minmaxlab.gan import metrics

# Per-cell metrics of ``Coevolution.step`` summarised in the rows (mean over cells).
CELL_METRICS = ("g_loss", "d_loss", "g_fitness", "d_fitness", "lr_g", "lr_d", "mixture_score")
# ... and counted over cells.
CELL_COUNTS = ("mixture_accepted", "replaced_g", "replaced_d", "diverged")


def summarise(step_metrics: dict[str, np.ndarray], cols: int) -> dict[str, Any]:
  """One JSONL row from a generation's metrics: grid means (and best/worst) of the
  per-cell arrays, counts of the per-cell events, the per-cell arrays as nested
  lists under ``cells/<name>``, the best cell as ``[row, col]``, and ``lineages``
  (``lineages_d``): the number of distinct lineage ids among the grid's generators
  (discriminators), every individual of every cell, with each cell's ids under
  ``cells/lineage_g`` (``[rows][cols][P]``; ``minmaxlab.coevolution.lineage_origin``
  decodes them)."""
  row: dict[str, Any] = {}
  for k in CELL_METRICS:
    v = np.asarray(step_metrics[k], np.float64)
    finite = v[np.isfinite(v)]
    row[k] = float(finite.mean()) if finite.size else float("nan")
  for k in CELL_COUNTS:
    row[k] = int(np.sum(step_metrics[k]))
  row["best_score"] = float(step_metrics["best_score"])
  best = int(step_metrics["best_cell"])
  row["best_cell"] = [best // cols, best % cols]
  for k in (*CELL_METRICS, *CELL_COUNTS):
    row[f"cells/{k}"] = np.asarray(step_metrics[k]).tolist()
  row["lineages"] = int(np.unique(step_metrics["lineage_g"]).size)
  row["lineages_d"] = int(np.unique(step_metrics["lineage_d"]).size)
  row["cells/lineage_g"] = np.asarray(step_metrics["lineage_g"]).tolist()
  return row


def cell_scalars(step_metrics: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
  """Per-cell TensorBoard runs ``{"cells/r<row>c<col>": {metric: value}}``: each cell is
  a run of its own, so its curves overlay the grid means' (same tags) in TensorBoard."""
  out: dict[str, dict[str, float]] = {}
  for k in CELL_METRICS:
    v = np.asarray(step_metrics[k], np.float64)
    for (r, c), x in np.ndenumerate(v):
      out.setdefault(f"cells/r{r}c{c}", {})[k] = float(x)
  return out


@functools.partial(jax.jit, static_argnums=1)
def _distances(params, neighbourhood):
  return co.net_weights_dist(params.min, neighbourhood), co.net_weights_dist(
    params.max, neighbourhood
  )


def weight_distances(params, neighbourhood) -> dict[str, Any]:
  """Lipizzaner's ``net_weights_dist`` of both players of the whole grid's ``params``
  (``Players``, e.g. a host copy of ``state.params``): the grid mean (and every cell's
  value) of the mean L2 distance between the neighbourhood's individuals' weights
  (``minmaxlab.coevolution.net_weights_dist``); it falls to 0 as one lineage takes over."""
  return _distance_entries(*jax.device_get(_distances(params, neighbourhood)))


def _distance_entries(g, d) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for side, v in (("g", g), ("d", d)):
    out[f"net_weights_dist/{side}"] = float(np.mean(v))
    out[f"cells/net_weights_dist_{side}"] = np.asarray(v, np.float64).round(6).tolist()
  return out


def readout_entries(reads: dict, cell_samples: int) -> tuple[Any, dict[str, Any]]:
  """``(per_cell, entries)`` of the read-out program's outputs on the host
  (``generation_programs.make_readouts``, ``cell_samples`` per cell): the row's entries of
  :func:`weight_distances` and, on a 2-D mixture, of :func:`cell_modes` (``per_cell`` as
  there, else ``None``), the same values."""
  entries = _distance_entries(*reads["net_weights_dist"])
  per_cell = reads.get("cell")
  if per_cell is not None:
    n = np.size(per_cell["modes_covered"]) * cell_samples  # all cells' samples
    entries.update(_mode_entries(per_cell, reads["pooled_counts"], n))
  return per_cell, entries


def _mode_entries(per_cell, counts, n: int) -> dict[str, Any]:
  """The row's mode entries: every cell's ``modes_covered`` and, of all cells' samples pooled
  (their high-quality ``counts`` per mode, of ``n`` samples), ``metrics.mixture_metrics``'s
  modes covered and high-quality rate (a float32 division, as its eager call's)."""
  counts = np.asarray(counts)
  return {
    "cells/modes_covered": np.asarray(per_cell["modes_covered"]).tolist(),
    "grid/modes_covered": int(np.sum(counts >= 1)),
    "grid/high_quality_rate": float(np.float32(np.sum(counts)) / np.float32(n)),
  }


def cell_modes(progs: Programs, config, host) -> tuple[np.ndarray, Any, dict[str, Any]]:
  """Every cell's best generator on the same latents: ``(samples, per_cell, entries)``;
  on a 2-D mixture ``per_cell`` holds each cell's mixture metrics and ``entries`` the
  row's ``cells/modes_covered`` and the pooled ``grid/modes_covered`` and
  ``grid/high_quality_rate`` (the grid's best generators with equal weights)."""
  key = jax.random.fold_in(keys(config)[2], 0)  # the same latents every generation
  samples = np.asarray(progs.cell_samples(key, host))
  per_cell, entries = None, {}
  if progs.cell_metrics is not None:
    per_cell = jax.device_get(progs.cell_metrics(jnp.asarray(samples)))
    entries["cells/modes_covered"] = np.asarray(per_cell["modes_covered"]).tolist()
    pooled = metrics.mixture_metrics(jnp.asarray(samples.reshape(-1, 2)), progs.exp.mixture)
    entries["grid/modes_covered"] = int(pooled["modes_covered"])
    entries["grid/high_quality_rate"] = float(pooled["high_quality_rate"])
  return samples, per_cell, entries


def read_outs(progs: Programs, config, host, params, reads, do_plot: bool):
  """``(samples, per_cell, entries)`` of one generation (``samples`` when plotting or on 2-D
  data): from the read-out program's outputs ``reads`` (on the device, on the host), else
  computed here from the grid ``host`` (``params``: its parameters); the same values."""
  toy = progs.exp.mixture is not None
  if reads is not None:
    per_cell, entries = readout_entries(reads[1], config.cell_samples)
    samples = None
    if do_plot:
      samples = np.asarray(reads[0]["samples"]) if toy else cell_modes(progs, config, host)[0]
    return samples, per_cell, entries
  entries = weight_distances(params, progs.exp.coev.config.neighbourhood)
  samples = per_cell = None
  if toy or do_plot:
    samples, per_cell, more = cell_modes(progs, config, host)
    entries.update(more)
  return samples, per_cell, entries
