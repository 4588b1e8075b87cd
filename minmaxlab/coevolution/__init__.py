"""Spatial coevolution of GANs (Lipizzaner) as one jit-compiled generation step.

A toroidal grid of cells is a leading ``(rows, cols)`` axis pair of plain
pytrees; :class:`Coevolution` ``.step(key, state, data)`` runs one generation of
every cell (gather, fitness, selection, mutation, training with any minmaxlab
game transform, replacement, mixture (1+1)-ES, divergence repair), composed of
the pure phase functions of :class:`Phases`; the operators' float parameters are
a traced :class:`CoevolutionParams` pytree beside the static config.
"""

from minmaxlab.coevolution._coevolution import Coevolution, CoevolutionState, default_scheme
from minmaxlab.coevolution._config import CoevolutionConfig, CoevolutionParams
from minmaxlab.coevolution._dieting import diet_indices, diet_rows, diet_size
from minmaxlab.coevolution._ensembles import (
  EnsembleSearch,
  MixtureOptimization,
  class_tvd_score,
  greedy_ensemble,
  optimize_mixture,
  weight_grid,
)
from minmaxlab.coevolution._genetic_ensemble import ga_ensemble
from minmaxlab.coevolution._grid import (
  gather_neighbours,
  member_mask,
  neighbour_indices,
  neighbour_offsets,
  net_weights_dist,
)
from minmaxlab.coevolution._lineage import lineage_id, lineage_origin
from minmaxlab.coevolution._operators import (
  aggregate_fitness,
  mixture_es_step,
  mutate_learning_rates,
  normalise_weights,
  replacement_sources,
  tournament,
)
from minmaxlab.coevolution._phases import Phases
from minmaxlab.coevolution._sampling import (
  SAMPLING_MODES,
  exact_proportion_counts,
  exact_proportion_score,
  mixture_assignment,
  sample_mixture,
)

__all__ = [
  "CoevolutionParams",
  "Phases",
  "aggregate_fitness",
  "mixture_es_step",
  "mutate_learning_rates",
  "normalise_weights",
  "replacement_sources",
  "tournament",
  "Coevolution",
  "EnsembleSearch",
  "diet_indices",
  "diet_rows",
  "diet_size",
  "MixtureOptimization",
  "SAMPLING_MODES",
  "class_tvd_score",
  "exact_proportion_counts",
  "exact_proportion_score",
  "ga_ensemble",
  "greedy_ensemble",
  "mixture_assignment",
  "optimize_mixture",
  "sample_mixture",
  "weight_grid",
  "CoevolutionConfig",
  "CoevolutionState",
  "default_scheme",
  "gather_neighbours",
  "lineage_id",
  "lineage_origin",
  "member_mask",
  "net_weights_dist",
  "neighbour_indices",
  "neighbour_offsets",
]
