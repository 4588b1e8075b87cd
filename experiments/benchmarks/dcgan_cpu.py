"""CPU seconds per AltGAN step of the DCGAN pairs on XLA CPU, the convolutions in their two
formulations (``conv_impl``): ``"native"`` (one ``lax.conv_general_dilated`` per layer, the
transposed ones with ``lhs_dilation``, as flax writes them) and ``"matmul"`` (a matrix
product plus strided slices / interior pads, ``minmaxlab/gan/models/_conv.py``; what
``"auto"`` picks on a CPU backend). The same maths: the script also reports how far the two
formulations' first vector fields (both players' gradients at the initial parameters, on
the first batch) are apart, relative to the field's largest entry per player (float32
rounding; the parameters after an Adam step are not compared: Adam's first step is
``-lr * sign(g)``, so an entry whose gradient is at rounding level may step either way).

The step: one AltGAN step of ``minmaxlab.alternating(optax.adam(1e-3, b1=0.05))`` through
``minmaxlab.game_step`` (the discriminator's Adam step, then the generator's against the
updated discriminator; a fresh batch of 50 real images and latents for each), the
non-saturating BCE loss, as the Lookahead-minmax MNIST notebook trains; ``steps`` of them in
one jitted ``lax.scan``. Real images are tanh of Gaussian noise (the data do not change the
cost). ``--seeds``: per entry, ``1`` = one seed (no ``vmap``), ``n > 1`` = ``n`` seeds
vmapped in one program, as the lookahead study trains an arm.

Per configuration, both formulations are compiled first (compile seconds reported), then
timed interleaved (``_harness.interleave``: the order rotated every round, one untimed
warm-up round) on equal work: same initial parameters, same batches. ``cpu_s_per_seed_step``
= the median over repeats of this process's CPU seconds (all threads; the steadier figure on
a shared host) per step and seed; ``speedup_cpu`` = native over matmul, repeat by repeat
(paired), median.

One JSON line (``--out`` appends it to a file) with the host (CPU model, vector flags, load
average), the JAX version and the thread settings.

  python experiments/benchmarks/dcgan_cpu.py [--arch dcgan_notebook] [--seeds 1,4]
      [--steps 2] [--repeats 5] [--impls native,matmul] [--out results/<file>.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab as mml
from minmaxlab.gan import losses, models

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import _report  # noqa: E402
from experiments.benchmarks import _harness as h  # noqa: E402

ARCHS = ("dcgan_notebook", "dcgan")
IMPLS = ("native", "matmul")
SHAPE, BATCH = (28, 28, 1), 50
RESULTS = Path(__file__).resolve().parent / "results"
RESULT_FILES = ("2026-12-05_dcgan_cpu_amd_epyc_zen3.jsonl",)  # a run per line
README = "docs/benchmarks.md"


def program(arch: str, impl: str, seeds: int, steps: int):
  """``(run, params, state, batches, field)``: ``run(params, state, batches)`` does
  ``steps`` AltGAN steps (``seeds`` > 1: that many seeds vmapped), ``field(params, batches)``
  is the first vector field; the same values for every impl."""
  pair = models.make_pair(arch, SHAPE, conv_impl=impl)
  vaf = mml.value_and_vector_field(losses.game_loss(pair, "ns_bce"))
  tx = optax.with_extra_args_support(mml.alternating(optax.adam(1e-3, b1=0.05, b2=0.999)))

  def init(key):
    kg, kd, kr, kz = jax.random.split(key, 4)
    params = mml.Players(pair.generator.init(kg), pair.discriminator.init(kd))
    real = jnp.tanh(jax.random.normal(kr, (steps, 2, BATCH, *SHAPE)))
    z = jax.random.normal(kz, (steps, 2, BATCH, pair.latent_dim))
    return params, tx.init(params), (real, z)

  def run(params, state, batches):
    def body(carry, batch):
      field = lambda q, i: vaf(q, batch[0][i], batch[1][i])  # noqa: E731
      p, s, (l_min, _) = mml.game_step(tx, field, *carry)
      return (p, s), l_min

    (params, state), _ = jax.lax.scan(body, (params, state), batches)
    return params, state

  def field(params, batches):
    return vaf(params, batches[0][0, 0], batches[1][0, 0])[1]

  keys = jax.random.split(jax.random.key(0), max(seeds, 1))
  if seeds > 1:
    run, init, field = jax.vmap(run), jax.vmap(init), jax.vmap(field)
  else:
    keys = keys[0]
  return jax.jit(run), *jax.jit(init)(keys), jax.jit(field)


def field_gap(fields: dict, ref: str = "native", other: str = "matmul") -> dict:
  """Per player, the largest entry of |other - ref| over the largest |ref|."""
  out = {}
  for player in ("min", "max"):
    a, b = getattr(fields[ref], player), getattr(fields[other], player)
    gap = max(
      float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree.leaves(a))
    out[player] = gap / scale
  return out


def measure(arch: str, impls: list[str], seeds: int, steps: int, repeats: int) -> dict:
  progs, compiled, compile_info, fields = {}, {}, {}, {}
  for impl in impls:
    run, params, state, batches, field = progs[impl] = program(arch, impl, seeds, steps)
    compiled[impl], compile_info[impl] = h.compile_timed(run, params, state, batches)
    fields[impl] = h.block(field(params, batches))
  cases = {impl: (lambda r, impl=impl: compiled[impl](*progs[impl][1:4])) for impl in impls}
  times = h.interleave(cases, repeats, progress=lambda s: print(s, file=sys.stderr, flush=True))
  work = steps * max(seeds, 1)
  out: dict = {"seeds": seeds, "vmapped": seeds > 1, "steps_per_call": steps}
  for impl in impls:
    cpu = [r.cpu_s / work for r in times[impl]]
    out[impl] = {
      **h.summary(times[impl]),
      **compile_info[impl],
      "cpu_s_per_seed_step": round(statistics.median(cpu), 4),
      "wall_s_per_seed_step": round(statistics.median(r.wall_s / work for r in times[impl]), 4),
    }
  if set(IMPLS) <= set(impls):
    paired = [a.cpu_s / b.cpu_s for a, b in zip(times["native"], times["matmul"], strict=True)]
    out["speedup_cpu"] = round(float(np.median(paired)), 3)
    out["speedup_cpu_paired"] = [round(v, 3) for v in paired]
    out["field_gap_relative"] = field_gap(fields)
  if seeds > 1:  # each seed of the vmapped program against the same seed alone
    out["vmapped_vs_alone"] = {
      impl: vmap_gaps(arch, impl, progs[impl], fields[impl]) for impl in impls
    }
  return out


def vmap_gaps(arch: str, impl: str, prog, vmapped) -> list[dict]:
  """Per seed, :func:`field_gap` of its field in the vmapped program against the field of
  the same parameters and batches in a program of one seed."""
  field = program(arch, impl, 1, 1)[4]
  params, batches = prog[1], prog[3]
  gaps = []
  for i in range(jax.tree.leaves(params)[0].shape[0]):
    take = lambda t, i=i: jax.tree.map(lambda a: a[i], t)  # noqa: E731
    alone = field(take(params), (batches[0][i][:1], batches[1][i][:1]))
    gaps.append(field_gap({"alone": alone, "vmapped": take(vmapped)}, "alone", "vmapped"))
  return gaps


def _ints(text: str) -> list[int]:
  try:
    values = [int(v) for v in text.split(",") if v.strip()]
  except ValueError:
    values = []
  if not values or min(values) < 1:
    raise SystemExit(f"--seeds must be positive integers separated by commas, got {text!r}")
  return values


def main(argv=None) -> dict:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--arch", default="dcgan_notebook", choices=ARCHS)
  ap.add_argument("--seeds", default="1,4", help="1 = one seed; n > 1 = n seeds vmapped")
  ap.add_argument("--steps", type=int, default=2, help="AltGAN steps per timed call")
  ap.add_argument("--repeats", type=int, default=5)
  ap.add_argument("--impls", default="native,matmul")
  ap.add_argument("--out", default=None, help="append the JSON line to this file")
  args = ap.parse_args(argv)
  impls = [i for i in args.impls.split(",") if i]
  bad = [i for i in impls if i not in IMPLS]
  if bad or not impls:
    raise SystemExit(f"--impls must name some of {IMPLS}, got {args.impls!r}")
  if args.steps < 1 or args.repeats < 1:
    raise SystemExit(f"--steps and --repeats must be >= 1, got {args.steps}, {args.repeats}")
  seeds = _ints(args.seeds)
  if jax.default_backend() != "cpu":
    raise SystemExit(f"this benchmark measures XLA CPU; the backend is {jax.default_backend()!r}")
  configs = [measure(args.arch, impls, n, args.steps, args.repeats) for n in seeds]
  record = {
    "benchmark": "dcgan_cpu",
    "arch": args.arch,
    "batch": BATCH,
    "image_shape": list(SHAPE),
    "optimizer": "alternating(adam(1e-3, b1=0.05, b2=0.999)), ns_bce",
    "repeats": args.repeats,
    "host": h.host(),
    "thread_settings": h.thread_settings(),
    "configs": configs,
  }
  record["note"] = h.note_load(record["host"]["load_average"][0], record["host"]["cpus"])
  h.emit(record, args.out)
  return record


def _run_lines(name: str, r: dict) -> list[str]:
  m, threads = r["host"], r["thread_settings"]
  lines = [
    f"[JSON](../experiments/benchmarks/results/{name}): `{r['arch']}` pair, batch"
    f" {r['batch']}, {r['optimizer']}; {m['cpu_model']}, {m['cpus']} cores, jax {m['jax']},"
    f" XLA_FLAGS `{threads['XLA_FLAGS'] or '(none)'}`, {threads['affinity_cpus']} CPUs in"
    f" the affinity; {r['note']}; {r['repeats']} rounds.",
    "",
    "| seeds | native: CPU-s per seed-step (median) | matmul: CPU-s per seed-step"
    " (median) | native / matmul, CPU (median of rounds) | compile CPU-s, native / matmul |"
    " field gap (relative; G, D) | vmapped vs each seed alone: field gap per seed, native;"
    " matmul |",
    "|---|---|---|---|---|---|---|",
  ]
  for c in r["configs"]:
    seeds = f"{c['seeds']} (vmapped)" if c["vmapped"] else "1"
    nat, mm, gap = c["native"], c["matmul"], c["field_gap_relative"]
    lines.append(
      f"| {seeds} | {nat['cpu_s_per_seed_step']:.3f} | {mm['cpu_s_per_seed_step']:.3f} |"
      f" {c['speedup_cpu']:.1f} | {nat['compile_cpu_s']:.1f} / {mm['compile_cpu_s']:.1f} |"
      f" {gap['min']:.1e}, {gap['max']:.1e} | {_alone(c)} |"
    )
  return lines


def results_table() -> str:
  """Every committed run: its host and load, then per configuration both formulations' CPU
  seconds per step and seed, the speed-up and the fields' gap (docs/benchmarks.md's block)."""
  return h.runs_block(RESULTS, RESULT_FILES, _run_lines)


def _alone(config: dict) -> str:
  if not config["vmapped"]:
    return "-"
  if "vmapped_vs_alone" not in config:
    return "not measured in this run"
  per_impl = [
    " ".join(f"{max(g.values()):.0e}" for g in config["vmapped_vs_alone"][i]) for i in IMPLS
  ]
  return "; ".join(per_impl)


_report.register("dcgan_cpu", README, "experiments.benchmarks.dcgan_cpu:results_table")

if __name__ == "__main__":
  main()
