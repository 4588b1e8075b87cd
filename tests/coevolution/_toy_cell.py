"""A toy cell whose every number is hand-checkable, for the coevolution phase tests.

The generator is ``G(w, z) = w`` (one number per sample, whatever the noise), the
discriminator ``D(v, x) = v * x``; the "loss" is ``loss_min = -mean(D(fake))`` and
``loss_max = mean(D(fake)) - mean(D(real))``, so every fitness, gradient and update is a
product of the hand-set numbers.
"""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import optax

from minmaxlab import coevolution as co
from minmaxlab.coevolution import _phases as ph
from minmaxlab.games import Players
from minmaxlab.transforms import per_player, set_learning_rates

G = SimpleNamespace(apply=lambda p, z: jnp.broadcast_to(p["w"], z.shape[:1] + (1,)))
D = SimpleNamespace(apply=lambda p, x: p["v"] * x[..., 0])
PAIR = SimpleNamespace(generator=G, discriminator=D, latent_dim=1)


def loss(real_logits, fake_logits):
  return -jnp.mean(fake_logits), jnp.mean(fake_logits) - jnp.mean(real_logits)


SCHEME = optax.with_extra_args_support(
  per_player(
    min=optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
    max=optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
  )
)


def individuals(w, v, lr=0.1):
  """A pool/individuals of ``len(w)`` pairs with scheme states and learning rates."""
  params = Players({"w": jnp.asarray(w, jnp.float32)}, {"v": jnp.asarray(v, jnp.float32)})
  opt = jax.vmap(SCHEME.init)(params)
  lrs = jnp.full(len(w), lr, jnp.float32)
  return params, jax.vmap(set_learning_rates)(opt, lrs, lrs), Players(lrs, lrs)


def pool(w, v, valid_g=None, valid_d=None):
  params, opt, lrs = individuals(w, v)
  ok = jnp.ones(len(w), bool)
  valid = Players(
    ok if valid_g is None else jnp.asarray(valid_g), ok if valid_d is None else jnp.asarray(valid_d)
  )
  return ph.Pool(params=params, opt=opt, learning_rates=lrs, valid=valid)


def config(**kw):
  base = dict(rows=1, cols=1, population_size=2, tournament_size=64, mutation_probability=1.0)
  base.update(kw)
  return co.CoevolutionConfig(**base)


def params(p=1.0, scale=0.0, min_lr=0.2, sigma=0.0):
  return co.CoevolutionParams(
    mutation_probability=p, mutation_scale=scale, min_learning_rate=min_lr, mixture_sigma=sigma
  )
