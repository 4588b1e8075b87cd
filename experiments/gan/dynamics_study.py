r"""The game-dynamics study of issue 39 (protocol ``protocols/dynamics.v2.json``).

  python -m experiments.gan.dynamics_study run               # run (or resume) missing seeds
  python -m experiments.gan.dynamics_study run --arms alt    # one arm (one process per arm)
  python -m experiments.gan.dynamics_study report            # the README block, rewritten

AltGAN against LA-AltGAN k=5 on Fashion-MNIST, trained by ``train.train`` with the
dynamics action at every evaluation (``config.dynamics_every = 1``): the rotational share
and the top :math:`|\Im\lambda|` of the game Jacobian at the iterate, with the FID curves
beside them. The study runner (``experiments.study``) runs each (arm, seed) missing from
``<out>``: :func:`run_seed` trains it in its own workdir ``<runs>/<arm>_s<seed>`` (resumed
from its checkpoint); its record, ``<out>/<arm>_s<seed>.json``, holds its curves (every
evaluation's scalars), the evaluation classifier's identity and the CPU seconds, and the
figure is redrawn. The table, the verdicts (``experiments.stats``) and the figure are made
from those files only.
"""

from __future__ import annotations

import time

from experiments import study
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


def run_seed(ctx, arm: str, seed: int) -> dict:
  """Train (or resume) one (arm, seed) in ``<runs>/<arm>_s<seed>``; its record. A workdir
  already trained to ``settings.steps`` or beyond (an earlier version's longer run of the
  same config) is not trained again: its rows up to ``settings.steps`` are the run's (every
  draw is a function of (seed, step)); ``trained_to`` records how far it went."""
  from experiments import _classifier_cache
  from experiments.gan import train
  from minmaxlab import runner

  protocol = ctx.protocol
  config = study_config(protocol, arm, seed)
  workdir = ctx.runs / f"{arm}_s{seed}"
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
  ctx.log(f"{arm} seed {seed}: {rows[-1]['step']} steps (trained to {trained_to})")
  return {
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
  }


# Each (arm, seed) writes ``<out>/<arm>_s<seed>.json``; the figure is redrawn after each.
STUDY = study.Study(
  protocol=PROTOCOL,
  results=RESULTS,
  run_one=run_seed,
  runs="runs/dynamics",
  blocks=("dynamics_v2",),
  saved=lambda ctx, out: dynamics_report.plot(load_runs(out), out / FIGURE.name),
)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


if __name__ == "__main__":
  raise SystemExit(main())
