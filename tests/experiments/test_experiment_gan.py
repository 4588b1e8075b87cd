"""End-to-end tests of experiments/gan: smoke run, exact --resume, divergence, CLI."""

import json
import os
import sys
from pathlib import Path

import chex
import jax
import numpy as np
import pytest

from experiments.gan import train
from experiments.gan.configs import smoke
from minmaxlab import runner
from tests import _procs

# the programs run long (GAN training runs and their FID):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code

ROOT = Path(__file__).resolve().parents[2]


class _Killed(Exception):
  pass


def _restore(workdir, config, step=None):
  exp, init, _, _ = train.programs(config)
  state = init()
  ckpt = runner.CheckpointManager(Path(workdir) / "checkpoints")
  return ckpt.restore(jax.eval_shape(lambda: state), step)[0]


def test_smoke_end_to_end_and_exact_resume(tmp_path):
  config = smoke.get_config()
  config.progress = False
  full = tmp_path / "full"
  last = train.train(config, full)
  rows = runner.read_jsonl(full / "metrics.jsonl")
  assert [r["step"] for r in rows] == [10, 20, 30, 40]
  assert {"g_loss", "d_loss"} <= set(rows[0])
  for k in ("modes_covered", "high_quality_rate", "mode_kl", "ema/modes_covered"):
    assert k in rows[1] and k in rows[3]
  assert last == rows[-1]
  assert all(np.isfinite(r["g_loss"]) and np.isfinite(r["d_loss"]) for r in rows)
  for name in (
    "config.json",
    "summary.json",
    "metrics.png",
    "samples/step_20.png",
    "samples/ema_step_40.png",
  ):
    assert (full / name).is_file(), name
  assert runner.CheckpointManager(full / "checkpoints").steps() == [0, 20, 40]
  (events,) = (full / "tensorboard").glob("events.out.tfevents.*")
  assert (40, "mode_kl", pytest.approx(rows[3]["mode_kl"])) in runner.read_scalars(events)
  images = {(s, tag) for s, tag, kind, _ in runner.read_events(events) if kind == "image"}
  assert {(20, "samples"), (40, "ema/samples")} <= images
  run = json.loads((full / "config.json").read_text())["run"]  # where the code came from
  assert run["minmaxlab"] and run["module"] == "experiments.gan.train" and "git_commit" in run
  assert json.loads((full / "summary.json").read_text())["steps"] == 40

  # A run killed after step 30 (its last checkpoint is step 20) ...
  killed = tmp_path / "killed"

  def kill_at_30(step, row):
    if step == 30:
      raise _Killed

  with pytest.raises(_Killed):
    train.train(config, killed, on_log=kill_at_30)
  assert runner.CheckpointManager(killed / "checkpoints").latest_step() == 20
  assert len(runner.read_jsonl(killed / "metrics.jsonl")) == 3
  with pytest.raises(ValueError, match="--resume"):
    train.train(config, killed)
  # ... resumes and reproduces the uninterrupted run exactly.
  assert train.train(config, killed, resume=True) == last
  assert runner.read_jsonl(killed / "metrics.jsonl") == rows
  chex.assert_trees_all_equal(_restore(killed, config), _restore(full, config))


def test_divergence_stops_with_message_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
  config = smoke.get_config()
  config.progress = False
  train.train(config, tmp_path)  # a healthy start: checkpoints 0, 20 and 40
  good = _restore(tmp_path, config)
  config.num_steps = 80
  config.lr_min = config.lr_max = 1e30  # then the learning rates explode
  # A resume normally refuses another learning rate (tested in test_fault_injection); here the
  # changed rate is only the way to make a healthy run diverge after its checkpoint at step 40.
  monkeypatch.setattr("minmaxlab.runner._training_run.config_changes", lambda *args, **kwargs: {})
  with pytest.raises(train.TrainingDiverged, match=r"diverged at step 4\d: non-finite") as err:
    train.train(config, tmp_path, resume=True)
  assert "last good checkpoint is step 40" in str(err.value)
  ckpt = runner.CheckpointManager(tmp_path / "checkpoints")
  assert ckpt.latest_step() == 40
  restored = _restore(tmp_path, config)
  chex.assert_trees_all_equal(restored, good)
  assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(restored.params))
  assert [r["step"] for r in runner.read_jsonl(tmp_path / "metrics.jsonl")] == [10, 20, 30, 40]


@pytest.mark.parametrize("scheme", ["gda", "extragradient", "optimistic"])  # alternating: smoke
def test_every_scheme_with_lookahead_trains(scheme):
  config = smoke.get_config()
  config.scheme, config.lookahead, config.sync_period, config.log_every = scheme, True, 2, 4
  config.ema_decay, config.hidden = 0.0, (8,)
  exp = train.build(config)
  assert exp.num_evals == {"extragradient": 2}.get(scheme, 1)
  config.scheme, config.max_steps = "alternating", 3
  assert train.num_field_evaluations(config) == 4
  config.scheme = scheme
  state = train.make_init(exp, config)()
  new, losses, finite = train.make_chunk(exp, config)(state)
  assert int(new.step) == 4 and losses.shape == (4, 2) and bool(finite)
  moved = [
    not np.array_equal(a, b)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(new.params))
  ]
  assert all(moved)
  # After 4 steps with sync_period 2 the fast weights sit on the slow ones.
  import minmaxlab

  slow = minmaxlab.lookahead_slow_params(new.opt_state)
  chex.assert_trees_all_close(slow, new.params, rtol=1e-6, atol=1e-9)


def test_config_checks():
  config = smoke.get_config()
  config.eval_every = 15
  with pytest.raises(ValueError, match="multiple of config.log_every"):
    train.check_config(config)
  config = smoke.get_config()
  config.scheme = "sgd"
  with pytest.raises(ValueError, match="scheme must be one of"):
    train.make_optimizer(config)


def test_image_dataset_with_classifier_metrics(tmp_path):
  config = smoke.get_config()
  config.progress = False
  config.dataset, config.hidden, config.num_steps = "digits8", (32, 32), 20
  config.classifier.steps, config.classifier.cache_dir = 300, str(tmp_path / "cache")
  config.num_eval_samples, config.grid_samples = 200, 16
  last = train.train(config, tmp_path / "run")
  for k in ("fid", "inception_score", "class_tvd", "ema/fid"):
    assert np.isfinite(last[k]), k
  assert last["fid"] > 0 and 1 <= last["inception_score"] <= 10 and 0 <= last["class_tvd"] <= 0.9
  summary = json.loads((tmp_path / "run" / "summary.json").read_text())
  assert summary["classifier_test_accuracy"] > 0.85
  assert (tmp_path / "cache" / "digits8" / "real_stats.npz").is_file()
  assert (tmp_path / "run" / "samples" / "step_20.png").is_file()


def test_cli_runs_and_reports_divergence(tmp_path):
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [
    sys.executable,
    "-m",
    "experiments.gan.main",
    "--config",
    str(ROOT / "experiments/gan/configs/smoke.py"),
    "--workdir",
    str(tmp_path),
    "--config.num_steps=20",
    "--config.lr_min=1e30",
    "--config.lr_max=1e30",
  ]
  proc = _procs.run(cmd, cwd=ROOT, env=env, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "ERROR: training diverged at step" in proc.stderr
  head = proc.stdout.splitlines()[0]  # says where it runs (issue 49)
  assert head.endswith(f" steps [backend single: 1 cpu device, 1 process] -> {tmp_path}"), head
  assert runner.CheckpointManager(tmp_path / "checkpoints").steps() == [0]
  assert json.loads((tmp_path / "config.json").read_text())["lr_min"] == 1e30
