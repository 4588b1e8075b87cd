"""The timing half of ``gpu_check.sh``: a 4x4 coevolution grid of DCGAN cells and a vectorized
PBT round on the default JAX device, with the fraction of its peak FLOP/s.

  python experiments/benchmarks/gpu_check.py [--dry] [--out FILE] [--budget-s S] [--tests-json FILE]

One JSON line per phase, printed as it ends (``phase``, ``elapsed_s`` since the start): the
device (within seconds), each workload at the small size (a one-layer MLP pair: seconds to
compile), then at the full size (the DCGAN), then a 20-step generation, then ``summary`` (every
number of the largest size that ran, the record earlier versions wrote as their one line). A
workload's line times its phases apart: ``lower_s`` (tracing and lowering), ``compile_s``
(that and XLA), ``first_call_s`` and ``seconds`` (the median of the timed calls after it).
Compiled programs go to the persistent compilation cache (``runner.enable_compilation_cache``),
so a second call of the check loads them. No workload starts after ``--budget-s`` seconds
(default 240, ``$GPU_CHECK_BUDGET_S``): its line says it was skipped.

Workloads (random images in [-1, 1] of shape 32x32x3: the content does not change the cost):

* ``coevolution``: one jit-compiled generation of a 4x4 torus (von Neumann neighbourhoods,
  population 1 per cell, cells batched with ``vmap``) of the 32x32 DCGAN pair, Adam GDA,
  NS-BCE: the 5x5 fitness matrices on ``fitness_samples`` samples, selection, mutation,
  ``steps`` training steps of batch ``batch``, replacement and the mixture ES.
* ``pbt``: one round of ``minmaxlab.pbt.vectorized_pbt`` over 16 members of the same DCGAN
  pair (injected Adam learning rates of both players, hinge loss, ``steps`` training steps,
  a discriminator-loss fitness, truncation exploit and explore).

FLOPs come from XLA's cost analysis of the compiled program (``compiled.cost_analysis()``),
which counts the body of a ``while`` loop once. The programs are therefore timed with one
training step per call (``steps = 1``): every loop then runs once and the count is exact.
The JSON checks this from the optimized HLO (``while_loops``;
``matmul_loops_run_more_than_once``: loops holding a dot or a convolution that run more than
once) and says ``flops_exact``. A generation with more steps (``--generation-steps``) is timed
as well, without a FLOP count.

The peak is the device's dense FP32 rate or, where float32 matmuls and convolutions run on
TF32 tensor cores (JAX's default precision on NVIDIA Ampere and later), its dense TF32 rate,
from the table below by device name; ``--peak-flops`` (or ``$GPU_CHECK_PEAK_FLOPS``)
overrides it (the CPU has no entry: the fraction is null unless one is given).
``--dry`` runs the small size only (the CPU check in CI and the test suite: XLA's quicker CPU
code, no extra generation).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402

# Vendor datasheet peaks, FLOP/s, dense (no sparsity): (fp32 SIMT, tf32 tensor core).
PEAK_FLOPS = {
  "H200": (67e12, 494.7e12),  # H200 SXM
  "H100 80GB HBM3": (67e12, 494.7e12),  # H100 SXM
  "H100 PCIe": (51.2e12, 378e12),
  "H100": (67e12, 494.7e12),
  "A100-SXM4-80GB": (19.5e12, 156e12),
  "A100-SXM4-40GB": (19.5e12, 156e12),
  "A100-PCIE-40GB": (19.5e12, 156e12),
  "A100 80GB PCIe": (19.5e12, 156e12),
  "L40S": (91.6e12, 183e12),
  "L4": (30.3e12, 60e12),
  "A10G": (31.2e12, 62.5e12),
  "Tesla V100-SXM2-16GB": (15.7e12, None),
  "Tesla V100-SXM2-32GB": (15.7e12, None),
  "Tesla T4": (8.1e12, None),
}


def peak_for(device_kind: str) -> tuple[str | None, float | None, float | None]:
  """``(table key, fp32 peak, tf32 peak)`` for a device name (exact, else the longest key
  contained in it), or Nones."""
  if device_kind in PEAK_FLOPS:
    return (device_kind, *PEAK_FLOPS[device_kind])
  hits = [k for k in PEAK_FLOPS if k.lower() in device_kind.lower()]
  if not hits:
    return None, None, None
  key = max(hits, key=len)
  return (key, *PEAK_FLOPS[key])


_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) .*\{$")
_CALLED = re.compile(
  r"(?:calls|to_apply|body|condition|true_computation|false_computation)=%([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


def _computations(hlo: str) -> dict[str, list[str]]:
  comps, current = {}, None
  for line in hlo.splitlines():
    m = _COMPUTATION.match(line)
    if m:
      current = comps.setdefault(m.group(1), [])
    elif current is not None:
      current.append(line)
  return comps


def _has_flop_ops(comps, name, seen=None) -> bool:
  """Whether a computation (or one it calls) holds a dot or a convolution."""
  seen = set() if seen is None else seen
  if name in seen or name not in comps:
    return False
  seen.add(name)
  for line in comps[name]:
    if re.search(r"\s(dot|convolution)\(", line):
      return True
    called = _CALLED.findall(line)
    for branches in _BRANCHES.findall(line):
      called += [b.strip().lstrip("%") for b in branches.split(",")]
    if any(_has_flop_ops(comps, c, seen) for c in called):
      return True
  return False


def program_cost(compiled) -> dict:
  """XLA's FLOP count of a compiled program and whether it is exact.

  XLA counts a ``while`` body once. The count is exact when no loop whose body holds a dot or
  a convolution runs more than once (loops of integer work, such as the threefry rounds of the
  random draws on CPU, are not FLOP-relevant: they are counted in ``while_loops`` only).
  """
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list | tuple) else cost
  flops = None if not cost or "flops" not in cost else float(cost["flops"])
  hlo = compiled.as_text()
  comps = _computations(hlo)
  loops = [line for line in hlo.splitlines() if re.search(r"\swhile\(", line)]
  repeated = 0
  for line in loops:
    trip = _TRIP.search(line)
    if trip is not None and int(trip.group(1)) <= 1:
      continue
    body = re.search(r"body=%([\w.\-]+)", line)
    if body is not None and _has_flop_ops(comps, body.group(1)):
      repeated += 1
  return {
    "xla_flops": flops,
    "while_loops": len(loops),
    "matmul_loops_run_more_than_once": repeated,
    "flops_exact": flops is not None and repeated == 0,
  }


def _run_phase(compiled, timing: dict, args: tuple, repeats: int) -> dict:
  """The compile phase (``timing``: tracing and lowering, XLA; a persistent-cache hit on a
  second call) and the run phase: the first call (transfers, the kernels' first launch) and
  the median of ``repeats`` timed calls after it."""
  import jax

  t0 = time.perf_counter()
  jax.block_until_ready(compiled(*args))
  first = time.perf_counter() - t0
  reps = h.interleave({"fn": lambda r: compiled(*args)}, repeats, warmup=0)["fn"]
  times = [r.wall_s for r in reps]
  return {
    "lower_s": timing["lower_s"],
    "compile_s": timing["compile_s"],
    "compile_cpu_s": timing["compile_cpu_s"],
    "first_call_s": round(first, 4),
    "seconds": statistics.median(times),
    "times": times,
    **program_cost(compiled),
  }


def _pair(size: dict):
  from minmaxlab.gan import models

  if size["architecture"] == "mlp":
    return models.make_pair("mlp", (32, 32, 3), latent_dim=size["latent"], hidden=(size["width"],))
  return models.make_pair("dcgan", (32, 32, 3), latent_dim=size["latent"], width=size["width"])


def _images(n: int):
  import jax

  return jax.random.uniform(jax.random.key(123), (n, 32, 32, 3), minval=-1.0, maxval=1.0)


def coevolution_workload(size: dict, steps: int, repeats: int) -> dict:
  import jax
  import jax.numpy as jnp

  from minmaxlab import coevolution as co
  from minmaxlab import distributed
  from minmaxlab.gan import data

  config = co.CoevolutionConfig(
    rows=4,
    cols=4,
    batch_size=size["batch"],
    steps_per_generation=steps,
    fitness_samples=size["fitness_samples"],
    mixture_samples=1,
    cell_strategy="vmap",
  )
  coev = co.Coevolution(
    config,
    _pair(size),
    sample_real=lambda d, k, n: data.sample_batch(k, d, n),
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
    scheme=co.default_scheme(2e-4, lookahead=False),
  )
  images = _images(size["images"])
  key = jax.random.key(0)
  opts = distributed.compiler_options(size["compile"])  # XLA's own for "default" and on GPUs
  state = jax.jit(coev.init, compiler_options=opts)(key)
  step = jax.jit(coev.step, compiler_options=opts)
  compiled, timing = h.compile_timed(step, key, state, images)
  return {"steps": steps, **_run_phase(compiled, timing, (key, state, images), repeats)}


def pbt_workload(size: dict, steps: int, repeats: int, members: int = 16) -> dict:
  import jax
  import optax

  import minmaxlab
  from minmaxlab import distributed, pbt
  from minmaxlab.gan import data, losses

  pair = _pair(size)
  loss_fn = losses.game_loss(pair, "hinge")
  vaf = minmaxlab.value_and_vector_field(loss_fn)
  tx = minmaxlab.per_player(
    min=optax.inject_hyperparams(optax.adam)(2e-4, b1=0.0, b2=0.9),
    max=optax.inject_hyperparams(optax.adam)(2e-4, b1=0.0, b2=0.9),
  )
  b = size["batch"]

  def init_member(key, hparams):
    del hparams
    k_g, k_d = jax.random.split(key)
    params = minmaxlab.Players(pair.generator.init(k_g), pair.discriminator.init(k_d))
    return params, tx.init(params)

  def batch(key, images):
    k_x, k_z = jax.random.split(key)
    return data.sample_batch(k_x, images, b), jax.random.normal(k_z, (b, pair.latent_dim))

  def train_step(key, params, opt_state, hparams, images):
    del hparams
    (loss_min, loss_max), field = vaf(params, *batch(key, images))
    updates, opt_state = tx.update(field, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, {"d_loss": loss_max}

  def evaluate(key, params, opt_state, hparams, images):
    del opt_state, hparams
    return -vaf(params, *batch(key, images))[0][1]

  space = {"lr_g": pbt.Continuous(low=1e-5, high=1e-3), "lr_d": pbt.Continuous(low=1e-5, high=1e-3)}
  runner = pbt.vectorized_pbt(
    init_member,
    train_step,
    evaluate,
    space,
    steps=steps,
    targets={"lr_g": ("min", "learning_rate"), "lr_d": ("max", "learning_rate")},
    exploit="truncation",
    jit=False,
  )
  images = _images(size["images"])
  opts = distributed.compiler_options(size["compile"])
  state = jax.jit(runner.init, static_argnums=1, compiler_options=opts)(jax.random.key(0), members)
  key = jax.random.key(1)
  compiled, timing = h.compile_timed(
    jax.jit(runner.step, compiler_options=opts), key, state, images
  )
  return {
    "members": members,
    "steps": steps,
    **_run_phase(compiled, timing, (key, state, images), repeats),
  }


SIZES = {
  # width: DCGAN base channels (MLP: the hidden layer); images: the real-data pool sampled from.
  # The dry size swaps the DCGAN for a one-layer MLP: on a loaded 2-core CPU XLA needs minutes to
  # compile a DCGAN coevolution generation, and the dry run only checks the script end to end.
  "full": {
    "architecture": "dcgan",
    "width": 64,
    "latent": 128,
    "batch": 128,
    "fitness_samples": 1000,
    "images": 8192,
    "compile": "default",
  },
  "dry": {
    "architecture": "mlp",
    "width": 8,
    "latent": 4,
    "batch": 4,
    "fitness_samples": 8,
    "images": 32,
    "compile": "fastest",  # on the CPU XLA's quicker code, as a test session's: half the compile
  },
}


def _parse(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--dry", action="store_true", default=os.environ.get("GPU_CHECK_DRY") == "1")
  parser.add_argument("--out", default="", help="append the JSON lines to this file too")
  parser.add_argument("--tests-json", default="", help="JSON of the test run to include")
  parser.add_argument("--repeats", type=int, default=0, help="timed repeats (default 5, dry 1)")
  parser.add_argument(
    "--generation-steps",
    type=int,
    default=0,
    help="steps of the extra timed generation (default 20, dry none)",
  )
  parser.add_argument(
    "--budget-s",
    type=float,
    default=float(os.environ.get("GPU_CHECK_BUDGET_S", "240")),
    help="no new workload starts after this many seconds (default 240: the check fits in 4"
    " minutes with the workload that runs when it ends)",
  )
  parser.add_argument(
    "--peak-flops", type=float, default=float(os.environ.get("GPU_CHECK_PEAK_FLOPS", "0") or 0)
  )
  return parser.parse_args(argv)


def _with_rates(w: dict, peak, fp32) -> dict:
  rate = None if w["xla_flops"] is None else w["xla_flops"] / w["seconds"]
  w["flops_per_s"] = rate
  w["peak_fraction"] = None if rate is None or not peak else rate / peak
  if fp32 and rate is not None:
    w["fp32_peak_fraction"] = rate / fp32
  return w


def main(argv=None) -> dict:
  args = _parse(argv)
  started = time.perf_counter()
  import jax

  from minmaxlab import runner

  cache = runner.enable_compilation_cache()  # a second call loads the compiled programs
  repeats = args.repeats or (1 if args.dry else 5)
  gen_steps = 0 if args.dry else (args.generation_steps or 20)
  device = jax.devices()[0]
  kind = device.device_kind
  key, fp32, tf32 = peak_for(kind)
  peak, peak_source = (fp32, "fp32") if tf32 is None else (tf32, "tf32")
  if args.peak_flops > 0:
    peak, peak_source = args.peak_flops, "given"
  base = {"check": "gpu_check", "dry": bool(args.dry), "device": kind}

  def say(phase: str, record: dict) -> dict:
    elapsed = round(time.perf_counter() - started, 2)
    h.emit({**base, "phase": phase, "elapsed_s": elapsed, **record}, args.out or None)
    return record

  say(
    "device",
    {
      "platform": device.platform,
      "device_count": jax.device_count(),
      "jax": jax.__version__,
      "cache": None if cache is None else str(cache),
    },
  )
  # The small case first (a line within seconds of the start), then the real sizes.
  phases = [("small", SIZES["dry"])] + ([] if args.dry else [("full", SIZES["full"])])
  done: dict[str, dict] = {}  # workload -> its record of the largest size that ran
  sizes: dict[str, dict] = {}
  plan = []
  for phase, size in phases:
    plan += [
      (phase, size, "coevolution_4x4", lambda size: coevolution_workload(size, 1, repeats)),
      (phase, size, "pbt_vectorized_16", lambda size: pbt_workload(size, 1, repeats)),
    ]
  if gen_steps:
    gen = lambda size: coevolution_workload(size, gen_steps, repeats)  # noqa: E731
    plan.append(("full", SIZES["full"], "coevolution_4x4_generation", gen))
  for phase, size, name, run in plan:
    if time.perf_counter() - started > args.budget_s:
      say(phase, {"workload": name, "skipped": f"the budget of {args.budget_s:g} s is spent"})
      continue
    w = run(size)
    if name != "coevolution_4x4_generation":
      w = _with_rates(w, peak, fp32)
    done[name] = say(phase, {"workload": name, "architecture": size["architecture"], **w})
    sizes[name] = size
  tests = None
  if args.tests_json and os.path.exists(args.tests_json):
    with open(args.tests_json) as f:
      tests = json.load(f)
  peaks = {"peak_table_key": key, "peak_flops": peak, "peak_source": peak_source if peak else None}
  return say("summary", _summary(done, sizes, device, peaks, tests))


def _summary(done: dict, sizes: dict, device, peaks: dict, tests) -> dict:
  """The last line: every number of the largest case that ran (the check's record)."""
  import jax

  size = sizes.get("coevolution_4x4", SIZES["dry"])
  coevolution, population = done.get("coevolution_4x4"), done.get("pbt_vectorized_16")
  generation = done.get("coevolution_4x4_generation", coevolution) or {}
  return {
    "date": datetime.now(UTC).isoformat(timespec="seconds"),
    "platform": device.platform,
    "device_count": jax.device_count(),
    "jax": jax.__version__,
    "host": platform.node(),
    "machine": h.host(),
    **peaks,
    "size": size,
    "architecture": size["architecture"],
    "coevolution_4x4": coevolution,
    "coevolution_4x4_generation": {
      k: generation.get(k) for k in ("steps", "compile_s", "first_call_s", "seconds", "times")
    },
    "pbt_vectorized_16": population,
    "peak_fraction": {
      "coevolution_4x4": (coevolution or {}).get("peak_fraction"),
      "pbt_vectorized_16": (population or {}).get("peak_fraction"),
    },
    "tests": tests,
  }


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
