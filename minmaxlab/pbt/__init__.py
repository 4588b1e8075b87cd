"""``minmaxlab.pbt``: population based training.

Vectorized mode (:func:`vectorized_pbt`): members are a leading array axis,
one jit-compiled round trains, evaluates, exploits (copying parameters and
optimizer states of both players) and explores (hyperparameters are arrays in
``inject_hyperparams`` states, so nothing recompiles).
"""

from minmaxlab.pbt._space import (
    Categorical,
    Continuous,
    explore,
    explore_values,
    sample_prior,
    sample_values,
    validate_space,
)
from minmaxlab.pbt._vectorized import (
    PBTState,
    VectorizedPBT,
    gather_members,
    set_hyperparams,
    tournament_exploit,
    truncation_exploit,
    truncation_size,
    vectorized_pbt,
)

__all__ = [
    "Categorical",
    "Continuous",
    "PBTState",
    "VectorizedPBT",
    "explore",
    "explore_values",
    "gather_members",
    "sample_prior",
    "sample_values",
    "set_hyperparams",
    "tournament_exploit",
    "truncation_exploit",
    "truncation_size",
    "validate_space",
    "vectorized_pbt",
]
