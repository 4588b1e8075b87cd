"""Throughput of one coevolution generation: grid sizes x cell strategies (one JSON line).

Work per cell and generation (Lipizzaner's MNIST setup): the MLP pair G 64-256-256-784
(tanh) / D 784-256-256-1, batch 100, plain Adam (``co.default_scheme(lookahead=False)``),
the 5x5 fitness matrices on 1000 samples (before training, and again for the
replacement), ``--steps`` training steps (each step: one G update against a drawn D and
one D update against a drawn G), tournament, mutation, replacement and the mixture
(1+1)-ES. The mixture score in the timed generation is a trivial one on 1 sample per
generator, so generation times exclude FID; the in-step classifier-FID of a 5-generator
mixture (``co.fid_score`` through the evaluation CNN, random weights: same cost) is timed
on its own (``fid_score_seconds``, two per cell per generation). Real images are random
arrays in [-1, 1] (the content does not change the cost).

Strategies for a ``rows x cols`` grid:
- ``vmap``: ``jax.jit(Coevolution(cell_strategy="vmap").step)``: cells batched;
- ``map``: the same jit with cells stepped one after another by ``lax.map``;
- ``loop``: a Python loop over the ``rows*cols`` cells, each calling the jitted step of a
  1x1 ``Coevolution``. A 1x1 cell computes exactly the per-cell work above (its
  neighbourhood slots are copies of itself, masked but still evaluated: the fitness
  matrices keep their 5x5 shape), without the neighbour exchange.

Reference (``/work/shared/research/lipizzaner.md`` section 6, quiet machine,
OMP_NUM_THREADS=1, MNIST MLP, batch 100): seconds per iteration =
pre (pull + fitness + selection) + ms/batch x batches + post (refit + replacement) +
mixture FID(s). The script reports the reference's cost at the same number of batches,
with and without its FIDs, and the ratio to our measured seconds per generation.
Lipizzaner trains the D only every second batch, so our step does about 1.35x its work
per batch (581.5 vs 430.6 MFLOP, ``perf_limit.md`` section 2): the ratio is conservative.

  python experiments/benchmarks/coevolution_throughput.py [--steps 20] [--grids 1x1,2x2,3x3]
      [--generations 2] [--strategies vmap,map,loop]
  python experiments/benchmarks/coevolution_throughput.py --floor [--generations 3] [--with-d1]

``--floor`` times exactly the work of ``perf_limit.md`` §6: a 2x2 generation with 600 batches
per cell, the generator every batch and the discriminator every second batch (``d_every=2``),
for ``map`` and ``vmap``, repeats interleaved, and prints the ratio to that floor (12.1-13.1 s)
and to Lipizzaner's 57-63 s per full-epoch 2x2 iteration.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab import coevolution as co
from minmaxlab.gan import data, metrics, models

# Lipizzaner, quiet machine, OMP=1 (lipizzaner.md §6 table, midpoints of the ranges):
# (pre s, train ms/batch/cell, post s, mixture FIDs s per iteration per cell).
REFERENCE = {
  "1x1": {"pre": 0.4, "ms_per_batch": 43.5, "post": 0.055, "fid": 0.75},
  "2x2": {"pre": 1.75, "ms_per_batch": 98.0, "post": 0.7, "fid": 2.75},
  "3x3": {"pre": 7.95, "ms_per_batch": 212.0, "post": 2.55, "fid": 7.2},
}


class FidData(NamedTuple):
  clf: Any
  real_mean: jax.Array
  real_cov: jax.Array


def _rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _coevolution(rows, cols, steps, strategy, pair, d_every=1):
  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=cols,
    batch_size=100,
    steps_per_generation=steps,
    d_every=d_every,
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


# perf_limit.md §6: a 2x2 Lipizzaner generation (600 batches per cell, G every batch, D every
# second batch, 5x5 fitness matrices on 1000 samples) written as plain JAX on this CPU:
# 12.1 / 12.3 s (min / median) with one fitness pass, about 13.1 s with the second (re-scoring)
# pass Lipizzaner makes. Lipizzaner itself (lipizzaner.md §6, quiet, OMP=1): 57-63 s per
# full-epoch 2x2 iteration, FIDs included; its training alone is 86-93 ms/batch/cell.
FLOOR_2X2 = {"one_fitness_pass_s": [12.1, 12.3], "two_fitness_passes_s": 13.1}
LIPIZZANER_2X2_EPOCH = {"cycle_s": [57.0, 63.0], "train_ms_per_batch_per_cell": [86.0, 93.0]}


def _reference_program(images, steps):
  """perf_limit.md's floor, rebuilt here to be timed under the same load as ours: 4 cells one
  after another (``lax.map``), each a plain-JAX Lipizzaner MNIST cell (MLP lists of
  ``{"w", "b"}``, leaky ReLU 0.2, softplus BCE, hand-written Adam(2e-4, 0.5, 0.999)): a full
  5x5 fitness pass (5 G on 1000 noise vectors, 5 D on the 6000-row block of real and fakes),
  ``steps`` batches (G every batch, D every second batch), and a second full fitness pass."""
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
    real = flat[:1000]
    fakes = jax.vmap(g_apply, (0, None))(g5, z).reshape(5000, 784)
    block = jnp.concatenate([real, fakes])
    logits = jax.vmap(d_apply, (0, None))(d5, block)  # [5 D, 6000]
    lr, lf = logits[:, :1000], logits[:, 1000:].reshape(5, 5, 1000)
    fit_g = jnp.mean(jax.nn.softplus(-lf), axis=(0, 2))
    fit_d = jnp.mean(jax.nn.softplus(-lr), 1) + jnp.mean(jax.nn.softplus(lf), (1, 2))
    return fit_g, fit_d

  def cell(args):
    (gp, dp, gm, gv, dm, dv), g5, d5, key = args
    f1 = fitness(g5, d5, jax.random.fold_in(key, 0))

    def batch(key):
      k1, k2 = jax.random.split(key)
      return flat[jax.random.randint(k1, (n,), 0, flat.shape[0])], jax.random.normal(k2, (n, 64))

    def pair(carry, key):
      (gp, dp, gm, gv, dm, dv), t = carry
      ka, kb = jax.random.split(key)
      _, za = batch(ka)
      gp, gm, gv = adam(gp, jax.grad(g_loss)(gp, dp, za), gm, gv, 2 * t - 1)
      real, zb = batch(kb)
      gp, gm, gv = adam(gp, jax.grad(g_loss)(gp, dp, zb), gm, gv, 2 * t)
      dp, dm, dv = adam(dp, jax.grad(d_loss)(dp, gp, real, zb), dm, dv, t)
      return ((gp, dp, gm, gv, dm, dv), t + 1.0), None

    keys = jax.random.split(jax.random.fold_in(key, 1), steps // 2)
    (state, _), _ = jax.lax.scan(pair, ((gp, dp, gm, gv, dm, dv), 1.0), keys)
    f2 = fitness(g5, d5, jax.random.fold_in(key, 2))
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
  """2x2, 600 batches per cell, d_every=2 (Lipizzaner's schedule): seconds per generation of
  the map and vmap steps against the CPU floor and Lipizzaner, repeats interleaved. A 2-step
  program of each strategy gives the per-generation overhead (fitness, selection,
  replacement, ES), so training = (t600 - t2) / 598 per batch."""
  programs = {}
  for strategy in args.strategies.split(","):
    full = args.floor_steps
    for steps, d_every in ((full, 2), (2, 2)) + (((full, 1),) if args.with_d1 else ()):
      if d_every == 1 and strategy != "map":
        continue
      coev = _coevolution(2, 2, steps, strategy, pair, d_every=d_every)
      compiled, state, compile_s, temp_mib = _compile(coev, images)
      programs[(strategy, steps, d_every)] = [compiled, state, compile_s, temp_mib, []]
      print(f"# compiled {strategy} steps={steps} d_every={d_every}: {compile_s:.1f} s", flush=True)
  if args.reference:
    ref, cells, compile_s = _reference_program(images, args.floor_steps)
    programs[("reference", args.floor_steps, 2)] = [ref, cells, compile_s, None, []]
    print(f"# compiled the plain-JAX floor program: {compile_s:.1f} s", flush=True)
  loads = [list(os.getloadavg())]
  for rep in range(args.generations + 1):  # rep 0 warms caches, not counted
    for prog in programs.values():
      t0 = time.perf_counter()
      if prog[3] is None:  # the reference program takes (key, cells)
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
  out = {
    "benchmark": "coevolution_throughput --floor",
    "grid": "2x2",
    "work": "600 batches per cell, G every batch, D every 2nd (d_every=2), plain Adam, "
    "5x5 fitness on 1000 samples + re-scoring, trivial mixture score (no FID)",
    "load_average_per_rep": loads,
    "floor_jax_s": FLOOR_2X2,
    "lipizzaner_2x2_epoch": LIPIZZANER_2X2_EPOCH,
    "strategies": {},
  }
  for (strategy, steps, d_every), (_, _, compile_s, temp_mib, secs) in programs.items():
    if steps != args.floor_steps:
      continue
    secs = np.asarray(secs)
    over = np.asarray(programs.get((strategy, 2, 2), [None] * 5)[4])
    e = {
      "d_every": d_every,
      "seconds": [round(float(x), 3) for x in secs],
      "min_s": round(float(secs.min()), 3),
      "median_s": round(float(np.median(secs)), 3),
      "compile_s": round(compile_s, 1),
      "xla_temp_mib": temp_mib and round(temp_mib, 1),
    }
    if strategy == "reference":
      out["reference_plain_jax"] = e
      continue
    if ("reference", args.floor_steps, 2) in programs and secs.size:
      ref_secs = np.asarray(programs[("reference", args.floor_steps, 2)][4])
      e["ratio_to_reference_same_rep"] = [round(float(x), 3) for x in secs / ref_secs]
      e["ratio_to_reference_min"] = round(float(secs.min() / ref_secs.min()), 3)
    if d_every == 2:
      e["overhead_2_steps_s"] = [round(float(x), 3) for x in over]
      e["train_ms_per_batch_per_cell_median"] = round(
        float(np.median(secs - over)) / (args.floor_steps - 2) / 4 * 1000, 2
      )
      e["ratio_to_floor_13.1s"] = [
        round(float(secs.min()) / 13.1, 3),
        round(float(np.median(secs)) / 13.1, 3),
      ]
      e["ratio_to_floor_12.1s"] = round(float(secs.min()) / 12.1, 3)
      e["lipizzaner_over_ours_median"] = [
        round(57.0 / float(np.median(secs)), 2),
        round(63.0 / float(np.median(secs)), 2),
      ]
    out["strategies"][f"{strategy}_d{d_every}"] = e
  out["machine"] = {"cpus": os.cpu_count(), "jax": jax.__version__}
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
    ref = REFERENCE.get(grid)
    if ref is not None and entry:
      no_fid = ref["pre"] + ref["post"] + ref["ms_per_batch"] * args.steps / 1000
      best = min(v["seconds_per_generation"] for v in entry.values())
      entry["reference_lipizzaner"] = {
        "seconds_per_generation_at_these_steps": round(no_fid + ref["fid"], 2),
        "without_fid": round(no_fid, 2),
        "ratio_reference_over_ours_without_fid": round(no_fid / best, 2),
        "derived_from": "lipizzaner.md §6 (quiet, OMP=1): pre + ms/batch*steps + post [+ FIDs]",
      }
    result["grids"][grid] = entry

  # The in-step mixture FID: 5 generators x 1000 samples through the evaluation CNN.
  net = metrics.cnn_classifier((28, 28, 1), 10)
  params = net.init(jax.random.key(2))
  score = co.fid_score(lambda d, x: net.apply(d.clf, x)[0])
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
