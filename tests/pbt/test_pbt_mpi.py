"""minmaxlab.pbt workers as MPI ranks (``mpirun -n P``, rank 0 the controller).

Every test launches the venv's own MPICH ``mpirun`` (next to ``sys.executable``)
in a subprocess with a timeout; they skip when mpi4py or mpirun is missing.
The task is a numpy toy (this module's ``toy_task``, imported by name), so the tests
measure the protocol, not JAX compile times; the GAN ``smoke`` config under
``mpirun -n 3`` is in ``test_pbt_experiment.py``.
"""

import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minmaxlab import pbt
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
MPIRUN = Path(sys.executable).parent / "mpirun"
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None and MPIRUN.exists()
needs_mpi = pytest.mark.skipif(
  not HAVE_MPI, reason=f"needs mpi4py and {MPIRUN} (python3 dev.py mpi)"
)
SPACE = {"lr": pbt.Continuous(low=1e-3, high=0.5)}
TARGET = np.array([1.0, -2.0, 3.0, 0.5])
NUM_TRIALS = 12
FAIL_TRIAL, FAIL_SIGNAL = "MINMAXLAB_TEST_MPI_FAIL_TRIAL", "MINMAXLAB_TEST_MPI_FAIL_SIGNAL"


def init_fn(trial):
  return {"w": np.zeros(4, np.float32), "step": np.zeros((), np.int32)}


def train_fn(hparams, state, trial):
  """``trial.steps`` gradient steps on 0.5 ||w - target||^2 (a rank can be made to fail)."""
  if os.environ.get(FAIL_TRIAL) == str(trial.id) and trial.attempt == 1:
    time.sleep(0.2)
    os.kill(os.getpid(), getattr(signal, os.environ[FAIL_SIGNAL]))
  assert int(state["step"]) == trial.start_step
  w = np.asarray(state["w"], np.float64)
  for _ in range(trial.steps):
    w = w - hparams["lr"] * (w - TARGET)
  time.sleep(0.05)  # let both worker ranks take trials
  fitness = -float(np.log10(np.sum((w - TARGET) ** 2) + 1e-30))
  return fitness, {
    "w": w.astype(np.float32),
    "step": np.asarray(trial.start_step + trial.steps, np.int32),
  }


@pbt.named_task
def toy_task():
  """The named task the worker ranks import (nothing is pickled)."""
  return init_fn, train_fn


def _main(workdir):  # what every rank runs
  out = pbt.run_mpi(
    lambda: pbt.Controller(
      workdir,
      SPACE,
      "tests.pbt.test_pbt_mpi:toy_task",
      config=pbt.ControllerConfig(
        population_size=4, num_trials=NUM_TRIALS, steps_per_trial=3, lease_s=4.0, poll_s=0.02
      ),
    )
  )
  if out is not None:
    controller, summary = out
    summary["workers"] = sorted({t.worker for t in controller.store.trials()})
    print("SUMMARY " + json.dumps(summary), flush=True)
    controller.close()


def _kill_ranks_of(workdir) -> None:
  """SIGKILL every process whose command line names ``workdir`` (a rank that was stopped
  with SIGSTOP, in a process group of its own, can outlive its ``mpirun``) and wait until
  they are gone (a killed rank still exiting would count as left behind at the session's end)."""
  _procs.kill_and_wait(_procs.pids_with_args(str(workdir)))


def _mpirun(n, workdir, timeout=300, **env):
  code = f"from tests.pbt.test_pbt_mpi import _main; _main({str(workdir)!r})"
  env = {**os.environ, "JAX_PLATFORMS": "cpu", **env}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [str(MPIRUN), "-n", str(n), sys.executable, "-c", code]
  return _procs.run(cmd, timeout=timeout, cwd=ROOT, env=env)  # the job's group dies with it


def _summary(proc):
  lines = [x for x in proc.stdout.splitlines() if x.startswith("SUMMARY ")]
  assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
  return json.loads(lines[0][len("SUMMARY ") :])


def _check_store(workdir):
  store = pbt.Store(Path(workdir) / "pbt.sqlite")
  try:
    trials = store.trials()
    assert [t.id for t in trials] == list(range(1, NUM_TRIALS + 1))  # none lost or duplicated
    assert all(t.status == "done" and t.processed for t in trials)
    by_id = {t.id: t for t in trials}
    for t in trials:
      if t.parent_id is not None:
        p = by_id[t.parent_id]
        assert p.id < t.id and t.start_step == p.start_step + p.steps
    return trials
  finally:
    store.close()


@needs_mpi
def test_ranks_are_workers_and_rank0_selects(tmp_path):
  proc = _mpirun(3, tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  s = _summary(proc)
  assert s["done"] == NUM_TRIALS and s["worker_ranks"] == 2 and s["lost_ranks"] == []
  assert set(s["workers"]) <= {"rank1", "rank2"}  # rank 0 never trains
  _check_store(tmp_path)


@needs_mpi
def test_fewer_than_two_ranks_is_a_clear_error_before_any_work(tmp_path):
  proc = _mpirun(1, tmp_path / "run", timeout=60)
  assert proc.returncode != 0
  assert "PBT over MPI needs at least 2 ranks" in proc.stderr
  assert not (tmp_path / "run").exists()  # nothing was created


@needs_mpi
def test_killed_worker_rank_ends_the_job_and_the_same_command_resumes(tmp_path):
  t0 = time.monotonic()
  proc = _mpirun(3, tmp_path, **{FAIL_TRIAL: "5", FAIL_SIGNAL: "SIGKILL"})
  assert proc.returncode != 0 and time.monotonic() - t0 < _procs.scaled(120)  # not a hang
  assert "BAD TERMINATION" in proc.stdout + proc.stderr
  again = _mpirun(3, tmp_path)  # the same command: resumes from the store
  assert again.returncode == 0, again.stderr[-3000:]
  assert _summary(again)["done"] == NUM_TRIALS
  trials = _check_store(tmp_path)
  assert {t.id: t.attempt for t in trials}[5] == 2  # the killed trial was re-run once


@needs_mpi
def test_silent_worker_rank_loses_its_trial_to_another_rank(tmp_path):
  """A rank that stops answering (SIGSTOP: alive, never exits) loses its lease;
  its trial is re-run by the other rank, the run completes, and rank 0 then
  aborts the job (exit code 3) instead of leaving mpirun waiting."""
  proc = _mpirun(3, tmp_path, **{FAIL_TRIAL: "5", FAIL_SIGNAL: "SIGSTOP"})
  _kill_ranks_of(tmp_path)  # the stopped rank, if the job's end (under load) left it behind
  assert proc.returncode != 0 and "were lost; aborting the MPI job" in proc.stderr
  s = _summary(proc)
  assert s["done"] == NUM_TRIALS and len(s["lost_ranks"]) == 1
  trials = _check_store(tmp_path)
  t5 = {t.id: t for t in trials}[5]
  assert t5.attempt == 2 and t5.worker != f"rank{s['lost_ranks'][0]}"
