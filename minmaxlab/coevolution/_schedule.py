"""The order of a cell's training steps over one generation's batches (which batches
update the generators, the discriminators, or both)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def train_schedule(
  step_both: Callable,
  step_g: Callable,
  carry,
  xs,
  d_every: int,
  n_critic: int = 1,
  step_d: Callable | None = None,
  d_phase: str = "last",
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
    d_phase: ``"last"`` (above) or ``"first"``: the group's first batch takes ``step_both``
      and the other ``k - 1`` the single step, so batch ``i`` updates both when
      ``i % k == 0`` (Lipizzaner's ``batch_number % (skip + 1) == 0``), a partial group
      too (its first batch updates both).

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

  if d_phase == "first":
    return _schedule_first(step_both, one, side, carry, xs, k)

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


def _schedule_first(step_both, one, side, carry, xs, k):
  # train_schedule with d_phase="first": both players on batches 0, k, 2k, ... (a
  # partial group's first batch too), the single step on the others.
  steps = jax.tree.leaves(xs)[0].shape[0]
  n = -(-steps // k)  # groups, the last one possibly partial
  head = lambda t, j: jax.tree.map(lambda x: x[j], t)

  def group(carry, xg):
    carry, both = step_both(carry, head(xg, 0))
    carry, single = jax.lax.scan(one, carry, head(xg, slice(1, None)))
    return carry, (jnp.concatenate([both[None, ..., side], single]), both[..., 1 - side])

  full = steps // k
  grouped = jax.tree.map(lambda x: x[: full * k].reshape((full, k) + x.shape[1:]), xs)
  carry, (every, sparse) = jax.lax.scan(group, carry, grouped)
  every = every.reshape((full * k,) + every.shape[2:])
  if n != full:  # a partial group: its first batch updates both
    rest = head(xs, slice(full * k, None))
    carry, both = step_both(carry, head(rest, 0))
    every = jnp.concatenate([every, both[None, ..., side]])
    sparse = jnp.concatenate([sparse, both[None, ..., 1 - side]])
    if steps - full * k > 1:
      carry, more = jax.lax.scan(one, carry, head(rest, slice(1, None)))
      every = jnp.concatenate([every, more])
  return (carry, every, sparse) if side == 0 else (carry, sparse, every)
