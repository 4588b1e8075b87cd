"""The lookahead study of ``experiments/gan/results.py``: its arms, the config of
one (arm, seed), and the training of one arm (all its seeds at once, vmapped),
evaluated at the slow weights, the EMA of the fast weights and the EMA of the
slow weights, with a resumable checkpoint at every evaluation."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ARMS = {
  "alt": {"scheme": "alternating", "lookahead": False},
  "la_alt_k5": {"scheme": "alternating", "lookahead": True, "sync_period": 5},
  "la_alt_k1000": {"scheme": "alternating", "lookahead": True, "sync_period": 1000},
  "eg": {"scheme": "extragradient", "lookahead": False},
  "la_eg_k5": {"scheme": "extragradient", "lookahead": True, "sync_period": 5},
  "la_eg_k1000": {"scheme": "extragradient", "lookahead": True, "sync_period": 1000},
}
LABELS = {
  "alt": "AltGAN",
  "la_alt_k5": "LA-AltGAN k=5",
  "la_alt_k1000": "LA-AltGAN k=1000",
  "eg": "ExtraGrad",
  "la_eg_k5": "LA-ExtraGrad k=5",
  "la_eg_k1000": "LA-ExtraGrad k=1000",
}
# Evaluation points: the slow weights (= the iterate without lookahead), the EMA of the
# fast weights, the EMA of the slow weights (lookahead only).
POINTS = ("slow", "ema", "slow_ema")
METRICS = ("fid", "inception_score", "class_tvd")


def study_config(arm: str, seed: int, args, spec: dict | None = None):
  """The ``fashion_mnist_mlp`` config of one (arm, seed) with the study's budget; ``spec``:
  the arm's settings (default ``ARMS[arm]``; a protocol file gives its own)."""
  from experiments.gan.configs import fashion_mnist_mlp

  c = fashion_mnist_mlp.get_config()
  c.seed = seed
  c.num_steps, c.eval_every, c.checkpoint_every = args.steps, args.eval_every, args.eval_every
  c.log_every = math.gcd(args.eval_every, 100)
  c.num_eval_samples = args.eval_samples
  c.lr_min, c.lr_max, c.b1, c.b2 = args.lr, args.lr, args.b1, 0.999
  c.batch_size = args.batch_size
  c.ema_decay = 0.0  # the study adds its own averages (below)
  c.tensorboard = c.progress = False
  for k, v in (ARMS[arm] if spec is None else spec).items():
    c[k] = v
  for k, v in (getattr(args, "config_fields", None) or {}).items():  # a protocol's config
    c[k] = tuple(v) if isinstance(v, list) else v
  for item in args.set or ():  # "field=json value" or "field=text", dotted fields allowed
    name, value = item.split("=", 1)
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    if isinstance(node[leaf], str):
      node[leaf] = value
    else:
      node[leaf] = type(node[leaf])(json.loads(value))
  return c


def _tx(config, ema_horizon: float):
  """The scheme of ``config`` (``train.make_optimizer`` without EMA), wrapped in
  ``slow_ema`` (lookahead only; decay ``(1 - 1/H)^k``, the same horizon of ``H`` steps
  counted in syncs) and, outermost, ``ema`` of the fast weights (decay ``1 - 1/H``).
  ``config.optimizer == "notebook"``: :func:`_notebook_tx` instead."""
  import optax

  import minmaxlab
  from experiments.gan import train

  beta = 1.0 - 1.0 / ema_horizon
  if config.get("optimizer") == "notebook":
    return _notebook_tx(config, beta)
  inner = train.make_optimizer(config)  # ema_decay = 0: scheme (+ lookahead) only
  if config.lookahead:
    inner = minmaxlab.transforms.slow_ema(inner, beta**config.sync_period)
  return optax.with_extra_args_support(minmaxlab.transforms.ema(inner, beta))


def _notebook_tx(config, beta: float):
  """The reference's MNIST notebook, option for option (the composition its golden files
  check, ``tests/parity/test_lagan_golden.py``): per-player Adam; AltGAN (the discriminator
  first) or ExtraGrad with the reference's update point (``opponent_extrapolated``) and
  extrapolation from the last iterate; the EMA of the iterate (decay ``beta`` per step)
  updated BEFORE the sync, so inside ``lookahead_minmax`` (slow weights set lazily at the
  first sync); outermost, lookahead only, the trainer's EMA of the slow weights updated once
  per sync with the same ``beta`` (``lagan/trainer.py``'s ``G_ema_slow``)."""
  import optax

  import minmaxlab

  adam = dict(b1=config.b1, b2=config.b2)
  inner = minmaxlab.per_player(
    min=optax.adam(config.lr_min, **adam), max=optax.adam(config.lr_max, **adam)
  )
  if config.scheme == "alternating":
    scheme = minmaxlab.alternating(inner, max_steps=config.max_steps)
  elif config.scheme == "extragradient":
    scheme = minmaxlab.extragradient(
      inner, update_point="opponent_extrapolated", extrapolate_from="last_iterate"
    )
  else:
    raise ValueError(
      f"optimizer 'notebook': scheme must be alternating or extragradient, got {config.scheme!r}"
    )
  tx = minmaxlab.transforms.ema(scheme, beta)
  if config.lookahead:
    tx = minmaxlab.lookahead_minmax(tx, config.sync_period, config.slow_step_size, slow_init="lazy")
    tx = minmaxlab.transforms.slow_ema(tx, beta)
  return optax.with_extra_args_support(tx)


def _averages(opt_state) -> list:
  """The averaging states of ``opt_state``, from the outside in."""
  import jax

  import minmaxlab

  kind, found, state = minmaxlab.transforms.AveragingState, [], opt_state
  while True:
    leaves = jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, kind))
    outer = [x for x in leaves if isinstance(x, kind)]
    if not outer:
      return found
    found.append(outer[0])
    state = outer[0].inner_state


def _points(config, state) -> dict:
  """The generators to evaluate: name -> generator params."""
  import minmaxlab

  opt = state.opt_state  # AveragingState(ema) around [AveragingState(slow_ema) around] the scheme
  if config.get("optimizer") == "notebook":  # [slow_ema around lookahead around] ema
    avgs = _averages(opt)
    if not config.lookahead:
      return {"ema": avgs[0].average.min, "slow": state.params.min}
    slow = minmaxlab.lookahead_slow_params(opt).min
    return {"ema": avgs[1].average.min, "slow": slow, "slow_ema": avgs[0].average.min}
  out = {"ema": opt.average.min}
  if config.lookahead:
    out["slow"] = minmaxlab.lookahead_slow_params(opt).min
    out["slow_ema"] = opt.inner_state.average.min
  else:
    out["slow"] = state.params.min
  return out


_SHARED: dict = {}  # per process: the image evaluator (classifier + real statistics)


def image_evaluator(config):
  """The evaluator of ``config``'s data set (the cached evaluation classifier and the real
  statistics), loaded once per process: ``evaluate(images) -> {"fid", ...}``."""
  from experiments import _classifier_cache

  key = (config.dataset, config.classifier.cache_dir, config.classifier.steps)
  if key not in _SHARED:
    _SHARED[key] = _classifier_cache.classifier_evaluator(
      config.dataset,
      cache_dir=config.classifier.cache_dir or None,
      data_dir=config.data_dir or None,
      steps=config.classifier.steps,
    )[0]
  return _SHARED[key]


# How a field evaluation draws its latent batch: "shared", one batch for both players'
# fields; "per_player", a fresh batch for each player's field, as the MNIST notebook's
# train draws one per player's step (its ExtraGrad: four latent batches per step).
LATENT_DRAWS = ("shared", "per_player")


def per_player_field(vaf):
  """``vaf(params, real, z, *rest)`` as a field with one latent batch per player:
  ``fn(params, real, (z_min, z_max), *rest)`` returns the losses at ``z_min`` and the
  field whose generator (``min``) component is taken at ``z_min`` and whose discriminator
  (``max``) component at ``z_max``, both on the same real batch."""

  def fn(params, real, zs, *rest):
    z_min, z_max = zs
    losses, field_min = vaf(params, real, z_min, *rest)
    _, field_max = vaf(params, real, z_max, *rest)
    return losses, field_min._replace(max=field_max.max)

  return fn


def _chunk(exp, config):
  """``train.make_chunk`` with the training key as an argument, so one compiled program
  serves every seed (vmapped): the same draws as ``train.py`` for each seed."""
  import jax
  import optax

  import minmaxlab
  from experiments.gan import train

  vaf = minmaxlab.value_and_vector_field(exp.loss_fn)
  b, latent = config.batch_size, exp.pair.latent_dim
  latent_draws = config.get("latent_draws", "shared")
  if latent_draws not in LATENT_DRAWS:
    raise ValueError(f"latent_draws must be one of {LATENT_DRAWS}, got {latent_draws!r}")
  if latent_draws == "per_player":
    vaf = per_player_field(vaf)

  def one(state, train_key):
    def minibatch(step_key, i):
      k_real, k_z, k_loss = jax.random.split(jax.random.fold_in(step_key, i), 3)
      z = jax.random.normal(k_z, (b, latent))
      if latent_draws == "per_player":  # the max player's batch: a second, independent draw
        z = (z, jax.random.normal(jax.random.fold_in(k_z, 1), (b, latent)))
      return exp.sample_real(k_real, b), z, k_loss

    def step(state, _):
      step_key = jax.random.fold_in(train_key, state.step)
      batches = [minibatch(step_key, i) for i in range(exp.num_evals)]
      _, field = vaf(state.params, *batches[0])
      updates, opt_state = exp.tx.update(
        field, state.opt_state, state.params, vector_field=lambda p, i: vaf(p, *batches[i])[1]
      )
      return train.TrainState(
        state.step + 1, optax.apply_updates(state.params, updates), opt_state
      ), None

    state, _ = jax.lax.scan(step, state, None, length=config.log_every)
    return state, train.all_finite(state.params)

  return jax.jit(jax.vmap(one))


class _Arm(NamedTuple):
  """What every step of :func:`run_arm` reads (fixed for the arm)."""

  config: Any
  seeds: list[int]
  exp: Any  # train.Experiment, its optimizer wrapped in the study's averages
  keys: list  # (init, train, eval) keys per seed
  chunk: Any  # the vmapped chunk of train steps (one program for every seed)
  generate: Any  # the jitted generator
  run: Any  # runner.TrainingRun: the arm's checkpoints


def run_arm(
  config, seeds: list[int], run_dir: Path, ema_horizon: float, log=print, progress=None
) -> list[dict]:
  """Train one arm for every seed in ``seeds`` at once (one vmapped program) in
  ``run_dir``, resuming from its checkpoint; return one result per seed. ``progress``:
  called after every evaluation with the results so far (``steps`` short of the end)."""
  from minmaxlab import runner

  run_dir = Path(run_dir)
  done = run_dir / "result.json"
  if done.exists():
    return json.loads(done.read_text())
  arm = _open_arm(config, seeds, run_dir, ema_horizon)
  state = arm.run.restore_or_init(
    initial_states(arm), resume=True, step_of=lambda s: int(s.step[0])
  )
  rows_file = run_dir / "evals.jsonl"
  rows: list[dict] = []  # one row per evaluation step: per-seed lists
  if arm.run.start:
    rows = [r for r in runner.read_jsonl(rows_file) if r["step"] <= arm.run.start]
  step = arm.run.start
  cpu = rows[-1]["cpu_s"] if rows else 0.0
  diverged: dict[int, int] = {}
  while step < config.num_steps:
    t0 = time.process_time()
    state = _train_to_evaluation(arm, state, diverged)
    step = int(state.step[0])
    row: dict = {"step": step, **_evaluate_seeds(arm, state, step)}
    cpu += time.process_time() - t0
    row["cpu_s"] = cpu
    rows.append(row)
    arm.run.checkpoint(step, state)
    _write_rows(rows_file, rows)
    if progress is not None and step < config.num_steps:
      progress(_results(arm, rows, step, cpu, diverged))
    log(
      f"{run_dir.name} step {step}: "
      + " ".join(f"{k}={np.mean(row[k]):.1f}" for k in row if k.endswith("/fid"))
      + f" (mean over seeds; cpu {cpu:.0f} s)"
    )
  results = _results(arm, rows, step, cpu, diverged)
  done.write_text(json.dumps(results))
  if rows:  # final samples of the slow weights (run folder only, not committed)
    _save_final_samples(arm, state, step)
  return results


def _open_arm(config, seeds: list[int], run_dir: Path, ema_horizon: float) -> _Arm:
  from experiments.gan import train
  from minmaxlab import runner

  run = runner.TrainingRun(run_dir, config, config.num_steps, keep_checkpoints=1)
  train.check_config(config)
  return arm_program(config, seeds, ema_horizon)._replace(run=run)


def arm_program(config, seeds: list[int], ema_horizon: float) -> _Arm:
  """What :func:`run_arm` trains, without its checkpoints (``run`` is ``None``): the data,
  networks and optimizer of ``config``, every seed's keys and the vmapped chunk of
  ``config.log_every`` steps (``experiments/gan/lookahead_cost.py`` times it)."""
  import jax

  from experiments.gan import train

  exp = train.build(config)
  exp = exp._replace(tx=_tx(config, ema_horizon))
  keys = [jax.random.split(jax.random.key(s), 3) for s in seeds]  # (init, train, eval) per seed
  generate = jax.jit(exp.pair.generator.apply)
  return _Arm(config, list(seeds), exp, keys, _chunk(exp, config), generate, None)


def initial_states(arm: _Arm):
  """Every seed's state at step 0 (one vmapped program)."""
  import jax

  import minmaxlab
  from experiments.gan import train

  exp = arm.exp

  @jax.jit
  def init(init_keys):
    def one(key):
      k_g, k_d = jax.random.split(key)
      p = minmaxlab.Players(exp.pair.generator.init(k_g), exp.pair.discriminator.init(k_d))
      return train.TrainState(jax.numpy.zeros([], jax.numpy.int32), p, exp.tx.init(p))

    return jax.vmap(one)(init_keys)

  return init(jax.numpy.stack([k[0] for k in arm.keys]))


def _train_to_evaluation(arm: _Arm, state, diverged: dict[int, int]):
  """``eval_every`` steps of every seed; a seed whose parameters become non-finite is
  recorded in ``diverged`` (seed -> step) the first time."""
  import jax

  train_keys = jax.numpy.stack([k[1] for k in arm.keys])
  for _ in range(arm.config.eval_every // arm.config.log_every):
    state, finite = arm.chunk(state, train_keys)
    for i, ok in enumerate(np.asarray(finite)):
      if not ok and arm.seeds[i] not in diverged:
        diverged[arm.seeds[i]] = int(state.step[i])
  return state


def _evaluate_seeds(arm: _Arm, state, step: int) -> dict[str, list[float]]:
  """``"<point>/<metric>"`` -> one value per seed, at the evaluation points of each seed."""
  import jax

  config, out = arm.config, {}
  for i in range(len(arm.seeds)):
    z = jax.random.normal(
      jax.random.fold_in(arm.keys[i][2], step), (config.num_eval_samples, arm.exp.pair.latent_dim)
    )
    one = jax.tree.map(lambda x, i=i: x[i], state)
    evaluate_images = image_evaluator(config)  # loaded once per process, at first use
    for name, g in _points(config, one).items():
      x = np.concatenate(
        [np.asarray(arm.generate(g, z[j : j + 500])) for j in range(0, len(z), 500)]
      )
      m = evaluate_images(x) if np.all(np.isfinite(x)) else {k: math.inf for k in METRICS}
      for k in METRICS:
        out.setdefault(f"{name}/{k}", []).append(float(m[k]))
  return out


def _write_rows(path: Path, rows: list[dict]) -> None:
  tmp = path.with_suffix(".tmp")
  tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
  tmp.replace(path)


def _results(arm: _Arm, rows: list[dict], step: int, cpu: float, diverged) -> list[dict]:
  """One result per seed: its curves, where it diverged and the evaluation classifier."""
  from experiments import _classifier_cache

  config = arm.config
  # which evaluation classifier scored these curves (FIDs compare only under the same one)
  scorer = _classifier_cache.cached_identity(config.dataset, config.classifier.cache_dir or None)
  results = []
  for i, seed in enumerate(arm.seeds):
    curves = [{k: (v[i] if isinstance(v, list) else v) for k, v in r.items()} for r in rows]
    results.append(
      {
        "seed": seed,
        "steps": step,
        "diverged_at": diverged.get(seed),
        "cpu_s_all_seeds": cpu,
        "classifier": scorer,
        "curves": curves,
      }
    )
  return results


def _save_final_samples(arm: _Arm, state, step: int) -> None:
  import jax

  from minmaxlab import runner

  for i, seed in enumerate(arm.seeds):
    g = _points(arm.config, jax.tree.map(lambda x, i=i: x[i], state))["slow"]
    z = jax.random.normal(jax.random.fold_in(arm.keys[i][2], step), (64, arm.exp.pair.latent_dim))
    path = arm.run.workdir / f"samples_slow_s{seed}.png"
    runner.save_image_grid(path, np.asarray(arm.generate(g, z)))
