"""What a compiled program is made of (an HLO census), and the threefry stub of
``compile_time.py --stub_threefry`` (a diagnostic)."""

from __future__ import annotations

import collections
import re

_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?\S+ = .*? ([a-z][\w-]*)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def _origin(op_name: str) -> str:
  """The function a fused instruction was traced in: the innermost ``jit(...)`` of its
  ``op_name`` below the program's own (``jit(_where)``, ``jit(_threefry_split)``), else
  the named frame above its primitive (``vmap(MLPGenerator)``), else the primitive."""
  parts = [p for p in op_name.split("/")[1:] if p not in ("while", "body", "cond", "closed_call")]
  parts = [p for p in parts if not p.startswith("branch_")]
  jits = [p for p in parts if "jit(" in p]
  if jits:
    return jits[-1]
  return parts[-2] if len(parts) > 1 else (parts[-1] if parts else "?")


def hlo_census(text: str, top: int = 12) -> dict:
  """What a compiled program is made of (its optimized HLO text): the counts of
  instructions, fusions, copies and while loops (XLA CPU emits one kernel per fusion and
  per unfused instruction, so these are what its codegen seconds scale with), and the
  ``top`` origins of the fusions (:func:`_origin`; e.g. ``jit(_where)``: a per-leaf
  select of a pytree, one fusion per leaf)."""
  ops: collections.Counter = collections.Counter()
  origins: collections.Counter = collections.Counter()
  for line in text.splitlines():
    m = _INSTRUCTION.match(line)
    if not m:
      continue
    ops[m.group(1)] += 1
    if m.group(1) == "fusion":
      name = _OP_NAME.search(line)
      origins[_origin(name.group(1)) if name else "?"] += 1
  return {
    "instructions": sum(ops.values()),
    "fusions": ops["fusion"],
    "copies": ops["copy"],
    "while_loops": ops["while"],
    "fusions_by_origin": dict(origins.most_common(top)),
  }


def stub_threefry() -> None:
  """A diagnostic (``--stub_threefry``): JAX's threefry2x32 hash, which every ``jax.random``
  call runs (a rolled loop per call site on the CPU), lowered as two integer operations, so
  that a cold compile shows how many of its seconds random number generation costs. The
  program's random numbers are then wrong: only its compile is timed. Private JAX API
  (checked on 0.10.2)."""
  from jax._src.interpreters import mlir

  try:
    from jax._src.random.threefry2x32 import threefry2x32_p
  except ImportError:  # older JAX
    from jax._src.prng import threefry2x32_p

  def two_ops(k1, k2, x1, x2):
    return (x1 ^ k1) + k2, (x2 ^ k2) + x1

  lowering = mlir.lower_fun(two_ops, multiple_results=True)
  mlir.register_lowering(threefry2x32_p, lowering, platform="cpu")
