"""Smoke test for the declared minimum versions (run by ``python3 dev.py mincheck``).

Runs in a throwaway venv holding the installed (not editable) project at the floors of
pyproject.toml, with every warning an error. It imports every subpackage, checks a game
step against its closed form, jits with the coevolution's compile modes, and runs the GAN
experiment for 2 steps and resumes it for a third (orbax checkpoints, tensorboardX, tqdm,
matplotlib PNGs, ml_collections).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.simplefilter("error")
ROOT = Path(__file__).resolve().parents[1]
t0 = time.perf_counter()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import minmaxlab as mml  # noqa: E402

assert ROOT not in Path(mml.__file__).resolve().parents, f"not the installed copy: {mml.__file__}"
for name in ("analysis", "coevolution", "distributed", "games", "gan", "pbt", "runner"):
  importlib.import_module(f"minmaxlab.{name}")
print(f"imports: {time.perf_counter() - t0:.1f} s", flush=True)


# Bilinear game min_x max_y x*y. Simultaneous gradient descent-ascent with step eta
# multiplies |(x, y)|^2 by exactly 1 + eta^2 per step; optimistic GDA converges.
def loss_fn(p):
  f = p.min * p.max
  return f, -f


field = mml.value_and_vector_field(loss_fn)
eta = 0.1
for tx, check in (
  (optax.sgd(eta), lambda r: np.isclose(r, (1 + eta**2) ** 50, rtol=1e-4)),
  (mml.optimistic(optax.sgd(eta)), lambda r: r < 0.7),  # measured 0.61
):
  params = mml.Players(jnp.float32(1.0), jnp.float32(1.0))
  state = tx.init(params)
  step = jax.jit(lambda p, s, tx=tx: mml.game_step(tx, lambda q, i: field(q), p, s)[:2])
  for _ in range(50):
    params, state = step(params, state)
  ratio = float(params.min**2 + params.max**2) / 2.0
  assert check(ratio), (tx, ratio)
print(f"game steps: {time.perf_counter() - t0:.1f} s", flush=True)

# The coevolution configs' compile modes: XLA must know their options at the jax floor.
from minmaxlab import distributed  # noqa: E402

for mode in ("fast", "fastest"):
  opts = distributed.compiler_options(mode, "cpu")
  got = jax.jit(lambda x: jnp.tanh(x @ x), compiler_options=opts)(jnp.eye(4))
  np.testing.assert_allclose(np.asarray(got), np.tanh(np.eye(4)), rtol=1e-6)
print(f"compile modes: {time.perf_counter() - t0:.1f} s", flush=True)

sys.path.append(str(ROOT))  # the experiments (not installed); minmaxlab stays the installed one
from experiments.gan import train  # noqa: E402
from experiments.gan.configs import smoke  # noqa: E402
from minmaxlab import runner  # noqa: E402

config = smoke.get_config()
config.progress = False
config.num_steps, config.log_every, config.eval_every, config.checkpoint_every = 2, 1, 2, 1
config.num_eval_samples = 64
with tempfile.TemporaryDirectory() as tmp:
  workdir = Path(tmp) / "gan"
  train.train(config, workdir)
  config.num_steps = 3
  row = train.train(config, workdir, resume=True)
  rows = runner.read_jsonl(workdir / "metrics.jsonl")
  assert [r["step"] for r in rows] == [1, 2, 3], rows
  assert row["step"] == 3 and np.isfinite(row["g_loss"]) and np.isfinite(row["d_loss"])
  assert runner.CheckpointManager(workdir / "checkpoints").latest_step() == 3
  events = [
    e for f in (workdir / "tensorboard").glob("events.out.*") for e in runner.read_events(f)
  ]
  assert {(2, "samples", "image"), (3, "samples", "image")} <= {e[:3] for e in events}, events
  assert (workdir / "samples" / "step_2.png").stat().st_size > 1000
print(f"GAN 2 steps + resume: {time.perf_counter() - t0:.1f} s", flush=True)
print("min-versions smoke test passed")
