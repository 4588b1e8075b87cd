"""``--config.neighbourhood`` of experiments/coevolution takes the radius and
user-given forms of issue 17 (strings, so that a flag can carry them)."""

import os
import sys
from pathlib import Path

from experiments.coevolution import train
from experiments.coevolution.configs import smoke
from experiments.coevolution.experiment import coevolution_config
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]


def test_config_accepts_radius_and_custom_neighbourhoods():
  c = smoke.get_config()
  for kind, members in (("moore:2", 25), ("von_neumann:2", 13), ("custom:0,0;1,1;-2,0", 3)):
    c.neighbourhood = kind
    train.check_config(c)
    assert coevolution_config(c).num_members == members


def test_cli_passes_the_custom_string_through_and_rejects_it_in_one_line(tmp_path):
  # A duplicate offset fails in check_config, before anything is compiled: the error
  # names the value, so the whole string (';' and '-' included) reached the library.
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    str(ROOT / "experiments/coevolution/configs/smoke.py"),
    "--workdir",
    str(tmp_path / "run"),
    "--config.neighbourhood=custom:0,0;-2,1;-2,1",
  ]
  proc = _procs.run(cmd, timeout=300, env=env)
  assert proc.returncode == 1
  lines = proc.stderr.strip().splitlines()
  assert lines[-1] == (
    "ERROR: ValueError: neighbourhood 'custom:0,0;-2,1;-2,1': offset (-2, 1) appears twice"
  ), proc.stderr[-2000:]
