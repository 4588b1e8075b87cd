"""Game optimizers as optax transforms over ``Players`` trees."""

from minmaxlab.transforms._alternating import AlternatingState, alternating
from minmaxlab.transforms._averaging import (
  AveragingState,
  averaged_params,
  ema,
  slow_ema,
  uniform,
)
from minmaxlab.transforms._common import (
  FieldFn,
  VectorFieldFn,
  tree_all_finite,
  tree_where,
)
from minmaxlab.transforms._extragradient import ExtragradientState, extragradient
from minmaxlab.transforms._lookahead import (
  LookaheadConfig,
  LookaheadMinmaxState,
  apply_lookahead_updates,
  lookahead_minmax,
  lookahead_slow_params,
  nested_lookahead_minmax,
)
from minmaxlab.transforms._lookahead_scan import lookahead_scan
from minmaxlab.transforms._opt_state import (
  count_learning_rates,
  merge_by_player,
  player_labels,
  set_hyperparams,
  set_learning_rates,
)
from minmaxlab.transforms._optimistic import OptimisticState, optimistic
from minmaxlab.transforms._per_player import PerPlayerState, per_player
from minmaxlab.transforms._spectral_lookahead import SyncChoice, spectral_sync_period
from minmaxlab.transforms._step import (
  apply_game_step,
  game_step,
  hyperparam,
  num_field_evaluations,
  take_batch,
  with_field_processing,
)
from minmaxlab.transforms._unrolled import UnrolledState, unrolled

__all__ = [
  "AlternatingState",
  "AveragingState",
  "ExtragradientState",
  "FieldFn",
  "LookaheadConfig",
  "LookaheadMinmaxState",
  "OptimisticState",
  "PerPlayerState",
  "SyncChoice",
  "UnrolledState",
  "VectorFieldFn",
  "alternating",
  "apply_game_step",
  "apply_lookahead_updates",
  "averaged_params",
  "count_learning_rates",
  "ema",
  "extragradient",
  "game_step",
  "hyperparam",
  "lookahead_minmax",
  "lookahead_scan",
  "lookahead_slow_params",
  "merge_by_player",
  "nested_lookahead_minmax",
  "num_field_evaluations",
  "optimistic",
  "per_player",
  "player_labels",
  "set_hyperparams",
  "set_learning_rates",
  "slow_ema",
  "spectral_sync_period",
  "take_batch",
  "tree_all_finite",
  "tree_where",
  "uniform",
  "unrolled",
  "with_field_processing",
]
