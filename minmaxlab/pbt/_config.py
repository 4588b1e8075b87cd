"""The settings of a black-box PBT campaign (:class:`ControllerConfig`), one frozen record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from minmaxlab.pbt._objectives import Ranking
from minmaxlab.pbt._selection import EarlyStop, Exploit


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControllerConfig:
  """How a :class:`minmaxlab.pbt.Controller` runs its campaign (keyword construction).

  Example:
    >>> config = ControllerConfig(population_size=8, num_trials=64, steps_per_trial=100)
    >>> dataclasses.replace(config, workers=4)  # another setting, the rest kept

  Attributes:
    population_size: members (may exceed ``workers``: budget mode).
    num_trials: total trials to run (the compute budget).
    steps_per_trial: training steps of one trial (the ``ready`` interval).
    workers: local worker processes, at most the population and the CPUs (one line on
      stderr when fewer than asked are started); ``0`` runs trials inline (one by one)
      unless ``external_workers``.
    external_workers: other processes (``python -m minmaxlab.pbt worker
      --workdir ...``, e.g. ``srun`` tasks on a shared file system) claim
      trials; the controller never trains inline. A dead external worker is
      noticed when its lease lapses.
    synchronous: generations: finished trials are used only when every trial
      of the generation is done (all see the same population); default
      asynchronous (each finished trial is used at once, no worker waits).
    exploit: ``"tournament"`` (default), ``"truncation"`` or ``"none"`` (random search).
    truncation_fraction, resample_probability, perturb_factors: as in
      :func:`minmaxlab.pbt.explore`.
    top_k: fittest checkpoints kept forever.
    seed: seeds the initial hyperparameters and every decision.
    initial_hparams: optional fixed values merged over the prior draws
      (e.g. schedule parameters not being explored).
    lease_s: a running trial whose lease (renewed by the worker) lapses is re-queued.
    poll_s: controller/worker polling period.
    max_attempts: a trial that failed this many times (an exception in the
      task, its worker process dying, its lease lapsing) is marked ``failed``
      with its last error and is not run again; its member continues no
      further (the rest of the campaign goes on).
    max_failed_trials: stop the campaign (:class:`CampaignFailed`, one line
      naming the trials and their errors) once this many trials failed;
      ``None``: go on while any member can continue.
    orphan_s: a worker whose controller's store heartbeat (rewritten every
      ``orphan_s / 6`` s) has not changed for this long exits; local workers
      also get SIGTERM from Linux as soon as the controller dies
      (``PR_SET_PDEATHSIG``) and exit once another controller takes over.
    ranking: how fitness compares (:class:`minmaxlab.pbt.Ranking`: default the
      scalar fitness; :func:`~minmaxlab.pbt.pareto_rank`,
      :func:`~minmaxlab.pbt.weighted_sum` or a user key/comparison for a task
      whose ``train`` returns a tuple of objectives); selection, ``top_k`` and
      the best trial use it.
    early_stop: :class:`minmaxlab.pbt.EarlyStop` (stop members below a fitness
      quantile after ``min_steps``), or ``None``.
    trial_timeout_s: a trial still training after this many seconds (a hung task) is
      stopped and counts a failed attempt: a worker process records it and exits (it is
      restarted); inline, ``TrialTimeout`` is raised in the task, and a task that does not
      return within as long again ends the controller's process (rerun to continue).
      ``None``: no limit. (A trial that ends the controller's process inline counts a failed
      attempt when the controller is started again.)
  """

  population_size: int
  num_trials: int
  steps_per_trial: int
  workers: int = 0
  exploit: Exploit = "tournament"
  truncation_fraction: float = 0.25
  resample_probability: float = 0.25
  perturb_factors: tuple[float, ...] = (0.8, 1.2)
  top_k: int = 1
  seed: int = 0
  initial_hparams: Mapping[str, Any] | None = None
  lease_s: float = 60.0
  poll_s: float = 0.05
  external_workers: bool = False
  synchronous: bool = False
  max_attempts: int = 3
  max_failed_trials: int | None = None
  orphan_s: float = 30.0
  ranking: Ranking | None = None
  early_stop: EarlyStop | None = None
  trial_timeout_s: float | None = None
