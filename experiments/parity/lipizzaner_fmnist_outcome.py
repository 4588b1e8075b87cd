r"""Outcome parity on Fashion-MNIST, 2x2 (issue 45 item 2, Lipizzaner): the reference's own
clients and the library, the same configuration, N seeds each, compared by two one-sided tests.

  nohup nice -n 10 python -m experiments.parity.lipizzaner_fmnist_outcome run \
      --lipizzaner /path/to/lipizzaner-gan --python /path/to/python-with-torch \
      >> /tmp/lip_fmnist.log 2>&1 &        # registered: committed protocol and sources
  python -m experiments.parity.lipizzaner_fmnist_outcome measure --system reference \
      --lipizzaner ... --python ... --iterations 2   # a trial run (not registered): its cost
  python -m experiments.parity.lipizzaner_fmnist_outcome report  # the docs/parity.md block

The arms, seeds, length and margins are ``protocols/lipizzaner_fmnist_outcome.v1.json``'s.
The reference arm is Lipizzaner's own code (``lipizzaner_fmnist_run.reference_run``: 4 local
clients and the master, its ``neurips2018/mnist/mnist-2x2.yml`` with the protocol's length,
on the Fashion-MNIST IDX files). The library arm is ``experiments.coevolution.train`` with the
same YAML file read by ``lipizzaner_config.read(path, coupling="reference")`` and the
protocol's overrides (:func:`library_config`).

Both sides' final mixtures are scored the same way (:func:`final_mixture`): the reference's
master evaluates every client's neighbourhood mixture (its distinct neighbours' best
generators with the client's mixture weights, ``master.score_sample_size`` samples,
exact-proportion) and keeps the best; here every cell's mixture of ``eval_samples`` samples
(the reference's own, as its master drew them; the library's, drawn by its
``mixture_samples`` program) is scored by ONE evaluation classifier (the library's, trained
on Fashion-MNIST with a fixed seed), and the cell with the lowest FID is the final mixture:
its class TVD and log FID are the endpoints. Each side's own pick is recorded beside it.

The study runner (``experiments.study``: :data:`STUDY`) writes each run's record,
``results/lipizzaner_fmnist_outcome/<arm>_s<seed>.json`` (and, for the reference, ``.npz``
with the first ``npz_samples`` of its final mixture's samples as uint8), atomically when it
ends; a rerun skips the runs whose JSON is there (a reference run that was cut off starts
again; a library run resumes from its checkpoint).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from experiments import study
from experiments.parity.lipizzaner_ring_outcome import (
  reference_check,
  reference_commit,
  reference_options,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROTOCOL = HERE / "protocols" / "lipizzaner_fmnist_outcome.v1.json"
RESULTS = HERE / "results" / "lipizzaner_fmnist_outcome"
RUNS = REPO / "runs" / "lipizzaner_fmnist_outcome"
FASHION_IDX = "/usr/share/datasets/fashion-mnist"


def pick(cells: dict) -> int:
  """The final mixture's cell: the lowest FID (ties: the lowest cell), the reference
  master's rule (``sorted(scores, reverse=is_reversed)[-1]``) under the one classifier."""
  return min(sorted(cells), key=lambda c: cells[c]["fid"])


def evaluator(protocol: dict):
  """The one evaluation classifier's metrics (``ImageEvaluator``) of the protocol."""
  from experiments import _classifier_cache

  clf = protocol["scoring"]["classifier"]
  ev, _ = _classifier_cache.classifier_evaluator(
    clf["dataset"], seed=clf["seed"], steps=clf["steps"]
  )
  return ev


def classifier_identity(protocol: dict) -> dict | None:
  """Which cached classifier scored a run (its parameters' digest, accuracy, CPU)."""
  from experiments import _classifier_cache

  return _classifier_cache.cached_identity(protocol["scoring"]["classifier"]["dataset"])


def as_images(samples) -> np.ndarray:
  """``[N, 784]`` (the reference's flattened rows) or ``[N, 28, 28, 1]`` as ``[N, 28, 28, 1]``."""
  x = np.asarray(samples, np.float32)
  return x.reshape(x.shape[0], 28, 28, 1)


def score_cells(ev, samples_by_cell: dict) -> dict:
  """``{cell: {"fid", "class_tvd", "inception_score"}}`` of every cell's mixture samples."""
  out = {}
  for cell, x in sorted(samples_by_cell.items()):
    m = ev(as_images(x))
    out[int(cell)] = {k: float(m[k]) for k in ("fid", "class_tvd", "inception_score")}
  return out


def final_mixture(cells: dict) -> dict:
  """The record's endpoint fields: the picked cell's metrics, and every cell's."""
  best = pick(cells)
  return {
    "mixture/fid": cells[best]["fid"],
    "mixture/log_fid": math.log(cells[best]["fid"]),
    "mixture/class_tvd": cells[best]["class_tvd"],
    "mixture/inception_score": cells[best]["inception_score"],
    "picked_cell": best,
    "cells": {str(c): v for c, v in cells.items()},
  }


def to_uint8(x) -> np.ndarray:
  """Samples in ``[-1, 1]`` as bytes (``round((x + 1) * 127.5)``, clipped), for the npz."""
  return np.clip(np.rint((np.asarray(x, np.float32) + 1.0) * 127.5), 0, 255).astype(np.uint8)


def run_reference(protocol: dict, seed: int, args, runs: Path, iterations=None):
  """One reference run; its record and the arrays kept of it."""
  from experiments.parity import lipizzaner_fmnist_run as lfr

  cfg = protocol["config"]
  iterations = iterations or cfg["iterations"]
  r = lfr.reference_run(
    args.lipizzaner,
    args.python,
    runs / f"reference_s{seed}",
    idx=args.idx,
    seed=seed,
    iterations=iterations,
    batches=cfg["batches"],
    eval_samples=cfg["eval_samples"],
    timeout=args.timeout_s,
  )
  c0 = time.process_time()
  cells = score_cells(evaluator(protocol), {c: n["samples"] for c, n in r["nodes"].items()})
  rec = {"arm": "reference", "seed": seed, "system": "reference", **final_mixture(cells)}
  best = r["nodes"][rec["picked_cell"]]
  rec.update(
    {
      "own_pick": r["reference_pick"],
      "own_scores": {str(c): [float(n["fid"]), float(n["tvd"])] for c, n in r["nodes"].items()},
      "mixture/weights": [round(float(w), 4) for w in best["weights"]],
      "mixture/sources": [str(s) for s in best["sources"]],
      "iterations": iterations,
      "wall_seconds": r["wall_s"],
      "cpu_seconds": r["cpu_s"],
      "scoring_cpu_seconds": round(time.process_time() - c0, 1),
      "classifier": classifier_identity(protocol),
      "reference_commit": reference_commit(args.lipizzaner),
      "load_average": list(os.getloadavg()),
    }
  )
  n = protocol["scoring"]["npz_samples"]
  return rec, {"samples": to_uint8(best["samples"][:n]), "weights": best["weights"]}


def write_yaml(checkout, folder: Path, seed: int, cfg: dict) -> Path:
  """The YAML file a reference run of ``seed`` uses, from the checkout's neurips2018 files."""
  from experiments.benchmarks.lipizzaner_side_by_side import source_dir
  from experiments.parity import lipizzaner_fmnist_run as lfr

  conf = source_dir(Path(checkout)) / "configuration/neurips2018"
  folder.mkdir(parents=True, exist_ok=True)
  general = lfr.general_text(
    (conf / "general-2x2.yml").read_text(), output_dir=folder / "output", seed=seed
  )
  (folder / "general-fmnist-2x2.yml").write_text(general)
  text = lfr.config_text(
    (conf / "mnist/mnist-2x2.yml").read_text(),
    iterations=cfg["iterations"],
    batches=cfg["batches"],
    eval_samples=cfg["eval_samples"],
  )
  (folder / "fmnist-2x2.yml").write_text(text)
  return folder / "fmnist-2x2.yml"


def library_config(protocol: dict, seed: int, yaml_path: Path, generations=None):
  """``configs/lipizzaner.py`` of the reference's YAML file (``coupling="reference"``), then
  the protocol's library overrides."""
  from experiments.coevolution.configs import lipizzaner

  c = lipizzaner.get_config(f"{yaml_path},reference")
  for k, v in protocol["library"]["overrides"].items():
    c[k] = tuple(v) if isinstance(v, list) else v
  if generations is not None:
    c.generations = c.eval_every = c.checkpoint_every = generations
  c.seed = seed
  return c


def library_samples(config, workdir: Path) -> tuple[dict, dict, int]:
  """Every cell's final mixture (``num_eval_samples``, the run's mixture sampling), its
  weights, and the library's own pick (its lowest in-step mixture score)."""
  import jax
  import jax.numpy as jnp

  from experiments.coevolution import experiment
  from minmaxlab import runner

  run = runner.load_run(workdir)
  progs = experiment.programs(run.config)
  state = jax.tree.map(jnp.asarray, run.state["state"])
  key = jax.random.fold_in(experiment.keys(config)[2], int(config.generations))
  out, mixes = {}, {}
  for cell in range(int(config.rows) * int(config.cols)):
    gens, weights = progs.mixture(state, cell)
    out[cell] = np.asarray(progs.mixture_samples(jax.random.fold_in(key, cell), gens, weights))
    mixes[cell] = [round(float(w), 4) for w in np.asarray(weights).reshape(-1) if w > 0]
  score = np.asarray(state.mixture_score).reshape(-1)
  return out, mixes, int(np.argmin(np.where(np.isfinite(score), score, np.inf)))


def run_library(protocol: dict, seed: int, args, runs: Path, generations=None):
  """One library run (``train.train`` in ``runs/library_s<seed>``; resumes a cut-off run)."""
  from experiments.coevolution import train

  workdir = runs / f"library_s{seed}"
  yaml_path = write_yaml(args.lipizzaner, workdir / "yaml", seed, protocol["config"])
  config = library_config(protocol, seed, yaml_path, generations)
  t0, c0 = time.perf_counter(), time.process_time()
  train.train(config, workdir, resume=(workdir / "checkpoints").exists())
  cpu_train = time.process_time() - c0
  samples, mixes, own = library_samples(config, workdir)
  cells = score_cells(evaluator(protocol), samples)
  rec = {"arm": "library", "seed": seed, "system": "library", **final_mixture(cells)}
  rec.update(
    own_pick=own,
    **{"mixture/weights": mixes[rec["picked_cell"]]},
    generations=int(config.generations),
    wall_seconds=round(time.perf_counter() - t0, 1),
    cpu_seconds=round(cpu_train, 1),
    scoring_cpu_seconds=round(time.process_time() - c0 - cpu_train, 1),
    classifier=classifier_identity(protocol),
    load_average=list(os.getloadavg()),
  )
  return rec, None


def run_one(ctx, arm: str, seed: int):
  """One registered run of ``arm`` (its protocol's ``system``): its record and arrays."""
  fn = run_reference if ctx.protocol["arms"][arm]["system"] == "reference" else run_library
  made = fn(ctx.protocol, seed, ctx.options, ctx.runs)
  rec = made[0]
  ctx.log(
    f"{arm} seed {seed}: FID {rec['mixture/fid']:.2f}, class TVD {rec['mixture/class_tvd']:.3f}"
    f" (cell {rec['picked_cell']}); wall {rec['wall_seconds']:.0f} s, CPU"
    f" {rec['cpu_seconds']:.0f} s"
  )
  return made


def _options(ap) -> None:
  reference_options(ap)
  ap.add_argument("--idx", default=FASHION_IDX, help="Fashion-MNIST IDX files (.gz or plain)")
  ap.add_argument("--system", choices=("reference", "library"), default="reference")


def measure(args) -> None:
  """A trial (not registered, written outside the results): one run's record, printed."""
  protocol = json.loads(Path(args.protocol).read_text())
  fn = run_reference if args.system == "reference" else run_library
  rec, _ = fn(protocol, args.seed, args, Path("/tmp/lipizzaner_fmnist_measure"), args.iterations)
  print(json.dumps(rec))


# Each run writes ``results/lipizzaner_fmnist_outcome/<arm>_s<seed>.json`` (and ``.npz``).
STUDY = study.Study(
  protocol=PROTOCOL,
  results=RESULTS,
  run_one=run_one,
  runs=str(RUNS),
  blocks=("lipizzaner_fmnist_outcome",),
  options=_options,
  check=reference_check("lipizzaner_fmnist_outcome"),
  commands=(("measure", measure),),
)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


def _terminate(signum, frame):
  raise SystemExit(128 + signum)  # runs the finally blocks that stop the reference's processes


if __name__ == "__main__":
  import signal

  signal.signal(signal.SIGTERM, _terminate)
  signal.signal(signal.SIGINT, _terminate)
  sys.exit(main())
