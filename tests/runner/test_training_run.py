"""runner.TrainingRun: one training run's files in the order a train loop uses them (the
trainers' end-to-end tests run it with real programs; here a tiny state, no compiled step)."""

from __future__ import annotations

import io
import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import pytest

from minmaxlab import runner


def _config(seed=0):
  return ml_collections.ConfigDict({"seed": seed, "num_steps": 4})


class _State(NamedTuple):
  step: jax.Array
  w: jax.Array


def _state(step=0, value=0.0):
  return _State(jnp.asarray(step, jnp.int32), jnp.full((3,), value, jnp.float32))


def _loop(run, state, upto):
  for step in range(run.start + 1, upto + 1):
    state = _state(step, float(step))
    run.writer.write(step, {"loss": 1.0 / step})
    run.checkpoint(step, state)
  return state


def test_a_run_from_start_to_finish_and_its_resume(tmp_path):
  run = runner.TrainingRun(tmp_path / "wd", _config(), 4, module=__name__, keep_checkpoints=2)
  state = run.restore_or_init(_state(), resume=False, may_change=("num_steps",))
  assert run.start == 0 and run.writer is None
  run.open_writers(resume=False, tensorboard=False)
  assert run.last_row() == {}
  run.checkpoint(0, state)
  try:
    _loop(run, state, 2)
  finally:
    run.close(["loss"])
  saved = json.loads((run.workdir / "config.json").read_text())
  assert saved["seed"] == 0 and saved["run"]["module"] == __name__
  assert (run.workdir / "metrics.png").is_file() and not run.finished()

  again = runner.TrainingRun(tmp_path / "wd", _config(), 4, module=__name__, keep_checkpoints=2)
  with pytest.raises(ValueError, match="already holds checkpoints; pass --resume"):
    again.restore_or_init(_state(), resume=False)
  other = runner.TrainingRun(tmp_path / "wd", _config(seed=5), 4)
  with pytest.raises(ValueError, match=r"another config \(seed: 0 -> 5\)"):
    other.restore_or_init(_state(), resume=True, may_change=("num_steps",))
  state = again.restore_or_init(_state(), resume=True, may_change=("num_steps",))
  assert again.start == 2 and float(state.w[0]) == 2.0
  again.open_writers(resume=True, tensorboard=False)
  again.open_progress(stream=io.StringIO())
  assert again.last_row() == {"step": 2, "loss": 0.5} and again.bar is not None
  _loop(again, state, 4)
  again.close(lambda rows: [k for k in rows[-1] if k != "step"])
  again.finish({"final": again.writer.rows[-1]}, [runner.checkpoint_product(4), "metrics.png"])
  assert again.finished()
  assert [r["step"] for r in runner.read_jsonl(again.workdir / "metrics.jsonl")] == [1, 2, 3, 4]
  assert json.loads((again.workdir / "summary.json").read_text())["final"]["step"] == 4


def test_a_process_that_does_not_write_leaves_no_file(tmp_path):
  run = runner.TrainingRun(tmp_path, _config(), 4, writes=False)
  looked = []
  state = run.restore_or_init(_state(), resume=False, before=lambda: looked.append(True))
  assert looked == [True] and run.open_writers(resume=False, tensorboard=False) is None
  assert run.open_progress() is None
  run.checkpoint(0, state)
  run.close()
  run.finish({}, ["summary.json"])
  assert [p.name for p in tmp_path.iterdir()] == ["checkpoints"]  # every process looks there
  assert not any((tmp_path / "checkpoints").iterdir())
