"""The main job run again after it finished (issue 35): it prints the stored report without
importing the trainer or JAX's compiler and changes no file; a bad loop setting on a finished
run is the error alone; a changed report-relevant field (the baseline) is not answered from the
stored report."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from experiments.coevolution import rerun
from experiments.coevolution.configs import smoke
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "experiments/coevolution/configs/smoke.py"
LINES = ["grid 2x2 (map), 4 generations", "pictures: runs/x/samples/, curves: runs/x/metrics.png"]


def _finished(workdir: Path, config) -> None:
  """A finished main-job workdir as the rerun rule and the fast report read it."""
  total = config.generations
  (workdir / "checkpoints" / f"step_{total}").mkdir(parents=True)
  (workdir / "config.json").write_text(config.to_json(indent=2))
  rows = [{"generation": g, "g_loss": 0.5} for g in range(1, total + 1)]
  (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  (workdir / "finished.json").write_text(json.dumps({"total": total, "products": []}))
  rerun.write_report(str(workdir / rerun.REPORT), config, LINES)


def _files(workdir: Path) -> dict:
  return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(workdir.rglob("*"))}


def _cli(workdir, *extra, python=()):
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MINMAXLAB_CACHE_DIR": str(workdir.parent / "c")}
  env.pop("MINMAXLAB_RERUN", None)
  cmd = [sys.executable, *python, "-m", "experiments.coevolution.main", "--config", CONFIG]
  return _procs.run([*cmd, "--workdir", str(workdir), *extra], cwd=ROOT, env=env, timeout=300)


def test_a_finished_run_prints_its_stored_report_and_changes_nothing(tmp_path):
  workdir = tmp_path / "run"
  _finished(workdir, smoke.get_config())
  before = _files(workdir)
  proc = _cli(workdir, python=("-X", "importtime"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.splitlines() == [
    f"{workdir}: finished earlier (generation 4/4); nothing changed",
    *LINES,
  ]
  assert _files(workdir) == before  # not even the workdir lock
  imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
  assert "experiments.coevolution.train" not in imported  # no trainer, no model, no compile
  assert not (tmp_path / "c").exists()


def test_a_bad_loop_setting_on_a_finished_run_is_the_error_alone(tmp_path):
  workdir = tmp_path / "run"
  _finished(workdir, smoke.get_config())
  before = _files(workdir)
  proc = _cli(workdir, "--config.generations=-5")
  assert proc.returncode == 1 and proc.stdout == ""
  want = "ERROR: ValueError: config.generations must be an integer >= 1, got -5"
  assert proc.stderr.strip() == want
  assert _files(workdir) == before


def test_the_stored_report_answers_only_its_own_config(tmp_path):
  config = smoke.get_config()
  path = tmp_path / rerun.REPORT
  rerun.write_report(str(path), config, LINES)
  assert rerun.stored_report(str(path), config) == LINES
  config.ensembles.methods = ("greedy",)  # a field a rerun may change: the full report runs
  assert rerun.stored_report(str(path), config) is None
  path.write_text("{not json")
  assert rerun.stored_report(str(path), config) is None


def test_a_run_starts_with_a_header_saying_what_it_will_do():
  from experiments.coevolution.configs import ring8_3x3

  text = rerun.header(ring8_3x3.get_config(), "runs/coevolution_ring8")
  assert text == (
    "coevolution: a 3x3 grid of mlp GANs on ring8 (Lookahead-minmax over Adam), 40 generations"
    " of 250 steps per cell, then one GAN with the grid's total steps to compare"
    " -> runs/coevolution_ring8"
  )


def test_a_gan_run_starts_with_a_header_saying_what_it_will_do():
  from experiments.gan import main as gan_main
  from experiments.gan.configs import smoke as gan_smoke

  config = gan_smoke.get_config()
  text = gan_main.header(config, "runs/gan")
  assert text.startswith(f"gan: a {config.architecture} GAN on {config.dataset}, ")
  assert text.endswith(f", {config.num_steps} steps -> runs/gan")
  config.lookahead = True
  assert "Lookahead-minmax (k=" in gan_main.header(config, "runs/gan")
  where = gan_main.header(config, "runs/gan", "backend single: 1 cpu device, 1 process")
  assert where.endswith(" steps [backend single: 1 cpu device, 1 process] -> runs/gan")
