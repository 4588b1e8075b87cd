r"""Outcome parity on the ring (issue 45 item 2, Lipizzaner): the reference's own clients and
the library, the same configuration, N seeds each, compared by two one-sided tests.

  nohup nice -n 10 python -m experiments.parity.lipizzaner_ring_outcome run \
      --lipizzaner /path/to/lipizzaner-gan --python /path/to/python-with-torch \
      >> /tmp/lip_outcome.log 2>&1 &       # registered: committed protocol and sources
  python -m experiments.parity.lipizzaner_ring_outcome measure --lipizzaner ... --python ... \
      --iterations 4                       # a trial run of one reference arm: its cost only
  python -m experiments.parity.lipizzaner_ring_outcome table   # the docs/parity.md block

The arms and seeds are the protocol's (``--protocol``, default the newest,
``protocols/lipizzaner_ring_outcome.v4.json``; its ``"results"`` names its folder; v2's is
``results/lipizzaner_ring_outcome``); an arm with ``"run": false`` is reused, not run. A
reference arm's run is Lipizzaner's own code (``lipizzaner_ring_run.reference_run``: 9 local
clients and the master, ring data, networks and score added at run time); its final mixture
is the one the reference's master picks (the node with the lowest mixture score of its own
evaluation), its samples scored here by ``minmaxlab.gan.metrics.mixture_metrics`` as the ring
study scores the library's. A library arm's run is ``experiments.coevolution.train`` with ring v3's
``reference_whole`` settings and the protocol's overrides (``ring_study.arm_config``).

Each run writes ``<results>/<arm>_s<seed>.json`` (and, for the
reference, ``.npz`` of its final mixture's samples) atomically when it ends; a rerun skips
the runs whose JSON is there, so a stopped study resumes at its next run (a reference run
that was cut off starts again: it cannot resume mid-run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROTOCOL = HERE / "protocols" / "lipizzaner_ring_outcome.v4.json"
RESULTS = HERE / "results" / "lipizzaner_ring_outcome"  # v2's (a protocol's "results")
RUNS = REPO / "runs" / "lipizzaner_ring_outcome"


def results_dir(protocol: dict) -> Path:
  """The folder of a protocol's per-run JSON: its ``"results"`` (from the repository root),
  else v2's."""
  return REPO / protocol["results"] if "results" in protocol else RESULTS


def score(samples, radius: float = 2.0, std: float = 0.02) -> dict:
  """The ring study's final-mixture metrics of ``samples [N, 2]`` (eager, as
  ``experiments.coevolution.train.evaluate``)."""
  import jax
  import jax.numpy as jnp

  from minmaxlab.gan import data, metrics

  m = metrics.mixture_metrics(jnp.asarray(np.asarray(samples, np.float32)), data.ring8(radius, std))
  return {f"mixture/{k}": v.item() for k, v in jax.device_get(m).items()}


def write_atomic(path: Path, text: str | None = None, arrays: dict | None = None) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp")
  if arrays is not None:
    with open(tmp, "wb") as f:
      np.savez_compressed(f, **arrays)
  else:
    tmp.write_text(text)
  os.replace(tmp, path)


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


def run_registered(protocol: dict, reg: dict, results: Path, run_one, summary, log=print) -> None:
  """Every registered (arm, seed) not yet in ``results``, seed-major (an arm with ``"run":
  false`` is reused, not run): ``run_one(arm, seed) -> (record, arrays or None)``, written
  atomically with ``reg`` (arrays as ``.npz``) when it ends; ``summary(record)`` its log line."""
  todo = [
    (a, s)
    for s in protocol["seeds"]
    for a, spec in protocol["arms"].items()
    if spec.get("run", True) and s in spec.get("seeds", protocol["seeds"])
  ]
  for arm, seed in todo:
    out = results / f"{arm}_s{seed}.json"
    if out.exists():
      log(f"{arm} seed {seed}: done before, kept")
      continue
    log(f"{time.strftime('%H:%M:%S')} {arm} seed {seed}: start")
    rec, arrays = run_one(arm, seed)
    rec["registration"] = reg
    if arrays is not None:
      write_atomic(out.with_suffix(".npz"), arrays=arrays)
    write_atomic(out, json.dumps(rec, indent=1) + "\n")
    log(
      f"{time.strftime('%H:%M:%S')} {arm} seed {seed}: {summary(rec)}; wall"
      f" {rec['wall_seconds']:.0f} s, CPU {rec['cpu_seconds']:.0f} s"
    )


def _run_one(protocol: dict, args, runs: Path):
  def run_one(arm: str, seed: int):
    if protocol["arms"][arm]["system"] == "reference":
      return run_reference(protocol, arm, seed, args, runs)
    return run_library(protocol, arm, seed, runs), None

  return run_one


def _summary(rec: dict) -> str:
  return f"modes {rec['mixture/modes_covered']}, HQ {rec['mixture/high_quality_rate']:.3f}"


def _args(argv):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("command", choices=("run", "measure", "table"))
  ap.add_argument("--lipizzaner", default=None, help="a checkout of ALFA-group/lipizzaner-gan")
  ap.add_argument("--python", default="python3", help="an interpreter with torch")
  ap.add_argument("--protocol", default=str(PROTOCOL))
  ap.add_argument("--iterations", type=int, default=None, help="measure only")
  ap.add_argument("--arm", default="reference_off", help="measure only")
  ap.add_argument("--seed", type=int, default=0, help="measure only")
  ap.add_argument("--timeout_s", type=float, default=4 * 3600.0)
  return ap.parse_args(argv)


def main(argv=None) -> int:
  from experiments import _report, registration

  args = _args(argv)
  if args.command == "table":
    from experiments.parity import lipizzaner_ring_tables as t

    blocks = ((t.BLOCK, t.block()), (t.BLOCK_V3, t.block_v3()), (t.BLOCK_V4, t.block_v4()))
    for name, text in blocks:
      changed = _report.write_block(REPO / t.DOC, name, text)
      print(f"{t.DOC}: block {name} {'rewritten' if changed else 'unchanged'}")
    return 0
  if args.lipizzaner is None or not Path(args.lipizzaner).is_dir():
    print(
      f"lipizzaner_ring_outcome: --lipizzaner {args.lipizzaner}: not a checkout", file=sys.stderr
    )
    return 2
  protocol = json.loads(Path(args.protocol).read_text())
  if args.command == "measure":  # a trial: not registered, written outside the results
    if args.arm not in protocol["arms"] or protocol["arms"][args.arm]["system"] != "reference":
      print(f"lipizzaner_ring_outcome: --arm {args.arm}: not a reference arm", file=sys.stderr)
      return 2
    trial = Path("/tmp/lipizzaner_ring_measure")
    rec, _ = run_reference(protocol, args.arm, args.seed, args, trial)
    print(json.dumps(rec))
    return 0
  if args.iterations is not None:
    print("lipizzaner_ring_outcome: --iterations is for measure only", file=sys.stderr)
    return 2
  reg = registration.start(args.protocol)
  runs = RUNS.with_name(f"{RUNS.name}_v{protocol['version']}")
  log = lambda s: print(s, flush=True)  # noqa: E731
  run_registered(
    protocol, reg, results_dir(protocol), _run_one(protocol, args, runs), _summary, log
  )
  return 0


def _terminate(signum, frame):
  raise SystemExit(128 + signum)  # runs the finally blocks that stop the reference's processes


if __name__ == "__main__":
  import signal

  signal.signal(signal.SIGTERM, _terminate)
  signal.signal(signal.SIGINT, _terminate)  # a background job ignores SIGINT unless set
  sys.exit(main())
