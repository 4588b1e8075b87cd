"""The bfloat16 quality-parity study of ``CoevolutionConfig.matmuls`` (issue 38): its table.

Protocols: ``protocols/bf16_parity.v1.json`` and ``.v2.json`` (each registered before its
runs; version 2 runs new seeds and is analysed alone). The runs are
``experiments.coevolution.lipizzaner_grids`` with a protocol (its ``settings.command``),
which writes ``results/2026-12-04_bf16_parity[_v2]/lipizzaner_grids.json`` (every run's
curves, CPU seconds and classifier) and its figure. :func:`table_v1` and :func:`table_v2`
(no arguments) generate the blocks ``bf16_parity`` and ``bf16_parity_v2`` of
``docs/benchmarks.md`` from the committed JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

from experiments import _report

HERE = Path(__file__).resolve().parent
PROTOCOLS = {1: HERE / "protocols/bf16_parity.v1.json", 2: HERE / "protocols/bf16_parity.v2.json"}
RESULTS = {
  1: HERE / "results/2026-12-04_bf16_parity/lipizzaner_grids.json",
  2: HERE / "results/2026-12-04_bf16_parity_v2/lipizzaner_grids.json",
}
README = "docs/benchmarks.md"
METRICS = (("class_tvd", "class TVD", 3), ("fid", "FID", 1), ("inception_score", "IS", 2))
MARGIN = 0.05  # the protocol's parity margin on the class TVD


def _at(run: dict, metric: str, generation: int) -> float | None:
  for point in run["curves"]:
    if point["generation"] == generation:
      return point[metric]
  return None


def _groups(by_arm: dict, metric: str, generation: int) -> dict:
  return {
    a: [v for v in (_at(r, metric, generation) for r in rs) if v is not None]
    for a, rs in by_arm.items()
  }


def _rows(protocol: dict, by_arm: dict, endpoint: int) -> list[str]:
  from experiments import stats

  head = "| arm | seeds | " + " | ".join(f"{n}, generation {endpoint}" for _, n, _ in METRICS)
  lines = [head + " | CPU s per run |", "|---" * (len(METRICS) + 3) + "|"]
  for arm, runs in by_arm.items():
    cells = [
      stats.fmt_values(_groups({arm: runs}, m, endpoint)[arm], d) if runs else "-"
      for m, _, d in METRICS
    ]
    cpu = [r["cpu_s_last_segment"] for r in runs if r.get("cpu_s_last_segment")]
    seeds = ", ".join(str(r["seed"]) for r in runs)
    label = protocol["arms"][arm]["label"]
    lines.append(
      f"| {label} | {seeds} | {' | '.join(cells)} | {stats.fmt_values(cpu, 0) if cpu else '-'} |"
    )
  return lines


def _parity(groups: dict, a: str, b: str, alpha: float) -> str:
  from experiments import stats

  if len(groups[a]) < 2 or len(groups[b]) < 2:
    return "- Parity: not tested (an arm has fewer than two runs)."
  r = stats.compare(groups[a], groups[b], test="mann_whitney")
  lo, hi = r["ci"]
  shown = r["p"] >= alpha and -MARGIN <= lo and hi <= MARGIN
  what = "shown" if shown else "not shown"
  return (
    f"- Parity (pre-registered: no difference detected and the 95% CI of the difference within"
    f" +-{MARGIN:g} class TVD): **{what}** (difference {r['effect']:+.3f}, 95% CI"
    f" [{lo:+.3f}, {hi:+.3f}], p = {stats.fmt_p(r['p'])}, n = {r['n_a']}/{r['n_b']})."
  )


def table(version: int) -> str:
  """A version's block: every seed's endpoint metrics per arm, the registered verdict, the
  parity rule, the secondary metrics' verdicts and the classifier."""
  protocol = _report.load_protocol(PROTOCOLS[version])
  if not RESULTS[version].exists():
    return "No run of this protocol is committed yet.\n"
  runs = json.loads(RESULTS[version].read_text())["runs"]
  scorer = _report.one_scorer(runs, lambda r: f"{r['grid']} s{r['seed']}")
  endpoint, primary = protocol["endpoint_generation"], protocol["primary"]
  by_arm = {a: [r for r in runs if r["grid"] == a] for a in protocol["arms"]}
  labels = {a: v["label"] for a, v in protocol["arms"].items()}
  lines = _report.incomplete_note(by_arm, labels, len(protocol["seeds"]))
  lines += _rows(protocol, by_arm, endpoint) + [""]
  groups = _groups(by_arm, "class_tvd", endpoint)
  lines += _report.family(
    groups, primary["comparisons"], labels, test=primary["test"], alpha=primary["alpha"],
    lower_is_better=True, metric=f"class TVD at generation {endpoint}", digits=3,
  )  # fmt: skip
  a, b = primary["comparisons"][0]
  lines.append(_parity(groups, a, b, primary["alpha"]))
  early = min(2, endpoint)  # the registered earlier generation of the secondary metrics
  for gen, (metric, name, digits) in [(g, m) for g in (endpoint, early) for m in METRICS[1:]]:
    lines += [
      line.replace("- ", f"- Secondary, no verdict ({name}, generation {gen}): ", 1)
      for line in _report.family(
        _groups(by_arm, metric, gen),
        primary["comparisons"],
        labels,
        test=primary["test"],
        alpha=primary["alpha"],
        lower_is_better=metric == "fid",
        metric=f"{name} at generation {gen}",
        digits=digits,
      )  # fmt: skip
    ]
  lines += _report.scorer_lines(scorer)
  found = ["the verdict and the parity line above", f"above (FID and IS, generation {endpoint})"]
  found += [f"above (FID and IS, generation {early})", "above (the table: CPU s per run)"]
  record = json.loads(RESULTS[version].read_text()).get("registration")
  rel = PROTOCOLS[version].relative_to(HERE.parent.parent).as_posix()
  return "\n".join(lines + _report.endpoint_lines(rel, found, record)) + "\n"


def table_v1() -> str:
  """Version 1's block (seeds 0-3)."""
  return table(1)


def table_v2() -> str:
  """Version 2's block (seeds 4-11, analysed alone)."""
  return table(2)


_report.register("bf16_parity", README, "experiments.benchmarks.bf16_parity:table_v1")
_report.register("bf16_parity_v2", README, "experiments.benchmarks.bf16_parity:table_v2")
