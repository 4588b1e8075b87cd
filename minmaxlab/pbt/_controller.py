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

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from minmaxlab.pbt._space import Space, explore_values, sample_values, validate_space
from minmaxlab.pbt._store import DONE, EPOCH, FAILED, MAX_ATTEMPTS, PENDING, RUNNING, Store, Trial
from minmaxlab.pbt._task import TaskSpec, resolve_task, task_spec
from minmaxlab.pbt._vectorized import truncation_size
from minmaxlab.pbt._worker import (
  FINISHED,
  HEARTBEAT,
  BrokenCheckpointError,
  _error_line,
  run_trial,
  worker_loop,
)

STORE_FILE = "pbt.sqlite"
TASK = "task"
CONFIG = "config"


class ConfigMismatch(ValueError):
  """The store in a workdir belongs to a campaign with another configuration."""


class CampaignFailed(RuntimeError):
  """More trials failed than the campaign's ``max_failed_trials`` allows."""


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


def _space_json(space: Space) -> dict:
  return {k: {"type": type(d).__name__, **d._asdict()} for k, d in sorted(space.items())}


def config_changes(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
  """``"field old -> new"`` for every field that differs (fields only one side
  has are compared too: a store written by an older version lacks some)."""
  out = []
  for k in sorted(set(stored) & set(current)):
    if json.dumps(stored[k], sort_keys=True) != json.dumps(current[k], sort_keys=True):
      old, new = json.dumps(stored[k], sort_keys=True), json.dumps(current[k], sort_keys=True)
      if len(old) + len(new) > 80:
        out.append(k)
      else:
        out.append(f"{k} {old} -> {new}")
  return out


def _worker_env() -> dict[str, str]:
  """The environment of a local worker: this process's import path (so the
  worker imports the same installed code) and JAX on the CPU unless set."""
  env = dict(os.environ)
  paths = [os.path.abspath(p or os.curdir) for p in sys.path if os.path.isdir(p or os.curdir)]
  env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
  env.setdefault("JAX_PLATFORMS", "cpu")
  return env


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
    max_attempts: int = 3,
    max_failed_trials: int | None = None,
    orphan_s: float = 30.0,
  ):
    validate_space(space)
    if int(max_attempts) < 1:
      raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
    if max_failed_trials is not None and int(max_failed_trials) < 1:
      raise ValueError(f"max_failed_trials must be >= 1 or None, got {max_failed_trials!r}")
    if not float(orphan_s) > 0:
      raise ValueError(f"orphan_s must be > 0, got {orphan_s!r}")
    if callable(task) and callable(task_args):
      if int(workers) != 0 or external_workers:
        raise ValueError(
          "worker processes run a named task: pass task='package.module:function' (and JSON"
          " task_args), not functions; functions can only run inline (workers=0)"
        )
      self.task: TaskSpec | None = None
      self._fns: tuple[Callable, Callable] | None = (task, task_args)
    else:
      self.task = task_spec(task, task_args)
      self._fns = None
    self.max_attempts = int(max_attempts)
    self.max_failed_trials = None if max_failed_trials is None else int(max_failed_trials)
    self.orphan_s = float(orphan_s)
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
    self.space = dict(space)
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
    self._procs: dict[str, subprocess.Popen] = {}
    self.restarted_workers = 0
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
      "space": _space_json(self.space),
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
    }

  def _check_config(self) -> None:
    stored = self.store.get(CONFIG)
    if stored is None or not self.store.get("initialized", False):
      return
    changed = config_changes(stored, json.loads(json.dumps(self.fingerprint())))
    if changed:
      self.store.close()
      raise ConfigMismatch(
        f"{self.workdir} holds a PBT campaign with another configuration ({'; '.join(changed)});"
        " rerun with the same configuration or use a new workdir"
      )

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
      self.store.put(db, CONFIG, self.fingerprint())

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
    """A local worker: ``python -m minmaxlab.pbt worker`` bound to this
    controller (its epoch and pid); it reads the named task from the store."""
    name = f"w{len(self._procs) + self.restarted_workers}-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", str(self.workdir)]
    cmd += ["--name", name, "--epoch", self.epoch, "--parent-pid", str(os.getpid())]
    self._procs[name] = subprocess.Popen(cmd, env=_worker_env(), stdin=subprocess.DEVNULL)

  def _reap_workers(self, work_left: bool) -> None:
    for name, proc in list(self._procs.items()):
      if proc.poll() is None:
        continue
      del self._procs[name]
      with self.store.transaction() as db:
        self.store.fail_running(
          db, "worker=?", (name,), f"worker process {name} exited with status {proc.returncode}"
        )
      if work_left:
        self.restarted_workers += 1
        self._start_worker()

  def _requeue_lapsed(self) -> None:
    with self.store.transaction() as db:
      self.store.fail_running(db, "lease_until < ?", (time.time(),), "the worker's lease lapsed")

  def _beat(self, stop: threading.Event) -> None:
    """The controller's heartbeat: rewritten until ``stop`` (own connection)."""
    store = Store(self.store_path)
    try:
      while True:
        with store.transaction() as db:
          store.put(db, HEARTBEAT, time.time())
        if stop.wait(self.orphan_s / 6):
          break
    finally:
      store.close()

  def _handle_failed(self) -> None:
    """Record newly failed trials (one line each) and apply ``max_failed_trials``."""
    new = self.store.trials("status=? AND processed=0", (FAILED,))
    if new:
      with self.store.transaction() as db:
        db.executemany("UPDATE trials SET processed=1 WHERE id=?", [(t.id,) for t in new])
      for t in new:
        print(
          f"PBT: trial {t.id} (member {t.member}) failed after {t.failures} attempts: {t.error}",
          file=sys.stderr,
          flush=True,
        )
    failed = self.store.trials("status=?", (FAILED,))
    self.failed_seen = failed
    if self.max_failed_trials is not None and len(failed) >= self.max_failed_trials:
      first = failed[0]
      raise CampaignFailed(
        f"PBT campaign stopped: {len(failed)} trial(s) failed (max_failed_trials="
        f"{self.max_failed_trials}); trial {first.id} after {first.failures} attempts:"
        f" {first.error}"
      )

  # --- the loop -----------------------------------------------------------------------------
  def status(self) -> dict[str, Any]:
    counts = self.store.counts()
    best = self.store.best()
    return {
      **counts,
      "failed_trials": [t.id for t in self.failed_seen],
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
    self.epoch = uuid.uuid4().hex
    with self.store.transaction() as db:
      self.store.requeue(db, "1")
      self.store.put(db, FINISHED, False)
      self.store.put(db, EPOCH, self.epoch)  # workers of an earlier controller stop
      self.store.put(db, MAX_ATTEMPTS, self.max_attempts)
      # any worker that joins with only the workdir gets the task's NAME from the store
      self.store.put(
        db,
        TASK,
        {
          "task": None if self.task is None else self.task.to_json(),
          "lease_s": self.lease_s,
          "poll_s": self.poll_s,
          "orphan_s": self.orphan_s,
        },
      )
    self._remove_strays()
    stop_beat = threading.Event()
    beat = threading.Thread(target=self._beat, args=(stop_beat,), daemon=True)
    beat.start()
    max_ckpts = 0
    try:
      for _ in range(self.workers):
        self._start_worker()
      while True:
        self._handle_failed()
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
        try:
          proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
          proc.terminate()
          try:
            proc.wait(timeout=10)
          except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
      self._procs.clear()
      stop_beat.set()
      beat.join()
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
      except Exception as e:  # counted against max_attempts; the campaign goes on
        self.store.fail(trial.id, name, _error_line(e))
        return
      self.store.complete(trial.id, name, fitness, ckpt)

  def close(self) -> None:
    self.store.close()


def replay(
  workdir: str | os.PathLike,
  init_fn: Callable | None = None,
  train_fn: Callable | None = None,
  trial_id: int | None = None,
) -> tuple[float, Any, list[Trial]]:
  """Re-train a lineage from scratch, following the hyperparameters (schedule
  parameters included) each of its trials used.

  Args:
    workdir: the run's directory (its ``pbt.sqlite``).
    init_fn, train_fn: the task's functions (default: the named task recorded
      in the store, imported here).
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
    stored = (store.get(CONFIG) or {}).get("task")
  finally:
    store.close()
  if init_fn is None or train_fn is None:
    if stored is None:
      raise ValueError(f"{workdir}: no named task recorded; pass init_fn and train_fn")
    init_fn, train_fn = resolve_task(task_spec(stored["target"], stored["args"]))
  state = init_fn(chain[0])
  fitness = None
  for t in chain:
    fitness, state = train_fn(dict(t.hparams), state, t)
  return float(fitness), state, chain


def join_run(
  workdir: str | os.PathLike,
  name: str | None = None,
  wait_s: float = 120.0,
  epoch: str | None = None,
) -> int:
  """Work for the controller of ``workdir`` from any process that sees its files.

  Waits up to ``wait_s`` seconds for the controller to publish its task in the
  store, then claims and runs trials until the run is finished (see
  :func:`worker_loop`). The store holds only the task's name and JSON
  arguments; the task is imported here, so the same code must be installed.
  The worker exits when the controller's heartbeat stops for the run's
  ``orphan_s`` (or, with ``epoch``, when another controller takes over).
  Returns the number of trials completed.
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
  if not isinstance(task, dict) or not isinstance(task.get("task"), dict):
    raise ValueError(f"{store_path}: no named task in the store (functions run inline only)")
  init_fn, train_fn = resolve_task(task_spec(task["task"]["target"], task["task"]["args"]))
  return worker_loop(
    str(store_path),
    str(workdir / "checkpoints"),
    init_fn,
    train_fn,
    name=name,
    lease_s=float(task["lease_s"]),
    poll_s=float(task["poll_s"]),
    epoch=epoch,
    orphan_s=float(task["orphan_s"]),
  )
