"""``minmaxlab.pbt``: population based training.

Vectorized mode (:func:`vectorized_pbt`): members are a leading array axis,
one jit-compiled round trains, evaluates, exploits (copying parameters and
optimizer states of both players) and explores (hyperparameters are arrays in
``inject_hyperparams`` states, so nothing recompiles).

Black-box mode (:class:`Controller`, Li et al. 2019): trials (hyperparameters,
parent checkpoint, steps, seed) in an SQLite :class:`Store`, stateless worker
processes, initiator-based tournament or truncation, lineage-aware checkpoint
garbage collection, re-queue of killed workers' trials, resume after a killed
controller, a per-trial attempt limit, a stored config fingerprint, named
tasks (``"module:function"`` + JSON arguments, never pickles), workers that
end with their controller, mutable schedules, :func:`replay` of the best
lineage (dtype-exact checkpoints), multi-objective fitness (a pluggable
:class:`Ranking`: Pareto rank, weighted sum, user key or comparison), a
wall-clock budget (``run(budget_s=...)``) and early stopping
(:class:`EarlyStop`). Workers
are local processes, external processes joining through the store
(``python -m minmaxlab.pbt worker``) or MPI ranks (:func:`run_mpi` under
``mpirun -n P``: rank 0 the controller).

``set_hyperparams`` is an alias of :func:`minmaxlab.transforms.set_hyperparams` (its one home).
"""

from minmaxlab.pbt._config import ControllerConfig
from minmaxlab.pbt._controller import (
  CampaignFailed,
  ConfigMismatch,
  Controller,
  needed_trials,
  replay,
)
from minmaxlab.pbt._mpi import mpi_worker, mpi_world, run_mpi
from minmaxlab.pbt._objectives import (
  Ranking,
  comparator_ranking,
  key_ranking,
  pareto_fronts,
  pareto_rank,
  scalar,
  weighted_sum,
)
from minmaxlab.pbt._schedules import exponential_decay, piecewise_constant
from minmaxlab.pbt._selection import EarlyStop
from minmaxlab.pbt._space import (
  Categorical,
  Continuous,
  explore,
  explore_values,
  sample_prior,
  sample_values,
  validate_space,
)
from minmaxlab.pbt._store import ControllerGone, Store, StoreError, Trial
from minmaxlab.pbt._task import TaskSpec, named_task, resolve_task, task_spec
from minmaxlab.pbt._vectorized import (
  PBTState,
  VectorizedPBT,
  gather_members,
  tournament_exploit,
  truncation_exploit,
  truncation_size,
  vectorized_pbt,
)
from minmaxlab.pbt._worker import (
  TrialTimeout,
  join_run,
  load_checkpoint,
  run_trial,
  serve_trials,
  worker_loop,
)

# An alias, not a second definition: the setter of hyperparameters in ``inject_hyperparams``
# states lives in ``minmaxlab.transforms``; vectorized PBT's explore step uses it, so ``pbt``
# re-exports the same function (``pbt.set_hyperparams is transforms.set_hyperparams``).
from minmaxlab.transforms import set_hyperparams

__all__ = [
  "CampaignFailed",
  "Categorical",
  "ConfigMismatch",
  "Continuous",
  "Controller",
  "ControllerConfig",
  "ControllerGone",
  "EarlyStop",
  "PBTState",
  "Ranking",
  "Store",
  "StoreError",
  "TaskSpec",
  "Trial",
  "TrialTimeout",
  "VectorizedPBT",
  "comparator_ranking",
  "explore",
  "explore_values",
  "exponential_decay",
  "gather_members",
  "join_run",
  "key_ranking",
  "load_checkpoint",
  "mpi_worker",
  "mpi_world",
  "named_task",
  "needed_trials",
  "pareto_fronts",
  "pareto_rank",
  "piecewise_constant",
  "replay",
  "resolve_task",
  "run_mpi",
  "run_trial",
  "sample_prior",
  "sample_values",
  "scalar",
  "serve_trials",
  "set_hyperparams",
  "task_spec",
  "tournament_exploit",
  "truncation_exploit",
  "truncation_size",
  "validate_space",
  "vectorized_pbt",
  "weighted_sum",
  "worker_loop",
]
