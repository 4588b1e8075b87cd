"""One cell's generation of :class:`~minmaxlab.coevolution.Coevolution`: the phases of
:class:`~minmaxlab.coevolution.Phases` in order, with named keys and a named result."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.coevolution import _phases as phases_lib
from minmaxlab.coevolution._lineage import lineage_id
from minmaxlab.coevolution._lr_mutation import PerUpdate
from minmaxlab.coevolution._operators import INF
from minmaxlab.coevolution._phases import FitnessBatch, Individuals, Phases, Pool
from minmaxlab.coevolution._rescore_own import with_trained_own
from minmaxlab.coevolution._training import CellSpec, indexed_loss, take
from minmaxlab.games import Players

# Mustangs' creation draws: fold_in(init key, MUSTANGS_SALT) (the networks' keys untouched).
MUSTANGS_SALT = 0x6D75


class CellKeys(NamedTuple):
  """The PRNG keys of one cell's generation, each named by the draw it makes.

  They are slots of ``jax.random.split(cell key, 9)`` (slot 0 is not used); ``reseed`` is
  the same key as ``mixture_es`` (slot 8). Both are kept as they were so that the numbers
  of every run stay the same: a new split would change every draw.
  """

  fitness_real: jax.Array  # the real samples of the fitness batch
  fitness_noise: jax.Array  # the generators' noise of the fitness batch
  select_generators: jax.Array
  select_discriminators: jax.Array
  mutation: jax.Array  # the learning-rate mutation
  train: jax.Array  # the training steps (batches, opponents)
  mixture_noise: jax.Array  # the mixture's generator samples
  mixture_es: jax.Array  # the (1+1)-ES proposal
  reseed: jax.Array  # a diverged cell's fresh networks (and Mustangs' fresh losses)


def cell_keys(key: jax.Array) -> CellKeys:
  keys = jax.random.split(key, 9)
  return CellKeys(
    fitness_real=keys[1],
    fitness_noise=keys[2],
    select_generators=keys[3],
    select_discriminators=keys[4],
    mutation=keys[5],
    train=keys[6],
    mixture_noise=keys[7],
    mixture_es=keys[8],
    reseed=keys[8],
  )


class CellResult(NamedTuple):
  """A cell after its generation: its ``P`` individuals, mixture weights ``[M]`` and
  mixture score (lower is better)."""

  individuals: Individuals
  mixture_weights: jax.Array
  mixture_score: jax.Array


class CellSetup(NamedTuple):
  """What one cell's generation closes over (fixed for a run)."""

  spec: CellSpec
  phases: Phases
  cell_data: Any  # ``cell_data(data, cell_id) -> data`` or None
  mustangs: bool


def generation(setup: CellSetup, key, cell_id, neighbourhood, weights, mask, data, params, gen):
  """One cell's generation (phases 1-6 of :class:`~minmaxlab.coevolution.Coevolution`):
  ``(CellResult, metrics)``; ``params`` the ``CoevolutionParams``, ``gen`` the generations
  taken before this one."""
  if setup.cell_data is not None:
    data = setup.cell_data(data, cell_id)
  spec, ph, c = setup.spec, setup.phases, setup.spec.config
  P = c.population_size
  pool = phases_lib.pool(neighbourhood, mask, P)
  keys = cell_keys(key)
  per_logit = spec.losses[0]
  if setup.mustangs:  # each individual's own loss (pool.loss_index)
    per_logit = lambda r, f, gi, di: indexed_loss(spec.losses, gi, di)(r, f)
  # 1. fitness of every generator against every discriminator of the neighbourhood
  fit, batch, usable = _fitness(spec, ph, keys, data, pool, per_logit)
  # 2. selection and mutation
  select_keys = (keys.select_generators, keys.select_discriminators, keys.mutation)
  selected, _ = ph.select_and_mutate(
    select_keys, fit, usable, pool, spec.labels, c, params, ph.selection
  )
  # 3. training; 4. replacement: trained vs local, on the same fitness batch and opponents
  trained, g_losses, d_losses = _train(setup, keys, data, pool, usable, selected, per_logit, params)
  train_ok = jnp.all(jnp.isfinite(g_losses)) & jnp.all(jnp.isfinite(d_losses))
  new, src = _replacement(setup, pool, fit, batch, trained, selected, per_logit)
  if c.mixture_generators == "pool":
    # 5. mixture weights: (1+1)-ES over the neighbourhood's best generators
    own_best = take(new.params.min, jnp.argmin(new.fitness.min))
    gens, mix_ok = ph.mixture_members(pool, fit.min, own_best, mask)
    weights_out, score_out, accept = _mixture_es(setup, keys, data, gens, mix_ok, weights, params)
    healthy = train_ok & jnp.isfinite(score_out)
  else:  # "trained": phase 5 runs after a second exchange (mixture_of_trained)
    weights_out, score_out, accept = weights, jnp.asarray(INF), jnp.asarray(False)
    mix_ok, healthy = mask, train_ok
  # 6. divergence: re-seed from the best neighbour (fresh networks without one). The
  # repair runs under a cond: a healthy cell builds no fresh networks and selects
  # nothing (with vmapped cells the cond becomes a select: the same values).
  diverged = ph.diverged(pool, P, new, healthy)
  repaired = lambda new: _repaired(setup, keys, cell_id, gen, diverged, new, pool, fit)
  new = jax.lax.cond(diverged, repaired, lambda new: new, new)
  weights_out = jnp.where(diverged, mix_ok / jnp.sum(mix_ok), weights_out)
  score_out = jnp.where(diverged, INF, score_out)
  metrics = _metrics(setup, new, g_losses, d_losses, score_out, accept, diverged, src)
  return CellResult(individuals=new, mixture_weights=weights_out, mixture_score=score_out), metrics


def _mixture_es(setup: CellSetup, keys: CellKeys, data, gens, usable, weights, params):
  """Phase 5: one (1+1)-ES step of the cell's mixture weights over ``gens`` ``[M, ...]``
  (``usable [M]``): ``(weights, score, accepted)``."""
  spec, c = setup.spec, setup.spec.config
  return setup.phases.mixture_es(
    (keys.mixture_noise, keys.mixture_es),
    spec.pair.generator,
    lambda samples, w: spec.score_fn(data, samples, w),
    gens,
    usable,
    weights,
    params.mixture_sigma,
    c.mixture_samples,
    spec.pair.latent_dim,
  )


def member_bests(gens, fit):
  """Each member's best generator (lowest fitness): leaves ``[M, P, ...]`` -> ``[M, ...]``
  by ``fit [M, P]``."""
  best = jnp.argmin(fit, axis=1)
  return jax.tree.map(lambda x: x[jnp.arange(fit.shape[0]), best], gens)


def mixture_of_trained(
  setup: CellSetup, key, cell_id, members, weights, mask, diverged, data, params
):
  """Phase 5 with ``mixture_generators="trained"``, after every cell's generation: the
  (1+1)-ES over each member's best generator as it left its own generation.

  Args:
    key: the cell's key of the generation (the same ES draws as phase 5 in place).
    members: the gathered ``(generator params, generator fitness)``, leaves ``[M, P, ...]``
      and ``[M, P]``, the cell itself first (after its replacement and repair).
    weights: the cell's weights ``[M]`` before the generation.
    diverged: whether the cell was repaired in this generation.

  Returns:
    ``(weights, score, accepted)``: a repaired cell or a non-finite score gives weights
    equal over the usable members and an infinite score, as in place."""
  if setup.cell_data is not None:
    data = setup.cell_data(data, cell_id)
  gens, fit = members
  gens = member_bests(gens, fit)
  usable = mask & jnp.isfinite(jnp.min(fit, axis=1)).at[0].set(True)
  keys = cell_keys(key)
  out, score, accept = _mixture_es(setup, keys, data, gens, usable, weights, params)
  reset = diverged | ~jnp.isfinite(score)
  out = jnp.where(reset, usable / jnp.sum(usable), out)
  return out, jnp.where(reset, INF, score), accept & ~reset


def _fitness(spec: CellSpec, ph: Phases, keys: CellKeys, data, pool: Pool, per_logit):
  """Phase 1: ``(fitness, fitness batch, usable)``, ``usable`` the pool's valid members
  with a finite fitness."""
  c = spec.config
  real = spec.sample_real(data, keys.fitness_real, c.fitness_samples)
  if c.fitness_noise == "fresh":  # a key: every evaluation draws its own noise
    z = keys.fitness_noise
  else:
    z = jax.random.normal(keys.fitness_noise, (c.fitness_samples, spec.pair.latent_dim))
  fit, batch = ph.fitness(spec.pair, per_logit, real, z, pool, c.fitness_mode)
  usable = Players(pool.valid.min & jnp.isfinite(fit.min), pool.valid.max & jnp.isfinite(fit.max))
  return fit, batch, usable


class _Trained(NamedTuple):
  params: Players
  opt: Any
  learning_rates: Any = None  # the tracked ones after per-update mutation, else None


def _train(setup: CellSetup, keys: CellKeys, data, pool: Pool, usable, selected, per_logit, params):
  """Phase 3: the selected individuals trained against opponents drawn from the
  neighbourhood every step: the other side's selected individuals (slots < P), with
  opponents="neighbourhood" also every usable neighbour's individuals; with
  ``lr_mutation`` other than ``"per_generation"`` the learning rates mutate before every
  update (``params``: the ``CoevolutionParams``). Returns ``(_Trained, generator losses,
  discriminator losses)``."""
  spec, c = setup.spec, setup.spec.config
  P = c.population_size
  with_neighbours = c.opponents == "neighbourhood" or (c.opponents == "auto" and not c.selection)
  pool_g = jnp.concatenate([jnp.ones(P, bool), usable.min[P:] & with_neighbours])
  pool_d = jnp.concatenate([jnp.ones(P, bool), usable.max[P:] & with_neighbours])
  neighbours = take(pool.params.min, slice(P, None)), take(pool.params.max, slice(P, None))
  extra = {"loss_index": selected.loss_index} if setup.mustangs else {}
  if c.lr_mutation != "per_generation":  # Lipizzaner's mutation before every update
    extra["per_update"] = PerUpdate(
      learning_rates=selected.learning_rates,
      probability=params.mutation_probability,
      scale=params.mutation_scale,
      lr0=c.learning_rate,
      as_run=c.lr_mutation == "reference_as_run",
    )
  out, g_losses, d_losses = setup.phases.train(
    spec,
    per_logit,
    keys.train,
    data,
    selected.params,
    selected.opt,
    (pool_g, pool_d),
    neighbours,
    with_neighbours,
    **extra,
  )
  trained_params, trained_opt, *tracked = out  # tracked: with per-update mutation
  trained = _Trained(
    params=trained_params, opt=trained_opt, learning_rates=tracked[0] if tracked else None
  )
  return trained, g_losses, d_losses


def _replacement(setup: CellSetup, pool: Pool, fit, batch: FitnessBatch, trained, selected, loss):
  """Phase 4: the trained individuals rescored on the fitness batch, then the worst local
  ones replaced by better trained ones: ``(individuals, sources)``; ``loss`` the per-logit
  loss of the fitness."""
  spec, ph, c = setup.spec, setup.phases, setup.spec.config
  P = c.population_size
  mustangs = {"loss_index": selected.loss_index} if setup.mustangs else {}
  opponents, played = pool, batch
  if c.rescore_own == "trained" and not c.selection:  # Lipizzaner: its own trained ones
    opponents, played = with_trained_own(spec.pair, pool, batch, trained.params)
  fit_tr = ph.rescore(
    spec.pair, loss, played, trained.params, opponents, c.fitness_mode, **mustangs
  )
  # The cell's own ones: the pool's first P, every leaf of both sides (None stays None).
  local = take(
    Individuals(
      params=pool.params,
      opt=pool.opt,
      learning_rates=pool.learning_rates,
      fitness=fit,
      loss_index=pool.loss_index,
      lineage=pool.lineage,
    ),
    slice(0, P),
  )
  lr = selected.learning_rates if trained.learning_rates is None else trained.learning_rates
  trained_ones = Individuals(
    params=trained.params,
    opt=trained.opt,
    learning_rates=lr,
    fitness=fit_tr,
    loss_index=selected.loss_index,
    lineage=selected.lineage,
  )
  return ph.replace(local, trained_ones, c.n_replacements, c.selection, spec.labels)


def _repaired(setup: CellSetup, keys: CellKeys, cell_id, gen, diverged, new, pool, fit):
  """Phase 6 for a diverged cell: re-seeded from its best neighbour, or fresh networks."""
  spec, c = setup.spec, setup.spec.config
  P = c.population_size
  fresh_params, fresh_opt = jax.vmap(spec.init_individual)(jax.random.split(keys.reseed, P))
  lr0 = jnp.full(P, c.learning_rate, jnp.float32)
  inf = jnp.full(P, INF)
  fresh_li = None
  if setup.mustangs:  # re-seeded individuals draw their losses anew (created again)
    li = jax.random.randint(
      jax.random.fold_in(keys.reseed, MUSTANGS_SALT), (2, P), 0, len(spec.losses), jnp.int32
    )
    fresh_li = Players(li[0], li[1])
  fresh_lineage = None  # fresh networks: new lineages, born here and now
  if pool.lineage is not None:
    born = jnp.full(P, lineage_id(cell_id, gen), jnp.int32)
    fresh_lineage = Players(born, born)
  fresh = Individuals(
    params=fresh_params,
    opt=fresh_opt,
    learning_rates=Players(lr0, lr0),
    fitness=Players(inf, inf),
    loss_index=fresh_li,
    lineage=fresh_lineage,
  )
  return setup.phases.repair(diverged, new, pool, fit, fresh, c.num_members)


def _metrics(setup: CellSetup, new, g_losses, d_losses, score, accept, diverged, src) -> dict:
  P = setup.spec.config.population_size
  metrics = {
    "g_loss": jnp.mean(g_losses),
    "d_loss": jnp.mean(d_losses),
    "g_fitness": jnp.min(new.fitness.min),
    "d_fitness": jnp.min(new.fitness.max),
    "lr_g": jnp.mean(new.learning_rates.min),
    "lr_d": jnp.mean(new.learning_rates.max),
    "mixture_score": score,
    "mixture_accepted": accept & ~diverged,
    "replaced_g": jnp.sum(src.min >= 0).astype(jnp.int32),
    "replaced_d": jnp.sum(src.max >= 0).astype(jnp.int32),
    "diverged": diverged,
    # Mustangs: the loss of the cell's best generator (0 without Mustangs).
    "loss_index": (
      new.loss_index.min[jnp.argmin(new.fitness.min)]
      if setup.mustangs
      else jnp.zeros([], jnp.int32)
    ),
  }
  no_lineage = Players(*(jnp.full(P, -1, jnp.int32),) * 2)
  lineage = no_lineage if new.lineage is None else new.lineage
  metrics.update(lineage_g=lineage.min, lineage_d=lineage.max)
  return metrics
