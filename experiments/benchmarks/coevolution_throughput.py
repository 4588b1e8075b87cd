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

``--floor`` times a 2x2 Lipizzaner generation (600 batches per cell, ``schedule="lipizzaner"``,
``d_every=2``: per batch the generator steps, then on every second batch the discriminator
steps against the updated generator with fresh fakes; the 5x5 fitness matrices on 1000
samples and the replacement's re-scoring of the trained pair) against a plain-JAX floor
program doing the same work (hand-written MLP, softplus BCE and Adam, 4 cells one after
another), repeats interleaved. Both programs' matmul FLOPs per generation come from XLA's
compiled HLO (every ``dot``, scaled by the known trip counts of the loops around it; XLA's
own ``cost_analysis()`` counts a loop body once, so its totals are printed too), so the JSON
shows that the work is equal. It also measures XLA's throughput on each matmul shape of the
training step in isolation (``lax.scan`` of 200 dots) in the same run, and reports the
training phase's GFLOP/s as a fraction of that per-shape mix.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import resource
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab import coevolution as co
from minmaxlab import runner
from minmaxlab.gan import data, metrics, models


class FidData(NamedTuple):
  clf: Any
  real_mean: jax.Array
  real_cov: jax.Array


def _rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _coevolution(rows, cols, steps, strategy, pair, d_every=1, schedule="simultaneous"):
  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=cols,
    batch_size=100,
    steps_per_generation=steps,
    d_every=d_every,
    schedule=schedule,
    fitness_samples=1000,
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


def _time_generations(run, generations):
  out = []
  for g in range(generations + 1):  # the first call warms caches; not counted
    t0 = time.perf_counter()
    run(g)
    out.append(time.perf_counter() - t0)
  return out[1:]


_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) .*\{$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*)$")
_CALLED = re.compile(r"\b(calls|to_apply|body|true_computation|false_computation)=%([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_DIMS = re.compile(r"\[([\d,]*)\]")


def _split_shape(rest):
  """``'f32[3,4]{1,0} dot(...)...'`` -> (shape text, remainder); tuples in parentheses."""
  if rest.startswith("("):
    depth = 0
    for n, ch in enumerate(rest):
      depth += ch == "("
      depth -= ch == ")"
      if depth == 0:
        return rest[: n + 1], rest[n + 2 :]
  shape, _, remainder = rest.partition(" ")
  return shape, remainder


def hlo_matmul_flops(compiled) -> dict:
  """Matmul FLOPs of one run of a compiled XLA program, from its optimized HLO: every
  ``dot`` counts ``2 * prod(output) * prod(contracted lhs dims)``, multiplied by the known
  trip count of every loop (``while``) around it and counted once per call site (fusions,
  calls); of a conditional's branches the largest. Returns ``{"flops", "dots",
  "unknown_trip_counts"}`` (loops without a known trip count are counted once)."""
  comps, current = {}, None
  for line in compiled.as_text().splitlines():
    m = _COMPUTATION.match(line)
    if m:
      current = comps.setdefault(m.group(1), {"shapes": {}, "lines": []})
      continue
    m = _INSTRUCTION.match(line) if current is not None else None
    if m:
      shape, rest = _split_shape(m.group(2))
      current["shapes"][m.group(1)] = shape
      current["lines"].append((shape, rest))
  unknown = [0]

  @functools.cache
  def cost(name):
    comp = comps[name]
    flops = dots = 0
    for shape, rest in comp["lines"]:
      op = rest.split("(", 1)[0]
      if op == "dot":
        operands = rest.split("(", 1)[1].split(")", 1)[0].split(",")
        lhs = comp["shapes"][operands[0].strip().lstrip("%")]
        lhs_dims = [int(x) for x in _DIMS.search(lhs).group(1).split(",") if x]
        out = [int(x) for x in _DIMS.search(shape).group(1).split(",") if x]
        contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", rest).group(1)
        k = int(np.prod([lhs_dims[int(d)] for d in contracting.split(",") if d]))
        flops += 2 * int(np.prod(out)) * k
        dots += 1
      called = [(kind, c) for kind, c in _CALLED.findall(rest) if c in comps]
      times = 1
      if op == "while":
        trip = _TRIP.search(rest)
        times = int(trip.group(1)) if trip else 1
        unknown[0] += trip is None
      for kind, c in called:
        f, d = cost(c)
        n = times if kind == "body" else 1
        flops, dots = flops + n * f, dots + n * d
      branches = _BRANCHES.search(rest)
      if branches:
        options = [cost(b.strip().lstrip("%")) for b in branches.group(1).split(",")]
        f, d = max(options)
        flops, dots = flops + f, dots + d
    return flops, dots

  entry = [line for line in compiled.as_text().splitlines() if line.startswith("ENTRY ")]
  entry = _COMPUTATION.match(entry[0]).group(1)
  flops, dots = cost(entry)
  return {"flops": flops, "dots": dots, "unknown_trip_counts": unknown[0]}


def _xla_cost_flops(compiled):
  ca = compiled.cost_analysis()
  ca = ca[0] if isinstance(ca, list | tuple) else ca
  return None if ca is None or "flops" not in ca else float(ca["flops"])


# The matmuls of one Lipizzaner batch of the MNIST MLP pair (batch 100; G 64-256-256-784,
# D 784-256-256-1), as (M, K, N) -> count per batch (a generator step, plus half a
# discriminator step with d_every=2); N=1 / K=1 matmuls (0.1% of the FLOPs) left out.
TRAIN_MATMULS = {
  (100, 64, 256): 1 + 0.5,  # G layer 1 forward
  (100, 256, 256): 4 + 0.5 * 5,  # G/D layer 2 forwards, input grads
  (100, 256, 784): 2 + 0.5,  # G output forward; D layer-1 input grad
  (100, 784, 256): 2 + 0.5 * 2,  # D layer 1 forwards; G output input grad
  (256, 100, 784): 1,  # G output weight grad
  (256, 100, 256): 1 + 0.5 * 2,  # layer-2 weight grads
  (64, 100, 256): 1,  # G layer-1 weight grad
  (784, 100, 256): 0.5 * 2,  # D layer-1 weight grads (real, fake)
}


def matmul_throughput(repeats=5, length=200):
  """XLA's GFLOP/s on each shape of ``TRAIN_MATMULS`` (a ``lax.scan`` of ``length`` dots, the
  median of ``repeats``), and the rate of the whole per-batch mix (total FLOPs over the sum
  of each shape's time)."""
  out, total_f, total_t = {}, 0.0, 0.0
  for (m, k, n), count in TRAIN_MATMULS.items():
    a = jax.random.normal(jax.random.key(0), (m, k))
    b = jax.random.normal(jax.random.key(1), (k, n)) / np.sqrt(k)

    def chain(a, b):
      def body(x, _):  # the next input depends on this dot: no hoisting, no batching
        return x + 1e-9 * jnp.sum(x @ b), None

      return jax.lax.scan(body, a, None, length=length)[0]

    f = jax.jit(chain).lower(a, b).compile()
    f(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
      t0 = time.perf_counter()
      f(a, b).block_until_ready()
      times.append(time.perf_counter() - t0)
    flops = 2.0 * m * k * n * length
    t = float(np.median(times))
    out[f"{m}x{k}@{k}x{n}"] = round(flops / t / 1e9, 1)
    total_f += count * 2.0 * m * k * n
    total_t += count * 2.0 * m * k * n / (flops / t)
  return out, round(total_f / total_t / 1e9, 1)


def _reference_program(images, steps, d_every=2):
  """The plain-JAX floor of the library's ``--floor`` generation, the same work: 4 cells one
  after another (``lax.map``), each a Lipizzaner MNIST cell written by hand (MLP lists of
  ``{"w", "b"}``, leaky ReLU 0.2, softplus BCE, Adam(2e-4, 0.5, 0.999) by ``tree_map``): the
  5x5 fitness pass (5 G on 1000 noise vectors, 5 D on the 6000-row block of real and fakes),
  ``steps`` batches with Lipizzaner's schedule (per batch a G step; on every ``d_every``-th
  batch then a D step on the same real batch and fresh fakes of the updated G; leftover
  batches G only), and the replacement's re-scoring as the library does it (the trained G's
  fakes against the 5 D, the trained D on the real samples and the 5 fakes)."""
  n = 100

  def init_mlp(key, sizes):
    ks = jax.random.split(key, len(sizes) - 1)
    return [
      {"w": jax.random.normal(k, (a, b)) * (1.0 / np.sqrt(a)), "b": jnp.zeros(b)}
      for k, a, b in zip(ks, sizes[:-1], sizes[1:])
    ]

  def mlp(p, x, out):
    for layer in p[:-1]:
      x = jax.nn.leaky_relu(x @ layer["w"] + layer["b"], 0.2)
    return out(x @ p[-1]["w"] + p[-1]["b"])

  g_apply = lambda p, z: mlp(p, z, jnp.tanh)
  d_apply = lambda p, x: mlp(p, x, lambda y: y[..., 0])
  flat = images.reshape(images.shape[0], -1)

  def adam(p, g, m, v, t):
    m = jax.tree.map(lambda m, g: 0.5 * m + 0.5 * g, m, g)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    c1, c2 = 1 - 0.5**t, 1 - 0.999**t
    p = jax.tree.map(lambda p, m, v: p - 2e-4 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
    return p, m, v

  def g_loss(gp, dp, z):
    return jnp.mean(jax.nn.softplus(-d_apply(dp, g_apply(gp, z))))

  def d_loss(dp, gp, real, z):
    fake = g_apply(gp, z)
    return jnp.mean(jax.nn.softplus(-d_apply(dp, real)) + jax.nn.softplus(d_apply(dp, fake)))

  def fitness(g5, d5, key):
    z = jax.random.normal(key, (1000, 64))
    real = flat[jax.random.randint(jax.random.fold_in(key, 1), (1000,), 0, flat.shape[0])]
    fakes = jax.vmap(g_apply, (0, None))(g5, z).reshape(5000, 784)
    logits = jax.vmap(d_apply, (0, None))(d5, jnp.concatenate([real, fakes]))  # [5 D, 6000]
    lr, lf = logits[:, :1000], logits[:, 1000:].reshape(5, 5, 1000)
    fit_g = jnp.mean(jax.nn.softplus(-lf), axis=(0, 2))
    fit_d = jnp.mean(jax.nn.softplus(-lr), 1) + jnp.mean(jax.nn.softplus(lf), (1, 2))
    return (fit_g, fit_d), (z, real, fakes, lr)

  def rescore(gp, dp, d5, z, real, fakes, lr5):
    fake_tr = g_apply(gp, z)
    lg = jnp.mean(jax.nn.softplus(-jax.vmap(d_apply, (0, None))(d5, fake_tr)), 1)
    lr = d_apply(dp, jnp.concatenate([real, fakes]))
    ld = jnp.mean(jax.nn.softplus(-lr[:1000])) + jnp.mean(jax.nn.softplus(lr[1000:]))
    return jnp.mean(lg) + 0.0 * jnp.sum(lr5), ld

  def cell(args):
    (gp, dp, gm, gv, dm, dv), g5, d5, key = args
    f1, (z_f, real_f, fakes, lr5) = fitness(g5, d5, jax.random.fold_in(key, 0))

    def g_step(carry, key):
      (gp, dp, gm, gv, dm, dv), t, td = carry
      k1, k2 = jax.random.split(key)
      real = flat[jax.random.randint(k1, (n,), 0, flat.shape[0])]
      gp, gm, gv = adam(gp, jax.grad(g_loss)(gp, dp, jax.random.normal(k2, (n, 64))), gm, gv, t)
      return ((gp, dp, gm, gv, dm, dv), t + 1.0, td), real

    def group(carry, keys):
      for key in keys[:-1]:
        carry, _ = g_step(carry, key)
      carry, real = g_step(carry, keys[-1])
      (gp, dp, gm, gv, dm, dv), t, td = carry
      zd = jax.random.normal(jax.random.fold_in(keys[-1], 2), (n, 64))
      dp, dm, dv = adam(dp, jax.grad(d_loss)(dp, gp, real, zd), dm, dv, td)
      return ((gp, dp, gm, gv, dm, dv), t, td + 1.0), None

    keys = jax.random.split(jax.random.fold_in(key, 1), steps)
    groups = steps // d_every
    carry = ((gp, dp, gm, gv, dm, dv), 1.0, 1.0)
    grouped = keys[: groups * d_every].reshape(groups, d_every)
    carry, _ = jax.lax.scan(group, carry, grouped)
    carry, _ = jax.lax.scan(g_step, carry, keys[groups * d_every :])
    state = carry[0]
    f2 = rescore(state[0], state[1], d5, z_f, real_f, fakes, lr5)
    return state, (f1, f2)

  def program(key, cells):
    g, d = cells[0], cells[1]
    # Each cell's neighbourhood: itself and 4 others (rolls; XLA cannot merge the copies).
    nb = lambda t: jax.tree.map(
      lambda x: jnp.stack([jnp.roll(x, i, 0) for i in (0, 1, 2, 3, 1)], 1), t
    )
    return jax.lax.map(cell, (cells, nb(g), nb(d), jax.random.split(key, 4)))

  def init_cells(key):
    def one(k):
      kg, kd = jax.random.split(k)
      gp, dp = init_mlp(kg, [64, 256, 256, 784]), init_mlp(kd, [784, 256, 256, 1])
      z = lambda t: jax.tree.map(jnp.zeros_like, t)
      return gp, dp, z(gp), z(gp), z(dp), z(dp)

    return jax.vmap(one)(jax.random.split(key, 4))

  cells = jax.jit(init_cells)(jax.random.key(0))
  t0 = time.perf_counter()
  compiled = jax.jit(program).lower(jax.random.key(0), cells).compile()
  return compiled, cells, time.perf_counter() - t0


def floor(args, pair, images):
  """2x2, ``--floor-steps`` batches per cell with Lipizzaner's schedule: seconds per
  generation of the library's programs and of the equal-work plain-JAX floor, repeats
  interleaved; matmul FLOPs of each compiled program; GFLOP/s; XLA's per-shape matmul
  throughput. A 2-step program of each strategy gives the per-generation overhead (fitness,
  selection, replacement, ES), so training = t(S) - t(2)."""
  programs = {}
  full = args.floor_steps
  for strategy in args.strategies.split(","):
    for steps, d_every in ((full, 2), (2, 2)) + (((full, 1),) if args.with_d1 else ()):
      if d_every == 1 and strategy != "map":
        continue
      coev = _coevolution(2, 2, steps, strategy, pair, d_every=d_every, schedule=args.schedule)
      compiled, state, compile_s, temp_mib = _compile(coev, images)
      programs[(strategy, steps, d_every)] = [compiled, state, compile_s, temp_mib, []]
      print(f"# compiled {strategy} steps={steps} d_every={d_every}: {compile_s:.1f} s", flush=True)
  if args.reference:
    for steps in (full, 2):
      ref, cells, compile_s = _reference_program(images, steps)
      programs[("floor", steps, 2)] = [ref, cells, compile_s, None, []]
      print(f"# compiled the plain-JAX floor, steps={steps}: {compile_s:.1f} s", flush=True)
  loads = [list(os.getloadavg())]
  cpu0 = time.process_time()
  for rep in range(args.generations + 1):  # rep 0 warms caches, not counted
    for prog in programs.values():
      t0 = time.perf_counter()
      if prog[3] is None:  # the floor program takes (key, cells)
        prog[1], _ = prog[0](jax.random.key(rep), prog[1])
      else:
        prog[1], _ = prog[0](jax.random.key(rep), prog[1], images)
      jax.block_until_ready(prog[1])
      if rep:
        prog[4].append(time.perf_counter() - t0)
    loads.append(list(os.getloadavg()))
    print(
      f"# rep {rep}: "
      + ", ".join(f"{k[0]}/{k[1]}/d{k[2]} {v[4][-1]:.2f}s" for k, v in programs.items() if v[4]),
      flush=True,
    )
  cpu_s = time.process_time() - cpu0
  per_shape, mix = matmul_throughput()
  print(f"# XLA matmul GFLOP/s per shape: {per_shape}; per-batch mix {mix}", flush=True)
  out = {
    "benchmark": "coevolution_throughput --floor",
    "grid": "2x2",
    "work": f"{full} batches per cell, schedule={args.schedule}, d_every=2, plain Adam, "
    "5x5 fitness on 1000 samples + the replacement's re-scoring, trivial mixture score (no FID)",
    "machine": {
      "cpu_model": runner.cpu_model(),
      "cpus": os.cpu_count(),
      "jax": jax.__version__,
      "python": platform.python_version(),
    },
    "load_average_per_rep": loads,
    "process_cpu_seconds_timed_loop": round(cpu_s, 1),
    "xla_matmul_gflops_per_shape": per_shape,
    "xla_matmul_gflops_train_mix": mix,
    "programs": {},
  }
  for (name, steps, d_every), (compiled, _, compile_s, temp_mib, secs) in programs.items():
    secs = np.asarray(secs)
    hlo = hlo_matmul_flops(compiled)
    e = {
      "steps": steps,
      "d_every": d_every,
      "seconds": [round(float(x), 3) for x in secs],
      "median_s": round(float(np.median(secs)), 3),
      "min_s": round(float(secs.min()), 3),
      "compile_s": round(compile_s, 1),
      "xla_temp_mib": temp_mib and round(temp_mib, 1),
      "matmul_gflop_per_generation": round(hlo["flops"] / 1e9, 2),
      "dots_executed": hlo["dots"],
      "loops_without_trip_count": hlo["unknown_trip_counts"],
      "xla_cost_analysis_flops_loop_bodies_once_g": _xla_cost_flops(compiled)
      and round(_xla_cost_flops(compiled) / 1e9, 2),
      "matmul_gflops_per_s_median": round(hlo["flops"] / 1e9 / float(np.median(secs)), 1),
    }
    out["programs"][f"{name}_s{steps}_d{d_every}"] = e
  P = out["programs"]
  floor_key = f"floor_s{full}_d2"
  for strategy in args.strategies.split(","):
    key, short = f"{strategy}_s{full}_d2", f"{strategy}_s2_d2"
    if key not in P:
      continue
    e, secs = P[key], np.asarray(P[key]["seconds"])
    over = np.asarray(P[short]["seconds"])
    train_s = np.median(secs - over)
    train_flops = P[key]["matmul_gflop_per_generation"] - P[short]["matmul_gflop_per_generation"]
    e["train_s_median"] = round(float(train_s), 3)
    e["train_ms_per_batch_per_cell"] = round(float(train_s) / (full - 2) / 4 * 1000, 2)
    e["train_matmul_gflops_per_s"] = round(train_flops / float(train_s), 1)
    e["train_fraction_of_xla_matmul_mix"] = round(train_flops / float(train_s) / mix, 3)
    if floor_key in P:
      fsecs = np.asarray(P[floor_key]["seconds"])
      ratios = secs / fsecs
      e["ratio_to_floor_same_rep"] = [round(float(x), 3) for x in ratios]
      e["ratio_to_floor_median"] = round(float(np.median(ratios)), 3)
      e["matmul_flops_over_floor"] = round(
        P[key]["matmul_gflop_per_generation"] / P[floor_key]["matmul_gflop_per_generation"], 4
      )
      fover = np.asarray(P["floor_s2_d2"]["seconds"])
      f_train = float(np.median(fsecs - fover))
      f_flops = (
        P[floor_key]["matmul_gflop_per_generation"]
        - P["floor_s2_d2"]["matmul_gflop_per_generation"]
      )
      P[floor_key]["train_matmul_gflops_per_s"] = round(f_flops / f_train, 1)
      P[floor_key]["train_fraction_of_xla_matmul_mix"] = round(f_flops / f_train / mix, 3)
  print(json.dumps(out))


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
  result = {
    "benchmark": "coevolution_throughput",
    "model": "Lipizzaner MNIST MLP (G 64-256-256-784, D 784-256-256-1), batch 100, Adam",
    "steps_per_generation": args.steps,
    "fitness_samples": 1000,
    "machine": {
      "cpus": os.cpu_count(),
      "backend": jax.default_backend(),
      "load_average_at_start": list(os.getloadavg()),
      "python": platform.python_version(),
      "jax": jax.__version__,
    },
    "note": (
      "other jobs were running (1-minute load average > 1.5 at start): numbers may vary 2x"
      if os.getloadavg()[0] > 1.5
      else "quiet machine at start (1-minute load average <= 1.5)"
    ),
    "grids": {},
  }

  # The single-cell program (1x1), reused by every grid's "loop" strategy.
  single = None
  if "loop" in strategies:
    coev1 = _coevolution(1, 1, args.steps, "map", pair)
    compiled1, state1, c1, t1 = _compile(coev1, images)
    single = (compiled1, state1)
    result["single_cell_compile_seconds"] = round(c1, 2)
    result["single_cell_temp_mib"] = t1

  for grid in args.grids.split(","):
    rows, cols = (int(x) for x in grid.split("x"))
    cells = rows * cols
    entry = {}
    for strategy in strategies:
      if strategy == "loop":
        compiled1, state1 = single
        states = [state1] * cells

        def run(g, states=states, compiled1=compiled1):
          for i in range(cells):
            states[i], m = compiled1(jax.random.fold_in(jax.random.key(g), i), states[i], images)
          jax.block_until_ready(states)

        compile_s = result["single_cell_compile_seconds"]  # one program for every grid
        temp_mib = result["single_cell_temp_mib"]
      elif grid == "1x1" and (strategy == "vmap" or single is not None):
        continue  # one cell: vmap, map and loop run the same single-cell program
      else:
        coev = _coevolution(rows, cols, args.steps, strategy, pair)
        compiled, state, compile_s, temp_mib = _compile(coev, images)
        holder = [state]

        def run(g, holder=holder, compiled=compiled):
          holder[0], m = compiled(jax.random.key(g), holder[0], images)
          jax.block_until_ready(holder[0])

      secs = _time_generations(run, args.generations)
      med = float(np.median(secs))
      entry[strategy] = {
        "seconds_per_generation": round(med, 3),
        "all_seconds": [round(s, 3) for s in secs],
        "cell_steps_per_second": round(cells * args.steps / med, 1),
        "compile_seconds": round(compile_s, 2),
        "xla_temp_mib": None if temp_mib is None else round(temp_mib, 1),
        "max_rss_mib_so_far": round(_rss_mib(), 1),
      }
      print(f"# {grid} {strategy}: {entry[strategy]}", flush=True)
    result["grids"][grid] = entry

  # The in-step mixture FID: 5 generators x 1000 samples through the evaluation CNN.
  net = metrics.cnn_classifier((28, 28, 1), 10)
  params = net.init(jax.random.key(2))
  score = metrics.fid_score(lambda d, x: net.apply(d.clf, x)[0])
  d = FidData(params, jnp.zeros(net.feature_dim), jnp.eye(net.feature_dim))
  samples = jax.random.uniform(jax.random.key(3), (5, 1000, 28, 28, 1), jnp.float32, -1, 1)
  w = jnp.full(5, 0.2)
  f = jax.jit(score).lower(d, samples, w).compile()
  f = functools.partial(f, d)
  f(samples, w).block_until_ready()
  t0 = time.perf_counter()
  for _ in range(3):
    f(samples, w).block_until_ready()
  result["fid_score_seconds"] = round((time.perf_counter() - t0) / 3, 3)
  result["max_rss_mib"] = round(_rss_mib(), 1)
  result["load_average_at_end"] = list(os.getloadavg())
  print(json.dumps(result))


if __name__ == "__main__":
  main()
