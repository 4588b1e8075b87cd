"""A cluster model of one coevolution generation from ``grid_scaling.py``'s measured parts,
and the tables of ``docs/benchmarks.md`` generated from the committed JSON lines.

Model (per generation, hosts in a ``Br x Bc`` torus, each holding an ``lr x lc`` block):

  T = c * lr * lc + m * latency + 8 * b * H(lr, lc) / link

* ``c``: CPU seconds per cell and generation, measured (``cpu_s_per_cell_batch_median``
  times the batches of the largest single-process grid measured): a host the speed of one
  process of this host steps its cells one after another, as ``cell_strategy="map"`` does;
* ``b``: bytes a halo cell carries, measured: the halo messages a rank's step sends (traced,
  ``exchange.bytes_per_unit``) over the halo cells of its block: every leaf of the cell's
  state (parameters, optimizer moments, learning rates, fitness);
* ``H``: halo cells of a block. The library extends a block by whole rows first, then by
  columns of the row-extended block, so it sends the corners for either neighbourhood:
  ``2 lc [Br > 1] + 2 (lr + 2 [Br > 1]) [Bc > 1]``, the Moore halo. A von Neumann exchange
  needs no corners: ``2 lc [Br > 1] + 2 lr [Bc > 1]``;
* ``m``: messages per host and generation (measured on the 2x2-block ranks: one per dtype,
  side and split axis), each paying the link's ``latency``; ``link`` in bit/s.

The exchange term is checked against the loopback measurements first: the halo bytes the
formula predicts against the bytes traced on 2 and 4 ranks, and the seconds, with a bandwidth
and latency fitted to the 2-rank cases, against the 4-rank ones. The exchange is not
overlapped with compute (``sendrecv`` inside the step), so it adds.

  python -m experiments.benchmarks.cluster_model       # print the tables
  python -m experiments._report                         # rewrite every generated block
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from experiments import _report

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "2026-12-04_grid_scaling.jsonl"
# The same script rerun on a few cases once the other jobs' load had dropped (its own file).
QUIET = HERE / "results" / "2026-12-04_grid_scaling_quiet.jsonl"
README = "docs/benchmarks.md"
LINKS_GBPS = (1, 10, 100)
LATENCY_S = 50e-6  # per message on a switched Ethernet link (stated, not measured here)
HOSTS = (1, 4, 16, 64)  # square tori of hosts: 1x1, 2x2, 4x4, 8x8
WEAK_BLOCK = 4  # weak scaling: a 4x4 block of cells per host (1,024 cells on 64 hosts)
STRONG_SIDE = 32  # strong scaling: a 32x32 grid (1,024 cells) over the hosts
# Lipizzaner's published client communication per generation on gigabit Ethernet (as cited
# by issue 38 from the Lipizzaner paper), set beside the model's exchange at 1 Gb/s.
LIPIZZANER_COMM_S = 0.5


def load(path: Path = RESULTS) -> list[dict]:
  """The finished cases (records without ``error``)."""
  lines = Path(path).read_text().splitlines()
  return [r for r in map(json.loads, filter(str.strip, lines)) if "error" not in r]


def halo_cells(lr: int, lc: int, br: int, bc: int, kind: str = "moore") -> int:
  """Halo cells a host receives per generation (see the module docstring)."""
  rows = 2 * lc if br > 1 else 0
  corners = 2 if (kind == "moore" and br > 1) else 0
  return rows + (2 * (lr + corners) if bc > 1 else 0)


def _block(r: dict) -> tuple[int, int, int, int]:
  rows, cols = (int(v) for v in r["grid"].split("x"))
  br, bc = {"mpi2": (2, 1), "mpi4": (2, 2), "mesh4": (2, 2)}.get(r["placement"], (1, 1))
  return rows // br, cols // bc, br, bc


def measured_parts(records: list[dict]) -> dict:
  """``c`` (CPU s per cell and generation), ``b`` (bytes per halo cell: median over the
  distributed cases) and ``m`` (messages per host of a 2x2-block case)."""
  single = [r for r in records if r["placement"] == "single"]
  largest = max(single, key=lambda r: r["cells"])
  c = largest["cpu_s_per_cell_batch_median"] * largest["batches_per_generation"]
  dist = [r for r in records if "exchange" in r]
  per_cell = [r["exchange"]["bytes_per_unit"] / halo_cells(*_block(r)) for r in dist]
  two_d = [r["exchange"]["messages_per_unit"] for r in dist if _block(r)[3] > 1]
  return {
    "c": c,
    "c_from": largest["case"],
    "batches": largest["batches_per_generation"],
    "b": statistics.median(per_cell) if per_cell else None,
    "b_spread": (min(per_cell), max(per_cell)) if per_cell else None,
    "m": max(two_d) if two_d else None,
  }


def fit_link(records: list[dict], placement: str = "mpi2") -> tuple[float, float] | None:
  """``(seconds per message, bytes per second)`` of loopback, least squares over the
  ``placement`` cases' median exchange seconds against their bytes (one message count)."""
  ex = [r["exchange"] for r in records if r["placement"] == placement and "exchange" in r]
  pts = [(e["messages_per_unit"], e["bytes_per_unit"], e["wall_s_median"]) for e in ex]
  if len(pts) < 2:
    return None
  xs, ys = [b for _, b, _ in pts], [t for _, _, t in pts]
  mx, my = statistics.fmean(xs), statistics.fmean(ys)
  slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
  intercept = my - slope * mx
  return max(intercept, 0.0) / pts[0][0], 1.0 / slope if slope > 0 else float("inf")


def predict(parts: dict, lr: int, lc: int, br: int, bc: int, gbps: float, kind: str) -> dict:
  """Seconds of compute, exchange and the generation of one host (the model)."""
  compute = parts["c"] * lr * lc
  hosts = br * bc
  halo = halo_cells(lr, lc, br, bc, kind) * parts["b"] if hosts > 1 else 0.0
  messages = parts["m"] if hosts > 1 else 0
  exchange = messages * LATENCY_S + 8.0 * halo / (gbps * 1e9)
  return {"compute": compute, "exchange": exchange, "total": compute + exchange}


def _gib(x: float) -> str:
  return f"{x / 2**30:.2f}"


def _mib(x: float) -> str:
  return f"{x / 2**20:.0f}"


def _case_row(r: dict) -> str:
  ex = r.get("exchange")
  share = f"{100 * ex['share_median']:.1f}%" if ex else "-"
  ex_mb = f"{ex['bytes_per_unit'] / 1e6:.0f}" if ex else "-"
  cpu = ", ".join(f"{v:.1f}" for v in r["generation"]["cpu_s"])
  return (
    f"| {r['case']} | {r['cells']} | {1e3 * r['s_per_cell_batch_median']:.1f} "
    f"| {1e3 * r['cpu_s_per_cell_batch_median']:.1f} | {cpu} | {r['compile_s']:.0f} "
    f"({r['compile_cpu_s']:.0f}) | {_gib(r['peak_rss_bytes_all_processes'])} "
    f"| {_mib(r['xla_temp_bytes'])} | {_mib(r['state_bytes'])} | {ex_mb} | {share} "
    f"| {r['load_average_before'][0]:.1f}-{r['load_average_after'][0]:.1f} |"
  )


def _ratio_lines(records: list[dict]) -> list[str]:
  by = {r["case"]: r for r in records}
  small, big = (
    by.get("single:2x2"),
    max((r for r in records if r["placement"] == "single"), key=lambda r: r["cells"], default=None),
  )
  out = []
  if small and big and big is not small:
    cpu = big["cpu_s_per_cell_batch_median"] / small["cpu_s_per_cell_batch_median"]
    wall = big["s_per_cell_batch_median"] / small["s_per_cell_batch_median"]
    comp = big["compile_cpu_s"] / small["compile_cpu_s"]
    rss = big["peak_rss_bytes"] / small["peak_rss_bytes"]
    out.append(
      f"- {big['grid']} against 2x2, one process: CPU seconds per cell-batch {cpu:.2f}x "
      f"(wall {wall:.2f}x, under the load shown), compile CPU seconds {comp:.2f}x "
      f"(wall {big['compile_s'] / small['compile_s']:.2f}x), peak RSS {rss:.2f}x "
      f"(state {big['state_bytes'] / small['state_bytes']:.0f}x, XLA temp "
      f"{big['xla_temp_bytes'] / small['xla_temp_bytes']:.2f}x)."
    )
  for r in (small, big):
    if r is None:
      continue
    mem = r["xla_memory_per_process"][0]
    need = mem["xla_argument_bytes"] + mem["xla_output_bytes"] + mem["xla_temp_bytes"]
    out.append(
      f"- {r['grid']}: peak RSS {r['peak_rss_bytes'] / need:.2f}x the step's arguments (state "
      f"and data), output and XLA temp ({_mib(need)} MiB); "
      f"{r['peak_rss_bytes'] / (need - mem['xla_output_bytes']):.2f}x without the output."
    )
  one = by.get("single:1x1")
  if one and big and big is not one:
    grew = big["peak_rss_bytes"] - one["peak_rss_bytes"]
    need = lambda r: 2 * r["state_bytes"] + r["xla_temp_bytes"]  # noqa: E731
    out.append(
      f"- Peak RSS of {big['grid']} above 1x1's: {_mib(grew)} MiB; two states (the step's input "
      f"and output: `jax.jit(coev.step)` does not donate its input) plus XLA temp grew by "
      f"{_mib(need(big) - need(one))} MiB ({grew / (need(big) - need(one)):.2f}x)."
    )
  donated = big and by.get(f"donated:{big['grid']}")
  if donated:
    out.append(
      f"- {big['grid']} with the step's input state donated (`donate_argnums=1`): peak RSS "
      f"{_gib(donated['peak_rss_bytes'])} GiB against {_gib(big['peak_rss_bytes'])} GiB "
      f"({donated['peak_rss_bytes'] / big['peak_rss_bytes']:.2f}x), CPU seconds per cell-batch "
      f"{donated['cpu_s_per_cell_batch_median'] / big['cpu_s_per_cell_batch_median']:.2f}x."
    )
  for p in ("mpi4", "mpi2", "mesh4"):
    cases = sorted((r for r in records if r["placement"] == p), key=lambda r: r["cells"])
    if cases and "exchange" in cases[-1]:
      shares = ", ".join(f"{100 * v:.1f}%" for v in cases[-1]["exchange"]["share"])
      out.append(f"- {cases[-1]['case']}: exchange share of a generation per repeat {shares}.")
  return out


def results_table(path: Path = RESULTS) -> str:
  """The ``grid_scaling`` block: one row per measured case, then the ratios."""
  records = load(path)
  head = [
    "| case | cells | wall ms / cell-batch | CPU ms / cell-batch | CPU s per generation "
    "(each repeat) | compile s (CPU s) | peak RSS GiB | XLA temp MiB | state MiB "
    "| halo MB / rank | exchange share | load 1-min |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  order = {"single": 0, "donated": 1, "mpi2": 2, "mpi4": 3, "mesh4": 4}
  rows = [_case_row(r) for r in sorted(records, key=lambda r: (order[r["placement"]], r["cells"]))]
  lines = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
  failed = [f"{r['case']} ({r['error'].split(':')[0]}, {r['date']})" for r in lines if "error" in r]
  head_note = "- Tries that failed (kept in the JSON; a rerun has its own row)"
  note = [f"{head_note}: {', '.join(failed)}."] if failed else []
  out = head + rows + [""] + _ratio_lines(records) + note
  quiet = load(QUIET) if path == RESULTS and QUIET.exists() else []
  if quiet:
    out += ["", f"Second run, after the other jobs' load dropped ({QUIET.name}):", "", *head]
    out += [_case_row(r) for r in sorted(quiet, key=lambda r: (order[r["placement"]], r["cells"]))]
    out += ["", *_ratio_lines(quiet)]
  return "\n".join(out) + "\n"


def _validation(records: list[dict], parts: dict, link) -> list[str]:
  """The exchange term against the ranks' loopback measurements: bytes, then seconds."""
  rows = [
    "| case | halo cells / rank | traced MB / rank | model MB | exchange s (median) "
    "| model s | model / measured |",
    "|---|---|---|---|---|---|---|",
  ]
  mpi = (r for r in records if "exchange" in r and r["placement"].startswith("mpi"))
  for r in sorted(mpi, key=lambda r: (r["case"][:4], r["cells"])):
    ex, cells = r["exchange"], halo_cells(*_block(r))
    model_s = ex["messages_per_unit"] * link[0] + ex["bytes_per_unit"] / link[1] if link else None
    tag = " (fitted)" if r["placement"] == "mpi2" else ""
    rows.append(
      f"| {r['case']} | {cells} | {ex['bytes_per_unit'] / 1e6:.1f} "
      f"| {cells * parts['b'] / 1e6:.1f} | {ex['wall_s_median']:.3f} "
      + (f"| {model_s:.3f}{tag} | {model_s / ex['wall_s_median']:.2f} |" if link else "| - | - |")
    )
  return rows


def _scaling_rows(parts: dict, strong: bool) -> list[str]:
  links = " | ".join(f"{g} Gb/s: s (share) VN / Moore" for g in LINKS_GBPS)
  rows = [
    f"| hosts | cells | cells / host | compute s | {links} |",
    "|---" * (4 + len(LINKS_GBPS)) + "|",
  ]
  for hosts in HOSTS:
    side = int(round(hosts**0.5))
    block = STRONG_SIDE // side if strong else WEAK_BLOCK
    cells = (block * side) ** 2
    cols = []
    for g in LINKS_GBPS:
      vn, mo = (predict(parts, block, block, side, side, g, k) for k in ("von_neumann", "moore"))
      cols.append(
        f"{vn['total']:.2f} ({100 * vn['exchange'] / vn['total']:.1f}%) / "
        f"{mo['total']:.2f} ({100 * mo['exchange'] / mo['total']:.1f}%)"
      )
    compute = parts["c"] * block * block
    rows.append(
      f"| {hosts} | {cells} | {block * block} | {compute:.2f} | " + " | ".join(cols) + " |"
    )
  return rows


def _breaks(parts: dict) -> list[str]:
  cells = (STRONG_SIDE) ** 2
  gather = (cells - WEAK_BLOCK**2) * parts["state_b"] if parts.get("state_b") else None
  one = predict(parts, 1, 1, 2, 2, 1, "moore")["exchange"]
  out = [
    f"- One cell per host (Lipizzaner's layout), 1 Gb/s: the model's exchange is {one:.2f} s per "
    f"generation, beside Lipizzaner's published {LIPIZZANER_COMM_S} s of client communication; "
    "a halo cell here carries the whole state (Adam moments too), "
    f"{parts['b'] / 1e6:.1f} MB.",
  ]
  if gather:
    out.append(
      f"- Checkpoints and pictures gather the whole grid on every rank (`gather_blocks`: "
      f"`Allgather`): at {cells} cells a host receives {gather / 1e9:.1f} GB per checkpoint, "
      f"{8 * gather / 1e9:.0f} s at 1 Gb/s, growing with the grid, not the block: weak scaling "
      "ends there unless checkpoints are written per rank."
    )
  out += [
    f"- `c` is a generation of {parts['batches']} batches; a full MNIST epoch per generation "
    "(600 batches) multiplies the training part of `c` while the halo stays the same, so the "
    "exchange shares above are upper bounds for full-epoch generations.",
    "- The mixture evaluation (FID of each cell's mixture, two per cell and generation in the "
    "MNIST experiment) is not in `c`: the benchmark scores mixtures with a trivial function.",
    "- Stragglers: a generation waits for the slowest host (every `sendrecv` blocks); `c` is "
    "this host's process CPU time, a host of the same speed with no other load.",
    "- Reductions (`allreduce` of grid metrics) pay the latency about log2(hosts) times each; "
    "the model leaves them out, as it leaves out overlap of exchange and compute.",
  ]
  return out


def model_table(path: Path = RESULTS) -> str:
  """The ``cluster_model`` block: the measured parts, the validation, weak and strong scaling."""
  records = load(path)
  parts = measured_parts(records)
  if parts["b"] is None:
    return "No distributed case measured yet: no model.\n"
  big = max((r for r in records if r["placement"] == "single"), key=lambda r: r["cells"])
  parts["state_b"] = big["state_bytes"] / big["cells"]
  link = fit_link(records)
  lo, hi = parts["b_spread"]
  lines = [
    f"Measured parts: c = {parts['c']:.3f} CPU s per cell and generation ({parts['batches']} "
    f"batches, from {parts['c_from']}); b = {parts['b'] / 1e6:.2f} MB per halo cell (traced "
    f"messages over the Moore halo, {lo / 1e6:.2f}-{hi / 1e6:.2f} over every case); m = "
    f"{parts['m']} messages per host; latency {LATENCY_S * 1e6:.0f} us per message (stated).",
    "",
  ]
  if link:
    lines.append(
      f"Loopback fitted on the 2-rank cases: {link[0] * 1e3:.2f} ms per message, "
      f"{link[1] / 1e9:.2f} GB/s; the 4-rank rows are predictions. The traced bytes follow the "
      "halo formula exactly. The seconds on 2 ranks hardly follow the bytes (on this loaded host "
      "a `sendrecv` mostly waits for its peer rank to be scheduled: the fitted per-message cost "
      "is that wait, not a wire's latency), so the 2-rank fit misses the 4-rank seconds, which "
      "do grow with the bytes. Below, the stated link and latency replace loopback."
    )
  four = fit_link(records, "mpi4")
  if four:
    lines.append(
      f"Fitted on the 4-rank cases instead: {four[0] * 1e3:.2f} ms per message, "
      f"{four[1] / 1e9:.2f} GB/s."
    )
  lines += [
    "",
    *_validation(records, parts, link),
    "",
    f"Weak scaling (a {WEAK_BLOCK}x{WEAK_BLOCK} block per host):",
    "",
    *_scaling_rows(parts, False),
    "",
    f"Strong scaling ({STRONG_SIDE}x{STRONG_SIDE} grid):",
    "",
    *_scaling_rows(parts, True),
    "",
    "Where the model breaks:",
    "",
    *_breaks(parts),
  ]
  return "\n".join(lines) + "\n"


# Issue 38's later runs: the library's donation option side by side, and one 12x12 epoch.
DONATE = HERE / "results" / "2026-12-04_grid_scaling_donate_option.jsonl"
EPOCH = HERE / "results" / "2026-12-04_grid_scaling_12x12_epoch.jsonl"
MEMORY_GIB = 24  # this host kind's memory (issue 38's target for a 12x12 epoch)


def options_table() -> str:
  """The ``grid_scaling_options`` block: ``make_backend(..., donate=True)`` against the
  default at one grid, and one 12x12 generation of a full epoch (600 batches per cell)."""
  head = results_table(RESULTS).splitlines()[:2]
  out = []
  donate = {r["placement"]: r for r in load(DONATE)} if DONATE.exists() else {}
  if {"single", "donated"} <= set(donate):
    a, b = donate["donated"], donate["single"]
    out += [f"The library's donation option ({DONATE.name}):", "", *head]
    out += [_case_row(b), _case_row(a), ""]
    out.append(
      f"- `make_backend(..., donate=True)` at {a['grid']}: peak RSS {_gib(a['peak_rss_bytes'])}"
      f" GiB against {_gib(b['peak_rss_bytes'])} GiB "
      f"({a['peak_rss_bytes'] / b['peak_rss_bytes']:.2f}x; the state is {_mib(a['state_bytes'])}"
      f" MiB), CPU seconds per generation {a['generation']['cpu_s_median']:.1f} against "
      f"{b['generation']['cpu_s_median']:.1f}."
    )
  epoch = load(EPOCH) if EPOCH.exists() else []
  if epoch:
    r = epoch[-1]
    out += ["", f"One 12x12 generation of a full epoch ({EPOCH.name}):", "", *head, _case_row(r)]
    out.append("")
    out.append(
      f"- {r['grid']}, {r['batches_per_generation']} batches per cell: "
      f"{r['generation']['cpu_s_median']:.0f} CPU s and {r['generation']['wall_s_median']:.0f} s"
      f" of wall time for the generation (load {r['load_average_before'][0]:.1f}-"
      f"{r['load_average_after'][0]:.1f} on 2 cores), compile {r['compile_s']:.0f} s; peak RSS "
      f"{_gib(r['peak_rss_bytes'])} GiB of this host's {MEMORY_GIB} GiB."
    )
  return "\n".join(out or ["No run of these cases is committed yet."]) + "\n"


_report.register("grid_scaling", README, "experiments.benchmarks.cluster_model:results_table")
_report.register(
  "grid_scaling_options", README, "experiments.benchmarks.cluster_model:options_table"
)
_report.register("cluster_model", README, "experiments.benchmarks.cluster_model:model_table")


if __name__ == "__main__":
  print(results_table())
  print(model_table())
