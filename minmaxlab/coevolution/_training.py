"""A cell's training phase: ``steps_per_generation`` batches of its selected
pairs, each against opponents drawn from the neighbourhood."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from minmaxlab.coevolution import _lr_mutation as lr_mutation
from minmaxlab.coevolution._fast_matmul import d_logits
from minmaxlab.coevolution._operators import INF
from minmaxlab.coevolution._schedule import train_schedule
from minmaxlab.games import Players, value_and_vector_field
from minmaxlab.transforms import game_step, merge_by_player, tree_where


class CellSpec(NamedTuple):
  """What the phases of one cell need that is fixed for a run (static, closed over).

  Attributes:
    config: the ``CoevolutionConfig``.
    pair: the ``GANPair``.
    scheme: the game transform (with extra-args support).
    labels: ``player_labels`` of one scheme state.
    sample_real: ``sample_real(data, key, n) -> [n, ...]``.
    score_fn: ``score_fn(data, samples [M, S, ...], weights [M]) -> scalar``.
    losses: the loss functions a cell draws from (one, or Mustangs' three).
    init_individual: ``key -> (Players params, scheme state)`` of a fresh pair.
  """

  config: Any
  pair: Any
  scheme: Any
  labels: Any
  sample_real: Callable
  score_fn: Callable
  losses: tuple
  init_individual: Callable


def take(tree: Any, idx: Any) -> Any:
  """``tree`` indexed by ``idx`` along every leaf's leading axis.

  ``idx``: a slice or a tuple (as ``x[idx]``), or an integer index or array of indices
  into the leading axis, in bounds (no negative ones): then one ``dynamic_slice`` (a
  scalar) or ``gather`` per leaf, without the index normalisation of ``x[idx]`` (its
  compare, add and select per leaf are a good part of what the coevolution step's many
  takes trace and lower)."""
  if isinstance(idx, slice | tuple):
    return jax.tree.map(lambda x: x[idx], tree)
  idx = jnp.asarray(idx)
  if idx.ndim == 0:
    return jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, idx, 0, keepdims=False), tree)
  return jax.tree.map(lambda x: jnp.take(x, idx, axis=0, mode="clip"), tree)


def over_population(size: int):
  """``f -> f`` batched over a leading population axis of ``size``: ``jax.vmap``, or for
  one individual ``f`` itself: :func:`train` then carries the individual without the
  axis (vmap over a size-1 axis makes XLA transpose weight gradients inside the optimizer
  loops, and a carry of ``[1, ...]`` arrays squeezed and expanded on every step made it
  copy every weight matrix once or twice per batch)."""
  return jax.vmap if size > 1 else (lambda f: f)


def indexed_loss(losses: tuple, g_index: Any, d_index: Any) -> Callable:
  """``(real, fake) -> (loss_min, loss_max)``: the generator's part of
  ``losses[g_index]`` and the discriminator's part of ``losses[d_index]`` (traced
  indices; Mustangs' per-individual losses)."""
  side = lambda j: [lambda r, f, fn=fn: fn(r, f)[j] for fn in losses]
  g_side, d_side = side(0), side(1)
  return lambda r, f: (
    jax.lax.switch(g_index, g_side, r, f),
    jax.lax.switch(d_index, d_side, r, f),
  )


class PairDraws(NamedTuple):
  """A pair's randomness of one batch, drawn for all batches at once before the loop (the
  same numbers as drawing it inside: ``jax.random`` is elementwise under vmap)."""

  key: jax.Array  # the pair's batch key: evaluations after the first draw from it
  real_key: jax.Array  # the real batch of evaluation 0
  z: jax.Array  # the noise of the simultaneous (or the generator's) step
  z_fresh: Any  # the discriminator's fresh noise (Lipizzaner's schedule), else None
  g_index: Any  # the generator's loss index (Mustangs), else None
  d_index: Any  # the discriminator's loss index (Mustangs), else None


class StepDraws(NamedTuple):
  """Every random number of one batch: the opponents' indices ``[P]`` into the pools (the
  generators the discriminators play, the discriminators the generators play) and every
  pair's :class:`PairDraws`."""

  generators: jax.Array
  discriminators: jax.Array
  pairs: PairDraws


class _Trainer(NamedTuple):
  """What every step of :func:`train` closes over (fixed for one cell's training)."""

  spec: CellSpec
  per_logit: Callable
  data: Any
  pools: tuple  # (pool_g, pool_d), see train
  neighbours: tuple  # (g_nbrs, d_nbrs), see train
  with_neighbours: bool
  always: bool  # Mustangs "always": the generator's loss index drawn for every batch
  batched: Callable  # over_population(P)


def train(
  spec,
  per_logit,
  key,
  data,
  params,
  opt,
  pools,
  neighbours,
  with_neighbours,
  loss_index=None,
  per_update=None,
):
  """``steps_per_generation`` training batches of one cell's ``P`` selected pairs.

  Args:
    spec: the cell's :class:`CellSpec` (config, pair, scheme, labels, sample_real).
    per_logit: ``(real_logits, fake_logits) -> (loss_min, loss_max)``.
    key: the cell's training key (one key per batch is split from it).
    data: the data set for ``spec.sample_real``.
    params, opt: ``Players`` and scheme states with a leading ``[P]`` axis.
    pools: ``(pool_g, pool_d)`` boolean ``[M * P]``: opponents that may be drawn
      (slots ``< P`` are the cell's own selected individuals).
    neighbours: ``(g_nbrs, d_nbrs)``, the neighbours' individuals ``[M * P - P, ...]``.
    with_neighbours: static; False when every opponent is the cell's own.
    loss_index: ``None``, or Mustangs' ``Players`` of ``[P]`` indices into
      ``spec.losses``: each pair's generator trains on the generator part of its
      loss, its discriminator on the discriminator part of its own (``per_logit``
      is then unused). With ``config.mustangs_mode="always"`` the generator's index
      is drawn anew for every batch from the pair's batch key instead.

    per_update: ``None``, or a ``minmaxlab.coevolution._lr_mutation.PerUpdate``: before
      every update of a player its tracked learning rate is mutated as Lipizzaner does
      (``CoevolutionConfig.lr_mutation``), and the carry holds the tracked ones.

  With ``config.loss="wgan"`` every discriminator update is followed by clipping
  its weights to ``[-config.wgan_clip, config.wgan_clip]``.

  Returns:
    ``((params, opt), g_losses, d_losses)``: ``[S, P]`` and ``[S // d_every, P]``, or
    ``[S // n_critic, P]`` and ``[S, P]``; with ``per_update`` the first item is
    ``(params, opt, learning_rates)``, the tracked learning rates after the phase.
  """
  c = spec.config
  always = loss_index is not None and c.mustangs_mode == "always"
  t = _Trainer(
    spec=spec,
    per_logit=per_logit,
    data=data,
    pools=pools,
    neighbours=neighbours,
    with_neighbours=with_neighbours,
    always=always,
    batched=over_population(c.population_size),
  )
  indices = (None, None) if loss_index is None else tuple(loss_index)
  draws = jax.vmap(lambda k: _step_draws(t, indices, k))(
    jax.random.split(key, c.steps_per_generation)
  )
  if c.schedule == "reference":  # one opponent per batch and side for the whole population
    one = lambda i: jnp.broadcast_to(i[:, :1], i.shape)
    draws = draws._replace(
      generators=one(draws.generators), discriminators=one(draws.discriminators)
    )
  return _train_on(t, draws, params, opt, per_update)


def train_on_draws(
  spec, per_logit, data, params, opt, pools, neighbours, with_neighbours, draws, per_update=None
):
  """:func:`train` on given draws: ``draws`` is a :class:`StepDraws` with a leading axis of
  ``steps_per_generation`` batches (the pairs' draws ``[S, P, ...]``), e.g. another
  system's recorded random numbers (the parity tests feed Lipizzaner's). The other
  arguments and the result are :func:`train`'s (no Mustangs ``always``)."""
  P = spec.config.population_size
  t = _Trainer(
    spec=spec,
    per_logit=per_logit,
    data=data,
    pools=pools,
    neighbours=neighbours,
    with_neighbours=with_neighbours,
    always=False,
    batched=over_population(P),
  )
  return _train_on(t, draws, params, opt, per_update)


def _train_on(t: _Trainer, draws: StepDraws, params, opt, per_update):
  c = t.spec.config
  P = c.population_size
  step_both = _train_step if c.schedule == "simultaneous" else _lipizzaner_step
  steps = (
    functools.partial(step_both, t),
    functools.partial(_train_g_step, t),
    functools.partial(_train_d_step, t),
  )
  carry = (params, opt)
  if per_update is not None:  # Lipizzaner's mutation before every update of a player
    sides = (("min", "max"), ("min",), ("max",))
    steps = tuple(lr_mutation.wrap(f, s, per_update, t.batched) for f, s in zip(steps, sides))
    carry = (carry, per_update.learning_rates)
  if P == 1:
    # One individual: the loop carries it without the population axis (no per-step squeeze
    # and expand of every weight), the pair's draws likewise; the opponents' indices keep
    # theirs (``_opponents``). The same operations on the same values as a squeeze per step.
    carry = jax.tree.map(lambda x: x[0], carry)
    draws = draws._replace(pairs=jax.tree.map(lambda x: x[:, 0], draws.pairs))
  carry, g_losses, d_losses = train_schedule(
    steps[0], steps[1], carry, draws, c.d_every, c.n_critic, steps[2], c.d_phase
  )
  if P == 1:
    carry = jax.tree.map(lambda x: x[None], carry)
    g_losses, d_losses = g_losses[:, None], d_losses[:, None]
  if per_update is not None:
    (params, opt), lr = carry
    carry = (params, opt, lr)
  return carry, g_losses, d_losses


# ---------------------------------------------------------------- random draws
def _pair_draws(t: _Trainer, k, g_index, d_index) -> PairDraws:
  """One pair's :class:`PairDraws` for the batch key ``k``. Mustangs ``always``: the
  generator's index is ``randint(fold_in(fold_in(k, 0), 3), (), 0, len(losses))``."""
  c, spec = t.spec.config, t.spec
  B, L = c.batch_size, spec.pair.latent_dim
  kk = jax.random.fold_in(k, 0)
  z = lambda which: jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))
  if t.always:
    g_index = jax.random.randint(jax.random.fold_in(kk, 3), (), 0, len(spec.losses))
  real_key, z0 = jax.random.fold_in(kk, 0), z(0)
  z_fresh = None if c.schedule == "simultaneous" else z(1)
  return PairDraws(
    key=k, real_key=real_key, z=z0, z_fresh=z_fresh, g_index=g_index, d_index=d_index
  )


def _draw(P, k, pool):
  return jax.random.categorical(k, jnp.where(pool, 0.0, -INF), shape=(P,))


def _step_draws(t: _Trainer, indices, k) -> StepDraws:
  # Every random number of one batch: opponents (k_g, k_d) and the pairs' draws (k_b).
  P = t.spec.config.population_size
  pool_g, pool_d = t.pools
  k_g, k_d, k_b = jax.random.split(k, 3)
  pairs = jax.vmap(lambda kp, gi, di: _pair_draws(t, kp, gi, di))(
    jax.random.split(k_b, P), *indices
  )
  return StepDraws(
    generators=_draw(P, k_g, pool_g), discriminators=_draw(P, k_d, pool_d), pairs=pairs
  )


# ------------------------------------------------------------------- opponents
def _opponent(P, M, current, neighbours, i):
  mine = take(current, jnp.minimum(i, P - 1))
  theirs = take(neighbours, jnp.clip(i - P, 0, M * P - P - 1))
  return tree_where(i < P, mine, theirs)


def _opponents(t: _Trainer, current, neighbours, idx):
  """The opponents of index ``idx`` (``< P`` the cell's own, then the neighbours')."""
  P, M = t.spec.config.population_size, t.spec.config.num_members
  # Statically known cases skip the per-step gather and select (a copy of a whole
  # network per step, about 10% of an MNIST-MLP step on CPU).
  if not t.with_neighbours:
    return current if P == 1 else take(current, idx)
  if P == 1:  # the one individual is carried without its population axis
    lead = jax.tree.map(lambda x: x[None], current)
    return take(jax.vmap(lambda i: _opponent(P, M, lead, neighbours, i))(idx), 0)
  return jax.vmap(lambda i: _opponent(P, M, current, neighbours, i))(idx)


# ------------------------------------------------------------ one pair's step
def _clipped(t: _Trainer, p):
  c = t.spec.config
  clip = c.wgan_clip if c.loss == "wgan" else None
  if clip is None:
    return p
  return Players(p.min, jax.tree.map(lambda w: jnp.clip(w, -clip, clip), p.max))


def _loss_of(t: _Trainer, r: PairDraws):
  return t.per_logit if r.g_index is None else indexed_loss(t.spec.losses, r.g_index, r.d_index)


def _batch(t: _Trainer, r: PairDraws, i, which):
  """The real batch of evaluation ``i`` of a pair's step and its noise ``which`` (0: the
  simultaneous step's and the generator's, 1: the discriminator's fresh fakes). Only
  evaluation 0 is pre-drawn; schemes that evaluate again (extragradient, alternating)
  draw theirs from the pair's key."""
  B, L = t.spec.config.batch_size, t.spec.pair.latent_dim
  if isinstance(i, int) and i == 0:
    return t.spec.sample_real(t.data, r.real_key, B), (r.z, r.z_fresh)[which]
  kk = jax.random.fold_in(r.key, i)
  real = t.spec.sample_real(t.data, jax.random.fold_in(kk, 0), B)
  return real, jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))


def _train_pair(t: _Trainer, p, o, opp_g, opp_d, r: PairDraws):
  """Both players' simultaneous step (the scheme's own order inside)."""
  G, D = t.spec.pair.generator, t.spec.pair.discriminator
  per_logit = _loss_of(t, r)

  def loss_fn(q, i):
    real, z = _batch(t, r, i, 0)
    own_fake, opp_fake = G.apply(q.min, z), G.apply(opp_g, z)
    loss_min = per_logit(D.apply(opp_d, real), D.apply(opp_d, own_fake))[0]
    loss_max = per_logit(*d_logits(t.spec.config, D, q.max, real, opp_fake))[1]
    return loss_min, loss_max

  p, o, losses = game_step(t.spec.scheme, value_and_vector_field(loss_fn), p, o)
  return _clipped(t, p), o, jnp.stack(losses)


def _train_g_pair(t: _Trainer, p, o, opp_d, r: PairDraws):
  # The generator's step alone (game_step's player="min"): only its own field is
  # computed; the discriminator's params and MAX-labelled state come back as they were
  # (XLA drops the scheme's part for them), the shared state (e.g. Lookahead's step
  # count) advances.
  G, D = t.spec.pair.generator, t.spec.pair.discriminator
  per_logit = _loss_of(t, r)

  def field(q, i):
    real, z = _batch(t, r, i, 0)
    loss_g = lambda g: per_logit(D.apply(opp_d, real), D.apply(opp_d, G.apply(g, z)))[0]
    loss, grad = jax.value_and_grad(loss_g)(q.min)
    return loss, Players(grad, jax.tree.map(jnp.zeros_like, q.max))

  return game_step(t.spec.scheme, field, p, o, player="min")


def _train_d_pair(t: _Trainer, p, o, opp_g, r: PairDraws, which=1):
  # The discriminator's step alone (game_step's player="max"), on the batch's real
  # samples and fakes of ``opp_g`` (the generator as it is now) from noise ``which`` (1:
  # fresh, Lipizzaner's schedule; 0: the batch's own, a critic-only batch); the shared
  # state is left as it came in.
  G, D = t.spec.pair.generator, t.spec.pair.discriminator
  per_logit = _loss_of(t, r)

  def field(q, i):
    real, z = _batch(t, r, i, which)
    fake = G.apply(opp_g, z)
    loss_d = lambda d: per_logit(*d_logits(t.spec.config, D, d, real, fake))[1]
    loss, grad = jax.value_and_grad(loss_d)(q.max)
    return loss, Players(jax.tree.map(jnp.zeros_like, q.min), grad)

  p, o_new, loss = game_step(t.spec.scheme, field, p, o, player="max")
  return _clipped(t, p), merge_by_player(t.spec.labels, o, o_new, o), loss


# ------------------------------------------------------- one batch of the cell
def _train_step(t: _Trainer, carry, x: StepDraws):
  (p, o), g_nbrs, d_nbrs = carry, *t.neighbours
  opp_g = _opponents(t, p.min, g_nbrs, x.generators)
  opp_d = _opponents(t, p.max, d_nbrs, x.discriminators)
  train_pair = functools.partial(_train_pair, t)
  p, o, losses = t.batched(train_pair)(p, o, opp_g, opp_d, x.pairs)
  return (p, o), losses


def _train_g_step(t: _Trainer, carry, x: StepDraws):
  p, o = carry
  opp_d = _opponents(t, p.max, t.neighbours[1], x.discriminators)
  p, o, loss = t.batched(functools.partial(_train_g_pair, t))(p, o, opp_d, x.pairs)
  return (p, o), loss


def _train_d_step(t: _Trainer, carry, x: StepDraws):
  # A critic-only batch (n_critic > 1): the discriminators against the generator
  # drawn for the batch, on the batch's own noise.
  p, o = carry
  opp_g = _opponents(t, p.min, t.neighbours[0], x.generators)
  train_d = lambda *a: _train_d_pair(t, *a, which=0)
  p, o, loss = t.batched(train_d)(p, o, opp_g, x.pairs)
  return (p, o), loss


def _lipizzaner_step(t: _Trainer, carry, x: StepDraws):
  # Generator first, then the discriminator against the updated generator. The
  # discriminator's update sees the shared state of before the generator's, so a
  # shared counter counts batches and both players sync on the same batch.
  labels = t.spec.labels
  p, o0 = carry
  (p, o1), g_loss = _train_g_step(t, (p, o0), x)
  opp_g = _opponents(t, p.min, t.neighbours[0], x.generators)
  o_in = merge_by_player(labels, o1, o1, o0)
  p, o2, d_loss = t.batched(functools.partial(_train_d_pair, t))(p, o_in, opp_g, x.pairs)
  return (p, merge_by_player(labels, o2, o2, o1)), jnp.stack([g_loss, d_loss], -1)
