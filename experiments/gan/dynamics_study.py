r"""The game-dynamics study of issue 39 (protocol ``protocols/dynamics.v2.json``).

  python -m experiments.gan.dynamics_study run               # run (or resume) missing seeds
  python -m experiments.gan.dynamics_study run --arms alt    # one arm (one process per arm)
  python -m experiments.gan.dynamics_study report            # figure + README block (stdout)

AltGAN against LA-AltGAN k=5 on Fashion-MNIST, trained by ``train.train`` with the
dynamics action at every evaluation (``config.dynamics_every = 1``): the rotational share
and the top :math:`|\Im\lambda|` of the game Jacobian at the iterate, with the FID curves
beside them. Each (arm, seed) trains in its own workdir ``<runs>/<arm>_s<seed>`` (resumed
from its checkpoint) and, once finished, writes ``<out>/<arm>_s<seed>.json``: its curves
(every evaluation's scalars), the evaluation classifier's identity and the CPU seconds.
A seed with that file is skipped. The table, the verdicts (``experiments.stats``) and the
figure are made from those files only.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments import _report
from experiments.gan import dynamics_report
from experiments.gan.dynamics_report import FIGURE, PROTOCOL, RESULTS, load_runs

# The scalars kept per evaluation (metrics.jsonl keys), besides ``step``.
CURVE_KEYS = (
  "fid",
  "inception_score",
  "class_tvd",
  "dynamics/rotation_share",
  "dynamics/max_imag",
  "dynamics/top_abs",
  "dynamics/spectral_radius",
  "dynamics/spectral_radius_per_step",
  "dynamics/operator_eigenvalues_re",  # the update operator's outer eigenvalues (lists)
  "dynamics/operator_eigenvalues_im",
)


def study_config(protocol: dict, arm: str, seed: int):
  """The trainer config of one (arm, seed): ``settings.config_module`` (default the
  ``fashion_mnist_mlp`` config) with the protocol's settings and the arm's fields."""
  import importlib

  s = protocol["settings"]
  module = s.get("config_module", "experiments.gan.configs.fashion_mnist_mlp")
  c = importlib.import_module(module).get_config()
  c.seed = seed
  c.dataset = s.get("dataset", c.dataset)
  c.loss = s.get("loss", c.loss)
  c.num_steps, c.batch_size = s["steps"], s["batch_size"]
  c.lr_min = c.lr_max = s["lr"]
  c.b1, c.b2, c.ema_decay = s["b1"], s["b2"], s["ema_decay"]
  c.log_every, c.eval_every, c.checkpoint_every = s["log_every"], s["eval_every"], s["eval_every"]
  c.num_eval_samples = s["eval_samples"]
  c.dynamics_every = s["dynamics_every"]
  for k, v in s["dynamics"].items():
    c.dynamics[k] = v
  c.tensorboard = c.progress = False
  for k, v in protocol["arms"][arm].items():
    if k != "label":
      c[k] = v
  return c


def run_seed(protocol: dict, arm: str, seed: int, runs: Path, out: Path, log=print, reg=None):
  """Train (or resume) one (arm, seed) and write ``<out>/<arm>_s<seed>.json`` (with ``reg``,
  the study's registration record: ``experiments.registration.start``). A workdir
  already trained to ``settings.steps`` or beyond (an earlier version's longer run of the
  same config) is not trained again: its rows up to ``settings.steps`` are the run's (every
  draw is a function of (seed, step)); ``trained_to`` records how far it went."""
  from experiments import _classifier_cache
  from experiments.gan import train
  from minmaxlab import runner

  config = study_config(protocol, arm, seed)
  workdir = Path(runs) / f"{arm}_s{seed}"
  metrics = workdir / "metrics.jsonl"
  done = metrics.exists() and any(r["step"] >= config.num_steps for r in runner.read_jsonl(metrics))
  t0 = time.process_time()
  diverged = None
  if not done:
    try:
      train.train(config, workdir, resume=(workdir / "checkpoints").exists())
    except train.TrainingDiverged as e:
      diverged = str(e)
  cpu = time.process_time() - t0 if not done else None
  rows = runner.read_jsonl(metrics)
  trained_to = rows[-1]["step"]
  rows = [r for r in rows if r["step"] <= config.num_steps]
  evaluated = [r for r in rows if r["step"] % config.eval_every == 0 or r is rows[-1]]
  curves = [{"step": r["step"], **{k: r[k] for k in CURVE_KEYS if k in r}} for r in evaluated]
  scorer = None
  if "fid" in rows[-1]:
    scorer = _classifier_cache.cached_identity(config.dataset, config.classifier.cache_dir or None)
  record = {
    "study": protocol["study"],
    "version": protocol["version"],
    "arm": arm,
    "label": protocol["arms"][arm]["label"],
    "seed": seed,
    "steps": rows[-1]["step"],
    "diverged": diverged,
    "trained_to": trained_to,
    "cpu_s_last_process": None if cpu is None else round(cpu, 1),
    "classifier": scorer,
    "curves": curves,
    "registration": reg,
  }
  out.mkdir(parents=True, exist_ok=True)
  path = out / f"{arm}_s{seed}.json"
  _report.write_json(path, record)
  log(f"{arm} seed {seed}: {record['steps']} steps (trained to {trained_to}) -> {path}")
  return path


def run(
  protocol_path=PROTOCOL,
  arms=None,
  seeds=None,
  runs="runs/dynamics",
  out=RESULTS,
  log=print,
  trial=False,
):
  """Run every (arm, seed) of the protocol without a result file, seeds outermost; refused
  (``experiments.registration.start``) unless the protocol and the code are committed, or
  ``trial``."""
  from experiments import _report, registration

  reg = registration.start(protocol_path, trial=trial)
  protocol = _report.load_protocol(protocol_path)
  arms = arms or list(protocol["arms"])
  unknown = [a for a in arms if a not in protocol["arms"]]
  if unknown:
    raise SystemExit(f"--arms: {', '.join(unknown)} not in {', '.join(protocol['arms'])}")
  for seed in seeds if seeds is not None else protocol["seeds"]:
    for arm in arms:
      if not (Path(out) / f"{arm}_s{seed}.json").exists():
        run_seed(protocol, arm, seed, Path(runs), Path(out), log, reg)


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("command", choices=["run", "report"])
  p.add_argument("--protocol", default=str(PROTOCOL))
  p.add_argument("--trial", action="store_true", help="a smoke run: registration not checked")
  p.add_argument("--arms", help="comma-separated subset of the protocol's arms")
  p.add_argument("--seeds", help="comma-separated subset of the protocol's seeds")
  p.add_argument("--runs", default="runs/dynamics", help="the workdirs' parent")
  p.add_argument("--out", default=str(RESULTS), help="per-seed JSON (and the figure)")
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  split = lambda v: v.split(",") if v else None  # noqa: E731
  if args.command == "run":
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    seeds = [int(s) for s in split(args.seeds)] if args.seeds else None
    out = Path(args.out)
    run(args.protocol, split(args.arms), seeds, args.runs, out, _flush_print, args.trial)
    return
  print(f"figure: {dynamics_report.plot(load_runs(args.out), Path(args.out) / FIGURE.name)}")
  print(dynamics_report.readme_table(args.protocol, args.out))


def _flush_print(line: str) -> None:
  print(line, flush=True)


if __name__ == "__main__":
  main()
