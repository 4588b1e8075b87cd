"""minmaxlab: minmax (game) optimization and robust GAN training in JAX.

The top level holds the game API and the game optimizers (optax transforms
over :class:`Players` trees); subpackages hold games, analysis and the GAN,
coevolution and PBT stacks.
"""

from minmaxlab import games, transforms
from minmaxlab.games import (
  Players,
  merge_models,
  split_models,
  value_and_vector_field,
  vector_field,
)
from minmaxlab.transforms import (
  AlternatingState,
  ExtragradientState,
  LookaheadMinmaxState,
  OptimisticState,
  PerPlayerState,
  UnrolledState,
  alternating,
  apply_game_step,
  extragradient,
  game_step,
  lookahead_minmax,
  lookahead_scan,
  lookahead_slow_params,
  nested_lookahead_minmax,
  num_field_evaluations,
  optimistic,
  per_player,
  take_batch,
  unrolled,
  with_field_processing,
)

__version__ = "0.1.0"

__all__ = [
  "AlternatingState",
  "ExtragradientState",
  "LookaheadMinmaxState",
  "OptimisticState",
  "PerPlayerState",
  "Players",
  "UnrolledState",
  "alternating",
  "apply_game_step",
  "extragradient",
  "game_step",
  "games",
  "lookahead_minmax",
  "lookahead_scan",
  "lookahead_slow_params",
  "merge_models",
  "nested_lookahead_minmax",
  "num_field_evaluations",
  "optimistic",
  "per_player",
  "split_models",
  "take_batch",
  "transforms",
  "unrolled",
  "value_and_vector_field",
  "vector_field",
  "with_field_processing",
]
