"""Game optimizers as optax transforms over ``Players`` trees."""

from minmaxlab.transforms._alternating import AlternatingState, alternating
from minmaxlab.transforms._averaging import (
    AveragingState,
    averaged_params,
    ema,
    slow_ema,
    uniform,
)
from minmaxlab.transforms._by_player import (
    count_learning_rates,
    merge_by_player,
    player_labels,
    set_learning_rates,
)
from minmaxlab.transforms._common import (
    PerPlayerTransformation,
    PlayerTransforms,
    VectorFieldFn,
)
from minmaxlab.transforms._extragradient import ExtragradientState, extragradient
from minmaxlab.transforms._lookahead import (
    LookaheadMinmaxState,
    lookahead_minmax,
    lookahead_slow_params,
    nested_lookahead_minmax,
)
from minmaxlab.transforms._optimistic import OptimisticState, optimistic
from minmaxlab.transforms._per_player import PerPlayerState, per_player

__all__ = [
    "AlternatingState",
    "AveragingState",
    "ExtragradientState",
    "LookaheadMinmaxState",
    "OptimisticState",
    "PerPlayerState",
    "PerPlayerTransformation",
    "PlayerTransforms",
    "VectorFieldFn",
    "alternating",
    "averaged_params",
    "count_learning_rates",
    "ema",
    "extragradient",
    "lookahead_minmax",
    "lookahead_slow_params",
    "merge_by_player",
    "nested_lookahead_minmax",
    "optimistic",
    "per_player",
    "player_labels",
    "set_learning_rates",
    "slow_ema",
    "uniform",
]
