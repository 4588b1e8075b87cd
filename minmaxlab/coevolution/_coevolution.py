"""Spatial coevolution of GANs (Lipizzaner) as one jit-compiled generation step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from minmaxlab.coevolution._config import MUSTANGS_LOSSES, CoevolutionConfig
from minmaxlab.coevolution._exchange import WholeGrid
from minmaxlab.coevolution._grid import gather_neighbours, member_mask
from minmaxlab.coevolution._operators import (
  INF as _INF,
)
from minmaxlab.coevolution._operators import (
  aggregate_fitness,
  mixture_es_step,
  mutate_learning_rates,
  replacement_sources,
  tournament,
)
from minmaxlab.games._players import Players, value_and_vector_field
from minmaxlab.gan.losses import LOSSES
from minmaxlab.transforms import lookahead_minmax, per_player
from minmaxlab.transforms._by_player import (
  count_learning_rates,
  merge_by_player,
  player_labels,
  set_learning_rates,
)


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
  """

  params: Players
  opt_state: Any
  learning_rates: Players
  fitness: Players
  mixture_weights: jax.Array
  mixture_score: jax.Array
  generation: jax.Array


def default_scheme(
  learning_rate: float = 2e-4,
  lookahead: bool = True,
  sync_period: int = 5,
  slow_step_size: float = 0.5,
  b1: float = 0.5,
  b2: float = 0.999,
):
  """Lookahead-minmax over Adam (Lipizzaner's betas), each player's learning
  rate injectable; ``lookahead=False`` gives plain Adam (Lipizzaner parity)."""
  adam = lambda: optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate, b1=b1, b2=b2)
  inner = per_player(min=adam(), max=adam())
  return lookahead_minmax(inner, sync_period, slow_step_size) if lookahead else inner


def _take(tree, idx):
  return jax.tree.map(lambda x: x[idx], tree)


def _where(cond, a, b):
  return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)


def _finite(tree) -> jax.Array:
  leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _over_population(size: int):
  """``f -> f`` batched over a leading population axis of ``size``: ``jax.vmap``, or
  for one individual ``f`` on the squeezed axis (vmap over a size-1 axis makes XLA
  transpose weight gradients inside the optimizer loops; same numbers to rounding)."""

  def wrap(f):
    if size > 1:
      return jax.vmap(f)

    def one(*args):
      out = f(*jax.tree.map(lambda x: x[0], args))
      return jax.tree.map(lambda x: x[None], out)

    return one

  return wrap


def _train_schedule(step_both: Callable, step_g: Callable, carry, xs, d_every: int):
  """Scan ``xs`` (a pytree with one leading entry per batch): batch ``i`` takes
  ``step_both`` (generators and discriminators) when ``(i + 1) % d_every == 0``, else
  ``step_g`` (generators only). A scan over groups of ``d_every`` batches, so a skipped
  discriminator step costs nothing, also under ``vmap``; leftover batches of a partial
  group are generator steps.

  Args:
    step_both: ``(carry, x) -> (carry, losses [..., 2])`` (generator, discriminator).
    step_g: ``(carry, x) -> (carry, generator loss [...])``.
    carry: the training state.
    xs: ``[S, ...]`` per-batch inputs (keys, pre-drawn random numbers).
    d_every: static ``k >= 1``.

  Returns:
    ``(carry, g_losses [S, ...], d_losses [S // k, ...])`` in batch order.
  """
  if d_every == 1:
    carry, losses = jax.lax.scan(step_both, carry, xs)
    return carry, losses[..., 0], losses[..., 1]
  steps = jax.tree.leaves(xs)[0].shape[0]
  n = steps // d_every
  head = lambda t, j: jax.tree.map(lambda x: x[j], t)

  def group(carry, xg):
    carry, g_only = jax.lax.scan(step_g, carry, head(xg, slice(None, -1)))
    carry, both = step_both(carry, head(xg, -1))
    return carry, (jnp.concatenate([g_only, both[None, ..., 0]]), both[..., 1])

  grouped = jax.tree.map(lambda x: x[: n * d_every].reshape((n, d_every) + x.shape[1:]), xs)
  carry, (g_losses, d_losses) = jax.lax.scan(group, carry, grouped)
  g_losses = g_losses.reshape((n * d_every,) + g_losses.shape[2:])
  if steps == n * d_every:  # no partial group: no third trace of the generator's step
    return carry, g_losses, d_losses
  carry, g_rest = jax.lax.scan(step_g, carry, head(xs, slice(n * d_every, None)))
  return carry, jnp.concatenate([g_losses, g_rest]), d_losses


class Coevolution:
  r"""Lipizzaner's spatial coevolution with one jit-compiled generation.

  A ``rows x cols`` torus of cells; each cell keeps ``P`` generators and
  discriminators with their optimizer states and learning rates. One
  generation, for every cell at once:

  1. gather the neighbourhood's individuals (rolls of the grid axes);
  2. fitness: every generator against every discriminator of the
     neighbourhood on one fitness batch (``fitness_mode`` over opponents);
  3. tournament selection of the individuals to train (generators and
     discriminators independently, each with its own part of the optimizer
     state) and Gaussian mutation of their learning rates;
  4. ``steps_per_generation`` training steps with the game transform: each
     selected generator plays a discriminator drawn at random for that step
     from the cell's selected discriminators (with ``opponents=
     "neighbourhood"`` also from the neighbours'), and vice versa; the descent
     field of that game drives ``scheme``, e.g. Lookahead-minmax over Adam;
     with ``d_every = k > 1`` the discriminators take only every k-th step
     (Lipizzaner: k = 2) and the other steps update the generators alone
     (their state only; a shared counter such as Lookahead's counts every
     step, so a sync moves the discriminators when it falls on one of their
     steps: every ``lcm(sync_period, k) / k`` of them);
  5. replacement: the worst ``n_replacements`` local individuals are replaced
     by the best trained ones when those are better;
  6. a (1+1)-ES step on the mixture weights over the neighbourhood's best
     generators, accepted only if the mixture's score improves;
  7. a cell whose parameters or losses became NaN/inf is re-seeded from its
     best neighbour (counted in the metrics).

  Every random choice is keyed by ``fold_in(key, cell_index)``, so results do
  not depend on how cells are batched, mapped or sharded.

  Args:
    config: a :class:`CoevolutionConfig`.
    pair: ``minmaxlab.gan.models.GANPair`` (pure ``init``/``apply``).
    sample_real: ``sample_real(data, key, n) -> [n, ...]`` real samples.
    score_fn: ``score_fn(data, samples [M, S, ...], weights [M]) -> scalar``,
      lower is better (e.g. :func:`mode_tvd_score`, :func:`fid_score`).
    scheme: game transform over ``Players`` with per-player injected learning
      rates (default :func:`default_scheme`).
    exchange: which cells this program holds and how neighbours and grid-wide
      reductions arrive: :class:`WholeGrid` (default), or a block exchange from
      ``minmaxlab.distributed`` (a device mesh with ``shard_map``, MPI ranks).
      The algorithm is the same code for all of them.

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
  ):
    if not isinstance(config, CoevolutionConfig):
      raise ValueError(f"config must be a CoevolutionConfig, got {type(config).__name__}")
    exchange = WholeGrid(config.rows, config.cols) if exchange is None else exchange
    if (exchange.rows, exchange.cols) != (config.rows, config.cols):
      raise ValueError(
        f"exchange is for a {exchange.rows}x{exchange.cols} grid, config for"
        f" {config.rows}x{config.cols}"
      )
    self.exchange = exchange
    self.config = config
    self.pair = pair
    self.sample_real = sample_real
    self.score_fn = score_fn
    scheme = default_scheme(config.learning_rate) if scheme is None else scheme
    self.scheme = optax.with_extra_args_support(scheme)
    if config.loss == "mustangs":
      self._losses = tuple(LOSSES[n] for n in MUSTANGS_LOSSES)
    elif config.loss in LOSSES and config.loss != "wgan_gp":
      self._losses = (LOSSES[config.loss],)
    else:
      choices = sorted(set(LOSSES) - {"wgan_gp"}) + ["mustangs"]
      raise ValueError(f"loss must be one of {choices}, got {config.loss!r}")
    abstract = jax.eval_shape(self._init_pair, jax.random.key(0))
    _, n_min, n_max = count_learning_rates(abstract[1])
    if n_min == 0 or n_max == 0:
      raise ValueError(
        "scheme must give each player an injected learning rate, e.g."
        " per_player(min=optax.inject_hyperparams(optax.adam)(learning_rate=...), max=...)"
      )
    self._labels = player_labels(abstract[1])
    self._mask = member_mask(config.rows, config.cols, config.neighbourhood)
    strategy = config.cell_strategy
    if strategy == "auto":
      strategy = "map" if jax.default_backend() == "cpu" else "vmap"
    self.cell_strategy = strategy

  # ----------------------------------------------------------------- init
  def _init_pair(self, key):
    kg, kd = jax.random.split(key)
    params = Players(self.pair.generator.init(kg), self.pair.discriminator.init(kd))
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
    if self.exchange.local_block is not None:
      (r0, c0), (nr, nc) = self.exchange.local_block, self.exchange.block_shape
      keys, mask = keys[r0 : r0 + nr, c0 : c0 + nc], mask[r0 : r0 + nr, c0 : c0 + nc]
    params, opt = jax.vmap(jax.vmap(jax.vmap(self._init_pair)))(keys)
    lr = jnp.full(keys.shape, c.learning_rate, jnp.float32)
    weights = jnp.asarray(mask / mask.sum(-1, keepdims=True), jnp.float32)
    inf = jnp.full(keys.shape, _INF, jnp.float32)
    return CoevolutionState(
      params,
      opt,
      Players(lr, lr),
      Players(inf, inf),
      weights,
      jnp.full(keys.shape[:2], _INF, jnp.float32),
      jnp.zeros([], jnp.int32),
    )

  # ----------------------------------------------------------------- step
  def step(self, key: jax.Array, state: CoevolutionState, data: Any):
    """One generation of the whole grid; pure, jit it (``jax.jit(coev.step)``).

    Returns:
      ``(state, metrics)``: per-cell ``(rows, cols)`` arrays (``g_loss``,
      ``d_loss``, ``g_fitness``, ``d_fitness``, ``lr_g``, ``lr_d``,
      ``mixture_score``, ``mixture_accepted``, ``replaced_g``, ``replaced_d``,
      ``diverged``) and grid scalars ``best_cell`` (flat index), ``best_score``
      and ``divergences``.
    """
    c, ex = self.config, self.exchange
    lr, lc = ex.block_shape
    individuals = (state.params, state.opt_state, state.learning_rates, state.fitness)
    neighbourhood = ex.gather(individuals, c.neighbourhood)
    # Global cell ids key every random choice: the numbers do not depend on the backend.
    r0, c0 = ex.block_start()
    r, col = jnp.meshgrid(jnp.arange(lr) + r0, jnp.arange(lc) + c0, indexing="ij")
    ids = (r * c.cols + col).astype(jnp.int32)
    keys = jax.vmap(jax.vmap(lambda i: jax.random.fold_in(key, i.astype(jnp.uint32))))(ids)
    mask = jax.lax.dynamic_slice(jnp.asarray(self._mask), (r0, c0, 0), (lr, lc, c.num_members))
    inputs = (keys, neighbourhood, state.mixture_weights, mask)
    cell = lambda args: self._cell(*args, data)
    if self.cell_strategy == "vmap":
      out = jax.vmap(jax.vmap(cell))(inputs)
    else:
      flat = jax.tree.map(lambda x: x.reshape((lr * lc,) + x.shape[2:]), inputs)
      out = jax.lax.map(cell, flat)
      out = jax.tree.map(lambda x: x.reshape((lr, lc) + x.shape[1:]), out)
    (params, opt, lrs, fitness, weights, score), metrics = out
    new_state = CoevolutionState(
      params, opt, lrs, fitness, weights, score, optax.safe_int32_increment(state.generation)
    )
    # Grid-wide read-outs: the best (lowest, first by cell id on ties) finite score.
    finite_score = jnp.where(jnp.isfinite(score), score, _INF)
    best_score = ex.reduce(jnp.min(finite_score), "min")
    big = jnp.iinfo(jnp.int32).max
    best_cell = ex.reduce(jnp.min(jnp.where(finite_score == best_score, ids, big)), "min")
    divergences = ex.reduce(jnp.sum(metrics["diverged"]).astype(jnp.int32), "sum")
    metrics = dict(metrics, best_cell=best_cell, best_score=best_score, divergences=divergences)
    return new_state, metrics

  # ------------------------------------------------------- one cell's step
  def _per_logit(self, loss_index, real_logits, fake_logits):
    if len(self._losses) == 1:
      return self._losses[0](real_logits, fake_logits)
    return jax.lax.switch(loss_index, self._losses, real_logits, fake_logits)

  def _cell(self, key, neighbourhood, weights, mask, data):
    c = self.config
    G, D = self.pair.generator, self.pair.discriminator
    P, M = c.population_size, c.num_members
    params_nb, opt_nb, lr_nb, _ = neighbourhood
    flat = lambda t: jax.tree.map(lambda x: x.reshape((M * P,) + x.shape[2:]), t)
    g_all, d_all, opt_all = flat(params_nb.min), flat(params_nb.max), flat(opt_nb)
    lrg_all, lrd_all = flat(lr_nb.min), flat(lr_nb.max)
    member_valid = jnp.repeat(mask, P)
    # A diverged (non-finite) individual takes part in nothing.
    finite_each = lambda t: jax.vmap(_finite)(t)
    valid_g = member_valid & finite_each(g_all)
    valid_d = member_valid & finite_each(d_all)
    keys = jax.random.split(key, 9)
    loss_index = jax.random.randint(keys[0], (), 0, len(self._losses))
    per_logit = lambda r, f: self._per_logit(loss_index, r, f)

    # 2. fitness of every generator against every discriminator of the neighbourhood
    real_f = self.sample_real(data, keys[1], c.fitness_samples)
    z_f = jax.random.normal(keys[2], (c.fitness_samples, self.pair.latent_dim))
    fakes = jax.vmap(G.apply, (0, None))(g_all, z_f)
    d_real = jax.vmap(D.apply, (0, None))(d_all, real_f)
    d_fake = jax.vmap(lambda d: jax.vmap(lambda x: D.apply(d, x))(fakes))(d_all)  # [Nd, Ng, F]
    pair_losses = jax.vmap(jax.vmap(per_logit, (None, 0)), (0, 0))(d_real, d_fake)
    lg, ld = pair_losses[0].T, pair_losses[1]  # lg: [Ng, Nd]; ld: [Nd, Ng]
    fit_g = jnp.where(valid_g, aggregate_fitness(lg, valid_d, c.fitness_mode), _INF)
    fit_d = jnp.where(valid_d, aggregate_fitness(ld, valid_g, c.fitness_mode), _INF)
    usable_g = valid_g & jnp.isfinite(fit_g)
    usable_d = valid_d & jnp.isfinite(fit_d)

    # 3. selection and mutation
    if c.selection:
      idx_g = tournament(keys[3], fit_g, usable_g, P, c.tournament_size)
      idx_d = tournament(keys[4], fit_d, usable_d, P, c.tournament_size)
    else:
      idx_g = idx_d = jnp.arange(P)
    params = Players(_take(g_all, idx_g), _take(d_all, idx_d))
    opt = merge_by_player(
      self._labels, _take(opt_all, idx_g), _take(opt_all, idx_d), _take(opt_all, idx_g)
    )

    def mutate(k, lr):
      return mutate_learning_rates(
        k, lr, c.mutation_probability, c.mutation_scale, c.min_learning_rate
      )

    lr_g = mutate(keys[5], lrg_all[idx_g])
    lr_d = mutate(jax.random.fold_in(keys[5], 1), lrd_all[idx_d])
    opt = jax.vmap(set_learning_rates)(opt, lr_g, lr_d)

    # 4. training against opponents drawn from the neighbourhood every step
    # Opponents: the other side's selected individuals (slots < P), and with
    # opponents="neighbourhood" also every usable neighbour's individuals.
    with_neighbours = c.opponents == "neighbourhood" or (c.opponents == "auto" and not c.selection)
    pool_g = jnp.concatenate([jnp.ones(P, bool), usable_g[P:] & with_neighbours])
    pool_d = jnp.concatenate([jnp.ones(P, bool), usable_d[P:] & with_neighbours])
    g_nbrs, d_nbrs = _take(g_all, slice(P, None)), _take(d_all, slice(P, None))

    (params, opt), g_losses, d_losses = self._train(
      params, opt, keys[6], data, per_logit, (pool_g, pool_d), (g_nbrs, d_nbrs), with_neighbours
    )
    train_ok = jnp.all(jnp.isfinite(g_losses)) & jnp.all(jnp.isfinite(d_losses))

    # 5. replacement: trained vs local, on the same fitness batch and opponents
    fakes_tr = jax.vmap(G.apply, (0, None))(params.min, z_f)
    lg_tr = jax.vmap(
      lambda fk: jax.vmap(lambda d, dr: per_logit(dr, D.apply(d, fk))[0])(d_all, d_real)
    )(fakes_tr)  # [P, Nd]
    d_real_tr = jax.vmap(D.apply, (0, None))(params.max, real_f)
    ld_tr = jax.vmap(lambda d, dr: jax.vmap(lambda fk: per_logit(dr, D.apply(d, fk))[1])(fakes))(
      params.max, d_real_tr
    )  # [P, Ng]
    fit_g_tr = aggregate_fitness(lg_tr, valid_d, c.fitness_mode)
    fit_d_tr = aggregate_fitness(ld_tr, valid_g, c.fitness_mode)

    if c.selection:
      src_g = replacement_sources(fit_g[:P], fit_g_tr, c.n_replacements)
      src_d = replacement_sources(fit_d[:P], fit_d_tr, c.n_replacements)
    else:
      # Without selection Lipizzaner trains the local individuals in place and only
      # re-scores them: the trained ones are always kept (no replacement test).
      src_g = src_d = jnp.arange(P, dtype=jnp.int32)
    local = lambda t: _take(t, slice(0, P))
    pick = lambda src, tr, loc: _where(
      (src >= 0).reshape((P,) + (1,) * (jnp.ndim(loc) - 1)), _take(tr, jnp.maximum(src, 0)), loc
    )
    new_g = jax.tree.map(lambda tr, lo: pick(src_g, tr, lo), params.min, local(g_all))
    new_d = jax.tree.map(lambda tr, lo: pick(src_d, tr, lo), params.max, local(d_all))
    opt_local = local(opt_all)
    new_opt = merge_by_player(
      self._labels,
      jax.tree.map(lambda tr, lo: pick(src_g, tr, lo), opt, opt_local),
      jax.tree.map(lambda tr, lo: pick(src_d, tr, lo), opt, opt_local),
      jax.tree.map(lambda tr, lo: pick(src_g, tr, lo), opt, opt_local),
    )
    new_lr = Players(pick(src_g, lr_g, lrg_all[:P]), pick(src_d, lr_d, lrd_all[:P]))
    new_fit = Players(pick(src_g, fit_g_tr, fit_g[:P]), pick(src_d, fit_d_tr, fit_d[:P]))

    # 6. mixture weights: (1+1)-ES over the neighbourhood's best generators
    best_of_member = jnp.argmin(fit_g.reshape(M, P), axis=1)  # [M]
    member_gens = _take(g_all, jnp.arange(M) * P + best_of_member)
    own_best = _take(new_g, jnp.argmin(new_fit.min))
    gens = jax.tree.map(lambda nb, own: nb.at[0].set(own), member_gens, own_best)
    mix_ok = mask & jnp.isfinite(jnp.min(fit_g.reshape(M, P), axis=1)).at[0].set(True)
    z_mix = jax.random.normal(keys[7], (c.mixture_samples, self.pair.latent_dim))
    samples = jax.vmap(G.apply, (0, None))(gens, z_mix)
    samples = jnp.where(mix_ok.reshape((M,) + (1,) * (samples.ndim - 1)), samples, 0.0)

    uniform = mix_ok / jnp.sum(mix_ok)
    weights_out, score_out, accept = mixture_es_step(
      keys[8], weights, mix_ok, c.mixture_sigma, lambda w: self.score_fn(data, samples, w)
    )

    # 7. divergence: re-seed from the best neighbour
    arrived_diverged = ~(
      jnp.all(valid_g[:P]) & jnp.all(valid_d[:P]) & _finite(_take(opt_all, slice(0, P)))
    )
    diverged = arrived_diverged | ~(
      _finite(new_g) & _finite(new_d) & _finite(new_opt) & train_ok & jnp.isfinite(score_out)
    )
    member_fit = jnp.where(jnp.arange(M) == 0, _INF, jnp.min(fit_g.reshape(M, P), axis=1))
    donor = jnp.argmin(member_fit)
    has_donor = jnp.isfinite(member_fit[donor])
    donor_slice = lambda t: jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, donor * P, P), t)
    # Without a healthy neighbour the cell restarts from fresh networks.
    fresh_params, fresh_opt = jax.vmap(self._init_pair)(jax.random.split(keys[8], P))
    lr0 = jnp.full(P, c.learning_rate, jnp.float32)
    fresh = (
      fresh_params.min,
      fresh_params.max,
      fresh_opt,
      Players(lr0, lr0),
      Players(jnp.full(P, _INF), jnp.full(P, _INF)),
    )
    donated = (
      donor_slice(g_all),
      donor_slice(d_all),
      donor_slice(opt_all),
      Players(donor_slice(lrg_all), donor_slice(lrd_all)),
      Players(donor_slice(fit_g), donor_slice(fit_d)),
    )
    repair = _where(has_donor, donated, fresh)
    new_g, new_d, new_opt, new_lr, new_fit = _where(
      diverged, repair, (new_g, new_d, new_opt, new_lr, new_fit)
    )
    weights_out = jnp.where(diverged, uniform, weights_out)
    score_out = jnp.where(diverged, _INF, score_out)

    metrics = {
      "g_loss": jnp.mean(g_losses),
      "d_loss": jnp.mean(d_losses),
      "g_fitness": jnp.min(new_fit.min),
      "d_fitness": jnp.min(new_fit.max),
      "lr_g": jnp.mean(new_lr.min),
      "lr_d": jnp.mean(new_lr.max),
      "mixture_score": score_out,
      "mixture_accepted": accept & ~diverged,
      "replaced_g": jnp.sum(src_g >= 0).astype(jnp.int32),
      "replaced_d": jnp.sum(src_d >= 0).astype(jnp.int32),
      "diverged": diverged,
      "loss_index": loss_index.astype(jnp.int32),
    }
    return (Players(new_g, new_d), new_opt, new_lr, new_fit, weights_out, score_out), metrics

  # ------------------------------------------------------------- training
  def _train(self, params, opt, key, data, per_logit, pools, neighbours, with_neighbours):
    """``steps_per_generation`` training batches of one cell's ``P`` selected pairs.

    Args:
      params, opt: ``Players`` and scheme states with a leading ``[P]`` axis.
      key: the cell's training key (one key per batch is split from it).
      data: the data set for ``sample_real``.
      per_logit: ``(real_logits, fake_logits) -> (loss_min, loss_max)``.
      pools: ``(pool_g, pool_d)`` boolean ``[M * P]``: opponents that may be drawn
        (slots ``< P`` are the cell's own selected individuals).
      neighbours: ``(g_nbrs, d_nbrs)``, the neighbours' individuals ``[M * P - P, ...]``.
      with_neighbours: static; False when every opponent is the cell's own.

    Returns:
      ``((params, opt), g_losses [S, P], d_losses [S // d_every, P])``.
    """
    c = self.config
    G, D = self.pair.generator, self.pair.discriminator
    P, M = c.population_size, c.num_members
    pool_g, pool_d = pools
    g_nbrs, d_nbrs = neighbours
    over_population = _over_population(P)

    def opponent(current, neighbours, i):
      mine = _take(current, jnp.minimum(i, P - 1))
      theirs = _take(neighbours, jnp.clip(i - P, 0, M * P - P - 1))
      return _where(i < P, mine, theirs)

    def opponents(current, neighbours, idx):
      # Statically known cases skip the per-step gather and select (a copy of a whole
      # network per step, about 10% of an MNIST-MLP step on CPU).
      if not with_neighbours:
        return current if P == 1 else _take(current, idx)
      return jax.vmap(lambda i: opponent(current, neighbours, i))(idx)

    lipizzaner = c.schedule == "lipizzaner"
    B, L = c.batch_size, self.pair.latent_dim

    def pair_draws(k):
      """A pair's randomness of one batch, drawn for all batches at once before the loop
      (the same numbers as drawing it inside: ``jax.random`` is elementwise under vmap):
      ``(key, real-batch key, noise of the simultaneous/generator step, the
      discriminator's fresh noise (Lipizzaner's schedule) or None)``."""
      kk = jax.random.fold_in(k, 0)
      z = lambda which: jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))
      return k, jax.random.fold_in(kk, 0), z(0), z(1) if lipizzaner else None

    def batch(r, i, which):
      """The real batch of evaluation ``i`` of a pair's step and its noise ``which`` (0: the
      simultaneous step's and the generator's, 1: the discriminator's fresh fakes). Only
      evaluation 0 is pre-drawn; schemes that evaluate again (extragradient, alternating)
      draw theirs from the pair's key."""
      if isinstance(i, int) and i == 0:
        return self.sample_real(data, r[1], B), r[2 + which]
      kk = jax.random.fold_in(r[0], i)
      real = self.sample_real(data, jax.random.fold_in(kk, 0), B)
      return real, jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))

    def train_pair(p, o, opp_g, opp_d, r):
      def loss_fn(q, i):
        real, z = batch(r, i, 0)
        own_fake, opp_fake = G.apply(q.min, z), G.apply(opp_g, z)
        loss_min = per_logit(D.apply(opp_d, real), D.apply(opp_d, own_fake))[0]
        loss_max = per_logit(D.apply(q.max, real), D.apply(q.max, opp_fake))[1]
        return loss_min, loss_max

      vaf = value_and_vector_field(loss_fn)
      losses, v = vaf(p, 0)
      u, o = self.scheme.update(v, o, p, vector_field=lambda q, i: vaf(q, i)[1])
      return optax.apply_updates(p, u), o, jnp.stack(losses)

    def train_g_pair(p, o, opp_d, r):
      # The generator's step alone: only its own field is computed; the scheme's
      # discriminator part (params and MAX-labelled state) is discarded, so XLA
      # drops it, and the shared state (e.g. Lookahead's step count) advances.
      def field(q, i):
        real, z = batch(r, i, 0)
        loss_g = lambda g: per_logit(D.apply(opp_d, real), D.apply(opp_d, G.apply(g, z)))[0]
        loss, grad = jax.value_and_grad(loss_g)(q.min)
        return loss, Players(grad, jax.tree.map(jnp.zeros_like, q.max))

      loss, v = field(p, 0)
      u, o_new = self.scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
      p = Players(optax.apply_updates(p.min, u.min), p.max)
      return p, merge_by_player(self._labels, o_new, o, o_new), loss

    def train_d_pair(p, o, opp_g, r):
      # The discriminator's step alone, on the batch's real samples and fresh fakes of
      # ``opp_g`` (the generator as it is now); the shared state is left as it came in.
      def field(q, i):
        real, z = batch(r, i, 1)
        fake = G.apply(opp_g, z)
        loss_d = lambda d: per_logit(D.apply(d, real), D.apply(d, fake))[1]
        loss, grad = jax.value_and_grad(loss_d)(q.max)
        return loss, Players(jax.tree.map(jnp.zeros_like, q.min), grad)

      loss, v = field(p, 0)
      u, o_new = self.scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
      p = Players(p.min, optax.apply_updates(p.max, u.max))
      return p, merge_by_player(self._labels, o, o_new, o), loss

    def draw(k, pool):
      return jax.random.categorical(k, jnp.where(pool, 0.0, -_INF), shape=(P,))

    def step_draws(k):
      # Every random number of one batch: opponents (k_g, k_d) and the pairs' draws (k_b).
      k_g, k_d, k_b = jax.random.split(k, 3)
      pairs = jax.vmap(pair_draws)(jax.random.split(k_b, P))
      return draw(k_g, pool_g), draw(k_d, pool_d), pairs

    def train_step(carry, x):
      (p, o), (opp_gi, opp_di, pairs) = carry, x
      opp_g = opponents(p.min, g_nbrs, opp_gi)
      opp_d = opponents(p.max, d_nbrs, opp_di)
      p, o, losses = over_population(train_pair)(p, o, opp_g, opp_d, pairs)
      return (p, o), losses

    def train_g_step(carry, x):
      (p, o), (_, opp_di, pairs) = carry, x
      opp_d = opponents(p.max, d_nbrs, opp_di)
      p, o, loss = over_population(train_g_pair)(p, o, opp_d, pairs)
      return (p, o), loss

    def lipizzaner_step(carry, x):
      # Generator first, then the discriminator against the updated generator. The
      # discriminator's update sees the shared state of before the generator's, so a
      # shared counter counts batches and both players sync on the same batch.
      (p, o0), (opp_gi, _, pairs) = carry, x
      (p, o1), g_loss = train_g_step((p, o0), x)
      opp_g = opponents(p.min, g_nbrs, opp_gi)
      o_in = merge_by_player(self._labels, o1, o1, o0)
      p, o2, d_loss = over_population(train_d_pair)(p, o_in, opp_g, pairs)
      return (p, merge_by_player(self._labels, o2, o2, o1)), jnp.stack([g_loss, d_loss], -1)

    step_both = lipizzaner_step if lipizzaner else train_step
    draws = jax.vmap(step_draws)(jax.random.split(key, c.steps_per_generation))
    return _train_schedule(step_both, train_g_step, (params, opt), draws, c.d_every)

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
    r, col = divmod(cell, c.cols)
    gens, fit = gather_neighbours((state.params.min, state.fitness.min), c.neighbourhood)
    gens, fit = _take(gens, (r, col)), fit[r, col]  # [M, P, ...], [M, P]
    best = jnp.argmin(fit, axis=1)
    gens = jax.tree.map(lambda x: x[jnp.arange(c.num_members), best], gens)
    return gens, state.mixture_weights[r, col]

  def sample_mixture(self, key: jax.Array, generators, weights, n: int) -> jax.Array:
    """``n`` samples of a generator mixture: each sample's generator is drawn
    with probability ``weights``."""
    k1, k2 = jax.random.split(key)
    which = jax.random.categorical(k1, jnp.log(jnp.maximum(weights, 0.0)), shape=(n,))
    z = jax.random.normal(k2, (n, self.pair.latent_dim))
    every = jax.vmap(self.pair.generator.apply, (0, None))(generators, z)  # [M, n, ...]
    return every[which, jnp.arange(n)]
