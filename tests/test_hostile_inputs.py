"""Fault injection with hostile or bad inputs (issue 37 items 8 and 9).

A worker never imports code from the run's folder; every bad setting is refused before
anything is written, in one line naming the field, with the documented exit codes (2 for a
malformed command line, 1 for a bad value; see ``experiments/_cli.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from minmaxlab import pbt
from tests import _procs

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if k != "MINMAXLAB_RERUN"}
  env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
  env.update(extra)
  return env


# --- item 8: no code from the workdir --------------------------------------------------------
def test_external_worker_started_in_the_workdir_never_imports_its_modules(tmp_path):
  from tests.test_fault_injection import _controller

  _controller(tmp_path).run(timeout=60)
  marker = tmp_path / "pwned"
  payload = f"open({str(marker)!r}, 'w').write('ran')\n"
  (tmp_path / "evilmod.py").write_text(payload + "def task():\n  return None\n")
  (tmp_path / "evilpkg").mkdir()
  (tmp_path / "evilpkg" / "__init__.py").write_text(payload)
  (tmp_path / "evilpkg" / "sub.py").write_text(payload)
  db = sqlite3.connect(tmp_path / "pbt.sqlite")
  for target in ("evilmod:task", "evilpkg.sub:task"):
    value = json.dumps(
      {"task": {"target": target, "args": {}}, "lease_s": 1, "poll_s": 0.01, "orphan_s": 5}
    )
    db.execute("UPDATE kv SET value=? WHERE key='task'", (value,))
    db.commit()
    for cwd, workdir in ((tmp_path, "."), (ROOT, str(tmp_path))):  # inside it, or named
      cmd = [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", workdir]
      env = _env(PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
      proc = _procs.run(cmd, timeout=120, cwd=cwd, env=env)
      assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
      assert proc.stderr.startswith("ERROR: PBT task ") and target.split(":")[0] in proc.stderr
      assert not marker.exists(), (target, cwd)
  db.close()


def test_resolve_task_outside_the_workdir_still_imports_installed_tasks(tmp_path):
  saved = list(sys.path)
  sys.path.append(str(tmp_path))
  try:
    spec = pbt.task_spec("tests.test_fault_injection:flaky_task", {})
    init_fn, train_fn = pbt.resolve_task(spec, tmp_path)
    assert callable(init_fn) and callable(train_fn)
    assert sys.path == [*saved, str(tmp_path)]  # left as it was
  finally:
    sys.path[:] = saved


# --- item 9: bad inputs, refused before anything is written ----------------------------------
def _pbt_config(**changes):
  from experiments.pbt.configs import smoke

  c = smoke.get_config()
  for k, v in changes.items():
    c[k] = v
  return c


@pytest.mark.parametrize(
  "field, value",
  [
    ("loss", "bogus"),
    ("hidden", (0,)),
    ("b1", 5.0),
    ("lr_min_bounds", (float("nan"), 0.1)),
    ("lr_max_bounds", ("(nan, 0.1)",)),  # what the command line makes of --config...=(nan, 0.1)
  ],
)
def test_pbt_bad_task_config_is_refused_before_the_store_exists(tmp_path, field, value):
  from experiments.pbt import train

  wd = tmp_path / "campaign"
  with pytest.raises(ValueError) as e:
    train.train(_pbt_config(**{field: value}), wd, workers=0)
  assert str(e.value).startswith(f"config.{field} must be ") and "\n" not in str(e.value)
  assert not wd.exists()  # no store that would refuse the corrected rerun


def test_a_changed_task_argument_is_named_by_its_field(tmp_path):
  from tests.test_fault_injection import _controller

  _controller(tmp_path).run(timeout=60)
  with pytest.raises(pbt.ConfigMismatch) as e:
    _controller(tmp_path, task_args={"sleep_s": 0.5})
  assert "task.args.sleep_s unset -> 0.5" in str(e.value)


def _cli(module, config, workdir, *flags, timeout=300):
  cmd = [sys.executable, "-m", module, "--config", config, "--workdir", str(workdir), *flags]
  return _procs.run(cmd, timeout=timeout, env=_env())


@pytest.mark.parametrize(
  "flag, says",
  [
    ("--workers=abc", "--workers must be an integer >= 0 or 'mpi', got 'abc'"),
    ("--workers=-1", "--workers must be an integer >= 0 or 'mpi', got '-1'"),
    ("--budget_s=-5", "--budget_s must be > 0, got -5.0"),
    ("--timeout=abc", "flag --timeout=abc: could not convert string to float: 'abc'"),
  ],
)
def test_pbt_command_line_errors_are_one_line_with_exit_2(tmp_path, flag, says):
  proc = _cli("experiments.pbt.main", "experiments/pbt/configs/smoke.py", tmp_path / "p", flag)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr == f"ERROR: {says} (see --help)\n" and proc.stdout == ""
  assert not (tmp_path / "p").exists()


def test_a_garbage_config_json_is_named(tmp_path):
  from minmaxlab import runner

  (tmp_path / "config.json").write_text("{garbage")
  with pytest.raises(ValueError, match=f"{tmp_path / 'config.json'} is not a readable run config"):
    runner.config_changes(tmp_path, {"seed": 0})
  with pytest.raises(ValueError, match="config.json is not a readable run config"):
    runner.load_run(tmp_path)
  (tmp_path / "config.json").write_text("[1, 2]")
  with pytest.raises(ValueError, match="config.json is not a run config"):
    runner.config_changes(tmp_path, {"seed": 0})


def _coev_config(**changes):
  from experiments.coevolution.configs import smoke

  c = smoke.get_config()
  for k, v in changes.items():
    c[k] = v
  return c


def test_coevolution_bad_betas_and_neighbourhood_beyond_the_grid(monkeypatch):
  from experiments.coevolution import experiment, train

  for field in ("b1", "b2"):
    with pytest.raises(ValueError, match=rf"config.{field} must be in \[0, 1\)"):
      train.check_config(_coev_config(**{field: 5.0}))
  with pytest.raises(ValueError, match="'moore:50' reaches 50 cells away, beyond the 2x2 grid"):
    train.check_config(_coev_config(neighbourhood="moore:50"))
  train.check_config(_coev_config(neighbourhood="moore:2"))  # wraps once: accepted
  # 1000x1000 cells: the estimate against the memory available (8 GiB here)
  monkeypatch.setattr(experiment, "available_memory", lambda: 8 * 2**30)
  with pytest.raises(
    ValueError, match=r"1000x1000 .* needs at least [\d.]+ GiB, more than the 8.0"
  ):
    train.check_config(_coev_config(rows=1000, cols=1000))
  train.check_config(_coev_config(rows=30, cols=30))


def test_coevolution_grid_too_large_is_refused_before_the_workdir_exists(tmp_path):
  config = str(ROOT / "experiments/coevolution/configs/smoke.py")
  wd = tmp_path / "g"
  big = ["--config.rows=100", "--config.cols=100", "--config.hidden=(4096, 4096)"]
  proc = _cli("experiments.coevolution.main", config, wd, *big)
  assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
  assert "100x100 with neighbourhood='von_neumann' needs at least " in proc.stderr
  assert not wd.exists()


def test_coevolution_hint_names_no_field_its_config_lacks(tmp_path):
  from experiments.coevolution import compare

  config = _coev_config()
  assert "baseline" not in config
  assert compare.compare(config, tmp_path, {}) == [
    f"(no single-GAN baseline in {tmp_path}/baseline_1x1)"
  ]


def test_trial_timeout_s_is_a_config_field_that_reaches_the_controller(tmp_path):
  from experiments.pbt import train

  config = _pbt_config()
  assert config.trial_timeout_s == 0.0 and "trial_timeout_s" not in train.task_args(config)
  task = train.make_task(config)
  c = train.build_controller(config, tmp_path / "a", task, 0)
  assert c.trial_timeout_s is None  # 0: no limit
  c.close()
  c = train.build_controller(_pbt_config(trial_timeout_s=30.0), tmp_path / "b", task, 0)
  assert c.trial_timeout_s == 30.0
  c.close()
  with pytest.raises(ValueError, match=r"config.trial_timeout_s must be seconds >= 0"):
    train.check_config(_pbt_config(trial_timeout_s=-1.0))
  assert issubclass(pbt.StoreError, ValueError) and issubclass(pbt.TrialTimeout, RuntimeError)
