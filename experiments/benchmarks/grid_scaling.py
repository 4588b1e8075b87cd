"""How one coevolution generation's cost grows with the grid: per-cell seconds, compile,
memory and the ranks' exchange, from 1x1 to the paper's 12x12 (one JSON line per case).

Work per cell and generation: Lipizzaner's MNIST MLP pair (G 64-256-256-784 / D
784-256-256-1), batch 100, plain Adam 2e-4, Lipizzaner's schedule (``schedule="lipizzaner"``,
``d_every=2``), the 5x5 fitness matrices on 1000 samples, tournament, mutation, replacement
and a trivial mixture score (no FID), ``--batches`` batches per cell and generation (default
20; a full MNIST epoch is 600), cells stepped one after another (``cell_strategy="map"``).
Real images are 6000 random arrays in [-1, 1] (the cost depends on shapes only).

Cases (``--cases``; default every one below), each in a fresh process, so that each compile
is cold (the persistent compilation cache is off):

* ``single:RxC``: one process, one device, grids 1x1, 2x2, 4x4, 6x6, 8x8, 12x12
  (``donated:RxC``: the same with the step's input state donated, ``make_backend(...,
  donate=True)``, not in the default cases);
* ``mpi2:RxC`` / ``mpi4:RxC``: ``mpirun -n 2`` (2x1 blocks of rows) and ``-n 4`` (2x2
  blocks), halos by ``mpi4jax.sendrecv`` (the venv's MPICH ``mpirun``), 4x4 to 12x12;
* ``mesh4:RxC``: 4 fake CPU devices of one process, a 2x2 mesh, halos by ``lax.ppermute``
  inside ``shard_map``, 4x4 to 12x12.

Per case, every timed generation listed (``--repeats`` after ``--warmup`` untimed ones, the
generation and the exchange alone interleaved by ``_harness.interleave``): wall and CPU seconds,
seconds per cell-batch (a generation's wall seconds over cells x batches: the per-generation work of
fitness, selection and replacement is spread over the batches), compile seconds (trace, lower
and XLA of the step), peak RSS, XLA temp bytes, state bytes, and for ranks and devices the
exchange: the halo messages the step sends, recorded while it is traced (bytes and count per
rank and generation), timed alone as a jitted program sending the same messages, and its
share of the generation. Ranks and devices share this host's cores: the numbers measure the
cost of distribution, not a speed-up. Every line carries the load average before and after.

  python experiments/benchmarks/grid_scaling.py [--out FILE.jsonl] [--cases single:1x1,...]
      [--batches 20] [--repeats 3] [--warmup 1] [--plot FILE.png]

Cases already in ``--out`` are skipped (a run resumes). ``--plot`` alone redraws the plot.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402

SINGLE = ("1x1", "2x2", "4x4", "6x6", "8x8", "12x12")
DISTRIBUTED = ("4x4", "6x6", "8x8", "12x12")
PLACEMENTS = {
  "single": (1, None),
  "donated": (1, None),  # single, the step donating its input state (make_backend donate=True)
  "mpi2": (2, (2, 1)),
  "mpi4": (4, (2, 2)),
  "mesh4": (4, (2, 2)),
}
DEFAULT_CASES = tuple(f"single:{g}" for g in SINGLE) + tuple(
  f"{p}:{g}" for p in ("mpi4", "mpi2", "mesh4") for g in DISTRIBUTED
)
WORK = (
  "Lipizzaner MNIST MLP pair (G 64-256-256-784, D 784-256-256-1), batch 100, Adam 2e-4,"
  " schedule=lipizzaner, d_every=2, 5x5 fitness on 1000 samples, trivial mixture score (no FID),"
  " cells by lax.map"
)


@dataclasses.dataclass(frozen=True)
class Case:
  """A placement (``single``, ``mpi2``, ``mpi4``, ``mesh4``) and a ``rows x cols`` grid."""

  placement: str
  rows: int
  cols: int

  @classmethod
  def parse(cls, text: str) -> Case:
    try:
      placement, grid = text.split(":")
      rows, cols = (int(v) for v in grid.split("x"))
    except ValueError:
      raise SystemExit(f"bad case {text!r}: expected PLACEMENT:RxC, e.g. mpi4:8x8") from None
    if placement not in PLACEMENTS:
      raise SystemExit(f"bad case {text!r}: placement must be one of {sorted(PLACEMENTS)}")
    return cls(placement, rows, cols)

  @property
  def name(self) -> str:
    return f"{self.placement}:{self.rows}x{self.cols}"

  @property
  def units(self) -> int:
    return PLACEMENTS[self.placement][0]

  @property
  def blocks(self):
    return PLACEMENTS[self.placement][1]


def coevolution(rows: int, cols: int, batches: int, exchange=None):
  """The benchmark's ``Coevolution`` (see the module docstring)."""
  import jax.numpy as jnp

  from minmaxlab import coevolution as co
  from minmaxlab.gan import data, models

  cfg = co.CoevolutionConfig(
    rows=rows,
    cols=cols,
    batch_size=100,
    steps_per_generation=batches,
    d_every=2,
    schedule="lipizzaner",
    fitness_samples=1000,
    mixture_samples=1,
    cell_strategy="map",
  )
  return co.Coevolution(
    cfg,
    models.make_pair("mlp", (28, 28, 1), 64, hidden=(256, 256)),
    sample_real=lambda d, k, n: data.sample_batch(k, d, n),
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
    scheme=co.default_scheme(2e-4, lookahead=False),
    exchange=exchange,
  )


def record_messages(exchange) -> list:
  """Wrap ``exchange._from_neighbour`` so that every halo message traced from now on is
  listed as ``(size, dtype, axis, direction)``; returns that list."""
  messages: list = []
  send = exchange._from_neighbour

  def recorded(edge, axis, direction):
    messages.append((int(edge.size), edge.dtype, int(axis), int(direction)))
    return send(edge, axis, direction)

  exchange._from_neighbour = recorded
  return messages


def exchange_program(exchange, messages, mesh=None):
  """A jitted program sending exactly ``messages`` (zeros of their sizes), and its input
  (compiled by its first, untimed call)."""
  import jax
  import jax.numpy as jnp
  from jax.sharding import PartitionSpec as P

  bufs = [jnp.zeros(size, dtype) for size, dtype, _, _ in messages]

  def send_all(bufs):
    return [exchange._from_neighbour(b, a, d) for b, (_, _, a, d) in zip(bufs, messages)]

  if mesh is None:
    return jax.jit(send_all), bufs
  shard = jax.shard_map(send_all, mesh=mesh, in_specs=(P(),), out_specs=P(), check_vma=False)
  return jax.jit(shard), bufs


def _images():
  import jax
  import jax.numpy as jnp

  return jax.random.uniform(jax.random.key(1), (6000, 28, 28, 1), jnp.float32, -1.0, 1.0)


@dataclasses.dataclass
class Program:
  """A compiled generation step with its state and data, and the halo messages it sends."""

  compiled: object
  state: object
  data: object
  timing: dict
  messages: list = dataclasses.field(default_factory=list)
  exchange: object = None  # (jitted program, its input) sending the same messages
  call: object = None  # what runs a generation (default: ``compiled``)

  def generation(self, r: int):
    import jax

    run = self.compiled if self.call is None else self.call
    self.state, metrics = run(jax.random.key(r), self.state, self.data)
    return self.state, metrics


def _traced_messages(exchange, messages: list, trace) -> list:
  """The messages one fresh trace of the step sends (``trace()`` traces it)."""
  messages.clear()
  trace()
  return list(messages)


def single_program(case: Case, batches: int) -> Program:
  import jax

  from minmaxlab.distributed import make_backend

  coev = coevolution(case.rows, case.cols, batches)
  key = jax.random.key(0)
  state = jax.jit(coev.init)(key)
  images = _images()
  # the library's own jit of the step; "donated": make_backend(..., donate=True)
  _, step = make_backend(coev.config, donate=case.placement == "donated").jit(coev)
  compiled, timing = h.compile_timed(step, key, state, images)
  return Program(compiled, state, images, timing)


def mpi_program(case: Case, batches: int) -> Program:
  import jax

  from minmaxlab.distributed import MPIExchange

  ex = MPIExchange(case.rows, case.cols, blocks=case.blocks)
  messages = record_messages(ex)
  coev = coevolution(case.rows, case.cols, batches, ex)
  key = jax.random.key(0)
  state = jax.jit(coev.init)(key)
  images = _images()
  sent = _traced_messages(
    ex, messages, lambda: jax.make_jaxpr(lambda *a: coev.step(*a))(key, state, images)
  )
  ex.comm.Barrier()
  step = jax.jit(coev.step)
  compiled, timing = h.compile_timed(step, key, state, images)
  # mpi4jax's ordered effects add a token the AOT executable wants passed; the jitted
  # function's call reuses that executable (no second compile) and passes it.
  return Program(compiled, state, images, timing, sent, exchange_program(ex, sent), step)


def mesh_program(case: Case, batches: int) -> Program:
  """4 fake CPU devices in a 2x2 mesh. The step is the one ``distributed.sharded_step``
  jits (taken from its closure after an abstract call); its trace happens in that call, so
  ``compile_s`` here is lowering and XLA only."""
  import jax
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P

  from minmaxlab import distributed

  mesh = distributed.grid_mesh(case.blocks, jax.devices()[: case.units])
  ex = distributed.MeshExchange(mesh, case.rows, case.cols)
  messages = record_messages(ex)
  coev = coevolution(case.rows, case.cols, batches, ex)
  key = jax.random.key(0)
  state = distributed.shard_grid(jax.jit(coev.init)(key), mesh, case.rows, case.cols)
  data = jax.device_put(_images(), NamedSharding(mesh, P()))
  shardings = distributed.grid_shardings(state, mesh, case.rows, case.cols)
  specs = jax.tree.map(lambda s: s.spec, shardings)

  def trace():
    body = jax.shard_map(
      lambda *a: coev.step(*a),
      mesh=mesh,
      in_specs=(P(), specs, P()),
      out_specs=P(),
      check_vma=False,
    )
    jax.make_jaxpr(body)(key, state, data)

  sent = _traced_messages(ex, messages, trace)
  step = distributed.sharded_step(coev, mesh, state)
  jax.eval_shape(step, key, state, data)
  closure = dict(zip(step.__code__.co_freevars, (c.cell_contents for c in step.__closure__)))
  (jitted,) = closure["compiled"].values()
  compiled, timing = h.compile_timed(jitted, key, state, data)
  return Program(compiled, state, data, timing, sent, exchange_program(ex, sent, mesh))


def local_measurement(prog: Program, repeats: int, warmup: int = 1) -> dict:
  """This process's numbers: the interleaved repeats of the generation (and the exchange
  alone), compile timing, peak RSS, XLA memory, state bytes, messages."""
  import jax

  cases = {"generation": prog.generation}
  if prog.exchange is not None:
    fn, bufs = prog.exchange
    cases["exchange"] = lambda r: fn(bufs)
  reps = h.interleave(cases, repeats, warmup=warmup)
  local_state = sum(
    sh.data.nbytes for x in jax.tree.leaves(prog.state) for sh in x.addressable_shards
  )
  return {
    "reps": {k: [tuple(r) for r in v] for k, v in reps.items()},
    "timing": prog.timing,
    "peak_rss_bytes": h.peak_rss_bytes(),
    "xla": h.xla_memory(prog.compiled),
    "state_bytes": int(local_state),
    "message_bytes": int(sum(s * d.itemsize for s, d, _, _ in prog.messages)),
    "messages": len(prog.messages),
  }


def _per_repeat(locals_: list[dict], which: str, field: int, reduce) -> list[float]:
  """One value per repeat over every process: ``reduce`` (max: the slowest rank sets the
  pace; sum: CPU seconds of all ranks) of ``Repeat`` field ``field``."""
  per_rank = [[r[field] for r in loc["reps"][which]] for loc in locals_]
  return [float(reduce(v)) for v in zip(*per_rank, strict=True)]


def combine(case: Case, batches: int, locals_: list[dict]) -> dict:
  """The case's JSON record from every process's :func:`local_measurement`."""
  cells = case.rows * case.cols
  wall = _per_repeat(locals_, "generation", 0, max)
  cpu = _per_repeat(locals_, "generation", 1, sum)
  loads = _per_repeat(locals_, "generation", 2, max)
  gen = h.summary([h.Repeat(w, c, lo) for w, c, lo in zip(wall, cpu, loads, strict=True)])
  per_cell = [w / (cells * batches) for w in wall]
  out = {
    "generation": gen,
    "s_per_cell_batch": [round(v, 7) for v in per_cell],
    "s_per_cell_batch_median": round(gen["wall_s_median"] / (cells * batches), 7),
    "cpu_s_per_cell_batch_median": round(gen["cpu_s_median"] / (cells * batches), 7),
    "compile_s": max(loc["timing"]["compile_s"] for loc in locals_),
    "compile_cpu_s": max(loc["timing"]["compile_cpu_s"] for loc in locals_),
    "lower_s": max(loc["timing"]["lower_s"] for loc in locals_),
    "peak_rss_bytes": max(loc["peak_rss_bytes"] for loc in locals_),
    "peak_rss_bytes_all_processes": sum(loc["peak_rss_bytes"] for loc in locals_),
    "xla_temp_bytes": max(loc["xla"].get("xla_temp_bytes", 0) for loc in locals_),
    "xla_memory_per_process": [loc["xla"] for loc in locals_],
    "state_bytes": sum(loc["state_bytes"] for loc in locals_),
    "state_bytes_per_process": [loc["state_bytes"] for loc in locals_],
  }
  if "exchange" in locals_[0]["reps"]:
    ex_wall = _per_repeat(locals_, "exchange", 0, max)
    ex = h.summary([h.Repeat(w, c, 0.0) for w, c in zip(ex_wall, ex_wall, strict=True)], 6)
    share = [e / g for e, g in zip(ex_wall, wall, strict=True)]
    out["exchange"] = {
      "messages_per_unit": locals_[0]["messages"],
      "bytes_per_unit": max(loc["message_bytes"] for loc in locals_),
      "wall_s": ex["wall_s"],
      "wall_s_median": ex["wall_s_median"],
      "share": [round(v, 5) for v in share],
      "share_median": round(ex["wall_s_median"] / gen["wall_s_median"], 5),
    }
  return out


def worker(case: Case, batches: int, repeats: int, warmup: int = 1) -> None:
  """Run one case in this process (or this MPI rank); the first process prints ``RESULT``."""
  import jax

  jax.config.update("jax_enable_compilation_cache", False)
  if case.placement.startswith("mpi"):
    from mpi4py import MPI

    prog = mpi_program(case, batches)
    locals_ = MPI.COMM_WORLD.gather(local_measurement(prog, repeats, warmup), root=0)
    if MPI.COMM_WORLD.Get_rank() != 0:
      return
  else:
    build = mesh_program if case.placement == "mesh4" else single_program
    locals_ = [local_measurement(build(case, batches), repeats, warmup)]
  print("RESULT " + __import__("json").dumps(combine(case, batches, locals_)), flush=True)


def command(case: Case, batches: int, repeats: int, warmup: int = 1) -> tuple[list[str], dict]:
  """The command (and environment) running ``case`` in fresh processes."""
  here = str(Path(__file__).resolve())
  cmd = [sys.executable, here, "--worker", case.name, f"--batches={batches}"]
  cmd += [f"--repeats={repeats}", f"--warmup={warmup}"]
  env = dict(os.environ, PYTHONPATH=str(h.ROOT), JAX_NUM_CPU_DEVICES="1")
  if case.placement == "mesh4":
    env["JAX_NUM_CPU_DEVICES"] = str(case.units)
  if case.placement.startswith("mpi"):
    cmd = [str(Path(sys.executable).parent / "mpirun"), "-n", str(case.units), *cmd]
  return cmd, env


def run_case(case: Case, batches: int, repeats: int, timeout: float, warmup: int = 1) -> dict:
  """One case in fresh processes: its JSON record (or an ``error`` record)."""
  cmd, env = command(case, batches, repeats, warmup)
  load_before = [round(v, 2) for v in os.getloadavg()]
  t0 = time.perf_counter()
  code, out, err = h.run_child(cmd, timeout, env)
  head = {
    "benchmark": "grid_scaling",
    "case": case.name,
    "placement": case.placement,
    "grid": f"{case.rows}x{case.cols}",
    "cells": case.rows * case.cols,
    "units": case.units,
    "cells_per_unit": case.rows * case.cols // case.units,
    "batches_per_generation": batches,
    "warmup_generations": warmup,
    "work": WORK,
    "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "load_average_before": load_before,
    "load_average_after": [round(v, 2) for v in os.getloadavg()],
    "case_wall_s": round(time.perf_counter() - t0, 1),
  }
  result = h.result_line(out)
  if code != 0 or result is None:
    return head | {"error": f"exit {code}: {(err or out)[-600:]}"}
  return head | result | {"host": h.host()}


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default="runs/grid_scaling/grid_scaling.jsonl")
  ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
  ap.add_argument("--batches", type=int, default=20, help="batches per cell and generation")
  ap.add_argument("--repeats", type=int, default=3, help="timed generations after the warm-up")
  ap.add_argument("--warmup", type=int, default=1, help="untimed generations first (0 or more)")
  ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per case")
  ap.add_argument("--plot", default="", help="write the plot of --out here (PNG)")
  ap.add_argument("--plot-only", action="store_true", help="only redraw the plot")
  ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.batches < 2 or args.repeats < 1 or args.warmup < 0:
    raise SystemExit(
      f"--batches must be >= 2, --repeats >= 1 and --warmup >= 0, got {args.batches},"
      f" {args.repeats}, {args.warmup}"
    )
  if args.worker:
    return worker(Case.parse(args.worker), args.batches, args.repeats, args.warmup)
  cases = [Case.parse(c) for c in args.cases.split(",") if c]
  if not args.plot_only:
    done = {r["case"] for r in h.read_lines(args.out) if "error" not in r}
    for case in cases:
      if case.name in done:
        print(f"# {case.name}: already in {args.out}", file=sys.stderr)
        continue
      h.emit(run_case(case, args.batches, args.repeats, args.timeout, args.warmup), args.out)
  if args.plot:
    from experiments.benchmarks._grid_plot import plot

    plot(h.read_lines(args.out), args.plot)


if __name__ == "__main__":
  main()
