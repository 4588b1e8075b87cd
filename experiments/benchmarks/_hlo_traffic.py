"""What a step of a compiled ``lax.scan`` reads and writes, from the compiled HLO text, and
the kernel time of the Lookahead sync branch (``transform_overhead.py``'s static measures)."""

from __future__ import annotations

import collections
import re
import statistics

import jax

from experiments.benchmarks import _kernel_profile

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


def computation(hlo_text: str, name: str) -> list[str]:
  """The instruction lines of one HLO computation."""
  lines, inside = [], False
  for line in hlo_text.splitlines():
    head = re.match(r"^(?:ENTRY )?%(\S+) \(", line)
    if head:
      inside = head.group(1) == name
    elif inside:
      lines.append(line)
  return lines


def instructions(lines: list[str]) -> list:
  """Array-shaped instructions (matches: name, shape, opcode, operands); tuples are left out."""
  inst = [re.match(r"\s*(?:ROOT )?%(\S+) = (\S+) ([\w-]+)\((.*?)\)", x) for x in lines]
  return [m for m in inst if m]


def traffic(inst: list, kinds: collections.Counter) -> tuple[int, int]:
  size = {m.group(1): _array_bytes(m.group(2)) for m in inst}
  written = read = 0
  for m in inst:
    if m.group(3) in _KERNELS:
      kinds[m.group(3)] += 1
      written += _array_bytes(m.group(2))
      read += sum(size.get(o.strip().lstrip("%"), 0) for o in m.group(4).split(","))
  return written, read


def body_conditionals(hlo_text: str) -> list[tuple[str, str]]:
  """``(false branch, true branch)`` computation names of every ``conditional`` in the scan's
  loop body (a Lookahead step's no-sync and sync branches)."""
  body = re.search(r"body=%([\w.\-]+)", hlo_text)
  out = []
  for line in computation(hlo_text, body.group(1)) if body else []:
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
  written, read = traffic(instructions(computation(hlo_text, body.group(1))), kinds)
  for no_sync, _ in body_conditionals(hlo_text):
    w, r = traffic(instructions(computation(hlo_text, no_sync)), kinds)
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


def sync_kernel_names(hlo_text: str) -> set[str]:
  """The instructions of the sync branch (the true one) of every ``conditional`` in the scan's
  loop body: what a Lookahead step runs once in k steps."""
  names = set()
  for _, sync in body_conditionals(hlo_text):
    lines = "\n".join(computation(hlo_text, sync))
    names |= set(re.findall(r"^\s*(?:ROOT )?%(\S+) = ", lines, flags=re.M))
  return names


def kernel_profile(run, params, state, batches, calls=3, hlo_text=None) -> dict:
  """Kernel time of a call (``jax.profiler``, median of ``calls`` profiled calls): in total and
  in the sync branch (:func:`sync_kernel_names`), and the sync's share. Each kernel is timed
  by itself, so unlike the wall-clock ratios this share does not move with the host's load
  between calls. ``hlo_text``: the compiled program's HLO, if already at hand."""
  hlo = hlo_text or run.lower(params, state, batches).compile().as_text()
  sync = sync_kernel_names(hlo)
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
