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
  """``tree`` indexed by ``idx`` along every leaf's leading axis."""
  return jax.tree.map(lambda x: x[idx], tree)


def over_population(size: int):
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


def train_schedule(step_both: Callable, step_g: Callable, carry, xs, d_every: int):
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


def train(spec, per_logit, key, data, params, opt, pools, neighbours, with_neighbours):
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

  Returns:
    ``((params, opt), g_losses [S, P], d_losses [S // d_every, P])``.
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
    return jax.vmap(lambda i: opponent(current, neighbours, i))(idx)

  lipizzaner = c.schedule == "lipizzaner"
  B, L = c.batch_size, pair.latent_dim

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
      return sample_real(data, r[1], B), r[2 + which]
    kk = jax.random.fold_in(r[0], i)
    real = sample_real(data, jax.random.fold_in(kk, 0), B)
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
    u, o = scheme.update(v, o, p, vector_field=lambda q, i: vaf(q, i)[1])
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
    u, o_new = scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
    p = Players(optax.apply_updates(p.min, u.min), p.max)
    return p, merge_by_player(labels, o_new, o, o_new), loss

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
    u, o_new = scheme.update(v, o, p, vector_field=lambda q, i: field(q, i)[1])
    p = Players(p.min, optax.apply_updates(p.max, u.max))
    return p, merge_by_player(labels, o, o_new, o), loss

  def draw(k, pool):
    return jax.random.categorical(k, jnp.where(pool, 0.0, -INF), shape=(P,))

  def step_draws(k):
    # Every random number of one batch: opponents (k_g, k_d) and the pairs' draws (k_b).
    k_g, k_d, k_b = jax.random.split(k, 3)
    pairs = jax.vmap(pair_draws)(jax.random.split(k_b, P))
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
  return train_schedule(step_both, train_g_step, (params, opt), draws, c.d_every)
