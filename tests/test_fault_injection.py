"""Fault injection: what a long campaign can trust (issue 14).

PBT: a trial failing every time stops after ``max_attempts`` (and the campaign
by ``max_failed_trials``), a rerun with another configuration refuses naming
the fields, workers end with their controller (parent-death signal, store
heartbeat, controller epoch), and the store holds no code (named tasks only).
"""

import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minmaxlab import pbt
from tests import _procs

ROOT = Path(__file__).resolve().parents[1]
SPACE = {"lr": pbt.Continuous(low=1e-3, high=0.5)}


def _init(trial):
  return {"w": np.zeros(2, np.float32), "step": np.zeros((), np.int32)}


@pbt.named_task
def flaky_task(fail_trial: int = -1, sleep_s: float = 0.0):
  """A toy task whose trial ``fail_trial`` raises on every attempt."""

  def train(hparams, state, trial):
    if trial.id == fail_trial:
      raise ValueError(f"trial {trial.id}: checkpoint at step 5000")
    time.sleep(sleep_s)
    w = np.asarray(state["w"]) + hparams["lr"]
    return float(-np.sum((w - 1.0) ** 2)), {"w": w, "step": state["step"] + trial.steps}

  return _init, train


def not_a_task():  # importable, but not declared a task
  raise AssertionError("must never be called")


def _controller(workdir, **kw):
  args = dict(population_size=3, num_trials=9, steps_per_trial=2, poll_s=0.02)
  args.update(kw)
  task_args = args.pop("task_args", {})
  return pbt.Controller(
    workdir,
    SPACE,
    "tests.test_fault_injection:flaky_task",
    task_args,
    config=pbt.ControllerConfig(**args),
  )


# --- attempt limit ---------------------------------------------------------------------------
def test_trial_failing_every_time_is_marked_failed_and_the_campaign_goes_on(tmp_path, capfd):
  c = _controller(tmp_path, task_args={"fail_trial": 2}, max_attempts=2)
  summary = c.run(timeout=60)
  t = c.store.trial(2)
  assert t.status == "failed" and t.failures == 2 and t.attempt == 2
  assert t.error == "ValueError: trial 2: checkpoint at step 5000"
  assert summary["failed"] == 1 and summary["failed_trials"] == [2]
  others = c.store.trials("id != 2")
  assert all(x.status == "done" for x in others) and len(others) == 8
  assert not any(x.member == t.member and x.id > 2 for x in others)  # its member stopped there
  assert "trial 2 (member 1) failed after 2 attempts" in capfd.readouterr().err
  c.close()


def test_max_failed_trials_stops_the_campaign_in_one_line(tmp_path):
  c = _controller(tmp_path, task_args={"fail_trial": 2}, max_attempts=3, max_failed_trials=1)
  with pytest.raises(pbt.CampaignFailed) as e:
    c.run(timeout=60)
  msg = str(e.value)
  assert "\n" not in msg and "trial 2 after 3 attempts: ValueError" in msg
  c.close()


def test_worker_process_failures_count_against_the_attempt_limit(tmp_path):
  c = _controller(tmp_path, task_args={"fail_trial": 4}, workers=2, max_attempts=2)
  summary = c.run(timeout=120)
  assert summary["failed_trials"] == [4] and c.store.trial(4).failures == 2
  assert summary["restarted_workers"] == 0  # a task error does not crash its worker
  c.close()


def test_dying_worker_counts_as_a_failed_attempt(tmp_path):
  c = _controller(tmp_path, max_attempts=2)
  c._initialize()
  with c.store.transaction() as db:
    c.store.put(db, "max_attempts", 2)
  for attempt in (1, 2):
    t = c.store.claim("w", 60)
    assert t.id == 1 and t.attempt == attempt
    with c.store.transaction() as db:
      c.store.fail_running(db, "worker=?", ("w",), "worker process w exited with status -9")
  t = c.store.trial(1)
  assert t.status == "failed" and t.error.endswith("status -9")
  c.close()


# --- config fingerprint ----------------------------------------------------------------------
def test_rerun_with_another_config_refuses_naming_the_fields(tmp_path):
  _controller(tmp_path).run(timeout=60)
  with pytest.raises(pbt.ConfigMismatch) as e:
    _controller(tmp_path, num_trials=12, steps_per_trial=5)
  msg = str(e.value)
  assert "\n" not in msg
  assert "num_trials 9 -> 12" in msg and "steps_per_trial 2 -> 5" in msg
  assert "population_size" not in msg
  with pytest.raises(pbt.ConfigMismatch, match="task"):
    _controller(tmp_path, task_args={"sleep_s": 0.5})
  with pytest.raises(pbt.ConfigMismatch, match="space"):
    pbt.Controller(
      tmp_path,
      {"lr": pbt.Continuous(low=1e-4, high=0.5)},
      "tests.test_fault_injection:flaky_task",
      config=pbt.ControllerConfig(population_size=3, num_trials=9, steps_per_trial=2),
    )
  c = _controller(tmp_path, workers=0, top_k=3, lease_s=5)  # not run-defining: accepted
  assert c.run(timeout=30)["done"] == 9
  c.close()


# --- named tasks, no pickles -----------------------------------------------------------------
def test_store_holds_names_and_json_only(tmp_path):
  c = _controller(tmp_path, workers=1)
  c.run(timeout=120)
  c.close()
  db = sqlite3.connect(tmp_path / "pbt.sqlite")
  for _key, value in db.execute("SELECT key, value FROM kv"):
    json.loads(value)  # every value is JSON data
  task = json.loads(db.execute("SELECT value FROM kv WHERE key='task'").fetchone()[0])
  assert task["task"] == {"target": "tests.test_fault_injection:flaky_task", "args": {}}
  for (blob,) in db.execute("SELECT value FROM kv"):
    assert "gASV" not in blob and "\\x80\\x04" not in blob  # no base64/raw pickle protocol 4
  db.close()
  src = Path(pbt.__file__).parent
  for f in ("_controller.py", "_worker.py", "_store.py", "_mpi.py", "_task.py", "__main__.py"):
    assert "import pickle" not in (src / f).read_text()


def test_a_planted_store_cannot_make_a_worker_run_code(tmp_path):
  marker = tmp_path / "pwned"
  cmd = f"touch {marker}"
  _controller(tmp_path).run(timeout=60)
  db = sqlite3.connect(tmp_path / "pbt.sqlite")
  planted = [
    {"target": "os:system", "args": {"command": cmd}},  # installed, but not a task
    {"target": "tests.test_fault_injection:not_a_task", "args": {}},
    {"target": "os.system('x'):y", "args": {}},
  ]
  for task in planted:
    value = json.dumps({"task": task, "lease_s": 1, "poll_s": 0.01, "orphan_s": 5})
    db.execute("UPDATE kv SET value=? WHERE key='task'", (value,))
    db.commit()
    proc = _procs.run(
      [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", str(tmp_path)],
      timeout=120,
      cwd=ROOT,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("ERROR: ")
    assert not marker.exists()
  # the pre-issue-14 format (a base64 pickle) is not unpickled either
  db.execute("UPDATE kv SET value=? WHERE key='task'", (json.dumps("gASVAAAA"),))
  db.commit()
  db.close()
  with pytest.raises(ValueError, match="no named task"):
    pbt.join_run(tmp_path, wait_s=1)


def test_functions_run_inline_only_and_task_args_must_be_json(tmp_path):
  with pytest.raises(ValueError, match="named task"):
    pbt.Controller(
      tmp_path,
      SPACE,
      _init,
      _init,
      config=pbt.ControllerConfig(population_size=2, num_trials=2, steps_per_trial=1, workers=1),
    )
  with pytest.raises(ValueError, match="not JSON data"):
    _controller(tmp_path, task_args={"fail_trial": object()})
  with pytest.raises(ValueError, match="module:function"):
    pbt.Controller(
      tmp_path,
      SPACE,
      "no colon",
      config=pbt.ControllerConfig(population_size=2, num_trials=2, steps_per_trial=1),
    )


# --- workers end with their controller -------------------------------------------------------
_CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.test_fault_injection import _controller
_controller({workdir!r}, workers={workers}, external_workers={external}, orphan_s={orphan_s},
            num_trials=60, task_args={{"sleep_s": 0.3}}).run(timeout=300)
"""


def _start_controller(workdir, workers=2, external=False, orphan_s=30.0):
  code = _CHILD.format(
    root=str(ROOT), workdir=str(workdir), workers=workers, external=external, orphan_s=orphan_s
  )
  return _procs.start([sys.executable, "-c", code])


def _wait_running(workdir, n, proc, timeout=120):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    assert proc.poll() is None, "the controller ended early"
    if (workdir / "pbt.sqlite").exists():
      store = pbt.Store(workdir / "pbt.sqlite")
      try:
        if store.counts()["running"] >= n:
          return
      finally:
        store.close()
    time.sleep(0.1)
  pytest.fail(f"no {n} running trials in {timeout} s")


def _workers_of(workdir) -> list[int]:
  """The run's worker processes, not a worker's child caught between its fork and exec."""
  return _procs.pids_with_args("minmaxlab.pbt", str(workdir), outermost=True)


def test_a_worker_arms_the_parent_death_signal_without_starting_a_process():
  code = (
    "import ctypes, os, subprocess, signal\n"
    "def no_child(*a, **k): raise AssertionError('started a process')\n"
    "subprocess.Popen = no_child\n"
    "from minmaxlab.pbt._worker import die_with_parent\n"
    "assert die_with_parent(os.getppid())\n"
    "got = ctypes.c_int()\n"
    "ctypes.CDLL(None).prctl(2, ctypes.byref(got), 0, 0, 0)  # PR_GET_PDEATHSIG\n"
    "print(got.value == signal.SIGTERM)\n"
  )
  out = _procs.run([sys.executable, "-c", code], cwd=ROOT, timeout=120)
  assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_killed_controller_takes_its_workers_along_and_restarts_never_stack(tmp_path):
  for _ in range(2):  # kill, restart, kill again: never more workers than configured
    proc = _start_controller(tmp_path, workers=2)
    try:
      _wait_running(tmp_path, 2, proc)
      deadline = time.monotonic() + _procs.scaled(60)
      while len(_workers_of(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
      for _ in range(10):  # the old controller's workers are gone, the new one has 2
        assert len(_workers_of(tmp_path)) == 2
        time.sleep(0.1)
      os.kill(proc.pid, signal.SIGKILL)  # the controller only, not its process group
      proc.wait(timeout=30)
      deadline = time.monotonic() + 30
      while _workers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
      assert _workers_of(tmp_path) == []  # parent-death signal: gone at once
    finally:
      _procs.kill_group(proc)


def test_external_worker_exits_when_the_controller_heartbeat_stops(tmp_path):
  proc = _start_controller(tmp_path, workers=0, external=True, orphan_s=2.0)
  worker = _procs.start(
    [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", str(tmp_path)], cwd=ROOT
  )
  try:
    _wait_running(tmp_path, 1, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    t0 = time.monotonic()
    rc = worker.wait(timeout=60)
    assert rc == 3 and time.monotonic() - t0 < 30  # orphan_s 2 s + a trial's sleep + load
  finally:
    _procs.kill_group(proc)
    _procs.kill_group(worker)


def test_a_worker_of_a_replaced_controller_claims_nothing(tmp_path):
  c = _controller(tmp_path)
  c._initialize()
  with c.store.transaction() as db:
    c.store.put(db, "controller_epoch", "new")
  with pytest.raises(pbt.ControllerGone):
    c.store.claim("old-worker", 60, epoch="old")
  assert c.store.counts()["running"] == 0
  assert c.store.claim("new-worker", 60, epoch="new").id == 1
  c.close()


# --- one-line CLI errors ---------------------------------------------------------------------
def _cli(*args, env=None, timeout=300):
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MINMAXLAB_DEBUG": "", **(env or {})}
  return _procs.run([sys.executable, "-m", *args], timeout=timeout, cwd=ROOT, env=env)


GAN_SMOKE = ["experiments.gan.main", "--config", "experiments/gan/configs/smoke.py"]


@pytest.mark.parametrize(
  "extra, expected",
  [
    (["--config.nosuch=1"], "ERROR: unknown config field: nosuch; the "),
    (["--config.batch_size=0"], "ERROR: ValueError: config.batch_size must be an integer >= 1"),
    (["--config.num_steps=0"], "ERROR: ValueError: config.num_steps must be an integer >= 1"),
  ],
)
def test_gan_cli_user_errors_are_one_line_and_leave_no_workdir(tmp_path, extra, expected):
  workdir = tmp_path / "run"
  r = _cli(*GAN_SMOKE, "--workdir", str(workdir), *extra)
  assert r.returncode != 0
  assert r.stderr.strip().startswith(expected) and r.stderr.strip().count("\n") == 0, r.stderr
  assert not workdir.exists()


def test_cli_missing_config_file_and_debug_traceback(tmp_path):
  for module in ("experiments.gan.main", "experiments.pbt.main", "experiments.coevolution.main"):
    r = _cli(module, "--config", str(tmp_path / "nope.py"), "--workdir", str(tmp_path / "w"))
    assert (
      r.returncode == 2 and r.stderr.strip() == f"ERROR: config file {tmp_path}/nope.py not found"
    )
  r = _cli(*GAN_SMOKE, "--workdir", str(tmp_path / "w"), "--config.log_every=0", "--debug")
  assert r.returncode != 0 and "Traceback (most recent call last)" in r.stderr
  r = _cli(
    *GAN_SMOKE,
    "--workdir",
    str(tmp_path / "w"),
    "--config.log_every=0",
    env={"MINMAXLAB_DEBUG": "1"},
  )
  assert "Traceback (most recent call last)" in r.stderr


def test_pbt_cli_rerun_with_another_config_is_one_line(tmp_path):
  cmd = ["experiments.pbt.main", "--config", "experiments/pbt/configs/smoke.py"]
  cmd += ["--workdir", str(tmp_path), "--workers", "0"]
  store = pbt.Store(tmp_path / "pbt.sqlite")  # a campaign of another configuration
  with store.transaction() as db:
    store.put(db, "initialized", True)
    store.put(db, "config", {"steps_per_trial": 5000, "num_trials": 8})
  store.close()
  r = _cli(*cmd)
  assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
  assert "ConfigMismatch" in r.stderr and "steps_per_trial 5000 -> 20" in r.stderr


def test_gan_resume_with_another_seed_refuses(tmp_path):
  from experiments.gan import train
  from experiments.gan.configs import smoke
  from minmaxlab import runner

  config = smoke.get_config()
  config.progress = False
  (tmp_path / "config.json").write_text(config.to_json())
  runner.CheckpointManager(tmp_path / "checkpoints").save(config.log_every, {"x": np.zeros(1)})
  config.seed = config.seed + 1
  with pytest.raises(ValueError) as e:
    train.train(config, tmp_path, resume=True)
  assert "seed: 0 -> 1" in str(e.value) and "\n" not in str(e.value)
  assert '"seed": 0' in (tmp_path / "config.json").read_text()  # not rewritten


# --- coevolution divergence ------------------------------------------------------------------
def test_divergence_rule_warns_and_stops_after_patience():
  from experiments.coevolution.train import AllCellsDiverged, divergence_check

  streak, warning = divergence_check(1, 4, 1, 0, 3)
  assert streak == 0 and warning.startswith("warning: generation 1: 1/4 cells diverged")
  assert divergence_check(0, 4, 2, 0, 3) == (0, None)
  streak, _ = divergence_check(4, 4, 3, 0, 3)
  streak, _ = divergence_check(4, 4, 4, streak, 3)
  assert streak == 2
  with pytest.raises(AllCellsDiverged, match="every cell diverged .* 3 generations"):
    divergence_check(4, 4, 5, streak, 3)
  assert divergence_check(4, 4, 5, 99, 0)[0] == 100  # patience 0: never stops


def test_coevolution_with_every_cell_diverging_stops_nonzero(tmp_path):
  cmd = ["experiments.coevolution.main", "--config", "experiments/coevolution/configs/smoke.py"]
  cmd += ["--workdir", str(tmp_path), "--config.learning_rate=1e6", "--config.generations=20"]
  cmd += ["--config.progress=False", "--config.diverged_patience=2"]
  r = _cli(*cmd, timeout=900)
  assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
  assert "cells diverged (non-finite)" in r.stderr
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith("ERROR: AllCellsDiverged: every cell diverged") and "2 generations" in last
