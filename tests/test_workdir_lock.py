"""Fault injection (issue 37): one process per workdir. A second GAN, coevolution or PBT
command on a workdir in use stops in one line naming the holder's pid (exit 1) before it
writes anything; the lock of a killed process is taken over."""

import os
import subprocess
import sys

import numpy as np
import pytest

from minmaxlab import pbt, runner
from minmaxlab.runner import _workdir_lock
from tests import _procs

HOLD = (
  "import sys, time; from minmaxlab.runner import _workdir_lock as w;"
  " w.lock_workdir(sys.argv[1]); print('held', flush=True); time.sleep(600)"
)


@pytest.fixture
def holder(tmp_path):
  """Another process holding the lock of ``tmp_path / 'run'``; killed (group) at the end."""
  workdir = tmp_path / "run"
  proc = _procs.start([sys.executable, "-c", HOLD, str(workdir)], stdout=subprocess.PIPE, text=True)
  try:
    assert proc.stdout.readline().strip() == "held"
    yield workdir, proc
  finally:
    _procs.kill_group(proc)


def test_second_process_refused_naming_the_holder_then_takes_a_dead_holders_lock(holder):
  workdir, proc = holder
  with pytest.raises(runner.WorkdirBusy) as e:
    runner.lock_workdir(workdir)
  msg = str(e.value)
  assert "\n" not in msg and f"in use by process {proc.pid}" in msg
  _procs.kill_group(proc)  # SIGKILL: no chance to clean up; the kernel drops the lock
  runner.lock_workdir(workdir)
  try:
    assert (workdir / _workdir_lock.LOCK_FILE).read_text().strip() == str(os.getpid())
  finally:
    _workdir_lock.unlock_workdir(workdir)


def test_lock_is_per_process_and_counted(tmp_path):
  workdir = tmp_path / "run"
  with runner.workdir_lock(workdir):
    with runner.workdir_lock(workdir):  # the same process again: only counted
      pass
    r = _procs.run([sys.executable, "-c", HOLD, str(workdir)], timeout=120)
    assert r.returncode == 1 and "WorkdirBusy" in r.stderr
  r = _procs.run(
    [sys.executable, "-c", HOLD.replace("time.sleep(600)", "pass"), str(workdir)], timeout=120
  )
  assert r.returncode == 0 and r.stdout.strip() == "held"


def _init(trial):
  return {"w": np.zeros(2, np.float32)}


def _train(hparams, state, trial):
  return 0.0, state


def test_second_pbt_controller_refused_before_it_creates_a_trial(holder):
  workdir, proc = holder
  c = pbt.Controller(
    workdir, {"lr": pbt.Continuous(0.1, 0.2)}, _init, _train,
    population_size=2, num_trials=2, steps_per_trial=1,
  )  # fmt: skip
  with pytest.raises(runner.WorkdirBusy, match=f"process {proc.pid}"):
    c.run(timeout=_procs.scaled(60))
  assert c.store.num_trials() == 0
  c.close()


@pytest.mark.parametrize(
  "module, config, extra",
  [
    ("experiments.gan.main", "experiments/gan/configs/smoke.py", []),
    ("experiments.coevolution.main", "experiments/coevolution/configs/smoke.py", []),
    ("experiments.pbt.main", "experiments/pbt/configs/smoke.py", ["--workers=0"]),
  ],
)
def test_second_command_on_a_workdir_in_use_stops_in_one_line(holder, module, config, extra):
  workdir, proc = holder
  cmd = [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}", *extra]
  r = _procs.run(cmd, timeout=300)
  lines = r.stderr.strip().splitlines()
  assert r.returncode == 1 and len(lines) == 1, r.stderr
  assert f"in use by process {proc.pid}" in lines[0]
  if module != "experiments.pbt.main":  # (the PBT controller opens its store first)
    assert [p.name for p in workdir.iterdir()] == [_workdir_lock.LOCK_FILE]  # nothing written
