"""The outcome-parity block ``lipizzaner_ring_outcome`` of ``docs/parity.md``, from committed
JSON only: the reference's own clients and the library on the ring
(``lipizzaner_ring_outcome.py``), per pair of arms and primary metric the means, the
difference with its 95% (Welch) interval, the two one-sided tests at the protocol's margin,
the two-sided Mann-Whitney p, and the verdict: "equivalent at margin m", "different" or
"inconclusive at n"; an arm with fewer finished seeds than registered says "incomplete".

    python -m experiments.parity.lipizzaner_ring_outcome report   # or experiments._report
"""

from __future__ import annotations

import json
from pathlib import Path

from experiments import _report, stats

REPO = Path(_report.REPO)
PROTOCOL = REPO / "experiments/parity/protocols/lipizzaner_ring_outcome.v2.json"
RESULTS = REPO / "experiments/parity/results/lipizzaner_ring_outcome"
# v3: the library's arms with the reference's initialisation (initializer "torch")
PROTOCOL_V3 = REPO / "experiments/parity/protocols/lipizzaner_ring_outcome.v3.json"
RESULTS_V3 = REPO / "experiments/parity/results/lipizzaner_ring_outcome_v3"
# v4: also the mixture ES on the neighbours' trained generators (mixture_generators "trained")
PROTOCOL_V4 = REPO / "experiments/parity/protocols/lipizzaner_ring_outcome.v4.json"
RESULTS_V4 = REPO / "experiments/parity/results/lipizzaner_ring_outcome_v4"
DOC = "docs/parity.md"
BLOCK = "lipizzaner_ring_outcome"
BLOCK_V3 = "lipizzaner_ring_outcome_v3"
BLOCK_V4 = "lipizzaner_ring_outcome_v4"


def load_runs(protocol: dict, results: Path = RESULTS) -> dict[str, list[dict]]:
  """Each arm's finished runs, by seed: the arm's own JSON files, or, for an arm the protocol
  reuses (``"reuse"``: a results file, or a folder of per-run files, and the arm in it),
  those runs."""
  out = {}
  for arm, spec in protocol["arms"].items():
    seeds = spec.get("seeds", protocol["seeds"])
    if "reuse" in spec:
      where, name = REPO / spec["reuse"]["results"], spec["reuse"]["arm"]
      if where.is_dir():
        runs = [json.loads(p.read_text()) for p in sorted(where.glob(f"{name}_s*.json"))]
      else:
        runs = [r for r in json.loads(where.read_text())["runs"] if r["arm"] == name]
    else:
      runs = [json.loads(p.read_text()) for p in sorted(Path(results).glob(f"{arm}_s*.json"))]
    out[arm] = sorted((r for r in runs if r["seed"] in seeds), key=lambda r: r["seed"])
  return out


def verdict(t: dict | None, mw_p: float, alpha: float, n: tuple[int, int]) -> str:
  """The registered rule: equivalent when the TOST p is below ``alpha``; else different when
  the 95% interval of the difference excludes 0; else inconclusive."""
  if t is None:
    return f"inconclusive at n = {n[0]}/{n[1]} (both arms constant)"
  if t["p"] < alpha:
    return f"equivalent at margin {t['margin']:g}"
  lo, hi = t["ci95"]
  if lo > 0 or hi < 0:
    return "different"
  return f"inconclusive at n = {n[0]}/{n[1]}"


def compare(a: list[float], b: list[float], margin: float, alpha: float) -> dict:
  """TOST (``stats.tost``), Welch 95% interval, two-sided Mann-Whitney, verdict."""
  try:
    t = stats.tost(a, b, margin, alpha)
  except ValueError:  # both arms constant
    t = None
  mw = stats.mann_whitney(a, b, "two-sided")
  diff = sum(a) / len(a) - sum(b) / len(b)
  return {
    "mean_a": sum(a) / len(a),
    "mean_b": sum(b) / len(b),
    "diff": diff,
    "ci95": None if t is None else t["ci95"],
    "tost_p": None if t is None else t["p"],
    "mw_p": mw,
    "verdict": verdict(t, mw, alpha, (len(a), len(b))),
  }


def outcomes(protocol: dict, runs: dict) -> list[dict]:
  """One row per (pair, metric): the comparison, or the arms' counts when incomplete."""
  rows = []
  pr = protocol["primary"]
  for a, b in pr["comparisons"]:
    want = {x: len(protocol["arms"][x].get("seeds", protocol["seeds"])) for x in (a, b)}
    for metric, margin in pr["margins"].items():
      va = [float(r[metric]) for r in runs[a]]
      vb = [float(r[metric]) for r in runs[b]]
      row = {"a": a, "b": b, "metric": metric, "margin": margin, "n": (len(va), len(vb))}
      done = len(va) == want[a] and len(vb) == want[b]
      if not done:
        row["incomplete"] = {
          x: f"incomplete: {len(runs[x])} of {want[x]}" for x in (a, b) if len(runs[x]) < want[x]
        }
      if len(va) >= 2 and len(vb) >= 2:
        row.update(compare(va, vb, margin, pr["alpha"]))
        if not done:
          row["verdict"] = f"none yet ({row['verdict']} so far)"
      rows.append(row)
  return rows


def _f(x, digits):
  return "–" if x is None else f"{x:.{digits}f}"


def _ring_digits(metric: str) -> int:
  return 2 if "high_quality" in metric else 1


def table_lines(protocol: dict, runs: dict, digits=_ring_digits) -> list[str]:
  """The outcome table: one row per comparison and metric (``digits(metric)`` decimals)."""
  label = {k: v["label"] for k, v in protocol["arms"].items()}
  lines = [
    "| metric | arm A | arm B | n | mean A | mean B | A - B (95% CI) | margin | TOST p "
    "| Mann-Whitney p | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in outcomes(protocol, runs):
    d = digits(r["metric"])
    name = protocol["primary"]["metric_labels"][r["metric"]]
    n = f"{r['n'][0]}/{r['n'][1]}"
    arms = f"{label[r['a']]} | {label[r['b']]}"
    if "verdict" not in r:
      inc = "; ".join(f"{label[k]}: {v}" for k, v in r["incomplete"].items())
      lines.append(f"| {name} | {arms} | {n} | | | | {r['margin']:g} | | | {inc} |")
      continue
    ci = "" if r["ci95"] is None else f" [{_f(r['ci95'][0], d)}, {_f(r['ci95'][1], d)}]"
    tp = "–" if r["tost_p"] is None else stats.fmt_p(r["tost_p"])
    lines.append(
      f"| {name} | {arms} | {n} | {_f(r['mean_a'], d)} | {_f(r['mean_b'], d)} | "
      f"{_f(r['diff'], d)}{ci} | {r['margin']:g} | {tp} | {stats.fmt_p(r['mw_p'])} | "
      f"{r['verdict']} |"
    )
  return lines


def seed_lines(protocol: dict, runs: dict) -> list[str]:
  lines = [
    "| arm | seeds done | modes per seed | HQ per seed | CPU-s per run (median) |",
    "|---|---|---|---|---|",
  ]
  for arm, spec in protocol["arms"].items():
    rs = runs[arm]
    want = len(spec.get("seeds", protocol["seeds"]))
    cpu = sorted(r["cpu_seconds"] for r in rs if r.get("cpu_seconds") is not None)
    med = f"{cpu[len(cpu) // 2]:.0f}" if cpu else "–"
    modes = ", ".join(str(r["mixture/modes_covered"]) for r in rs) or "–"
    hq = ", ".join(f"{r['mixture/high_quality_rate']:.2f}" for r in rs) or "–"
    lines.append(f"| {spec['label']} | {len(rs)} of {want} | {modes} | {hq} | {med} |")
  return lines


def verdict_lines(protocol: dict, runs: dict) -> list[str]:
  """``**Incomplete:**`` (arms short of their registered seeds) and ``**Verdicts**`` bullets."""
  label = {k: v["label"] for k, v in protocol["arms"].items()}
  short = [
    f"{spec['label']} ({len(runs[a])} of {len(spec.get('seeds', protocol['seeds']))})"
    for a, spec in protocol["arms"].items()
    if len(runs[a]) < len(spec.get("seeds", protocol["seeds"]))
  ]
  out = [f"**Incomplete:** {', '.join(short)} registered seeds finished.", ""] if short else []
  out.append("**Verdicts** (the protocol's rule, at the endpoint):")
  for r in outcomes(protocol, runs):
    name = protocol["primary"]["metric_labels"][r["metric"]]
    what = r.get("verdict", "none yet (fewer than 2 runs in an arm)")
    out.append(f"- {name}, {label[r['a']]} vs {label[r['b']]}: {what}.")
  return out


def relative(path) -> str:
  """``path`` from the repository root (as the blocks print it), else as given."""
  path = Path(path).resolve()
  return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def head_line(protocol: dict, rel: str, results: Path) -> str:
  """The block's first line: the protocol, its test, alpha and rule, the results folder."""
  pr = protocol["primary"]
  return (
    f"Protocol `{rel}`: {pr['test']}; alpha {pr['alpha']:g}; verdicts by its rule "
    f"({pr['verdict_rule']}). Results: `{relative(results)}/`."
  )


def block(protocol_path: Path = PROTOCOL, results: Path = RESULTS) -> str:
  """The block's text."""
  rel = relative(protocol_path)
  if not Path(protocol_path).exists():
    return f"No protocol yet (`{rel}`)."
  protocol = json.loads(Path(protocol_path).read_text())
  runs = load_runs(protocol, results)
  head = head_line(protocol, rel, results)
  picked = protocol["reference"]["final_mixture"]
  pick = f"The reference's final mixture (the protocol's words): {picked}."
  body = [head, "", pick, "", *table_lines(protocol, runs), "", *verdict_lines(protocol, runs)]
  return "\n".join([*body, "", *seed_lines(protocol, runs)])


def block_v3() -> str:
  """The v3 block's text (the protocol's reused reference runs and its new library runs)."""
  return block(PROTOCOL_V3, RESULTS_V3)


def block_v4() -> str:
  """The v4 block's text (v2's reused reference runs and v4's library runs)."""
  return block(PROTOCOL_V4, RESULTS_V4)


_report.register(BLOCK, DOC, f"{__name__}:block")
_report.register(BLOCK_V3, DOC, f"{__name__}:block_v3")
_report.register(BLOCK_V4, DOC, f"{__name__}:block_v4")
