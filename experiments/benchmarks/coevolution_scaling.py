"""Scaling of one coevolution generation over devices and MPI ranks (one JSON line + a plot).

Work per cell: Lipizzaner's MNIST MLP pair (G 64-256-256-784 / D 784-256-256-1), batch
100, plain Adam, 1000 fitness samples, ``--steps`` training steps per generation (as in
``coevolution_throughput.py``; random images, a trivial mixture score, so no FID).

For 1, 2 and 4 devices (a ``(n, 1)`` mesh of fake CPU devices here, GPUs elsewhere) and
1, 2 and 4 MPI ranks (``mpirun -n P``, one block of grid rows per rank, halos by
``mpi4jax.sendrecv``), two scalings:

* strong: the grid is fixed (``--grid``, default 4x4) and split over more devices/ranks;
* weak: the cells per device/rank are fixed (``--cols`` cells: one grid row each).

Each case reports seconds per generation (median of ``--generations`` after a warm-up),
the exchange alone (the jitted halo exchange of the whole state: params, optimizer
states, learning rates, fitness; the same buffers the step sends), compute = generation
- exchange, the exchange's share, and the exchange per cell. Device meshes are measured
with both exchanges: ``shard_map`` (explicit ``lax.ppermute`` halos; cells stepped by
``lax.map`` or ``vmap`` inside each device) and ``roll`` (whole-grid rolls under
``jax.jit`` shardings, XLA derives the collective permutes; needs ``vmap``).

On a CPU machine the "devices" are threads of one process sharing the cores and the
ranks are processes sharing them too: there, more devices cannot be faster, and the
numbers measure the overhead of the distribution (exchange share, compile) rather than
speed-up. The script says how many cores it had.

  python experiments/benchmarks/coevolution_scaling.py [--steps 20] [--generations 2]
      [--devices 1,2,4] [--ranks 1,2,4] [--grid 4x4] [--plot scaling.png]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

if "--mpi-worker" not in sys.argv:
  os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")

import jax
import jax.numpy as jnp

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402
from minmaxlab import coevolution as co  # noqa: E402
from minmaxlab import distributed  # noqa: E402
from minmaxlab.gan import data, models  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _pair():
  return models.make_pair("mlp", (28, 28, 1), 64, hidden=(256, 256))


def _coevolution(rows, cols, steps, strategy, exchange=None):
  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=cols,
    batch_size=100,
    steps_per_generation=steps,
    fitness_samples=1000,
    mixture_samples=1,
    cell_strategy=strategy,
  )
  return co.Coevolution(
    cfg,
    _pair(),
    sample_real=lambda d, k, n: data.sample_batch(k, d, n),
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
    scheme=co.default_scheme(2e-4, lookahead=False),
    exchange=exchange,
  )


def _images():
  return jax.random.uniform(jax.random.key(1), (6000, 28, 28, 1), jnp.float32, -1.0, 1.0)


def _median_seconds(fn, repeats):
  """Median wall seconds of ``repeats`` calls after an untimed warm-up (the harness's)."""
  reps = h.interleave({"fn": lambda r: fn()}, repeats, warmup=1)["fn"]
  return h.summary(reps, 6)["wall_s_median"]


def _individuals(state):
  return (state.params, state.opt_state, state.learning_rates, state.fitness)


def _case(rows, cols, generation_s, exchange_s, compile_s, units):
  cells = rows * cols
  return {
    "grid": f"{rows}x{cols}",
    "units": units,
    "cells_per_unit": cells // units,
    "generation_s": round(generation_s, 4),
    "exchange_s": round(exchange_s, 5),
    "compute_s": round(generation_s - exchange_s, 4),
    "exchange_share": round(exchange_s / generation_s, 4),
    "exchange_ms_per_cell": round(1e3 * exchange_s / cells, 4),
    "compile_s": round(compile_s, 1),
  }


def device_case(n, rows, cols, steps, repeats, exchange, strategy, images):
  mesh = distributed.grid_mesh((n, 1), jax.devices()[:n])
  ex = distributed.MeshExchange(mesh, rows, cols) if exchange == "shard_map" else None
  coev = _coevolution(rows, cols, steps, strategy, ex)
  key = jax.random.key(0)
  state = distributed.shard_grid(jax.jit(coev.init)(key), mesh, rows, cols)
  data_r = jax.device_put(images, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))
  step = distributed.sharded_step(coev, mesh, state)
  first, _ = h.timed(lambda: step(key, state, data_r))
  compile_s = first.wall_s
  generation_s = _median_seconds(lambda: step(key, state, data_r), repeats)
  spec = distributed.grid_shardings(_individuals(state), mesh, rows, cols)
  if ex is not None:
    specs = jax.tree.map(lambda s: s.spec, spec)
    gather = jax.jit(
      jax.shard_map(
        lambda t: ex.gather(t, "von_neumann"), mesh=mesh, in_specs=(specs,), out_specs=specs
      )
    )
  else:
    gather = jax.jit(
      lambda t: co.gather_neighbours(t, "von_neumann"), in_shardings=(spec,), out_shardings=spec
    )
  exchange_s = _median_seconds(lambda: gather(_individuals(state)), max(repeats, 5))
  return _case(rows, cols, generation_s, exchange_s, compile_s, n)


def mpi_worker(rows, cols, steps, repeats):
  """One rank of ``mpirun -n P``; rank 0 prints ``RESULT <json>``."""
  from mpi4py import MPI

  ex = distributed.MPIExchange(rows, cols)
  coev = _coevolution(rows, cols, steps, "auto", ex)
  images = _images()
  key = jax.random.key(0)
  state = jax.jit(coev.init)(key)
  step = jax.jit(coev.step)
  first, _ = h.timed(lambda: step(key, state, images))
  compile_s = first.wall_s
  ex.comm.Barrier()
  generation_s = _median_seconds(lambda: step(key, state, images), repeats)
  gather = jax.jit(lambda t: ex.gather(t, "von_neumann"))
  exchange_s = _median_seconds(lambda: gather(_individuals(state)), max(repeats, 5))
  # The slowest rank sets the pace.
  generation_s, exchange_s, compile_s = (
    ex.comm.allreduce(v, op=MPI.MAX) for v in (generation_s, exchange_s, compile_s)
  )
  if ex.rank == 0:
    print(
      "RESULT " + json.dumps(_case(rows, cols, generation_s, exchange_s, compile_s, ex.size)),
      flush=True,
    )


def mpi_case(p, rows, cols, steps, repeats):
  mpirun = Path(sys.executable).parent / "mpirun"
  cmd = [
    str(mpirun),
    "-n",
    str(p),
    sys.executable,
    str(Path(__file__).resolve()),
    "--mpi-worker",
    f"--grid={rows}x{cols}",
    f"--steps={steps}",
    f"--generations={repeats}",
  ]
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_NUM_CPU_DEVICES="1")
  _, out, err = h.run_child(cmd, 1800, env)
  return h.result_line(out) or {"error": (out + err)[-800:]}


def _plot(result, path):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for ax, scaling in zip(axes, ("strong", "weak"), strict=True):
    for label, cases in result[scaling].items():
      ok = [c for c in cases if "generation_s" in c]
      if not ok:
        continue
      x = [c["units"] for c in ok]
      (line,) = ax.plot(x, [c["generation_s"] for c in ok], "o-", label=f"{label}: generation")
      ax.plot(
        x, [c["exchange_s"] for c in ok], "x--", color=line.get_color(), label=f"{label}: exchange"
      )
    ax.set_xlabel("devices / ranks")
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.set_title(f"{scaling} scaling ({result['cpus']} CPU cores)")
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--generations", type=int, default=2, help="timed generations per case")
  ap.add_argument("--devices", default="1,2,4")
  ap.add_argument("--ranks", default="1,2,4")
  ap.add_argument("--grid", default="4x4")
  ap.add_argument(
    "--cols", type=int, default=4, help="weak scaling: one row of this many cells per device/rank"
  )
  ap.add_argument(
    "--variants",
    default="shard_map/map,shard_map/vmap,roll/vmap",
    help="device-mesh exchange/cell-strategy pairs (strong scaling)",
  )
  ap.add_argument("--plot", default="experiments/benchmarks/coevolution_scaling.png")
  ap.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args()
  rows, cols = (int(v) for v in args.grid.split("x"))
  if args.mpi_worker:
    mpi_worker(rows, cols, args.steps, args.generations)
    return
  devices = [int(v) for v in args.devices.split(",") if v]
  ranks = [int(v) for v in args.ranks.split(",") if v]
  images = _images()
  result = {
    "benchmark": "coevolution_scaling",
    "model": "Lipizzaner MNIST MLP pair, batch 100, Adam, 1000 fitness samples",
    "steps_per_generation": args.steps,
    "cpus": os.cpu_count(),
    "host": h.host(),
    "backend": jax.default_backend(),
    "jax": jax.__version__,
    "python": platform.python_version(),
    "load_average_at_start": list(os.getloadavg()),
    "strong": {},
    "weak": {},
  }
  for variant in args.variants.split(","):
    exchange, strategy = variant.split("/")
    result["strong"][f"devices {variant}"] = [
      device_case(n, rows, cols, args.steps, args.generations, exchange, strategy, images)
      for n in devices
    ]
  result["weak"]["devices shard_map/map"] = [
    device_case(n, n, args.cols, args.steps, args.generations, "shard_map", "map", images)
    for n in devices
  ]
  try:
    import mpi4jax  # noqa: F401

    have_mpi = (Path(sys.executable).parent / "mpirun").exists()
  except ImportError:
    have_mpi = False
  if have_mpi:
    result["strong"]["mpi ranks"] = [
      mpi_case(p, rows, cols, args.steps, args.generations) for p in ranks
    ]
    result["weak"]["mpi ranks"] = [
      mpi_case(p, p, args.cols, args.steps, args.generations) for p in ranks
    ]
  else:
    result["mpi"] = "not run: mpi4jax or the venv's mpirun is missing"
  result["load_average_at_end"] = list(os.getloadavg())
  if args.plot:
    _plot(result, args.plot)
    result["plot"] = args.plot
  h.emit(result)


if __name__ == "__main__":
  main()
