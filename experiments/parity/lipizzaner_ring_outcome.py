r"""Outcome parity on the ring (issue 45 item 2, Lipizzaner): the reference's own clients and
the library, the same configuration, N seeds each, compared by two one-sided tests.

  nohup nice -n 10 python -m experiments.parity.lipizzaner_ring_outcome run \
      --lipizzaner /path/to/lipizzaner-gan --python /path/to/python-with-torch \
      >> /tmp/lip_outcome.log 2>&1 &       # registered: committed protocol and sources
  python -m experiments.parity.lipizzaner_ring_outcome measure --lipizzaner ... --python ... \
      --iterations 4                       # a trial run of one reference arm: its cost only
  python -m experiments.parity.lipizzaner_ring_outcome report  # the docs/parity.md blocks

The arms and seeds are the protocol's (``--protocol``, default the newest,
``protocols/lipizzaner_ring_outcome.v4.json``; its results go to
``results/lipizzaner_ring_outcome_v<version>``, v2's were ``results/lipizzaner_ring_outcome``);
an arm with ``"run": false`` is reused, not run. A
reference arm's run is Lipizzaner's own code (``lipizzaner_ring_run.reference_run``: 9 local
clients and the master, ring data, networks and score added at run time); its final mixture
is the one the reference's master picks (the node with the lowest mixture score of its own
evaluation), its samples scored here by ``minmaxlab.gan.metrics.mixture_metrics`` as the ring
study scores the library's. A library arm's run is ``experiments.coevolution.train`` with ring v3's
``reference_whole`` settings and the protocol's overrides (``ring_study.arm_config``).

The study runner (``experiments.study``: :data:`STUDY`) writes each run's
``<results>/<arm>_s<seed>.json`` (and, for the reference, ``.npz`` of its final mixture's
samples) atomically when it ends, seed-major; a rerun skips the runs whose JSON is there, so a
stopped study resumes at its next run (a reference run that was cut off starts again: it
cannot resume mid-run; a library run resumes from its checkpoint).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from experiments import study

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROTOCOL = HERE / "protocols" / "lipizzaner_ring_outcome.v4.json"
RESULTS = HERE / "results" / "lipizzaner_ring_outcome_v{version}"  # v2's: no suffix
RUNS = REPO / "runs" / "lipizzaner_ring_outcome_v{version}"


def score(samples, radius: float = 2.0, std: float = 0.02) -> dict:
  """The ring study's final-mixture metrics of ``samples [N, 2]`` (eager, as
  ``experiments.coevolution.train.evaluate``)."""
  import jax
  import jax.numpy as jnp

  from minmaxlab.gan import data, metrics

  m = metrics.mixture_metrics(jnp.asarray(np.asarray(samples, np.float32)), data.ring8(radius, std))
  return {f"mixture/{k}": v.item() for k, v in jax.device_get(m).items()}


def reference_commit(checkout) -> str | None:
  import subprocess

  out = subprocess.run(
    ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
  )
  return out.stdout.strip() or None


def run_reference(protocol: dict, arm: str, seed: int, args, runs: Path) -> dict:
  """One reference run; its record (metrics of the master's pick, cost, what was picked)."""
  from experiments.parity import lipizzaner_ring_run as lrr

  spec = protocol["arms"][arm]
  ref = protocol["reference"]
  r = lrr.reference_run(
    args.lipizzaner,
    args.python,
    runs / f"{arm}_s{seed}",
    selection=spec["selection"],
    seed=seed,
    iterations=args.iterations or ref["iterations"],
    eval_samples=ref["eval_samples"],
    timeout=args.timeout_s,
  )
  return {
    "arm": arm,
    "seed": seed,
    "system": "reference",
    **score(r["samples"]),
    "best_cell": r["cell"],
    "best_score": r["score"],
    "cell_scores": r["node_scores"],
    "mixture/weights": [round(float(w), 4) for w in r["weights"]],
    "mixture/sources": r["sources"],
    "iterations": args.iterations or ref["iterations"],
    "wall_seconds": r["wall_s"],
    "cpu_seconds": r["cpu_s"],
    "reference_commit": reference_commit(args.lipizzaner),
    "load_average": list(os.getloadavg()),
  }, {"samples": r["samples"], "weights": r["weights"]}


def run_library(protocol: dict, arm: str, seed: int, runs: Path) -> dict:
  """One library run (``train.train`` in ``runs/<arm>_s<seed>``; a cut-off run resumes from
  its checkpoint); its record as ``ring_study.read_run`` makes it."""
  from experiments.coevolution import ring_study, train

  lib = protocol["library"]
  sub = {"common": lib["common"], "arms": {arm: protocol["arms"][arm]}}
  config = ring_study.arm_config(sub, arm, seed)
  workdir = runs / f"{arm}_s{seed}"
  t0, c0 = time.perf_counter(), time.process_time()
  train.train(config, workdir, resume=(workdir / "checkpoints").exists())
  rec = ring_study.read_run(workdir, arm, seed)
  rec.update(
    system="library",
    wall_seconds=round(time.perf_counter() - t0, 1),
    cpu_seconds=round(time.process_time() - c0, 1),
    load_average=list(os.getloadavg()),
  )
  return rec


def run_one(ctx, arm: str, seed: int):
  """One registered run of ``arm`` (its protocol's ``system``): its record and arrays."""
  if ctx.protocol["arms"][arm]["system"] == "reference":
    rec, arrays = run_reference(ctx.protocol, arm, seed, ctx.options, ctx.runs)
  else:
    rec, arrays = run_library(ctx.protocol, arm, seed, ctx.runs), None
  ctx.log(
    f"{arm} seed {seed}: modes {rec['mixture/modes_covered']}, HQ"
    f" {rec['mixture/high_quality_rate']:.3f}; wall {rec['wall_seconds']:.0f} s, CPU"
    f" {rec['cpu_seconds']:.0f} s"
  )
  return rec, arrays


def reference_options(ap) -> None:
  """The options of a study that runs Lipizzaner's own clients (and ``measure``'s)."""
  ap.add_argument("--lipizzaner", default=None, help="a checkout of ALFA-group/lipizzaner-gan")
  ap.add_argument("--python", default="python3", help="an interpreter with torch")
  ap.add_argument("--iterations", type=int, default=None, help="measure only")
  ap.add_argument("--seed", type=int, default=0, help="measure only")
  ap.add_argument("--timeout_s", type=float, default=4 * 3600.0)


def reference_check(name: str):
  """The check of :func:`reference_options`: the one line of a bad option of ``run`` or
  ``measure`` (``name`` the study's), or ``None``."""

  def check(args) -> str | None:
    if args.lipizzaner is None or not Path(args.lipizzaner).is_dir():
      return f"{name}: --lipizzaner {args.lipizzaner}: not a checkout"
    if args.iterations is not None and (args.command != "measure" or args.iterations < 1):
      return f"{name}: --iterations {args.iterations}: measure only, >= 1"
    return None

  return check


def _options(ap) -> None:
  reference_options(ap)
  ap.add_argument("--arm", default="reference_off", help="measure only")


def measure(args) -> None:
  """A trial of one reference arm (not registered, written outside the results): its
  record, printed."""
  protocol = json.loads(Path(args.protocol).read_text())
  if args.arm not in protocol["arms"] or protocol["arms"][args.arm]["system"] != "reference":
    raise SystemExit(f"lipizzaner_ring_outcome: --arm {args.arm}: not a reference arm")
  trial = Path("/tmp/lipizzaner_ring_measure")
  rec, _ = run_reference(protocol, args.arm, args.seed, args, trial)
  print(json.dumps(rec))


STUDY = study.Study(
  protocol=PROTOCOL,
  results=RESULTS,
  run_one=run_one,
  runs=str(RUNS),
  blocks=("lipizzaner_ring_outcome", "lipizzaner_ring_outcome_v3", "lipizzaner_ring_outcome_v4"),
  options=_options,
  check=reference_check("lipizzaner_ring_outcome"),
  commands=(("measure", measure),),
)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


def _terminate(signum, frame):
  raise SystemExit(128 + signum)  # runs the finally blocks that stop the reference's processes


if __name__ == "__main__":
  import signal

  signal.signal(signal.SIGTERM, _terminate)
  signal.signal(signal.SIGINT, _terminate)  # a background job ignores SIGINT unless set
  sys.exit(main())
