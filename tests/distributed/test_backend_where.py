"""Issue 49 item 3: a run says where it runs. ``Backend.where()`` names the backend, the device
kind and count and the processes or ranks (the first line of every coevolution run); a
``mesh`` that finds one device and ``mpi`` with one rank (no ``mpirun``) run as ``single``
would, after one warning line."""

import sys
from pathlib import Path

import jax
import pytest

from experiments.coevolution import rerun
from experiments.coevolution.configs import smoke
from minmaxlab import coevolution as co
from minmaxlab import distributed
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "experiments/coevolution/configs/smoke.py"


def test_placement_names_backend_devices_and_processes():
  kind = jax.devices()[0].device_kind  # "cpu" in the tests: the platform is not repeated
  assert distributed.placement("mesh", 4, 1) == f"backend mesh: 4 {kind} devices, 1 process"
  assert distributed.placement("mpi", 2, 2, "rank") == f"backend mpi: 2 {kind} devices, 2 ranks"
  assert distributed.placement("single", 1, 3) == f"backend single: 1 {kind} device, 3 processes"


def test_where_of_each_backend_and_no_warning_when_distributed(capfd):
  n = len(jax.devices())  # 4 CPU devices in a test session
  assert n > 1
  cfg = co.CoevolutionConfig(rows=n, cols=2)
  single = distributed.make_backend(cfg)
  assert single.devices == 1 and single.where() == "backend single: 1 cpu device, 1 process"
  mesh = distributed.make_backend(cfg, "mesh")
  assert mesh.devices == n and mesh.where() == f"backend mesh: {n} cpu devices, 1 process"
  assert capfd.readouterr().err == ""
  line = rerun.header(smoke.get_config(), "runs/s", mesh.where())
  assert line.endswith(f" per cell [backend mesh: {n} cpu devices, 1 process] -> runs/s")


def test_a_mesh_of_one_device_warns_in_one_line(capfd, monkeypatch):
  devices = jax.devices()
  monkeypatch.setattr(jax, "devices", lambda *a: devices[:1])  # a host with one device
  backend = distributed.make_backend(co.CoevolutionConfig(rows=2, cols=2), "mesh")
  assert backend.devices == 1 and backend.where() == "backend mesh: 1 cpu device, 1 process"
  (line,) = capfd.readouterr().err.splitlines()
  assert line.startswith("warning: backend mesh found 1 device: the grid runs on one device")
  assert "JAX_NUM_CPU_DEVICES" in line


def test_mpi_with_one_rank_warns_in_one_line(capfd):
  pytest.importorskip("mpi4jax")
  from mpi4py import MPI

  if MPI.COMM_WORLD.Get_size() != 1:
    pytest.skip("this test process is one of several MPI ranks")
  backend = distributed.make_backend(co.CoevolutionConfig(rows=2, cols=2), "mpi")
  assert backend.where() == "backend mpi: 1 cpu device, 1 rank"
  (line,) = capfd.readouterr().err.splitlines()
  assert line.startswith("warning: backend mpi found 1 rank: the grid runs on one device")
  assert "mpirun -n N" in line


def test_mpi_backend_without_mpi4jax_names_the_command_that_installs_it(tmp_path):
  """Issue 49 item 2: ``backend=mpi`` without mpi4jax ends in one line naming ``python3 dev.py
  mpi`` (the one step after ``dev.py main``), before anything is written."""
  code = (
    "import sys, runpy; sys.modules['mpi4jax'] = None; sys.argv = sys.argv[1:];"
    " runpy.run_module('experiments.coevolution.main', run_name='__main__')"
  )
  workdir = tmp_path / "run"
  cmd = [sys.executable, "-c", code, "main", "--config", str(ROOT / SMOKE), "--workdir"]
  r = _procs.run([*cmd, str(workdir), "--config.backend=mpi"], cwd=ROOT, timeout=120)
  assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
  (line,) = r.stderr.splitlines()
  assert line.startswith("ERROR: ImportError: the MPI backend needs mpi4py and mpi4jax"), line
  assert "(mpi4jax is missing): run `python3 dev.py mpi`" in line
  assert not workdir.exists()
