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
  "NotPlayersError",
  "Players",
  "QuadraticGame",
  "StochasticBilinearGame",
  "bilinear",
  "check_players",
  "dirac_gan",
  "quadratic",
  "random_bilinear",
  "random_stochastic_bilinear",
  "split_losses",
  "stochastic_bilinear",
  "value_and_vector_field",
  "vector_field",
]
