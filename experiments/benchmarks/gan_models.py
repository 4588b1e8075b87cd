"""flax linen vs nnx (``nnx.split``/``nnx.merge``) as pure ``apply`` functions under jit.

Problem: the Lipizzaner MNIST MLP pair (G 64-256-256-784 tanh, D 784-256-256-1,
LeakyReLU 0.2), batch 100, non-saturating BCE, simultaneous Adam (GDA) steps.
Variants:

* ``linen``: ``minmaxlab.gan.models.make_pair("mlp", (28, 28, 1))`` (linen modules,
  parameters a plain dict, ``apply = module.apply({"params": p}, x)``);
* ``nnx``: the same layers as ``nnx.Module``s; ``graphdef, state = nnx.split(m)`` once,
  and ``apply(state, x) = nnx.merge(graphdef, state)(x)`` inside the jitted step;
* ``linen_sn``: ``linen`` with a spectrally normalised discriminator (5 power
  iterations per call), for the cost of spectral normalisation.

Each measurement jits ``steps`` game steps in one ``lax.scan`` and times it after
compilation; variants are timed interleaved, ``repeats`` times, and medians reported.
Also reported: the compile time of a DCGAN ``init`` with the package's single-draw
initialiser vs the module's own per-leaf initialisers. Prints one JSON line.

  python experiments/benchmarks/gan_models.py [--repeats 5] [--steps 50]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
from flax import nnx

import minmaxlab as mml
from minmaxlab.gan import losses, models

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402


class NnxGenerator(nnx.Module):
  def __init__(self, rngs: nnx.Rngs, latent=64, hidden=256, out=784):
    self.l1 = nnx.Linear(latent, hidden, rngs=rngs)
    self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.l3 = nnx.Linear(hidden, out, rngs=rngs)

  def __call__(self, z):
    h = nnx.leaky_relu(self.l1(z), 0.2)
    h = nnx.leaky_relu(self.l2(h), 0.2)
    return jnp.tanh(self.l3(h)).reshape(z.shape[0], 28, 28, 1)


class NnxDiscriminator(nnx.Module):
  def __init__(self, rngs: nnx.Rngs, inp=784, hidden=256):
    self.l1 = nnx.Linear(inp, hidden, rngs=rngs)
    self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.l3 = nnx.Linear(hidden, 1, rngs=rngs)

  def __call__(self, x):
    h = nnx.leaky_relu(self.l1(x.reshape(x.shape[0], -1)), 0.2)
    h = nnx.leaky_relu(self.l2(h), 0.2)
    return self.l3(h)[:, 0]


def nnx_pair():
  g_def, g_state = nnx.split(NnxGenerator(nnx.Rngs(0)))
  d_def, d_state = nnx.split(NnxDiscriminator(nnx.Rngs(1)))
  generator = models.Model(lambda key: g_state, lambda s, z: nnx.merge(g_def, s)(z))
  discriminator = models.Model(lambda key: d_state, lambda s, x: nnx.merge(d_def, s)(x))
  return models.GANPair(generator=generator, discriminator=discriminator, latent_dim=64)


def make_runner(pair, steps, batch):
  kg, kd = jax.random.split(jax.random.key(0))
  params = mml.Players(pair.generator.init(kg), pair.discriminator.init(kd))
  tx = optax.adam(2e-4, b1=0.5)
  vaf = mml.value_and_vector_field(losses.game_loss(pair, "ns_bce"))

  @jax.jit
  def run(params, opt_state, key):
    def step(carry, key):
      params, opt_state = carry
      kr, kz = jax.random.split(key)
      real = jnp.tanh(jax.random.normal(kr, (batch, 28, 28, 1)))
      z = jax.random.normal(kz, (batch, 64))
      losses_, v = vaf(params, real, z)
      updates, opt_state = tx.update(v, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state), losses_[0]

    (params, opt_state), out = jax.lax.scan(step, (params, opt_state), jax.random.split(key, steps))
    return params, opt_state, out

  state = (params, tx.init(params))
  compiled = run.lower(*state, jax.random.key(1)).compile()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  flops = float(cost.get("flops", float("nan"))) if cost else float("nan")
  first, _ = h.timed(lambda: run(*state, jax.random.key(1)))

  def timed(r):
    return run(*state, jax.random.key(2))

  n_params = models.num_params(params)
  return timed, first.wall_s, (n_params, flops)


def init_compile_seconds():
  out = {}
  for initializer in ("fan_in_uniform", "module"):
    model = models.from_linen(models.DCGANGenerator((28, 28, 1), 64, "batch"), (128,), initializer)
    rep, _ = h.timed(lambda model=model: model.init(jax.random.key(0)))
    out[initializer] = round(rep.wall_s, 3)
  return out


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--batch", type=int, default=100)
  args = parser.parse_args()

  variants = {
    "linen": models.make_pair("mlp", (28, 28, 1)),
    "nnx": nnx_pair(),
    "linen_sn": models.make_pair("mlp", (28, 28, 1), spectral_norm=True),
  }
  runners, compile_s, n_params = {}, {}, {}
  for name, pair in variants.items():
    runners[name], compile_s[name], n_params[name] = make_runner(pair, args.steps, args.batch)
  reps = h.interleave(runners, args.repeats, warmup=0)
  times = {name: [r.wall_s for r in rs] for name, rs in reps.items()}
  median = {name: statistics.median(t) for name, t in times.items()}
  steps_per_s = {name: round(args.steps / m, 1) for name, m in median.items()}
  result = {
    "benchmark": "gan_models",
    "problem": f"MNIST MLP pair, batch {args.batch}, ns_bce, Adam GDA, {args.steps} steps/scan",
    "params": {k: v[0] for k, v in n_params.items()},
    "xla_flops_per_scan": {k: v[1] for k, v in n_params.items()},
    "steps_per_s_median": steps_per_s,
    "ms_per_step_median": {k: round(1e3 * m / args.steps, 3) for k, m in median.items()},
    "steps_per_s_all": {k: [round(args.steps / t, 1) for t in v] for k, v in times.items()},
    "nnx_over_linen_time_ratio": round(median["nnx"] / median["linen"], 4),
    "spectral_norm_over_linen_time_ratio": round(median["linen_sn"] / median["linen"], 4),
    "compile_s": {k: round(v, 2) for k, v in compile_s.items()},
    "dcgan28_generator_init_compile_s": init_compile_seconds(),
    "faster": min(("linen", "nnx"), key=median.get),
    "repeats": args.repeats,
    "cpu_s_all": {k: [round(r.cpu_s, 4) for r in v] for k, v in reps.items()},
    "jax": jax.__version__,
    "machine": platform.machine(),
    "host": h.host(),
    "devices": str(jax.devices()),
  }
  h.emit(result)


if __name__ == "__main__":
  main()
