"""The learning-rate mutation rules (``CoevolutionConfig.lr_mutation``) against a hand-written
loop over two generations of a 1x2 grid (issue 33).

A pair whose gradients are constants: ``G(b, z) = (b, 0)``, ``D(w, x) = x_0 + (1 - x_1) w``
and real samples ``(0, 1)``, so with the Wasserstein loss the generator's gradient is -1 and
the discriminator's +1 whatever the opponent. Adam's bias-corrected step on a constant
gradient ``g`` is ``lr * g / (|g| + eps)``, so after the updates ``b`` is the sum of the
learning rates the generator's updates used and ``-w`` the discriminator's. The loop draws the
same numbers from the same keys (the key paths documented in ``_lr_mutation`` and
``_cell.cell_keys``) and compares the tracked learning rates and both parameters. The
schedule is the reference's: generator then discriminator, the discriminator on every second
batch (``d_every=2``), selection off.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import coevolution as co
from minmaxlab import distributed

LR0, ALPHA, P_MUT, STEPS = 0.1, 0.5, 0.5, 4
G = SimpleNamespace(
  init=lambda k: {"b": jnp.zeros(1)},
  apply=lambda p, z: jnp.stack([p["b"][0] + 0 * z[:, 0], jnp.zeros(z.shape[0])], -1),
)
D = SimpleNamespace(
  init=lambda k: {"w": jnp.zeros(1)},
  apply=lambda p, x: x[:, 0] + (1 - x[:, 1]) * p["w"][0],
)
PAIR = SimpleNamespace(generator=G, discriminator=D, latent_dim=1)
REAL = jnp.array([0.0, 1.0])


def _coevolution(rule: str) -> co.Coevolution:
  config = co.CoevolutionConfig(
    rows=1,
    cols=2,
    selection=False,
    loss="wgan",
    wgan_clip=1e6,
    learning_rate=LR0,
    lr_mutation=rule,
    mutation_probability=P_MUT,
    mutation_scale=ALPHA,
    min_learning_rate=1e-3,
    batch_size=2,
    steps_per_generation=STEPS,
    d_every=2,
    schedule="lipizzaner",
    fitness_samples=2,
    mixture_samples=2,
  )
  return co.Coevolution(
    config,
    PAIR,
    sample_real=lambda data, key, n: jnp.broadcast_to(REAL, (n, 2)),
    score_fn=lambda data, samples, w: jnp.sum(w) * 0.0,
    scheme=co.default_scheme(LR0, lookahead=False),
  )


@jax.jit
def _draws(step_key, cell):
  """Every random number one cell's generation draws for its learning rates, by the documented
  key paths: ``per_generation``'s (hit, N(0, 1)) for G and D from slot 5 of the cell's keys,
  and for each batch the reference rule's (uniform, N(0, 1)) for G (salt 4) and D (salt 5) from
  the pair key ``split(split(batch key, 3)[2], P=1)[0]`` (batch keys: ``split(slot 6, S)``)."""
  slots = jax.random.split(jax.random.fold_in(step_key, cell), 9)

  def per_generation(k):
    k1, k2 = jax.random.split(k)
    return jax.random.bernoulli(k1, P_MUT, (1,))[0], jax.random.normal(k2, (1,))[0]

  gen = [per_generation(slots[5]), per_generation(jax.random.fold_in(slots[5], 1))]

  def per_batch(k):
    pair = jax.random.split(jax.random.split(k, 3)[2], 1)[0]
    out = []
    for salt in (4, 5):
      k_hit, k_step = jax.random.split(jax.random.fold_in(jax.random.fold_in(pair, 0), salt))
      out.append((jax.random.uniform(k_hit, ()), jax.random.normal(k_step, ())))
    return out

  return gen, jax.vmap(per_batch)(jax.random.split(slots[6], STEPS))


def _by_hand(rule: str, step_keys) -> dict:
  """Two generations of both cells as plain Python: tracked and used learning rates, ``b``
  and ``w`` per cell."""
  out = {}
  for cell in range(2):
    lr = {"min": LR0, "max": LR0}
    first = {"min": None, "max": None}  # the lr of each player's first update
    params = {"min": 0.0, "max": 0.0}
    for key in step_keys:
      gen, batches = jax.tree.map(np.asarray, _draws(key, cell))
      if rule == "per_generation":  # lr + alpha N(0, 1) w.p. p, at least min_learning_rate
        for side, (hit, n) in zip(("min", "max"), gen):
          lr[side] = max(1e-3, lr[side] + ALPHA * float(n)) if hit else lr[side]
      for i in range(STEPS):
        sides = ("min", "max") if (i + 1) % 2 == 0 else ("min",)
        for side in sides:
          u, n = batches[0 if side == "min" else 1]
          if rule != "per_generation" and u[i] < P_MUT:  # max(0, lr + alpha N(-lr0/10, lr0))
            lr[side] = max(0.0, lr[side] + ALPHA * (-LR0 / 10 + LR0 * float(n[i])))
          used = lr[side]
          if rule == "reference_as_run":
            first[side] = used if first[side] is None else first[side]
            used = first[side]
          params[side] += used  # Adam's step on a constant gradient of size 1
    out[cell] = {"lr": lr, "b": params["min"], "w": -params["max"]}
  return out


@pytest.mark.parametrize("rule", ["per_generation", "reference", "reference_as_run"])
def test_learning_rates_and_updates_match_a_hand_written_loop(rule):
  coev = _coevolution(rule)
  step = jax.jit(coev.step, compiler_options=distributed.compiler_options("fastest"))
  state = jax.jit(coev.init)(jax.random.key(0))
  step_keys = [jax.random.key(10), jax.random.key(11)]
  for key in step_keys:
    state, _ = step(key, state, None)
  want = _by_hand(rule, step_keys)
  for cell in range(2):
    got_lr = (state.learning_rates.min[0, cell, 0], state.learning_rates.max[0, cell, 0])
    np.testing.assert_allclose(got_lr, (want[cell]["lr"]["min"], want[cell]["lr"]["max"]), 1e-6)
    got = (state.params.min["b"][0, cell, 0, 0], state.params.max["w"][0, cell, 0, 0])
    np.testing.assert_allclose(got, (want[cell]["b"], want[cell]["w"]), rtol=1e-5)
  # The rules differ on these keys (each mutation hits with probability 1/2).
  if rule == "reference_as_run":
    tracked_sum = _by_hand("reference", step_keys)[0]["b"]
    assert abs(tracked_sum - want[0]["b"]) > 1e-3


def test_reference_mutation_clips_at_zero_and_keeps_misses():
  from minmaxlab.coevolution._lr_mutation import reference_mutation

  keys = jax.random.split(jax.random.key(3), 256)
  lr = jnp.full(256, 1e-3)
  new = jax.jit(jax.vmap(lambda k, x: reference_mutation(k, x, 0.5, 100.0, 0.1)))(keys, lr)
  assert float(jnp.min(new)) == 0.0  # clipped, never negative
  assert 64 < int(jnp.sum(new == lr)) < 192  # about half untouched


def test_unknown_rule_is_one_line():
  with pytest.raises(ValueError, match="lr_mutation must be one of"):
    co.CoevolutionConfig(lr_mutation="per_batch")
