"""Issue 50: trust boundaries, races and silent loss -- each case a failure found by
attacking the runner and the PBT campaign, now refused in one line or kept."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from minmaxlab import pbt, runner
from tests import _procs

TASK, SPAWNING = (f"{__name__}:{f}" for f in ("odd_fitness_task", "spawning_task"))


@pbt.named_task
def odd_fitness_task(value: str = "inf"):
  """A toy task reporting ``float(value)`` as every trial's fitness."""

  def train(hparams, state, trial):
    return float(value), state

  return (lambda trial: {"w": np.zeros(1, np.float32)}), train


@pbt.named_task
def spawning_task(pidfile: str = "", hang_s: float = 60.0):
  """A toy task whose trials start a child process (its pid appended to ``pidfile``) and
  then hang past any time limit."""

  def train(hparams, state, trial):
    child = subprocess.Popen(["sleep", "600"])
    with open(pidfile, "a") as f:
      f.write(f"{child.pid}\n")
    time.sleep(hang_s)
    return 0.0, state

  return (lambda trial: {"w": np.zeros(1, np.float32)}), train


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
  from tests.test_fault_injection import _controller

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
  from tests.test_fault_injection import _controller

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
  from tests.test_fault_injection import _controller

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
  from tests.test_fault_injection import _controller

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


# --- time that cannot fail a healthy trial ----------------------------------------------------

SKEW = """import os, time
_shift = float(os.environ.get("MINMAXLAB_TEST_CLOCK_SHIFT", "0"))
if _shift:  # this process's wall clock, minutes off (a worker on another host)
  _real = time.time
  time.time = lambda: _real() + _shift
"""


@pytest.mark.parametrize("shift_s", [-600.0, 600.0])
def test_a_worker_whose_clock_is_minutes_off_fails_no_trial(tmp_path, monkeypatch, shift_s):
  """Leases used to be wall-clock stamps written on the worker's clock and compared on the
  controller's: a worker 10 minutes behind had every lease lapse at once (trials failed,
  ``CampaignFailed``). Now the controller times the renewals on its own monotonic clock."""
  from tests.test_fault_injection import _controller

  site = tmp_path / "site"
  site.mkdir()
  (site / "sitecustomize.py").write_text(SKEW)  # run by each worker at its start
  monkeypatch.syspath_prepend(str(site))  # (the workers get this process's import path)
  monkeypatch.setenv("MINMAXLAB_TEST_CLOCK_SHIFT", str(shift_s))
  c = _controller(
    tmp_path / "run", workers=2, num_trials=6, lease_s=1.5, task_args={"sleep_s": 0.6}
  )
  try:
    status = c.run(timeout=_procs.scaled(120))
    failures = {t.id: t.failures for t in c.store.trials()}
  finally:
    c.close()
  assert status["done"] == 6 and status["failed"] == 0, status
  assert set(failures.values()) == {0}, failures  # no lease lapsed


def test_lease_watch_times_renewals_on_the_controllers_clock():
  from minmaxlab.pbt import _campaign

  watch = _campaign.LeaseWatch(10.0)
  assert watch.lapsed([(1, "w", 1, 0)], now=100.0) == []  # first seen
  assert watch.lapsed([(1, "w", 1, 3)], now=109.0) == []  # renewed
  assert watch.lapsed([(1, "w", 1, 3)], now=118.0) == []  # 9 s since the renewal
  assert watch.lapsed([(1, "w", 1, 3)], now=119.5) == [(1, "w", 3)]  # 10.5 s: lapsed
  assert watch.lapsed([(1, "w", 2, 0)], now=200.0) == []  # another attempt: a new lease


# --- bounded resources -------------------------------------------------------------------------


def test_workers_are_capped_by_the_population_and_the_cpus(tmp_path, capfd):
  """``--workers 30`` with a population of 3 used to start 30 worker processes
  (``--workers=100000``: 454 processes until a timeout)."""
  from minmaxlab.pbt import _campaign
  from tests.test_fault_injection import _controller

  cpus = _campaign.usable_cpus()
  c = _controller(tmp_path, workers=30)
  c.close()
  expected = min(3, cpus)
  assert c.workers == expected
  err = capfd.readouterr().err.strip().splitlines()
  assert err == [
    f"PBT: 30 workers asked for, {expected} started (at most the population, 3, and the CPUs,"
    f" {cpus})"
  ]
  c = _controller(tmp_path, workers=1)
  c.close()
  assert c.workers == 1 and not capfd.readouterr().err


@pytest.mark.parametrize(
  "module, config, extra",
  [
    (
      "experiments.gan.main",
      "experiments/gan/configs/smoke.py",
      "--config.batch_size=100000000000",
    ),
    ("experiments.gan.main", "experiments/gan/configs/smoke.py", "--config.hidden=(100000000,1)"),
    ("experiments.pbt.main", "experiments/pbt/configs/smoke.py", "--config.hidden=(100000000,)"),
    (
      "experiments.coevolution.main",
      "experiments/coevolution/configs/smoke.py",
      "--config.batch_size=100000000000",
    ),
  ],
)
def test_a_config_too_large_for_memory_is_refused_before_anything_is_written(
  tmp_path, module, config, extra
):
  """``--config.batch_size=100000000000`` used to end in RESOURCE_EXHAUSTED with
  ``config.json`` and ``checkpoints/`` left behind; a huge ``hidden`` hung silently."""
  import sys

  workdir = tmp_path / "run"
  cmd = [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}", extra]
  r = _procs.run(cmd, timeout=300)
  lines = r.stderr.strip().splitlines()
  assert r.returncode != 0 and len(lines) == 1, r.stderr
  assert lines[0].startswith("ERROR: ValueError: config.batch_size=") and "GiB" in lines[0]
  assert not workdir.exists()


def test_memory_estimate_is_small_for_every_shipped_config():
  import importlib

  from experiments import _cli

  for name in ("gan", "coevolution", "pbt"):
    for which in ("base", "smoke"):
      config = importlib.import_module(f"experiments.{name}.configs.{which}").get_config()
      assert 0 < _cli.memory_need(config) < 2**30, (name, which)


# --- one line for every bad input -------------------------------------------------------------


def test_a_full_disk_during_a_checkpoint_is_one_oserror(tmp_path, monkeypatch):
  """orbax wraps the file system's ENOSPC in a 111-line chain; now one line naming the
  checkpoint (which ``experiments._cli`` prints as the workdir that cannot be written)."""
  import errno

  from minmaxlab.runner import _checkpoint

  ckpt = runner.CheckpointManager(tmp_path / "checkpoints")
  ckpt.save(1, {"x": np.zeros(2)})

  class Full:
    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return False

    def save(self, *a, **kw):
      (tmp_path / "checkpoints" / "step_2.orbax-checkpoint-tmp-1").mkdir()
      try:
        raise OSError(errno.ENOSPC, "No space left on device")
      except OSError as e:
        raise RuntimeError("orbax: failed to write the array") from e

  monkeypatch.setattr(_checkpoint, "_orbax_manager", lambda *a: Full())
  with pytest.raises(OSError) as e:
    ckpt.save(2, {"x": np.ones(2)})
  assert e.value.errno == errno.ENOSPC and "\n" not in str(e.value)
  assert "no space left on the device for checkpoint 2" in e.value.strerror
  assert e.value.filename == str(tmp_path / "checkpoints")
  assert ckpt.steps() == [1] and sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
    "step_1"
  ]


@pytest.mark.parametrize(
  "extra, says",
  [
    ("--timeout=-1", "--timeout must be > 0, got -1.0"),
    ("--timeout=inf", "--timeout must be > 0, got inf"),
    ("--config.truncation_fraction=2", "config.truncation_fraction must be in (0, 0.5], got 2"),
  ],
)
def test_pbt_command_refuses_a_negative_timeout_and_a_truncation_fraction_of_2(
  tmp_path, extra, says
):
  workdir = tmp_path / "run"
  cmd = [sys.executable, "-m", "experiments.pbt.main", "--config=experiments/pbt/configs/smoke.py"]
  r = _procs.run([*cmd, f"--workdir={workdir}", "--workers=0", extra], timeout=300)
  lines = r.stderr.strip().splitlines()
  assert r.returncode != 0 and len(lines) == 1 and says in lines[0], r.stderr
  assert not workdir.exists()


def test_the_controller_refuses_a_truncation_fraction_it_would_not_use(tmp_path):
  for exploit in ("tournament", "truncation"):
    with pytest.raises(ValueError, match="truncation_fraction must be in"):
      pbt.Controller(
        tmp_path,
        {"lr": pbt.Continuous(low=0.1, high=0.2)},
        TASK,
        config=pbt.ControllerConfig(
          population_size=2,
          num_trials=2,
          steps_per_trial=1,
          exploit=exploit,
          truncation_fraction=2.0,
        ),
      )


def test_a_parent_id_cycle_in_the_store_is_one_line_not_a_hang(tmp_path):
  import sqlite3

  from tests.test_fault_injection import _controller

  c = _controller(tmp_path)
  c.run(timeout=_procs.scaled(60))
  c.close()
  db = sqlite3.connect(tmp_path / "pbt.sqlite")
  last = db.execute("SELECT max(id) FROM trials").fetchone()[0]
  root = db.execute("SELECT min(id) FROM trials").fetchone()[0]
  db.execute("UPDATE trials SET parent_id=? WHERE id=?", (last, root))  # a cycle
  db.commit()
  db.close()
  store = pbt.Store(tmp_path / "pbt.sqlite")
  try:
    chain_end = next(t.id for t in store.trials() if t.id == last)
    with pytest.raises(pbt.StoreError) as e:
      store.lineage(chain_end)
  finally:
    store.close()
  assert "form a cycle" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_an_infinite_or_nan_fitness_is_a_failed_attempt_not_the_best_trial(tmp_path, value):
  c = pbt.Controller(
    tmp_path,
    {"lr": pbt.Continuous(low=0.1, high=0.2)},
    TASK,
    {"value": value},
    config=pbt.ControllerConfig(
      population_size=2, num_trials=2, steps_per_trial=1, max_attempts=1, max_failed_trials=None
    ),
  )
  try:
    status = c.run(timeout=_procs.scaled(60))
    trials = c.store.trials()
    best = c.store.best()
  finally:
    c.close()
  assert status["done"] == 0 and status["failed"] == 2 and best is None
  assert all("fitness must be a number < +inf (not NaN)" in t.error for t in trials)


def test_a_timed_out_trial_ends_the_processes_its_task_started(tmp_path):
  """A trial ended by ``trial_timeout_s`` used to leave its task's child processes running."""
  pidfile = tmp_path / "pids"
  pidfile.touch()
  c = pbt.Controller(
    tmp_path / "run",
    {"lr": pbt.Continuous(low=0.1, high=0.2)},
    SPAWNING,
    {"pidfile": str(pidfile)},
    config=pbt.ControllerConfig(
      population_size=2,
      num_trials=2,
      steps_per_trial=1,
      workers=2,
      max_attempts=1,
      max_failed_trials=None,
      trial_timeout_s=1.0,
      poll_s=0.05,
    ),
  )
  try:
    status = c.run(timeout=_procs.scaled(120))
    errors = [t.error for t in c.store.trials()]
  finally:
    c.close()
  pids = [int(line) for line in pidfile.read_text().split()]
  try:
    assert status["failed"] == 2 and all("TrialTimeout" in e for e in errors), errors
    assert len(pids) == 2
    assert _procs.wait_gone(pids, timeout=10) == [], pids
  finally:
    _procs.kill_and_wait(pids)


def test_a_worker_drops_import_path_entries_inside_its_workdir(tmp_path, monkeypatch):
  from minmaxlab.pbt import __main__ as worker_main

  inside, outside = tmp_path / "run", tmp_path / "lib"
  (inside / "sub").mkdir(parents=True)
  outside.mkdir()
  monkeypatch.chdir(inside)
  monkeypatch.setattr(sys, "path", ["", str(inside / "sub"), str(outside), str(inside)])
  worker_main._drop_run_paths(str(inside))
  assert sys.path == [str(outside)]
