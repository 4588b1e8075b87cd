r"""CPU seconds per seed-step of a Lookahead protocol's arm on this host, through the study's
own program (``lookahead_study._chunk``: the protocol's networks, optimizer and latent draws,
its seeds vmapped), measured before a protocol is registered.

  nice -n 15 python -m experiments.gan.lookahead_cost PROTOCOL --arm alt --seeds 10 \
      --steps 2 --repeats 2

The chunk of ``--steps`` steps is compiled and run once untimed, then timed ``--repeats``
times: this process's CPU seconds (every thread; the steadier figure on a shared host) per
step and seed, the median over the repeats. Also timed: sampling ``eval_samples`` images from
one seed's generator in batches of 500 (what an evaluation point costs besides the classifier).
Prints one JSON line with the host's CPU model and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import types


def _config(protocol: dict, arm: str, steps: int):
  from experiments.gan import lookahead_study

  s = protocol["settings"]
  args = types.SimpleNamespace(
    steps=steps,
    eval_every=steps,
    eval_samples=s["eval_samples"],
    lr=s["lr"],
    b1=s["b1"],
    batch_size=s["batch_size"],
    set=None,
    config_fields=s.get("config_fields", {}),
  )
  spec = {k: v for k, v in protocol["arms"][arm].items() if k != "label"}
  config = lookahead_study.study_config(arm, 0, args, spec)
  config.log_every = steps
  return config


def _cpu(fn) -> float:
  import jax

  t0 = time.process_time()
  jax.block_until_ready(fn())
  return time.process_time() - t0


def measure(protocol_file: str, arm: str, seeds: int, steps: int, repeats: int) -> dict:
  """The CPU seconds of the protocol's arm ``arm``: ``seeds`` seeds vmapped, chunks of
  ``steps`` steps (see the module docstring)."""
  import jax
  import numpy as np

  from experiments import _report
  from experiments.gan import lookahead_study

  protocol = _report.load_protocol(protocol_file)
  config = _config(protocol, arm, steps)
  horizon = float(protocol["settings"]["ema_horizon_steps"])
  one = lookahead_study.arm_program(config, list(range(seeds)), horizon)
  state = lookahead_study.initial_states(one)
  train_keys = jax.numpy.stack([k[1] for k in one.keys])
  box = {"state": state}

  def chunk():
    box["state"], finite = one.chunk(box["state"], train_keys)
    return finite

  first = _cpu(chunk)  # compilation and one chunk
  timed = [_cpu(chunk) for _ in range(repeats)]
  g = jax.tree.map(lambda x: x[0], box["state"]).params.min
  n = config.num_eval_samples
  z = jax.random.normal(jax.random.key(0), (n, one.exp.pair.latent_dim))

  def sample():
    return np.concatenate([np.asarray(one.generate(g, z[j : j + 500])) for j in range(0, n, 500)])

  _cpu(sample)  # compile
  per = statistics.median(timed) / (steps * seeds)
  return {
    "protocol": str(protocol_file),
    "arm": arm,
    "config_fields": dict(protocol["settings"].get("config_fields", {})),
    "seeds_vmapped": seeds,
    "steps_per_chunk": steps,
    "first_chunk_cpu_s_with_compile": round(first, 1),
    "chunk_cpu_s": [round(t, 2) for t in timed],
    "cpu_s_per_seed_step": round(per, 3),
    "cpu_s_per_1000_steps_all_seeds": round(per * 1000 * seeds),
    "sample_cpu_s_per_point_and_seed": round(_cpu(sample), 2),
    "host": _host(),
    "load_average": [round(x, 1) for x in os.getloadavg()],
    "jax": jax.__version__,
  }


def _host() -> str:
  try:
    for line in open("/proc/cpuinfo"):
      if line.startswith("model name"):
        return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} vCPU"
  except OSError:
    pass
  return f"{platform.processor() or platform.machine()}, {os.cpu_count()} vCPU"


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument(
    "protocol", help="a protocol file, e.g. experiments/gan/protocols/lookahead.v4.json"
  )
  p.add_argument("--arm", required=True)
  p.add_argument("--seeds", type=int, default=10, help="seeds vmapped (the protocol's count)")
  p.add_argument("--steps", type=int, default=2, help="steps per timed chunk")
  p.add_argument("--repeats", type=int, default=2)
  a = p.parse_args(argv)
  for name in ("seeds", "steps", "repeats"):
    if getattr(a, name) < 1:
      raise SystemExit(f"--{name} must be >= 1, got {getattr(a, name)}")
  from experiments import _report

  protocol = _report.load_protocol(a.protocol)
  if a.arm not in protocol["arms"]:
    raise SystemExit(f"--arm: {a.arm} not in {', '.join(protocol['arms'])}")
  print(json.dumps(measure(a.protocol, a.arm, a.seeds, a.steps, a.repeats)), flush=True)


if __name__ == "__main__":
  main()
