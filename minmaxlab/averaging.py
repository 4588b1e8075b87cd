"""``minmaxlab.averaging``: averages of iterates for evaluation.

``ema`` (EMA of every iterate), ``uniform`` (running mean), ``slow_ema`` (EMA
of the lookahead slow weights, updated at syncs) and ``averaged_params`` to
read the average out of an optimizer state.
"""

from minmaxlab.transforms import (
  AveragingState,
  averaged_params,
  ema,
  slow_ema,
  uniform,
)

__all__ = ["AveragingState", "averaged_params", "ema", "slow_ema", "uniform"]
