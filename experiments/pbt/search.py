"""One PBT or random-search run of the ``fashion_mnist_lagan`` task scored at the
lookahead slow weights, and a replay of a hyperparameter schedule from scratch: shared by
both versions of the PBT vs random-search study (``results.py``, ``pbt_vs_rs_v1.py``)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent


def trial_keys(trial_seed: int):
  """``(training key, selection key)`` of a trial: the selection key draws the latents of
  the ``eval_samples`` images whose FID is the trial's fitness."""
  import jax

  return jax.random.split(jax.random.key(trial_seed))


def slow_eval_task(config):
  """``fashion.FashionLAGANTask`` scoring the lookahead slow weights (same training)."""
  import jax.numpy as jnp

  import minmaxlab
  from experiments.pbt.fashion import FashionLAGANTask

  class SlowEvalTask(FashionLAGANTask):
    def train(self, hparams, state, trial):
      if int(state["step"]) != trial.start_step:
        raise ValueError(f"trial {trial.id}: checkpoint at step {int(state['step'])}")
      _, chunk, generate, images, evaluator = self.programs()
      k_train, k_eval = trial_keys(trial.seed)
      h = {k: jnp.float32(v) for k, v in hparams.items() if k != "sync_period_index"}
      h["sync_period_index"] = jnp.int32(hparams["sync_period_index"])
      state = chunk(k_train, state, h, images)
      slow = minmaxlab.lookahead_slow_params(state["opt_state"]).min
      fake = np.asarray(generate(k_eval, slow))
      fid = float(evaluator(fake)["fid"]) if np.all(np.isfinite(fake)) else math.inf
      return (-fid if math.isfinite(fid) else -1e9), state

  return SlowEvalTask(config)


def run_search(config, workdir: Path, log=print) -> dict:
  """Run (or resume, or skip when finished) one PBT / random-search run; its result."""
  from experiments.pbt import population_report, train

  workdir = Path(workdir)
  done = workdir / "result.json"
  if done.exists():
    return json.loads(done.read_text())
  workdir.mkdir(parents=True, exist_ok=True)
  cpu_file = workdir / "cpu_s.json"
  cpu_before = json.loads(cpu_file.read_text()) if cpu_file.exists() else 0.0
  task = slow_eval_task(config)
  t0 = time.process_time()

  def progress(status):
    cpu_file.write_text(json.dumps(cpu_before + time.process_time() - t0))
    log(f"{workdir.name}: {population_report.status_line(status, config.num_trials)}")

  controller = train.build_controller(config, workdir, task, 0)
  try:
    controller.run(on_progress=progress)
    trials = sorted(controller.store.trials(), key=lambda t: t.id)
    best = controller.store.best()
    chain = controller.store.lineage(best.id)
    population = controller.store.population()
  finally:
    controller.close()
  cpu = cpu_before + time.process_time() - t0
  result = {
    "seed": int(config.seed),
    "cpu_s": cpu,
    "trials": [
      {
        "trial": t.id,
        "member": t.member,
        "parent": t.parent_id,
        "start_step": t.start_step,
        "fid": -t.fitness,
        **task.describe(t.hparams),
      }
      for t in trials
    ],
    "best_trial": best.id,
    "best_fid": -best.fitness,
    "best_ckpt": best.ckpt,
    "best_lineage": [{"trial": t.id, "hparams": dict(t.hparams)} for t in chain],
    "final_population_fids": [-t.fitness for t in trials if t.id in set(population.values())],
  }
  done.write_text(json.dumps(result))
  return result


def offline_trial(**fields):
  """A ``pbt.Trial`` run outside the controller (a replay or a re-score): no parent
  checkpoint, one attempt, no fitness or checkpoint of its own yet."""
  from minmaxlab import pbt

  bookkeeping = dict(parent_ckpt=None, attempt=1, fitness=None, ckpt=None, ckpt_deleted=False)
  return pbt.Trial(**bookkeeping, **fields)


def replay(config, schedule: list[dict], seed: int, return_state: bool = False):
  """Train from scratch following ``schedule`` (one hyperparameter dict per trial of
  ``config.steps_per_trial`` steps) with fresh seeds; the FID after every trial (and the
  final training state when ``return_state``)."""

  task = slow_eval_task(config)
  fids, state = [], None
  for i, h in enumerate(schedule):
    trial = offline_trial(
      id=i + 1,
      member=0,
      parent_id=None if i == 0 else i,
      hparams=dict(h),
      start_step=i * config.steps_per_trial,
      steps=config.steps_per_trial,
      seed=1_000_003 * (seed + 1) + 7919 * i,
      status="running",
      worker="replay",
      processed=False,
    )
    if state is None:
      state = task.init(trial)
    fitness, state = task.train(dict(h), state, trial)
    fids.append(-fitness)
  return (fids, state) if return_state else fids
