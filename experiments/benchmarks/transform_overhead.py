"""Per-step cost of each game scheme with and without Lookahead-minmax.

Problems: an MLP GAN (G 64-256-256-784, D 784-256-256-1, batch 100, non-saturating
BCE) and a 1000-dim bilinear game. Schemes: GDA (Adam), alternating, extragradient
and optimistic over Adam, each alone, wrapped in ``lookahead_minmax`` (stepped by
``game_step``, which uses the transform's ``update_and_apply``), the same wrapped scheme in a
hand-written optax loop (``tx.update`` then ``optax.apply_updates``: ``lookahead_update``),
and run through ``lookahead_scan`` (blocks of k plain steps, then the sync). Each
measurement jits ``steps`` updates in one ``lax.scan`` (fresh batches per field
evaluation) and times it; the plain and lookahead versions of a scheme are timed
interleaved, ``repeats`` times (the order rotated every round), and the medians (and minima)
compared (ratios measured side by side in one run: this machine is noisy), as are the medians of
the same round's ratios (``overhead_paired``, with quartiles). ``overhead_no_sync`` times the
Lookahead program with a period longer than the call, so it never syncs: the per-step cost
alone; the rest of ``overhead`` is the syncs'. ``lookahead_minmax``'s ``sync_layout="auto"``
(``layout`` in the JSON: ``cond`` or ``select``) is timed against the layout it did not choose
(``overhead_other_layout``) in the same rounds. ``--profile`` adds the sync branch's share of
the kernel time of the Lookahead program with the ``cond``. ``step_bytes_ratio`` is the
buffer traffic of a step without a sync, read from the compiled HLO (:func:`step_traffic`):
free of timing noise; ``step_kernels`` counts that step's kernels (the loop body's and its
no-sync branch's). Prints one JSON line.

  python experiments/benchmarks/transform_overhead.py [--repeats 7] [--quick]
      [--problems mlp_gan,bilinear_1000] [--steps 25,400] [--schemes gda,alternating]
      [--profile]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

import minmaxlab as mml
from minmaxlab import runner
from minmaxlab.gan import losses, models

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _kernel_profile  # noqa: E402

TARGET = 0.03  # lookahead should add under 3% per step (issue 11)


def schemes():
  adam = lambda: optax.adam(2e-4, b1=0.5)
  return {
    "gda": adam,
    "alternating": lambda: mml.alternating(adam()),
    "extragradient": lambda: mml.extragradient(adam()),
    "optimistic": lambda: mml.optimistic(adam()),
  }


def gan_problem(batch=100):
  pair = models.make_pair("mlp", (784,), latent_dim=64, hidden=(256, 256))
  kg, kd = jax.random.split(jax.random.key(0))
  params = mml.Players(pair.generator.init(kg), pair.discriminator.init(kd))
  vaf = mml.value_and_vector_field(losses.game_loss(pair, "ns_bce"))

  def data(key, steps):  # two field evaluations per step at most: (steps, 2, batch, ...)
    kr, kz = jax.random.split(key)
    real = jnp.tanh(jax.random.normal(kr, (steps, 2, batch, 784)))
    return real, jax.random.normal(kz, (steps, 2, batch, 64))

  def field(p, batch, i):
    real, z = batch
    return vaf(p, real[i], z[i])

  return params, data, field


def bilinear_problem(dim=1000):
  game = mml.games.random_bilinear(jax.random.key(1), dim)
  params = mml.Players(jnp.ones(dim), jnp.ones(dim))
  vaf = mml.value_and_vector_field(game.loss)

  def data(key, steps):
    return jnp.zeros((steps, 2))

  def field(p, batch, i):
    return vaf(p)

  return params, data, field


def compiled_run(tx, params, field, steps, via="game_step"):
  """``steps`` jitted steps in one ``lax.scan``: through :func:`minmaxlab.game_step`
  (``via="game_step"``; Lookahead's ``update_and_apply``) or as a hand-written optax loop,
  ``tx.update`` then ``optax.apply_updates`` (``via="update"``)."""
  tx = optax.with_extra_args_support(tx)

  def body(carry, batch):
    p, s = carry
    if via == "update":
      fld = lambda q, i: field(q, batch, i)  # noqa: E731
      (l_min, _), v = fld(p, 0)
      u, s = tx.update(v, s, p, vector_field=lambda q, i: fld(q, i)[1])
      return (optax.apply_updates(p, u), s), l_min
    p, s, (l_min, _) = mml.game_step(tx, lambda q, i: field(q, batch, i), p, s)
    return (p, s), l_min

  @jax.jit
  def run(p, s, batches):
    (p, s), l = jax.lax.scan(body, (p, s), batches)
    return p, s, l

  state = tx.init(params)
  return run, state


def compiled_scan_run(make_inner, params, field, steps, sync_period=5, slow_step_size=0.5):
  """The same run as ``compiled_run(lookahead_minmax(make_inner(), ...))`` through
  :func:`minmaxlab.lookahead_scan`: blocks of ``sync_period`` plain inner steps in an inner
  ``lax.scan``, then the sync (no per-step counter or ``cond``)."""

  @jax.jit
  def run(p, s, batches):
    p, s, (l_min, _) = mml.lookahead_scan(
      make_inner(), field, p, s, batches, sync_period, slow_step_size
    )
    return p, s, l_min

  return run, mml.lookahead_minmax(make_inner(), sync_period, slow_step_size).init(params)


_DTYPE_BYTES = {"f64": 8, "f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "pred": 1, "s8": 1}
# The top-level operations of a loop body (or of a cond branch) that read and write buffers
# (not tuple plumbing; a `conditional`'s branches are separate computations, see step_traffic).
_KERNELS = ("fusion", "dot", "copy", "convolution", "custom-call", "dynamic-update-slice")


def _array_bytes(shape: str) -> int:
  m = re.match(r"(\w+)\[([\d,]*)\]", shape)
  if not m or m.group(1) not in _DTYPE_BYTES:
    return 0  # tuples, tokens
  n = 1
  for d in filter(None, m.group(2).split(",")):
    n *= int(d)
  return n * _DTYPE_BYTES[m.group(1)]


def _computation(hlo_text: str, name: str) -> list[str]:
  """The instruction lines of one HLO computation."""
  lines, inside = [], False
  for line in hlo_text.splitlines():
    head = re.match(r"^(?:ENTRY )?%(\S+) \(", line)
    if head:
      inside = head.group(1) == name
    elif inside:
      lines.append(line)
  return lines


def _instructions(lines: list[str]) -> list:
  """Array-shaped instructions (matches: name, shape, opcode, operands); tuples are left out."""
  inst = [re.match(r"\s*(?:ROOT )?%(\S+) = (\S+) ([\w-]+)\((.*?)\)", x) for x in lines]
  return [m for m in inst if m]


def _traffic(inst: list, kinds: collections.Counter) -> tuple[int, int]:
  size = {m.group(1): _array_bytes(m.group(2)) for m in inst}
  written = read = 0
  for m in inst:
    if m.group(3) in _KERNELS:
      kinds[m.group(3)] += 1
      written += _array_bytes(m.group(2))
      read += sum(size.get(o.strip().lstrip("%"), 0) for o in m.group(4).split(","))
  return written, read


def _body_conditionals(hlo_text: str) -> list[tuple[str, str]]:
  """``(false branch, true branch)`` computation names of every ``conditional`` in the scan's
  loop body (a Lookahead step's no-sync and sync branches)."""
  body = re.search(r"body=%([\w.\-]+)", hlo_text)
  out = []
  for line in _computation(hlo_text, body.group(1)) if body else []:
    # a conditional's shape is a tuple: found by its opcode
    m = re.search(r" conditional\(.*branch_computations=\{%([\w.\-]+), %([\w.\-]+)\}", line)
    old = re.search(
      r" conditional\(.*true_computation=%([\w.\-]+), false_computation=%([\w.\-]+)", line
    )
    if m:
      out.append(m.groups())
    elif old:
      out.append(old.groups()[::-1])
  return out


def step_traffic(hlo_text: str) -> dict:
  """Kernels and buffer traffic of one step WITHOUT a lookahead sync, from the compiled HLO.

  Sums, over the top-level kernels of the scan's ``while`` body (fusions, dots, copies),
  the bytes each writes (its result) and reads (its operands), and the same over the
  first (``False``, no-sync) branch of every ``conditional`` in the body: a step without
  a sync runs that branch. The sync branch is left out: it runs on one step in k.
  XLA's ``cost_analysis`` instead adds both branches of every ``cond`` on every step, an
  upper bound that does not change with the layout.
  """
  body = re.search(r"body=%([\w.\-]+)", hlo_text)
  if body is None:
    return {}
  kinds = collections.Counter()
  written, read = _traffic(_instructions(_computation(hlo_text, body.group(1))), kinds)
  for no_sync, _ in _body_conditionals(hlo_text):
    w, r = _traffic(_instructions(_computation(hlo_text, no_sync)), kinds)
    written, read = written + w, read + r
  return {"written": written, "read": read, "kernels": sum(kinds.values()), **kinds}


def xla_cost(run, params, state, batches):
  """FLOPs and bytes accessed of the compiled run (XLA's cost analysis), the traffic of a
  step without a sync (:func:`step_traffic`) and the compiled HLO text."""
  try:
    compiled = run.lower(params, state, batches).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    hlo = compiled.as_text()
    return {
      "flops": float(cost.get("flops", 0.0)),
      "bytes": float(cost.get("bytes accessed", 0.0)),
      "step": step_traffic(hlo),
      "hlo": hlo,
    }
  except Exception:  # cost analysis is best effort on some backends
    return {"flops": 0.0, "bytes": 0.0, "step": {}, "hlo": None}


def _sync_kernel_names(hlo_text: str) -> set[str]:
  """The instructions of the sync branch (the true one) of every ``conditional`` in the scan's
  loop body: what a Lookahead step runs once in k steps."""
  names = set()
  for _, sync in _body_conditionals(hlo_text):
    lines = "\n".join(_computation(hlo_text, sync))
    names |= set(re.findall(r"^\s*(?:ROOT )?%(\S+) = ", lines, flags=re.M))
  return names


def kernel_profile(run, params, state, batches, calls=3, hlo_text=None) -> dict:
  """Kernel time of a call (``jax.profiler``, median of ``calls`` profiled calls): in total and
  in the sync branch (:func:`_sync_kernel_names`), and the sync's share. Each kernel is timed
  by itself, so unlike the wall-clock ratios this share does not move with the host's load
  between calls. ``hlo_text``: the compiled program's HLO, if already at hand."""
  hlo = hlo_text or run.lower(params, state, batches).compile().as_text()
  sync = _sync_kernel_names(hlo)
  totals, syncs = [], []
  for _ in range(calls):
    ns, _, _ = _kernel_profile.kernel_times(
      lambda: jax.block_until_ready(run(params, state, batches)), hlo
    )
    totals.append(sum(t for name, t in ns.items() if "ThreadPool" not in name))
    syncs.append(sum(ns[name] for name in sync))
  # microsecond resolution: a small game's sync kernels take a few microseconds per call, which
  # two decimals of a millisecond printed as 0.0 on a fast host
  return {
    "kernel_ms": round(statistics.median(totals) / 1e6, 4),
    "sync_kernel_ms": round(statistics.median(syncs) / 1e6, 4),
    "sync_share": round(statistics.median(s / t for s, t in zip(syncs, totals)), 4),
  }


def _paired(times, variant="lookahead"):
  """Median and quartiles of each round's ratio ``variant / plain - 1``, and every round's
  (``rounds``, in order: a later run can pool them)."""
  ratios = [la / plain - 1.0 for plain, la in zip(times["plain"], times[variant])]
  rounds = [round(r, 4) for r in ratios]
  if len(ratios) < 2:
    r = rounds[0]
    return {"median": r, "q1": r, "q3": r, "rounds": rounds}
  q1, _, q3 = statistics.quantiles(ratios, n=4)
  median = round(statistics.median(ratios), 4)
  return {"median": median, "q1": round(q1, 4), "q3": round(q3, 4), "rounds": rounds}


def _step_bytes(cost):
  step = cost.get("step") or {}
  return step.get("written", 0) + step.get("read", 0)


def _ratio(a, b):
  return round(a / b, 4) if b else None


def measure(problem, steps, repeats, profile=False, only=None):
  params, data, field = problem
  batches = data(jax.random.key(2), steps)
  out = {}
  for name, make in schemes().items():
    if only and name not in only:
      continue
    runs = {}
    la = lambda k, layout="auto": mml.lookahead_minmax(make(), k, 0.5, sync_layout=layout)  # noqa: E731
    variants = {
      "plain": lambda: compiled_run(make(), params, field, steps),
      "lookahead": lambda: compiled_run(la(5), params, field, steps),  # sync_layout="auto"
      "lookahead_scan": lambda: compiled_scan_run(make, params, field, steps),
      "lookahead_update": lambda: compiled_run(la(5), params, field, steps, "update"),
      # the same program with a period longer than the call: what a step costs without a sync
      "lookahead_no_sync": lambda: compiled_run(la(steps + 1), params, field, steps),
      # the sync layout "auto" did not choose (see lookahead_minmax's sync_layout)
      "lookahead_other_layout": lambda: compiled_run(
        la(5, "select" if layout == "cond" else "cond"), params, field, steps
      ),
    }
    layout = None
    for variant, build in variants.items():
      run, state = build()
      t0 = time.perf_counter()
      jax.block_until_ready(run(params, state, batches))  # compile + warm up
      compile_s = time.perf_counter() - t0
      runs[variant] = (run, state, compile_s, xla_cost(run, params, state, batches))
      if variant == "lookahead":  # the layout "auto" chose, read off the compiled loop body
        layout = "cond" if _body_conditionals(runs[variant][3]["hlo"]) else "select"
    times = {v: [] for v in runs}
    cpu = {v: [] for v in runs}  # process CPU seconds: less sensitive to other load
    order = list(runs)
    for r in range(repeats):  # interleaved, the order rotated each round (no position bias)
      for variant in order[r % len(order) :] + order[: r % len(order)]:
        run, state = runs[variant][:2]
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(run(params, state, batches))
        times[variant].append((time.perf_counter() - t0) / steps)
        cpu[variant].append((time.process_time() - c0) / steps)
    plain = statistics.median(times["plain"])
    la = statistics.median(times["lookahead"])
    cpu_plain, cpu_la = statistics.median(cpu["plain"]), statistics.median(cpu["lookahead"])
    out[name] = {
      "step_ms": round(plain * 1e3, 4),
      "lookahead_step_ms": round(la * 1e3, 4),
      "overhead": round(la / plain - 1.0, 4),
      # best-of-repeats is less sensitive to other load on a shared machine
      "overhead_min": round(min(times["lookahead"]) / min(times["plain"]) - 1.0, 4),
      # the same from the CPU time the process used (median and best of the repeats)
      "cpu_step_ms": round(cpu_plain * 1e3, 4),
      "overhead_cpu": round(cpu_la / cpu_plain - 1.0, 4),
      "overhead_cpu_min": round(min(cpu["lookahead"]) / min(cpu["plain"]) - 1.0, 4),
      # median of the ratios within each round (plain, lookahead) and their spread
      # (quartiles): a change of the host's load between pairs cancels out
      "overhead_paired": _paired(times),
      "overhead_cpu_paired": _paired(cpu),
      # XLA's static cost estimate; it counts BOTH branches of the lookahead's lax.cond on
      # every step (the sync arithmetic is not amortised over k), so these are upper bounds.
      "xla_flops_ratio": _ratio(runs["lookahead"][3]["flops"], runs["plain"][3]["flops"]),
      "xla_bytes_ratio": _ratio(runs["lookahead"][3]["bytes"], runs["plain"][3]["bytes"]),
      # the same for a step without a sync, from the compiled loop body (see step_traffic)
      "step_bytes_ratio": _ratio(_step_bytes(runs["lookahead"][3]), _step_bytes(runs["plain"][3])),
      "step_kernels": [runs[v][3]["step"].get("kernels") for v in ("plain", "lookahead")],
      "compile_s": round(runs["plain"][2], 2),
      "lookahead_compile_s": round(runs["lookahead"][2], 2),
      # the same steps through minmaxlab.lookahead_scan (k plain steps, then the sync),
      # timed in the same interleaved rounds
      "scan_step_ms": round(statistics.median(times["lookahead_scan"]) * 1e3, 4),
      "overhead_scan": round(statistics.median(times["lookahead_scan"]) / plain - 1.0, 4),
      "overhead_scan_min": round(min(times["lookahead_scan"]) / min(times["plain"]) - 1.0, 4),
      "overhead_scan_paired": _paired(times, "lookahead_scan"),
      "overhead_scan_cpu_paired": _paired(cpu, "lookahead_scan"),
      "scan_compile_s": round(runs["lookahead_scan"][2], 2),
      # the same steps as a hand-written optax loop (`tx.update`, then `apply_updates`):
      # Lookahead's `cond` then selects between two updates (see lookahead_minmax)
      "update_step_ms": round(statistics.median(times["lookahead_update"]) * 1e3, 4),
      "overhead_update": round(statistics.median(times["lookahead_update"]) / plain - 1.0, 4),
      "overhead_update_paired": _paired(times, "lookahead_update"),
      "update_step_bytes_ratio": _ratio(
        _step_bytes(runs["lookahead_update"][3]), _step_bytes(runs["plain"][3])
      ),
      # Lookahead whose sync never comes in the call: the per-step cost alone (counter, cond)
      "overhead_no_sync": round(statistics.median(times["lookahead_no_sync"]) / plain - 1.0, 4),
      "overhead_no_sync_paired": _paired(times, "lookahead_no_sync"),
      # sync_layout: what "auto" chose, and the other layout in the same rounds
      "layout": layout,
      "other_layout": "select" if layout == "cond" else "cond",
      "overhead_other_layout": round(
        statistics.median(times["lookahead_other_layout"]) / plain - 1.0, 4
      ),
      "overhead_other_layout_paired": _paired(times, "lookahead_other_layout"),
      "overhead_other_layout_cpu_paired": _paired(cpu, "lookahead_other_layout"),
      "other_layout_step_bytes_ratio": _ratio(
        _step_bytes(runs["lookahead_other_layout"][3]), _step_bytes(runs["plain"][3])
      ),
      "other_layout_step_kernels": runs["lookahead_other_layout"][3]["step"].get("kernels"),
    }
    if profile:  # what the sync branch takes of the kernel time of the program with the cond
      run, state, _, cost = runs["lookahead" if layout == "cond" else "lookahead_other_layout"]
      out[name]["profile"] = kernel_profile(run, params, state, batches, hlo_text=cost["hlo"])
  return out


def load_average() -> list[float] | None:
  try:
    return [round(x, 2) for x in os.getloadavg()]
  except OSError:
    return None


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
  parser.add_argument(
    "--problems", default="mlp_gan,bilinear_1000", help="comma-separated subset to run"
  )
  parser.add_argument(
    "--steps",
    default=None,
    help="steps per timed call, mlp_gan,bilinear_1000 (default 25,400; multiples of k=5):"
    " longer calls average out more of a noisy host",
  )
  parser.add_argument("--schemes", default="", help="comma-separated subset (default: all)")
  parser.add_argument(
    "--profile",
    action="store_true",
    help="also profile the lookahead programs: the sync branch's share of their kernel time",
  )
  args = parser.parse_args()
  gan_steps, bil_steps = (5, 20) if args.quick else (25, 400)  # multiples of k=5
  if args.steps:
    gan_steps, bil_steps = (int(n) for n in args.steps.split(","))
    if gan_steps % 5 or bil_steps % 5 or min(gan_steps, bil_steps) <= 0:
      parser.error(f"--steps: positive multiples of k=5 wanted, got {args.steps!r}")
  only = set(args.schemes.split(",")) if args.schemes else None
  if only and not only <= set(schemes()):
    parser.error(f"--schemes: choose from {','.join(schemes())}, got {args.schemes!r}")
  load_before = load_average()
  problems = {
    "mlp_gan": lambda: measure(gan_problem(), gan_steps, args.repeats, args.profile, only),
    "bilinear_1000": lambda: measure(
      bilinear_problem(), bil_steps, args.repeats, args.profile, only
    ),
  }
  results = {name: problems[name]() for name in args.problems.split(",")}
  overheads = [r["overhead"] for p in results.values() for r in p.values()]
  gan = results.get("mlp_gan", {})
  print(
    json.dumps(
      {
        "benchmark": "transform_overhead",
        "backend": jax.default_backend(),
        "devices": jax.device_count(),
        "cpu": runner.cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "steps_per_timing": {"mlp_gan": gan_steps, "bilinear_1000": bil_steps},
        "repeats": args.repeats,
        "target_overhead": TARGET,
        "results": results,
        "max_overhead_mlp_gan": max((r["overhead"] for r in gan.values()), default=None),
        "max_overhead": max(overheads),
        "within_target_mlp_gan": bool(gan) and all(r["overhead"] < TARGET for r in gan.values()),
        "within_target_mlp_gan_min": bool(gan)
        and all(r["overhead_min"] < TARGET for r in gan.values()),
        "within_target_mlp_gan_cpu": bool(gan)
        and all(r["overhead_cpu"] < TARGET for r in gan.values()),
        "within_target_mlp_gan_paired": bool(gan)
        and all(r["overhead_paired"]["median"] < TARGET for r in gan.values()),
        "within_target_mlp_gan_cpu_paired": bool(gan)
        and all(r["overhead_cpu_paired"]["median"] < TARGET for r in gan.values()),
        "max_sync_share_mlp_gan": max(
          (r["profile"]["sync_share"] for r in gan.values() if "profile" in r), default=None
        ),
      }
    )
  )


if __name__ == "__main__":
  main()
