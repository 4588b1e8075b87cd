"""GAN losses: per-logit ``(d_real, d_fake) -> (loss_min, loss_max)`` functions
and :func:`game_loss`, the players' losses of a :class:`~minmaxlab.gan.models.GANPair`
for :func:`minmaxlab.value_and_vector_field`."""

from minmaxlab.gan.losses._losses import (
  LOSSES,
  game_loss,
  gradient_penalty,
  heuristic,
  hinge,
  lsgan,
  minimax_bce,
  mse_sigmoid,
  ns_bce,
  wasserstein,
)

__all__ = [
  "LOSSES",
  "game_loss",
  "gradient_penalty",
  "heuristic",
  "hinge",
  "lsgan",
  "minimax_bce",
  "mse_sigmoid",
  "ns_bce",
  "wasserstein",
]
