"""Matmul FLOPs of a compiled XLA program, and XLA's matmul throughput per shape.

:func:`hlo_matmul_flops` counts every ``dot`` of the compiled HLO, scaled by the
known trip counts of the loops around it (XLA's own ``cost_analysis()`` counts a loop
body once; :func:`xla_cost_flops` reads it for comparison).
:func:`matmul_throughput` times each matmul shape of the Lipizzaner MNIST training
step (:data:`TRAIN_MATMULS`) in isolation. Used by ``coevolution_throughput.py --floor``.
"""

from __future__ import annotations

import functools
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

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


def xla_cost_flops(compiled):
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
