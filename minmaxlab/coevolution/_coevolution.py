"""Spatial coevolution of GANs (Lipizzaner) as one jit-compiled generation step."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from minmaxlab.coevolution._cell import MUSTANGS_SALT, CellSetup, member_bests, mixture_of_trained
from minmaxlab.coevolution._cell import generation as cell_generation
from minmaxlab.coevolution._config import MUSTANGS_LOSSES, CoevolutionConfig, CoevolutionParams
from minmaxlab.coevolution._exchange import WholeGrid
from minmaxlab.coevolution._fast_matmul import pair_with_matmuls
from minmaxlab.coevolution._grid import member_mask, neighbour_indices
from minmaxlab.coevolution._layout import TransposedGrid, transposed_indices
from minmaxlab.coevolution._lineage import MAX_CELLS, lineage_id
from minmaxlab.coevolution._operators import INF
from minmaxlab.coevolution._phases import Individuals, Phases
from minmaxlab.coevolution._training import CellSpec, take
from minmaxlab.games import Players
from minmaxlab.gan.losses import LOSSES, wasserstein
from minmaxlab.transforms import (
  count_learning_rates,
  lookahead_minmax,
  per_player,
  player_labels,
  set_learning_rates,
)

_PARAMS = CoevolutionParams._fields


class CoevolutionState(NamedTuple):
  """The whole grid; every leaf has leading axes ``(rows, cols)``.

  Attributes:
    params: ``Players(min=generators, max=discriminators)``, ``(rows, cols, P, ...)``.
    opt_state: the game transform's state of each local (generator, discriminator)
      pair, ``(rows, cols, P, ...)``.
    learning_rates: ``Players`` of ``(rows, cols, P)`` arrays (mutated, never retraced).
    fitness: ``Players`` of ``(rows, cols, P)``: the local individuals' fitness
      (lower is better) from the last generation.
    mixture_weights: ``(rows, cols, M)`` weights over the neighbourhood's best generators.
    mixture_score: ``(rows, cols)`` score of each cell's mixture (lower is better).
    generation: generations taken (int32).
    loss_index: with ``loss="mustangs"``, ``Players`` of ``(rows, cols, P)`` int32
      indices into ``MUSTANGS_LOSSES`` (each individual's loss, drawn at creation
      and inherited); ``None`` otherwise.
    lineage: ``Players`` of ``(rows, cols, P)`` int32 lineage ids, ``cell * 2**16 +
      generation`` of birth (``minmaxlab.coevolution.lineage_origin`` decodes them);
      every operator that moves an individual moves its id.
  """

  params: Players
  opt_state: Any
  learning_rates: Players
  fitness: Players
  mixture_weights: jax.Array
  mixture_score: jax.Array
  generation: jax.Array
  loss_index: Any = None
  lineage: Any = None


ADAM_CONSTANTS = ("b1", "b2", "eps", "eps_root")
RMSPROP_CONSTANTS = ("decay", "eps", "initial_scale", "momentum")


def default_scheme(
  learning_rate: float = 2e-4,
  lookahead: bool = True,
  sync_period: int = 5,
  slow_step_size: float = 0.5,
  b1: float = 0.5,
  b2: float = 0.999,
  optimizer: str = "adam",
):
  """Lookahead-minmax over Adam (Lipizzaner's betas), each player's learning
  rate injectable; ``lookahead=False`` gives plain Adam (Lipizzaner parity).

  ``optimizer="rmsprop"``: RMSprop as Lipizzaner's WGAN trainer uses it (torch's
  defaults: ``alpha = 0.99``, ``eps = 1e-8`` added outside the square root, no
  momentum; ``b1``, ``b2`` unused) instead of Adam."""
  # Only the learning rate is injected (a state leaf, mutated per individual); the other
  # hyperparameters are constants of the program (``static_args``), not 4-8 more state leaves
  # per individual that every phase of a generation carries, selects and copies. They are
  # float32 numbers, as the injected leaves were: ``1 - b2`` is then rounded in float32 as
  # before (in float64, 1 - 0.999 would round to another float32 and change the results).
  f32 = np.float32
  if optimizer == "adam":
    opt = lambda: optax.inject_hyperparams(optax.adam, static_args=ADAM_CONSTANTS)(
      learning_rate=learning_rate, b1=f32(b1), b2=f32(b2)
    )
  elif optimizer == "rmsprop":
    opt = lambda: optax.inject_hyperparams(optax.rmsprop, static_args=RMSPROP_CONSTANTS)(
      learning_rate=learning_rate, decay=f32(0.99), eps=f32(1e-8), eps_in_sqrt=False
    )
  else:
    raise ValueError(f"optimizer must be 'adam' or 'rmsprop', got {optimizer!r}")
  inner = per_player(min=opt(), max=opt())
  return lookahead_minmax(inner, sync_period, slow_step_size) if lookahead else inner


class Coevolution:
  r"""Lipizzaner's spatial coevolution with one jit-compiled generation.

  A ``rows x cols`` torus of cells; each cell keeps ``P`` generators and
  discriminators with their optimizer states and learning rates. One
  generation, for every cell at once:

  0. gather the neighbourhood's individuals (rolls of the grid axes);
  1. fitness: every generator against every discriminator of the
     neighbourhood on one fitness batch (``fitness_mode`` over opponents);
  2. tournament selection of the individuals to train (generators and
     discriminators independently, each with its own part of the optimizer
     state) and Gaussian mutation of their learning rates;
  3. ``steps_per_generation`` training steps with the game transform: each
     selected generator plays a discriminator drawn at random for that step
     from the cell's selected discriminators (with ``opponents=
     "neighbourhood"`` also from the neighbours'), and vice versa; the descent
     field of that game drives ``scheme``, e.g. Lookahead-minmax over Adam;
     with ``d_every = k > 1`` the discriminators take only every k-th step
     (Lipizzaner: k = 2) and the other steps update the generators alone
     (their state only; a shared counter such as Lookahead's counts every
     step, so a sync moves the discriminators when it falls on one of their
     steps: every ``lcm(sync_period, k) / k`` of them); with ``n_critic = k > 1``
     the discriminators take every step and the generators every k-th
     (``loss="wgan"``: Lipizzaner's WGAN, the critic clipped after each update);
     with ``loss="mustangs"`` each individual plays its own loss
     (``CoevolutionState.loss_index``, see ``CoevolutionConfig.mustangs_mode``);
  4. replacement: the worst ``n_replacements`` local individuals are replaced
     by the best trained ones when those are better;
  5. a (1+1)-ES step on the mixture weights over the neighbourhood's best
     generators, accepted only if the mixture's score improves;
  6. a cell whose parameters or losses became NaN/inf is re-seeded from its
     best neighbour (counted in the metrics).

  Phases 1-6 are the pure functions of :class:`Phases` (module
  ``minmaxlab.coevolution._phases``), each tested alone; pass ``phases=`` to
  replace one (e.g. ``Phases(selection=...)``). The operators' float parameters
  (:class:`CoevolutionParams`) are traced arguments of :meth:`step`.

  Every random choice is keyed by ``fold_in(key, cell_index)``, so results do
  not depend on how cells are batched, mapped or sharded.

  Args:
    config: a :class:`CoevolutionConfig`.
    pair: ``minmaxlab.gan.models.GANPair`` (pure ``init``/``apply``).
    sample_real: ``sample_real(data, key, n) -> [n, ...]`` real samples.
    score_fn: ``score_fn(data, samples [M, S, ...], weights [M]) -> scalar``,
      lower is better (e.g. :func:`mode_tvd_score`, :func:`fid_score`).
    scheme: game transform over ``Players`` with per-player injected learning
      rates (default :func:`default_scheme`; with ``loss="wgan"``
      ``default_scheme(lookahead=False, optimizer="rmsprop")``, Lipizzaner's WGAN).
    exchange: which cells this program holds and how neighbours and grid-wide
      reductions arrive: :class:`WholeGrid` (default), or a block exchange from
      ``minmaxlab.distributed`` (a device mesh with ``shard_map``, MPI ranks).
      The algorithm is the same code for all of them.
    phases: the phase functions (default :class:`Phases`\ ``()``).
    cell_data: ``cell_data(data, cell_id) -> data``: what one cell samples and scores
      on (``cell_id`` the flat index, traced), e.g. its own subset of the data set
      for Lipizzaner's data dieting (:func:`diet_rows`); default the whole ``data``.

  References:
    Schmiedlechner et al., 2018, "Lipizzaner: A System That Scales Robust
    Generative Adversarial Network Training", https://arxiv.org/abs/1811.12843 ;
    Toutouh et al., 2019, "Spatial Evolutionary Generative Adversarial
    Networks" (Mustangs), https://arxiv.org/abs/1905.12702
  """

  def __init__(
    self,
    config: CoevolutionConfig,
    pair,
    *,
    sample_real: Callable,
    score_fn: Callable,
    scheme: optax.GradientTransformation | None = None,
    exchange=None,
    phases: Phases | None = None,
    cell_data: Callable | None = None,
  ):
    if not isinstance(config, CoevolutionConfig):
      raise ValueError(f"config must be a CoevolutionConfig, got {type(config).__name__}")
    transposed = config.neighbourhood_layout == "transposed"
    if exchange is None:
      exchange = (TransposedGrid if transposed else WholeGrid)(config.rows, config.cols)
    elif transposed and not isinstance(exchange, TransposedGrid):
      raise ValueError("neighbourhood_layout='transposed' runs on the whole grid (no exchange)")
    if (exchange.rows, exchange.cols) != (config.rows, config.cols):
      raise ValueError(
        f"exchange is for a {exchange.rows}x{exchange.cols} grid, config for"
        f" {config.rows}x{config.cols}"
      )
    if config.num_cells > MAX_CELLS:
      raise ValueError(
        f"a grid of at most {MAX_CELLS} cells has lineage ids, got {config.num_cells}"
      )
    self.exchange = exchange
    self.config = config
    self.pair = pair
    self.sample_real = sample_real
    self.score_fn = score_fn
    if scheme is None and config.loss == "wgan":
      scheme = default_scheme(config.learning_rate, lookahead=False, optimizer="rmsprop")
    scheme = default_scheme(config.learning_rate) if scheme is None else scheme
    self.scheme = optax.with_extra_args_support(scheme)
    self.mustangs = config.loss == "mustangs"
    if self.mustangs:
      self._losses = tuple(LOSSES[n] for n in MUSTANGS_LOSSES)
    elif config.loss == "wgan":
      self._losses = (wasserstein,)
    elif config.loss in LOSSES and config.loss != "wgan_gp":
      self._losses = (LOSSES[config.loss],)
    else:
      choices = sorted(set(LOSSES) - {"wgan_gp"}) + ["mustangs", "wgan"]
      raise ValueError(f"loss must be one of {choices}, got {config.loss!r}")
    # The scheme's own state (before any learning rate is written into it).
    abstract = jax.eval_shape(lambda k: self.scheme.init(self._init_params(k)), jax.random.key(0))
    _, n_min, n_max = count_learning_rates(abstract)
    if n_min == 0 or n_max == 0:
      raise ValueError(
        "scheme must give each player an injected learning rate, e.g."
        " per_player(min=optax.inject_hyperparams(optax.adam)(learning_rate=...), max=...)"
      )
    self._labels = player_labels(abstract)
    self._mask = member_mask(config.rows, config.cols, config.neighbourhood)
    strategy = config.cell_strategy
    if strategy == "auto":
      strategy = "map" if jax.default_backend() == "cpu" else "vmap"
    self.cell_strategy = strategy
    self.phases = Phases() if phases is None else phases
    self.cell_data = cell_data
    self._spec = CellSpec(
      config=config,
      pair=pair_with_matmuls(pair, config.matmuls),
      scheme=self.scheme,
      labels=self._labels,
      sample_real=sample_real,
      score_fn=score_fn,
      losses=self._losses,
      init_individual=self._init_pair,
    )

  def default_params(self) -> CoevolutionParams:
    """The config's operator parameters as float32 leaves (vmap or tune them)."""
    c = self.config
    # The same names as the config's fields.
    return CoevolutionParams(**{f: jnp.asarray(getattr(c, f), jnp.float32) for f in _PARAMS})

  # ----------------------------------------------------------------- init
  def _init_params(self, key):
    kg, kd = jax.random.split(key)
    return Players(self.pair.generator.init(kg), self.pair.discriminator.init(kd))

  def _init_pair(self, key):
    params = self._init_params(key)
    lr = jnp.asarray(self.config.learning_rate, jnp.float32)
    opt = set_learning_rates(self.scheme.init(params), lr, lr)
    return params, opt

  def init(self, key: jax.Array) -> CoevolutionState:
    """A fresh grid: independent initial networks in every cell.

    With an exchange that owns one block of the grid in this process (MPI
    ranks), only that block, with the values the whole grid would have there.
    """
    c = self.config
    shape = (c.rows, c.cols, c.population_size)
    keys = jax.random.split(key, int(np.prod(shape))).reshape(shape)
    mask = self._mask
    born = np.broadcast_to(np.arange(c.num_cells).reshape(c.rows, c.cols, 1), shape)
    if self.exchange.local_block is not None:
      (r0, c0), (nr, nc) = self.exchange.local_block, self.exchange.block_shape
      keys, mask = keys[r0 : r0 + nr, c0 : c0 + nc], mask[r0 : r0 + nr, c0 : c0 + nc]
      born = born[r0 : r0 + nr, c0 : c0 + nc]
    lineage = lineage_id(born, 0)  # every individual: its own cell, generation 0
    params, opt = jax.vmap(jax.vmap(jax.vmap(self._init_pair)))(keys)
    loss_index = None
    if self.mustangs:  # each individual's loss, drawn at its creation (both modes)
      k = jax.random.fold_in(key, MUSTANGS_SALT)
      li = jax.random.randint(k, (2,) + shape, 0, len(self._losses), jnp.int32)
      if self.exchange.local_block is not None:
        li = li[:, r0 : r0 + nr, c0 : c0 + nc]
      loss_index = Players(li[0], li[1])
    lr = jnp.full(keys.shape, c.learning_rate, jnp.float32)
    weights = jnp.asarray(mask / mask.sum(-1, keepdims=True), jnp.float32)
    inf = jnp.full(keys.shape, INF, jnp.float32)
    return CoevolutionState(
      params=params,
      opt_state=opt,
      learning_rates=Players(lr, lr),
      fitness=Players(inf, inf),
      mixture_weights=weights,
      mixture_score=jnp.full(keys.shape[:2], INF, jnp.float32),
      generation=jnp.zeros([], jnp.int32),
      loss_index=loss_index,
      lineage=Players(lineage, lineage),
    )

  # ----------------------------------------------------------------- step
  def step(
    self,
    key: jax.Array,
    state: CoevolutionState,
    data: Any,
    params: CoevolutionParams | None = None,
  ):
    """One generation of the whole grid; pure, jit it (``jax.jit(coev.step)``).

    ``params`` (default: the config's values, as constants) are the operators'
    tunable parameters; pass :meth:`default_params` (or changed values) to trace
    them, e.g. to vmap a population of grids over them.

    Returns:
      ``(state, metrics)``: per-cell ``(rows, cols)`` arrays (``g_loss``,
      ``d_loss``, ``g_fitness``, ``d_fitness``, ``lr_g``, ``lr_d``,
      ``mixture_score``, ``mixture_accepted``, ``replaced_g``, ``replaced_d``,
      ``diverged``), per-individual ``(rows, cols, P)`` lineage ids ``lineage_g`` and
      ``lineage_d`` (after the generation; -1 without ``state.lineage``) and grid scalars
      ``best_cell`` (flat index), ``best_score`` and ``divergences``.
    """
    c, ex = self.config, self.exchange
    lr, lc = ex.block_shape
    individuals = Individuals(
      params=state.params,
      opt=state.opt_state,
      learning_rates=state.learning_rates,
      fitness=state.fitness,
      loss_index=state.loss_index if self.mustangs else None,
      lineage=state.lineage,
    )
    # Global cell ids key every random choice: the numbers do not depend on the backend.
    r0, c0 = ex.block_start()
    r, col = jnp.meshgrid(jnp.arange(lr) + r0, jnp.arange(lc) + c0, indexing="ij")
    ids = (r * c.cols + col).astype(jnp.int32)
    seeds = ids if c.cell_seeds == "per_cell" else jnp.zeros_like(ids)  # "shared": Lipizzaner's
    keys = jax.vmap(jax.vmap(lambda i: jax.random.fold_in(key, i.astype(jnp.uint32))))(seeds)
    mask = jax.lax.dynamic_slice(jnp.asarray(self._mask), (r0, c0, 0), (lr, lc, c.num_members))
    if params is None:
      params = CoevolutionParams(**{f: getattr(c, f) for f in _PARAMS})
    setup = CellSetup(
      spec=self._spec, phases=self.phases, cell_data=self.cell_data, mustangs=self.mustangs
    )
    cell = lambda args: cell_generation(setup, *args, data, params, state.generation)
    out = self._over_cells(cell, keys, ids, individuals, (state.mixture_weights, mask))
    cells, metrics = out
    if c.mixture_generators == "trained":  # phase 5 on every cell's trained generators
      cells, metrics = self._trained_mixture(setup, keys, ids, mask, cells, metrics, data, params)
    new, score = cells.individuals, cells.mixture_score
    new_state = CoevolutionState(
      params=new.params,
      opt_state=new.opt,
      learning_rates=new.learning_rates,
      fitness=new.fitness,
      mixture_weights=cells.mixture_weights,
      mixture_score=score,
      generation=optax.safe_int32_increment(state.generation),
      loss_index=new.loss_index,
      lineage=new.lineage,
    )
    # Grid-wide read-outs: the best (lowest, first by cell id on ties) finite score.
    finite_score = jnp.where(jnp.isfinite(score), score, INF)
    best_score = ex.reduce(jnp.min(finite_score), "min")
    big = jnp.iinfo(jnp.int32).max
    best_cell = ex.reduce(jnp.min(jnp.where(finite_score == best_score, ids, big)), "min")
    divergences = ex.reduce(jnp.sum(metrics["diverged"]).astype(jnp.int32), "sum")
    metrics = dict(metrics, best_cell=best_cell, best_score=best_score, divergences=divergences)
    return new_state, metrics

  def _over_cells(self, fn, keys, ids, tree, rest):
    """``fn((key, id, members, *rest))`` for every cell of this program: ``members`` the
    cell's members' slices of ``tree`` (leaves ``[rows, cols, ...]`` -> ``[M, ...]``).
    Vmapped, or cells one after another, each taking its members' rows of the grid (no
    ``(rows, cols, M, ...)`` copy of every individual and optimizer state up front)."""
    ex, kind = self.exchange, self.config.neighbourhood
    if self.cell_strategy == "vmap":
      return jax.vmap(jax.vmap(fn))((keys, ids, ex.gather(tree, kind), *rest))
    source, members = ex.members(tree, kind)
    inputs = (keys, ids, jnp.asarray(members, jnp.int32), *rest)
    flat = jax.tree.map(lambda x: x.reshape((ids.size,) + x.shape[2:]), inputs)
    out = jax.lax.map(lambda a: fn((a[0], a[1], take(source, a[2]), *a[3:])), flat)
    return jax.tree.map(lambda x: x.reshape(ids.shape + x.shape[1:]), out)

  def _trained_mixture(self, setup, keys, ids, mask, cells, metrics, data, params):
    """``mixture_generators="trained"``: a second exchange of the cells' generators and
    fitness after their generation, then each cell's mixture ES on its members' ones."""
    new = cells.individuals
    mix = lambda a: mixture_of_trained(setup, *a, data, params)
    rest = (cells.mixture_weights, mask, metrics["diverged"])
    weights, score, accept = self._over_cells(
      mix, keys, ids, (new.params.min, new.fitness.min), rest
    )
    cells = cells._replace(mixture_weights=weights, mixture_score=score)
    return cells, dict(metrics, mixture_score=score, mixture_accepted=accept)

  # ------------------------------------------------------------ read-out
  def mixture(self, state: CoevolutionState, cell: int | None = None):
    """The generator mixture of ``cell`` (flat index; default: the best-scoring
    cell): ``(generators [M, ...], weights [M])``, the cell's own best
    generator first, then each neighbour's best (by stored fitness)."""
    c = self.config
    score = np.asarray(state.mixture_score).reshape(-1)
    if cell is None:
      finite = np.where(np.isfinite(score), score, np.inf)
      cell = int(np.argmin(finite))
    if not 0 <= cell < c.num_cells:
      raise ValueError(f"cell must be in [0, {c.num_cells}), got {cell}")
    # One jitted program for every cell (the cell is an argument): run eagerly, the first
    # call compiled each of its gathers, takes and selects (57-92 programs on a 3x3 grid).
    return _cell_mixture(
      (state.params.min, state.fitness.min, state.mixture_weights),
      cell,
      c.rows,
      c.cols,
      c.neighbourhood_layout,
      c.neighbourhood,
    )

  def sample_mixture(self, key: jax.Array, generators, weights, n: int) -> jax.Array:
    """``n`` samples of a generator mixture: each sample's generator is drawn
    with probability ``weights``."""
    k1, k2 = jax.random.split(key)
    which = jax.random.categorical(k1, jnp.log(jnp.maximum(weights, 0.0)), shape=(n,))
    z = jax.random.normal(k2, (n, self.pair.latent_dim))
    every = jax.vmap(self.pair.generator.apply, (0, None))(generators, z)  # [M, n, ...]
    return every[which, jnp.arange(n)]


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _cell_mixture(arrays, cell, rows, cols, layout, neighbourhood):
  """``Coevolution.mixture`` of flat cell index ``cell`` (traced) from the grid's generator
  params, generator fitness and mixture weights: the cell's members looked up in the
  layout's index table, not the whole grid's neighbourhoods gathered."""
  table = (transposed_indices if layout == "transposed" else neighbour_indices)(
    rows, cols, neighbourhood
  )
  members = take(jnp.asarray(table.reshape(rows * cols, -1)), cell)  # [M] flat cell ids
  gens, fit, weights = jax.tree.map(lambda x: x.reshape((rows * cols, *x.shape[2:])), arrays)
  gens, fit = take((gens, fit), members)  # [M, P, ...], [M, P]
  return member_bests(gens, fit), take(weights, cell)
