"""Where a compiled program's time goes, kernel by kernel: one call under ``jax.profiler``,
the XLA CPU thunks' events summed by kernel name and by kind, matmuls joined with their
shapes from the compiled HLO (used by ``coevolution_throughput.py --floor --profile``)."""

from __future__ import annotations

import collections
import re
import tempfile
import time
from pathlib import Path

import jax


def _hlo_dots(hlo_text: str) -> dict:
  """``{kernel name: "shape lhs/rhs contracting dims"}`` of every dot and YNNPACK-fused dot."""
  comps = {}
  for block in re.split(r"\n(?=\S)", hlo_text):
    m = re.match(r"^(?:ENTRY )?%(\S+) ", block)
    if m:
      comps[m.group(1)] = block
  out = {}
  for block in comps.values():
    for line in block.split("\n"):
      m = re.match(r"\s*(?:ROOT )?%((?:ynn_fusion|dot)[.\d]*) = (\S+) (\w+)\(.*?\)(.*)", line)
      if not m:
        continue
      name, shape, op, rest = m.groups()
      if op == "fusion":
        called = re.search(r"calls=%([^,\s]+)", rest)
        dot = re.search(
          r"= (\S+) dot\(.*?\), (lhs_contracting_dims=\S+ rhs_contracting_dims=\S+)",
          comps.get(called.group(1), "") if called else "",
        )
        if dot is None:
          continue
        shape, dims = dot.groups()
      else:
        dims = re.search(r"(lhs_contracting_dims=\S+ rhs_contracting_dims=\S+)", rest)
        dims = dims.group(1) if dims else ""
      out[name] = f"{re.sub(r'{.*?}', '', shape)} {dims.rstrip(',')}"
  return out


def kind(name: str) -> str:
  """A kernel's kind from its HLO name: ``matmul`` (dots, YNNPACK fusions), ``copy``,
  ``while`` (as the thunk runtime reports it: small loops such as threefry's run as one
  event), ``thread pool wait`` (a matmul's worker waiting on its partner), else
  ``elementwise/other``."""
  if name.startswith(("ynn_fusion", "dot")):
    return "matmul"
  if name.startswith(("copy", "wrapped_copy")):
    return "copy"
  if name.startswith("while"):
    return "while"
  if "ThreadPool" in name:
    return "thread pool wait"
  return "elementwise/other"


def kernel_times(call, hlo_text: str) -> tuple[collections.Counter, collections.Counter, float]:
  """Profile one ``call()`` (which must block until done) of the program whose compiled HLO
  is ``hlo_text``: nanoseconds and event counts per kernel name, and the wall seconds."""
  with tempfile.TemporaryDirectory() as d:
    t0 = time.perf_counter()
    with jax.profiler.trace(d):
      call()
    wall = time.perf_counter() - t0
    pb = next(Path(d).rglob("*.xplane.pb"))
    data = jax.profiler.ProfileData.from_file(str(pb))
    # Kernels run on the client's thread and XLA's worker threads: every event named like an
    # instruction of the program (or a matmul's wait on its partner thread) counts.
    names = set(re.findall(r"^\s*(?:ROOT )?%(\S+) = ", hlo_text, flags=re.M))
    ns, count = collections.Counter(), collections.Counter()
    for plane in data.planes:
      for line in plane.lines:
        if line.name == "python":
          continue
        for ev in line.events:
          if ev.name in names or "ThreadPool::Await" in ev.name:
            ns[ev.name] += ev.duration_ns
            count[ev.name] += 1
  return ns, count, wall


def profile_call(call, compiled) -> dict:
  """Profile one ``call()`` (which must block until done) of ``compiled``: per kind and per
  matmul shape, milliseconds summed over the kernels' events and their count; ``wall_s``."""
  hlo = compiled.as_text()
  ns, count, wall = kernel_times(call, hlo)
  dots = _hlo_dots(hlo)
  kinds, shapes = collections.Counter(), collections.Counter()
  kind_n, shape_n = collections.Counter(), collections.Counter()
  for name, t in ns.items():
    k = kind(name)
    kinds[k] += t
    kind_n[k] += count[name]
    if k == "matmul" and name in dots:
      shapes[dots[name]] += t
      shape_n[dots[name]] += count[name]
  ms = lambda t: round(t / 1e6, 1)  # noqa: E731
  return {
    "wall_s_with_profiler": round(wall, 3),
    "kernel_ms_by_kind": {k: ms(t) for k, t in kinds.most_common()},
    "kernel_events_by_kind": dict(kind_n),
    "matmul_by_shape": {
      s: {"ms": ms(t), "calls": shape_n[s], "us_per_call": round(t / shape_n[s] / 1e3, 1)}
      for s, t in shapes.most_common()
    },
  }
