"""Throughput of one coevolution generation: grid sizes x cell strategies (one JSON line).

Work per cell and generation (Lipizzaner's MNIST setup): the MLP pair G 64-256-256-784
(tanh) / D 784-256-256-1, batch 100, plain Adam (``co.default_scheme(lookahead=False)``),
the 5x5 fitness matrices on 1000 samples (before training, and again for the
replacement), ``--steps`` training steps (each step: one G update against a drawn D and
one D update against a drawn G), tournament, mutation, replacement and the mixture
(1+1)-ES. The mixture score in the timed generation is a trivial one on 1 sample per
generator, so generation times exclude FID; the in-step classifier-FID of a 5-generator
mixture (``metrics.fid_score`` through the evaluation CNN, random weights: same cost) is timed
on its own (``fid_score_seconds``, two per cell per generation). Real images are random
arrays in [-1, 1] (the content does not change the cost).

Strategies for a ``rows x cols`` grid:
- ``vmap``: ``jax.jit(Coevolution(cell_strategy="vmap").step)``: cells batched;
- ``map``: the same jit with cells stepped one after another by ``lax.map``;
- ``loop``: a Python loop over the ``rows*cols`` cells, each calling the jitted step of a
  1x1 ``Coevolution``. A 1x1 cell computes exactly the per-cell work above (its
  neighbourhood slots are copies of itself, masked but still evaluated: the fitness
  matrices keep their 5x5 shape), without the neighbour exchange.

No number measured on another host enters any ratio here: every ratio divides two programs
timed in the same process, interleaved, on this host (``--floor``), and the JSON states the
CPU model and the load.

  python experiments/benchmarks/coevolution_throughput.py [--steps 20] [--grids 1x1,2x2,3x3]
      [--generations 2] [--strategies vmap,map,loop]
  python experiments/benchmarks/coevolution_throughput.py --floor [--generations 5] [--with-d1]
      [--profile] [--fitness-samples 1000]

``--floor`` times a 2x2 Lipizzaner generation (600 batches per cell, ``schedule="lipizzaner"``,
``d_every=2``: per batch the generator steps, then on every second batch the discriminator
steps against the updated generator with fresh fakes; the 5x5 fitness matrices on 1000
samples, ``--fitness-samples``, and the replacement's re-scoring of the trained pair) against
a plain-JAX floor program doing the same work (hand-written MLP, softplus BCE and Adam, 4 cells
one after another), repeats interleaved. Both programs' matmul FLOPs per generation come from XLA's
compiled HLO (every ``dot``, scaled by the known trip counts of the loops around it; XLA's
own ``cost_analysis()`` counts a loop body once, so its totals are printed too), so the JSON
shows that the work is equal. It also measures XLA's throughput on each matmul shape of the
training step in isolation (``lax.scan`` of 200 dots) in the same run, and reports the
training phase's GFLOP/s as a fraction of that per-shape mix. The FLOP counting and the
per-shape timing are in ``_matmul_flops.py``, the floor program in ``_floor_program.py``.
``--profile`` then runs one more generation of each full program under ``jax.profiler``
and adds each one's kernel milliseconds by kind (matmul, elementwise, copy, ...) and per
matmul shape (``_kernel_profile.py``).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402
from experiments.benchmarks._floor_program import reference_program  # noqa: E402
from experiments.benchmarks._kernel_profile import profile_call  # noqa: E402
from experiments.benchmarks._matmul_flops import (  # noqa: E402
  hlo_matmul_flops,
  matmul_throughput,
  xla_cost_flops,
)
from minmaxlab import coevolution as co  # noqa: E402
from minmaxlab.gan import data, metrics, models  # noqa: E402


class FidData(NamedTuple):
  clf: Any
  real_mean: jax.Array
  real_cov: jax.Array


def _rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _coevolution(
  rows, cols, steps, strategy, pair, d_every=1, schedule="simultaneous", fitness_samples=1000
):
  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=cols,
    batch_size=100,
    steps_per_generation=steps,
    d_every=d_every,
    schedule=schedule,
    fitness_samples=fitness_samples,
    mixture_samples=1,
    cell_strategy=strategy,
  )
  return co.Coevolution(
    cfg,
    pair,
    sample_real=lambda d, k, n: data.sample_batch(k, d, n),
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
    scheme=co.default_scheme(2e-4, lookahead=False),
  )


def _compile(coev, images):
  key = jax.random.key(0)
  state = jax.jit(coev.init)(key)
  t0 = time.perf_counter()
  compiled = jax.jit(coev.step).lower(key, state, images).compile()
  compile_s = time.perf_counter() - t0
  mem = compiled.memory_analysis()
  temp_mib = None if mem is None else getattr(mem, "temp_size_in_bytes", 0) / 2**20
  return compiled, state, compile_s, temp_mib


def _generation(prog, key, images):
  """One generation of a ``floor`` program entry ``[compiled, state, compile_s, temp_mib]``,
  its state replaced by the new one. The floor program (``temp_mib`` None) takes
  ``(key, cells)``, the library's step ``(key, state, data)``."""
  if prog[3] is None:
    prog[1], _ = prog[0](key, prog[1])
  else:
    prog[1], _ = prog[0](key, prog[1], images)
  return prog[1]


def _floor_programs(args, pair, images) -> dict:
  """``{(name, steps, d_every): [compiled, state, compile_s, temp_mib]}``: each strategy's
  full and 2-step programs (and d_every=1 with ``--with-d1``), then the plain-JAX floor's."""
  programs = {}
  full = args.floor_steps
  for strategy in args.strategies.split(","):
    for steps, d_every in ((full, 2), (2, 2)) + (((full, 1),) if args.with_d1 else ()):
      if d_every == 1 and strategy != "map":
        continue
      coev = _coevolution(2, 2, steps, strategy, pair, d_every, args.schedule, args.fitness_samples)
      compiled, state, compile_s, temp_mib = _compile(coev, images)
      programs[(strategy, steps, d_every)] = [compiled, state, compile_s, temp_mib]
      print(f"# compiled {strategy} steps={steps} d_every={d_every}: {compile_s:.1f} s", flush=True)
  if args.reference:
    for steps in (full, 2):
      ref, cells, compile_s = reference_program(images, steps, 2, args.fitness_samples)
      programs[("floor", steps, 2)] = [ref, cells, compile_s, None]
      print(f"# compiled the plain-JAX floor, steps={steps}: {compile_s:.1f} s", flush=True)
  return programs


def _program_entry(prog, steps, d_every, reps) -> dict:
  """One program's JSON: every repeat, medians, compile, XLA temp and its matmul FLOPs."""
  compiled, _, compile_s, temp_mib = prog
  secs = np.asarray([r.wall_s for r in reps])
  hlo = hlo_matmul_flops(compiled)
  xla_flops = xla_cost_flops(compiled)
  return {
    "steps": steps,
    "d_every": d_every,
    "seconds": [round(float(x), 3) for x in secs],
    "median_s": round(float(np.median(secs)), 3),
    "cpu_s": [round(r.cpu_s, 2) for r in reps],
    "cpu_s_median": round(float(np.median([r.cpu_s for r in reps])), 2),
    "min_s": round(float(secs.min()), 3),
    "compile_s": round(compile_s, 1),
    "xla_temp_mib": temp_mib and round(temp_mib, 1),
    "matmul_gflop_per_generation": round(hlo["flops"] / 1e9, 2),
    "dots_executed": hlo["dots"],
    "loops_without_trip_count": hlo["unknown_trip_counts"],
    "xla_cost_analysis_flops_loop_bodies_once_g": xla_flops and round(xla_flops / 1e9, 2),
    "matmul_gflops_per_s_median": round(hlo["flops"] / 1e9 / float(np.median(secs)), 1),
  }


def _train_ratios(P, strategies, full, mix) -> None:
  """Adds to each full program of ``P`` its training phase (full minus the 2-step program:
  seconds, ms per batch and cell, GFLOP/s and fraction of XLA's matmul mix) and its ratios to
  the floor, repeat by repeat (same round)."""
  floor_key = f"floor_s{full}_d2"
  for strategy in strategies:
    key, short = f"{strategy}_s{full}_d2", f"{strategy}_s2_d2"
    if key not in P:
      continue
    e, secs = P[key], np.asarray(P[key]["seconds"])
    train_s = float(np.median(secs - np.asarray(P[short]["seconds"])))
    train_flops = P[key]["matmul_gflop_per_generation"] - P[short]["matmul_gflop_per_generation"]
    e["train_s_median"] = round(train_s, 3)
    e["train_ms_per_batch_per_cell"] = round(train_s / (full - 2) / 4 * 1000, 2)
    e["train_matmul_gflops_per_s"] = round(train_flops / train_s, 1)
    e["train_fraction_of_xla_matmul_mix"] = round(train_flops / train_s / mix, 3)
    if floor_key not in P:
      continue
    fsecs = np.asarray(P[floor_key]["seconds"])
    ratios = h.paired_ratios(
      [h.Repeat(x, 0, 0) for x in secs], [h.Repeat(x, 0, 0) for x in fsecs], 3
    )
    e["ratio_to_floor_same_rep"] = ratios["ratios"]
    e["ratio_to_floor_median"] = ratios["median"]
    e["matmul_flops_over_floor"] = round(
      P[key]["matmul_gflop_per_generation"] / P[floor_key]["matmul_gflop_per_generation"], 4
    )
    f_train = float(np.median(fsecs - np.asarray(P["floor_s2_d2"]["seconds"])))
    f_flops = (
      P[floor_key]["matmul_gflop_per_generation"] - P["floor_s2_d2"]["matmul_gflop_per_generation"]
    )
    P[floor_key]["train_matmul_gflops_per_s"] = round(f_flops / f_train, 1)
    P[floor_key]["train_fraction_of_xla_matmul_mix"] = round(f_flops / f_train / mix, 3)


def floor(args, pair, images):
  """2x2, ``--floor-steps`` batches per cell with Lipizzaner's schedule: seconds per
  generation of the library's programs and of the equal-work plain-JAX floor, repeats
  interleaved; matmul FLOPs of each compiled program; GFLOP/s; XLA's per-shape matmul
  throughput. A 2-step program of each strategy gives the per-generation overhead (fitness,
  selection, replacement, ES), so training = t(S) - t(2)."""
  programs = _floor_programs(args, pair, images)
  cases = {
    k: (lambda r, p=p: _generation(p, jax.random.key(r), images)) for k, p in programs.items()
  }
  loads = [list(os.getloadavg())]
  cpu0 = time.process_time()
  reps = h.interleave(cases, args.generations, warmup=1, progress=lambda t: print("#", t))
  cpu_s = time.process_time() - cpu0
  loads += [[round(r.load_1min, 2)] for r in reps[next(iter(reps))]]
  per_shape, mix = matmul_throughput(repeats=args.matmul_repeats)
  print(f"# XLA matmul GFLOP/s per shape: {per_shape}; per-batch mix {mix}", flush=True)
  full = args.floor_steps
  out = {
    "benchmark": "coevolution_throughput --floor",
    "grid": "2x2",
    "work": f"{full} batches per cell, schedule={args.schedule}, d_every=2, plain Adam, "
    f"5x5 fitness on {args.fitness_samples} samples + the replacement's re-scoring, trivial "
    "mixture score (no FID)",
    "machine": h.host(),
    "load_average_per_rep": loads,
    "process_cpu_seconds_timed_loop": round(cpu_s, 1),
    "xla_matmul_gflops_per_shape": per_shape,
    "xla_matmul_gflops_train_mix": mix,
    "programs": {
      f"{n}_s{st}_d{d}": _program_entry(programs[(n, st, d)], st, d, reps[(n, st, d)])
      for n, st, d in programs
    },
  }
  if args.profile:  # after the timed loop: the profiler does not disturb the timings
    for (name, steps, d_every), prog in programs.items():
      if steps == full:
        run = lambda p=prog: h.block(_generation(p, jax.random.key(99), images))  # noqa: E731
        profile = profile_call(run, prog[0])
        out["programs"][f"{name}_s{steps}_d{d_every}"]["profile"] = profile
        print(f"# profile {name}: {profile['kernel_ms_by_kind']}", flush=True)
  _train_ratios(out["programs"], args.strategies.split(","), full, mix)
  h.emit(out)


def _grid_entry(grid, strategies, args, pair, images, single) -> dict:
  """One grid's generation seconds per strategy (``loop``: the 1x1 program ``single`` called
  once per cell), every repeat listed, compile seconds, XLA temp and the peak RSS so far."""
  rows, cols = (int(x) for x in grid.split("x"))
  cells = rows * cols
  entry = {}
  for strategy in strategies:
    if strategy == "loop":
      compiled1, state1 = single["program"]
      states = [state1] * cells

      def run(g, states=states, compiled1=compiled1):
        for i in range(cells):
          states[i], _ = compiled1(jax.random.fold_in(jax.random.key(g), i), states[i], images)
        return states

      compile_s, temp_mib = single["compile_s"], single["temp_mib"]  # one program for every grid
    elif grid == "1x1" and (strategy == "vmap" or single is not None):
      continue  # one cell: vmap, map and loop run the same single-cell program
    else:
      coev = _coevolution(rows, cols, args.steps, strategy, pair)
      compiled, state, compile_s, temp_mib = _compile(coev, images)
      holder = [state]

      def run(g, holder=holder, compiled=compiled):
        holder[0], _ = compiled(jax.random.key(g), holder[0], images)
        return holder[0]

    reps = h.interleave({strategy: run}, args.generations, warmup=1)[strategy]
    secs = [r.wall_s for r in reps]
    med = float(np.median(secs))
    entry[strategy] = {
      "seconds_per_generation": round(med, 3),
      "all_seconds": [round(s, 3) for s in secs],
      "all_cpu_seconds": [round(r.cpu_s, 3) for r in reps],
      "cell_steps_per_second": round(cells * args.steps / med, 1),
      "compile_seconds": round(compile_s, 2),
      "xla_temp_mib": None if temp_mib is None else round(temp_mib, 1),
      "max_rss_mib_so_far": round(_rss_mib(), 1),
    }
    print(f"# {grid} {strategy}: {entry[strategy]}", flush=True)
  return entry


def _fid_score_seconds() -> float:
  """Seconds of the in-step mixture FID: 5 generators x 1000 samples through the evaluation
  CNN (random weights: the same cost), median of 3 calls after a warm-up."""
  net = metrics.cnn_classifier((28, 28, 1), 10)
  params = net.init(jax.random.key(2))
  score = metrics.fid_score(lambda d, x: net.apply(d.clf, x)[0])
  d = FidData(params, jnp.zeros(net.feature_dim), jnp.eye(net.feature_dim))
  samples = jax.random.uniform(jax.random.key(3), (5, 1000, 28, 28, 1), jnp.float32, -1, 1)
  w = jnp.full(5, 0.2)
  f = functools.partial(jax.jit(score).lower(d, samples, w).compile(), d)
  reps = h.interleave({"fid": lambda r: f(samples, w)}, 3, warmup=1)["fid"]
  return round(h.summary(reps)["wall_s_median"], 3)


def _single_cell(args, pair, images, strategies) -> dict | None:
  """The 1x1 program reused by every grid's ``loop`` strategy (``None`` without ``loop``)."""
  if "loop" not in strategies:
    return None
  compiled1, state1, c1, t1 = _compile(_coevolution(1, 1, args.steps, "map", pair), images)
  return {"program": (compiled1, state1), "compile_s": c1, "temp_mib": t1}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--steps", type=int, default=20, help="training steps per generation")
  ap.add_argument("--grids", default="1x1,2x2,3x3")
  ap.add_argument("--generations", type=int, default=2, help="timed generations per case")
  ap.add_argument("--strategies", default="vmap,map,loop")
  ap.add_argument(
    "--floor",
    action="store_true",
    help="time the 2x2 full-epoch Lipizzaner generation against the CPU floor",
  )
  ap.add_argument("--floor-steps", type=int, default=600, help="--floor: batches per cell")
  ap.add_argument(
    "--no-reference",
    dest="reference",
    action="store_false",
    help="--floor: skip the plain-JAX floor program timed alongside (same load)",
  )
  ap.add_argument("--with-d1", action="store_true", help="--floor: also map with d_every=1")
  ap.add_argument(
    "--fitness-samples",
    type=int,
    default=1000,
    help="--floor: samples of the 5x5 fitness pass, library and floor alike (a smaller run)",
  )
  ap.add_argument(
    "--matmul-repeats",
    type=int,
    default=5,
    help="--floor: timed calls per shape of XLA's matmul throughput (the median is kept)",
  )
  ap.add_argument(
    "--profile",
    action="store_true",
    help="--floor: also profile one generation of each full program (kernel time by kind)",
  )
  ap.add_argument(
    "--schedule",
    default="lipizzaner",
    choices=("lipizzaner", "simultaneous"),
    help="--floor: the library's schedule (the floor program is always Lipizzaner's)",
  )
  args = ap.parse_args()
  pair = models.make_pair("mlp", (28, 28, 1), 64, hidden=(256, 256))
  images = jax.random.uniform(jax.random.key(1), (6000, 28, 28, 1), jnp.float32, -1.0, 1.0)
  if args.floor:
    if args.strategies == "vmap,map,loop":
      args.strategies = "map,vmap"
    return floor(args, pair, images)
  strategies = args.strategies.split(",")
  host = h.host()
  result = {
    "benchmark": "coevolution_throughput",
    "model": "Lipizzaner MNIST MLP (G 64-256-256-784, D 784-256-256-1), batch 100, Adam",
    "steps_per_generation": args.steps,
    "fitness_samples": 1000,
    "machine": host | {"load_average_at_start": host["load_average"]},
    "note": h.note_load(host["load_average"][0]),
    "grids": {},
  }
  single = _single_cell(args, pair, images, strategies)
  if single is not None:
    result["single_cell_compile_seconds"] = round(single["compile_s"], 2)
    result["single_cell_temp_mib"] = single["temp_mib"]
  for grid in args.grids.split(","):
    result["grids"][grid] = _grid_entry(grid, strategies, args, pair, images, single)
  result["fid_score_seconds"] = _fid_score_seconds()
  result["max_rss_mib"] = round(_rss_mib(), 1)
  result["load_average_at_end"] = list(os.getloadavg())
  h.emit(result)


if __name__ == "__main__":
  main()
