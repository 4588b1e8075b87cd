"""A GAN written in equinox, trained with Lookahead-minmax over extragradient (Adam inside;
--scheme alternating: over alternating steps) on the 8-Gaussian ring; prints the modes it covers.

  python examples/equinox_gan.py --steps 5000
"""

import argparse

import equinox as eqx
import jax
import optax

import minmaxlab as mml
from minmaxlab.gan import data, losses, metrics


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=5000, help="game steps")
  parser.add_argument("--batch", type=int, default=128)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--scheme", choices=["extragradient", "alternating"], default="extragradient")
  args = parser.parse_args(argv)

  ring, latent = data.ring8(), 16
  k_g, k_d, train_key, eval_key = jax.random.split(jax.random.key(args.seed), 4)
  act = lambda x: jax.nn.leaky_relu(x, 0.2)
  generator = eqx.nn.MLP(latent, 2, width_size=64, depth=2, activation=act, key=k_g)
  discriminator = eqx.nn.MLP(2, "scalar", width_size=64, depth=2, activation=act, key=k_d)
  defs, params = mml.split_models(generator, discriminator)  # Players of the float arrays

  def loss_fn(params, key):  # (generator's loss, discriminator's loss) on a fresh minibatch
    g, d = mml.merge_models(defs, params)
    k_real, k_z = jax.random.split(key)
    real = ring.sample(k_real, args.batch)
    fake = jax.vmap(g)(jax.random.normal(k_z, (args.batch, latent)))
    return losses.ns_bce(jax.vmap(d)(real), jax.vmap(d)(fake))

  value_and_field = mml.value_and_vector_field(loss_fn)
  adam = optax.adam(5e-4, b1=0.0)  # little momentum in games: docs/game-optimizers.md
  inner = mml.extragradient(adam) if args.scheme == "extragradient" else mml.alternating(adam)
  tx = mml.lookahead_minmax(inner, sync_period=5)  # LA-ExtraGrad (or LA-AltGAN) over Adam
  opt_state = tx.init(params)

  @jax.jit
  def train_step(params, opt_state, key):  # key=: each field evaluation gets a fresh key
    return mml.game_step(tx, value_and_field, params, opt_state, key=key)

  for step in range(args.steps):
    params, opt_state, (loss_g, loss_d) = train_step(
      params, opt_state, jax.random.fold_in(train_key, step)
    )

  @jax.jit
  def evaluate(params, key):  # 2500 samples of the generator at the slow weights
    g, _ = mml.merge_models(defs, params)
    z = jax.random.normal(key, (2500, latent))
    return metrics.mixture_metrics(jax.vmap(g)(z), ring)

  found = evaluate(mml.lookahead_slow_params(opt_state), eval_key)
  print(f"after {args.steps} steps: losses G {loss_g:.3f}, D {loss_d:.3f}")
  print(
    f"modes covered: {int(found['modes_covered'])}/8, high-quality {found['high_quality_rate']:.0%}"
  )


if __name__ == "__main__":
  main()
