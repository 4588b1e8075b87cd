"""minmaxlab.pbt black-box mode: store, controller, workers, GC, resume, replay."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minmaxlab import pbt
from tests import _procs

SPACE = {
  "lr": pbt.Continuous(low=1e-3, high=0.5),
  "decay": pbt.Continuous(low=0.9, high=1.0, log=False),
}
TARGET = np.array([1.0, -2.0, 3.0, 0.5])
KILL_ENV = "MINMAXLAB_TEST_PBT_KILL_TRIAL"


def init_fn(trial):
  return {"w": np.zeros(4, np.float32), "step": np.zeros((), np.int32)}


def train_fn(hparams, state, trial):
  """Gradient descent on 0.5 ||w - target||^2 with lr(t) = lr * decay^t."""
  if os.environ.get(KILL_ENV) == str(trial.id) and trial.attempt == 1:
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)  # a real kill in the middle of the trial
  w, step = np.asarray(state["w"], np.float64), int(state["step"])
  assert step == trial.start_step  # warm-started from the right checkpoint
  for t in range(trial.start_step, trial.start_step + trial.steps):
    w = w - pbt.exponential_decay(t, hparams["lr"], hparams["decay"]) * (w - TARGET)
  fitness = -float(np.log10(np.sum((w - TARGET) ** 2) + 1e-30))
  return fitness, {"w": w.astype(np.float32), "step": np.asarray(step + trial.steps, np.int32)}


@pbt.named_task
def quadratic_task():
  """The named task of these tests (workers import it: ``TASK``)."""
  return init_fn, train_fn


TASK = "tests.pbt.test_pbt_controller:quadratic_task"


def _controller(workdir, **kw):
  args = dict(population_size=4, num_trials=16, steps_per_trial=3, seed=0, poll_s=0.02)
  args.update(kw)
  return pbt.Controller(
    workdir,
    SPACE,
    TASK,
    config=pbt.ControllerConfig(**args),
  )


def _check_lineage(c, num_trials):
  trials = c.store.trials()
  assert len(trials) == num_trials == len({t.id for t in trials})
  assert all(t.status == "done" and t.processed for t in trials)
  by_id = {t.id: t for t in trials}
  for t in trials:
    if t.parent_id is None:
      assert t.start_step == 0
    else:
      p = by_id[t.parent_id]
      assert t.start_step == p.start_step + p.steps and p.id < t.id
      # the parent's checkpoint (an earlier attempt's if the parent was re-run since)
      assert Path(t.parent_ckpt).name.startswith(f"trial_{p.id:06d}_a")
    for name, dim in SPACE.items():
      assert dim.low <= t.hparams[name] <= dim.high
  assert sorted(c.store.population()) == list(range(c.population_size))
  # every kept checkpoint is on disk, every deleted one is gone, nothing else is there
  kept = {Path(t.ckpt).name for t in trials if not t.ckpt_deleted}
  assert kept == {p.name for p in c.ckpt_root.iterdir()}
  assert needed_subset(c) <= {t.id for t in trials if not t.ckpt_deleted}
  return trials


def needed_subset(c):
  return pbt.needed_trials(c.store.trials(), c.store.population(), c.top_k)


def test_inline_run_deterministic_bounded_disk_and_replay(tmp_path):
  runs = []
  for name in ("a", "b"):
    c = _controller(tmp_path / name, workers=0, num_trials=20)
    summary = c.run(timeout=60)
    trials = _check_lineage(c, 20)
    runs.append([(t.parent_id, t.hparams, t.seed, t.fitness) for t in trials])
    # bounded; the guarantee is 2 * population + top_k (+1 unprocessed), this
    # deterministic run stays within population + top_k + 1
    assert summary["max_checkpoints"] <= c.population_size + c.top_k + 1
    assert summary["checkpoints"] <= c.population_size + c.top_k
    c.close()
  assert runs[0] == runs[1]
  fitness = [r[3] for r in runs[0]]
  assert max(fitness[-4:]) > max(fitness[:4])  # the population improves
  assert any(r[0] is not None and r[1] != dict(runs[0][r[0] - 1][1]) for r in runs[0])  # explored
  # the best trial's checkpoint is kept and holds what replay reproduces from scratch
  c = _controller(tmp_path / "a", workers=0, num_trials=20)
  best = c.store.best()
  restored = pbt.load_checkpoint(best.ckpt, init_fn(best))
  fit, state, chain = pbt.replay(tmp_path / "a", init_fn, train_fn)
  assert chain[-1].id == best.id and chain[0].parent_id is None
  assert fit == pytest.approx(best.fitness, rel=1e-6)
  np.testing.assert_allclose(np.asarray(restored["w"]), state["w"], rtol=1e-6)
  assert int(restored["step"]) == best.start_step + best.steps == int(state["step"])
  c.close()


def test_truncation_mode(tmp_path):
  c = _controller(
    tmp_path, workers=0, exploit="truncation", truncation_fraction=0.25, num_trials=12
  )
  c.run(timeout=60)
  trials = _check_lineage(c, 12)
  # a child copies another member's checkpoint only through exploitation
  assert any(
    t.parent_id is not None and c.store.trial(t.parent_id).member != t.member for t in trials
  )
  c.close()


def test_random_search_baseline(tmp_path):
  c = _controller(tmp_path, workers=0, exploit="none", num_trials=12)
  c.run(timeout=60)
  trials = _check_lineage(c, 12)
  for t in trials:  # every lineage keeps its member and its initial hyperparameters
    if t.parent_id is not None:
      p = c.store.trial(t.parent_id)
      assert p.member == t.member and p.hparams == t.hparams
  c.close()


def test_workers_async_budget_mode_and_worker_kill(tmp_path, monkeypatch):
  # 4 members, 2 worker processes (budget mode); trial 6's first attempt kills its worker
  monkeypatch.setenv(KILL_ENV, "6")
  c = _controller(tmp_path, workers=2, num_trials=12)
  summary = c.run(timeout=90)
  trials = _check_lineage(c, 12)
  assert c.store.trial(6).attempt == 2 and summary["restarted_workers"] >= 1
  assert all(t.attempt == 1 for t in trials if t.id != 6)
  assert summary["max_checkpoints"] <= c.population_size + c.top_k + 2 + 2
  c.close()


_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from tests.pbt.test_pbt_controller import _controller
c = _controller({workdir!r}, workers=1, num_trials=14)
c.run(timeout=120)
"""


def test_controller_kill_and_resume(tmp_path):
  root = str(Path(__file__).resolve().parents[2])
  env = {**os.environ, KILL_ENV: "", "JAX_PLATFORMS": "cpu"}
  proc = subprocess.Popen(
    [sys.executable, "-c", _CHILD.format(root=root, workdir=str(tmp_path))],
    env=env,
    start_new_session=True,
  )
  store = None
  try:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
      if (tmp_path / "pbt.sqlite").exists():
        store = store or pbt.Store(tmp_path / "pbt.sqlite")
        if store.counts()["done"] >= 5:
          break
      assert proc.poll() is None, "the controller finished before it could be killed"
      time.sleep(0.05)
    else:
      pytest.fail("no progress before the kill")
  finally:
    os.killpg(proc.pid, signal.SIGKILL)  # controller and its worker, mid-run
    proc.wait()
  done_before = {t.id: t.fitness for t in store.trials("status='done'")}
  store.close()
  c = _controller(tmp_path, workers=0, num_trials=14)
  c.run(timeout=60)
  trials = _check_lineage(c, 14)
  for t in trials:  # nothing finished before the kill was lost or re-run
    if t.id in done_before:
      assert t.fitness == done_before[t.id] and t.attempt == 1
  c.close()


class _Sim:
  """Drive the real controller and store with fake checkpoints (no training)."""

  def __init__(self, workdir, top_k):
    self.c = _controller(workdir, workers=0, num_trials=14, population_size=4, top_k=top_k)
    self.c._initialize()

  def claim(self):
    return self.c.store.claim("sim", lease_s=1e9)

  def finish(self, trial, fitness):
    path = pbt._worker.checkpoint_dir(self.c.ckpt_root, trial)
    path.mkdir(parents=True)
    return self.c.store.complete(trial.id, "sim", fitness, str(path))

  def check(self):
    c = self.c
    for t in c.store.trials():
      if t.status in ("pending", "running") and t.parent_id is not None:
        assert Path(t.parent_ckpt).is_dir(), f"parent of pending/running trial {t.id} deleted"
    for tid in c.store.population().values():
      assert Path(c.store.trial(tid).ckpt).is_dir()
    done = sorted((t for t in c.store.trials("status='done'")), key=lambda t: (-t.fitness, t.id))
    for t in done[: c.top_k]:
      assert Path(t.ckpt).is_dir()
    for t in c.store.trials("status='done' AND processed=0"):
      assert Path(t.ckpt).is_dir()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
  events=st.lists(
    st.tuples(
      st.sampled_from(["claim", "claim", "finish", "finish", "kill", "process", "gc"]),
      st.integers(0, 7),
      st.integers(-5, 5),
    ),
    min_size=20,
    max_size=120,
  ),
  top_k=st.integers(0, 3),
)
def test_gc_never_deletes_a_needed_checkpoint(events, top_k):
  with tempfile.TemporaryDirectory() as d:
    sim = _Sim(d, top_k)
    running = []
    try:
      for kind, i, fitness in events:
        if kind == "claim":
          t = sim.claim()
          if t is not None:
            running.append(t)
        elif kind == "finish" and running:
          sim.finish(running.pop(i % len(running)), float(fitness))
        elif kind == "kill" and running:  # a worker dies: its trial goes back to the queue
          t = running.pop(i % len(running))
          with sim.c.store.transaction() as db:
            sim.c.store.requeue(db, "id=?", (t.id,))
        elif kind == "process":
          for t in sim.c.store.trials("status='done' AND processed=0"):
            sim.c._process([t])
          sim.c.collect_garbage()
        elif kind == "gc":  # the controller may collect before it processes new results
          sim.c.collect_garbage()
        sim.check()
    finally:
      sim.c.close()


def test_schedules():
  np.testing.assert_allclose(pbt.exponential_decay(np.arange(3), 1.0, 0.5), [1.0, 0.5, 0.25])
  np.testing.assert_allclose(pbt.exponential_decay(4, 2.0, 0.5, transition_steps=2), 0.5)
  np.testing.assert_array_equal(
    pbt.piecewise_constant(np.array([0, 9, 10, 25]), [10, 20], [1.0, 0.1, 0.01]),
    [1.0, 1.0, 0.1, 0.01],
  )
  with pytest.raises(ValueError):
    pbt.piecewise_constant(0, [10], [1.0])
  with pytest.raises(ValueError):
    pbt.exponential_decay(0, 1.0, 0.5, transition_steps=0)


def test_controller_validation(tmp_path):
  with pytest.raises(ValueError, match="population_size"):
    _controller(tmp_path, population_size=1)
  with pytest.raises(ValueError, match="num_trials"):
    _controller(tmp_path, num_trials=2)
  with pytest.raises(ValueError, match="exploit"):
    _controller(tmp_path, exploit="roulette")


def test_gc_keeps_the_parent_of_a_running_trial_that_left_the_population():
  """Member m's running child warm-starts from member j's checkpoint P; j's own
  child finishes first, so P leaves the population: P must survive GC."""
  for seed in range(20):
    with tempfile.TemporaryDirectory() as d:
      sim = _Sim(d, top_k=0)
      sim.c.seed = seed
      try:
        roots = [sim.claim() for _ in range(4)]
        for t, f in zip(roots, [3.0, 2.0, 1.0, 0.0]):
          sim.finish(t, f)
        for t in sim.c.store.trials("status='done' AND processed=0"):
          sim.c._process([t])
        children = [sim.claim() for _ in range(4)]
        by_member = {t.member: t for t in children}
        cross = [t for t in children if sim.c.store.trial(t.parent_id).member != t.member]
        if not cross:
          continue
        c = cross[0]
        parent = sim.c.store.trial(c.parent_id)
        sim.finish(by_member[parent.member], -10.0)  # j's child: worse, not top-k
        for t in sim.c.store.trials("status='done' AND processed=0"):
          sim.c._process([t])
        sim.c.collect_garbage()
        assert sim.c.store.population()[parent.member] != parent.id
        assert Path(parent.ckpt).is_dir()
        assert not sim.c.store.trial(parent.id).ckpt_deleted
        sim.check()
        return
      finally:
        sim.c.close()
  pytest.fail("no seed gave a cross-member parent")


def test_lapsed_lease_is_requeued_and_late_report_ignored(tmp_path):
  c = _controller(tmp_path, workers=0, lease_s=0.05)  # timed on the controller's clock
  c._initialize()
  t = c.store.claim("ghost", lease_s=0.01)
  other = c.store.claim("other", lease_s=60)
  assert other.id != t.id
  c._requeue_lapsed()  # first seen running
  time.sleep(0.1)
  assert c.store.renew(other.id, "other", 60)  # renewed: keeps its lease
  c._requeue_lapsed()
  assert c.store.trial(t.id).status == "pending" and c.store.trial(other.id).status == "running"
  again = c.store.claim("new", lease_s=60)
  assert again.id == t.id and again.attempt == 2
  assert not c.store.complete(t.id, "ghost", 1.0, "/nowhere")  # the lost worker's report
  assert not c.store.renew(t.id, "ghost", 60)
  assert c.store.complete(t.id, "new", 2.0, "/somewhere")
  assert c.store.trial(t.id).fitness == 2.0
  c.close()


def test_every_public_name_is_documented():
  # the names themselves are pinned in tests/test_public_api.py (the one API pin file)
  for name in pbt.__all__:
    assert getattr(pbt, name).__doc__, name


def test_corrupt_parent_checkpoint_is_rerun_from_its_parent(tmp_path):
  ref = _controller(tmp_path / "ref", workers=0, num_trials=16)
  ref.run(timeout=60)
  reference = {t.id: t.fitness for t in ref.store.trials()}
  ref.close()
  c = _controller(tmp_path / "run", workers=0, num_trials=16)
  damaged = []

  def corrupt(status):
    if damaged or status["done"] < 9:
      return
    pending = c.store.trials("status='pending' AND parent_id IS NOT NULL")
    parent = c.store.trial(pending[0].parent_id)
    for f in Path(parent.ckpt).rglob("*"):
      if f.is_file() and f.name not in ("meta.json", "campaign.json"):  # (its manifest: kept)
        f.write_bytes(b"garbage")  # damaged on disk after it was reported done
    damaged.append(parent)

  c.run(timeout=60, on_progress=corrupt)
  trials = _check_lineage(c, 16)
  (parent,) = damaged
  again = c.store.trial(parent.id)
  assert again.attempt == 2 and again.ckpt != parent.ckpt
  # trials are deterministic: the re-run and everything after it match the undamaged run
  assert {t.id: t.fitness for t in trials} == reference
  c.close()


def test_broken_parent_reruns_ancestors_without_checkpoints(tmp_path):
  store = pbt.Store(tmp_path / "s.sqlite")
  ckpt = tmp_path / "ck"

  def run(worker, fitness=0.0):
    t = store.claim(worker, 60)
    path = ckpt / f"trial_{t.id:06d}_a{t.attempt}"
    path.mkdir(parents=True)
    store.complete(t.id, worker, fitness, str(path))
    return t

  with store.transaction() as db:
    a = store.add_trial(db, 0, None, {"lr": 0.1}, 0, 5, 1)
  run("w")
  with store.transaction() as db:
    b = store.add_trial(db, 0, store.trial(a), {"lr": 0.2}, 5, 5, 2)
  run("w")
  with store.transaction() as db:  # A's checkpoint collected; C warm-starts from B
    db.execute("UPDATE trials SET ckpt_deleted=1 WHERE id=?", (a,))
    c = store.add_trial(db, 0, store.trial(b), {"lr": 0.3}, 10, 5, 3)
  assert store.claim("w", 60).id == c
  assert store.report_broken_parent(c, "other") == []  # only the holder may report
  assert store.report_broken_parent(c, "w") == [b, a]
  assert [t.status for t in store.trials()] == ["pending"] * 3
  order = []
  for _ in range(3):  # blocked children wait for their re-run parents
    t = store.claim("x", 60)
    assert store.claim("y", 60) is None  # the others wait for this one
    order.append(t.id)
    path = ckpt / f"trial_{t.id:06d}_a{t.attempt}"
    path.mkdir(parents=True)
    store.complete(t.id, "x", 1.0, str(path))
  assert order == [a, b, c]
  assert store.trial(c).parent_ckpt == store.trial(b).ckpt
  store.close()


def test_external_worker_joins_through_the_store(tmp_path):
  """A worker started on its own (as under srun/mpirun) with only the workdir."""
  root = Path(__file__).resolve().parents[2]
  env = {**os.environ, KILL_ENV: "", "JAX_PLATFORMS": "cpu"}
  cmd = [
    sys.executable,
    "-m",
    "minmaxlab.pbt",
    "worker",
    "--workdir",
    str(tmp_path),
    "--name",
    "ext",
  ]
  proc = _procs.start(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
  try:
    c = _controller(tmp_path, workers=0, external_workers=True, num_trials=8, lease_s=30)
    c.run(timeout=_procs.scaled(90))
    out, _ = proc.communicate(timeout=_procs.scaled(60))
  finally:
    _procs.kill_group(proc)
  trials = _check_lineage(c, 8)
  assert {t.worker for t in trials} == {"ext"} and "8 trials" in out
  c.close()


def test_synchronous_generations(tmp_path):
  c = _controller(tmp_path, workers=0, synchronous=True, num_trials=16)
  c.run(timeout=60)
  trials = _check_lineage(c, 16)
  # generation g = trials 4g+1 .. 4g+4, all starting at step 3g, one per member
  for g in range(4):
    gen = trials[4 * g : 4 * g + 4]
    assert {t.start_step for t in gen} == {3 * g} and {t.member for t in gen} == set(range(4))
  times = dict(c.store._db.execute("SELECT id, created FROM trials"))
  ends = dict(c.store._db.execute("SELECT id, finished FROM trials"))
  for g in range(1, 4):  # a generation is created only after the previous one all finished
    assert min(times[i] for i in range(4 * g + 1, 4 * g + 5)) >= max(
      ends[i] for i in range(4 * g - 3, 4 * g + 1)
    )
  c.close()


def _done_trial(tid, member, fitness, hparams):
  return pbt.Trial(
    id=tid,
    member=member,
    parent_id=None,
    parent_ckpt=None,
    hparams=hparams,
    start_step=0,
    steps=3,
    seed=0,
    status="done",
    attempt=1,
    worker="w",
    fitness=fitness,
    ckpt="c",
    ckpt_deleted=False,
    processed=True,
  )


@pytest.mark.parametrize("initiator_wins", [True, False])
def test_tournament_child_is_the_winner_with_mutated_hyperparameters(tmp_path, initiator_wins):
  """Li et al. 2019 initiator-based binary tournament: the child warm-starts from
  the WINNER's checkpoint with the winner's hyperparameters explored, also when
  the winner is the initiator itself (every reproduction explores)."""
  c = _controller(tmp_path, resample_probability=0.0, perturb_factors=(0.8, 1.2))
  hp_init = {"lr": 0.1, "decay": 0.95}
  hp_opp = {"lr": 0.02, "decay": 0.92}
  initiator = _done_trial(5, 0, 3.0 if initiator_wins else 1.0, hp_init)
  opponent = _done_trial(6, 1, 2.0, hp_opp)
  winner = initiator if initiator_wins else opponent
  for seed in range(20):
    rng = np.random.default_rng(seed)
    parent, child = _selection.choose_parent(rng, initiator, {0: initiator, 1: opponent}, c.policy)
    assert parent.id == winner.id
    for name, dim in SPACE.items():
      ratio = child[name] / winner.hparams[name]
      clipped = child[name] in (dim.low, dim.high)
      assert clipped or np.isclose(ratio, 0.8) or np.isclose(ratio, 1.2), (name, ratio)
    assert child != winner.hparams  # mutated: at least lr moved (never clipped here)
  c.close()


# --- the controller's parts, each alone ---------------------------------------------------------
from minmaxlab.pbt import _gc, _selection, _supervisor  # noqa: E402
from minmaxlab.pbt._worker import HEARTBEAT  # noqa: E402


def test_initial_population_is_a_pure_function_of_the_seed():
  a = _selection.initial_population(3, SPACE, 5, {"decay": 0.95})
  assert a == _selection.initial_population(3, SPACE, 5, {"decay": 0.95})
  assert a != _selection.initial_population(4, SPACE, 5, {"decay": 0.95})
  assert len(a) == 5 and len({s for _, s in a}) == 5
  for hp, _ in a:
    assert hp["decay"] == 0.95 and SPACE["lr"].low <= hp["lr"] <= SPACE["lr"].high


def _table(fitnesses, hparams=None):
  hp = hparams or {"lr": 0.1, "decay": 0.95}
  return {m: _done_trial(10 + m, m, f, dict(hp)) for m, f in enumerate(fitnesses)}


def test_truncation_policy_bottom_copies_top_and_top_keeps_itself():
  policy = _selection.Policy(
    space=SPACE,
    exploit="truncation",
    truncation_fraction=0.25,
    resample_probability=0.0,
    perturb_factors=(0.8, 1.2),
  ).validate(8)
  population = _table([8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
  tops = {population[0].id, population[1].id}  # n = ceil(8 * 0.25) = 2
  for seed in range(10):
    rng = np.random.default_rng(seed)
    parent, hp = _selection.choose_parent(rng, population[7], population, policy)
    assert parent.id in tops and hp != parent.hparams  # explored
    parent, hp = _selection.choose_parent(rng, population[3], population, policy)
    assert parent.id == population[3].id and hp == population[3].hparams


def test_none_policy_continues_every_lineage_unchanged():
  policy = _selection.Policy(space=SPACE, exploit="none")
  population = _table([1.0, 5.0, 3.0])
  for t in population.values():
    child = _selection.next_child(0, t, population, policy)
    assert child.parent is t and child.hparams == t.hparams


def test_next_child_depends_only_on_the_seed_and_the_initiator():
  policy = _selection.Policy(space=SPACE, exploit="tournament", resample_probability=0.5)
  population = _table([1.0, 2.0, 3.0, 4.0])
  a = _selection.next_child(7, population[0], population, policy)
  assert a == _selection.next_child(7, population[0], dict(population), policy)
  draws = {_selection.next_child(s, population[0], population, policy).seed for s in range(8)}
  assert len(draws) == 8


def test_policy_validation():
  with pytest.raises(ValueError, match="exploit"):
    _selection.Policy(space=SPACE, exploit="roulette").validate(4)
  with pytest.raises(ValueError, match="truncation"):
    _selection.Policy(space=SPACE, exploit="truncation", truncation_fraction=0.9).validate(4)


def _store_with(tmp_path, rows):
  """A store holding ``rows`` = (member, parent_id, status, fitness) with checkpoints on disk."""
  store = pbt.Store(tmp_path / "pbt.sqlite")
  root = tmp_path / "checkpoints"
  root.mkdir()
  with store.transaction() as db:
    for member, parent_id, _, _ in rows:
      parent = None if parent_id is None else store.trial(parent_id)
      store.add_trial(db, member, parent, {"lr": 0.1}, 0, 1, 0)
  for tid, (_, _, status, fitness) in enumerate(rows, start=1):
    if status == "pending":
      continue
    assert store.claim(f"w{tid}", 60.0).id == tid
    if status == "done":
      ckpt = root / f"trial_{tid:06d}_a1"
      ckpt.mkdir()
      assert store.complete(tid, f"w{tid}", fitness, str(ckpt))
  return store, root


def test_garbage_collector_keeps_population_parents_top_k_and_unprocessed(tmp_path):
  rows = [
    (0, None, "done", 1.0),  # 1: parent of pending 7 (left the population)
    (1, None, "done", 9.0),  # 2: the fittest (top_k=1)
    (0, None, "done", 2.0),  # 3: member 0's current trial
    (1, None, "done", 3.0),  # 4: superseded, not needed -> deleted
    (1, None, "done", 4.0),  # 5: member 1's current trial
    (2, None, "done", 0.5),  # 6: finished, not processed yet
    (0, 1, "pending", None),  # 7
  ]
  store, root = _store_with(tmp_path, rows)
  with store.transaction() as db:
    store.mark_processed(db, [1, 2, 3, 4, 5])
    store.set_member(db, 0, 3)
    store.set_member(db, 1, 5)
  assert _gc.needed_trials(store.trials(), store.population(), 1) == {1, 2, 3, 5, 6}
  assert _gc.collect_garbage(store, top_k=1) == [4]
  assert store.trial(4).ckpt_deleted and not Path(store.trial(4).ckpt).exists()
  kept = {p.name for p in root.iterdir()}
  assert kept == {f"trial_{i:06d}_a1" for i in (1, 2, 3, 5, 6)}
  assert _gc.collect_garbage(store, top_k=1) == []  # idempotent
  store.close()


def test_remove_strays_keeps_live_and_running_checkpoints_only(tmp_path):
  store, root = _store_with(tmp_path, [(0, None, "done", 1.0), (1, None, "running", None)])
  (root / "trial_000002_a1").mkdir()  # being written by the running trial
  (root / "trial_000001_a0").mkdir()  # a lost earlier attempt
  (root / ".trash-trial_000009_a1-abc").mkdir()  # a crash in the middle of a removal
  _gc.remove_strays(store)
  assert {p.name for p in root.iterdir()} == {"trial_000001_a1", "trial_000002_a1"}
  store.close()


class _ScriptedSupervisor(_supervisor.Supervisor):
  """Starts ``python -c CODE`` instead of a real worker."""

  code = "import sys; sys.exit(3)"

  def command(self, name):
    return [sys.executable, "-c", self.code]


def test_supervisor_fails_a_dead_workers_trial_and_restarts_it(tmp_path):
  store, _ = _store_with(tmp_path, [(0, None, "pending", None)])
  sup = _ScriptedSupervisor(tmp_path, store, "epoch")
  name = sup.start()
  assert store.claim(name, 60.0).id == 1
  sup.procs[name].wait(timeout=_procs.scaled(60))
  assert sup.reap(work_left=True) == [name] and sup.restarted == 1 and len(sup.procs) == 1
  t = store.trial(1)
  assert t.status == "pending" and t.failures == 1 and "exited with status 3" in t.error
  (other,) = sup.procs
  sup.procs[other].wait(timeout=_procs.scaled(60))
  assert sup.reap(work_left=False) == [other] and not sup.procs and sup.restarted == 1
  sup.stop()
  store.close()


def test_supervisor_stop_terminates_a_worker_that_does_not_exit(tmp_path):
  store = pbt.Store(tmp_path / "pbt.sqlite")
  sup = _ScriptedSupervisor(tmp_path, store, "epoch")
  sup.code = "import time; time.sleep(600)"
  proc = sup.procs[sup.start()]
  sup.stop(wait_s=0.2, term_s=_procs.scaled(30))
  assert proc.returncode is not None and not sup.procs
  store.close()


def test_heartbeat_rewrites_the_store_until_stopped(tmp_path):
  store = pbt.Store(tmp_path / "pbt.sqlite")
  beat = _supervisor.Heartbeat(store.path, 0.01).start()
  deadline = time.monotonic() + _procs.scaled(30)
  first = None
  while time.monotonic() < deadline:
    value = store.get(HEARTBEAT)
    first = first if first is not None else value
    if first is not None and value != first:
      break
    time.sleep(0.01)
  assert first is not None and store.get(HEARTBEAT) != first  # beats, repeatedly
  beat.stop()
  last = store.get(HEARTBEAT)
  time.sleep(0.05)
  assert store.get(HEARTBEAT) == last
  store.close()


def test_no_sql_outside_the_store():
  """All SQL of minmaxlab.pbt lives in the store (_store.py, and its file's schema in
  _sqlite_file.py): no SQL keyword in a string elsewhere."""
  import ast
  import re

  sql = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE FROM|CREATE TABLE)\b|\w+=\?")
  src = Path(pbt.__file__).parent
  found = []
  for f in sorted(src.glob("*.py")):
    if f.name in ("_store.py", "_sqlite_file.py"):
      continue
    for node in ast.walk(ast.parse(f.read_text())):
      if isinstance(node, ast.Constant) and isinstance(node.value, str) and sql.search(node.value):
        found.append(f"{f.name}:{node.lineno}")
  assert not found, found


def test_store_opens_while_another_process_holds_the_new_file(tmp_path, monkeypatch):
  """SQLite answers "database is locked" at once, without its busy handler, when two
  connections switch a new file to WAL together (a monitor opening the store while the
  controller creates it: a flake of the reliability tests). The store retries the switch
  until its timeout, then raises."""
  import sqlite3

  from minmaxlab.pbt import _store

  real_connect, failures = sqlite3.connect, []

  class Busy:  # a connection whose first two WAL switches find the file locked
    def __init__(self, *a, **k):
      self._db = real_connect(*a, **k)

    def execute(self, sql, *args):
      if sql == "PRAGMA journal_mode=WAL" and len(failures) < 2:
        failures.append(sql)
        raise sqlite3.OperationalError("database is locked")
      return self._db.execute(sql, *args)

    def close(self):
      self._db.close()

  monkeypatch.setattr(_store.sqlite3, "connect", Busy)
  store = pbt.Store(tmp_path / "pbt.sqlite")
  assert len(failures) == 2 and store.counts()["running"] == 0
  store.close()
  failures.clear()
  with pytest.raises(sqlite3.OperationalError, match="locked"):
    pbt.Store(tmp_path / "other.sqlite", timeout=0.0)  # no time to retry: the error
