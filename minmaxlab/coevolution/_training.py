"""A cell's training phase: ``steps_per_generation`` batches of its selected
pairs, each against opponents drawn from the neighbourhood."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from minmaxlab.coevolution._operators import INF
from minmaxlab.games import Players, value_and_vector_field
from minmaxlab.transforms import merge_by_player, tree_where


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


def train_schedule(
  step_both: Callable,
  step_g: Callable,
  carry,
  xs,
  d_every: int,
  n_critic: int = 1,
  step_d: Callable | None = None,
):
  """Scan ``xs`` (a pytree with one leading entry per batch) in groups of ``k`` batches.

  With ``d_every = k > 1`` the first ``k - 1`` batches of a group take ``step_g``
  (generators only) and the last ``step_both``; with ``n_critic = k > 1`` the first
  ``k - 1`` take ``step_d`` (discriminators only) and the last ``step_both``. So batch
  ``i`` updates both when ``(i + 1) % k == 0``. A scan over groups, so a skipped step of
  one player costs nothing, also under ``vmap``; leftover batches of a partial group are
  ``step_g`` (``d_every``) or ``step_d`` (``n_critic``) steps.

  Args:
    step_both: ``(carry, x) -> (carry, losses [..., 2])`` (generator, discriminator).
    step_g: ``(carry, x) -> (carry, generator loss [...])``.
    carry: the training state.
    xs: ``[S, ...]`` per-batch inputs (keys, pre-drawn random numbers).
    d_every: static ``>= 1``.
    n_critic: static ``>= 1`` (at most one of ``d_every``, ``n_critic`` above 1).
    step_d: ``(carry, x) -> (carry, discriminator loss [...])``; needed with ``n_critic > 1``.

  Returns:
    ``(carry, g_losses, d_losses)`` in batch order: ``[S]`` and ``[S // d_every]``, or
    ``[S // n_critic]`` and ``[S]``.
  """
  if d_every > 1 and n_critic > 1:
    raise ValueError(f"d_every ({d_every}) and n_critic ({n_critic}) cannot both exceed 1")
  if d_every == 1 and n_critic == 1:
    carry, losses = jax.lax.scan(step_both, carry, xs)
    return carry, losses[..., 0], losses[..., 1]
  k, one, side = (d_every, step_g, 0) if d_every > 1 else (n_critic, step_d, 1)
  steps = jax.tree.leaves(xs)[0].shape[0]
  n = steps // k
  head = lambda t, j: jax.tree.map(lambda x: x[j], t)

  def group(carry, xg):
    carry, single = jax.lax.scan(one, carry, head(xg, slice(None, -1)))
    carry, both = step_both(carry, head(xg, -1))
    return carry, (jnp.concatenate([single, both[None, ..., side]]), both[..., 1 - side])

  grouped = jax.tree.map(lambda x: x[: n * k].reshape((n, k) + x.shape[1:]), xs)
  carry, (every, sparse) = jax.lax.scan(group, carry, grouped)
  every = every.reshape((n * k,) + every.shape[2:])
  if steps != n * k:  # a partial group (else no third trace of the single step)
    carry, rest = jax.lax.scan(one, carry, head(xs, slice(n * k, None)))
    every = jnp.concatenate([every, rest])
  return (carry, every, sparse) if side == 0 else (carry, sparse, every)


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


def train(
  spec, per_logit, key, data, params, opt, pools, neighbours, with_neighbours, loss_index=None
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

  With ``config.loss="wgan"`` every discriminator update is followed by clipping
  its weights to ``[-config.wgan_clip, config.wgan_clip]``.

  Returns:
    ``((params, opt), g_losses, d_losses)``: ``[S, P]`` and ``[S // d_every, P]``, or
    ``[S // n_critic, P]`` and ``[S, P]``.
  """
  c, pair, scheme = spec.config, spec.pair, spec.scheme
  labels, sample_real = spec.labels, spec.sample_real
  G, D = pair.generator, pair.discriminator
  P, M = c.population_size, c.num_members
  pool_g, pool_d = pools
  g_nbrs, d_nbrs = neighbours
  batched = over_population(P)

  def opponent(current, neighbours, i):
    mine = take(current, jnp.minimum(i, P - 1))
    theirs = take(neighbours, jnp.clip(i - P, 0, M * P - P - 1))
    return tree_where(i < P, mine, theirs)

  def opponents(current, neighbours, idx):
    # Statically known cases skip the per-step gather and select (a copy of a whole
    # network per step, about 10% of an MNIST-MLP step on CPU).
    if not with_neighbours:
      return current if P == 1 else take(current, idx)
    if P == 1:  # the one individual is carried without its population axis
      lead = jax.tree.map(lambda x: x[None], current)
      return take(jax.vmap(lambda i: opponent(lead, neighbours, i))(idx), 0)
    return jax.vmap(lambda i: opponent(current, neighbours, i))(idx)

  lipizzaner = c.schedule == "lipizzaner"
  B, L = c.batch_size, pair.latent_dim
  clip = c.wgan_clip if c.loss == "wgan" else None
  always = loss_index is not None and c.mustangs_mode == "always"

  def clipped(p):
    if clip is None:
      return p
    return Players(p.min, jax.tree.map(lambda w: jnp.clip(w, -clip, clip), p.max))

  def pair_draws(k, g_index, d_index):
    """A pair's randomness of one batch, drawn for all batches at once before the loop
    (the same numbers as drawing it inside: ``jax.random`` is elementwise under vmap):
    ``(key, real-batch key, noise of the simultaneous/generator step, the
    discriminator's fresh noise (Lipizzaner's schedule) or None, the generator's and
    the discriminator's loss indices (Mustangs) or None)``. Mustangs ``always``: the
    generator's index is ``randint(fold_in(fold_in(k, 0), 3), (), 0, len(losses))``."""
    kk = jax.random.fold_in(k, 0)
    z = lambda which: jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))
    if always:
      g_index = jax.random.randint(jax.random.fold_in(kk, 3), (), 0, len(spec.losses))
    return k, jax.random.fold_in(kk, 0), z(0), z(1) if lipizzaner else None, g_index, d_index

  def loss_of(r):
    return per_logit if r[4] is None else indexed_loss(spec.losses, r[4], r[5])

  def batch(r, i, which):
    """The real batch of evaluation ``i`` of a pair's step and its noise ``which`` (0: the
    simultaneous step's and the generator's, 1: the discriminator's fresh fakes). Only
    evaluation 0 is pre-drawn; schemes that evaluate again (extragradient, alternating)
    draw theirs from the pair's key."""
    if isinstance(i, int) and i == 0:
      return sample_real(data, r[1], B), r[2 + which]
    kk = jax.random.fold_in(r[0], i)
    real = sample_real(data, jax.random.fold_in(kk, 0), B)
    return real, jax.random.normal(jax.random.fold_in(kk, 1 + which), (B, L))

  def train_pair(p, o, opp_g, opp_d, r):
    per_logit = loss_of(r)

    def loss_fn(q, i):
      real, z = batch(r, i, 0)
      own_fake, opp_fake = G.apply(q.min, z), G.apply(opp_g, z)
      loss_min = per_logit(D.apply(opp_d, real), D.apply(opp_d, own_fake))[0]
      loss_max = per_logit(D.apply(q.max, real), D.apply(q.max, opp_fake))[1]
      return loss_min, loss_max

    vaf = value_and_vector_field(loss_fn)
    losses, v = vaf(p, 0)
    u, o = scheme.update(v, o, p, vector_field=lambda q, i: vaf(q, i)[1])
    return clipped(optax.apply_updates(p, u)), o, jnp.stack(losses)

  def train_g_pair(p, o, opp_d, r):
    # The generator's step alone: only its own field is computed; the scheme's
    # discriminator part (params and MAX-labelled state) is discarded, so XLA
    # drops it, and the shared state (e.g. Lookahead's step count) advances.
    per_logit = loss_of(r)

    def field(q, i):
      real, z = batch(r, i, 0)
      loss_g = lambda g: per_logit(D.apply(opp_d, real), D.apply(opp_d, G.apply(g, z)))[0]
      loss, grad = jax.value_and_grad(loss_g)(q.min)
      return loss, Players(grad, jax.tree.map(jnp.zeros_like, q.max))

    loss, v = field(p, 0)
    u, o_new = scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
    p = Players(optax.apply_updates(p.min, u.min), p.max)
    return p, merge_by_player(labels, o_new, o, o_new), loss

  def train_d_pair(p, o, opp_g, r, which=1):
    # The discriminator's step alone, on the batch's real samples and fakes of ``opp_g``
    # (the generator as it is now) from noise ``which`` (1: fresh, Lipizzaner's schedule;
    # 0: the batch's own, a critic-only batch); the shared state is left as it came in.
    per_logit = loss_of(r)

    def field(q, i):
      real, z = batch(r, i, which)
      fake = G.apply(opp_g, z)
      loss_d = lambda d: per_logit(D.apply(d, real), D.apply(d, fake))[1]
      loss, grad = jax.value_and_grad(loss_d)(q.max)
      return loss, Players(jax.tree.map(jnp.zeros_like, q.min), grad)

    loss, v = field(p, 0)
    u, o_new = scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
    p = clipped(Players(p.min, optax.apply_updates(p.max, u.max)))
    return p, merge_by_player(labels, o, o_new, o), loss

  def draw(k, pool):
    return jax.random.categorical(k, jnp.where(pool, 0.0, -INF), shape=(P,))

  indices = (None, None) if loss_index is None else tuple(loss_index)

  def step_draws(k):
    # Every random number of one batch: opponents (k_g, k_d) and the pairs' draws (k_b).
    k_g, k_d, k_b = jax.random.split(k, 3)
    pairs = jax.vmap(pair_draws)(jax.random.split(k_b, P), *indices)
    return draw(k_g, pool_g), draw(k_d, pool_d), pairs

  def train_step(carry, x):
    (p, o), (opp_gi, opp_di, pairs) = carry, x
    opp_g = opponents(p.min, g_nbrs, opp_gi)
    opp_d = opponents(p.max, d_nbrs, opp_di)
    p, o, losses = batched(train_pair)(p, o, opp_g, opp_d, pairs)
    return (p, o), losses

  def train_g_step(carry, x):
    (p, o), (_, opp_di, pairs) = carry, x
    opp_d = opponents(p.max, d_nbrs, opp_di)
    p, o, loss = batched(train_g_pair)(p, o, opp_d, pairs)
    return (p, o), loss

  def train_d_step(carry, x):
    # A critic-only batch (n_critic > 1): the discriminators against the generator
    # drawn for the batch, on the batch's own noise.
    (p, o), (opp_gi, _, pairs) = carry, x
    opp_g = opponents(p.min, g_nbrs, opp_gi)
    p, o, loss = batched(lambda *a: train_d_pair(*a, which=0))(p, o, opp_g, pairs)
    return (p, o), loss

  def lipizzaner_step(carry, x):
    # Generator first, then the discriminator against the updated generator. The
    # discriminator's update sees the shared state of before the generator's, so a
    # shared counter counts batches and both players sync on the same batch.
    (p, o0), (opp_gi, _, pairs) = carry, x
    (p, o1), g_loss = train_g_step((p, o0), x)
    opp_g = opponents(p.min, g_nbrs, opp_gi)
    o_in = merge_by_player(labels, o1, o1, o0)
    p, o2, d_loss = batched(train_d_pair)(p, o_in, opp_g, pairs)
    return (p, merge_by_player(labels, o2, o2, o1)), jnp.stack([g_loss, d_loss], -1)

  step_both = lipizzaner_step if lipizzaner else train_step
  draws = jax.vmap(step_draws)(jax.random.split(key, c.steps_per_generation))
  carry = (params, opt)
  if P == 1:
    # One individual: the loop carries it without the population axis (no per-step squeeze
    # and expand of every weight), the pair's draws likewise; the opponents' indices keep
    # theirs (``opponents``). The same operations on the same values as a squeeze per step.
    carry = jax.tree.map(lambda x: x[0], carry)
    draws = (draws[0], draws[1], jax.tree.map(lambda x: x[:, 0], draws[2]))
  carry, g_losses, d_losses = train_schedule(
    step_both, train_g_step, carry, draws, c.d_every, c.n_critic, train_d_step
  )
  if P == 1:
    carry = jax.tree.map(lambda x: x[None], carry)
    g_losses, d_losses = g_losses[:, None], d_losses[:, None]
  return carry, g_losses, d_losses
