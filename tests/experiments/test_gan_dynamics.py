"""The GAN trainer's game-dynamics action (issue 39): rows at every dynamics_every-th
evaluation in metrics.jsonl and TensorBoard, nothing else changed by it."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.gan import train
from experiments.gan.configs import smoke
from minmaxlab import runner


def config(dynamics_every):
  c = smoke.get_config()  # 40 steps, logs every 10, evaluates every 20
  c.progress = False
  c.scheme = "alternating"
  c.lookahead = True
  c.sync_period = 3
  c.eval_every = 10
  c.dynamics_every = dynamics_every
  c.dynamics.eigen_iterations = 6
  c.dynamics.num_eigenvalues = 3
  c.dynamics.num_probes = 2
  c.dynamics.radius_iterations = 6
  c.dynamics.batch_size = 16
  return c


def test_dynamics_are_logged_every_nth_evaluation_and_change_nothing_else(tmp_path):
  train.train(config(2), tmp_path / "on")
  rows = runner.read_jsonl(tmp_path / "on" / "metrics.jsonl")
  assert [r["step"] for r in rows] == [10, 20, 30, 40]
  with_dyn = [r["step"] for r in rows if "dynamics/rotation_share" in r]
  assert with_dyn == [20, 40]  # evaluations 2 and 4 (every 2nd)
  r = rows[3]
  assert 0.0 <= r["dynamics/rotation_share"] <= 1.0
  assert r["dynamics/top_abs"] > 0 and r["dynamics/max_imag"] >= 0
  assert len(r["dynamics/eigenvalues_re"]) == 3 and len(r["dynamics/eigenvalue_residuals"]) == 3
  # Lookahead over AltGDA at the learning rates: a radius per cycle and per step.
  assert r["dynamics/spectral_radius"] == pytest.approx(np.exp(r["dynamics/log_spectral_radius"]))
  assert r["dynamics/spectral_radius_per_step"] == pytest.approx(
    r["dynamics/spectral_radius"] ** (1 / 3)
  )
  (events,) = (tmp_path / "on" / "tensorboard").glob("events.out.tfevents.*")
  scalars = runner.read_scalars(events)
  assert (40, "dynamics/rotation_share", pytest.approx(r["dynamics/rotation_share"])) in scalars
  # The same run without the action: the same losses and evaluations.
  train.train(config(0), tmp_path / "off")
  off = runner.read_jsonl(tmp_path / "off" / "metrics.jsonl")
  for a, b in zip(rows, off, strict=True):
    assert {k: v for k, v in a.items() if not k.startswith("dynamics/")} == b


def test_dynamics_config_checks():
  c = config(-1)
  with pytest.raises(ValueError, match="dynamics_every"):
    train.check_config(c)
  c = config(1)
  c.dynamics.num_eigenvalues = 7
  with pytest.raises(ValueError, match="num_eigenvalues"):
    train.check_config(c)
  c = config(1)
  c.dynamics.num_probes = 0
  with pytest.raises(ValueError, match="num_probes"):
    train.check_config(c)
  assert train.dynamics_due(config(2), 40) and not train.dynamics_due(config(2), 30)
  assert not train.dynamics_due(config(0), 40)


def test_a_rerun_may_change_the_dynamics_action(tmp_path):
  from experiments.gan import main

  assert set(main.MAY_CHANGE) == set(train.RESUME_MAY_CHANGE)
  saved = config(0)
  (tmp_path / "config.json").write_text(saved.to_json())
  now = config(3)
  now.dynamics.num_probes = 4
  assert runner.config_changes(tmp_path, now, main.MAY_CHANGE) == {}
  now.seed = 5  # any other field still refuses the rerun
  assert runner.config_changes(tmp_path, now, main.MAY_CHANGE) == {"seed": (0, 5)}
