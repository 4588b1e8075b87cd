r"""Black-box population based training: a controller, a store and stateless workers.

The design of Li et al. (2019): the unit of work is a *trial* -- train a few
steps warm-started from a parent checkpoint with given hyperparameters -- and
a controller alone owns selection. Workers claim trials from the SQLite store
(:class:`Store`), so the population can be larger than the number of workers
(budget mode: trials queue), the controller never waits for a generation
(asynchronous), and every decision is a transaction in the store: a killed
controller resumes from it, a killed worker's trial is re-queued.

Evolution (each finished trial is an *initiator*, so every trial takes part in
at least one reproduction):

- ``"tournament"`` (Li et al. 2019, initiator-based binary tournament): the
  initiator meets a uniformly drawn other member of the current population;
  the fitter of the two (the initiator on a tie) is the winner, and the child
  warm-starts from the WINNER's checkpoint with the winner's hyperparameters
  explored (x0.8/x1.2 or resampled, clipped). An initiator that wins is
  therefore mutated too: every reproduction explores, as in the paper, not
  only those that copy another member.
- ``"truncation"``: an initiator in the bottom ``truncation_fraction`` of the
  current population copies a uniformly drawn top member and explores.
- ``"none"``: every member continues its own lineage with its initial
  hyperparameters: random search with the same trials, steps and checkpoints
  (the baseline PBT is compared against).

Each decision draws from ``numpy.random.default_rng([seed, trial_id])``, so it
does not depend on how many times the controller was restarted.

Lineage-aware garbage collection (:func:`needed_trials`): a trial's checkpoint
is kept while it parents a pending or running trial, is a member of the
current population, is among the ``top_k`` fittest, or is finished but not yet
processed; a child is reported done only after its own checkpoint is durable,
so a parent is never deleted before its child's checkpoint exists. Disk use is
bounded: each member has at most one pending or running trial, so at most
``2 * population_size + top_k`` checkpoints are kept (a member's current one
and its child's parent, which may have left the population since the child
was created), plus those of finished trials not yet processed (at most one
per worker) and those being written. In practice it stays near
``population_size + top_k`` (measured: 12 for 8 members and top_k 2, see
experiments/pbt/README.md).

References:
  Li et al., "A Generalized Framework for Population Based Training", KDD 2019,
  https://arxiv.org/abs/1902.01894
"""

from __future__ import annotations

import base64
import multiprocessing
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from minmaxlab.pbt._space import Space, explore_values, sample_values, validate_space
from minmaxlab.pbt._store import DONE, PENDING, RUNNING, Store, Trial
from minmaxlab.pbt._vectorized import truncation_size
from minmaxlab.pbt._worker import FINISHED, BrokenCheckpointError, run_trial, worker_loop

STORE_FILE = "pbt.sqlite"
TASK = "task"


def needed_trials(trials: Iterable[Trial], population: Mapping[int, int], top_k: int) -> set[int]:
  """Ids of the trials whose checkpoints must be kept.

  A trial is needed if it parents a pending or running trial, is in the
  current population, is among the ``top_k`` fittest finished trials, or is
  finished but not yet processed by the controller.
  """
  trials = list(trials)
  needed = set(population.values())
  for t in trials:
    if t.status in (PENDING, RUNNING) and t.parent_id is not None:
      needed.add(t.parent_id)
    if t.status == DONE and not t.processed:
      needed.add(t.id)
  done = [t for t in trials if t.status == DONE and t.fitness is not None]
  done.sort(key=lambda t: (-t.fitness, t.id))
  needed.update(t.id for t in done[: max(int(top_k), 0)])
  return needed


def _remove(path: str | os.PathLike) -> None:
  p = Path(path)
  if p.exists():
    trash = p.with_name(f".trash-{p.name}-{uuid.uuid4().hex[:6]}")
    p.rename(trash)  # atomic: a reader sees the checkpoint or nothing
    shutil.rmtree(trash, ignore_errors=True)


def _worker_main(store_path, ckpt_root, init_fn, train_fn, name, lease_s, poll_s):
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  worker_loop(store_path, ckpt_root, init_fn, train_fn, name=name, lease_s=lease_s, poll_s=poll_s)


class Controller:
  """Asynchronous black-box PBT over a store in ``workdir`` (see module doc).

  Example:
    >>> def init_fn(trial):  # a fresh state; also the structure to restore into
    ...   return {"w": np.zeros(3), "step": np.zeros((), np.int32)}
    >>> def train_fn(hparams, state, trial):  # train trial.steps steps
    ...   ...
    ...   return fitness, state
    >>> c = Controller("runs/pbt", {"lr": Continuous(1e-4, 1e-1)}, init_fn, train_fn,
    ...                population_size=8, num_trials=64, steps_per_trial=100, workers=2)
    >>> summary = c.run()          # after a kill, the same call resumes

  Args:
    workdir: holds ``pbt.sqlite`` and ``checkpoints/``.
    space: the explored hyperparameters.
    init_fn: ``(trial) -> state`` pytree of arrays (picklable for workers).
    train_fn: ``(hparams, state, trial) -> (fitness, state)`` (picklable);
      higher fitness is better; ``trial.start_step`` lets it evaluate schedules.
    population_size: members (may exceed ``workers``: budget mode).
    num_trials: total trials to run (the compute budget).
    steps_per_trial: training steps of one trial (the ``ready`` interval).
    workers: local worker processes; ``0`` runs trials inline (one by one)
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
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    space: Space,
    init_fn: Callable,
    train_fn: Callable,
    *,
    population_size: int,
    num_trials: int,
    steps_per_trial: int,
    workers: int = 0,
    exploit: str = "tournament",
    truncation_fraction: float = 0.25,
    resample_probability: float = 0.25,
    perturb_factors: tuple[float, ...] = (0.8, 1.2),
    top_k: int = 1,
    seed: int = 0,
    initial_hparams: Mapping[str, Any] | None = None,
    lease_s: float = 60.0,
    poll_s: float = 0.05,
    external_workers: bool = False,
    synchronous: bool = False,
  ):
    validate_space(space)
    if int(population_size) < 2:
      raise ValueError(f"population_size must be >= 2, got {population_size!r}")
    if int(num_trials) < int(population_size):
      raise ValueError(f"num_trials must be >= population_size, got {num_trials!r}")
    if int(steps_per_trial) < 1 or int(workers) < 0 or int(top_k) < 0:
      raise ValueError("steps_per_trial must be >= 1, workers and top_k >= 0")
    if exploit not in ("tournament", "truncation", "none"):
      raise ValueError(f"exploit must be 'tournament', 'truncation' or 'none', got {exploit!r}")
    if exploit == "truncation":
      truncation_size(int(population_size), truncation_fraction)
    self.workdir = Path(workdir).expanduser().resolve()
    self.ckpt_root = self.workdir / "checkpoints"
    self.ckpt_root.mkdir(parents=True, exist_ok=True)
    self.store_path = str(self.workdir / STORE_FILE)
    self.space, self.init_fn, self.train_fn = dict(space), init_fn, train_fn
    self.population_size, self.num_trials = int(population_size), int(num_trials)
    self.steps_per_trial, self.workers = int(steps_per_trial), int(workers)
    self.exploit, self.truncation_fraction = exploit, truncation_fraction
    self.resample_probability, self.perturb_factors = resample_probability, tuple(perturb_factors)
    self.top_k, self.seed = int(top_k), int(seed)
    self.initial_hparams = dict(initial_hparams or {})
    self.lease_s, self.poll_s = float(lease_s), float(poll_s)
    self.external_workers = bool(external_workers)
    self.synchronous = bool(synchronous)
    self.store = Store(self.store_path)
    self._procs: dict[str, multiprocessing.Process] = {}
    self._ctx = multiprocessing.get_context("spawn")
    self.restarted_workers = 0

  # --- decisions ----------------------------------------------------------------------------
  def _initialize(self) -> None:
    if self.store.get("initialized", False):
      return
    rng = np.random.default_rng([self.seed, 0])
    with self.store.transaction() as db:
      for m in range(self.population_size):
        hp = {**sample_values(rng, self.space), **self.initial_hparams}
        self.store.add_trial(db, m, None, hp, 0, self.steps_per_trial, int(rng.integers(2**31)))
      self.store.put(db, "initialized", True)
      self.store.put(
        db,
        "config",
        {
          "population_size": self.population_size,
          "num_trials": self.num_trials,
          "steps_per_trial": self.steps_per_trial,
          "exploit": self.exploit,
          "seed": self.seed,
        },
      )

  def _choose_parent(self, rng, t: Trial, population: dict[int, Trial]) -> tuple[Trial, dict]:
    others = [p for m, p in sorted(population.items()) if m != t.member and p.fitness is not None]
    if not others or self.exploit == "none":
      return t, dict(t.hparams)
    if self.exploit == "tournament":
      opponent = others[int(rng.integers(len(others)))]
      winner = opponent if opponent.fitness > t.fitness else t
      return winner, self._explore(rng, winner.hparams)
    members = sorted(population.values(), key=lambda p: (-p.fitness, p.id))
    n = truncation_size(len(members), self.truncation_fraction) if len(members) >= 2 else 0
    if n and t.id in {p.id for p in members[len(members) - n :]}:
      top = members[:n]
      source = top[int(rng.integers(n))]
      return source, self._explore(rng, source.hparams)
    return t, dict(t.hparams)

  def _explore(self, rng, hparams):
    return explore_values(rng, hparams, self.space, self.resample_probability, self.perturb_factors)

  def _process(self, finished: list[Trial]) -> None:
    """Use finished trials (one transaction): enter them into the population,
    then create one child per trial (each trial is an initiator)."""
    with self.store.transaction() as db:
      for t in finished:
        db.execute("UPDATE trials SET processed=1 WHERE id=?", (t.id,))
        self.store.set_member(db, t.member, t.id)
      population = {m: self.store.trial(i) for m, i in self.store.population().items()}
      for t in finished:
        rng = np.random.default_rng([self.seed, t.id])
        created = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        if created >= self.num_trials:
          break
        parent, hp = self._choose_parent(rng, t, population)
        self.store.add_trial(
          db,
          t.member,
          parent,
          hp,
          parent.start_step + parent.steps,
          self.steps_per_trial,
          int(rng.integers(2**31)),
        )

  def collect_garbage(self) -> list[int]:
    """Delete the checkpoints no trial can need any more; return their trial ids."""
    with self.store.transaction() as db:
      needed = needed_trials(self.store.trials(), self.store.population(), self.top_k)
      doomed = [
        t
        for t in self.store.trials("status=? AND ckpt IS NOT NULL AND ckpt_deleted=0", (DONE,))
        if t.id not in needed
      ]
      db.executemany("UPDATE trials SET ckpt_deleted=1 WHERE id=?", [(t.id,) for t in doomed])
    for t in doomed:  # marked first: a crash here only leaves an unreferenced directory
      _remove(t.ckpt)
    return [t.id for t in doomed]

  def _remove_strays(self) -> None:
    """Directories of lost attempts and of deleted checkpoints (after a crash)."""
    keep = {str(Path(t.ckpt)) for t in self.store.trials("ckpt IS NOT NULL AND ckpt_deleted=0")}
    busy = {t.id for t in self.store.trials("status=?", (RUNNING,))}
    for p in self.ckpt_root.iterdir():
      if str(p) in keep:
        continue
      if p.name.startswith("trial_") and int(p.name.split("_")[1]) in busy:
        continue
      if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)

  # --- workers ------------------------------------------------------------------------------
  def _start_worker(self) -> None:
    name = f"w{len(self._procs) + self.restarted_workers}-{uuid.uuid4().hex[:6]}"
    proc = self._ctx.Process(
      target=_worker_main,
      args=(
        self.store_path,
        str(self.ckpt_root),
        self.init_fn,
        self.train_fn,
        name,
        self.lease_s,
        self.poll_s,
      ),
      name=name,
    )
    proc.start()
    self._procs[name] = proc

  def _reap_workers(self, work_left: bool) -> None:
    for name, proc in list(self._procs.items()):
      if proc.is_alive():
        continue
      proc.join()
      del self._procs[name]
      with self.store.transaction() as db:
        self.store.requeue(db, "worker=?", (name,))
      if work_left:
        self.restarted_workers += 1
        self._start_worker()

  def _requeue_lapsed(self) -> None:
    with self.store.transaction() as db:
      self.store.requeue(db, "lease_until < ?", (time.time(),))

  # --- the loop -----------------------------------------------------------------------------
  def status(self) -> dict[str, Any]:
    counts = self.store.counts()
    best = self.store.best()
    return {
      **counts,
      "best_fitness": None if best is None else best.fitness,
      "best_trial": None if best is None else best.id,
      "checkpoints": sum(1 for p in self.ckpt_root.iterdir() if p.name.startswith("trial_")),
    }

  def population_rows(self) -> list[dict[str, Any]]:
    """One row per member for a live table: its newest trial and its last result.

    Keys: ``member``, ``trial`` (the member's newest trial), ``parent``,
    ``status`` (of that trial), ``hparams`` (that trial's), ``fitness`` (of the
    member's current population entry, ``None`` before its first result) and
    ``fitness_trial`` (the trial that fitness belongs to).
    """
    population = self.store.population()
    newest = self.store.trials("id IN (SELECT MAX(id) FROM trials GROUP BY member)")
    rows = []
    for t in sorted(newest, key=lambda t: t.member):
      current = population.get(t.member)
      fit = None if current is None else self.store.trial(current).fitness
      rows.append(
        {
          "member": t.member,
          "trial": t.id,
          "parent": t.parent_id,
          "status": t.status,
          "hparams": dict(t.hparams),
          "fitness": fit,
          "fitness_trial": current,
        }
      )
    return rows

  def run(
    self,
    timeout: float | None = None,
    on_progress: Callable | None = None,
    serve: Callable[[float], None] | None = None,
  ) -> dict[str, Any]:
    """Run (or resume) until ``num_trials`` trials are done and processed.

    On entry, trials left ``running`` by a previous controller's workers are
    re-queued (their late reports are ignored: a report must come from the
    worker holding the trial). Returns :meth:`status` plus ``max_checkpoints``
    (the most trial checkpoints on disk seen at once).

    ``on_progress(status)`` is called after every poll (``status`` as
    :meth:`status`); ``serve(seconds)``, if given, replaces the idle sleep
    between polls (the MPI backend answers its worker ranks there).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    self._initialize()
    with self.store.transaction() as db:
      self.store.requeue(db, "1")
      self.store.put(db, FINISHED, False)
      # any worker that joins with only the workdir gets the task from the store
      self.store.put(
        db,
        TASK,
        base64.b64encode(
          pickle.dumps((self.init_fn, self.train_fn, self.lease_s, self.poll_s))
        ).decode(),
      )
    self._remove_strays()
    for _ in range(self.workers):
      self._start_worker()
    max_ckpts = 0
    try:
      while True:
        finished = self.store.trials("status=? AND processed=0", (DONE,))
        if not self.synchronous:
          for t in finished:
            self._process([t])
        elif finished and not self.store.trials("status IN (?, ?)", (PENDING, RUNNING)):
          self._process(finished)  # a whole generation at once
        self.collect_garbage()
        status = self.status()
        max_ckpts = max(max_ckpts, status["checkpoints"])
        if on_progress is not None:
          on_progress(status)
        if status[PENDING] == 0 and status[RUNNING] == 0 and not self.store.trials("processed=0"):
          self._remove_strays()
          break
        if deadline is not None and time.monotonic() > deadline:
          raise TimeoutError(f"PBT run did not finish in {timeout} s: {status}")
        if self.workers == 0 and not self.external_workers:
          self._run_one_inline()
        else:
          self._reap_workers(work_left=True)
          self._requeue_lapsed()
          (serve or time.sleep)(self.poll_s)
    finally:
      with self.store.transaction() as db:
        self.store.put(db, FINISHED, True)
      for proc in self._procs.values():
        proc.join(timeout=30)
        if proc.is_alive():
          proc.terminate()
          proc.join()
      self._procs.clear()
    return {
      **self.status(),
      "max_checkpoints": max_ckpts,
      "restarted_workers": self.restarted_workers,
    }

  def _run_one_inline(self) -> None:
    name = f"inline-{os.getpid()}"
    trial = self.store.claim(name, self.lease_s)
    if trial is not None:
      try:
        fitness, ckpt = run_trial(trial, self.ckpt_root, self.init_fn, self.train_fn)
      except BrokenCheckpointError:
        self.store.report_broken_parent(trial.id, name)
        return
      self.store.complete(trial.id, name, fitness, ckpt)

  def close(self) -> None:
    self.store.close()


def replay(
  workdir: str | os.PathLike, init_fn: Callable, train_fn: Callable, trial_id: int | None = None
) -> tuple[float, Any, list[Trial]]:
  """Re-train a lineage from scratch, following the hyperparameters (schedule
  parameters included) each of its trials used.

  Args:
    workdir: the run's directory (its ``pbt.sqlite``).
    init_fn, train_fn: as given to :class:`Controller`.
    trial_id: the lineage's last trial (default: the fittest trial).

  Returns:
    ``(fitness, state, lineage)``: the final fitness and state of the replay and
    the chain of trials it followed (root first).
  """
  store = Store(Path(workdir) / STORE_FILE)
  try:
    if trial_id is None:
      best = store.best()
      if best is None:
        raise ValueError(f"no finished trial in {workdir}")
      trial_id = best.id
    chain = store.lineage(trial_id)
  finally:
    store.close()
  state = init_fn(chain[0])
  fitness = None
  for t in chain:
    fitness, state = train_fn(dict(t.hparams), state, t)
  return float(fitness), state, chain


def join_run(workdir: str | os.PathLike, name: str | None = None, wait_s: float = 120.0) -> int:
  """Work for the controller of ``workdir`` from any process that sees its files.

  Waits up to ``wait_s`` seconds for the controller to publish its task in the
  store, then claims and runs trials until the run is finished (see
  :func:`worker_loop`). The task's functions are unpickled by reference, so the
  same code must be importable here. Returns the number of trials completed.
  """
  workdir = Path(workdir).expanduser().resolve()
  store_path = workdir / STORE_FILE
  deadline = time.monotonic() + wait_s
  while True:
    if store_path.exists():
      store = Store(store_path)
      try:
        task = store.get(TASK)
      finally:
        store.close()
      if task is not None:
        break
    if time.monotonic() > deadline:
      raise TimeoutError(f"no PBT controller published a task in {workdir} within {wait_s} s")
    time.sleep(0.1)
  init_fn, train_fn, lease_s, poll_s = pickle.loads(base64.b64decode(task))
  return worker_loop(
    str(store_path),
    str(workdir / "checkpoints"),
    init_fn,
    train_fn,
    name=name,
    lease_s=lease_s,
    poll_s=poll_s,
  )
