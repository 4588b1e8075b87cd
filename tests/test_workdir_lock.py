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
    workdir,
    {"lr": pbt.Continuous(low=0.1, high=0.2)},
    _init,
    _train,
    config=pbt.ControllerConfig(population_size=2, num_trials=2, steps_per_trial=1),
  )
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
  assert f"in use by process {proc.pid}" in lines[0] and not r.stdout.strip(), r.stdout
  assert [p.name for p in workdir.iterdir()] == [_workdir_lock.LOCK_FILE]  # nothing written


# One process forks N children per round; they wait on a pipe (the barrier: closing its
# write end releases them all at once), then each runs a command through experiments._cli.run
# whose main takes the workdir's lock (as the trainers do), waits a moment with nothing
# written (the window in which a refused run used to delete the winner's folder and lock),
# writes a file and holds the lock until the parent has seen every other child exit. Prints
# one JSON line per round: the children's exit codes and what the workdir holds.
RACE = r"""
import json, os, select, sys, time
from pathlib import Path
from absl import flags
from experiments import _cli
from minmaxlab import runner

flags.DEFINE_string("workdir", None, "")
root, rounds, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for r in range(rounds):
  workdir = root / f"w{r}"
  go_r, go_w = os.pipe()
  done_r, done_w = os.pipe()
  kids = []
  for _ in range(n):
    pid = os.fork()
    if pid == 0:
      os.close(go_w)
      os.read(go_r, 1)  # the barrier
      sys.argv = ["race", f"--workdir={workdir}"]
      def main(argv):
        runner.lock_workdir(workdir)
        time.sleep(0.03)  # nothing written yet
        (workdir / "result").write_text(str(os.getpid()))
        os.read(done_r, 1)  # hold the lock until every other child has ended
        return None
      sys.stderr = open(os.devnull, "w")
      try:
        _cli.run(main)
      except SystemExit as e:
        os._exit(0 if e.code is None else e.code if isinstance(e.code, int) else 1)
      os._exit(0)
    kids.append(pid)
  os.close(go_w)  # release them all at once
  codes, deadline = {}, time.monotonic() + 10
  while len(codes) < n and time.monotonic() < deadline:
    for pid in kids:
      if pid not in codes:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
          codes[pid] = os.waitstatus_to_exitcode(status)
    if len(codes) >= n - 1:
      os.write(done_w, b"x" * n)  # the winner(s) may end now
    time.sleep(0.002)
  files = sorted(p.name for p in workdir.iterdir()) if workdir.is_dir() else None
  result = (workdir / "result").read_text() if files and "result" in files else None
  lock = (workdir / ".lock").read_text().strip() if files and ".lock" in files else None
  winners = [pid for pid, c in codes.items() if c == 0]
  print(json.dumps({"codes": sorted(codes.values()), "n": len(codes), "files": files,
                    "result": result, "lock": lock, "winners": winners}), flush=True)
  for fd in (go_r, done_r, done_w):
    os.close(fd)
"""


def test_simultaneous_starts_one_winner_whose_files_stay(tmp_path):
  """Issue 50: 4 commands started at the same instant on a new workdir, 50 times: exactly
  one runs (exit 0), the 3 refused (exit 1) delete nothing, and the winner's folder, lock
  and file are intact (before the fix a refused run deleted the winner's folder and lock
  and a third took the lock beside it)."""
  import json

  r = _procs.run([sys.executable, "-c", RACE, str(tmp_path), "50", "4"], timeout=120)
  assert r.returncode == 0, r.stderr[-3000:]
  rounds = [json.loads(line) for line in r.stdout.splitlines()]
  assert len(rounds) == 50
  for got in rounds:
    assert got["n"] == 4 and got["codes"] == [0, 1, 1, 1], got
    (winner,) = got["winners"]
    assert got["files"] == [".lock", "result"], got
    assert got["result"] == got["lock"] == str(winner), got


def test_failed_command_removes_only_a_workdir_it_made(tmp_path):
  """A command that fails before writing removes the empty workdir it made, never a
  folder that was there (a user's empty folder), and refuses ``--workdir=`` (empty)."""
  script = (
    "import sys; from absl import flags; from experiments import _cli;"
    " flags.DEFINE_string('workdir', None, '');"
    " _cli.run(lambda argv: (_ for _ in ()).throw(ValueError('bad value')))"
  )
  made, theirs = tmp_path / "made", tmp_path / "theirs"
  theirs.mkdir()
  for workdir, stays in ((made, False), (theirs, True)):
    r = _procs.run([sys.executable, "-c", script, f"--workdir={workdir}"], timeout=120)
    assert r.returncode == 1 and r.stderr.strip() == "ERROR: ValueError: bad value", r.stderr
    assert workdir.exists() == stays
  env = {**os.environ, "PYTHONPATH": str(_procs.ROOT)}
  cmd = [sys.executable, "-c", script, "--workdir="]
  r = _procs.run(cmd, cwd=tmp_path, env=env, timeout=120)
  assert r.returncode == 2 and r.stderr.strip().startswith("ERROR: --workdir is empty"), r.stderr
  assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]


@pytest.mark.parametrize(
  "module, config, extra",
  [
    ("experiments.gan.main", "experiments/gan/configs/smoke.py", []),
    ("experiments.coevolution.main", "experiments/coevolution/configs/smoke.py", []),
    ("experiments.pbt.main", "experiments/pbt/configs/smoke.py", ["--workers=0"]),
  ],
)
def test_workdir_that_is_a_file_is_refused_in_one_line(tmp_path, module, config, extra):
  """Issue 47: a workdir that is a file said ``File exists``."""
  path = tmp_path / "run"
  path.write_text("not a folder")
  with pytest.raises(ValueError, match="is a file, not a folder"):
    runner.lock_workdir(path)
  cmd = [sys.executable, "-m", module, f"--config={config}", f"--workdir={path}", *extra]
  r = _procs.run(cmd, timeout=300)
  assert r.returncode == 1 and not r.stdout.strip(), r.stdout
  assert r.stderr.strip().splitlines() == [
    f"ERROR: ValueError: the workdir {path} is a file, not a folder; use another --workdir"
  ], r.stderr
  assert path.read_text() == "not a folder"


def test_busy_workdir_with_a_checkpoint_says_only_that_it_is_busy(holder):
  """Issue 47: a coevolution command on a workdir in use that holds a checkpoint printed
  ``resuming from generation 0/...`` before it was refused; now it takes the lock first and
  prints only the refusal."""
  workdir, proc = holder
  (workdir / "checkpoints" / "step_0").mkdir(parents=True)
  cmd = [sys.executable, "-m", "experiments.coevolution.main",
         "--config=experiments/coevolution/configs/smoke.py", f"--workdir={workdir}"]  # fmt: skip
  r = _procs.run(cmd, timeout=300)
  assert r.returncode == 1 and r.stdout.strip() == "", r.stdout
  assert r.stderr.strip().splitlines() == [
    f"ERROR: WorkdirBusy: {workdir} is in use by process {proc.pid} (one command per workdir);"
    " wait for it to end or use another --workdir"
  ]
