"""experiments/gan cifar10_lagan: the paper's protocol pinned, and 2 steps on a tiny fake CIFAR."""

import pickle

import chex
import jax
import numpy as np
import pytest

import minmaxlab
from experiments.gan import train
from experiments.gan.configs import cifar10_lagan, cifar10_lagan_smoke, smoke
from minmaxlab import runner


def _write_fake_cifar(folder, per_batch=8):
  folder.mkdir()
  rng = np.random.default_rng(0)
  for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
    batch = {
      b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
      b"labels": [int(v) for v in rng.integers(0, 10, per_batch)],
    }
    (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
  return folder


def _state_names(state):
  if isinstance(state, tuple):
    if hasattr(state, "_fields"):
      yield type(state).__name__
    for part in state:
      yield from _state_names(part)


def test_protocol_is_the_papers():
  c = cifar10_lagan.get_config()
  assert (c.architecture, c.spectral_norm, c.width, c.latent_dim) == ("sn_resnet", True, 128, 128)
  assert (c.loss, c.scheme, c.max_steps) == ("hinge", "alternating", 5)
  assert (c.lr_min, c.lr_max, c.b1, c.b2, c.batch_size) == (2e-4, 2e-4, 0.0, 0.9, 128)
  assert (c.lookahead, c.sync_period, c.slow_step_size) == (True, 5, 0.5)
  assert (c.ema_decay, c.ema_slow, c.num_steps) == (0.9999, True, 500_000)
  alt, unrolled = cifar10_lagan.get_config("altgan"), cifar10_lagan.get_config("unrolled")
  assert not alt.lookahead and not alt.ema_slow and alt.max_steps == 5
  assert (unrolled.scheme, unrolled.unroll_steps, unrolled.lookahead) == ("unrolled", 5, False)
  with pytest.raises(ValueError, match="variant"):
    cifar10_lagan.get_config("svre")
  # The optimizer it builds: slow-weight EMA over lookahead over AltGAN(5) over per-player Adam.
  tx = train.make_optimizer(c)
  params = minmaxlab.Players(np.zeros(2, np.float32), np.zeros(2, np.float32))
  state = tx.init(params)
  found = set(_state_names(state))
  assert {"AveragingState", "LookaheadMinmaxState", "AlternatingState"} <= found


@pytest.mark.slow  # about a minute of CPU: compiling the SN-ResNet step and the evaluator
def test_smoke_two_steps_on_a_fake_cifar_folder(tmp_path):
  config = cifar10_lagan_smoke.get_config()
  config.data_dir = str(_write_fake_cifar(tmp_path / "cifar-10-batches-py"))
  config.classifier.cache_dir = str(tmp_path / "cache")
  # The evaluation only needs a trained classifier: one step of the 32x32x3 CNN instead of the
  # config's 5 (each costs over half a CPU-second), whose quality nothing here reads.
  config.classifier.steps = 1
  workdir = tmp_path / "run"
  last = train.train(config, workdir)
  rows = runner.read_jsonl(workdir / "metrics.jsonl")
  assert [r["step"] for r in rows] == [2]
  assert np.isfinite(last["g_loss"]) and np.isfinite(last["d_loss"])
  assert any(k.startswith("ema/") for k in last)
  assert (workdir / "samples" / "ema_step_2.png").is_file()
  # The checkpoint: one sync happened (k = 2), so the slow-weight EMA holds one average.
  exp, init, _, _ = train.programs(config)
  state = init()
  ckpt = runner.CheckpointManager(workdir / "checkpoints")
  state = ckpt.restore(jax.eval_shape(lambda: state))[0]
  assert int(state.step) == 2
  averaging = [
    s
    for s in jax.tree.leaves(state.opt_state, is_leaf=lambda s: hasattr(s, "num_averaged"))
    if hasattr(s, "num_averaged")
  ]
  assert int(averaging[0].num_averaged) == 2  # the initial point and one sync
  slow = minmaxlab.lookahead_slow_params(state.opt_state)
  start = init().params.min
  # Right after a sync fast == slow (up to rounding: the fused update computes them apart).
  chex.assert_trees_all_close(slow.min, state.params.min, rtol=1e-5, atol=1e-10)
  # The evaluated generator: EMA (decay 0.5) of the initial and the synced slow weights.
  ema = minmaxlab.transforms.averaged_params(state.opt_state).min
  want = jax.tree.map(lambda s0, s1: 0.5 * s0 + 0.5 * s1, start, slow.min)
  chex.assert_trees_all_close(ema, want, rtol=1e-6, atol=1e-7)


def test_unrolled_scheme_runs_in_the_trainer(tmp_path):
  config = smoke.get_config()
  config.scheme = "unrolled"
  config.unroll_steps = 2
  config.num_steps = config.eval_every = config.checkpoint_every = config.log_every = 10
  config.progress = config.tensorboard = False
  assert train.num_field_evaluations(config) == 3
  last = train.train(config, tmp_path / "run")
  assert np.isfinite(last["g_loss"]) and "modes_covered" in last
