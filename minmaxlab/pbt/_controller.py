r"""Black-box population based training: a controller, a store and stateless workers.

The design of Li et al. (2019): the unit of work is a *trial* -- train a few
steps warm-started from a parent checkpoint with given hyperparameters -- and
a controller alone owns selection. Workers claim trials from the SQLite store
(:class:`Store`), so the population can be larger than the number of workers
(budget mode: trials queue), the controller never waits for a generation
(asynchronous), and every decision is a transaction in the store: a killed
controller resumes from it, a killed worker's trial is re-queued.

The controller composes four parts, each in its own module: the selection
policies (:mod:`minmaxlab.pbt._selection`, pure functions of the population
table and a seed: ``"tournament"``, ``"truncation"``, ``"none"``), the store
(:mod:`minmaxlab.pbt._store`, which owns all SQL), the lineage-aware checkpoint
garbage collector (:mod:`minmaxlab.pbt._gc`, with its bound on the checkpoints
kept) and the worker supervisor (:mod:`minmaxlab.pbt._supervisor`: local
worker processes and the controller's heartbeat). Every finished trial is an
*initiator*, so every trial takes part in at least one reproduction.

References:
  Li et al., "A Generalized Framework for Population Based Training", KDD 2019,
  https://arxiv.org/abs/1902.01894
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minmaxlab.pbt._campaign import (
  STOPPED,
  CampaignFailed,
  LeaseWatch,
  begin_epoch,
  cap_workers,
  check_limits,
  initialize,
  record_failed,
  set_flag,
)
from minmaxlab.pbt._config import ControllerConfig
from minmaxlab.pbt._fingerprint import ConfigMismatch, check_fingerprint, space_json
from minmaxlab.pbt._gc import check_checkpoints, collect_garbage, needed_trials, remove_strays
from minmaxlab.pbt._manifest import read_manifest, write_manifest
from minmaxlab.pbt._objectives import scalar
from minmaxlab.pbt._replay import replay
from minmaxlab.pbt._selection import (
  EarlyStop,
  Policy,
  initial_population,
  next_child,
)
from minmaxlab.pbt._space import Space, validate_space
from minmaxlab.pbt._status import campaign_status, population_rows
from minmaxlab.pbt._store import (
  CAMPAIGN,
  DONE,
  DRAIN,
  PENDING,
  RUNNING,
  STORE_FILE,
  Store,
  StoreError,
  Trial,
)
from minmaxlab.pbt._supervisor import Heartbeat, Supervisor
from minmaxlab.pbt._task import TaskSpec, resolve_task, task_spec
from minmaxlab.pbt._worker import FINISHED, INLINE_PREFIX, run_one

__all__ = ["CampaignFailed", "ConfigMismatch", "Controller", "needed_trials", "replay"]


class Controller:
  """Asynchronous black-box PBT over a store in ``workdir`` (see module doc).

  Example:
    >>> def init_fn(trial):  # a fresh state; also the structure to restore into
    ...   return {"w": np.zeros(3), "step": np.zeros((), np.int32)}
    >>> def train_fn(hparams, state, trial):  # train trial.steps steps
    ...   ...
    ...   return fitness, state
    >>> config = ControllerConfig(population_size=8, num_trials=64, steps_per_trial=100,
    ...                           workers=2)
    >>> space = {"lr": Continuous(low=1e-4, high=1e-1)}
    >>> c = Controller("runs/pbt", space, init_fn, train_fn, config=config)
    >>> summary = c.run()          # after a kill, the same call resumes

  Args:
    workdir: holds ``pbt.sqlite`` and ``checkpoints/``.
    space: the explored hyperparameters.
    task: the task by name, ``"package.module:function"`` (a function marked with
      :func:`minmaxlab.pbt.named_task`): ``function(**task_args)``
      returns an object with ``init(trial) -> state`` (a pytree of arrays, also
      the structure a checkpoint is restored into) and ``train(hparams, state,
      trial) -> (fitness, state)`` (higher fitness is better;
      ``trial.start_step`` lets it evaluate schedules), or the pair
      ``(init_fn, train_fn)``. Workers import it themselves: only the name and
      the JSON arguments are stored, never code. For a run in this process
      only (``workers=0``, no external workers), ``task`` and ``task_args``
      may instead be the two functions ``init_fn, train_fn``.
    task_args: keyword arguments of the task, JSON data (numbers, strings,
      lists, dicts).
    config: the campaign's settings (:class:`ControllerConfig`).

  A rerun on an existing store must have the same run-defining configuration
  (space, task and its arguments, population, trials, steps, selection,
  seed, ...): otherwise :class:`ConfigMismatch` names the changed fields.
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    space: Space,
    task: str | Callable,
    task_args: Mapping[str, Any] | Callable | None = None,
    *,
    config: ControllerConfig,
  ):
    if not isinstance(config, ControllerConfig):
      raise ValueError(f"config must be a pbt.ControllerConfig, got {type(config).__name__}")
    self.config = c = config
    validate_space(space)
    self.ranking = c.ranking or scalar()
    self.early_stop = None if c.early_stop is None else EarlyStop(*c.early_stop).validate()
    check_limits(
      max_attempts=c.max_attempts,
      max_failed_trials=c.max_failed_trials,
      orphan_s=c.orphan_s,
      trial_timeout_s=c.trial_timeout_s,
    )
    self.trial_timeout_s = None if c.trial_timeout_s is None else float(c.trial_timeout_s)
    if callable(task) and callable(task_args):
      if int(c.workers) != 0 or c.external_workers:
        raise ValueError(
          "worker processes run a named task: pass task='package.module:function' (and JSON"
          " task_args), not functions; functions can only run inline (workers=0)"
        )
      self.task: TaskSpec | None = None
      self._fns: tuple[Callable, Callable] | None = (task, task_args)
    else:
      self.task = task_spec(task, task_args)
      self._fns = None
    self.max_attempts = int(c.max_attempts)
    self.max_failed_trials = None if c.max_failed_trials is None else int(c.max_failed_trials)
    self.orphan_s = float(c.orphan_s)
    check_limits(c.population_size, c.num_trials, c.steps_per_trial, c.workers, c.top_k)
    self.policy = Policy(
      space=dict(space), exploit=c.exploit, truncation_fraction=c.truncation_fraction,
      resample_probability=c.resample_probability, perturb_factors=tuple(c.perturb_factors),
      ranking=self.ranking,
    ).validate(int(c.population_size))  # fmt: skip
    self.workdir = Path(workdir).expanduser().resolve()
    self.ckpt_root = self.workdir / "checkpoints"
    self.ckpt_root.mkdir(parents=True, exist_ok=True)
    self.store_path = str(self.workdir / STORE_FILE)
    self.space = dict(space)
    self.population_size, self.num_trials = int(c.population_size), int(c.num_trials)
    self.steps_per_trial = int(c.steps_per_trial)
    self.workers = cap_workers(int(c.workers), int(c.population_size))  # one line if fewer
    self.exploit, self.truncation_fraction = c.exploit, c.truncation_fraction
    self.resample_probability = c.resample_probability
    self.perturb_factors = tuple(c.perturb_factors)
    self.top_k, self.seed = int(c.top_k), int(c.seed)
    self.initial_hparams = dict(c.initial_hparams or {})
    self.lease_s, self.poll_s = float(c.lease_s), float(c.poll_s)
    self._leases = LeaseWatch(self.lease_s)
    self.external_workers = bool(c.external_workers)
    self.synchronous = bool(c.synchronous)
    self.store = Store(self.store_path)
    self.supervisor: Supervisor | None = None
    self.epoch = ""
    self.failed_seen: list[Trial] = []
    self._check_config()

  # --- configuration ------------------------------------------------------------------------
  @property
  def init_fn(self) -> Callable:
    return self._functions()[0]

  @property
  def train_fn(self) -> Callable:
    return self._functions()[1]

  def _functions(self) -> tuple[Callable, Callable]:
    if self._fns is None:
      self._fns = resolve_task(self.task)
    return self._fns

  def fingerprint(self) -> dict[str, Any]:
    """Everything that changes what the campaign computes (JSON data); stored
    with the campaign and compared on every rerun."""
    return {
      "space": space_json(self.space),
      "task": None if self.task is None else self.task.to_json(),
      "population_size": self.population_size,
      "num_trials": self.num_trials,
      "steps_per_trial": self.steps_per_trial,
      "exploit": self.exploit,
      "truncation_fraction": self.truncation_fraction,
      "resample_probability": self.resample_probability,
      "perturb_factors": list(self.perturb_factors),
      "seed": self.seed,
      "initial_hparams": self.initial_hparams,
      "synchronous": self.synchronous,
      "ranking": self.ranking.to_json(),
      "early_stop": None if self.early_stop is None else list(self.early_stop),
    }

  def _check_config(self) -> None:
    try:
      check_checkpoints(self.store)  # nothing is deleted by a store that lost the campaign
      check_fingerprint(self.store, self.fingerprint(), self.workdir)
    except (ConfigMismatch, StoreError):
      self.store.close()
      raise

  # --- decisions ----------------------------------------------------------------------------
  def _initialize(self) -> None:
    if not self.store.get("initialized", False):
      first = initial_population(self.seed, self.space, self.population_size, self.initial_hparams)
      initialize(self.store, first, self.steps_per_trial, self.fingerprint())
    campaign = self.store.get(CAMPAIGN)  # the workers copy it into each checkpoint's manifest
    if campaign is not None and read_manifest(self.workdir) != campaign:
      write_manifest(self.workdir, campaign)

  def _process(self, finished: list[Trial]) -> None:
    """Use finished trials (one transaction): enter them into the population,
    then create one child per trial (each trial is an initiator)."""
    with self.store.transaction() as db:
      self.store.mark_processed(db, [t.id for t in finished])
      for t in finished:
        self.store.set_member(db, t.member, t.id)
      population = {m: self.store.trial(i) for m, i in self.store.population().items()}
      stopped = set(self.store.get(STOPPED, []))
      for t in finished:
        if self.store.num_trials() >= self.num_trials:
          break
        if self.early_stop is not None and self.early_stop.hopeless(t, population, self.ranking):
          stopped.add(t.member)
          self.store.put(db, STOPPED, sorted(stopped))
          continue
        child = next_child(self.seed, t, population, self.policy)
        start = child.parent.start_step + child.parent.steps
        self.store.add_trial(
          db, t.member, child.parent, child.hparams, start, self.steps_per_trial, child.seed
        )

  def collect_garbage(self) -> list[int]:
    """Delete the checkpoints no trial can need any more; return their trial ids
    (:func:`minmaxlab.pbt._gc.collect_garbage`)."""
    return collect_garbage(self.store, self.top_k, self.ranking)

  # --- workers ------------------------------------------------------------------------------
  @property
  def restarted_workers(self) -> int:
    return 0 if self.supervisor is None else self.supervisor.restarted

  def _requeue_lapsed(self) -> None:
    lapsed = self._leases.lapsed(self.store.leases())  # on this process's monotonic clock
    if lapsed:
      with self.store.transaction() as db:
        self.store.fail_lapsed(db, lapsed, "the worker's lease lapsed")

  def _handle_failed(self) -> None:
    """Record newly failed trials (one line each) and apply ``max_failed_trials``."""
    self.failed_seen = record_failed(self.store, self.max_failed_trials)

  # --- the loop -----------------------------------------------------------------------------
  def status(self) -> dict[str, Any]:
    """Trial counts per status, failed trials, the best trial and the checkpoints on disk."""
    return {
      **campaign_status(self.store, self.ckpt_root, [t.id for t in self.failed_seen], self.ranking),
      "stopped_members": self.store.get(STOPPED, []),
    }

  def population_rows(self) -> list[dict[str, Any]]:
    """One row per member for a live table (:func:`minmaxlab.pbt._status.population_rows`)."""
    return population_rows(self.store)

  def run(
    self,
    timeout: float | None = None,
    on_progress: Callable | None = None,
    serve: Callable[[float], None] | None = None,
    budget_s: float | None = None,
  ) -> dict[str, Any]:
    """Run (or resume) until ``num_trials`` trials are done and processed, or
    until the wall-clock budget ``budget_s`` (seconds) is spent.

    At the budget no trial is handed out any more; the running trials finish
    and are processed, and the summary has ``budget_ended=True`` (pending
    trials stay queued: the same call with a new budget resumes them).
    ``timeout`` is a hard limit: :class:`TimeoutError`.

    On entry, trials left ``running`` by a previous controller's workers are
    re-queued (their late reports are ignored: a report must come from the
    worker holding the trial). Returns :meth:`status` plus ``max_checkpoints``
    (the most trial checkpoints on disk seen at once).

    ``on_progress(status)`` is called after every poll (``status`` as
    :meth:`status`); ``serve(seconds)``, if given, replaces the idle sleep
    between polls (the MPI backend answers its worker ranks there).

    The workdir's lock is held meanwhile: a controller of another process on the
    same workdir stops with :class:`minmaxlab.runner.WorkdirBusy` naming this one's pid.
    """
    from minmaxlab.runner import workdir_lock

    with workdir_lock(self.workdir):
      return self._run(timeout, on_progress, serve, budget_s)

  def _run(self, timeout, on_progress, serve, budget_s) -> dict[str, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    budget_end = None if budget_s is None else time.monotonic() + float(budget_s)
    draining = False
    self._initialize()
    self.epoch = uuid.uuid4().hex
    timing = {"lease_s": self.lease_s, "poll_s": self.poll_s, "orphan_s": self.orphan_s}
    timing["trial_timeout_s"] = self.trial_timeout_s
    task = None if self.task is None else self.task.to_json()
    begin_epoch(self.store, self.epoch, self.max_attempts, {"task": task, **timing})
    remove_strays(self.store)
    if self.supervisor is None:  # kept across runs: restarted_workers adds up
      self.supervisor = Supervisor(self.workdir, self.store, self.epoch)
    self.supervisor.epoch = self.epoch
    beat = Heartbeat(self.store_path, self.orphan_s / 6).start()
    max_ckpts = 0
    try:
      for _ in range(self.workers):
        self.supervisor.start()
      while True:
        self._handle_failed()
        finished = self.store.unprocessed(DONE)
        if not self.synchronous:
          for t in finished:
            self._process([t])
        elif finished and not self.store.with_status(PENDING, RUNNING):
          self._process(finished)  # a whole generation at once
        self.collect_garbage()
        status = self.status()
        max_ckpts = max(max_ckpts, status["checkpoints"])
        if on_progress is not None:
          on_progress(status)
        if status[PENDING] == 0 and status[RUNNING] == 0 and not self.store.unprocessed():
          remove_strays(self.store)
          break
        if draining and status[RUNNING] == 0 and not self.store.unprocessed(DONE):
          break
        if budget_end is not None and not draining and time.monotonic() > budget_end:
          draining = True  # workers take no new trial; the running ones finish
          set_flag(self.store, DRAIN, True)
          continue
        if deadline is not None and time.monotonic() > deadline:
          raise TimeoutError(f"PBT run did not finish in {timeout} s: {status}")
        if self.workers == 0 and not self.external_workers:
          self._run_one_inline()
        else:
          self.supervisor.reap(work_left=True)
          self._requeue_lapsed()
          (serve or time.sleep)(self.poll_s)
    finally:
      set_flag(self.store, FINISHED, True)
      self.supervisor.stop()
      beat.stop()
    return {
      **self.status(),
      "max_checkpoints": max_ckpts,
      "restarted_workers": self.restarted_workers,
      "budget_ended": draining,
    }

  def _run_one_inline(self) -> None:
    name = f"{INLINE_PREFIX}{os.getpid()}"
    run_one(
      self.store, name, self.ckpt_root, self.init_fn, self.train_fn, self.lease_s,
      self.trial_timeout_s,
    )  # fmt: skip

  def close(self) -> None:
    self.store.close()
