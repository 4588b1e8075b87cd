"""Black-box PBT (``minmaxlab.pbt.Controller``) of LA-AltGAN: the experiment's trainer.

Tasks (``config.task``): ``"ring8"`` (:class:`RingGANTask`, below): a trial
trains the GAN ``steps_per_trial`` steps on the 8-Gaussian ring from its
parent's checkpoint with the trial's learning rates and learning-rate decay (an
exponential schedule whose parameters PBT mutates), then scores the generator
with a non-differentiable fitness: modes covered + high-quality rate - mode
KL / log 8 (``gan.metrics``). ``"fashion_mnist"``
(:class:`experiments.pbt.fashion.FashionLAGANTask`): Fashion-MNIST, fitness =
-classifier-FID. The controller names the task (``TASK``, this module's
:func:`task_from_config`, with the run-defining config fields as JSON arguments):
worker processes and MPI ranks import it, nothing is pickled. :func:`train`
runs the controller with local worker processes, inline, or as rank 0 of
``mpirun`` (``workers="mpi"``), printing a status line and the population table as trials finish.
"""

from __future__ import annotations

import json
import math
import os
import time
import typing
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab
from experiments.pbt import population_report
from minmaxlab import pbt, runner
from minmaxlab.gan import data, losses, metrics, models

TARGETS = {"lr_min": ("min", "learning_rate"), "lr_max": ("max", "learning_rate")}


def make_task(config):
  """The task of ``config.task``: ``"ring8"`` (:class:`RingGANTask`) or
  ``"fashion_mnist"`` (:class:`experiments.pbt.fashion.FashionLAGANTask`)."""
  if config.task == "ring8":
    return RingGANTask(config)
  if config.task == "fashion_mnist":
    from experiments.pbt.fashion import FashionLAGANTask

    return FashionLAGANTask(config)
  raise ValueError(f"config.task must be 'ring8' or 'fashion_mnist', got {config.task!r}")


TASK = "experiments.pbt.train:task_from_config"
# config fields that do not change what a campaign computes (not part of the task's arguments)
NOT_RUN_DEFINING = ("lease_s", "top_k", "max_attempts", "max_failed_trials", "trial_timeout_s")


def task_args(config) -> dict:
  """The JSON arguments of :data:`TASK` for ``config`` (what a worker rebuilds the task from)."""
  import json

  d = config.to_dict()
  return json.loads(json.dumps({k: v for k, v in d.items() if k not in NOT_RUN_DEFINING}))


@pbt.named_task
def task_from_config(**config):
  """The task of a config given as JSON data (what every worker calls)."""
  import ml_collections

  return make_task(ml_collections.ConfigDict(config))


def check_config(config) -> None:
  """Raise ``ValueError`` (one line) for every value that would crash or do nothing."""

  def need(name, ok, what):
    if name not in config:  # a field this task does not have
      return
    v = config[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):
      raise ValueError(f"config.{name} must be {what}, got {v!r}")

  def integer(lo):
    return lambda v: isinstance(v, int) and v >= lo

  need("population_size", integer(2), "an integer >= 2")
  need("num_trials", integer(config.population_size), "an integer >= population_size")
  for name in ("steps_per_trial", "batch_size", "eval_samples", "latent_dim", "sync_period"):
    need(name, integer(1), "an integer >= 1")
  need("top_k", integer(0), "an integer >= 0")
  need("lease_s", lambda v: v > 0, "> 0")
  need("max_attempts", integer(1), "an integer >= 1")
  need("trial_timeout_s", lambda v: v >= 0 and math.isfinite(v), "seconds >= 0 (0: no limit)")
  if config.get("max_failed_trials") is not None:
    need("max_failed_trials", integer(1), "an integer >= 1 or None")
  need("slow_step_size", lambda v: 0 < v <= 1, "in (0, 1]")
  need("truncation_fraction", lambda v: 0 < v <= 0.5, "in (0, 0.5]")
  need("early_stop_min_steps", integer(0), "an integer >= 0")
  need("early_stop_quantile", lambda v: 0 <= v < 1, "in [0, 1) (0: off)")
  exploits = typing.get_args(typing.get_type_hints(pbt.ControllerConfig)["exploit"])
  if config.exploit not in exploits:
    raise ValueError(f"config.exploit must be one of {exploits}, got {config.exploit!r}")
  need("b1", lambda v: 0 <= v < 1, "in [0, 1) (Adam's beta1)")
  if "loss" in config and config.loss not in losses.LOSSES:
    raise ValueError(f"config.loss must be one of {sorted(losses.LOSSES)}, got {config.loss!r}")
  hidden = config.get("hidden", (1,))
  if not (
    isinstance(hidden, (tuple, list))
    and hidden
    and all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden)
  ):
    raise ValueError(f"config.hidden must be layer widths, integers >= 1, got {hidden!r}")
  for name in ("lr_min_bounds", "lr_max_bounds", "lr_decay_bounds"):
    if name not in config:
      continue
    value = config[name]
    pair = isinstance(value, (tuple, list)) and len(value) == 2
    numbers = pair and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if not (numbers and all(map(math.isfinite, value)) and 0 < value[0] < value[1]):
      raise ValueError(
        f"config.{name} must be (low, high), finite numbers with 0 < low < high, got {value!r}"
      )


def search_space(config) -> dict:
  return make_task(config).space


def _build(cfg: dict):
  mixture = data.ring8()
  pair = models.make_pair("mlp", (2,), cfg["latent_dim"], hidden=tuple(cfg["hidden"]))
  adam = optax.inject_hyperparams(optax.adam)
  tx = minmaxlab.lookahead_minmax(
    minmaxlab.alternating(
      minmaxlab.per_player(min=adam(1e-4, b1=cfg["b1"]), max=adam(1e-4, b1=cfg["b1"]))
    ),
    cfg["sync_period"],
    cfg["slow_step_size"],
  )
  vaf = minmaxlab.value_and_vector_field(losses.game_loss(pair, cfg["loss"]))
  B, L, steps = cfg["batch_size"], pair.latent_dim, cfg["steps_per_trial"]

  @jax.jit
  def init(key):
    k1, k2 = jax.random.split(key)
    params = minmaxlab.Players(pair.generator.init(k1), pair.discriminator.init(k2))
    return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}

  @jax.jit
  def chunk(key, state, hparams):
    def step(carry, k):
      params, opt_state, t = carry
      decay = hparams["lr_decay"] ** (t.astype(jnp.float32) / 1000.0)
      lrs = {"lr_min": hparams["lr_min"] * decay, "lr_max": hparams["lr_max"] * decay}
      opt_state = pbt.set_hyperparams(opt_state, TARGETS, lrs)
      k_real, k_z = jax.random.split(k)
      real = jax.vmap(lambda kk: mixture.sample(kk, B))(jax.random.split(k_real, 2))
      z = jax.random.normal(k_z, (2, B, L))
      (l_min, l_max), v = vaf(params, real[0], z[0])
      u, opt_state = tx.update(
        v, opt_state, params, vector_field=lambda p, i: vaf(p, real[i], z[i])[1]
      )
      return (optax.apply_updates(params, u), opt_state, t + 1), (l_min, l_max)

    carry = (state["params"], state["opt_state"], state["step"])
    (params, opt_state, t), _ = jax.lax.scan(step, carry, jax.random.split(key, steps))
    return {"params": params, "opt_state": opt_state, "step": t}

  @jax.jit
  def evaluate(key, params):
    z = jax.random.normal(key, (cfg["eval_samples"], L))
    m = metrics.mixture_metrics(pair.generator.apply(params.min, z), mixture)
    fitness = m["modes_covered"] + m["high_quality_rate"] - m["mode_kl"] / math.log(8.0)
    return fitness, m

  return init, chunk, evaluate


# Per process: compiled once per run-defining config, reused by every trial.
_programs = runner.program_cache(_build, maxsize=None)


class RingGANTask:
  """``init(trial)`` and ``train(hparams, state, trial)`` for :class:`minmaxlab.pbt.Controller`."""

  def __init__(self, config):
    keys = (
      "hidden",
      "latent_dim",
      "loss",
      "batch_size",
      "b1",
      "sync_period",
      "slow_step_size",
      "steps_per_trial",
      "eval_samples",
    )
    self.cfg = {k: (list(config[k]) if isinstance(config[k], tuple) else config[k]) for k in keys}
    self.space = {
      "lr_min": pbt.Continuous(low=config.lr_min_bounds[0], high=config.lr_min_bounds[1]),
      "lr_max": pbt.Continuous(low=config.lr_max_bounds[0], high=config.lr_max_bounds[1]),
      "lr_decay": pbt.Continuous(
        low=config.lr_decay_bounds[0], high=config.lr_decay_bounds[1], log=False
      ),
    }

  def prepare(self) -> None:
    """Nothing to cache before the workers start."""

  def describe(self, hparams) -> dict[str, Any]:
    return dict(hparams)

  def schedules(self, hparams, steps) -> dict[str, np.ndarray]:
    """Both players' learning rates along ``steps`` (the exponential schedule applied)."""
    return {
      k: pbt.exponential_decay(steps, hparams[k], hparams["lr_decay"], 1000)
      for k in ("lr_min", "lr_max")
    }

  def programs(self):
    """``(init, chunk, evaluate)``: the jitted programs of this config (built once per
    process)."""
    return _programs(self.cfg)

  def init(self, trial: pbt.Trial):
    init, _, _ = self.programs()
    return init(jax.random.key(trial.seed))

  def train(self, hparams, state, trial: pbt.Trial):
    if int(state["step"]) != trial.start_step:
      raise ValueError(f"trial {trial.id}: checkpoint at step {int(state['step'])}")
    _, chunk, evaluate = self.programs()
    k_train, k_eval = jax.random.split(jax.random.key(trial.seed))
    h = {k: jnp.float32(v) for k, v in hparams.items()}
    state = chunk(k_train, state, h)
    fitness, _ = evaluate(k_eval, state["params"])
    fitness = float(fitness)
    return (fitness if math.isfinite(fitness) else -1e9), state


def build_controller(config, workdir, task, workers: int) -> pbt.Controller:
  """The campaign's :class:`minmaxlab.pbt.Controller` for ``config`` in ``workdir`` with
  ``workers`` local workers (after ``task.prepare()``); ``results`` opens a finished run's with
  ``workers=0``."""
  task.prepare()  # e.g. train/cache the evaluation classifier before any worker starts
  return pbt.Controller(
    workdir,
    task.space,
    TASK,
    task_args(config),
    config=pbt.ControllerConfig(
      population_size=config.population_size,
      num_trials=config.num_trials,
      steps_per_trial=config.steps_per_trial,
      workers=workers,
      exploit=config.exploit,
      truncation_fraction=config.truncation_fraction,
      resample_probability=config.resample_probability,
      top_k=config.top_k,
      seed=config.seed,
      lease_s=config.lease_s,
      max_attempts=config.get("max_attempts", 3),
      max_failed_trials=config.get("max_failed_trials", None),
      early_stop=early_stop(config),
      trial_timeout_s=config.get("trial_timeout_s", 0.0) or None,  # 0: no limit
    ),
  )


def early_stop(config) -> pbt.EarlyStop | None:
  """``config.early_stop_quantile > 0``: members below that quantile of the population's
  fitness after ``config.early_stop_min_steps`` steps stop (:class:`minmaxlab.pbt.EarlyStop`)."""
  q = config.get("early_stop_quantile", 0.0)
  return pbt.EarlyStop(config.get("early_stop_min_steps", 0), q) if q else None


def train(
  config,
  workdir,
  workers: int | str = 2,
  timeout: float | None = None,
  log=print,
  budget_s: float | None = None,
) -> dict | None:
  """Run (or resume: the store in ``workdir`` is the state) PBT; return the summary.

  ``workers``: local worker processes (``0``: trials inline), or ``"mpi"``: this
  process is one rank of ``mpirun -n P`` (``P >= 2``, checked before any work):
  rank 0 runs the controller and returns the summary, ranks ``1..P-1`` are
  workers (same claim/lease/report protocol, see ``minmaxlab.pbt.run_mpi``) and
  return ``None``.

  ``budget_s``: a wall-clock budget (seconds); when it is spent no trial is
  started any more, the running ones finish, the outputs are written and the
  summary has ``budget_ended=True`` (the same call resumes the campaign).
  """
  check_config(config)
  workdir = Path(workdir)
  if workers == "mpi":
    comm = pbt.mpi_world()  # fewer than 2 ranks: a clear ValueError before any work
  elif not (isinstance(workers, int) and workers >= 0):
    raise ValueError(f"workers must be an integer >= 0 or 'mpi', got {workers!r}")
  task = make_task(config)
  start = time.monotonic()
  progress: list[population_report.Progress] = []
  if workers == "mpi":

    def make_controller():
      c = build_controller(config, workdir, task, 0)
      progress.append(population_report.Progress(c, config.num_trials, task, log))
      return c

    out = pbt.run_mpi(
      make_controller,
      comm=comm,
      timeout=timeout,
      on_progress=lambda s: progress[0](s),
      budget_s=budget_s,
    )
    if out is None:
      return None  # a worker rank: rank 0 writes the outputs
    controller, status = out
  else:
    controller = build_controller(config, workdir, task, workers)
    status = None
  try:
    with runner.workdir_lock(workdir):  # held until the outputs and the finish marker are written
      run = runner.TrainingRun(workdir, config, config.num_trials, module=__name__)
      if status is None:
        if run.finished():
          log(f"{workdir}: finished earlier ({config.num_trials} trials); nothing changed")
          return json.loads((workdir / "summary.json").read_text())
        status = controller.run(
          timeout=timeout,
          on_progress=population_report.Progress(controller, config.num_trials, task, log),
          budget_s=budget_s,
        )
      return _finish(run, controller, task, _kept(controller.store, status, workers, start))
  finally:
    controller.close()


RUN_NUMBERS = "run_numbers"  # the store's record of the call that completed the campaign


def _kept(store, status: dict, workers, start: float) -> dict:
  """The numbers of the call that completed the campaign (``status``, the workers, the
  wall time), recorded in the store when it completes; a later call that only completes
  the finish (cut short by a kill) reports those, not its own (no trial run, no failure
  seen, a few seconds)."""
  numbers = {**status, "workers": workers, "wall_seconds": time.monotonic() - start}
  if status.get("budget_ended"):
    return numbers
  kept = store.get(RUN_NUMBERS)
  if kept is not None and kept.get("done") == status.get("done"):
    return kept
  with store.transaction() as db:
    store.put(db, RUN_NUMBERS, numbers)
  return numbers


def _finish(run: runner.TrainingRun, controller, task, numbers: dict) -> dict:
  """Write the campaign's outputs (``lineage.jsonl``, ``lineages.png``, ``summary.json``)
  and, when every trial is done (not a spent budget), the finish marker
  (``runner.finish``) last; returns the summary. A campaign cut short anywhere in here is
  completed by the same command."""
  workdir = run.workdir
  rows = population_report.lineage_rows(controller.store, task)
  tmp = workdir / ".tmp-lineage.jsonl"
  tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
  tmp.replace(workdir / "lineage.jsonl")
  best = controller.store.best(controller.ranking)
  chain = [] if best is None else controller.store.lineage(best.id)  # none: budget spent
  runner.fault_point("finish:figures")
  population_report.plot_lineages(workdir / "lineages.png", controller.store, task)
  population = {m: controller.store.trial(t) for m, t in controller.store.population().items()}
  summary = {
    **numbers,
    "best_lineage": [
      {
        "trial": c.id,
        "start_step": c.start_step,
        "fitness": c.fitness,
        **c.hparams,
        **task.describe(c.hparams),
      }
      for c in chain
    ],
    "population": [
      {"member": m, "trial": t.id, "fitness": t.fitness, **task.describe(t.hparams)}
      for m, t in sorted(population.items())
    ],
  }
  products = ["pbt.sqlite", "lineage.jsonl", "lineages.png", "summary.json"]
  if best is not None and best.ckpt and not best.ckpt_deleted:  # the best checkpoint
    products.append(os.path.relpath(best.ckpt, workdir))
  run.finish(summary, products, mark=not numbers.get("budget_ended"), indent=1)
  return summary
