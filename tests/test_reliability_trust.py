"""Issue 50: trust boundaries, races and silent loss -- each case a failure found by
attacking the runner and the PBT campaign, now refused in one line or kept."""

import json

import numpy as np
import pytest

from minmaxlab import runner
from tests import _procs

# --- nothing lost silently ------------------------------------------------------------------


def test_a_damaged_metrics_line_is_kept_aside_and_every_later_row_kept(tmp_path):
  """``[10, BAD, 30, 40]`` resumed at 40 used to become ``[10, 50, 60]``."""
  path = tmp_path / "metrics.jsonl"
  lines = ['{"step": 10, "x": 1}', '{"step": 2\x00garbage', '{"step": 30, "x": 3}', "42"]
  path.write_text("\n".join([*lines, '{"step": 40, "x": 4}', '{"step": 50, "x"']) + "\n")
  assert [r["step"] for r in runner.read_jsonl(path)] == [10, 30, 40]
  with runner.MetricWriter(tmp_path, tensorboard=False, resume_step=40) as w:
    w.write(50, {"x": 5})
    w.write(60, {"x": 6})
  assert [r["step"] for r in runner.read_jsonl(path)] == [10, 30, 40, 50, 60]
  bad = (tmp_path / "metrics.jsonl.bad").read_text().splitlines()
  assert bad == ['{"step": 2\x00garbage', "42", '{"step": 50, "x"']


def test_resume_without_config_json_refuses_instead_of_continuing_another_seed(tmp_path):
  from experiments.gan import train
  from experiments.gan.configs import smoke

  config = smoke.get_config()
  config.progress = False
  runner.CheckpointManager(tmp_path / "checkpoints").save(config.log_every, {"x": np.zeros(1)})
  config.seed = config.seed + 1  # config.json deleted: the run's seed is unknown
  with pytest.raises(ValueError) as e:
    train.train(config, tmp_path, resume=True)
  assert "holds checkpoints but no config.json" in str(e.value) and "\n" not in str(e.value)
  assert not (tmp_path / "config.json").exists()
  with pytest.raises(ValueError, match="no config.json"):
    runner.start_run(tmp_path, config, 100, module="m", quiet=True, cache=False)


def test_pbt_finish_completed_by_a_rerun_keeps_the_original_numbers(tmp_path, monkeypatch):
  """A campaign killed in its finish and completed by a rerun used to write the rerun's
  numbers (its wall time, workers, failures seen) into summary.json."""
  from experiments.pbt import train
  from experiments.pbt.configs import smoke
  from minmaxlab import pbt
  from minmaxlab.runner import _finish

  class Killed(BaseException):
    pass

  def kill():
    raise Killed

  config = smoke.get_config()
  monkeypatch.setattr(_finish, "_kill", kill)
  monkeypatch.setattr(_finish, "_PASSES", {})
  monkeypatch.setenv(_finish.FAULT_ENV, "finish:summary")
  with pytest.raises(Killed):
    train.train(config, tmp_path, workers=0, timeout=_procs.scaled(600), log=lambda text: None)
  store = pbt.Store(tmp_path / "pbt.sqlite")
  original = store.get(train.RUN_NUMBERS)
  store.close()
  assert original["done"] == config.num_trials and original["workers"] == 0
  monkeypatch.delenv(_finish.FAULT_ENV)
  summary = train.train(config, tmp_path, workers=0, timeout=_procs.scaled(120), log=print)
  assert {k: summary[k] for k in original} == original
  written = json.loads((tmp_path / "summary.json").read_text())
  assert written["wall_seconds"] == original["wall_seconds"]
  assert runner.is_finished(tmp_path, config.num_trials)


# --- allowed before imported ------------------------------------------------------------------


def _plant(root, marker, regular: bool):
  """The documented ``--workdir runs/p`` layout under ``root``: a campaign in ``runs/p`` and
  another run's folder ``runs/p7`` (a ``.lock``) holding ``evilmod.py``, which writes
  ``marker`` when imported; ``runs`` a namespace package or (``regular``) a package."""
  from tests.test_reliability import _controller

  workdir = root / "runs" / "p"
  _controller(workdir).run(timeout=_procs.scaled(60))
  evil = root / "runs" / "p7"
  evil.mkdir()
  (evil / ".lock").write_text("1\n")
  payload = f"open({str(marker)!r}, 'w').write('ran')\n"
  (evil / "evilmod.py").write_text(payload + "def bad():\n  return None\n")
  if regular:
    for d in (root / "runs", evil):
      (d / "__init__.py").write_text(payload)
  return workdir


def _name_task(workdir, target):
  import sqlite3

  db = sqlite3.connect(workdir / "pbt.sqlite")
  value = {"task": {"target": target, "args": {}}, "lease_s": 1, "poll_s": 0.01, "orphan_s": 5}
  db.execute("UPDATE kv SET value=? WHERE key='task'", (json.dumps(value),))
  db.execute("UPDATE kv SET value=? WHERE key='config'", (json.dumps({"task": value["task"]}),))
  db.commit()
  db.close()


@pytest.mark.parametrize("regular", [False, True])
def test_a_module_in_another_runs_folder_is_refused_before_it_runs(tmp_path, regular):
  """A store naming ``runs.p7.evilmod:bad``: a worker started from the project's folder,
  and ``pbt.replay``, used to import ``runs/p7/evilmod.py`` (its code ran) and only then
  refuse; now the module is found without running it and refused."""
  import os
  import sys

  from minmaxlab import pbt

  marker = tmp_path / "pwned"
  workdir = _plant(tmp_path, marker, regular)
  _name_task(workdir, "runs.p7.evilmod:bad")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_procs.ROOT), str(tmp_path)])}
  cmd = [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", "runs/p", "--wait", "5"]
  r = _procs.run(cmd, timeout=120, cwd=tmp_path, env=env)
  assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
  assert r.stderr.startswith("ERROR: PBT task 'runs.p7.evilmod:bad'") and "refusing" in r.stderr
  assert not marker.exists()
  saved = list(sys.path)
  sys.path.insert(0, str(tmp_path))
  try:
    with pytest.raises(ValueError, match="refusing to import"):
      pbt.replay(workdir)
  finally:
    sys.path[:] = saved
  assert not marker.exists()


def test_local_workers_never_import_from_their_current_folder(tmp_path, monkeypatch):
  """A planted ``minmaxlab/`` package and ``humanize``/``orbax`` modules in the folder the
  controller (hence its local workers) runs in: the workers start with ``python -P`` and
  an import path without the run's folder, so none of them runs."""
  from tests.test_reliability import _controller

  marker = tmp_path / "pwned"
  payload = f"open({str(marker)!r}, 'a').write(__name__ + ' ran\\n')\n"
  for pkg in ("minmaxlab", "orbax", "tensorstore"):
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text(payload)
  for mod in ("humanize", "simplejson", "uvloop"):
    (tmp_path / f"{mod}.py").write_text(payload)
  monkeypatch.chdir(tmp_path)
  c = _controller(tmp_path / "run", workers=1, num_trials=3)
  try:
    status = c.run(timeout=_procs.scaled(120))
  finally:
    c.close()
  assert status["done"] == 3 and status["restarted_workers"] == 0
  assert not marker.exists(), marker.read_text()


# --- a store proves it belongs ----------------------------------------------------------------


def test_a_valid_store_of_another_campaign_is_refused_and_deletes_nothing(tmp_path):
  """Two campaigns of the same configuration; the second's store copied over the first's:
  it knows every trial id of the first's checkpoints, and used to have them all deleted."""
  import shutil

  from minmaxlab import pbt
  from tests.test_reliability import _controller

  a, b = tmp_path / "a", tmp_path / "b"
  for workdir in (a, b):
    c = _controller(workdir)
    c.run(timeout=_procs.scaled(60))
    c.close()
  folders = sorted(p.name for p in (a / "checkpoints").iterdir())
  assert (a / "campaign.json").is_file() and any(f.startswith("trial_") for f in folders)
  shutil.copy(b / "pbt.sqlite", a / "pbt.sqlite")
  with pytest.raises(pbt.StoreError) as e:
    _controller(a)
  line = str(e.value)
  assert "\n" not in line and "belong to different campaigns" in line, line
  assert sorted(p.name for p in (a / "checkpoints").iterdir()) == folders


def test_garbage_collection_deletes_only_folders_naming_this_campaign(tmp_path):
  from minmaxlab import pbt
  from minmaxlab.pbt import _gc, _manifest
  from tests.test_reliability import _controller

  c = _controller(tmp_path)
  c.run(timeout=_procs.scaled(60))
  c.close()
  store = pbt.Store(tmp_path / "pbt.sqlite")
  try:
    root = tmp_path / "checkpoints"
    tid = store.trial_ids().pop()
    lost = root / f"trial_{tid:06d}_a0"  # a lost attempt's folder: removed only if ours
    foreign = root / f"trial_{tid:06d}_a7"
    for folder, campaign in ((lost, store.get("campaign_id")), (foreign, "another-campaign")):
      _manifest.write_manifest(folder, campaign, trial=tid)
    _gc.remove_strays(store)
    assert not lost.exists() and foreign.is_dir()
    assert _gc.owned_checkpoint(store, store.trial(tid)._replace(ckpt=str(foreign))) is None
  finally:
    store.close()
