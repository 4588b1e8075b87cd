"""Train one GAN: ``train(config, workdir)`` (called by ``main.py`` and the tests).

Everything random is a pure function of ``(config.seed, step)``: the minibatch
and latent draws of step ``t`` use ``fold_in(train_key, t)``, and the
evaluation samples of step ``t`` use ``fold_in(eval_key, t)``. A run resumed
from a checkpoint therefore reproduces the uninterrupted run exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab
from experiments.gan import readouts
from minmaxlab import runner
from minmaxlab.gan import data, losses, models

# config.scheme: the library's scheme names (minmaxlab.analysis spells them alike) and "unrolled"
Scheme = Literal["gda", "alternating", "extragradient", "optimistic", "unrolled"]
SCHEMES = get_args(Scheme)
MIXTURES = ("ring8", "grid25")


class TrainState(NamedTuple):
  """What a checkpoint holds: the step, both players' parameters, the optimizer state."""

  step: jax.Array
  params: minmaxlab.Players
  opt_state: Any


class TrainingDiverged(RuntimeError):
  """Raised when losses or parameters become NaN/inf; the last good checkpoint is kept."""


class Experiment(NamedTuple):
  pair: models.GANPair
  data_shape: tuple[int, ...]
  sample_real: Callable  # (key, n) -> [n, *data_shape], jit-able
  mixture: Any  # data.Mixture or None
  dataset: Any  # data.ArrayDataset or None
  tx: optax.GradientTransformationExtraArgs
  num_evals: int  # field evaluations per game step (one minibatch each)
  loss_fn: Callable


def make_optimizer(config) -> optax.GradientTransformationExtraArgs:
  """The game optimizer of ``config``: scheme over per-player Adam, then lookahead, then EMA."""
  # eps_root > 0: the unrolled scheme differentiates through the discriminator's Adam.
  eps_root = 1e-8 if config.scheme == "unrolled" else 0.0
  inner = minmaxlab.per_player(
    min=optax.adam(config.lr_min, b1=config.b1, b2=config.b2, eps_root=eps_root),
    max=optax.adam(config.lr_max, b1=config.b1, b2=config.b2, eps_root=eps_root),
  )
  if config.scheme == "gda":
    tx = inner
  elif config.scheme == "alternating":
    tx = minmaxlab.alternating(inner, max_steps=config.max_steps)
  elif config.scheme == "extragradient":
    tx = minmaxlab.extragradient(inner)
  elif config.scheme == "optimistic":
    tx = minmaxlab.optimistic(inner)
  elif config.scheme == "unrolled":
    tx = minmaxlab.unrolled(inner, unroll_steps=config.unroll_steps)
  else:
    raise ValueError(f"scheme must be one of {SCHEMES}, got {config.scheme!r}")
  if config.lookahead:
    tx = minmaxlab.lookahead_minmax(tx, config.sync_period, config.slow_step_size)
  if config.ema_decay > 0:
    # ema_slow: an EMA of the lookahead slow weights, updated at syncs (the paper's G_ema_slow).
    average = minmaxlab.transforms.slow_ema if config.ema_slow else minmaxlab.transforms.ema
    tx = average(tx, config.ema_decay)
  return optax.with_extra_args_support(tx)


def num_field_evaluations(config) -> int:
  """Minibatches one game step consumes (see the ``vector_field(params, i)`` convention)."""
  return {
    "alternating": config.max_steps + 1,
    "extragradient": 2,
    "unrolled": config.unroll_steps + 1,
  }.get(config.scheme, 1)


# Config fields a resume may change (the loop's length and its logging), as the command line's.
RESUME_MAY_CHANGE = (
  "num_steps",
  "dynamics_every",
  "dynamics",
  "eval_every",
  "checkpoint_every",
  "keep_checkpoints",
  "grid_samples",
  "tensorboard",
  "progress",
)


def _require(config, name: str, ok, what: str) -> None:
  value = config[name]
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
    raise ValueError(f"config.{name} must be {what}, got {value!r}")


def check_config(config) -> None:
  """Raise ``ValueError`` (one line) for every value that would crash or do nothing."""
  for name in ("num_steps", "log_every", "eval_every", "checkpoint_every", "batch_size"):
    _require(config, name, lambda v: isinstance(v, int) and v >= 1, "an integer >= 1")
  for name in ("keep_checkpoints", "num_eval_samples", "max_steps", "sync_period"):
    _require(config, name, lambda v: isinstance(v, int) and v >= 1, "an integer >= 1")
  for name in ("grid_samples", "latent_dim"):
    _require(config, name, lambda v: isinstance(v, int) and v >= 0, "an integer >= 0")
  for name in ("lr_min", "lr_max"):
    _require(config, name, lambda v: v > 0 and math.isfinite(v), "a finite number > 0")
  for name in ("b1", "b2", "ema_decay"):
    _require(config, name, lambda v: 0 <= v < 1, "in [0, 1)")
  _require(config, "slow_step_size", lambda v: 0 < v <= 1, "in (0, 1]")
  _require(config, "gp_weight", lambda v: v >= 0, ">= 0")
  if config.architecture == "mlp" and not all(int(h) >= 1 for h in config.hidden):
    raise ValueError(f"config.hidden must be widths >= 1, got {config.hidden!r}")
  for name in ("eval_every", "checkpoint_every", "num_steps"):
    if config[name] % config.log_every:
      raise ValueError(
        f"config.{name}={config[name]} must be a multiple of config.log_every={config.log_every}"
      )
  if config.scheme not in SCHEMES:
    raise ValueError(f"scheme must be one of {SCHEMES}, got {config.scheme!r}")
  if "dynamics_every" in config:
    _require(config, "dynamics_every", lambda v: isinstance(v, int) and v >= 0, "an integer >= 0")
    for name in ("num_eigenvalues", "eigen_iterations", "num_probes", "radius_iterations"):
      value = config.dynamics[name]
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config.dynamics.{name} must be an integer >= 1, got {value!r}")
    if config.dynamics.num_eigenvalues > config.dynamics.eigen_iterations:
      raise ValueError(
        f"config.dynamics.num_eigenvalues={config.dynamics.num_eigenvalues} must be at most"
        f" config.dynamics.eigen_iterations={config.dynamics.eigen_iterations}"
      )
    value = config.dynamics.batch_size
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise ValueError(f"config.dynamics.batch_size must be an integer >= 0, got {value!r}")
  if "data_parallel" in config:
    _require(config, "data_parallel", lambda v: isinstance(v, int) and v >= 1, "an integer >= 1")
    if config.batch_size % config.data_parallel:
      raise ValueError(
        f"config.batch_size={config.batch_size} must be a multiple of"
        f" config.data_parallel={config.data_parallel}"
      )


def data_mesh(config):
  """The ``("batch",)`` mesh of the first ``config.data_parallel`` local devices
  (``None`` for one device): every minibatch is split over it, the parameters and
  optimizer state are replicated, and XLA all-reduces the gradients."""
  from jax.sharding import Mesh

  n = int(config.get("data_parallel", 1))
  if n <= 1:
    return None
  devices = jax.local_devices()
  if n > len(devices):
    raise ValueError(f"config.data_parallel={n}, but this process has {len(devices)} devices")
  return Mesh(np.asarray(devices[:n]), ("batch",))


def build(config) -> Experiment:
  """Data, models, loss and optimizer of ``config`` (no I/O besides loading the data)."""
  if config.dataset in MIXTURES:
    mixture = getattr(data, config.dataset)()
    dataset = None
    sample_real = mixture.sample
    data_shape = (int(jnp.asarray(mixture.modes).shape[1]),)
  else:
    mixture = None
    dataset = data.load(config.dataset, "train", data_dir=config.data_dir or None)
    images = jnp.asarray(dataset.images)
    sample_real = lambda key, n: data.sample_batch(key, images, n)  # noqa: E731
    data_shape = tuple(int(s) for s in dataset.images.shape[1:])
  kw = {"hidden": tuple(config.hidden)} if config.architecture == "mlp" else {"width": config.width}
  pair = models.make_pair(
    config.architecture, data_shape, config.latent_dim or None, config.spectral_norm, **kw
  )
  loss_fn = losses.game_loss(pair, config.loss, gp_weight=config.gp_weight)
  return Experiment(
    pair,
    data_shape,
    sample_real,
    mixture,
    dataset,
    make_optimizer(config),
    num_field_evaluations(config),
    loss_fn,
  )


def _keys(config):
  init_key, train_key, eval_key = jax.random.split(jax.random.key(config.seed), 3)
  return init_key, train_key, eval_key


def make_init(exp: Experiment, config) -> Callable[[], TrainState]:
  """A jitted ``() -> TrainState`` at step 0: both players initialised from the seed."""
  key = _keys(config)[0]

  @jax.jit
  def init(key):
    k_g, k_d = jax.random.split(key)
    params = minmaxlab.Players(exp.pair.generator.init(k_g), exp.pair.discriminator.init(k_d))
    return TrainState(jnp.zeros([], jnp.int32), params, exp.tx.init(params))

  return lambda: init(key)


# Fields that change the loop but not the compiled programs.
_LOOP_ONLY = (
  "num_steps",
  "dynamics_every",
  "dynamics",
  "eval_every",
  "checkpoint_every",
  "keep_checkpoints",
  "grid_samples",
  "tensorboard",
  "progress",
)


class Programs(NamedTuple):
  """The jitted programs of one config (built once per process)."""

  exp: Experiment
  init: Callable[[], TrainState]
  chunk: Callable
  evaluator: readouts.Evaluator


@runner.program_cache(loop_only=_LOOP_ONLY)
def programs(config) -> Programs:
  """Build and jit everything once per config in a process (tests resume in-process)."""
  exp = build(config)
  evaluator = readouts.Evaluator(exp, config, _keys(config)[2])
  return Programs(exp, make_init(exp, config), make_chunk(exp, config), evaluator)


@runner.program_cache(loop_only=tuple(k for k in _LOOP_ONLY if k != "dynamics"))
def dynamics_program(config):
  """The dynamics' jitted program, built at the first evaluation that needs it."""
  return readouts.make_dynamics(programs(config).exp, config)


all_finite = minmaxlab.transforms.tree_all_finite  # the one finite check (a traced boolean)


def make_chunk(exp: Experiment, config) -> Callable:
  """A jitted ``state -> (state, losses [log_every, 2])``: ``log_every`` steps in a ``lax.scan``."""
  from jax.sharding import NamedSharding, PartitionSpec

  train_key = _keys(config)[1]
  vaf = minmaxlab.value_and_vector_field(exp.loss_fn)
  b, latent = config.batch_size, exp.pair.latent_dim
  mesh = data_mesh(config)

  def split(x):  # data parallel: the batch axis over the mesh's devices
    if mesh is None:
      return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec("batch")))

  def minibatch(step_key, i):
    k_real, k_z, k_loss = jax.random.split(jax.random.fold_in(step_key, i), 3)
    return split(exp.sample_real(k_real, b)), split(jax.random.normal(k_z, (b, latent))), k_loss

  def step(state, _):
    step_key = jax.random.fold_in(train_key, state.step)
    batches = [minibatch(step_key, i) for i in range(exp.num_evals)]
    extra = {}
    if config.scheme == "unrolled":  # differentiates the generator's loss itself
      extra["loss_fn"] = lambda p, i: exp.loss_fn(p, *batches[i])
    params, opt_state, (loss_min, loss_max) = minmaxlab.game_step(
      exp.tx, lambda p, i: vaf(p, *batches[i]), state.params, state.opt_state, **extra
    )
    return TrainState(state.step + 1, params, opt_state), jnp.stack([loss_min, loss_max])

  def chunk(state):
    state, step_losses = jax.lax.scan(step, state, None, length=config.log_every)
    return state, step_losses, all_finite(state.params)

  if mesh is None:
    return jax.jit(chunk)
  replicated = NamedSharding(mesh, PartitionSpec())
  return jax.jit(chunk, in_shardings=replicated, out_shardings=replicated)


def dynamics_due(config, step: int) -> bool:
  """Whether the evaluation at ``step`` also measures the dynamics."""
  every = config.get("dynamics_every", 0)
  if every <= 0:
    return False
  return step % (config.eval_every * every) == 0 or step == config.num_steps


def train(
  config,
  workdir: str | Path,
  *,
  resume: bool = False,
  on_log: Callable[[int, dict], None] | None = None,
) -> dict:
  """Train the GAN of ``config`` in ``workdir``; returns the last metrics row.

  Writes ``config.json``, ``metrics.jsonl``, ``tensorboard/``, ``checkpoints/step_<n>``
  (atomic orbax, every ``checkpoint_every`` steps, plus step 0 and the end),
  ``samples/<prefix>step_<n>.png`` at evaluations, ``metrics.png``, ``summary.json`` and,
  last, the finish marker (``runner.finish``; a run cut short before it completes these
  when resumed, without training again if its final checkpoint is intact).
  With ``config.dynamics_every = N > 0``, every N-th evaluation's row also has the
  ``dynamics/`` estimates of :func:`~experiments.gan.readouts.make_dynamics`
  (``metrics.jsonl`` and TensorBoard).

  Args:
    config: an ``ml_collections.ConfigDict`` (see ``configs/base.py``).
    workdir: the run directory.
    resume: continue from the latest checkpoint in ``workdir`` (rows of
      ``metrics.jsonl`` after it are dropped and recomputed identically).
    on_log: called as ``on_log(step, row)`` after every logged chunk (tests
      use it to interrupt a run).

  Raises:
    TrainingDiverged: on NaN/inf losses or parameters; the last good
      checkpoint stays in ``workdir/checkpoints``.
  """
  check_config(config)
  workdir = Path(workdir).resolve()
  if resume and (done := runner.finished_run(workdir, config.num_steps)) is not None:
    return done  # a finished run: report it, change nothing
  progs = programs(config)
  run = runner.TrainingRun(
    workdir, config, config.num_steps, module=__name__, keep_checkpoints=config.keep_checkpoints
  )
  state = run.restore_or_init(progs.init(), resume=resume, may_change=RESUME_MAY_CHANGE)
  state = _replicate(config, state)
  run.open_writers(resume=resume, tensorboard=config.tensorboard)
  summary: dict[str, Any] = {}
  if progs.evaluator.classifier is not None:
    summary["classifier_test_accuracy"] = progs.evaluator.classifier.test_accuracy
  if run.start == 0:
    run.checkpoint(0, state)
  if config.progress:
    run.open_progress()
  row = run.last_row()  # a finish cut short: the last row
  try:
    state, row = _steps(run, progs, state, row, on_log)
  finally:
    # The dynamics (TensorBoard, metrics.jsonl) stay out: twice the panels, twice the seconds.
    run.close(readouts.curve_keys)
  summary.update({"final": row, "steps": int(state.step)})
  run.finish(summary, end_products(config))  # the finish rule
  return row


def _replicate(config, state: TrainState) -> TrainState:
  """With data parallelism, replicas of the state on every device of the mesh."""
  if (mesh := data_mesh(config)) is None:
    return state
  from jax.sharding import NamedSharding, PartitionSpec

  return jax.device_put(state, NamedSharding(mesh, PartitionSpec()))


def _steps(run: runner.TrainingRun, progs: Programs, state, row: dict, on_log):
  """The chunks from ``run.start`` to the end: ``(state, last row)``.

  The next chunk is dispatched before this one's host work (its losses to the host, the
  row, the writers, the evaluation and checkpoint when due), so the device computes while
  the host writes (``host_overhead.py``); its results are the same, and a chunk that went
  non-finite stops the run before its successor's are used."""
  config = run.config
  step = run.start
  pending = progs.chunk(state) if step < config.num_steps else None
  while pending is not None:
    new_state, step_losses, finite = pending
    more = step + config.log_every < config.num_steps
    pending = progs.chunk(new_state) if more else None
    step_losses = np.asarray(step_losses)
    _check_finite(run, step, step_losses, finite)
    state, step = new_state, step + config.log_every
    row = {  # the generator is the min player, the discriminator the max player
      "g_loss": float(step_losses[:, 0].mean()),
      "d_loss": float(step_losses[:, 1].mean()),
    }
    evals = {}
    if step % config.eval_every == 0 or step == config.num_steps:
      evals = _evaluate(run, progs, state, step)
    row = run.writer.write(step, {**row, **evals})
    if step % config.checkpoint_every == 0 or step == config.num_steps:
      run.checkpoint(step, state)
    if run.bar is not None:
      shown = {
        k: v for k, v in evals.items() if not k.endswith("_std") and not k.startswith("dynamics/")
      }
      run.bar.update(step, {"g_loss": row["g_loss"], "d_loss": row["d_loss"]}, shown)
    if on_log is not None:
      on_log(step, row)
  return state, row


def _check_finite(run: runner.TrainingRun, step: int, step_losses: np.ndarray, finite) -> None:
  """Raise :class:`TrainingDiverged` naming the first non-finite step of the chunk after
  ``step`` and the last good checkpoint."""
  if bool(finite) and np.all(np.isfinite(step_losses)):
    return
  bad = np.flatnonzero(~np.all(np.isfinite(step_losses), axis=1))
  at = step + 1 + (int(bad[0]) if bad.size else run.config.log_every - 1)
  last = run.ckpt.latest_step()
  raise TrainingDiverged(
    f"training diverged at step {at}: non-finite "
    f"{'losses ' + str(step_losses[bad[0]].tolist()) if bad.size else 'parameters'}; "
    f"the last good checkpoint is step {last} in {run.ckpt.directory} "
    f"(lower the learning rates or change the loss, then --resume)"
  )


def _evaluate(run: runner.TrainingRun, progs: Programs, state, step: int) -> dict:
  """The evaluation at ``step``: every generator's metrics and samples' picture, and (when
  due) the dynamics."""
  config, evals = run.config, {}
  for prefix, g in readouts.generator_params(config, state).items():
    m, x = progs.evaluator(g, step)
    evals.update({prefix + k: v for k, v in m.items()})
    png = run.workdir / "samples" / f"{prefix.replace('/', '_')}step_{step}.png"
    readouts.save_samples(png, x, progs.exp, config.grid_samples, f"{prefix}step {step}")
    run.writer.image(step, f"{prefix}samples", png)
  if dynamics_due(config, step):
    evals.update(dynamics_program(config)(state.params))
  return evals


def end_products(config) -> list[str]:
  """What a finished run has (``runner.finish``): the final checkpoint's digest, the metrics,
  their curves and the summary."""
  final = runner.checkpoint_product(config.num_steps)
  return [final, "metrics.jsonl", "metrics.png", "summary.json"]
