"""Fault injection at every point of a run's finish (issue 37 item 4).

A run is finished only when its end products exist and the marker written after them
(``runner.finish``): the final checkpoint with its digest, ``metrics.png``,
``summary.json`` and, for the main job, the baseline and the comparison. Here each point of
the finish is interrupted (``$MINMAXLAB_FAULT``: in-process the kill is replaced by an
exception; the command-line test is killed for real with SIGKILL), and the same call again
must complete the end products, without training again when the final checkpoint is intact,
and end exactly where an uninterrupted run ends.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from minmaxlab import runner
from minmaxlab.runner import _finish
from tests import _procs

ROOT = Path(__file__).resolve().parents[1]


class Killed(BaseException):
  """Stands for SIGKILL in-process: not an ``Exception``, so nothing handles it."""


@pytest.fixture
def fault(monkeypatch):
  """``fault(point)`` arms ``$MINMAXLAB_FAULT`` (raising :class:`Killed`); ``fault(None)``
  disarms it."""

  def kill():
    raise Killed

  monkeypatch.setattr(_finish, "_kill", kill)

  def arm(point):
    monkeypatch.setattr(_finish, "_PASSES", {})
    if point is None:
      monkeypatch.delenv(_finish.FAULT_ENV, raising=False)
    else:
      monkeypatch.setenv(_finish.FAULT_ENV, point)

  return arm


# --- the rule itself -------------------------------------------------------------------------
def test_finish_writes_the_marker_last_and_is_finished_checks_the_products(tmp_path, fault):
  wd = tmp_path / "run"
  (wd / "checkpoints" / "step_4").mkdir(parents=True)
  (wd / "config.json").write_text(json.dumps({"run": runner.run_record()}))
  assert not runner.is_finished(wd, 4)
  with pytest.raises(FileNotFoundError, match="summary.json is missing"):
    runner.finish(wd, 4, ["summary.json"])
  runner.write_json(wd / "summary.json", {"steps": 4})
  assert not runner.is_finished(wd, 4)  # the products alone do not finish a run
  fault("finish:marker")
  with pytest.raises(Killed):
    runner.finish(wd, 4, ["summary.json"])
  assert not (wd / "finished.json").exists() and not runner.is_finished(wd, 4)
  fault(None)
  runner.finish(wd, 4, ["summary.json"])
  assert runner.is_finished(wd, 4) and runner.is_finished(wd, 3)
  assert not runner.is_finished(wd, 8)  # a continuation to 8 has not finished
  assert not runner.is_finished(wd, 4, ["comparison.png"])
  (wd / "summary.json").unlink()  # a product lost since: not finished
  assert not runner.is_finished(wd, 4)
  (wd / "summary.json").write_text("{}")
  (wd / "finished.json").write_text("{not json")  # a damaged marker: not finished
  assert not runner.is_finished(wd, 4)
  assert list(wd.glob(".tmp-*")) == []  # atomic writes leave no temporary file


def test_runs_from_before_the_marker_count_as_finished_by_their_summary(tmp_path):
  wd = tmp_path / "old"
  (wd / "checkpoints" / "step_4").mkdir(parents=True)
  (wd / "config.json").write_text(json.dumps({"seed": 0, "run": {"module": "x"}}))
  assert not runner.is_finished(wd, 4)
  (wd / "summary.json").write_text("{}")
  assert runner.is_finished(wd, 4) and not runner.is_finished(wd, 5)
  # A run of this code: only the marker finishes it.
  (wd / "config.json").write_text(json.dumps({"seed": 0, "run": runner.run_record()}))
  assert not runner.is_finished(wd, 4)


def test_fault_point_counts_its_passes(monkeypatch, fault):
  fault("p#3")
  runner.fault_point("p")
  runner.fault_point("q")
  runner.fault_point("p")
  with pytest.raises(Killed):
    runner.fault_point("p")


# --- the trainers: every point of the finish -------------------------------------------------
# (point, whether the final checkpoint survives intact, i.e. the rerun trains nothing)
GAN_POINTS = [
  ("checkpoint:digest#3", False),  # smoke: checkpoints at 0, 20, 40; the third is the final
  ("finish:figures", True),
  ("finish:summary", True),
  ("finish:marker", True),
]


def _gan_config():
  from experiments.gan.configs import smoke

  c = smoke.get_config()
  c.progress = False
  c.tensorboard = False
  # evaluated (metrics and a samples picture) at the last step only: what the finish
  # completes does not depend on an evaluation before it
  c.eval_every = c.num_steps
  return c


def _products_ok(workdir: Path, products: list[str], total: int) -> None:
  assert runner.is_finished(workdir, total)
  assert json.loads((workdir / "finished.json").read_text())["products"] == products
  ck = runner.CheckpointManager(workdir / "checkpoints")
  assert ck.latest_step() == total and ck.verify(total) is None


def test_gan_finish_interrupted_at_each_point_is_completed_by_the_rerun(tmp_path, fault):
  from experiments.gan import train

  config = _gan_config()
  total = config.num_steps
  ref = tmp_path / "ref"
  fault(None)
  row = train.train(config, ref)
  products = train.end_products(config)
  _products_ok(ref, products, total)
  ref_rows = runner.read_jsonl(ref / "metrics.jsonl")
  ref_summary = json.loads((ref / "summary.json").read_text())
  for point, intact in GAN_POINTS:
    wd = tmp_path / point.replace(":", "_").replace("#", "_")
    fault(point)
    with pytest.raises(Killed):
      train.train(config, wd)
    assert not runner.is_finished(wd, total), point
    assert runner.finished_run(wd, total) is None  # the rerun does not just report it
    fault(None)
    trained = []
    again = train.train(config, wd, resume=True, on_log=lambda s, r: trained.append(s))
    assert trained == ([] if intact else [total - config.log_every, total]), point
    assert again == row, point
    _products_ok(wd, products, total)
    assert runner.read_jsonl(wd / "metrics.jsonl") == ref_rows, point
    assert json.loads((wd / "summary.json").read_text()) == ref_summary, point
    # finished now: a third call reports it and writes nothing
    before = {p: p.stat().st_mtime_ns for p in wd.rglob("*") if p.is_file()}
    assert train.train(config, wd, resume=True) == row
    assert {p: p.stat().st_mtime_ns for p in wd.rglob("*") if p.is_file()} == before


def test_coevolution_finish_interrupted_at_each_point_is_completed(tmp_path, fault):
  from experiments.coevolution import train
  from experiments.coevolution.configs import smoke

  config = smoke.get_config()
  config.progress = config.tensorboard = False
  total = config.generations
  # the mixture evaluated and pictured in the last generation only (no end product before it)
  config.plot_every, config.eval_every = 0, total
  products = train.end_products(config)
  points = [("checkpoint:digest#3", False), ("finish:figures", True), ("finish:summary", True)]
  points.append(("finish:marker", True))
  ref = tmp_path / "ref"
  fault(None)
  row = train.train(config, ref)
  _products_ok(ref, products, total)

  def strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

  for point, intact in points:
    wd = tmp_path / point.replace(":", "_").replace("#", "_")
    fault(point)
    with pytest.raises(Killed):
      train.train(config, wd)
    assert not runner.is_finished(wd, total), point
    fault(None)
    trained = []
    again = train.train(config, wd, resume=True, on_log=lambda g, r: trained.append(g))
    assert trained == ([] if intact else [total - 1, total]), point
    assert strip([again]) == strip([row]), point
    _products_ok(wd, products, total)
    assert strip(runner.read_jsonl(wd / "metrics.jsonl")) == strip(
      runner.read_jsonl(ref / "metrics.jsonl")
    )
    summary = json.loads((wd / "summary.json").read_text())
    assert summary["generations"] == total and summary["grid"] == [2, 2]
    assert runner.load_run(wd).step == total  # where the metrics end (was: the step before)
    if point == "finish:marker":  # the summary written before the kill is kept (its timings)
      assert summary["first_generation_seconds"] is not None


# --- the main job, killed for real -----------------------------------------------------------
# The main job's config (with its baseline) shrunk to the smoke grid above: its grid programs
# are those the coevolution test compiled, loaded from the session's compilation cache.
_MAIN = [
  "--config",
  "experiments/coevolution/configs/ring8_3x3.py",
  "--config.rows=2",
  "--config.cols=2",
  "--config.hidden=(16, 16)",
  "--config.flat_params=True",  # smoke's layout: a smaller generation program to compile
  "--config.latent_dim=8",
  "--config.batch_size=32",
  "--config.steps_per_generation=5",
  "--config.fitness_samples=64",
  "--config.mixture_samples=64",
  "--config.cell_strategy=auto",
  "--config.mixture_sigma=0.01",
  "--config.generations=2",
  "--config.checkpoint_every=1",
  "--config.plot_every=2",
  "--config.num_eval_samples=256",
  "--config.cell_samples=64",
  "--config.compile=fastest",
  "--config.progress=False",
  "--config.tensorboard=False",
]


@pytest.mark.slow
def test_main_job_killed_before_its_comparison_completes_it_when_rerun(tmp_path):
  wd = tmp_path / "main"
  env = {k: v for k, v in os.environ.items() if k not in ("MINMAXLAB_RERUN", _finish.FAULT_ENV)}
  env["MINMAXLAB_RERUN"] = "python3 dev.py main"
  env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
  cmd = [sys.executable, "-m", "experiments.coevolution.main", *_MAIN, "--workdir", str(wd)]
  killed = _procs.run(cmd, timeout=600, env={**env, _finish.FAULT_ENV: "main:comparison"})
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
  assert (wd / "summary.json").exists() and not (wd / "comparison.png").exists()
  assert not runner.is_finished(wd, 2)
  rerun = _procs.run(cmd, timeout=600, env=env)
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  out = rerun.stdout
  assert "generation 2/2 saved; completing the run's end products" in out
  assert "finished earlier" not in out
  assert "verdict" in out and "comparison picture: " in out
  marker = json.loads((wd / "finished.json").read_text())
  assert {"comparison.png", "baseline_1x1/summary.json"} <= set(marker["products"])
  assert runner.is_finished(wd, 2) and runner.is_finished(wd / "baseline_1x1", 2)


def test_pbt_campaign_finish_interrupted_at_each_point_is_completed(tmp_path, fault):
  from experiments.pbt import train
  from experiments.pbt.configs import smoke

  config = smoke.get_config()
  for point in ("finish:figures", "finish:summary", "finish:marker"):
    wd = tmp_path / point.replace(":", "_")
    fault(point)
    with pytest.raises(Killed):
      train.train(config, wd, workers=0, timeout=_procs.scaled(600), log=lambda text: None)
    assert not runner.is_finished(wd, config.num_trials), point
    fault(None)
    s = train.train(config, wd, workers=0, timeout=_procs.scaled(120), log=lambda text: None)
    assert s["done"] == config.num_trials and runner.is_finished(wd, config.num_trials)
    products = json.loads((wd / "finished.json").read_text())["products"]
    assert {"lineage.jsonl", "lineages.png", "summary.json"} <= set(products)
    assert any(p.startswith("checkpoints/trial_") for p in products)  # the best trial's
    logs = []
    again = train.train(config, wd, workers=0, timeout=_procs.scaled(120), log=logs.append)
    assert again == json.loads((wd / "summary.json").read_text())
    assert logs == [f"{wd}: finished earlier ({config.num_trials} trials); nothing changed"]
