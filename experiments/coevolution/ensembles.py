r"""Generator ensembles of a finished coevolution run (Lipizzaner's post-training steps).

  python -m experiments.coevolution.ensembles --workdir runs/g --method=es      # end-of-run ES
  python -m experiments.coevolution.ensembles --workdir runs/g --method=greedy  # GECCO'20
  python -m experiments.coevolution.ensembles --workdir runs/g --method=ga --score=fid \
      --sampling=exact_proportion

``es``: Lipizzaner's ``optimize_mixture`` block, a (1+1)-ES over the mixture weights of
the best cell (``--cell`` for another) after training. ``greedy`` and ``ga``: the GECCO'20
ensemble searches (Toutouh et al. 2020) over every cell's best generator. Each writes
``<workdir>/ensemble_<method>.json`` (the weights, the members as grid cells, the score
before and after, fresh evaluation metrics of the new mixture and of the trained one) and
prints one line. The run's checkpoints are not changed.

Scores (lower is better), on samples drawn once (the same latents for every candidate):
``tvd`` (2-D mixtures: the mode-histogram TVD the cells use; images: the class TVD of the
evaluation classifier), ``fid`` (images: classifier-FID; 2-D: the Frechet distance of the
raw coordinates to the data's), ``auto`` (the run's own: tvd for 2-D, fid for images).
``--sampling=exact_proportion`` scores, and samples for the metrics, the mixture's
exact-proportion sample (``minmaxlab.coevolution.exact_proportion_score``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab import coevolution as co
from minmaxlab.gan import metrics

METHODS = ("es", "greedy", "ga")
SCORES = ("auto", "tvd", "fid")


class _RealStats(NamedTuple):
  real_mean: jax.Array
  real_cov: jax.Array


def _check(name: str, value, choices) -> None:
  if value not in choices:
    raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def score_function(exp, score: str = "auto", sampling: str = "independent", key=None):
  """``(score_fn, data)`` of the experiment ``exp`` (``train.build``): ``score_fn(data,
  samples [M, S, ...], weights [M])`` for ``score`` in :data:`SCORES`, scoring the
  exact-proportion sample with ``sampling="exact_proportion"``."""
  _check("score", score, SCORES)
  _check("sampling", sampling, co.SAMPLING_MODES)
  if exp.mixture is not None:
    if score in ("auto", "tvd"):
      fn, d = metrics.mode_tvd_score, exp.mixture
    else:  # Frechet distance of the 2-D points themselves
      real = exp.mixture.sample(jax.random.key(0) if key is None else key, 10000)
      d = _RealStats(jnp.mean(real, 0), jnp.cov(real.T))
      fn = metrics.fid_score(lambda _, x: x)
  else:
    net = exp.classifier.net
    if score in ("auto", "fid"):
      fn = metrics.fid_score(lambda d_, x: net.apply(d_.classifier_params, x)[0])
    else:
      fn = metrics.class_tvd_score(lambda d_, x: net.apply(d_.classifier_params, x)[1])
    d = exp.data
  if sampling == "exact_proportion":
    fn = co.exact_proportion_score(fn)
  return fn, d


def _take(tree, idx):
  return jax.tree.map(lambda x: x[idx], tree)


def cell_best_generators(state):
  """Every cell's best local generator (by stored fitness), ``[rows * cols, ...]``."""
  rows, cols = state.fitness.min.shape[:2]
  best = np.asarray(jnp.argmin(state.fitness.min, -1)).reshape(-1)
  flat = jax.tree.map(lambda x: x.reshape((rows * cols,) + x.shape[2:]), state.params.min)
  return _take(flat, (np.arange(rows * cols), best))


# Compiled once per generator function and shapes (several methods in one process share them).
_sample = jax.jit(co.sample_mixture, static_argnums=(1, 4, 5, 6))
_draw = jax.jit(lambda apply, gens, z: jax.vmap(apply, (0, None))(gens, z), static_argnums=0)


def _evaluate(exp, generators, weights, key, n: int, sampling: str) -> dict[str, float]:
  """The run's evaluation metrics of ``n`` samples of the mixture (as ``train.evaluate``)."""
  pair = exp.coev.pair
  w = jnp.asarray(weights, jnp.float32)
  x = _sample(key, pair.generator.apply, generators, w, n, pair.latent_dim, sampling)
  if exp.mixture is not None:
    m = jax.device_get(metrics.mixture_metrics(x, exp.mixture))
    return {k: float(v) for k, v in m.items()}
  return {k: float(v) for k, v in exp.image_evaluator(np.asarray(x)).items()}


def search(
  run,
  method: str = "es",
  *,
  score: str = "auto",
  sampling: str = "independent",
  seed: int = 0,
  samples: int | None = None,
  cell: int | None = None,
  options: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """Run ``method`` on a run opened by :func:`minmaxlab.runner.load_run`; returns the record
  written by :func:`write` (nothing is written here).

  Args:
    run: the finished (or interrupted) run.
    method: ``"es"`` (``co.optimize_mixture`` on ``cell``'s mixture, default the best
      cell), ``"greedy"`` or ``"ga"`` (``co.greedy_ensemble`` / ``co.ga_ensemble`` over
      every cell's best generator).
    score, sampling: see the module docstring.
    seed: every random number (latents, ES / GA draws, evaluation) comes from it.
    samples: samples per generator for the score (default ``config.mixture_samples``).
    cell: the ES's cell (flat index).
    options: keyword arguments of the library function (e.g. ``generations``, ``sigma``).
  """
  from experiments.coevolution import train

  _check("method", method, METHODS)
  config = run.config
  exp = train.build(config)
  state = jax.tree.map(jnp.asarray, run.state["state"])
  k_latent, k_search, k_eval, k_real = jax.random.split(jax.random.key(seed), 4)
  fn, d = score_function(exp, score, sampling, k_real)
  n = int(samples or config.mixture_samples)
  z = jax.random.normal(k_latent, (n, exp.coev.pair.latent_dim))
  target = _Target(exp, state, _chosen_cell(exp.coev, state, cell), fn, d, z)
  opts = dict(options or {})
  t0 = time.perf_counter()
  if method == "es":
    found = _es(target, k_search, opts)
  else:
    found = _ensemble(target, method, k_search, opts)
  seconds = time.perf_counter() - t0
  num_eval = int(config.num_eval_samples)
  cols = exp.coev.config.cols
  weights, candidates = found.weights, found.candidates
  return {
    "method": method,
    "score": score if score != "auto" else ("tvd" if exp.mixture is not None else "fid"),
    "sampling": sampling,
    "seed": seed,
    "samples_per_generator": n,
    "cell": list(divmod(target.cell, cols)),
    "options": opts,
    "weights": np.round(weights, 6).tolist(),
    "members": [[candidates[i] // cols, candidates[i] % cols] for i in np.flatnonzero(weights > 0)],
    "score_before": found.before,
    "score_after": found.after,
    "seconds": seconds,
    "metrics_trained": _evaluate(
      exp, target.cell_gens, target.cell_weights, k_eval, num_eval, sampling
    ),
    "metrics_ensemble": _evaluate(exp, found.generators, weights, k_eval, num_eval, sampling),
    **found.extra,
  }


def _chosen_cell(coev, state, cell: int | None) -> int:
  """``cell`` (flat index), checked, or the best-scoring cell of the training's read-out."""
  rows, cols = coev.config.rows, coev.config.cols
  score_now = np.asarray(state.mixture_score).reshape(-1)
  if cell is None:
    cell = int(np.argmin(np.where(np.isfinite(score_now), score_now, np.inf)))
  if not 0 <= cell < rows * cols:
    raise ValueError(f"cell must be in [0, {rows * cols}), got {cell}")
  return cell


class _Target:
  """What a search scores: the chosen cell's trained mixture, its members and the score of
  samples drawn from the latents ``z``."""

  def __init__(self, exp, state, cell: int, fn, d, z):
    coev = exp.coev
    rows, cols = coev.config.rows, coev.config.cols
    self.exp, self.state, self.cell, self.fn, self.d, self.z = exp, state, cell, fn, d, z
    # The trained mixture of the chosen (best) cell, as the training's read-out has it.
    self.cell_gens, self.cell_weights = coev.mixture(state, cell)
    r, c = divmod(cell, cols)
    self.member_cells = co.neighbour_indices(rows, cols, coev.config.neighbourhood)[r, c]
    self.usable = co.member_mask(rows, cols, coev.config.neighbourhood)[r, c]

  def score_of(self, generators):
    """``w -> score`` of the mixture of ``generators`` with weights ``w``."""
    xs = _draw(self.exp.coev.pair.generator.apply, generators, self.z)
    return lambda w: self.fn(self.d, xs, w)


class _Found(NamedTuple):
  weights: np.ndarray
  before: float
  after: float
  generators: Any
  candidates: list[int]  # the cells (flat) the weights are over
  extra: dict


def _es(t: _Target, k_search, opts) -> _Found:
  """``co.optimize_mixture`` on the chosen cell's mixture."""
  score_of = t.score_of(t.cell_gens)
  out = jax.jit(lambda k, w: co.optimize_mixture(k, score_of, w, usable=t.usable, **opts))(
    k_search, t.cell_weights
  )
  extra = {"accepted": int(np.sum(out.accepted)), "evaluations": 1 + int(out.scores.shape[0])}
  weights = np.asarray(out.weights, np.float64)
  candidates = [int(i) for i in t.member_cells]
  return _Found(weights, float(out.initial_score), float(out.score), t.cell_gens, candidates, extra)


def _ensemble(t: _Target, method: str, k_search, opts) -> _Found:
  """``co.greedy_ensemble`` / ``co.ga_ensemble`` over every cell's best generator."""
  c = t.exp.coev.config
  num_cells = c.rows * c.cols
  generators = cell_best_generators(t.state)
  score_of = t.score_of(generators)
  trained = np.zeros(num_cells)
  np.add.at(trained, t.member_cells, np.asarray(t.cell_weights) * t.usable)
  before = float(jax.jit(score_of)(jnp.asarray(trained, jnp.float32)))
  lib = co.greedy_ensemble if method == "greedy" else co.ga_ensemble
  out = lib(k_search, score_of, num_cells, **opts)
  extra = {"evaluations": out.evaluations, "history": [float(h) for h in out.history]}
  return _Found(out.weights, before, out.score, generators, list(range(num_cells)), extra)


def write(workdir, record: dict) -> Path:
  """``<workdir>/ensemble_<method>.json``."""
  path = Path(workdir) / f"ensemble_{record['method']}.json"
  path.write_text(json.dumps(record, indent=2))
  return path


def summary_line(record: dict) -> str:
  """One line: the score before and after, and the members."""
  return (
    f"{record['method']}: {record['score']} {record['score_before']:.4g} ->"
    f" {record['score_after']:.4g} with {len(record['members'])} generators"
    f" (cells {record['members']}) in {record['seconds']:.1f} s"
  )


TRAINER = "experiments.coevolution.train"


def load(workdir):
  """:func:`minmaxlab.runner.load_run` of a coevolution run (runs written before
  ``config.json`` named its trainer are read with this experiment's)."""
  from minmaxlab import runner

  try:
    return runner.load_run(workdir)
  except ValueError as e:
    if "does not name the trainer" not in str(e):
      raise
    return runner.load_run(workdir, module=TRAINER)


def after_training(config, workdir) -> list[str]:
  """The end-of-run steps of ``config.ensembles`` (``main.py`` calls it after training):
  each method listed in ``config.ensembles.methods`` runs on the finished run, writes
  its JSON and returns its line."""
  block = config.get("ensembles", None)
  methods = tuple(block.methods) if block is not None else ()
  if not methods:
    return []
  run = load(workdir)
  lines = []
  for method in methods:
    _check("config.ensembles.methods entry", method, METHODS)
    opts = block[method].to_dict() if method in block else {}
    record = search(
      run,
      method,
      score=block.score,
      sampling=block.sampling,
      seed=config.seed,
      samples=block.samples or None,
      options=opts,
    )
    write(workdir, record)
    lines.append(summary_line(record))
  return lines


def main(argv):
  from absl import flags, logging

  f = flags.FLAGS
  if not f["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every restore at INFO
  if len(argv) > 1:
    raise ValueError(f"unexpected arguments: {argv[1:]}")
  options = json.loads(f.options) if f.options else {}
  if not isinstance(options, dict):
    raise ValueError(f"--options must be a JSON object, got {f.options!r}")
  run = load(f.workdir)
  record = search(
    run,
    f.method,
    score=f.score,
    sampling=f.sampling,
    seed=f.seed,
    samples=f.samples or None,
    cell=None if f.cell < 0 else f.cell,
    options=options,
  )
  path = write(f.workdir, record)
  print(summary_line(record))
  print(f"written: {path}")


def _define_flags():
  from absl import flags

  flags.DEFINE_string("workdir", None, "A coevolution run directory.")
  flags.DEFINE_enum("method", "es", METHODS, "es | greedy | ga.")
  flags.DEFINE_enum("score", "auto", SCORES, "auto | tvd | fid.")
  flags.DEFINE_enum("sampling", "independent", co.SAMPLING_MODES, "Mixture sampling mode.")
  flags.DEFINE_integer("seed", 0, "Seed of every random number of the search.")
  flags.DEFINE_integer("samples", 0, "Samples per generator (0: config.mixture_samples).")
  flags.DEFINE_integer("cell", -1, "The ES's cell (flat index; -1: the best).")
  flags.DEFINE_string(
    "options", "", "JSON keyword arguments of the search, e.g. '{\"generations\": 100}'."
  )
  flags.mark_flags_as_required(["workdir"])


if __name__ == "__main__":
  from experiments import _cli

  _define_flags()
  _cli.run(main)
