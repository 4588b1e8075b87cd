"""Fault injection (issue 37): a PBT campaign's checkpoints survive a move, a copy, a planted
store row and a lost, empty, truncated or foreign store; nothing outside the campaign's own
``checkpoints/`` folder is ever deleted."""

import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from minmaxlab import pbt
from minmaxlab.pbt import _gc
from minmaxlab.pbt._store import StoreError
from tests import _procs

SPACE = {"lr": pbt.Continuous(low=1e-3, high=0.5)}


def _init(trial):
  return {"w": np.zeros(2, np.float32), "step": np.zeros((), np.int32)}


def _train(hparams, state, trial):
  w = np.asarray(state["w"]) + hparams["lr"]
  return float(-np.sum((w - 1.0) ** 2)), {"w": w, "step": state["step"] + trial.steps}


def _controller(workdir):
  return pbt.Controller(
    workdir,
    SPACE,
    _init,
    _train,
    config=pbt.ControllerConfig(population_size=3, num_trials=9, steps_per_trial=2, poll_s=0.01),
  )


class _Stop(Exception):
  pass


def _run(workdir, stop_after=None):
  """Run the campaign (to the end, or stopped once ``stop_after`` trials are done);
  return ``{trial id: fitness}``."""

  def progress(status):
    if stop_after is not None and status["done"] >= stop_after:
      raise _Stop

  c = _controller(workdir)
  try:
    c.run(timeout=_procs.scaled(120), on_progress=progress)
  except _Stop:
    pass
  fitness = {t.id: t.fitness for t in c.store.trials()}
  c.close()
  return fitness


def _folders(workdir):
  return {p.name for p in (Path(workdir) / "checkpoints").iterdir()}


def test_moved_finished_campaign_keeps_every_checkpoint(tmp_path):
  reference = _run(tmp_path / "p")
  before = _folders(tmp_path / "p")
  assert before
  shutil.move(tmp_path / "p", tmp_path / "q")
  c = _controller(tmp_path / "q")
  summary = c.run(timeout=_procs.scaled(60))
  assert _folders(tmp_path / "q") == before and summary["checkpoints"] == len(before)
  best = c.store.best()
  assert Path(best.ckpt).parent == tmp_path / "q" / "checkpoints"
  assert pbt.load_checkpoint(best.ckpt, _init(best))["step"] == best.start_step + best.steps
  assert {t.id: t.fitness for t in c.store.trials()} == reference
  c.close()


def test_moved_unfinished_campaign_resumes_from_its_checkpoints(tmp_path):
  reference = _run(tmp_path / "ref")
  _run(tmp_path / "p", stop_after=4)
  shutil.move(tmp_path / "p", tmp_path / "q")
  c = _controller(tmp_path / "q")
  c.run(timeout=_procs.scaled(120))
  assert all(t.attempt == 1 for t in c.store.trials())  # no parent checkpoint was lost
  assert {t.id: t.fitness for t in c.store.trials()} == reference
  live = {Path(t.ckpt).name for t in c.store.live_checkpoints()}
  assert live == _folders(tmp_path / "q")
  c.close()


def test_copy_of_an_unfinished_campaign_leaves_the_original_alone(tmp_path):
  _run(tmp_path / "p", stop_after=4)
  before = _folders(tmp_path / "p")
  shutil.copytree(tmp_path / "p", tmp_path / "copy")
  _run(tmp_path / "copy")
  assert _folders(tmp_path / "p") == before


def test_store_with_absolute_paths_of_an_older_version_is_translated(tmp_path):
  reference = _run(tmp_path / "p")
  before = _folders(tmp_path / "p")
  db = sqlite3.connect(tmp_path / "p" / "pbt.sqlite")
  prefix = f"{tmp_path / 'p'}/"
  db.execute("UPDATE trials SET ckpt = ? || ckpt WHERE ckpt IS NOT NULL", (prefix,))
  db.execute(
    "UPDATE trials SET parent_ckpt = ? || parent_ckpt WHERE parent_ckpt IS NOT NULL", (prefix,)
  )
  db.commit()
  assert db.execute("SELECT ckpt FROM trials WHERE id=1").fetchone()[0].startswith(prefix)
  db.close()
  shutil.move(tmp_path / "p", tmp_path / "q")
  _run(tmp_path / "q")
  assert _folders(tmp_path / "q") == before
  store = pbt.Store(tmp_path / "q" / "pbt.sqlite")
  assert {t.id: t.fitness for t in store.trials()} == reference
  store.close()


def test_planted_row_pointing_outside_is_never_deleted(tmp_path, capfd):
  _run(tmp_path / "p")
  victim = tmp_path / "victim" / "checkpoints" / "trial_000010_a1"
  victim.mkdir(parents=True)
  (victim / "precious.txt").write_text("keep me")
  other = tmp_path / "p" / "checkpoints" / "notes"  # not a trial folder: never touched
  other.mkdir()
  store = pbt.Store(tmp_path / "p" / "pbt.sqlite")
  with store.transaction() as db:
    for target in (tmp_path / "victim", victim):
      db.execute(
        "INSERT INTO trials(member, hparams, start_step, steps, seed, status, ckpt, processed,"
        " fitness)"
        " VALUES (0, '{}', 0, 1, 0, 'done', ?, 1, -1000.0)",
        (str(target),),
      )
  capfd.readouterr()
  collected = _gc.collect_garbage(store, top_k=1)
  assert {10, 11} <= set(collected)
  assert (victim / "precious.txt").read_text() == "keep me" and other.is_dir()
  err = capfd.readouterr().err.strip().splitlines()
  assert len(err) == 2 and all("not deleting it" in line for line in err)
  assert _gc.collect_garbage(store, top_k=1) == [] and not capfd.readouterr().err  # once
  _gc.remove_strays(store)
  assert victim.is_dir() and other.is_dir()
  store.close()


def _wipe_store(workdir):
  for suffix in ("", "-wal", "-shm"):
    Path(f"{workdir}/pbt.sqlite{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("damage", ["missing", "empty", "truncated", "foreign", "text"])
def test_lost_or_damaged_store_is_refused_and_nothing_is_deleted(tmp_path, damage):
  _run(tmp_path / "p", stop_after=4)
  store_file = tmp_path / "p" / "pbt.sqlite"
  data = store_file.read_bytes()
  before = _folders(tmp_path / "p")
  _wipe_store(tmp_path / "p")
  if damage == "empty":
    store_file.write_bytes(b"")
  elif damage == "truncated":
    store_file.write_bytes(data[: len(data) // 2])
  elif damage == "foreign":
    db = sqlite3.connect(store_file)
    db.execute("CREATE TABLE notes(x)")
    db.commit()
    db.close()
  elif damage == "text":
    store_file.write_text("not a database\n" * 100)
  planted = None if damage == "missing" else store_file.read_bytes()
  with pytest.raises(StoreError) as e:
    _controller(tmp_path / "p")
  msg = str(e.value)
  assert "\n" not in msg and str(store_file) in msg
  if damage == "missing":
    assert "disagree" in msg
  else:
    assert store_file.read_bytes() == planted  # the damaged file is left as it was
  assert _folders(tmp_path / "p") == before


def test_cli_refuses_checkpoints_without_their_store_in_one_line(tmp_path):
  workdir = tmp_path / "p"
  (workdir / "checkpoints" / "trial_000001_a1").mkdir(parents=True)
  cmd = [sys.executable, "-m", "experiments.pbt.main", "--config"]
  cmd += ["experiments/pbt/configs/smoke.py", f"--workdir={workdir}", "--workers=0"]
  r = _procs.run(cmd, timeout=300)
  assert r.returncode == 1, r.stderr
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and "the store and the checkpoints disagree" in lines[0], r.stderr
  assert (workdir / "checkpoints" / "trial_000001_a1").is_dir()
