"""Two-player games: the ``Players`` container, the descent vector field and
games with known equilibria."""

from minmaxlab.games._dirac import DiracGAN, dirac_gan
from minmaxlab.games._linear import (
  BilinearGame,
  QuadraticGame,
  StochasticBilinearGame,
  bilinear,
  quadratic,
  random_bilinear,
  random_stochastic_bilinear,
  stochastic_bilinear,
)
from minmaxlab.games._models import ModelDef, merge_models, split_models
from minmaxlab.games._players import (
  NotPlayersError,
  Players,
  check_players,
  split_losses,
  value_and_vector_field,
  vector_field,
)

__all__ = [
  "BilinearGame",
  "DiracGAN",
  "ModelDef",
  "NotPlayersError",
  "Players",
  "QuadraticGame",
  "StochasticBilinearGame",
  "bilinear",
  "check_players",
  "dirac_gan",
  "merge_models",
  "quadratic",
  "random_bilinear",
  "random_stochastic_bilinear",
  "split_losses",
  "split_models",
  "stochastic_bilinear",
  "value_and_vector_field",
  "vector_field",
]
