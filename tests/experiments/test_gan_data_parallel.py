"""experiments/gan data parallel: the minibatch split over 4 (fake CPU) devices gives the
one-device numbers to float tolerance, end to end and through a resume."""

import chex
import jax
import numpy as np
import pytest

from experiments.gan import train
from experiments.gan.configs import smoke


def _config(n):
  config = smoke.get_config()
  config.hidden, config.data_parallel, config.progress, config.tensorboard = (16,), n, False, False
  return config


def _chunks(config, k):
  exp = train.build(config)
  chunk = train.make_chunk(exp, config)
  state = train.make_init(exp, config)()
  mesh = train.data_mesh(config)
  if mesh is not None:
    state = jax.device_put(state, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))
  out = []
  for _ in range(k):
    state, losses, finite = chunk(state)
    out.append(np.asarray(losses))
    assert bool(finite)
  return state, out, chunk


@pytest.mark.slow
def test_four_devices_give_the_one_device_numbers():
  assert len(jax.local_devices()) >= 4  # conftest: JAX_NUM_CPU_DEVICES=4
  s1, l1, _ = _chunks(_config(1), 2)
  s4, l4, chunk = _chunks(_config(4), 2)
  for leaf in jax.tree.leaves(s4.params):  # replicated on the 4 devices
    assert len(leaf.sharding.device_set) == 4 and leaf.sharding.is_fully_replicated
  hlo = chunk.lower(s4).compile().as_text()
  assert "all-reduce" in hlo  # the batch really is split: partial gradients are summed
  np.testing.assert_allclose(np.concatenate(l4), np.concatenate(l1), rtol=1e-5, atol=1e-6)
  chex.assert_trees_all_close(s4, s1, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_train_data_parallel_resumes_and_checks(tmp_path):
  config = _config(4)
  config.num_steps = 20
  train.train(config, tmp_path)
  config.num_steps = 40
  row = train.train(config, tmp_path, resume=True)  # restores, re-replicates, goes on
  assert np.isfinite(row["g_loss"]) and np.isfinite(row["d_loss"])
  bad = _config(3)  # 32 is not a multiple of 3
  with pytest.raises(ValueError, match="multiple of config.data_parallel=3"):
    train.check_config(bad)
  with pytest.raises(ValueError, match="64 devices|devices"):
    train.data_mesh(_config(64))
