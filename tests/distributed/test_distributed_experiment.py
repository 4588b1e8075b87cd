"""experiments/coevolution on every backend: checkpoints written by one backend
resume on another with identical results, a killed MPI rank ends the job with
an error (no hang) and ``--resume`` continues, and a 2-process
``jax.distributed`` job on localhost gives the single-device numbers.

The case is the smoke config on a 4x4 grid; the reference is the same run on
one device in this process.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import chex
import jax
import numpy as np
import psutil
import pytest

from experiments.coevolution import train
from experiments.coevolution.configs import smoke
from minmaxlab import runner
from tests import _procs
from tests.distributed._mpi import MPIRUN, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
GENERATIONS = 6
FLAGS = [
  "--config.rows=4",
  "--config.cols=4",
  "--config.progress=False",
  "--config.tensorboard=False",
  "--config.plot_every=0",
  "--config.eval_every=100",
  "--config.keep_checkpoints=100",
]


def _config(**overrides):
  c = smoke.get_config()
  for flag in FLAGS:
    k, v = flag[len("--config.") :].split("=")
    c[k] = {"False": False}.get(v, int(v) if v.isdigit() else v)
  c.checkpoint_every = 1
  for k, v in overrides.items():
    c[k] = v
  return c


def _state(workdir, step):
  """The whole-grid state of checkpoint ``step`` (host arrays)."""
  ck = runner.CheckpointManager(Path(workdir) / "checkpoints")
  progs = train.programs(_config())
  target = {"state": progs.init(jax.random.key(0)), "key": np.zeros(2, np.uint32)}
  tree, _ = ck.restore(jax.eval_shape(lambda: target), step)
  return tree["state"]


def _command(workdir, *flags, generations=GENERATIONS):
  return [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    "experiments/coevolution/configs/smoke.py",
    "--workdir",
    str(workdir),
    *FLAGS,
    "--config.checkpoint_every=1",
    f"--config.generations={generations}",
    *flags,
  ]


def _env(**extra):
  return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """The single-device run in this process, every generation checkpointed."""
  workdir = tmp_path_factory.mktemp("reference")
  train.train(_config(generations=GENERATIONS), workdir)
  return workdir


@pytest.mark.slow  # mpirun ranks, then a resume on one device, each compiling a generation
@needs_mpi
def test_killed_rank_fails_fast_and_resumes_on_one_device(tmp_path, reference):
  """mpirun -n 2: SIGKILL one rank mid-run; the job exits with an error within a
  bounded time; --resume on ONE device continues from the MPI checkpoint to the
  single-device numbers bit for bit."""
  workdir = tmp_path / "mpi"
  proc = subprocess.Popen(
    [str(MPIRUN), "-n", "2", *_command(workdir, "--config.backend=mpi", generations=1000)],
    cwd=ROOT,
    env=_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    start_new_session=True,
  )
  try:
    deadline = time.monotonic() + 300
    while not (workdir / "checkpoints" / "step_1").exists():
      assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
      assert time.monotonic() < deadline, "no checkpoint within 300 s"
      time.sleep(0.2)
    ranks = [
      p
      for p in psutil.Process(proc.pid).children(recursive=True)
      if "experiments.coevolution.main" in " ".join(p.cmdline())
    ]
    assert len(ranks) == 2, ranks
    ranks[1].send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    rc = proc.wait(timeout=120)  # bounded: MPICH's launcher tears the job down
    waited = time.monotonic() - t0
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    proc.stdout.close()
  assert rc != 0
  assert waited < 60
  done = runner.CheckpointManager(workdir / "checkpoints").latest_step()
  assert done is not None and done < GENERATIONS
  # Resume on a single device, in this process.
  train.train(_config(generations=GENERATIONS), workdir, resume=True)
  chex.assert_trees_all_equal(_state(workdir, GENERATIONS), _state(reference, GENERATIONS))


@pytest.mark.slow  # mpirun ranks, each compiling a generation
@needs_mpi
def test_single_device_checkpoint_resumes_on_mpi_ranks(tmp_path, reference):
  """Generations 1-2 on one device, 3 on `mpirun -n 2` (row blocks) from the
  checkpoint: the single-device numbers bit for bit."""
  workdir = tmp_path / "single"
  train.train(_config(generations=2), workdir)
  r = _procs.run(
    [str(MPIRUN), "-n", "2", *_command(workdir, "--config.backend=mpi", "--resume", generations=3)],
    cwd=ROOT,
    env=_env(),
    timeout=400,
  )
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert "grid 4x4" in r.stdout  # rank 0 alone printed the report
  assert r.stdout.count("grid 4x4") == 1
  # the first line says where it runs (issue 49); two ranks: no fallback warning
  assert r.stdout.count(" [backend mpi: 2 cpu devices, 2 ranks] -> ") == 1, r.stdout[:2000]
  assert "warning: backend" not in r.stderr
  chex.assert_trees_all_equal(_state(workdir, 3), _state(reference, 3))


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.slow  # two processes start JAX and compile a generation each
def test_two_process_jax_distributed_matches_single_device(tmp_path, reference):
  """Two JAX processes on localhost (2 CPU devices each): one 4-device mesh, the
  grid's 4 row blocks on 4 devices across 2 processes (shard_map + ppermute over
  gloo), 3 generations; process 0 alone writes. Same numbers as one device (to
  1e-6: XLA compiles the per-cell code inside another program)."""
  workdir = tmp_path / "multi"
  port = _free_port()
  # Each process in its own group, killed whole on a timeout or a failure (a 2-minute
  # compile under load must neither fail the run early nor leave processes behind).
  procs = [
    _procs.start(
      _command(
        workdir,
        "--config.backend=mesh",
        f"--config.distributed=127.0.0.1:{port}/2/{i}",
        generations=3,
      ),
      cwd=ROOT,
      env=_env(JAX_NUM_CPU_DEVICES="2"),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for i in range(2)
  ]
  outs = []
  try:
    for p in procs:
      outs.append(p.communicate(timeout=_procs.scaled(900))[0])
  finally:
    for p in procs:
      _procs.kill_group(p)
  for p, out in zip(procs, outs, strict=True):
    assert p.returncode == 0, out[-3000:]
  assert "grid 4x4" in outs[0] and "grid 4x4" not in outs[1]
  assert " [backend mesh: 4 cpu devices, 2 processes] -> " in outs[0], outs[0][:2000]
  summary = (workdir / "summary.json").read_text()
  assert '"backend": "mesh"' in summary and '"processes": 2' in summary
  chex.assert_trees_all_close(_state(workdir, 3), _state(reference, 3), rtol=1e-6, atol=1e-6)
