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
  replacement_sources,
  simplex_weights,
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

# The former name of simplex_weights ("normalise" read like gan.models.spectral_normalize),
# kept so that existing code runs; not part of __all__.
normalise_weights = simplex_weights

__all__ = [
  "SAMPLING_MODES",
  "Coevolution",
  "CoevolutionConfig",
  "CoevolutionParams",
  "CoevolutionState",
  "EnsembleSearch",
  "MixtureOptimization",
  "Phases",
  "aggregate_fitness",
  "default_scheme",
  "diet_indices",
  "diet_rows",
  "diet_size",
  "exact_proportion_counts",
  "exact_proportion_score",
  "ga_ensemble",
  "gather_neighbours",
  "greedy_ensemble",
  "lineage_id",
  "lineage_origin",
  "member_mask",
  "mixture_assignment",
  "mixture_es_step",
  "mutate_learning_rates",
  "neighbour_indices",
  "neighbour_offsets",
  "net_weights_dist",
  "optimize_mixture",
  "replacement_sources",
  "sample_mixture",
  "simplex_weights",
  "tournament",
  "weight_grid",
]
