"""What a coevolution experiment runs: its data, networks and ``Coevolution``
(:func:`build`) and their jitted programs on the configured backend
(:func:`programs`, compiled once per config in a process)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments import _classifier_cache
from experiments.coevolution import generation_programs as gp
from minmaxlab import coevolution as co
from minmaxlab import distributed, runner
from minmaxlab.games import Players
from minmaxlab.gan import data, metrics, models

MIXTURES = ("ring8", "grid25")


class ImageData(NamedTuple):
  """What the jitted step sees of an image data set: the training images and
  the evaluation classifier (its parameters and the real feature statistics,
  for the in-step mixture FID)."""

  images: jax.Array
  classifier_params: Any
  real_mean: jax.Array
  real_cov: jax.Array


class Experiment(NamedTuple):
  coev: co.Coevolution
  data: Any  # data.Mixture or ImageData: the step's ``data`` argument
  mixture: Any  # data.Mixture or None
  image_evaluator: Any  # metrics.ImageEvaluator or None
  classifier: Any  # metrics.EvalClassifier or None


def coevolution_config(config) -> co.CoevolutionConfig:
  """The library's :class:`~minmaxlab.coevolution.CoevolutionConfig` of an experiment config
  (also refused: Adam's betas outside ``[0, 1)``, a neighbourhood beyond the grid)."""
  for name in ("b1", "b2"):
    value = config.get(name, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
      raise ValueError(f"config.{name} must be in [0, 1) (Adam's beta), got {value!r}")
  names = [f.name for f in co.CoevolutionConfig.__dataclass_fields__.values()]
  cfg = co.CoevolutionConfig(**{n: config[n] for n in names if n in config})
  reach = max(max(abs(dr), abs(dc)) for dr, dc in co.neighbour_offsets(cfg.neighbourhood))
  if reach > max(cfg.rows, cfg.cols):  # farther offsets only wrap onto cells already in it
    raise ValueError(
      f"config.neighbourhood={config.neighbourhood!r} reaches {reach} cells away, beyond the"
      f" {cfg.rows}x{cfg.cols} grid (at most {max(cfg.rows, cfg.cols)})"
    )
  return cfg


# Example shapes of the image data sets (the memory estimate needs no download).
_IMAGE_SHAPES = {"mnist": (28, 28, 1), "fashion_mnist": (28, 28, 1), "cifar10": (32, 32, 3)}


def available_memory() -> int | None:
  """Bytes of memory available to a new allocation (Linux ``MemAvailable``), or ``None``."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def memory_estimate(config) -> int | None:
  """A lower bound of the bytes the grid holds: every cell's generator and discriminator
  parameters with Adam's two moments and a copy per neighbourhood member
  (``cells * (members + 3) * (P_g + P_d) * 4``); ``None`` for data of unknown shape."""
  shape = (2,) if config.dataset in MIXTURES else _IMAGE_SHAPES.get(config.dataset)
  if shape is None:
    return None
  cfg = coevolution_config(config)
  pair = pair_from_config(config, shape)
  key = jax.random.key(0)
  sizes = [jax.eval_shape(net.init, key) for net in (pair.generator, pair.discriminator)]
  params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(sizes))
  return cfg.num_cells * (cfg.num_members + 3) * params * 4


def check_fits(config) -> None:
  """``ValueError`` (one line) when the grid's :func:`memory_estimate` exceeds the memory
  available here: refused before anything is written, not out of memory later."""
  need, have = memory_estimate(config), available_memory()
  if need is not None and have is not None and need > have:
    raise ValueError(
      f"config.rows x config.cols = {config.rows}x{config.cols} with"
      f" neighbourhood={config.neighbourhood!r} needs at least {need / 2**30:.1f} GiB, more"
      f" than the {have / 2**30:.1f} GiB of memory available"
    )


def make_backend(config, name: str) -> distributed.Backend:
  """The :class:`minmaxlab.distributed.Backend` of the experiment config's grid."""
  return distributed.make_backend(
    coevolution_config(config),
    name,
    mesh_shape=tuple(config.get("mesh_shape", ())) or None,
    mesh_exchange=config.get("mesh_exchange", "shard_map"),
    mpi_blocks=tuple(config.get("mpi_blocks", ())) or None,
    compile=config.get("compile", "default"),
  )


class DietedMixture(NamedTuple):
  """A 2-D mixture's finite data set (``config.dataset_size`` points, drawn once) for data
  dieting: the step samples ``rows`` (each cell its own subset); scores use ``mixture``."""

  mixture: Any
  rows: jax.Array


# Data dieting keys: fold_in(key(config.diet_seed), DIET_SALT) draws the 2-D data set, then each
# cell's subset is keyed by fold_in(that key, 1) and the cell id (Lipizzaner: seed + cell id).
DIET_SALT = 0xD1E7


def pair_from_config(config, data_shape) -> models.GANPair:
  """The config's generator/discriminator pair for examples of ``data_shape``
  (``config.flat_params``: each network's parameters as one vector, ``models.flat``)."""
  kw = {}
  if config.architecture == "mlp":
    kw = {
      "hidden": tuple(config.hidden),
      "initializer": config.get("initializer", "fan_in_uniform"),
    }
  pair = models.make_pair(config.architecture, tuple(data_shape), config.latent_dim or None, **kw)
  return models.flat_pair(pair) if config.get("flat_params", False) else pair


def scheme_from_config(config):
  """The cells' game scheme (Adam, or RMSprop with ``loss="wgan"`` as Lipizzaner's WGAN
  trainer, with Lookahead-minmax when ``config.lookahead``)."""
  return co.default_scheme(
    config.learning_rate,
    lookahead=config.lookahead,
    sync_period=config.sync_period,
    slow_step_size=config.slow_step_size,
    b1=config.b1,
    b2=config.b2,
    optimizer="rmsprop" if config.get("loss") == "wgan" else "adam",
  )


def diet(config):
  """``(data_key, cell_data)`` of ``config.sampling_ratio`` (``cell_data`` ``None`` at 1)."""
  ratio = float(config.get("sampling_ratio", 1.0))
  co.diet_size(1, ratio)  # validates: in (0, 1]
  # Not config.seed: the programs are built without the loop's fields (the seed among them).
  key = jax.random.fold_in(jax.random.key(int(config.get("diet_seed", 0))), DIET_SALT)
  if ratio == 1.0:
    return key, None
  k_cells = jax.random.fold_in(key, 1)
  if config.dataset in MIXTURES:
    return key, lambda d, i: d._replace(rows=co.diet_rows(k_cells, i, d.rows, ratio))
  return key, lambda d, i: d._replace(images=co.diet_rows(k_cells, i, d.images, ratio))


def mixture_sampling(config) -> str:
  """``config.mixture_sampling``, checked: ``"independent"`` or ``"exact_proportion"``."""
  mode = config.get("mixture_sampling", "independent")
  if mode not in co.SAMPLING_MODES:
    raise ValueError(f"config.mixture_sampling must be one of {co.SAMPLING_MODES}, got {mode!r}")
  return mode


def build(config, backend: distributed.Backend | None = None) -> Experiment:
  """Data, models, score and the :class:`~minmaxlab.coevolution.Coevolution` of ``config``
  on ``backend`` (default: one device, the whole grid)."""
  backend = make_backend(config, "single") if backend is None else backend
  cfg, exchange = backend.config, backend.exchange
  scheme = scheme_from_config(config)
  diet_key, cell_data = diet(config)
  # "exact_proportion": the cells' mixture ES scores, and the evaluation samples, the mixture's
  # exact-proportion sample (generator i makes round(w_i n) of n) instead of weighted draws.
  exact = mixture_sampling(config) == "exact_proportion"
  wrap = co.exact_proportion_score if exact else (lambda f: f)
  if config.dataset in MIXTURES:
    # config.dataset_kwargs: e.g. the ring's radius and std (Lipizzaner's 2-D branch: 0.8, 0.025).
    mixture = getattr(data, config.dataset)(**dict(config.get("dataset_kwargs", None) or {}))
    pair = pair_from_config(config, (2,))
    if cell_data is None:  # fresh samples of the mixture every batch
      step_data, sample_real, score_fn = mixture, lambda d, k, n: d.sample(k, n), None
    else:  # a finite data set, each cell training on its own subset of it
      rows = mixture.sample(diet_key, int(config.get("dataset_size", 10000)))
      step_data = DietedMixture(mixture, rows)
      sample_real = lambda d, k, n: d.rows[jax.random.randint(k, (n,), 0, d.rows.shape[0])]  # noqa: E731
      score_fn = lambda d, samples, w: metrics.mode_tvd_score(d.mixture, samples, w)  # noqa: E731
    coev = co.Coevolution(
      cfg,
      pair,
      sample_real=sample_real,
      score_fn=wrap(score_fn or metrics.mode_tvd_score),
      scheme=scheme,
      exchange=exchange,
      cell_data=cell_data,
    )
    return Experiment(coev, step_data, mixture, None, None)
  dataset = data.load(config.dataset, "train", data_dir=config.data_dir or None)
  evaluator, clf = _classifier_cache.classifier_evaluator(
    config.dataset,
    cache_dir=config.classifier.cache_dir or None,
    data_dir=config.data_dir or None,
    steps=config.classifier.steps,
  )
  image_data = ImageData(
    jnp.asarray(dataset.images),
    clf.params,
    jnp.asarray(evaluator.real_mu, jnp.float32),
    jnp.asarray(evaluator.real_cov, jnp.float32),
  )
  shape = tuple(int(s) for s in dataset.images.shape[1:])
  pair = pair_from_config(config, shape)
  net = clf.net
  coev = co.Coevolution(
    cfg,
    pair,
    sample_real=lambda d, k, n: data.sample_batch(k, d.images, n),
    score_fn=wrap(metrics.fid_score(lambda d, x: net.apply(d.classifier_params, x)[0])),
    scheme=scheme,
    exchange=exchange,
    cell_data=cell_data,
  )
  return Experiment(coev, image_data, None, evaluator, clf)


def keys(config) -> tuple[jax.Array, jax.Array, jax.Array]:
  """``(init_key, generation_key, eval_key)`` of ``config.seed``."""
  init_key, generation_key, eval_key = jax.random.split(jax.random.key(config.seed), 3)
  return init_key, generation_key, eval_key


class Programs(NamedTuple):
  exp: Experiment
  init: Callable  # (key) -> CoevolutionState, jitted (this program's cells, placed)
  step: Callable  # (key, state, data) -> (state, metrics), jitted
  cell_samples: Callable  # (key, state) -> [rows, cols, n, ...], jitted
  cell_metrics: Callable | None  # samples [rows, cols, n, 2] -> dict of [rows, cols] (mixtures)
  mixture_samples: Callable  # (key, generators, weights) -> [num_eval_samples, ...], jitted
  backend: distributed.Backend
  mixture: Callable  # (state, cell) -> coev.mixture(state, cell), jitted per cell (a gather)
  # One device, one process ("single"), else None (generation_programs.py): (generation_key,
  # g, n, state, data) -> (state, metrics); (key, state, metrics) -> the metrics and the rows'
  # read-outs packed; (key, state, metrics) -> unpack(packed) -> (metrics, read-outs)
  generation: Callable | None = None
  readouts: Callable | None = None
  readout_layout: Callable | None = None


# Fields that change the loop but not the compiled programs.
LOOP_ONLY = (
  "seed",
  "generations",
  "eval_every",
  "plot_every",
  "checkpoint_every",
  "keep_checkpoints",
  "tensorboard",
  "progress",
)


@runner.program_cache(loop_only=LOOP_ONLY)
def programs(config) -> Programs:
  """Build and jit everything once per config in a process (tests resume in-process)."""
  backend = make_backend(config, config.get("backend", "single"))
  exp = build(config, backend)
  coev, pair = exp.coev, exp.coev.pair
  init, step = backend.jit(coev)
  exp = exp._replace(data=backend.put_data(exp.data))

  cell_metrics = None
  if exp.mixture is not None:
    mixture = exp.mixture
    one = lambda s: metrics.mixture_metrics(s, mixture)  # noqa: E731
    cell_metrics = jax.jit(jax.vmap(jax.vmap(one)))

  n_eval, mode = config.num_eval_samples, config.get("mixture_sampling", "independent")
  mixture_samples = jax.jit(
    lambda k, g, w: co.sample_mixture(k, pair.generator.apply, g, w, n_eval, pair.latent_dim, mode)
  )
  cell_samples = jax.jit(gp.cell_samples(pair, config.cell_samples))
  storing = backend.mesh is None and backend.processes == 1
  generation = readouts = layout = None
  if backend.name == "single":
    generation = gp.make_generation(coev, backend.compiler_options)
    readouts, layout = gp.make_readouts(coev, config.cell_samples, exp.mixture)
  key, here = runner.program_key(config), Path(__file__).resolve().parent
  sources = (here, *here.parent.glob("*.py"))  # this experiment and experiments/_*.py

  def store(fn, name):
    # Executables on disk, keyed by this config and the source: a warm start traces nothing.
    if fn is None or not storing:
      return fn
    return runner.stored_program(fn, f"coevolution-{name}", key, sources=sources)

  by_cell: dict[int, Callable] = {}

  def mixture_of(state, cell: int):
    if cell not in by_cell:
      scores = np.zeros(np.shape(state.mixture_score), np.float32)

      def of_cell(s):
        # Coevolution.mixture reads the scores on the host, only to pick a default cell.
        return coev.mixture(s._replace(mixture_score=scores), cell)

      by_cell[cell] = store(jax.jit(of_cell), f"mixture_c{cell}")
    return by_cell[cell](state)

  return Programs(
    exp,
    store(init, "init"),
    store(step, "step"),
    store(cell_samples, "cell_samples"),
    store(cell_metrics, "cell_metrics"),
    store(mixture_samples, "mixture_samples"),
    backend,
    mixture_of,
    store(generation, "generation"),
    store(readouts, "readouts"),
    layout,
  )


def checkpoint_target(config) -> dict:
  """The abstract pytree of this trainer's checkpoints (for :func:`minmaxlab.runner.load_run`):
  ``{"state": the whole grid's CoevolutionState, "key": the run key}``; nothing compiles."""
  coev = programs(config).exp.coev
  state = jax.eval_shape(coev.init, jax.random.key(0))
  run_key = jax.ShapeDtypeStruct(jax.random.key_data(jax.random.key(0)).shape, np.uint32)
  return {"state": whole_grid_shapes(state, coev), "key": run_key}


def sample_best_mixture(run, n: int | None = None, seed: int = 0) -> np.ndarray:
  """``n`` samples (default ``config.num_eval_samples``) of the best cell's generator
  mixture in a run opened by :func:`minmaxlab.runner.load_run`."""
  progs = programs(run.config)
  coev = progs.exp.coev
  state = jax.tree.map(jnp.asarray, run.state["state"])
  gens, weights = coev.mixture(state)
  n = int(run.config.num_eval_samples if n is None else n)
  mode, apply = run.config.get("mixture_sampling", "independent"), coev.pair.generator.apply
  sample = jax.jit(lambda k, g, w: co.sample_mixture(k, apply, g, w, n, coev.pair.latent_dim, mode))
  return np.asarray(sample(jax.random.key(seed), gens, weights))


def modes(config) -> np.ndarray | None:
  """The mixture's modes of a 2-D data set (``None`` for images), for pictures."""
  mixture = programs(config).exp.mixture
  return None if mixture is None else np.asarray(mixture.modes)


def whole_grid_shapes(state, coev: co.Coevolution):
  """Shapes and dtypes of the whole grid's state (this program may hold a block)."""
  block = tuple(coev.exchange.block_shape)
  whole = (coev.config.rows, coev.config.cols)

  def one(x):
    shape = tuple(x.shape)
    if len(shape) >= 2 and shape[:2] == block:
      shape = whole + shape[2:]
    return jax.ShapeDtypeStruct(shape, x.dtype)

  return jax.tree.map(one, state)


def is_writer(config) -> bool:
  """Whether this process wrote the run's files (rank / process 0)."""
  return programs(config).backend.writer


def restore_checkpoint(ckpt, whole, run_key, step=None, *, writer: bool = True) -> dict:
  """``{"state", "key"}`` of checkpoint ``step`` (default: the newest intact one; ``whole``:
  the whole grid's abstract state).

  A checkpoint written before lineage ids (its state has no ``lineage``) is restored
  too: each individual then starts a lineage at its own cell and the checkpoint's
  generation, and one line (on the ``writer`` process) says so. A checkpoint that fits
  neither raises the error of the current layout."""
  say = lambda line: print(line, file=sys.stderr, flush=True) if writer else None  # noqa: E731
  target = {"state": whole, "key": run_key}
  return restore_any_layout(ckpt, jax.eval_shape(lambda: target), step, say)[0]


def restore_run(ckpt, target, step=None):
  """``(tree, metadata)`` of checkpoint ``step`` into ``target`` (:func:`checkpoint_target`):
  the hook :func:`minmaxlab.runner.load_run` calls, so a finished run opens as it resumes (a
  checkpoint from before lineage ids too, see :func:`restore_checkpoint`)."""
  return restore_any_layout(ckpt, target, step, lambda line: print(line, file=sys.stderr))


def restore_any_layout(ckpt, target, step, say) -> tuple[dict, dict]:
  """``(tree, metadata)``: the current layout, or one from before lineage ids (ids filled in
  as :func:`restore_checkpoint` says); ``say(line)`` for the notes."""
  notes: list[str] = []
  try:
    restored = ckpt.restore(target, step, log=notes.append)
  except RuntimeError as e:  # runner.CheckpointError: no checkpoint fits this layout
    error = e
  else:
    for line in notes:
      say(line)
    return restored
  whole = target["state"]
  old = {"state": whole._replace(lineage=None), "key": target["key"]}
  try:
    restored, meta = ckpt.restore(old, step, log=lambda line: None)
  except RuntimeError:
    for line in notes:
      say(line)
    raise error from None
  g, (rows, cols, pop) = int(restored["state"].generation), whole.lineage.min.shape
  cells = np.broadcast_to(np.arange(rows * cols).reshape(rows, cols, 1), (rows, cols, pop))
  ids = np.asarray(co.lineage_id(cells, g))
  say(
    f"checkpoint step_{meta['step']} was written before lineage ids: each individual starts a"
    f" lineage at its own cell and generation {g}"
  )
  restored["state"] = restored["state"]._replace(lineage=Players(ids, ids.copy()))
  return restored, meta
