r"""Vectorized members vs the same members one after another (member-steps/s).

  python -m experiments.pbt.throughput --config experiments/pbt/configs/ring8.py \
      --population 1,4,16 --steps 250 --repeats 3

The same jitted per-member training program (``train.RingGANTask.programs``: LA-AltGAN on the
8-Gaussian ring, injected learning rates) is run for P members either as one
``jax.vmap`` over the member axis (what ``minmaxlab.pbt.vectorized_pbt`` does)
or P times in a row. Prints one JSON line per population size (median of the
repeats, compile excluded).
"""

import json
import time

import ml_collections
from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_POPULATION = flags.DEFINE_list("population", ["1", "4", "16"], "Population sizes.")
_STEPS = flags.DEFINE_integer("steps", 250, "Training steps per member per call.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats (median).")
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  import jax
  import jax.numpy as jnp
  import numpy as np

  from experiments.pbt import train

  config = ml_collections.ConfigDict(_CONFIG.value.to_dict())
  config.steps_per_trial = _STEPS.value
  task = train.RingGANTask(config)
  init, chunk, _ = task.programs()
  vchunk = jax.jit(jax.vmap(chunk))

  def block(x):
    return jax.block_until_ready(x)

  for P in map(int, _POPULATION.value):
    keys = jax.random.split(jax.random.key(0), P)
    states = [init(k) for k in keys]
    hps = [
      {"lr_min": jnp.float32(1e-3), "lr_max": jnp.float32(1e-3), "lr_decay": jnp.float32(1)}
      for _ in range(P)
    ]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    stacked_h = jax.tree.map(lambda *x: jnp.stack(x), *hps)
    block(vchunk(keys, stacked, stacked_h))  # compile
    block(chunk(keys[0], states[0], hps[0]))
    t_vec, t_seq = [], []
    for _ in range(_REPEATS.value):
      t = time.perf_counter()
      block(vchunk(keys, stacked, stacked_h))
      t_vec.append(time.perf_counter() - t)
      t = time.perf_counter()
      for i in range(P):
        block(chunk(keys[i], states[i], hps[i]))
      t_seq.append(time.perf_counter() - t)
    member_steps = P * _STEPS.value
    row = {
      "population": P,
      "steps": _STEPS.value,
      "backend": jax.default_backend(),
      "vectorized_member_steps_per_s": member_steps / float(np.median(t_vec)),
      "sequential_member_steps_per_s": member_steps / float(np.median(t_seq)),
    }
    row["speedup"] = row["vectorized_member_steps_per_s"] / row["sequential_member_steps_per_s"]
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
  app.run(main)
