"""Fault injection (issue 37): the attempt limit counts every failure mode. A trial that
ends the controller's process inline counts a failed attempt when the controller starts
again; a trial that hangs is stopped after ``trial_timeout_s`` and counts a failed attempt
(in a worker process and inline), so the campaign always ends."""

import os
import signal
import sys
import time

import numpy as np
import pytest

from minmaxlab import pbt
from tests import _procs

ROOT = _procs.ROOT
# seconds: a normal trial (first imports included) fits: its trials took 0.3 s or less here, a
# worker's first one included (none failed at a 0.3 s limit; at 0.1 s they did), so 10x that
LIMIT = round(_procs.scaled(3.0), 1)
SPACE = {"lr": pbt.Continuous(low=1e-3, high=0.5)}


def _init(trial):
  return {"w": np.zeros(2, np.float32)}


@pbt.named_task
def bad_trial_task(bad: int = 2, how: str = "exit"):
  """Trial ``bad`` ends its process (``exit``), hangs (``hang``) or hangs with the alarm
  signal blocked, as in a C call that never returns to Python (``stuck``)."""

  def train(hparams, state, trial):
    if trial.id == bad:
      if how == "exit":
        os._exit(9)
      if how == "stuck":
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
      time.sleep(600)
    w = np.asarray(state["w"]) + hparams["lr"]
    return float(-np.sum((w - 1.0) ** 2)), {"w": w}

  return _init, train


def _controller(workdir, how, **kw):
  args = dict(population_size=2, num_trials=4, steps_per_trial=1, poll_s=0.02, max_attempts=2)
  args.update(kw)
  task = "tests.pbt.test_pbt_trial_limits:bad_trial_task"
  return pbt.Controller(
    workdir,
    SPACE,
    task,
    {"how": how},
    config=pbt.ControllerConfig(**args),
  )


RUN = (
  "import sys; from tests.pbt.test_pbt_trial_limits import _controller;"
  " c = _controller(sys.argv[1], sys.argv[2], trial_timeout_s=float(sys.argv[3]) or None);"
  " s = c.run(timeout=120); print('failed', s['failed_trials'])"
)


def _run_controller(workdir, how, limit=0.0):
  """A controller running trials inline in its own process (group)."""
  cmd = [sys.executable, "-c", RUN, str(workdir), how, str(limit)]
  return _procs.run(cmd, timeout=240, env={**os.environ, "JAX_PLATFORMS": "cpu"})


def test_inline_trial_that_ends_its_process_counts_against_the_attempt_limit(tmp_path):
  for attempt in (1, 2):
    r = _run_controller(tmp_path, "exit")
    assert r.returncode == 9, r.stderr
    store = pbt.Store(tmp_path / "pbt.sqlite")
    t = store.trial(2)
    store.close()
    assert t.status == "running" and t.attempt == attempt and t.failures == attempt - 1
  r = _run_controller(tmp_path, "exit")  # counts the second failure: trial 2 is failed
  assert r.returncode == 0 and "failed [2]" in r.stdout, r.stderr
  store = pbt.Store(tmp_path / "pbt.sqlite")
  t = store.trial(2)
  assert t.status == "failed" and t.failures == 2 and "ended while it ran" in t.error
  assert store.counts()["done"] == 3  # the other trials ran
  store.close()


def test_hung_trial_in_a_worker_process_is_stopped_and_counted(tmp_path):
  c = _controller(tmp_path, "hang", workers=1, trial_timeout_s=LIMIT)
  summary = c.run(timeout=_procs.scaled(240))
  t = c.store.trial(2)
  assert summary["failed_trials"] == [2] and t.failures == 2 and t.status == "failed"
  assert t.error == f"TrialTimeout: trial 2 ran longer than trial_timeout_s={LIMIT:g} s"
  assert summary["done"] == 3 and summary["restarted_workers"] == 2
  c.close()


def test_hung_trial_inline_is_stopped_and_counted(tmp_path):
  r = _run_controller(tmp_path, "hang", limit=LIMIT)
  assert r.returncode == 0 and "failed [2]" in r.stdout, r.stderr
  store = pbt.Store(tmp_path / "pbt.sqlite")
  t = store.trial(2)
  assert t.failures == 2 and t.error.startswith("TrialTimeout: trial 2 ran longer")
  store.close()


def test_trial_stuck_outside_python_inline_ends_the_process_and_counts(tmp_path):
  for attempt in (1, 2):
    started = time.monotonic()
    r = _run_controller(tmp_path, "stuck", limit=LIMIT)
    assert r.returncode == 4 and time.monotonic() - started < _procs.scaled(150), r.stderr
    assert "counted as a failed attempt" in r.stderr
    store = pbt.Store(tmp_path / "pbt.sqlite")
    t = store.trial(2)
    store.close()
    assert t.failures == attempt and t.status == ("failed" if attempt == 2 else "pending")
  r = _run_controller(tmp_path, "stuck", limit=LIMIT)
  assert r.returncode == 0 and "failed [2]" in r.stdout, r.stderr


def test_trial_timeout_must_be_positive(tmp_path):
  with pytest.raises(ValueError, match="trial_timeout_s"):
    _controller(tmp_path, "hang", trial_timeout_s=0)
