"""Past the floor: the 2x2 full-epoch generation's speed options beside Lipizzaner, one run.

The work is ``coevolution_throughput.py --floor``'s library generation (2x2 grid, the
Lipizzaner MNIST MLP pair, batch 100, 600 batches per cell with Lipizzaner's schedule,
``d_every=2``, the 5x5 fitness on 1000 samples and the replacement's re-scoring, plain Adam,
cells by ``lax.map``, a trivial mixture score), in these arms:

* ``float32``: the defaults (``make_backend``'s ``"auto"`` after ``split_cpu_cores``: with
  two or more cores the 2x2 grid's cells over the cores, one CPU device per core, the
  devices sharing XLA's thread pool; on one core one device);
* ``one_device``: the defaults on one device (``backend "single"``: XLA splits each op over
  the threads; the default before cells went over cores);
* ``joined``: ``CoevolutionConfig.d_forward="joined"`` (exact maths: a discriminator update's
  real and fake batches in one forward pass);
* ``bfloat16``: ``CoevolutionConfig.matmuls="bfloat16"`` (numerics change: every dense
  matmul on bfloat16 operands with float32 accumulation);
* ``bfloat16_joined``: both;

each under every ``--threads`` setting: a worker process per setting, pinned before JAX
starts to that many of the host's cores (``os.sched_setaffinity``; XLA sizes its thread pool
by it), so ``1`` is one thread, as each Lipizzaner client runs (``OMP_NUM_THREADS=1``).
Every worker compiles every arm and runs one untimed generation of each; then the rounds:
in each round every (threads, arm) case runs one generation, the order rotated by the round.
With ``--lipizzaner`` (a checkout and ``--lipizzaner_python``), Lipizzaner itself runs
between the first and the second half of the rounds (``lipizzaner_side_by_side.py``'s
protocol: 2x2 local clients, a full epoch per iteration, ``--iterations``; its clients'
CPU seconds per generation). The one-thread worker also counts the float32 generation's
matmul GFLOP (its compiled HLO) and times XLA's rate on the step's matmul shapes in isolation:
the table then says how far past Lipizzaner any float32 case doing this work could get there.

What is compared is process CPU seconds (all threads; on a shared host wall time measures the
neighbours too): per case every round's CPU and wall seconds, the medians, the ratio of each
round's CPU seconds to the same round's default case (``float32`` at the most threads), and
Lipizzaner's client CPU seconds per generation over each case's median. One JSON line (also
appended to ``--out``); ``docs/benchmarks.md``'s table is generated from the committed JSON
(``results_table``). ``--profile`` then runs one more generation of each case under
``jax.profiler`` (``_kernel_profile.py``: kernel milliseconds by kind and by matmul shape).

  python experiments/benchmarks/past_the_floor.py [--arms float32,joined,bfloat16,...]
      [--threads 2,1] [--rounds 6] [--steps 600] [--out FILE] [--profile]
      [--lipizzaner CHECKOUT --lipizzaner_python PYTHON [--iterations 4]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # run as a script
  sys.path.insert(0, str(ROOT))

from experiments import _report  # noqa: E402

ARMS = {
  "float32": {},
  "one_device": {"backend": "single"},
  "joined": {"d_forward": "joined"},
  "bfloat16": {"matmuls": "bfloat16"},
  "bfloat16_joined": {"matmuls": "bfloat16", "d_forward": "joined"},
}
PREFIX = "RESULT "
RESULTS = ROOT / "experiments/benchmarks/results"
# One file per host kind (each line a run); the docs' block shows every run of every file.
RESULT_FILES = (
  "2026-12-04_past_the_floor_amd_epyc_zen5.jsonl",
  "2026-12-05_past_the_floor_amd_epyc_zen3.jsonl",
  "2026-12-07_past_the_floor_amd_epyc_zen4.jsonl",
)
PROFILE_FILE = "2026-12-04_past_the_floor_profile_amd_epyc_zen5.jsonl"  # a --profile run
README = "docs/benchmarks.md"
TARGET = 5.0  # issue 38: the generation at 5x Lipizzaner's CPU seconds or more


# ------------------------------------------------------------------ the worker process
def _program(arm: str, steps: int):
  """The arm's compiled 2x2 generation, its state and data, and the compile seconds."""
  import jax
  import jax.numpy as jnp

  from minmaxlab import coevolution as co
  from minmaxlab import distributed
  from minmaxlab.gan import data, models

  fields = dict(ARMS[arm])
  cfg = co.CoevolutionConfig(
    rows=2, cols=2, batch_size=100, steps_per_generation=steps, d_every=2,
    schedule="lipizzaner", fitness_samples=1000, mixture_samples=1, cell_strategy="map",
    **{k: v for k, v in fields.items() if k != "backend"},
  )  # fmt: skip
  backend = distributed.make_backend(cfg, fields.get("backend", "auto"))
  coev = co.Coevolution(
    backend.config,
    models.make_pair("mlp", (28, 28, 1), 64, hidden=(256, 256)),
    sample_real=lambda d, k, n: data.sample_batch(k, d, n),
    score_fn=lambda d, samples, w: jnp.sum(w * jnp.mean(samples**2, axis=(1, 2, 3, 4))),
    scheme=co.default_scheme(2e-4, lookahead=False),
    exchange=backend.exchange,
  )
  images = jax.random.uniform(jax.random.key(1), (6000, 28, 28, 1), jnp.float32, -1.0, 1.0)
  init, step = backend.jit(coev)
  state, images = init(jax.random.key(0)), backend.put_data(images)
  t0 = time.perf_counter()
  state = jax.block_until_ready(step(jax.random.key(10**6), state, images)[0])  # compiles
  return [step, state, images], time.perf_counter() - t0, backend.where()


def _matmul_bound(programs: dict, arms: list[str]) -> dict | None:
  """The float32 generation's matmul GFLOP (every ``dot`` of its compiled HLO times the trip
  counts of the loops around it) and XLA's GFLOP/s on the training step's matmul shapes in
  isolation on this process's cores: their quotient is the CPU time of the matmuls alone,
  at the rate XLA reaches on them here (no float32 case doing this work takes less unless its
  matmuls run faster than in isolation). ``None`` without a float32 arm on one device."""
  import jax

  from experiments.benchmarks._matmul_flops import hlo_matmul_flops, matmul_throughput

  arm = next((a for a in ("float32", "one_device", "joined") if a in arms), None)
  if arm is None or not hasattr(programs[arm][0], "lower"):  # a mesh's step: no one HLO
    return None
  step, state, images = programs[arm]
  gflop = hlo_matmul_flops(step.lower(jax.random.key(0), state, images).compile())["flops"] / 1e9
  per_shape, mix = matmul_throughput()
  return {
    "arm": arm,
    "matmul_gflop_per_generation": round(gflop, 2),
    "xla_matmul_gflops_per_shape": per_shape,
    "xla_matmul_gflops_train_mix": mix,
    "matmul_cpu_s": round(gflop / mix, 3),
  }


def worker(threads: int, arms: list[str], steps: int) -> None:
  """Pin to ``threads`` cores, compile every arm, then answer ``arm round`` lines on stdin
  with one ``RESULT {...}`` line each (wall and process CPU seconds of one generation)."""
  cores = sorted(os.sched_getaffinity(0))
  os.sched_setaffinity(0, cores[:threads])
  import jax

  from minmaxlab import distributed

  distributed.split_cpu_cores(grid=(2, 2))  # as the coevolution command (none on one core)
  programs, first_s, where = {}, {}, {}
  for arm in arms:  # the first (untimed) generation compiles
    programs[arm], first_s[arm], where[arm] = _program(arm, steps)
  bound = _matmul_bound(programs, arms) if threads == 1 else None  # one thread: CPU s = wall s
  ready = {"ready": True, "first_s": first_s, "where": where, "matmul_bound": bound}
  print(PREFIX + json.dumps(ready), flush=True)
  for line in sys.stdin:
    arm, rnd = line.split()
    prog = programs[arm]
    if rnd == "profile":  # one generation under jax.profiler: kernel time by kind and shape
      from experiments.benchmarks._kernel_profile import profile_call

      def call(prog=prog):
        prog[1], _ = prog[0](jax.random.key(99), prog[1], prog[2])
        jax.block_until_ready(prog[1])

      if not hasattr(prog[0], "lower"):  # a mesh's step: one program per device, no one HLO
        skipped = {"arm": arm, "profile": {"skipped": "cells over cores"}}
        print(PREFIX + json.dumps(skipped), flush=True)
        continue
      compiled = prog[0].lower(jax.random.key(99), prog[1], prog[2]).compile()
      print(PREFIX + json.dumps({"arm": arm, "profile": profile_call(call, compiled)}), flush=True)
      continue
    t0, c0 = time.perf_counter(), time.process_time()
    prog[1], _ = prog[0](jax.random.key(int(rnd)), prog[1], prog[2])
    jax.block_until_ready(prog[1])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(PREFIX + json.dumps({"arm": arm, "wall_s": wall, "cpu_s": cpu}), flush=True)


# ------------------------------------------------------------------ the parent process
class Worker:
  """A worker process (its own process group) and its line protocol."""

  def __init__(self, threads: int, arms: list[str], steps: int):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(threads)]
    cmd += ["--arms", ",".join(arms), "--steps", str(steps)]
    self.threads = threads
    self.proc = subprocess.Popen(
      cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
      start_new_session=True,
    )  # fmt: skip

  def read(self) -> dict:
    for line in self.proc.stdout:
      if line.startswith(PREFIX):
        return json.loads(line[len(PREFIX) :])
    raise RuntimeError(f"the {self.threads}-thread worker exited ({self.proc.wait()})")

  def run(self, arm: str, rnd: int | str) -> dict:
    self.proc.stdin.write(f"{arm} {rnd}\n")
    self.proc.stdin.flush()
    return self.read()

  def stop(self) -> None:
    import signal

    try:
      os.killpg(self.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
    self.proc.wait()


def _rounds(workers, arms, rounds, cases, log) -> None:
  order = [(w, a) for w in workers for a in arms]
  for _ in range(rounds):
    rnd = len(next(iter(cases.values()))["cpu_s"])
    k = rnd % len(order)
    for w, arm in order[k:] + order[:k]:
      r = w.run(arm, rnd)
      case = cases[f"{arm}@{w.threads}"]
      case["cpu_s"].append(round(r["cpu_s"], 3))
      case["wall_s"].append(round(r["wall_s"], 3))
    log(f"round {rnd}: " + ", ".join(f"{n} {c['cpu_s'][-1]:.2f}" for n, c in cases.items()))


def lipizzaner(args) -> dict:
  """Lipizzaner itself (``lipizzaner_side_by_side.py``'s protocol), its summary."""
  from experiments.benchmarks import lipizzaner_side_by_side as side
  from experiments.benchmarks._lipizzaner_run import PORTS, fid_seconds, run_lipizzaner, summarise

  src = side.source_dir(Path(args.lipizzaner).expanduser())
  side.check_interpreter(args.lipizzaner_python, "torch, torchvision, flask, yaml")
  side.check_ports_free()
  work = Path(tempfile.mkdtemp(prefix="past_the_floor_lipizzaner_"))
  side.copy_and_patch(src, work / "src")
  config = side.write_config(work / "src", work / "output", args.iterations)
  side.place_idx(Path(args.idx), work / "output")
  progress, samples, wall = run_lipizzaner(
    args.lipizzaner_python, work / "src", config, work, args.iterations, args.timeout_s
  )
  fids = [fid_seconds(work / f"client{i}.log") for i in range(len(PORTS))]
  return {**summarise(progress, samples, args.iterations, fids), "run_wall_s": round(wall, 1)}


def _summaries(cases: dict, lip: dict | None, default: str) -> None:
  base = cases[default]["cpu_s"]
  for c in cases.values():
    c["cpu_s_median"] = round(statistics.median(c["cpu_s"]), 3)
    c["wall_s_median"] = round(statistics.median(c["wall_s"]), 3)
    ratios = [x / b for x, b in zip(c["cpu_s"], base, strict=True)]
    c["cpu_over_default_same_round"] = [round(r, 3) for r in ratios]
    c["cpu_over_default_median"] = round(statistics.median(ratios), 3)
    if lip:
      c["lipizzaner_cpu_ratio"] = round(lip["client_cpu_s_per_generation"] / c["cpu_s_median"], 2)


def measure(args, log=print) -> dict:
  """Start the workers, run the rounds (Lipizzaner between the halves), the JSON record."""
  from experiments.benchmarks import _harness as h
  from experiments.benchmarks.speed_claims import cpu_identity

  arms, threads = args.arms.split(","), [int(t) for t in args.threads.split(",")]
  record = {"benchmark": "past_the_floor", "machine": {**h.host(), **cpu_identity()}}
  record["work"] = (
    f"2x2 grid, {args.steps} batches per cell (schedule lipizzaner, d_every 2), plain Adam, 5x5"
    " fitness on 1000 samples and the re-scoring, lax.map cells, trivial mixture score"
  )
  record["started"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
  record["commit"] = h.commit(ROOT)
  workers = [Worker(t, arms, args.steps) for t in threads]
  cases = {f"{a}@{w.threads}": {"cpu_s": [], "wall_s": []} for w in workers for a in arms}
  try:
    for w in workers:
      ready = w.read()
      for a in arms:
        cases[f"{a}@{w.threads}"]["first_call_s"] = round(ready["first_s"][a], 2)
        cases[f"{a}@{w.threads}"]["where"] = ready["where"][a]
      if ready.get("matmul_bound"):
        record["matmul_bound"] = ready["matmul_bound"]
    first = args.rounds // 2 if args.lipizzaner else args.rounds
    _rounds(workers, arms, first, cases, log)
    lip = None
    if args.lipizzaner:
      t0 = time.time()
      try:
        lip = lipizzaner(args)
        lip["utc"] = [time.strftime("%H:%M:%S", time.gmtime(t)) for t in (t0, time.time())]
        log(f"Lipizzaner: {lip['client_cpu_s_per_generation']} client CPU-s per generation")
      except Exception as e:  # the library's rounds are still worth recording
        record["lipizzaner_error"] = f"{type(e).__name__}: {e}"
        log(f"Lipizzaner failed: {record['lipizzaner_error']}")
      _rounds(workers, arms, args.rounds - first, cases, log)
    for w in workers if args.profile else ():
      for a in arms:
        cases[f"{a}@{w.threads}"]["profile"] = w.run(a, "profile")["profile"]
  finally:
    for w in workers:
      w.stop()
  _summaries(cases, lip, f"{arms[0]}@{max(threads)}")
  record.update(ended=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), cases=cases)
  record["lipizzaner"] = lip
  record["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
  return record


# ------------------------------------------------------------------ the generated table
def _run_lines(r: dict) -> list[str]:
  """One run's (JSON line's) header, Lipizzaner's figures, the table and the target."""
  lip, m = r["lipizzaner"], r["machine"]
  load = [m["load_average"][0], r["load_average_at_end"][0]]
  lines = [
    f"Measured {r['started']} to {r['ended']} on {m['cpu_model']} (family {m.get('cpu_family')},"
    f" model {m.get('model')}; {m['cpus']} cores, shared: 1-minute load {load[0]:g} at the"
    f" start, {load[1]:g} at the end), {r['work']}.",
    "",
  ]
  if r.get("lipizzaner_error"):
    lines += [f"Lipizzaner did not run ({r['lipizzaner_error']}): no ratio to it.", ""]
  if lip:
    lines += [
      f"Lipizzaner (its {lip['iterations']} iterations ran between the halves of the rounds): "
      f"{lip['client_cpu_s_per_generation']} client CPU s per generation, "
      f"{lip['median_s']} s per iteration (median of {len(lip['seconds_per_iteration'])}).",
      "",
    ]
  # runs before the default split cells over cores timed the compile alone; later ones the
  # first call (the compile and one generation) and say where each case ran
  first = "first_call_s" if "first_call_s" in next(iter(r["cases"].values())) else "compile_s"
  wheres = "where" in next(iter(r["cases"].values()))
  lines += [
    "| option | threads | CPU s per generation (median; every round) | CPU / default, same round"
    f" (median) | wall s (median) | {'first call s' if first == 'first_call_s' else 'compile s'}"
    f" | Lipizzaner's CPU s / this |{' where |' if wheres else ''}",
    f"|---|---|---|---|---|---|---|{'---|' if wheres else ''}",
  ]
  for name, c in r["cases"].items():
    arm, threads = name.split("@")
    every = ", ".join(f"{x:.2f}" for x in c["cpu_s"])
    ratio = f"**{c['lipizzaner_cpu_ratio']:.2f}x**" if "lipizzaner_cpu_ratio" in c else "-"
    lines.append(
      f"| `{arm}` | {threads} | {c['cpu_s_median']:.2f} ({every}) | "
      f"{c['cpu_over_default_median']:.3f} | {c['wall_s_median']:.2f} | {c[first]:.1f} | {ratio} |"
      + (f" {c['where']} |" if wheres else "")
    )
  if lip:
    ratios = {n: c["lipizzaner_cpu_ratio"] for n, c in r["cases"].items()}
    met = [f"`{n}`" for n, x in ratios.items() if x >= TARGET]
    short = [f"`{n}`" for n, x in ratios.items() if x < TARGET]
    lines += [
      "",
      f"Target ({TARGET:g}x Lipizzaner's CPU seconds or more): met by {', '.join(met) or 'none'}"
      f"; not met by {', '.join(short) or 'none'}.",
    ]
  b = r.get("matmul_bound")
  if lip and b:
    most = lip["client_cpu_s_per_generation"] / b["matmul_cpu_s"]
    lines += [
      "",
      f"The matmuls alone (measured in the same run, one thread): the `{b['arm']}` generation's"
      f" compiled program multiplies {b['matmul_gflop_per_generation']:.0f} GFLOP; at XLA's rate"
      " on the training step's matmul shapes in isolation"
      f" ({b['xla_matmul_gflops_train_mix']:.1f} GFLOP/s) that is {b['matmul_cpu_s']:.2f} CPU s."
      f" So no float32 case doing this work gets past {most:.2f}x Lipizzaner's CPU seconds on"
      " this host unless its matmuls run faster than they do in isolation; everything else in"
      " the generation (the elementwise work, the copies) only adds to that.",
    ]
  return lines


def results_table() -> str:
  """Every run (JSON line) of the committed file, each with its table (docs/benchmarks.md),
  then the profile run's kernel times."""
  from experiments.benchmarks import _harness as h

  files = [(f, h.read_lines(RESULTS / f)) for f in RESULT_FILES]
  if not any(runs for _, runs in files):
    return "No run of this benchmark is committed yet.\n"
  lines, i = [], 0
  for name, runs in files:
    lines += [f"[JSON](../experiments/benchmarks/results/{name}), one line per run.", ""]
    for r in runs:
      i += 1
      lines += [f"**Run {i}.**", "", *_run_lines(r), ""]
  return "\n".join(lines[:-1] + _profile_lines()) + "\n"


def _profile_lines() -> list[str]:
  """Kernel milliseconds by kind of one profiled generation per case (``PROFILE_FILE``)."""
  from experiments.benchmarks import _harness as h

  path = RESULTS / PROFILE_FILE
  runs = h.read_lines(path) if path.exists() else []
  if not runs:
    return []
  r = runs[-1]
  cases = {n: c["profile"] for n, c in r["cases"].items() if "profile" in c}
  kinds = sorted({k for p in cases.values() for k in p["kernel_ms_by_kind"]})
  lines = [
    "",
    f"Profile ({r['work']}; [JSON](../experiments/benchmarks/results/{PROFILE_FILE})): kernel"
    " milliseconds by kind of one generation under `jax.profiler`, summed over threads:",
    "",
    "| case | " + " | ".join(kinds) + " | matmul share |",
    "|---" * (len(kinds) + 2) + "|",
  ]
  for name, p in cases.items():
    ms = p["kernel_ms_by_kind"]
    share = ms.get("matmul", 0.0) / max(sum(ms.values()), 1e-9)
    cells = " | ".join(f"{ms.get(k, 0.0):.0f}" for k in kinds)
    lines.append(f"| `{name}` | {cells} | {share:.0%} |")
  return lines


_report.register("past_the_floor", README, "experiments.benchmarks.past_the_floor:results_table")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--arms", default=",".join(ARMS), help=f"a subset of {','.join(ARMS)}")
  ap.add_argument("--threads", default="2,1", help="cores of each worker (e.g. 2,1)")
  ap.add_argument("--rounds", type=int, default=6)
  ap.add_argument("--steps", type=int, default=600, help="batches per cell and generation")
  ap.add_argument("--out", default=None, help="append the JSON line to this file")
  ap.add_argument("--lipizzaner", default=None, help="your Lipizzaner checkout")
  ap.add_argument("--lipizzaner_python", default="python3")
  ap.add_argument("--iterations", type=int, default=4)
  ap.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
  ap.add_argument("--timeout_s", type=float, default=3600.0)
  ap.add_argument("--profile", action="store_true", help="then profile one generation of each case")
  ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  bad = [a for a in args.arms.split(",") if a not in ARMS]
  if bad:
    print(f"past_the_floor: unknown arm {bad[0]!r} (one of {', '.join(ARMS)})", file=sys.stderr)
    return 2
  if args.worker is not None:
    worker(args.worker, args.arms.split(","), args.steps)
    return 0
  from experiments.benchmarks import _harness as h

  h.emit(measure(args, log=lambda s: print("#", s, file=sys.stderr, flush=True)), args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
