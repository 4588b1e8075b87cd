"""The plain-JAX floor program of ``coevolution_throughput.py --floor``: the work of a
2x2 Lipizzaner MNIST generation written by hand (no library code), to time the
library's generation against."""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

N = 100  # batch size
F = 1000  # fitness samples (the library's fitness_samples)


def init_mlp(key, sizes):
  ks = jax.random.split(key, len(sizes) - 1)
  return [
    {"w": jax.random.normal(k, (a, b)) * (1.0 / np.sqrt(a)), "b": jnp.zeros(b)}
    for k, a, b in zip(ks, sizes[:-1], sizes[1:])
  ]


def mlp(p, x, out):
  for layer in p[:-1]:
    x = jax.nn.leaky_relu(x @ layer["w"] + layer["b"], 0.2)
  return out(x @ p[-1]["w"] + p[-1]["b"])


def g_apply(p, z):
  return mlp(p, z, jnp.tanh)


def d_apply(p, x):
  return mlp(p, x, lambda y: y[..., 0])


def adam(p, g, m, v, t):
  m = jax.tree.map(lambda m, g: 0.5 * m + 0.5 * g, m, g)
  v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
  c1, c2 = 1 - 0.5**t, 1 - 0.999**t
  p = jax.tree.map(lambda p, m, v: p - 2e-4 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
  return p, m, v


def g_loss(gp, dp, z):
  return jnp.mean(jax.nn.softplus(-d_apply(dp, g_apply(gp, z))))


def d_loss(dp, gp, real, z):
  fake = g_apply(gp, z)
  return jnp.mean(jax.nn.softplus(-d_apply(dp, real)) + jax.nn.softplus(d_apply(dp, fake)))


def fitness(flat, g5, d5, key, n=F):
  """The 5x5 fitness pass: 5 G on ``n`` (1000) noise vectors, 5 D on the 6n-row block."""
  z = jax.random.normal(key, (n, 64))
  real = flat[jax.random.randint(jax.random.fold_in(key, 1), (n,), 0, flat.shape[0])]
  fakes = jax.vmap(g_apply, (0, None))(g5, z).reshape(5 * n, 784)
  logits = jax.vmap(d_apply, (0, None))(d5, jnp.concatenate([real, fakes]))  # [5 D, 6n]
  lr, lf = logits[:, :n], logits[:, n:].reshape(5, 5, n)
  fit_g = jnp.mean(jax.nn.softplus(-lf), axis=(0, 2))
  fit_d = jnp.mean(jax.nn.softplus(-lr), 1) + jnp.mean(jax.nn.softplus(lf), (1, 2))
  return (fit_g, fit_d), (z, real, fakes, lr)


def rescore(gp, dp, d5, z, real, fakes, lr5):
  """The replacement's re-scoring of the trained pair, as the library does it."""
  fake_tr = g_apply(gp, z)
  lg = jnp.mean(jax.nn.softplus(-jax.vmap(d_apply, (0, None))(d5, fake_tr)), 1)
  lr = d_apply(dp, jnp.concatenate([real, fakes]))
  n = real.shape[0]
  ld = jnp.mean(jax.nn.softplus(-lr[:n])) + jnp.mean(jax.nn.softplus(lr[n:]))
  return jnp.mean(lg) + 0.0 * jnp.sum(lr5), ld


def g_step(flat, carry, key):
  """One generator step on a fresh batch; returns the real batch drawn (the D step uses it)."""
  (gp, dp, gm, gv, dm, dv), t, td = carry
  k1, k2 = jax.random.split(key)
  real = flat[jax.random.randint(k1, (N,), 0, flat.shape[0])]
  gp, gm, gv = adam(gp, jax.grad(g_loss)(gp, dp, jax.random.normal(k2, (N, 64))), gm, gv, t)
  return ((gp, dp, gm, gv, dm, dv), t + 1.0, td), real


def group(flat, carry, keys):
  """``d_every`` generator steps, then a D step on the last real batch and fresh fakes."""
  for key in keys[:-1]:
    carry, _ = g_step(flat, carry, key)
  carry, real = g_step(flat, carry, keys[-1])
  (gp, dp, gm, gv, dm, dv), t, td = carry
  zd = jax.random.normal(jax.random.fold_in(keys[-1], 2), (N, 64))
  dp, dm, dv = adam(dp, jax.grad(d_loss)(dp, gp, real, zd), dm, dv, td)
  return ((gp, dp, gm, gv, dm, dv), t, td + 1.0), None


def cell(flat, steps, d_every, n, args):
  """One cell: fitness, ``steps`` batches with Lipizzaner's schedule, the re-scoring."""
  (gp, dp, gm, gv, dm, dv), g5, d5, key = args
  f1, (z_f, real_f, fakes, lr5) = fitness(flat, g5, d5, jax.random.fold_in(key, 0), n)
  keys = jax.random.split(jax.random.fold_in(key, 1), steps)
  groups = steps // d_every
  carry = ((gp, dp, gm, gv, dm, dv), 1.0, 1.0)
  grouped = keys[: groups * d_every].reshape(groups, d_every)
  carry, _ = jax.lax.scan(functools.partial(group, flat), carry, grouped)
  carry, _ = jax.lax.scan(functools.partial(g_step, flat), carry, keys[groups * d_every :])
  state = carry[0]
  f2 = rescore(state[0], state[1], d5, z_f, real_f, fakes, lr5)
  return state, (f1, f2)


def program(flat, steps, d_every, n, key, cells):
  """The 4 cells one after another (``lax.map``), each with its neighbourhood of 5."""
  g, d = cells[0], cells[1]
  # Each cell's neighbourhood: itself and 4 others (rolls; XLA cannot merge the copies).
  nb = lambda t: jax.tree.map(  # noqa: E731
    lambda x: jnp.stack([jnp.roll(x, i, 0) for i in (0, 1, 2, 3, 1)], 1), t
  )
  one = functools.partial(cell, flat, steps, d_every, n)
  return jax.lax.map(one, (cells, nb(g), nb(d), jax.random.split(key, 4)))


def init_cells(key):
  def one(k):
    kg, kd = jax.random.split(k)
    gp, dp = init_mlp(kg, [64, 256, 256, 784]), init_mlp(kd, [784, 256, 256, 1])
    z = lambda t: jax.tree.map(jnp.zeros_like, t)  # noqa: E731
    return gp, dp, z(gp), z(gp), z(dp), z(dp)

  return jax.vmap(one)(jax.random.split(key, 4))


def reference_program(images, steps, d_every=2, fitness_samples=F):
  """The plain-JAX floor of the library's ``--floor`` generation, the same work: 4 cells one
  after another (``lax.map``), each a Lipizzaner MNIST cell written by hand (MLP lists of
  ``{"w", "b"}``, leaky ReLU 0.2, softplus BCE, Adam(2e-4, 0.5, 0.999) by ``tree_map``): the
  5x5 fitness pass (5 G on ``fitness_samples`` noise vectors, 5 D on the block of as many real
  samples and the 5 G's fakes),
  ``steps`` batches with Lipizzaner's schedule (per batch a G step; on every ``d_every``-th
  batch then a D step on the same real batch and fresh fakes of the updated G; leftover
  batches G only), and the replacement's re-scoring as the library does it (the trained G's
  fakes against the 5 D, the trained D on the real samples and the 5 fakes).

  Returns ``(compiled program(key, cells), initial cells, compile seconds)``."""
  flat = images.reshape(images.shape[0], -1)
  cells = jax.jit(init_cells)(jax.random.key(0))
  fn = functools.partial(program, flat, steps, d_every, fitness_samples)
  t0 = time.perf_counter()
  compiled = jax.jit(fn).lower(jax.random.key(0), cells).compile()
  return compiled, cells, time.perf_counter() - t0
