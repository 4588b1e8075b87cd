"""One cell's generation as named pure phases (composed by ``Coevolution.step``).

Every phase is a module-level function of explicit arguments, tested alone on
hand-checkable cases (tests/coevolution/test_coevolution_phases.py), and every phase can be
swapped: :class:`Phases` holds the functions a :class:`Coevolution` composes, e.g.
``Coevolution(..., phases=Phases(selection=my_selection))``.

Shapes: ``P`` individuals per cell, ``M`` neighbourhood members (the cell itself
first), ``N = M * P`` individuals in the neighbourhood's pool (the cell's own ``P``
first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.coevolution._config import CoevolutionParams
from minmaxlab.coevolution._operators import (
  INF,
  aggregate_fitness,
  mixture_es_step,
  mutate_learning_rates,
  replacement_sources,
  tournament,
)
from minmaxlab.coevolution._training import take, train
from minmaxlab.games import Players
from minmaxlab.transforms import merge_by_player, set_learning_rates, tree_all_finite, tree_where


class Pool(NamedTuple):
  """A cell's neighbourhood flattened to ``N`` individuals (the cell's own first).

  Attributes:
    params: ``Players`` of ``[N, ...]`` generators and discriminators.
    opt: the scheme states ``[N, ...]``.
    learning_rates: ``Players`` of ``[N]``.
    valid: ``Players`` of ``[N]`` bool: a distinct member with finite parameters
      (a diverged individual takes part in nothing).
    loss_index: ``None``, or Mustangs' ``Players`` of ``[N]`` int32 loss indices.
    lineage: ``Players`` of ``[N]`` int32 lineage ids (``minmaxlab.coevolution._lineage``),
      or ``None`` (a pool built by hand).
  """

  params: Players
  opt: Any
  learning_rates: Players
  valid: Players
  loss_index: Any = None
  lineage: Any = None


class Individuals(NamedTuple):
  """``P`` individuals of a cell: ``Players`` params, scheme states, ``Players``
  learning rates and ``Players`` fitness, each with a leading ``[P]`` axis; with
  Mustangs also ``Players`` of ``[P]`` loss indices (else ``None``); ``lineage``:
  ``Players`` of ``[P]`` int32 lineage ids, moved with the individuals (or ``None``)."""

  params: Players
  opt: Any
  learning_rates: Players
  fitness: Players
  loss_index: Any = None
  lineage: Any = None


class FitnessBatch(NamedTuple):
  """The fitness batch: ``real [F, ...]``, noise ``z [F, L]`` (or, with fresh noise per
  evaluation, the PRNG key it was drawn from), every pool generator's fakes
  ``[N, F, ...]`` (``None`` with fresh noise) and every pool discriminator's real
  logits ``[N, F]`` (reused to score the trained individuals)."""

  real: jax.Array
  z: jax.Array
  fakes: jax.Array
  d_real: jax.Array


def pool(neighbourhood: Individuals, mask: jax.Array, population_size: int) -> Pool:
  """Flatten a cell's gathered neighbourhood (:class:`Individuals`, leaves ``[M, P, ...]``,
  fitness unused) into a pool of ``N = M * P``; ``mask [M]`` marks the distinct members."""
  n = mask.shape[0] * population_size
  nb = jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), neighbourhood)
  member_valid = jnp.repeat(mask, population_size)
  finite = lambda side: member_valid & jax.vmap(tree_all_finite)(side)
  valid = Players(finite(nb.params.min), finite(nb.params.max))
  return Pool(
    params=nb.params,
    opt=nb.opt,
    learning_rates=nb.learning_rates,
    valid=valid,
    loss_index=nb.loss_index,
    lineage=nb.lineage,
  )


def _losses_with(per_logit: Callable, g_index: Any, d_index: Any) -> Callable:
  """``per_logit`` itself, or with Mustangs' indices bound (``per_logit(r, f, gi, di)``)."""
  if g_index is None:
    return per_logit
  return lambda r, f: per_logit(r, f, g_index, d_index)


def _is_key(x) -> bool:
  return jax.dtypes.issubdtype(jnp.asarray(x).dtype, jax.dtypes.prng_key)


def fitness(
  pair, per_logit: Callable, real: jax.Array, z: jax.Array, pool: Pool, mode: str
) -> tuple[Players, FitnessBatch]:
  """Every pool generator against every pool discriminator on one batch.

  Args:
    pair: the ``GANPair`` (``generator.apply``, ``discriminator.apply``).
    per_logit: ``(real_logits, fake_logits) -> (loss_min, loss_max)``; with
      ``pool.loss_index`` set (Mustangs) ``(real, fake, g_index, d_index) -> ...``:
      each generator is scored by its own loss, each discriminator by its own.
    real: the fitness batch's real samples ``[F, ...]``.
    z: its noise ``[F, L]``, shared by every evaluation; or a PRNG key: fresh noise
      for every evaluation, as Lipizzaner draws it (each generator against each
      discriminator on its own ``[F, L]`` draw, and each discriminator against each
      generator on another; ``CoevolutionConfig.fitness_noise="fresh"``).
    pool: from :func:`pool`.
    mode: :func:`aggregate_fitness` over the valid opponents.

  Returns:
    ``(Players(fit_g [N], fit_d [N]), batch)``: lower is better, +inf for an
    invalid individual.
  """
  G, D = pair.generator, pair.discriminator
  g_all, d_all = pool.params
  valid_g, valid_d = pool.valid
  d_real = jax.vmap(D.apply, (0, None))(d_all, real)
  gi, di = (None, None) if pool.loss_index is None else pool.loss_index
  one = lambda r, f, g, d: _losses_with(per_logit, g, d)(r, f)
  if _is_key(z):
    n, latent = valid_g.shape[0], pair.latent_dim
    zg, zd = (jax.random.normal(k, (n, n) + (real.shape[0], latent)) for k in jax.random.split(z))
    play = lambda g, d, noise: D.apply(d, G.apply(g, noise))  # [F] logits
    # [Ng, Nd, F]: generator i's fakes from zg[i, j] scored by discriminator j
    fake_g = jax.vmap(lambda g, zs: jax.vmap(lambda d, zz: play(g, d, zz))(d_all, zs))(g_all, zg)
    # [Nd, Ng, F]: discriminator j against generator i's fakes from zd[j, i]
    fake_d = jax.vmap(lambda d, zs: jax.vmap(lambda g, zz: play(g, d, zz))(g_all, zs))(d_all, zd)
    lg = jax.vmap(lambda fg, g: jax.vmap(lambda r, f, d: one(r, f, g, d)[0])(d_real, fg, di))(
      fake_g, gi
    )  # [Ng, Nd]
    ld = jax.vmap(lambda r, fd, d: jax.vmap(lambda f, g: one(r, f, g, d)[1])(fd, gi))(
      d_real, fake_d, di
    )  # [Nd, Ng]
    fakes = None
  else:
    fakes = jax.vmap(G.apply, (0, None))(g_all, z)
    d_fake = jax.vmap(lambda d: jax.vmap(lambda x: D.apply(d, x))(fakes))(d_all)  # [Nd, Ng, F]
    pair_losses = jax.vmap(jax.vmap(one, (None, 0, 0, None)), (0, 0, None, 0))(
      d_real, d_fake, gi, di
    )
    lg, ld = pair_losses[0].T, pair_losses[1]  # lg: [Ng, Nd]; ld: [Nd, Ng]
  fit_g = jnp.where(valid_g, aggregate_fitness(lg, valid_d, mode), INF)
  fit_d = jnp.where(valid_d, aggregate_fitness(ld, valid_g, mode), INF)
  return Players(fit_g, fit_d), FitnessBatch(real=real, z=z, fakes=fakes, d_real=d_real)


def rescore(
  pair,
  per_logit: Callable,
  batch: FitnessBatch,
  trained: Players,
  pool: Pool,
  mode: str,
  loss_index: Any = None,
) -> Players:
  """Fitness of trained individuals (``Players`` of ``[P, ...]``) on the same
  batch and against the same pool opponents as :func:`fitness` (no ``valid``
  masking of the trained ones themselves); with Mustangs ``loss_index`` holds the
  trained ones' ``Players`` of ``[P]`` loss indices (``per_logit`` as in :func:`fitness`)."""
  G, D = pair.generator, pair.discriminator
  g_all, d_all = pool.params
  valid_g, valid_d = pool.valid
  gi, di = (None, None) if loss_index is None else loss_index
  # Only the generator's part (index of the trained generator) and the discriminator's
  # part (of the trained discriminator) are read, so the other index can be anything.
  g_loss = lambda r, f, g: _losses_with(per_logit, g, g)(r, f)[0]
  d_loss = lambda r, f, d: _losses_with(per_logit, d, d)(r, f)[1]
  d_real_tr = jax.vmap(D.apply, (0, None))(trained.max, batch.real)
  if _is_key(batch.z):  # fresh noise for every evaluation (see fitness)
    p, n = jax.tree.leaves(trained.min)[0].shape[0], valid_g.shape[0]
    shape = (p, n, batch.real.shape[0], pair.latent_dim)
    zg, zd = (jax.random.normal(k, shape) for k in jax.random.split(jax.random.fold_in(batch.z, 1)))
    play = lambda g, d, noise: D.apply(d, G.apply(g, noise))
    lg_tr = jax.vmap(
      lambda g, zs, i: jax.vmap(lambda d, dr, zz: g_loss(dr, play(g, d, zz), i))(
        d_all, batch.d_real, zs
      )
    )(trained.min, zg, gi)  # [P, Nd]
    ld_tr = jax.vmap(
      lambda d, dr, zs, i: jax.vmap(lambda g, zz: d_loss(dr, play(g, d, zz), i))(g_all, zs)
    )(trained.max, d_real_tr, zd, di)  # [P, Ng]
    return Players(aggregate_fitness(lg_tr, valid_d, mode), aggregate_fitness(ld_tr, valid_g, mode))
  fakes_tr = jax.vmap(G.apply, (0, None))(trained.min, batch.z)
  lg_tr = jax.vmap(
    lambda fk, g: jax.vmap(lambda d, dr: g_loss(dr, D.apply(d, fk), g))(d_all, batch.d_real)
  )(fakes_tr, gi)  # [P, Nd]
  ld_tr = jax.vmap(
    lambda d, dr, i: jax.vmap(lambda fk: d_loss(dr, D.apply(d, fk), i))(batch.fakes)
  )(trained.max, d_real_tr, di)  # [P, Ng]
  return Players(aggregate_fitness(lg_tr, valid_d, mode), aggregate_fitness(ld_tr, valid_g, mode))


def tournament_selection(key, fitness, usable, num_winners, config, individuals):
  """The default ``Phases.selection``: :func:`tournament` of ``config.tournament_size``.

  A selection is ``(key, fitness [N], usable [N], num_winners, config,
  individuals [N, ...]) -> indices [num_winners]`` into the pool (``individuals``:
  one side's pool parameters, for selections that look at the genomes)."""
  del individuals
  replace = config.tournament_sampling == "with_replacement"
  return tournament(key, fitness, usable, num_winners, config.tournament_size, replace)


def _by_player(labels: Any, generator: jax.Array, discriminator: jax.Array) -> Any:
  """A tree like ``labels`` holding ``discriminator`` at the max player's leaves and
  ``generator`` at the others (the shared leaves follow the generator)."""
  const = lambda v: jax.tree.map(lambda _: v, labels)
  return merge_by_player(labels, const(generator), const(discriminator), const(generator))


def select_and_mutate(
  keys: tuple[jax.Array, jax.Array, jax.Array],
  fitness: Players,
  usable: Players,
  pool: Pool,
  labels: Any,
  config,
  params: CoevolutionParams,
  selection: Callable = tournament_selection,
) -> tuple[Individuals, Players]:
  """Select ``P`` generators and ``P`` discriminators from the pool and mutate
  their learning rates (``set`` into their scheme states; only with
  ``config.lr_mutation="per_generation"``, the other rules mutate in training).

  Each side keeps its own part of the optimizer state; the shared part (e.g. a
  step count) follows the generator. Without ``config.selection`` the cell's own
  individuals are taken in place; with ``config.generator_selection="lineage"``
  the cell's own generators (the discriminators by ``selection``).

  Args:
    keys: ``(generator selection, discriminator selection, mutation)`` keys.
    fitness, usable: ``Players`` of ``[N]`` (from :func:`fitness`).
    pool: from :func:`pool`.
    labels: ``player_labels`` of one scheme state.
    config: the ``CoevolutionConfig``.
    params: the :class:`CoevolutionParams`.
    selection: see :func:`tournament_selection`.

  Returns:
    ``(selected, index)``: the selected :class:`Individuals` (their fitness the
    pool's) and ``Players`` of pool indices ``[P]``.
  """
  P = config.population_size
  if config.selection:
    idx_g = selection(keys[0], fitness.min, usable.min, P, config, pool.params.min)
    idx_d = selection(keys[1], fitness.max, usable.max, P, config, pool.params.max)
    if config.generator_selection == "lineage":
      idx_g = jnp.arange(P)  # the cell's own generators: no neighbour lineage moves in
  else:
    idx_g = idx_d = jnp.arange(P)
  g_all, d_all = pool.params
  chosen = Players(take(g_all, idx_g), take(d_all, idx_d))
  # one take per leaf, by its player's index (not three whole-tree takes merged)
  opt = jax.tree.map(lambda i, x: take(x, i), _by_player(labels, idx_g, idx_d), pool.opt)

  def mutate(k, lr):
    return mutate_learning_rates(
      k, lr, params.mutation_probability, params.mutation_scale, params.min_learning_rate
    )

  lr_g, lr_d = pool.learning_rates.min[idx_g], pool.learning_rates.max[idx_d]
  if config.lr_mutation == "per_generation":  # else before every update (train's per_update)
    lr_g = mutate(keys[2], lr_g)
    lr_d = mutate(jax.random.fold_in(keys[2], 1), lr_d)
    opt = jax.vmap(set_learning_rates)(opt, lr_g, lr_d)
  fit = Players(fitness.min[idx_g], fitness.max[idx_d])
  by_side = lambda t: None if t is None else Players(t.min[idx_g], t.max[idx_d])
  # Mustangs' losses and the lineage ids go with the chosen individuals.
  li, lineage = by_side(pool.loss_index), by_side(pool.lineage)
  selected = Individuals(
    params=chosen,
    opt=opt,
    learning_rates=Players(lr_g, lr_d),
    fitness=fit,
    loss_index=li,
    lineage=lineage,
  )
  return selected, Players(idx_g, idx_d)


def replace(
  local: Individuals, trained: Individuals, n_replacements: int, selection: bool, labels: Any
) -> tuple[Individuals, Players]:
  """Keep the local individuals except the ``n_replacements`` worst, which the
  best trained ones replace when they are better (:func:`replacement_sources`);
  without ``selection`` (Lipizzaner trains in place) the trained ones are all kept.

  Returns:
    ``(new, sources)``: the new :class:`Individuals` and ``Players`` of ``[P]``
    sources (the trained index that replaced each local slot, or -1).
  """
  P = local.fitness.min.shape[0]
  if selection:
    src_g = replacement_sources(local.fitness.min, trained.fitness.min, n_replacements)
    src_d = replacement_sources(local.fitness.max, trained.fitness.max, n_replacements)
  else:
    src_g = src_d = jnp.arange(P, dtype=jnp.int32)
  pick = lambda src, tr, loc: tree_where(
    (src >= 0).reshape((P,) + (1,) * (jnp.ndim(loc) - 1)), take(tr, jnp.maximum(src, 0)), loc
  )
  src = Players(src_g, src_d)

  def by_side(tr, lo):  # a Players record (None: none): each side's leaves by its sources
    one = lambda s, t, l: jax.tree.map(lambda x, y: pick(s, x, y), t, l)
    return None if lo is None else Players(*map(one, src, tr, lo))

  # Mustangs' loss and the lineage id move with their individual.
  new = Individuals(
    params=by_side(trained.params, local.params),
    opt=jax.tree.map(pick, _by_player(labels, src_g, src_d), trained.opt, local.opt),
    learning_rates=by_side(trained.learning_rates, local.learning_rates),
    fitness=by_side(trained.fitness, local.fitness),
    loss_index=by_side(trained.loss_index, local.loss_index),
    lineage=by_side(trained.lineage, local.lineage),
  )
  return new, src


def mixture_members(
  pool: Pool, fit_g: jax.Array, own_best: Any, mask: jax.Array
) -> tuple[Any, jax.Array]:
  """The mixture's ``M`` generators: the cell's own best (``own_best``, after
  replacement) first, then each neighbour's best by this generation's fitness;
  and which are usable (a distinct member with a finite best fitness)."""
  M = mask.shape[0]
  P = fit_g.shape[0] // M
  per_member = fit_g.reshape(M, P)
  member_gens = take(pool.params.min, jnp.arange(M) * P + jnp.argmin(per_member, axis=1))
  gens = jax.tree.map(lambda nb, own: nb.at[0].set(own), member_gens, own_best)
  usable = mask & jnp.isfinite(jnp.min(per_member, axis=1)).at[0].set(True)
  return gens, usable


def mixture_es(
  keys: tuple[jax.Array, jax.Array],
  generator,
  score: Callable,
  generators: Any,
  usable: jax.Array,
  weights: jax.Array,
  sigma: Any,
  num_samples: int,
  latent_dim: int,
):
  """One (1+1)-ES step of the mixture weights (:func:`mixture_es_step`).

  Args:
    keys: ``(noise key, ES key)``.
    generator: the pair's generator (``apply``).
    score: ``score(samples [M, S, ...], weights [M]) -> scalar``, lower is better.
    generators, usable: from :func:`mixture_members`.
    weights: the cell's current weights ``[M]``.
    sigma: the ES step.
    num_samples, latent_dim: ``S`` latents shared by the ``M`` generators.

  Returns:
    ``(weights, score, accepted)``.
  """
  M = usable.shape[0]
  z = jax.random.normal(keys[0], (num_samples, latent_dim))
  samples = jax.vmap(generator.apply, (0, None))(generators, z)
  samples = jnp.where(usable.reshape((M,) + (1,) * (samples.ndim - 1)), samples, 0.0)
  return mixture_es_step(keys[1], weights, usable, sigma, lambda w: score(samples, w))


def diverged(pool: Pool, population_size: int, new: Individuals, healthy: jax.Array) -> jax.Array:
  """Whether the cell must be repaired: its own individuals arrived non-finite
  (pool slots ``< P``), or the new ones are, or ``healthy`` (e.g. finite training
  losses and mixture score) is False."""
  P = population_size
  own = lambda t: take(t, slice(0, P))
  arrived = (
    jnp.all(pool.valid.min[:P]) & jnp.all(pool.valid.max[:P]) & tree_all_finite(own(pool.opt))
  )
  left = (
    tree_all_finite(new.params.min)
    & tree_all_finite(new.params.max)
    & tree_all_finite(new.opt)
    & healthy
  )
  return ~arrived | ~left


def repair(
  is_diverged: jax.Array,
  new: Individuals,
  pool: Pool,
  fitness: Players,
  fresh: Individuals,
  num_members: int,
) -> Individuals:
  """A diverged cell takes a copy of its best neighbour's individuals (the
  member, other than the cell, with the lowest finite generator fitness; their
  lineage ids too), or ``fresh`` ones when no neighbour is finite (``fresh.lineage``:
  new lineages); a healthy cell keeps ``new``.

  The step calls it under ``lax.cond(is_diverged, ...)`` (a healthy cell keeps ``new``
  without building ``fresh``), so a replacement must keep the same pytree and dtypes."""
  M = num_members
  P = fitness.min.shape[0] // M
  member_fit = jnp.where(jnp.arange(M) == 0, INF, jnp.min(fitness.min.reshape(M, P), axis=1))
  donor = jnp.argmin(member_fit)
  has_donor = jnp.isfinite(member_fit[donor])
  everyone = Individuals(
    params=pool.params,
    opt=pool.opt,
    learning_rates=pool.learning_rates,
    fitness=fitness,
    loss_index=pool.loss_index,
    lineage=pool.lineage,
  )  # the donor's P individuals, every leaf of both sides (None stays None)
  donated = jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, donor * P, P), everyone)
  return tree_where(is_diverged, tree_where(has_donor, donated, fresh), new)


class Phases(NamedTuple):
  """The phase functions a :class:`Coevolution` composes; replace any with
  ``Phases(selection=...)`` or ``Phases()._replace(...)`` (same signature)."""

  fitness: Callable = fitness
  selection: Callable = tournament_selection
  select_and_mutate: Callable = select_and_mutate
  train: Callable = train
  rescore: Callable = rescore
  replace: Callable = replace
  mixture_members: Callable = mixture_members
  mixture_es: Callable = mixture_es
  diverged: Callable = diverged
  repair: Callable = repair
