r"""GAN losses on discriminator logits, and the game loss of a :class:`GANPair`.

Every per-logit loss maps ``(d_real_logits[B], d_fake_logits[B])`` to
``(loss_min, loss_max)``: the generator (min player) minimises ``loss_min``
and the discriminator (max player) minimises ``loss_max``. Logits are
:math:`r = D(x)`, :math:`f = D(G(z))`; :math:`\sigma` is the logistic sigmoid,
:math:`\operatorname{sp}(t) = \log(1 + e^t)` the softplus (so
:math:`-\log\sigma(t) = \operatorname{sp}(-t)` and
:math:`-\log(1 - \sigma(t)) = \operatorname{sp}(t)`), and :math:`\mathbb{E}`
the batch mean. Terms of a player's loss that do not depend on that player's
parameters are left out of ``loss_min`` (they change no gradient); for the
zero-sum losses (minimax BCE, Wasserstein) the descent field is therefore the
field of the zero-sum game.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from minmaxlab.games import Players
from minmaxlab.gan.models import GANPair

LossPair = tuple[jax.Array, jax.Array]


def _bce_discriminator(real: jax.Array, fake: jax.Array) -> jax.Array:
  return jnp.mean(jax.nn.softplus(-real)) + jnp.mean(jax.nn.softplus(fake))


def ns_bce(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Non-saturating BCE loss (Goodfellow et al., 2014, §3).

  .. math::
    \ell_D = \mathbb{E}\operatorname{sp}(-r) + \mathbb{E}\operatorname{sp}(f),
    \qquad \ell_G = \mathbb{E}\operatorname{sp}(-f) = -\mathbb{E}\log\sigma(f).

  The discriminator's loss is the sum of the real and fake BCE terms (the
  convention of Lipizzaner's ``bceloss`` and the DCGAN reference code); at
  logits 0 both its terms and the generator's loss equal :math:`\log 2`.

  References:
    Goodfellow et al., 2014, "Generative Adversarial Nets",
    https://arxiv.org/abs/1406.2661
  """
  return jnp.mean(jax.nn.softplus(-d_fake_logits)), _bce_discriminator(d_real_logits, d_fake_logits)


def minimax_bce(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""The original (saturating) minimax GAN loss.

  .. math::
    \ell_D = \mathbb{E}\operatorname{sp}(-r) + \mathbb{E}\operatorname{sp}(f),
    \qquad \ell_G = \mathbb{E}\log(1 - \sigma(f)) = -\mathbb{E}\operatorname{sp}(f).

  :math:`\ell_G` is :math:`-\ell_D` up to the real-data term, which does not
  depend on the generator: the game is zero-sum.

  References:
    Goodfellow et al., 2014, https://arxiv.org/abs/1406.2661
  """
  return -jnp.mean(jax.nn.softplus(d_fake_logits)), _bce_discriminator(d_real_logits, d_fake_logits)


def lsgan(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Least-squares GAN with targets :math:`a = 0, b = c = 1` on the raw output.

  .. math::
    \ell_D = \tfrac12\mathbb{E}(r - 1)^2 + \tfrac12\mathbb{E} f^2,
    \qquad \ell_G = \tfrac12\mathbb{E}(f - 1)^2.

  (Lipizzaner's ``mseloss`` applies the squares to :math:`\sigma(\cdot)`
  instead: see :func:`mse_sigmoid`.)

  References:
    Mao et al., 2017, "Least Squares Generative Adversarial Networks",
    https://arxiv.org/abs/1611.04076
  """
  loss_max = 0.5 * jnp.mean(jnp.square(d_real_logits - 1)) + 0.5 * jnp.mean(
    jnp.square(d_fake_logits)
  )
  return 0.5 * jnp.mean(jnp.square(d_fake_logits - 1)), loss_max


def mse_sigmoid(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Lipizzaner's ``mseloss``: squared error of the probabilities :math:`\sigma(\cdot)`.

  .. math::
    \ell_D = \mathbb{E}(\sigma(r) - 1)^2 + \mathbb{E}\sigma(f)^2,
    \qquad \ell_G = \mathbb{E}(\sigma(f) - 1)^2.
  """
  p_real, p_fake = jax.nn.sigmoid(d_real_logits), jax.nn.sigmoid(d_fake_logits)
  loss_max = jnp.mean(jnp.square(p_real - 1)) + jnp.mean(jnp.square(p_fake))
  return jnp.mean(jnp.square(p_fake - 1)), loss_max


def hinge(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Hinge loss (the Lookahead-minmax CIFAR-10 loss).

  .. math::
    \ell_D = \mathbb{E}\max(0, 1 - r) + \mathbb{E}\max(0, 1 + f),
    \qquad \ell_G = -\mathbb{E} f.

  References:
    Lim & Ye, 2017, "Geometric GAN", https://arxiv.org/abs/1705.02894 ;
    Miyato et al., 2018, https://arxiv.org/abs/1802.05957
  """
  loss_max = jnp.mean(jax.nn.relu(1 - d_real_logits)) + jnp.mean(jax.nn.relu(1 + d_fake_logits))
  return -jnp.mean(d_fake_logits), loss_max


def wasserstein(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Wasserstein GAN loss (the critic's outputs are :math:`r, f`).

  .. math::
    \ell_D = \mathbb{E} f - \mathbb{E} r, \qquad \ell_G = -\mathbb{E} f.

  Zero-sum up to the real term. Without a Lipschitz constraint the critic is
  unbounded: use it through :func:`game_loss` with ``"wgan_gp"`` (gradient
  penalty) or with a spectrally normalised critic.

  References:
    Arjovsky et al., 2017, https://arxiv.org/abs/1701.07875
  """
  return -jnp.mean(d_fake_logits), jnp.mean(d_fake_logits) - jnp.mean(d_real_logits)


def heuristic(d_real_logits: jax.Array, d_fake_logits: jax.Array) -> LossPair:
  r"""Lipizzaner's ``heuristicloss``: Goodfellow's heuristic non-saturating game.

  .. math::
    \ell_D = \mathbb{E}\operatorname{sp}(-r) + \mathbb{E}\operatorname{sp}(f),
    \qquad \ell_G = -\tfrac12\mathbb{E}\log\sigma(f) = \tfrac12\mathbb{E}\operatorname{sp}(-f).

  Lipizzaner's generator uses ``HeuristicLoss`` (:math:`-\frac12` mean log of
  :math:`D(G(z))`), its discriminator BCE on real and fake (summed); so this
  is :func:`ns_bce` with the generator's loss halved.

  References:
    Goodfellow, 2016, "NIPS 2016 Tutorial: Generative Adversarial Networks",
    §3.2.3, https://arxiv.org/abs/1701.00160 ; Toutouh et al., 2019,
    "Spatial Evolutionary GANs" (Mustangs), https://arxiv.org/abs/1905.12702
  """
  return 0.5 * jnp.mean(jax.nn.softplus(-d_fake_logits)), _bce_discriminator(
    d_real_logits, d_fake_logits
  )


LOSSES: dict[str, Callable[[jax.Array, jax.Array], LossPair]] = {
  "ns_bce": ns_bce,
  "minimax_bce": minimax_bce,
  "lsgan": lsgan,
  "hinge": hinge,
  "wgan_gp": wasserstein,
  "heuristic": heuristic,
  "mse_sigmoid": mse_sigmoid,
}


def gradient_penalty(
  discriminator_apply: Callable[[Any, jax.Array], jax.Array],
  d_params: Any,
  real: jax.Array,
  fake: jax.Array,
  key: jax.Array,
) -> jax.Array:
  r"""WGAN-GP penalty :math:`\mathbb{E}(\|\nabla_x D(\hat x)\|_2 - 1)^2`.

  :math:`\hat x = \epsilon x + (1 - \epsilon)\tilde x` with one
  :math:`\epsilon \sim U[0, 1]` per example, :math:`x` real and :math:`\tilde
  x` fake. The per-example gradient is the gradient of the batch sum, which
  assumes the discriminator treats examples independently (no batch
  normalisation).

  References:
    Gulrajani et al., 2017, "Improved Training of Wasserstein GANs",
    https://arxiv.org/abs/1704.00028
  """
  batch = real.shape[0]
  eps = jax.random.uniform(key, (batch,) + (1,) * (real.ndim - 1), real.dtype)
  x_hat = eps * real + (1 - eps) * fake
  grads = jax.grad(lambda x: jnp.sum(discriminator_apply(d_params, x)))(x_hat)
  sq_norms = jnp.sum(jnp.square(grads.reshape(batch, -1)), axis=1)
  # sqrt(0) has an infinite derivative; a tiny floor keeps the penalty smooth.
  norms = jnp.sqrt(sq_norms + jnp.finfo(sq_norms.dtype).tiny)
  return jnp.mean(jnp.square(norms - 1))


def game_loss(
  pair: GANPair,
  loss: str | Callable[[jax.Array, jax.Array], LossPair],
  gp_weight: float = 10.0,
) -> Callable[..., LossPair]:
  r"""The two players' losses of a GAN, for :func:`minmaxlab.value_and_vector_field`.

  ``loss_fn(params, real, z, key=None)`` computes :math:`\tilde x = G(z)`,
  :math:`r = D(x_{\text{real}})`, :math:`f = D(\tilde x)` (two discriminator
  calls, so batch statistics are per call as in the reference code) and
  returns the per-logit loss's ``(loss_min, loss_max)``. With ``"wgan_gp"``
  the discriminator's loss adds ``gp_weight *`` :func:`gradient_penalty`,
  whose interpolation points are drawn from ``key``; other losses ignore
  ``key``.

  Example:
    >>> import jax, minmaxlab as mml
    >>> from minmaxlab.gan import losses, models
    >>> pair = models.make_pair("mlp", (2,), hidden=(8,))
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> params = mml.Players(pair.generator.init(k1), pair.discriminator.init(k2))
    >>> real = jax.random.normal(k1, (4, 2)); z = jax.random.normal(k2, (4, 64))
    >>> (l_min, l_max), field = mml.value_and_vector_field(losses.game_loss(pair, "ns_bce"))(
    ...     params, real, z, k1)

  Args:
    pair: the :class:`GANPair`.
    loss: a name in :data:`LOSSES` or a per-logit function.
    gp_weight: weight :math:`\lambda` of the gradient penalty (``"wgan_gp"``).

  Returns:
    ``loss_fn(params: Players(min=G params, max=D params), real[B, ...],
    z[B, latent_dim], key=None) -> (loss_min, loss_max)``.
  """
  if isinstance(loss, str):
    if loss not in LOSSES:
      raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)}")
    per_logit, use_gp = LOSSES[loss], loss == "wgan_gp"
  elif callable(loss):
    per_logit, use_gp = loss, False
  else:
    raise ValueError(f"loss must be a name or a callable, got {loss!r}")
  if use_gp and not gp_weight >= 0:
    raise ValueError(f"gp_weight must be >= 0, got {gp_weight}")
  generator, discriminator = pair.generator, pair.discriminator

  def loss_fn(params: Players, real: jax.Array, z: jax.Array, key: jax.Array | None = None):
    g_params, d_params = params
    fake = generator.apply(g_params, z)
    loss_min, loss_max = per_logit(
      discriminator.apply(d_params, real), discriminator.apply(d_params, fake)
    )
    if use_gp:
      if key is None:
        raise ValueError("the 'wgan_gp' loss needs a key for its interpolation points")
      loss_max = loss_max + gp_weight * gradient_penalty(
        discriminator.apply, d_params, real.astype(fake.dtype), fake, key
      )
    return loss_min, loss_max

  return loss_fn
