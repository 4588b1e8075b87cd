"""Spatial coevolution of GANs (Lipizzaner) as one jit-compiled generation step.

A toroidal grid of cells is a leading ``(rows, cols)`` axis pair of plain
pytrees; :class:`Coevolution` ``.step(key, state, data)`` runs one generation of
every cell (gather, fitness, selection, mutation, training with any minmaxlab
game transform, replacement, mixture (1+1)-ES, divergence repair).
"""

from minmaxlab.coevolution._coevolution import Coevolution, CoevolutionState, default_scheme
from minmaxlab.coevolution._config import CoevolutionConfig
from minmaxlab.coevolution._grid import (
  gather_neighbours,
  member_mask,
  neighbour_indices,
  neighbour_offsets,
)
from minmaxlab.coevolution._operators import (
  aggregate_fitness,
  mixture_es_step,
  mutate_learning_rates,
  normalise_weights,
  replacement_sources,
  tournament,
)
from minmaxlab.coevolution._scores import (
  fid_score,
  frechet_distance_jax,
  mode_tvd_score,
  weighted_statistics,
)
from minmaxlab.transforms._by_player import (
  count_learning_rates,
  merge_by_player,
  player_labels,
  set_learning_rates,
)

__all__ = [
  "aggregate_fitness",
  "mixture_es_step",
  "mutate_learning_rates",
  "normalise_weights",
  "replacement_sources",
  "tournament",
  "Coevolution",
  "CoevolutionConfig",
  "CoevolutionState",
  "count_learning_rates",
  "default_scheme",
  "fid_score",
  "frechet_distance_jax",
  "gather_neighbours",
  "member_mask",
  "merge_by_player",
  "mode_tvd_score",
  "neighbour_indices",
  "neighbour_offsets",
  "player_labels",
  "set_learning_rates",
  "weighted_statistics",
]
