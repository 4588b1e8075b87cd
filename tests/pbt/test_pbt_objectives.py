"""Black-box PBT: multi-objective rankings, the wall-clock budget, early stopping and
dtype-exact checkpoints (bit-exact replay)."""

import functools

import jax
import numpy as np
import pytest

from minmaxlab import pbt
from minmaxlab.pbt._selection import Policy, choose_parent

# Hand-computed fronts (every objective maximised): a, b, c are non-dominated; d = (1, 1) is
# dominated by c only, e = (2, 0.5) by a and c, and d, e do not dominate each other; f = (0, 0)
# is dominated by d and e; g = (NaN -> -inf, 0) is dominated by f too.
POINTS = {
  "a": (3.0, 1.0),
  "b": (1.0, 3.0),
  "c": (2.0, 2.0),
  "d": (1.0, 1.0),
  "e": (2.0, 0.5),
  "f": (0.0, 0.0),
  "g": (float("nan"), 0.0),
}
FRONTS = {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1, "f": 2, "g": 3}


def test_pareto_fronts_hand_computed():
  names = sorted(POINTS)
  fronts = pbt.pareto_fronts([POINTS[n] for n in names])
  assert dict(zip(names, fronts.tolist())) == FRONTS
  scores = pbt.pareto_rank().scores([POINTS[n] for n in names])
  assert dict(zip(names, scores.tolist())) == {n: -float(k) for n, k in FRONTS.items()}
  # equal points do not dominate each other; three objectives
  assert pbt.pareto_fronts([(1, 1, 1), (1, 1, 1), (0, 2, 0), (0, 1, 0)]).tolist() == [0, 0, 0, 1]


def test_weighted_key_and_comparator_rankings():
  rows = [(1.0, 2.0), (3.0, -1.0), (0.0, 0.0)]
  np.testing.assert_allclose(pbt.weighted_sum([0.5, 2.0]).scores(rows), [4.5, -0.5, 0.0])
  np.testing.assert_allclose(pbt.key_ranking(min).scores(rows), [1.0, -1.0, 0.0])

  def lexicographic(a, b):  # > 0: a better
    return (a > b) - (a < b)

  rows = [(1.0, 0.0), (2.0, -5.0), (1.0, 0.0), (1.0, 3.0)]
  s = pbt.comparator_ranking(lexicographic).scores(rows)
  assert s.tolist() == [0.0, 2.0, 0.0, 1.0]  # ties share a level
  assert pbt.scalar().scores([(2.0,), (float("nan"),)]).tolist() == [2.0, -np.inf]
  with pytest.raises(ValueError, match="tuple fitness needs ranking"):
    pbt.scalar().scores([(1.0, 2.0)])
  with pytest.raises(ValueError, match="weights"):
    pbt.weighted_sum([])
  spec = pbt.weighted_sum([1.0, 2.0]).to_json()
  assert pbt.Ranking.from_json(spec) == pbt.weighted_sum([1.0, 2.0])


def _trial(i, member, objectives):
  return pbt.Trial(
    id=i,
    member=member,
    parent_id=None,
    parent_ckpt=None,
    hparams={"lr": 0.1 * i},
    start_step=0,
    steps=1,
    seed=i,
    status="done",
    attempt=1,
    worker=None,
    fitness=objectives[0],
    ckpt=None,
    ckpt_deleted=False,
    processed=True,
    objectives=tuple(objectives),
  )


def test_selection_uses_the_ranking():
  space = {"lr": pbt.Continuous(low=1e-3, high=1.0)}
  # c = (2, 2) dominates d = (1, 1): under Pareto d copies c in a tournament; under the
  # weighted sum (1, -1) d (score 0) ties c (score 0) and wins (the initiator wins ties)
  pop = {0: _trial(1, 0, (2.0, 2.0)), 1: _trial(2, 1, (1.0, 1.0))}
  rng = np.random.default_rng(0)
  pareto = Policy(space=space, exploit="tournament", ranking=pbt.pareto_rank())
  parent, _ = choose_parent(rng, pop[1], pop, pareto)
  assert parent.id == 1
  weighted = Policy(space=space, exploit="tournament", ranking=pbt.weighted_sum([1.0, -1.0]))
  parent, _ = choose_parent(np.random.default_rng(0), pop[1], pop, weighted)
  assert parent.id == 2
  # truncation: front 2 (f) is the bottom quarter of 4 and copies from front 0
  pop = {m: _trial(m + 1, m, POINTS[n]) for m, n in enumerate("adef")}
  trunc = Policy(
    space=space, exploit="truncation", truncation_fraction=0.25, ranking=pbt.pareto_rank()
  )
  parent, _ = choose_parent(np.random.default_rng(1), pop[3], pop, trunc)
  assert parent.id == 1  # a, the only front-0 member
  # a trial that reported NaN (stored without a fitness) loses every tournament
  nan = _trial(3, 1, (0.0,))._replace(fitness=None, objectives=None)
  pop = {0: _trial(1, 0, (-5.0,)), 1: nan}
  parent, _ = choose_parent(
    np.random.default_rng(0), nan, pop, Policy(space=space, exploit="tournament")
  )
  assert parent.id == 1


# --- campaigns (inline, in this process) ------------------------------------------------------
SPACE = {
  "lr": pbt.Continuous(low=1e-3, high=0.5),
  "decay": pbt.Continuous(low=0.9, high=1.0, log=False),
}
TARGET = np.array([1.0, -2.0, 3.0, 1 / 3])


def init64(trial):
  return {"w": np.zeros(4, np.float64), "step": np.zeros((), np.int64)}


def train64(hparams, state, trial, two=False):
  """Float64 gradient descent on 0.5 ||w - target||^2 (the state stays float64)."""
  w, step = state["w"], int(state["step"])
  assert w.dtype == np.float64 and step == trial.start_step
  for t in range(trial.start_step, trial.start_step + trial.steps):
    w = w - pbt.exponential_decay(t, hparams["lr"], hparams["decay"]) * (w - TARGET)
  loss = float(np.sum((w - TARGET) ** 2))
  fitness = (-loss, -hparams["lr"]) if two else -loss
  return fitness, {"w": w, "step": np.asarray(step + trial.steps, np.int64)}


def _run(workdir, train=train64, run_kw=None, **kw):
  args = dict(population_size=4, num_trials=12, steps_per_trial=3, seed=0, poll_s=0.01)
  args.update(kw)
  c = pbt.Controller(
    workdir,
    SPACE,
    init64,
    train,
    config=pbt.ControllerConfig(**args),
  )
  try:
    return c.run(timeout=120, **(run_kw or {})), c.store.trials()
  finally:
    c.close()


def test_checkpoints_keep_float64_and_replay_is_bit_exact(tmp_path):
  assert not jax.config.jax_enable_x64  # the case that used to come back float32
  summary, trials = _run(tmp_path)
  best = max(trials, key=lambda t: (t.fitness, -t.id))
  restored = pbt.load_checkpoint(best.ckpt, init64(best))
  assert restored["w"].dtype == np.float64 and restored["step"].dtype == np.int64
  fitness, state, chain = pbt.replay(tmp_path, init64, train64)
  assert chain[-1].id == best.id == summary["best_trial"]
  assert len(chain) > 1  # warm-started at least once
  assert fitness == best.fitness  # bit-exact, not approx
  assert np.array_equal(state["w"], restored["w"]) and state["w"].dtype == np.float64


def test_multi_objective_campaign(tmp_path):
  two = functools.partial(train64, two=True)
  with pytest.raises(ValueError, match="tuple fitness needs ranking"):
    _run(tmp_path / "scalar", train=two)
  summary, trials = _run(tmp_path / "pareto", train=two, ranking=pbt.pareto_rank())
  assert len(trials) == 12 and all(len(t.objectives) == 2 for t in trials)
  assert all(t.fitness == t.objectives[0] for t in trials)
  # the reported best is on the first Pareto front of all finished trials
  front0 = {
    t.id for t, k in zip(trials, pbt.pareto_fronts([t.objectives for t in trials])) if k == 0
  }
  assert summary["best_trial"] in front0
  assert tuple(summary["best_objectives"]) == trials[summary["best_trial"] - 1].objectives
  weighted = pbt.weighted_sum([1.0, 0.0])
  summary, _ = _run(tmp_path / "weighted", train=two, ranking=weighted, num_trials=8)
  scalar_summary, _ = _run(tmp_path / "plain", num_trials=8)
  # weights (1, 0) rank exactly as the scalar fitness: the same campaign
  assert summary["best_trial"] == scalar_summary["best_trial"]
  assert summary["best_fitness"] == scalar_summary["best_fitness"]


def slow64(hparams, state, trial):
  import time

  time.sleep(0.05)
  return train64(hparams, state, trial)


def test_budget_ends_the_campaign_and_a_rerun_resumes_it(tmp_path):
  summary, trials = _run(tmp_path / "b", train=slow64, run_kw={"budget_s": 0.25})
  done = [t for t in trials if t.status == "done"]
  assert summary["budget_ended"] and 0 < len(done) < 12
  assert summary["running"] == 0 and summary["pending"] >= 1
  assert all(t.processed for t in done)
  # the same call without a budget finishes it: the same campaign as an uninterrupted one
  summary, resumed = _run(tmp_path / "b", train=slow64)
  assert not summary["budget_ended"] and summary["done"] == 12
  _, straight = _run(tmp_path / "straight")
  key = [(t.parent_id, t.hparams, t.seed, t.fitness) for t in resumed]
  assert key == [(t.parent_id, t.hparams, t.seed, t.fitness) for t in straight]


def fixed_fitness(hparams, state, trial):
  _, state = train64(hparams, state, trial)
  return hparams["lr"], state  # each member keeps its lr (exploit "none"): a fixed fitness


def test_early_stop_rule(tmp_path):
  rule = pbt.EarlyStop(min_steps=6, quantile=0.5)
  summary, trials = _run(
    tmp_path,
    train=fixed_fitness,
    exploit="none",
    synchronous=True,
    num_trials=16,
    early_stop=rule,
  )
  first = {t.member: t.fitness for t in trials[:4]}
  median = float(np.median(list(first.values())))
  want = sorted(m for m, f in first.items() if f < median)  # stopped after 2 trials (6 steps)
  assert summary["stopped_members"] == want and len(want) == 2
  assert len(trials) == 16 and summary["done"] == 16
  counts = {m: sum(t.member == m for t in trials) for m in range(4)}
  assert all(counts[m] == 2 for m in want)  # generations 1 and 2, then stopped
  assert sum(counts.values()) == 16  # their budget went to the others
  with pytest.raises(ValueError, match="quantile"):
    pbt.EarlyStop(3, 1.5).validate()


def test_a_spent_budget_hands_out_no_trial(tmp_path):
  """While the store drains (the budget is spent) no worker claims a trial; the
  controller's next run clears the flag."""
  from minmaxlab.pbt._campaign import set_flag
  from minmaxlab.pbt._store import DRAIN

  c = pbt.Controller(
    tmp_path,
    SPACE,
    init64,
    train64,
    config=pbt.ControllerConfig(population_size=2, num_trials=2, steps_per_trial=1),
  )
  c._initialize()
  set_flag(c.store, DRAIN, True)
  assert c.store.claim("w", 60) is None and c.store.counts()["pending"] == 2
  set_flag(c.store, DRAIN, False)
  assert c.store.claim("w", 60).id == 1
  c.close()


def test_budget_lets_the_running_trial_finish(tmp_path, monkeypatch):
  """A worker (a thread here, same protocol as a process) is inside a trial when the
  budget ends: the controller waits for it, processes it and stops.

  The controller's clock is the test's: it runs at a twentieth of real time until the trial
  has started and then jumps past the budget, and the trial returns only once the controller
  has set the drain flag; the worker starts from the run's first progress call, after the run
  began its epoch (a trial claimed before that is re-queued as a previous controller's). So
  the order (trial running -> budget spent -> trial finishes) holds however slowly a loaded
  machine schedules the threads."""
  import threading
  import time
  import types

  from minmaxlab.pbt import _controller
  from minmaxlab.pbt._store import DRAIN, Store

  started = threading.Event()
  t0 = time.monotonic()

  def monotonic():  # 20x slower than real time, +2 s (past the budget) once the trial runs
    return (time.monotonic() - t0) / 20 + (2.0 if started.is_set() else 0.0)

  monkeypatch.setattr(
    _controller, "time", types.SimpleNamespace(monotonic=monotonic, sleep=time.sleep)
  )

  def slow(hparams, state, trial):
    started.set()
    store = Store(c.store_path)
    try:
      for _ in range(6000):  # the controller sets the flag within a poll or two
        if store.get(DRAIN, False):
          break
        time.sleep(0.01)
      drained_while_running.append(bool(store.get(DRAIN, False)))
    finally:
      store.close()
    return train64(hparams, state, trial)

  drained_while_running = []
  c = pbt.Controller(
    tmp_path,
    SPACE,
    "tests.pbt.test_pbt_controller:quadratic_task",
    config=pbt.ControllerConfig(
      population_size=2, num_trials=4, steps_per_trial=1, external_workers=True, poll_s=0.01
    ),
  )
  worker = threading.Thread(
    target=pbt.worker_loop, args=(c.store_path, str(c.ckpt_root), init64, slow, "t", 60.0, 0.01)
  )

  def start_worker(status):  # once the run has begun its epoch: a trial claimed before it
    if worker.ident is None:  # would be re-queued as a previous controller's
      worker.start()

  try:
    summary = c.run(timeout=30, budget_s=1.0, on_progress=start_worker)
  finally:
    if worker.ident is not None:
      worker.join(timeout=60)
  assert drained_while_running == [True]  # the budget ended while the trial ran
  assert summary["budget_ended"] and summary["done"] == 1 and summary["running"] == 0
  t = c.store.trial(1)
  assert t.status == "done" and t.processed and t.attempt == 1
  assert [x.id for x in c.store.with_status("pending")] == [2, 3]  # trial 1's child queued
  c.close()
