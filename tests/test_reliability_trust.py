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
